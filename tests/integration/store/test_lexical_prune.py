"""Lexical search with the commonest lexemes left out of candidate selection returns exactly
the unpruned top k, on a random memory whose word frequencies are skewed like speech."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from worldmm.memory.retrieval.lanes import weighted_terms
from worldmm.store import segment_search as ss
from worldmm.store.models import SegmentWrite
from worldmm.store.segments import upsert_segment

from .conftest import T0

pytestmark = pytest.mark.integration

WORDS = [
    *("apple", "river", "window", "garden", "kettle", "bicycle", "violin", "lantern"),
    *("pepper", "carpet", "blanket", "ladder", "pillow", "mirror", "basket", "hammer"),
    *("candle", "bottle", "wallet", "helmet", "scissors", "compass", "trumpet", "anchor"),
]


def test_pruned_search_equals_the_full_one(conn, user_id, monkeypatch) -> None:
    rng = random.Random(7)
    weights = [1 / (i + 1) ** 1.1 for i in range(len(WORDS))]  # Zipf-like: a few words everywhere
    for i in range(400):
        scale = 30 if i % 5 else 180
        words = rng.choices(WORDS, weights, k=rng.randint(2, 25))
        upsert_segment(
            conn,
            SegmentWrite(
                user_id=user_id,
                scale_seconds=scale,
                window_start=T0 + timedelta(seconds=30 * i),
                window_end=T0 + timedelta(seconds=30 * i + scale),
                caption=" ".join(words),
                processing_status="complete",
            ),
        )
    stats = ss.term_stats(conn, user_id)
    ran: list[tuple[int, int]] = []  # (lexemes selecting candidates, lexemes in the query)
    real_run = ss._LexicalQuery.run

    def run(self, n):
        ran.append((n, len(self.literals)))
        return real_run(self, n)

    monkeypatch.setattr(ss._LexicalQuery, "run", run)
    compared = 0
    for _ in range(60):
        text = " ".join(rng.sample(WORDS, rng.randint(2, 6)))
        terms = weighted_terms(ss.query_lexemes(conn, text), stats)
        for k in (1, 5, 20, 100):
            filters = rng.choice(
                [{}, {"as_of": T0 + timedelta(hours=2)}, {"scales": [30]}, {"start": T0}]
            )
            full = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, ss.Filters(**filters), prune=False
            )
            pruned = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, ss.Filters(**filters)
            )
            assert [r.segment_id for r in pruned] == [r.segment_id for r in full], (text, k)
            assert [r.score for r in pruned] == pytest.approx([r.score for r in full])
            compared += 1
    assert compared == 240
    # the pruned path really ran, and sometimes needed its second query (more calls than
    # one per search)
    assert sum(1 for n, total in ran if n < total) > 50
    assert len(ran) > 2 * compared


def test_prunable_terms_keeps_the_rarest_and_the_bound() -> None:
    terms = [("rare", 4.0), ("mid", 2.0), ("common", 0.5), ("everywhere", 0.1)]
    f = ss.MAX_LENGTH_FACTOR
    assert ss.prunable_terms(terms, 0.0) == 0
    assert ss.prunable_terms(terms, f * 0.1 + 1e-9) == 1
    assert ss.prunable_terms(terms, f * 0.6 + 1e-9) == 2
    assert ss.prunable_terms(terms, f * 0.6) == 1  # the bound must stay strictly below
    assert ss.prunable_terms(terms, 1e9) == 3  # never the rarest
    assert ss.prunable_terms(terms[:1], 1e9) == 0


def test_the_full_text_index_is_keyed_by_user(conn, user_id, other_user) -> None:
    """Migration 0007: one GIN index over (user_id, search_tsv) for complete segments instead
    of one over search_tsv alone; a lexical search still finds only its user's segments.
    (Which plan PostgreSQL picks depends on the sizes: on the query benchmark's four weeks
    it scans this index; on a table this small a plain user-id scan is cheaper.)"""
    (definition,) = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'segments_user_search_idx'"
    ).fetchone()
    assert "gin (user_id, search_tsv)" in definition
    assert "processing_status = 'complete'" in definition
    (old,) = conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'segments_search_tsv_idx'"
    ).fetchone()
    assert old == 0
    mine = []
    for uid in (user_id, other_user):
        for i in range(40):
            sid = upsert_segment(
                conn,
                SegmentWrite(
                    user_id=uid,
                    scale_seconds=30,
                    window_start=T0 + timedelta(seconds=30 * i),
                    window_end=T0 + timedelta(seconds=30 * (i + 1)),
                    caption=f"the {'kettle' if i % 4 == 0 else 'teapot'} is on the stove",
                    processing_status="complete",
                ),
            )
            if uid == user_id and i % 4 == 0:
                mine.append(sid)
    stats = ss.term_stats(conn, user_id)
    terms = weighted_terms(ss.query_lexemes(conn, "where is the kettle"), stats)
    rows = ss.lexical_search(conn, user_id, terms, stats.mean_length, 50)
    assert sorted(r.segment_id for r in rows) == sorted(mine)
