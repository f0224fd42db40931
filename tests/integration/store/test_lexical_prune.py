"""Lexical search with the commonest lexemes left out of candidate selection returns exactly
the unpruned top k, on a random memory whose word frequencies are skewed like speech."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from tests.fixtures.store import T0
from worldmm.memory.retrieval.text_lanes import weighted_terms
from worldmm.store import segment_search as ss
from worldmm.store.models import SegmentWrite
from worldmm.store.segments import upsert_segment
from worldmm.store.term_stats import read_all

pytestmark = pytest.mark.integration

WORDS = [
    *("apple", "river", "window", "garden", "kettle", "bicycle", "violin", "lantern"),
    *("pepper", "carpet", "blanket", "ladder", "pillow", "mirror", "basket", "hammer"),
    *("candle", "bottle", "wallet", "helmet", "scissors", "compass", "trumpet", "anchor"),
]


def _speech_memory(conn, user_id: str, rng: random.Random) -> None:
    """400 segments whose words are Zipf-distributed: a few words everywhere."""
    weights = [1 / (i + 1) ** 1.1 for i in range(len(WORDS))]
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


def test_pruned_search_equals_the_full_one(conn, user_id, monkeypatch) -> None:
    rng = random.Random(7)
    _speech_memory(conn, user_id, rng)
    stats = read_all(conn, user_id)[0]
    ran: list[tuple[int, int]] = []  # (lexemes selecting candidates, lexemes in the query)
    real_run = ss._LexicalQuery.run

    def run(self, n, sets=(), **kw):
        ran.append((n, len(self.literals)))
        return real_run(self, n, sets, **kw)

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


def test_capped_search_equals_the_exact_one(conn, user_id, monkeypatch) -> None:
    """Candidates first selected by the rarest lexemes up to 20 segments per result, then by
    the sets of left-out lexemes that could still reach the k-th score: the exact ranking,
    while the first query selects no more than the cap (or the rarest lexeme's segments)."""
    rng = random.Random(11)
    _speech_memory(conn, user_id, rng)
    stats = read_all(conn, user_id)[0]
    calls: list[tuple[int, int]] = []  # (segments the selecting lexemes hold, sets ORed in)
    returned: list[set[int]] = []  # each query's rows
    real_run = ss._LexicalQuery.run

    def run(self, n, sets=(), **kw):
        calls.append((sum(stats.df[t.strip("'")] for t in self.literals[:n]), len(sets)))
        rows = real_run(self, n, sets, **kw)
        returned.append({r.segment_id for r in rows})
        return rows

    second, compared = 0, 0
    for _ in range(40):
        text = " ".join(rng.sample(WORDS, rng.randint(2, 6)))
        terms = weighted_terms(ss.query_lexemes(conn, text), stats)
        for k in (1, 3, 5, 20):
            cap = 20 * k
            exact = ss.lexical_search(conn, user_id, terms, stats.mean_length, k, prune=False)
            monkeypatch.setattr(ss._LexicalQuery, "run", run)
            calls.clear()
            returned.clear()
            capped = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, doc_freq=stats.df, max_candidates=cap
            )
            monkeypatch.setattr(ss._LexicalQuery, "run", real_run)
            assert [r.segment_id for r in capped] == [r.segment_id for r in exact], (text, k)
            assert [r.score for r in capped] == pytest.approx([r.score for r in exact])
            if len(calls) > 1 or len(terms) > 1:
                assert calls[0][0] <= max(cap, stats.df[terms[0][0]]), (text, k)
            # each query selects only what none before it did: no row twice
            for i, later in enumerate(returned):
                assert not later & set().union(*returned[:i]), (text, k)
            second += any(n_sets for _, n_sets in calls)
            compared += 1
    assert compared == 160
    assert second > 20  # sets of common words were needed, and found what the cap left out


