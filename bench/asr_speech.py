"""The spoken test set of `worldmm bench asr`: the sentences the demo and the tests speak, said
by several espeak-ng voices at several speeds, with white noise added at a few signal-to-noise
ratios. Made at run time and deterministic (espeak-ng's output for a voice and speed, noise
from a seed per utterance), so nothing is kept in the repository.

A full grid would be long to transcribe, so each sentence is said under a rotating share of
the conditions (``per_sentence``): every condition is heard about equally often. The demo's
own lines are also said once exactly as the demo says them (en-us, 150 words a minute, clean).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from itertools import product

import numpy as np

from apps.demo.script import spoken_lines
from apps.demo.synthetic import DEFAULT_SCRIPT, SAMPLE_RATE, speak

# What the tests have espeak-ng say (tests/unit/asr, tests/unit/llm, tests/unit/demo,
# tests/e2e/test_live_time_through_gateway.py), beside the demo's script.
TEST_LINES = (
    "Please remember to buy milk and eggs at the supermarket tomorrow morning.",
    "The meeting starts at nine.",
    "Meet me at the market at noon.",
    "Lucia wants to buy strawberries.",
    "The bike is in the garage.",
    "I put my keys in the blue drawer.",
    "I put my keys on the kitchen shelf.",
    "I put my keys in the garden shed.",
    "I put my keys in my coat pocket.",
    "I put my keys in the car glovebox.",
)
VOICES = ("en-us", "en-gb", "en-us+f3")
SPEEDS = (140, 175)  # words a minute (the demo speaks at 150)
SNRS_DB = (math.inf, 15.0, 5.0)  # inf: clean
DEMO_VOICE, DEMO_SPEED = "en-us", 150


@dataclass(frozen=True)
class Utterance:
    text: str
    voice: str
    wpm: int
    snr_db: float
    samples: np.ndarray  # float32 at 16 kHz
    demo: bool = False  # one of the demo's lines, said as the demo says it

    @property
    def seconds(self) -> float:
        return self.samples.size / SAMPLE_RATE

    @property
    def condition(self) -> str:
        noise = "clean" if math.isinf(self.snr_db) else f"{self.snr_db:g} dB"
        return f"{self.voice}/{self.wpm}/{noise}"


def sentences() -> list[str]:
    """Every distinct line: the demo's, the default day's, then the tests'."""
    lines = [*spoken_lines(), *(line for s in DEFAULT_SCRIPT for line in s.speech), *TEST_LINES]
    return list(dict.fromkeys(lines))


def with_noise(samples: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """``samples`` plus white noise at ``snr_db`` below the speech's power (voiced part)."""
    if math.isinf(snr_db):
        return samples
    voiced = samples[np.abs(samples) > 0.01]
    power = float(np.mean((voiced if voiced.size else samples) ** 2))
    noise = np.random.default_rng(seed).standard_normal(samples.size)
    noisy = samples + noise * math.sqrt(power / 10 ** (snr_db / 10))
    return np.clip(noisy, -1.0, 1.0).astype(np.float32)


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def _said(text: str, voice: str, wpm: int, snr_db: float, *, demo: bool = False) -> Utterance:
    clean = speak(text, voice, wpm).astype(np.float32) / 32768.0
    # half a second of silence either side, as speech sits inside a longer chunk
    pad = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    padded = np.concatenate([pad, clean, pad])
    noisy = with_noise(padded, snr_db, _seed(text, voice, wpm, snr_db))
    return Utterance(text, voice, wpm, snr_db, noisy, demo)


def conditions(
    voices: tuple[str, ...] = VOICES,
    speeds: tuple[int, ...] = SPEEDS,
    snrs_db: tuple[float, ...] = SNRS_DB,
) -> list[tuple[str, int, float]]:
    return list(product(voices, speeds, snrs_db))


def spoken_set(
    per_sentence: int = 4,
    voices: tuple[str, ...] = VOICES,
    speeds: tuple[int, ...] = SPEEDS,
    snrs_db: tuple[float, ...] = SNRS_DB,
) -> list[Utterance]:
    """Each sentence under ``per_sentence`` of the conditions, rotating (sentence i takes
    conditions i*k, i*k+1, ... modulo their number), then the demo's lines as the demo says
    them."""
    grid = conditions(voices, speeds, snrs_db)
    k = min(per_sentence, len(grid))
    out = []
    for i, text in enumerate(sentences()):
        for j in range(k):
            voice, wpm, snr = grid[(i * k + j) % len(grid)]
            out.append(_said(text, voice, wpm, snr))
    out += [_said(t, DEMO_VOICE, DEMO_SPEED, math.inf, demo=True) for t in spoken_lines()]
    return out


# --- word error rate -------------------------------------------------------------------------

# fmt: off
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)
_TENS_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
# fmt: on
_NUMBER = {w: i for i, w in enumerate(_NUMBER_WORDS)}
_TENS_VALUE = {w: 20 + 10 * i for i, w in enumerate(_TENS_WORDS)}


def normalise(text: str) -> list[str]:
    """Words as a reader compares them: lower case, no punctuation, numbers as digits
    ("three pm" and "3 p.m." are the same words)."""
    text = re.sub(r"\b([ap])\.\s?m\b\.?", r"\1m", text.lower())
    text = re.sub(r"(\d)([a-z])", r"\1 \2", text)
    words = re.findall(r"[a-z0-9']+", text.replace("-", " "))
    out: list[str] = []
    after_tens = False  # "forty nine" is 49
    for w in words:
        value = _NUMBER.get(w, _TENS_VALUE.get(w))
        if value is None:
            out.append(w)
        elif after_tens and value < 10:
            out[-1] = str(int(out[-1]) + value)
        else:
            out.append(str(value))
        after_tens = w in _TENS_VALUE
    return out


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference words) after :func:`normalise`."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1], len(ref)
