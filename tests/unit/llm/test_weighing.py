"""The offline answerer's weighing of options, pure parts: window support, base rates (less
them, or, on a habit question, as evidence with the facts held), the "none" rule, time
options, and the time a remote model is shown for a time option."""

from __future__ import annotations

import numpy as np

from tests.fixtures.fake_models import HashEmbedder
from tests.fixtures.weighings import weighing
from worldmm.llm.rendering import render_choices
from worldmm.llm.rule_based import weighing as weighing_mod
from worldmm.llm.rule_based.choice_time import time_scores
from worldmm.llm.rule_based.evidence import Unit
from worldmm.llm.schemas import OptionNote


def test_a_window_supports_an_option_whose_words_are_in_any_of_its_units():
    units = [Unit("Tasha came in.", "S1", "seen"), Unit("We lifted it.", "S1", "seen")]
    units.append(Unit("Shure left.", "S2", "seen"))
    terms = [{"tasha", "came"}, {"lift"}, {"shure", "left"}]
    cov, refs = weighing_mod.window_coverage(
        [{"tasha": 1.0, "lift": 1.0}, {"shure": 1.0}], units, terms
    )
    assert refs == ["S1", "S2"]
    assert cov.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_base_rate_is_the_weighted_share_of_an_options_words_and_idf_follows_it():
    shares = {"shure": 0.8, "guitar": 0.1}
    rates = weighing_mod.base_rates([{"shure": 2.0, "guitar": 2.0}, {}], shares)
    assert np.allclose(rates, [0.45, 0.0])  # an option with no weighed word: no base rate
    notes = [OptionNote(word_shares={"Shure's": 0.8}), OptionNote(word_shares={"guitars": 0.1})]
    assert weighing_mod.term_shares(notes) == {"shure": 0.8, "guitar": 0.1}
    idf = weighing_mod.word_idf(notes, {"guitar": 9.0, "tea": 1.0})
    assert idf["tea"] == 1.0 and idf["shure"] < idf["guitar"] < 9.0


def test_scores_subtract_the_weighted_base_rate():
    w = weighing([0.9, 0.5], base=[0.8, 0.1])
    assert np.allclose(w.scores(0.0), [0.9, 0.5])
    assert np.allclose(w.scores(1.0), [0.1, 0.4])


def test_on_a_habit_question_the_base_rate_is_evidence():
    # eaten once, named in the window the question finds; eaten every day, held in most windows
    w = weighing([0.9, 0.5], base=[0.05, 0.6], habit=True)
    assert np.allclose(w.scores(0.0), [0.9, 0.5])
    assert np.allclose(w.scores(1.0), [0.95, 1.1])  # the same weight, added
    assert int(np.argmax(w.scores(1.0))) == 1
    other = weighing([0.9, 0.5], base=[0.05, 0.6])  # any other question: subtracted
    assert np.allclose(other.scores(1.0), [0.85, -0.1])


def test_on_a_habit_question_the_best_fact_weighs_as_much_as_the_best_window():
    units = [
        Unit("I ate cake with Tom for breakfast at the cafe.", "S1", "seen"),
        Unit("I often deals with fruit.", "F1", "fact"),  # no word of the question
    ]
    rel = weighing_mod.fact_relevance(np.array([0.8, 0.1, 0.0]), ["seen", "fact", "fact"])
    assert np.allclose(rel, [0.8, 0.8, 0.7])  # the facts raised together, their order kept
    assert np.allclose(
        weighing_mod.fact_relevance(np.array([0.2, 0.5]), ["seen", "fact"]), [0.2, 0.5]
    )

    def support(question: str) -> np.ndarray:
        return weighing_mod.weigh(HashEmbedder(), question, units, ["cake", "fruit"]).support

    habit = support("What do I usually have for breakfast?")
    once = support("What did I have for breakfast?")
    assert habit[1] > habit[0] and once[1] < once[0]  # the fact counts as much as the window
    assert weighing_mod.weigh(HashEmbedder(), "What do I usually eat?", units, ["a", "b"]).habit


def test_a_none_option_wins_exactly_when_no_other_option_is_named():
    def scores(named: bool) -> np.ndarray:
        return weighing([0.2, 0.1, 0.0], named=[0.5 if named else 0.0, 0, 0], none_options=(2,))

    assert int(np.argmax(scores(True).scores())) == 0
    assert int(np.argmax(scores(False).scores())) == 2
    assert weighing_mod.is_none_option("None of the above.")
    assert weighing_mod.is_none_option("neither")
    assert not weighing_mod.is_none_option("None left in the fridge")


def test_time_options_score_by_the_attended_moments():
    ranges = [(0.0, 2.0), (2.0, 6.0), (4.0, 12.0)]  # about 1, 4 and 8 hours ago
    at_four = time_scores(ranges, [4.2, 30.0], np.array([0.9, 0.1]))
    assert int(np.argmax(at_four)) == 1
    # an overlap: 5 h is in both the second and third ranges; the nearer middle wins
    assert int(np.argmax(time_scores(ranges, [5.0], np.array([1.0])))) == 1
    assert int(np.argmax(time_scores(ranges, [9.0], np.array([1.0])))) == 2


def test_a_remote_model_is_shown_the_time_an_option_means():
    notes = [OptionNote(hours_before=(2.0, 6.0)), OptionNote(hours_before=(1 / 6, 0.5)), None]
    shown = render_choices(["About four hours ago", "About 20 minutes ago", "Never"], notes)
    assert shown.splitlines() == [
        "Choices:",
        "A. About four hours ago (2–6 h before the question)",
        "B. About 20 minutes ago (10–30 min before the question)",
        "C. Never",
    ]
    assert render_choices(["tea", "coffee"]) == "Choices:\nA. tea\nB. coffee"