def test_a_proof_past_its_budget_is_not_run_and_the_first_candidates_are_ranked_exactly(
    conn, user_id, monkeypatch
) -> None:
    """With ``max_proof`` the second query (the covering sets) runs only when the posting
    lists it reads hold at most that many segments. When it is left out, the ranking is the
    exact one over the first queries' candidates (each scored on every lexeme); with a budget
    it fits, the exact ranking of the whole memory."""
    rng = random.Random(13)
    _speech_memory(conn, user_id, rng)
    stats = read_all(conn, user_id)[0]
    real_run = ss._LexicalQuery.run
    runs: list[tuple[int, int, int, list[str]]] = []  # (after, n, sets, literals)

    def run(self, n, sets=(), **kw):
        runs.append((kw.get("after", 0), n, len(sets), self.literals))
        return real_run(self, n, sets, **kw)

    bounded = proved = 0
    for _ in range(40):
        text = " ".join(rng.sample(WORDS, rng.randint(3, 7)))
        terms = weighted_terms(ss.query_lexemes(conn, text), stats)
        for k in (3, 10):
            exact = ss.lexical_search(conn, user_id, terms, stats.mean_length, k, prune=False)
            for budget in (10**9, 40, 250):
                monkeypatch.setattr(ss._LexicalQuery, "run", run)
                runs.clear()
                got = ss.lexical_search(
                    conn, user_id, terms, stats.mean_length, k,
                    doc_freq=stats.df, max_candidates=5 * k, max_proof=budget,
                )  # fmt: skip
                monkeypatch.setattr(ss._LexicalQuery, "run", real_run)
                if any(n_sets for _, _, n_sets, _ in runs):
                    proved += budget < 10**6
                    assert [r.segment_id for r in got] == [r.segment_id for r in exact]
                    continue
                if budget > 10**6:
                    assert [r.segment_id for r in got] == [r.segment_id for r in exact]
                    continue
                # the proof was left out: the top k of the segments the first queries
                # selected, scored exactly
                selecting = {lit.strip("'") for after, n, _, lits in runs for lit in lits[after:n]}
                ids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM segments WHERE user_id = %s AND search_tsv @@"
                        " to_tsquery('simple', %s)",
                        (user_id, " | ".join(selecting)),
                    )
                ]
                among = ss.lexical_search(
                    conn, user_id, terms, stats.mean_length, k, ss.Filters(ids=ids), prune=False
                )
                assert [r.segment_id for r in got] == [r.segment_id for r in among], (text, k)
                assert [r.score for r in got] == pytest.approx([r.score for r in among])
                full = {r.segment_id: r.score for r in exact}
                assert all(full.get(r.segment_id, r.score) == pytest.approx(r.score) for r in got)
                bounded += [r.segment_id for r in got] != [r.segment_id for r in exact]
    assert bounded > 5  # the budget left proofs out, and that changed rankings
    assert proved > 0  # a proof within the budget still ran


def test_the_reader_leaves_out_a_proof_that_reads_more_than_the_candidate_cap(
    db, conn, user_id, monkeypatch
) -> None:
    """The served lane's budget: the covering sets' posting lists may hold at most
    ``candidate_cap(k)`` segments, the same bound as the first query's."""
    from worldmm.memory.retrieval.reader import MemoryReader

    _speech_memory(conn, user_id, random.Random(17))
    conn.commit()
    monkeypatch.setattr(ss, "LEXICAL_CANDIDATES_MIN", 12)
    monkeypatch.setattr(ss, "LEXICAL_CANDIDATES_PER_RESULT", 4)
    reader = MemoryReader(db)
    real_run = ss._LexicalQuery.run
    proofs: list[int] = []  # postings each second query read

    def run(self, n, sets=(), **kw):
        if sets:
            df = reader_stats.df
            lexemes = {self.literals[i] for g in sets for i in g}
            lexemes |= set(self.literals[kw["after"] : n])
            proofs.append(sum(df[x.strip("'")] for x in lexemes))
        return real_run(self, n, sets, **kw)

    monkeypatch.setattr(ss._LexicalQuery, "run", run)
    rng = random.Random(19)
    differs = 0
    for _ in range(30):
        text = " ".join(rng.sample(WORDS, rng.randint(3, 7)))
        reader_stats, lexemes = reader.query_terms(user_id, text)
        terms = weighted_terms(lexemes, reader_stats)
        got = reader.lexical_segments(user_id, terms, reader_stats, 5, ss.Filters())
        exact = ss.lexical_search(conn, user_id, terms, reader_stats.mean_length, 5, prune=False)
        differs += [r.segment_id for r in got] != [r.segment_id for r in exact]
    assert all(p <= ss.candidate_cap(5) for p in proofs)
    assert differs > 0  # proofs were left out


