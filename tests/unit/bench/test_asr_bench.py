"""The ASR bench's own arithmetic: how words are compared, how errors are counted, and how
an option's name is read (the figures in docs/benchmarks/asr.md rest on these)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.asr import AsrConfig, Variant
from bench.asr_speech import normalise, with_noise, word_errors


def test_words_compare_as_a_reader_would():
    assert normalise("Alice said: the meeting moved to 3 p.m.!") == normalise(
        "alice said the meeting moved to three pm"
    )
    assert normalise("forty-nine") == ["49"] and normalise("level two") == ["level", "2"]
    assert normalise("I'm at 9am") == ["i'm", "at", "9", "am"]


@pytest.mark.parametrize(
    ("reference", "hypothesis", "errors"),
    [
        ("buy milk and eggs", "buy milk and eggs", 0),
        ("buy milk and eggs", "by milk and bags", 2),  # two substitutions
        ("in the white bowl", "in the bowl", 1),  # a deletion
        ("the red mug", "the red red mug", 1),  # an insertion
        ("", "noise words", 2),
    ],
)
def test_word_errors_are_the_edit_distance_in_words(reference, hypothesis, errors):
    assert word_errors(reference, hypothesis) == (errors, len(reference.split()))


def test_an_option_name_reads_as_its_settings():
    v = Variant.parse("base/beam5/no-vad/prompt")
    assert (v.model, v.beam_size, v.vad, v.prompt) == ("base", 5, False, True)
    assert Variant.parse("tiny.en") == Variant("tiny.en", "tiny.en", 1, True, False)
    with pytest.raises(ValueError, match="unknown variants"):
        AsrConfig(out="x.json", variants=("base/beam", "large"))


def test_noise_is_added_at_the_asked_ratio_and_reproducibly():
    t = np.linspace(0, 1, 16_000, dtype=np.float32)
    speech = 0.3 * np.sin(2 * np.pi * 220 * t)
    noisy = with_noise(speech, 5.0, seed=1)
    snr = 10 * np.log10(np.mean(speech**2) / np.mean((noisy - speech) ** 2))
    assert abs(snr - 5.0) < 0.5
    assert np.array_equal(noisy, with_noise(speech, 5.0, seed=1))
    assert with_noise(speech, float("inf"), seed=1) is speech
