"""The Whisper API client against the fake OpenAI-compatible server."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from fakes.openai_server import Reply
from tests.fixtures.media import make_silence_wav, pcm_to_wav
from worldmm.asr import AudioDecodeError, build_transcriber
from worldmm.asr.audio import decode_audio
from worldmm.providers.errors import ModelCallError
from worldmm.settings import load_settings


def tone_wav(seconds: float = 1.0, rate: int = 8000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return pcm_to_wav((np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16), rate)


def api_transcriber(fake, **extra):
    values = {"llm_max_retries": 0, **extra}
    settings = load_settings(
        asr_backend="openai",
        asr_base_url=fake.base_url,
        asr_model="whisper-large-v3",
        openai_api_key="test-key",
        **values,
    )
    return build_transcriber(settings)


def test_segments_and_text_come_back(fake_openai):
    fake_openai.transcriptions.push(
        Reply(
            body={
                "text": " hello there ",
                "language": "english",
                "duration": 1.0,
                "segments": [{"id": 0, "start": 0.0, "end": 0.9, "text": " hello there"}],
            }
        )
    )
    transcriber = api_transcriber(fake_openai)
    result = transcriber.transcribe(tone_wav())
    assert result.text == "hello there"
    assert [(s.start_s, s.end_s, s.text) for s in result.segments] == [(0.0, 0.9, "hello there")]
    (request,) = [r.body for r in fake_openai.requests if r.path == "/v1/audio/transcriptions"]
    assert request["fields"]["model"] == "whisper-large-v3"
    assert request["fields"]["response_format"] == "verbose_json"
    uploaded = decode_audio(request["audio"])  # re-encoded as 16 kHz WAV
    assert uploaded.shape == (16000,)


def test_silence_makes_no_call(fake_openai):
    assert api_transcriber(fake_openai).transcribe(make_silence_wav()).text == ""
    assert fake_openai.requests == []


def test_bad_audio_fails_before_the_call(fake_openai):
    with pytest.raises(AudioDecodeError):
        api_transcriber(fake_openai).transcribe(b"RIFFjunk", content_type="audio/wav")
    assert fake_openai.requests == []


def test_api_error_is_a_model_call_error(fake_openai):
    fake_openai.transcriptions.push(Reply.error(400, "unsupported file"))
    with pytest.raises(ModelCallError, match="unsupported file"):
        api_transcriber(fake_openai).transcribe(tone_wav())


def _retries(reason: str) -> float:
    labels = {"role": "asr", "provider": "whisper-api", "reason": reason}
    return REGISTRY.get_sample_value("worldmm_llm_retries_total", labels) or 0.0


SPOKEN = Reply(body={"text": "hi", "segments": [{"start": 0.0, "end": 0.5, "text": "hi"}]})


def test_a_429_then_200_is_retried_by_our_policy_and_counted(fake_openai):
    before = _retries("rate_limit")
    fake_openai.transcriptions.push(Reply.error(429, "slow down", **{"retry-after": "0"}), SPOKEN)
    result = api_transcriber(fake_openai, llm_max_retries=1).transcribe(tone_wav())
    assert result.text == "hi"
    assert [r.path for r in fake_openai.requests] == ["/v1/audio/transcriptions"] * 2
    assert _retries("rate_limit") == before + 1


def test_the_sdk_does_not_retry_transcriptions_on_its_own(fake_openai):
    fake_openai.transcriptions.push(Reply.error(500, "boom", **{"retry-after": "0"}), SPOKEN)
    transcriber = api_transcriber(fake_openai)  # our policy: no retry
    assert transcriber._client.max_retries == 0
    with pytest.raises(ModelCallError, match="boom"):
        transcriber.transcribe(tone_wav())
    assert len(fake_openai.requests) == 1
