"""The offline answerer's pure parts: terms, IDF, choice weights, attention, tie-breaking,
and evidence units cut from passages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from worldmm.llm.rule_based import scoring
from worldmm.llm.rule_based.evidence import CONTEXT_WEIGHT, SCENE_WEIGHT, evidence_units
from worldmm.llm.schemas import Passage, letter_index


def test_terms_stem_drop_stopwords_and_read_number_words_as_digits():
    assert scoring.terms("I parked the cars on level two") == ["park", "car", "level", "2"]
    assert scoring.terms("Level 2") == ["level", "2"]
    assert scoring.terms("buying strawberries") == ["buy", "strawberri"]
    assert scoring.terms("the and of") == []


def test_idf_is_positive_and_rarer_terms_weigh_more():
    weights = scoring.idf([{"tea", "omar"}, {"coffee"}, {"coffee"}, {"coffee", "tea"}])
    assert weights["omar"] > weights["tea"] > weights["coffee"] > 0


def test_terms_every_choice_shares_or_the_question_names_weigh_less():
    choices = [{"level", "1"}, {"level", "2"}]
    idf_of = {"level": 1.0, "1": 1.0, "2": 1.0, "car": 1.0}
    w = scoring.choice_weights(choices, {"car", "1"}, idf_of)
    assert w[0]["level"] == 0.0 and w[1]["level"] == 0.0  # every option has it
    assert w[0]["1"] == scoring.QUESTION_TERM_WEIGHT and w[1]["2"] == 1.0


def test_coverage_is_a_weighted_share():
    assert scoring.coverage({"a": 3.0, "b": 1.0}, {"a"}) == 0.75
    assert scoring.coverage({}, {"a"}) == 0.0


def test_attention_sums_to_one_and_favours_relevance_and_weight():
    att = scoring.attention(np.array([0.5, 0.4, 0.5]), np.array([1.0, 1.0, 0.5]))
    assert np.isclose(att.sum(), 1.0)
    assert att[0] > att[2] > att[1]
    assert scoring.attention(np.array([]), np.array([])).size == 0


def test_centred_dense_support_only_rewards_what_sets_a_choice_apart():
    lexical, dense = scoring.support([{}, {}], [set()], np.array([[0.9], [0.7]]))
    assert np.allclose(lexical, 0.0) and np.allclose(dense, [[0.1], [-0.1]])


def test_ties_go_to_the_earliest_choice():
    assert scoring.best_index(np.array([0.2, 0.5, 0.5])) == 1
    assert scoring.best_index(np.array([0.0, 0.0])) == 0


def test_questions_about_writing_or_speech_favour_those_units():
    sources = ["read", "said", "seen"]
    assert scoring.source_bonus("What was written on the note?", sources).tolist() == [
        scoring.SOURCE_BONUS,
        0.0,
        0.0,
    ]
    assert scoring.source_bonus("What did Alice say?", sources)[1] == scoring.SOURCE_BONUS
    assert not scoring.source_bonus("Where is the mug?", sources).any()


@pytest.mark.parametrize(
    ("question", "habit"),
    [
        ("What do I usually eat at breakfast?", True),
        ("Who do I usually have breakfast with?", True),
        ("Who often goes out wearing slippers", True),
        ("Who was I mostly busy with in the kitchen today", True),
        ("What do I habitually use to wipe after washing kitchenware?", True),
        ("Who did I play games with most?", True),
        ("What do I eat every morning?", True),
        ("What did I eat at breakfast yesterday?", False),
        ("What is the most expensive thing I bought?", False),
        ("Which shopping app do I usually not choose?", False),  # negated: rarity is the clue
        ("Among us, who doesn't usually eat durian?", False),
        ("Where is the place I never go to?", False),
    ],
)
def test_habit_questions_ask_what_happens_often(question, habit):
    assert scoring.asks_habit(question) is habit


def test_letters_from_replies():
    assert [letter_index(v, 4) for v in ("B", "b.", "(C) tea", "D: x")] == [1, 1, 2, 3]
    assert [letter_index(v, 4) for v in ("E", "Brown", "", None)] == [None] * 4


def test_units_fold_caption_speech_into_the_transcript_and_weigh_cues_less():
    start = datetime(2025, 5, 1, 9, tzinfo=UTC)
    p = Passage(
        ref="S1",
        kind="segment",
        start=start,
        end=start + timedelta(seconds=30),
        said="Alice: the meeting moved to three pm",
        text=(
            'Alice said: "the meeting moved to three pm". I saw text reading "ROOM 4", "EXIT". '
            "I was somewhere bright; white dominated what I saw, which stayed steady."
        ),
        context="A morning of meetings.",
    )
    frame = Passage(ref="V1", kind="frame", start=start, text="a frame matched 'x'")
    units = evidence_units([p, frame])
    assert [(u.source, u.text, u.speaker) for u in units] == [
        ("said", "the meeting moved to three pm", "Alice"),
        ("read", "ROOM 4, EXIT", None),
        ("scene", "I was somewhere bright; white dominated what I saw, which stayed steady.", None),
        ("context", "A morning of meetings.", None),
    ]
    assert units[2].weight == SCENE_WEIGHT and units[3].weight == CONTEXT_WEIGHT
    assert all(u.ref == "S1" and u.start == start for u in units)
