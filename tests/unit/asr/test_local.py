from __future__ import annotations

import io
import re
import wave

import numpy as np
import pytest

from tests.fixtures.media import make_silence_wav, make_speech_wav, pcm_to_wav, require_espeak
from worldmm.asr import AudioDecodeError, Transcript, build_transcriber
from worldmm.asr import weights as asr_weights
from worldmm.asr.audio import decode_audio
from worldmm.asr.local import LocalWhisperTranscriber
from worldmm.asr.weights import WeightsError, whisper_weights
from worldmm.settings import load_settings

SENTENCE = "Please remember to buy milk and eggs at the supermarket tomorrow morning."


@pytest.fixture(scope="session")
def local_transcriber():
    from worldmm.asr.local import LocalWhisperTranscriber

    return LocalWhisperTranscriber()


@pytest.fixture(scope="session")
def speech_wav() -> bytes:
    require_espeak()
    return make_speech_wav(SENTENCE)


def word_error_rate(reference: str, hypothesis: str) -> float:
    ref = re.findall(r"[a-z']+", reference.lower())
    hyp = re.findall(r"[a-z']+", hypothesis.lower())
    d = np.zeros((len(ref) + 1, len(hyp) + 1), dtype=int)
    d[:, 0] = range(len(ref) + 1)
    d[0, :] = range(len(hyp) + 1)
    for i in range(1, len(ref) + 1):
        for j in range(1, len(hyp) + 1):
            cost = 0 if ref[i - 1] == hyp[j - 1] else 1
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + cost)
    return d[-1, -1] / len(ref)


def test_word_error_rate_helper():
    assert word_error_rate("a b c d", "a x c") == 0.5


def test_transcribes_a_known_sentence(local_transcriber, speech_wav):
    transcript = local_transcriber.transcribe(speech_wav)
    wer = word_error_rate(SENTENCE, transcript.text)
    assert wer < 0.3, (wer, transcript.text)
    assert transcript.segments and transcript.segments[0].start_s >= 0
    assert transcript.segments[-1].end_s <= transcript.duration_s + 0.5
    assert 3 < transcript.duration_s < 10


def test_raw_pcm_at_another_rate(local_transcriber):
    require_espeak()
    # (Whisper base hears espeak's "The meeting starts at nine" as "The meetings start at 9":
    # a sentence it hears whole shows the rate is read right.)
    line = "Meet me at the market at noon."
    wav = make_speech_wav(line, sample_rate=22050)
    with wave.open(io.BytesIO(wav)) as w:
        pcm = w.readframes(w.getnframes())
    by_type = local_transcriber.transcribe(pcm, content_type="audio/pcm;rate=22050")
    by_arg = local_transcriber.transcribe(pcm, content_type="audio/pcm", sample_rate=22050)
    assert by_type.text == by_arg.text
    assert word_error_rate(line, by_type.text) < 0.3


def test_silence_is_an_empty_transcript(local_transcriber):
    result = local_transcriber.transcribe(make_silence_wav(3.0))
    assert result == Transcript(text="", segments=[], duration_s=3.0)


def test_low_noise_is_an_empty_transcript(local_transcriber):
    noise = (np.random.default_rng(0).standard_normal(32000) * 20).astype(np.int16)
    assert local_transcriber.transcribe(pcm_to_wav(noise, 16000)).text == ""


@pytest.mark.parametrize(
    ("data", "content_type", "match"),
    [
        (b"RIFF\x00\x00garbage", "audio/wav", "WAV"),
        (b"", "audio/wav", "empty"),
        (b"\x01\x02\x03", "audio/pcm;rate=16000", "whole number"),
        (b"\x00\x00" * 10, "audio/pcm", "sample rate"),
        (b"definitely not audio at all", "audio/ogg", "cannot decode"),
        (b"x", "text/plain", "unsupported"),
    ],
)
def test_undecodable_chunks_raise_a_clear_error(local_transcriber, data, content_type, match):
    with pytest.raises(AudioDecodeError, match=match):
        local_transcriber.transcribe(data, content_type=content_type)


def test_decode_stereo_8k_wav_to_16k_mono():
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(np.full(8000 * 2, 1000, dtype="<i2").tobytes())
    samples = decode_audio(buf.getvalue())
    assert samples.dtype == np.float32 and samples.shape == (16000,)
    assert np.allclose(samples, 1000 / 32768, atol=1e-4)


def test_build_transcriber_local_and_none():
    local = build_transcriber(load_settings(asr_backend="local"))
    assert isinstance(local, LocalWhisperTranscriber)
    assert local.name == "local:whisper-base"  # the default, chosen by `worldmm bench asr`
    none = build_transcriber(load_settings(asr_backend="none"))
    assert none.transcribe(make_silence_wav(1.0)).text == ""


def test_tiny_en_stays_selectable(speech_wav):
    tiny = build_transcriber(load_settings(asr_backend="local", asr_local_model="tiny.en"))
    assert tiny.name == "local:whisper-tiny.en"
    assert word_error_rate(SENTENCE, tiny.transcribe(speech_wav).text) < 0.3


def test_base_weights_are_joined_from_two_wheels_and_checked(monkeypatch):
    weights = whisper_weights("base")
    assert weights.files is not None
    assert sorted(weights.files) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    assert len(weights.files["model.bin"]) == 145_217_532
    monkeypatch.setattr(asr_weights, "BASE_MODEL_SHA256", "0" * 64)
    with pytest.raises(WeightsError, match="not the verified 0000"):
        whisper_weights("base")
    with pytest.raises(WeightsError, match="unknown local Whisper model"):
        whisper_weights("large")  # type: ignore[arg-type]


def test_a_call_s_prompt_goes_to_whisper_before_the_transcribers_own(
    local_transcriber, speech_wav, monkeypatch
):
    """The wearer's names (a call's prompt) condition Whisper; without one, the
    transcriber's own prompt does, if it has one."""
    seen: list[str | None] = []
    real = local_transcriber._model.transcribe

    def spy(samples, **kw):
        seen.append(kw.get("initial_prompt"))
        return real(samples, **kw)

    monkeypatch.setattr(local_transcriber._model, "transcribe", spy)
    said = local_transcriber.transcribe(speech_wav, prompt="Tasha, Katrina.")
    assert "milk" in said.text.lower()
    local_transcriber.transcribe(speech_wav)
    assert seen == ["Tasha, Katrina.", None]
