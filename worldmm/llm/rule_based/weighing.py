"""Weighing multiple-choice options against the evidence: which option the evidence for the
question supports better than its base rate in the wearer's memory says it would.

Evidence found by an option's own search names that option, so "is it mentioned" supports
every option; instead each option is scored against the same pooled evidence, attended by
its relevance to the question, less the support any window of the memory would give it.
A question about a habit ("what do I usually…", :func:`scoring.asks_habit`) reads the base
rate the other way: how often the memory holds an option is evidence for it, and the best
of the facts the semantic memory holds weighs as much as the best window.
The steps: docs/api.md (multiple choice); the one weight is chosen by cross-validation
(docs/benchmarks/egolife.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.rule_based import scoring
from worldmm.llm.rule_based.choice_time import elapsed_h, time_scores
from worldmm.llm.rule_based.evidence import Unit
from worldmm.llm.schemas import OptionNote
from worldmm.localtime import Asked

BASE_RATE_WEIGHT = 1.0  # chosen by cross-validation (bench.egolife: answerer folds)
SHARE_FLOOR = 1e-4  # smoothing: finite IDF for a word never held, positive for one always held
_NONE_OPTION = re.compile(
    r"^\s*(?:none|neither|nobody|no one|nothing)(?:\s+of\s+(?:the|these|them)"
    r"(?:\s+(?:above|options|choices))?)?\W*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Weighing:
    """Per option: ``support`` from the evidence and ``base`` (its support in an average
    window of the memory; zeros without shares, and for time options). ``contribution``
    and ``lexical`` (options x units: the share of its words each unit holds) say which units
    each option rests on; ``timed``: scored by time; ``habit``: the question asks what
    happens often (the base rate is evidence)."""

    support: np.ndarray
    base: np.ndarray
    contribution: np.ndarray
    lexical: np.ndarray
    timed: bool
    none_options: tuple[int, ...]
    habit: bool = False

    def scores(self, base_weight: float = BASE_RATE_WEIGHT) -> np.ndarray:
        """Support less the weighted base rate, or plus it on a habit question (one weight:
        how much the memory's frequency of an option counts, whichever way it points); a
        "none" option ranks first exactly when no other option is named in the evidence,
        last otherwise."""
        sign = 1.0 if self.habit else -1.0
        out = self.support + sign * base_weight * self.base
        if self.none_options:
            others = [i for i in range(len(out)) if i not in self.none_options]
            named = bool((self.lexical[others] > 0).any()) or self.timed
            fill = (out[others].min() - 1.0) if named else (out[others].max() + 1.0)
            out[list(self.none_options)] = fill
        return out


def is_none_option(choice: str) -> bool:
    return bool(_NONE_OPTION.match(choice))


def word_idf(notes: Sequence[OptionNote], terms_of: dict[str, float]) -> dict[str, float]:
    """``terms_of`` (IDF over the evidence) with every option word the notes know replaced
    by its IDF over the memory, BM25's in shares: ln(1 + (1 - s + f) / (s + f)) of its share
    s, f = :data:`SHARE_FLOOR` (so a word in every segment still weighs a little)."""
    out = dict(terms_of)
    for term, share in term_shares(notes).items():
        s = min(max(share, 0.0), 1.0)
        out[term] = math.log(1 + (1 - s + SHARE_FLOOR) / (s + SHARE_FLOOR))
    return out


def term_shares(notes: Sequence[OptionNote]) -> dict[str, float]:
    """The notes' word shares by the answerer's terms (stemmed; the highest share when two
    words make one term)."""
    out: dict[str, float] = {}
    for note in notes:
        for word, share in note.word_shares.items():
            for term in scoring.terms(word):
                out[term] = max(out.get(term, 0.0), share)
    return out


def base_rates(weights: Sequence[dict[str, float]], shares: dict[str, float]) -> np.ndarray:
    """Per option, the weighted share of its words a window holds on average (words as
    independent): sum(w * share) / sum(w); 0 for an option with no weighed word."""
    out = []
    for w in weights:
        total = sum(w.values())
        out.append(sum(v * shares.get(t, 0.0) for t, v in w.items()) / total if total > 0 else 0.0)
    return np.asarray(out, dtype=np.float64)


def window_coverage(
    weights: Sequence[dict[str, float]], units: Sequence[Unit], u_terms: Sequence[set[str]]
) -> tuple[np.ndarray, list[str]]:
    """(options x windows) weighted share of each option's words a window holds over all its
    units, and the windows' refs in first-seen order."""
    refs = list(dict.fromkeys(u.ref for u in units))
    held: dict[str, set[str]] = {r: set() for r in refs}
    for u, t in zip(units, u_terms, strict=True):
        held[u.ref] |= t
    cov = [[scoring.coverage(w, held[r]) for r in refs] for w in weights]
    return np.asarray(cov, dtype=np.float64).reshape(len(weights), len(refs)), refs


def weigh(
    embedder: TextEmbedder,
    question: str,
    units: Sequence[Unit],
    choices: Sequence[str],
    notes: Sequence[OptionNote] | None = None,
    asked: Asked | None = None,
) -> Weighing:
    """Every option weighed against ``units`` (at least one)."""
    n = len(choices)
    vectors = np.asarray(
        embedder.embed([question, *choices, *(u.text for u in units)]), dtype=np.float64
    )
    q, c_vecs, u_vecs = vectors[0], vectors[1 : 1 + n], vectors[1 + n :]
    u_terms = [set(scoring.terms(u.text)) for u in units]
    q_terms = set(scoring.terms(question))
    idf_of = scoring.idf([*u_terms, q_terms])
    rel = scoring.relevance(q_terms, u_terms, idf_of, u_vecs @ q)
    rel += scoring.source_bonus(question, [u.source for u in units])
    habit = scoring.asks_habit(question)
    if habit:
        rel = fact_relevance(rel, [u.source for u in units])
    att = scoring.attention(rel, np.asarray([u.weight for u in units]))
    nones = tuple(i for i, c in enumerate(choices) if is_none_option(c))
    c_terms = [set() if i in nones else set(scoring.terms(c)) for i, c in enumerate(choices)]
    weights = scoring.choice_weights(c_terms, q_terms, word_idf(notes or (), idf_of))
    lexical, dense = scoring.support(weights, u_terms, c_vecs @ u_vecs.T)
    timed = _timed(units, att, notes, asked, nones)
    if timed is not None:
        return Weighing(timed, np.zeros(n), np.tile(att, (n, 1)), lexical, True, nones, habit)
    cov, refs = window_coverage(weights, units, u_terms)
    window_att = np.zeros(len(refs))
    np.add.at(window_att, [refs.index(u.ref) for u in units], att)
    support = cov @ window_att + dense @ att
    base = base_rates(weights, term_shares(notes or ()))
    return Weighing(support, base, att * (lexical + dense), lexical, False, nones, habit)


def fact_relevance(relevance: np.ndarray, sources: Sequence[str]) -> np.ndarray:
    """Relevance with the facts (what the semantic memory holds, found for the question)
    raised together until the best of them is as relevant as the best other unit: a fact
    ("I often deals with fruit") rarely shares the question's words, yet it is what the
    memory knows about a habit; the facts keep their order among themselves, so one
    farther from the question still weighs less."""
    out = np.asarray(relevance, dtype=np.float64).copy()
    facts = np.asarray([s == "fact" for s in sources], dtype=bool)
    if facts.any() and not facts.all():
        out[facts] += max(0.0, out[~facts].max() - out[facts].max())
    return out


def _timed(
    units: Sequence[Unit],
    att: np.ndarray,
    notes: Sequence[OptionNote] | None,
    asked: Asked | None,
    nones: tuple[int, ...],
) -> np.ndarray | None:
    """Time scores when every option but a "none" one is a time and some unit is dated."""
    if asked is None or not notes:
        return None
    ranges = [note.hours_before for i, note in enumerate(notes) if i not in nones]
    dated = [i for i, u in enumerate(units) if u.start is not None]
    if not dated or any(r is None for r in ranges) or len(ranges) < 2:
        return None
    hours = [elapsed_h(asked.at, _middle(units[i])) for i in dated]
    weights = att[dated] / att[dated].sum()
    scores = time_scores([r for r in ranges if r is not None], hours, weights)
    out = np.zeros(len(notes))
    out[[i for i in range(len(notes)) if i not in nones]] = scores
    return out


def _middle(u: Unit):
    assert u.start is not None
    return u.start if u.end is None else u.start + (u.end - u.start) / 2