def test_a_rare_word_with_common_ones_adds_the_next_words_not_every_word(
    conn, user_id, monkeypatch
) -> None:
    """The rarest lexeme holds fewer than k segments: the next rarest join, each query
    selecting only segments no earlier one did, never every lexeme at once; the ranking is
    still the unpruned one."""
    rng = random.Random(5)
    _speech_memory(conn, user_id, rng)
    for i in range(3):  # a rare name, three times
        upsert_segment(
            conn,
            SegmentWrite(
                user_id=user_id, scale_seconds=30,
                window_start=T0 + timedelta(days=1, seconds=30 * i),
                window_end=T0 + timedelta(days=1, seconds=30 * i + 30),
                caption=f"xylophone {' '.join(rng.sample(WORDS[:6], 3))}",
                processing_status="complete",
            ),
        )  # fmt: skip
    stats = read_all(conn, user_id)[0]
    real_run = ss._LexicalQuery.run
    runs: list[tuple[int, int, set[int]]] = []  # (after, n, rows)

    def run(self, n, sets=(), **kw):
        rows = real_run(self, n, sets, **kw)
        runs.append((kw.get("after", 0), n, {r.segment_id for r in rows}))
        return rows

    for text in ("xylophone apple river", "xylophone apple river window garden kettle"):
        terms = weighted_terms(ss.query_lexemes(conn, text), stats)
        for k in (10, 50):
            exact = ss.lexical_search(conn, user_id, terms, stats.mean_length, k, prune=False)
            monkeypatch.setattr(ss._LexicalQuery, "run", run)
            runs.clear()
            got = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, doc_freq=stats.df, max_candidates=60
            )
            monkeypatch.setattr(ss._LexicalQuery, "run", real_run)
            assert [r.segment_id for r in got] == [r.segment_id for r in exact], (text, k)
            assert [r.score for r in got] == pytest.approx([r.score for r in exact])
            first_after, first_n, first_rows = runs[0]
            assert first_after == 0 and first_n == 1 and len(first_rows) == 3  # the name alone
            assert len(runs) >= 2 and all(after > 0 for after, _, _ in runs[1:])
            for i, (_, _, rows) in enumerate(runs):
                assert not rows & set().union(*(r for _, _, r in runs[:i]))


def test_an_id_set_no_larger_than_k_is_scored_in_one_statement(conn, user_id, monkeypatch) -> None:
    """A drill-down's children: at most k segments can pass, so one statement scores them
    all, with the unpruned ranking; a larger id set still prunes."""
    rng = random.Random(3)
    _speech_memory(conn, user_id, rng)
    stats = read_all(conn, user_id)[0]
    ids = [r[0] for r in conn.execute("SELECT id FROM segments WHERE user_id = %s", (user_id,))]
    real_run = ss._LexicalQuery.run
    runs: list[int] = []

    def run(self, n, sets=(), **kw):
        runs.append(n)
        return real_run(self, n, sets, **kw)

    for text in ("apple river window garden kettle", "anchor trumpet apple"):
        terms = weighted_terms(ss.query_lexemes(conn, text), stats)
        for few, k in ((rng.sample(ids, 12), 20), (rng.sample(ids, 20), 20), (ids, 20)):
            filters = ss.Filters(ids=few)
            exact = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, filters, prune=False
            )
            monkeypatch.setattr(ss._LexicalQuery, "run", run)
            runs.clear()
            got = ss.lexical_search(
                conn, user_id, terms, stats.mean_length, k, filters,
                doc_freq=stats.df, max_candidates=2 * k,
            )  # fmt: skip
            monkeypatch.setattr(ss._LexicalQuery, "run", real_run)
            assert [r.segment_id for r in got] == [r.segment_id for r in exact], (text, k)
            assert [r.score for r in got] == pytest.approx([r.score for r in exact])
            if len(few) <= k:
                assert runs == [len(terms)]  # one statement, every lexeme selecting
            else:
                assert runs[0] < len(terms)  # the whole memory: pruned as before


def test_capped_terms_keeps_the_rarest_within_the_cap() -> None:
    terms = [("rare", 4.0), ("mid", 2.0), ("common", 0.5)]
    df = {"rare": 5, "mid": 40, "common": 300}
    assert ss.capped_terms(terms, df, 1) == 1  # the rarest always selects
    assert ss.capped_terms(terms, df, 44) == 1
    assert ss.capped_terms(terms, df, 45) == 2
    assert ss.capped_terms(terms, df, 345) == 3
    assert ss.candidate_cap(1) == ss.LEXICAL_CANDIDATES_MIN
    assert ss.candidate_cap(1000) == 1000 * ss.LEXICAL_CANDIDATES_PER_RESULT


def test_covering_sets_are_the_combinations_that_can_reach_the_threshold() -> None:
    f = ss.MAX_LENGTH_FACTOR
    weights = [2.0, 1.0, 0.5]
    assert ss.covering_sets(weights, f * 3.5 + 1e-9) == []  # all three together fall short
    assert ss.covering_sets(weights, f * 3.5) == [[0, 1, 2]]
    assert ss.covering_sets(weights, f * 2.5) == [[0, 1], [0, 2]]
    assert ss.covering_sets(weights, f * 1.5) == [[0], [1, 2]]
    assert ss.covering_sets(weights, f * 0.5) == [[0], [1], [2]]
    many = [1.0] * 12  # any 6 of 12: 924 sets, more than a query should OR together
    assert ss.covering_sets(many, f * 6) is None


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
    stats = read_all(conn, user_id)[0]
    terms = weighted_terms(ss.query_lexemes(conn, "where is the kettle"), stats)
    rows = ss.lexical_search(conn, user_id, terms, stats.mean_length, 50)
    assert sorted(r.segment_id for r in rows) == sorted(mine)
