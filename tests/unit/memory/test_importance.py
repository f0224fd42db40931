"""The offline importance estimate (pure): speech, names and novelty raise it."""

from __future__ import annotations

import numpy as np
import pytest

from worldmm.memory.importance import Cues, estimate, named, novelty, summary_importance


def test_a_conversation_with_named_people_outweighs_a_routine_moment() -> None:
    routine = estimate(Cues(speech_words=0, names=0, novelty=0.05))
    talk = estimate(Cues(speech_words=60, names=4, novelty=0.05))
    new_place = estimate(Cues(speech_words=0, names=0, novelty=0.45))
    everything = estimate(Cues(speech_words=150, names=5, novelty=0.6))
    assert routine < new_place < talk < everything == 1.0
    assert 0.0 < routine < 0.2
    assert estimate(Cues(speech_words=5, names=0, novelty=0.0)) < estimate(
        Cues(speech_words=15, names=0, novelty=0.0)
    )  # more speech, more weight, until it saturates


def test_names_are_capitalised_mid_sentence_or_speakers_not_sentence_starts_or_signs() -> None:
    text = "Nothing happened. I passed the BAKERY sign with Lucia.\nJake: Keep it, I'll come"
    assert named(text, ["Nothing", "BAKERY", "Lucia", "Jake", "I", "I'll", "Keep", "kitchen"]) == 2
    assert named("Lucia waved.", ["Lucia"]) == 0  # a capital at a sentence start proves nothing


def test_novelty_is_one_minus_the_closest_recent_window() -> None:
    v = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    assert novelty(v, np.zeros((0, 0), dtype=np.float32)) == 1.0  # a first window
    same = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]], dtype=np.float32)
    assert novelty(v, same) == pytest.approx(0.0, abs=1e-6)
    orthogonal = np.array([[0.0, 1.0, 0.0]], dtype=np.float32)
    assert novelty(v, orthogonal) == pytest.approx(1.0)
    assert novelty(None, same) == 1.0


def test_a_summary_weighs_what_its_most_important_moment_weighs() -> None:
    assert summary_importance([0.2, None, 0.7, 0.4]) == 0.7
    assert summary_importance([None, None]) is None
