"""The entity lane's bounded read ranks exactly as reading every link does.

A memory of 720 windows under 120 three-minute parents, with a few housemates in most windows
and rarer things in few, some named by the parents' summaries; questions of one to three of
them, asked now or as of a past moment, with or without a time range. With caps far below the
housemates' links, every ranking the bound proves must equal the full read's; the lane reads
once, and never every link of an entity, however far the proof falls short.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tests.fixtures import entity_exact as ref
from tests.fixtures.store import make_segment
from worldmm.memory.retrieval import text_lanes
from worldmm.memory.retrieval.reader import MemoryReader
from worldmm.store import entities, entity_links, segments, triples, users
from worldmm.store.db import Database
from worldmm.store.models import TripleWrite
from worldmm.store.segment_search import Filters
from worldmm.store.term_stats import read_all

pytestmark = pytest.mark.integration


T0 = datetime(2025, 6, 2, 8, 0, tzinfo=UTC)
PARENTS = 120
# how often each entity is in a 30 s window: housemates, common things, rare things
OFTEN = [0.6, 0.45, 0.3, 0.12, 0.05, 0.03, 0.02, 0.01]


class Built:
    def __init__(self, ids: list[int], ends: list[datetime]) -> None:
        self.entities, self.ends = ids, ends


@pytest.fixture
def built(db: Database, user_id: str, settings) -> Built:
    rng = random.Random(7)
    dim = settings.text_embed_dim
    vec = np.ones(dim, np.float32) / np.sqrt(dim)
    ends: list[datetime] = []
    with db.transaction() as conn:
        users.ensure_user(conn, user_id)
        ids = [
            entities.insert_canonical_entity(conn, user_id, f"thing {i}", vec).id
            for i in range(len(OFTEN))
        ]
        other = entities.insert_canonical_entity(conn, user_id, "elsewhere", vec).id

        def facts(names: list[int]) -> list[TripleWrite]:
            rows = []
            for e in names:
                for _ in range(rng.choice((1, 1, 2))):  # sometimes named twice
                    pair = (e, other) if rng.random() < 0.5 else (other, e)
                    rows.append(
                        TripleWrite(
                            subject_entity_id=pair[0],
                            predicate=f"p{rng.randrange(1000)}",
                            object_entity_id=pair[1],
                            embedding=vec,
                        )
                    )
            return rows

        for p in range(PARENTS):
            start = T0 + timedelta(minutes=3 * p)
            parent = make_segment(conn, user_id, start, 180, processing_status="complete")
            held: set[int] = set()
            kids = []
            for i in range(6):
                status = "pending" if rng.random() < 0.02 else "complete"
                at = start + timedelta(seconds=30 * i)
                kid = make_segment(conn, user_id, at, 30, processing_status=status)
                names = [e for e, f in zip(ids, OFTEN, strict=True) if rng.random() < f]
                held |= set(names)
                if names:
                    triples.insert_triples(conn, user_id, kid, "episodic", facts(names))
                kids.append(kid)
                ends.append(at + timedelta(seconds=30))
            segments.link_children(conn, user_id, parent, kids)
            summary = [e for e in held if rng.random() < 0.5]
            summary += [e for e in ids if rng.random() < 0.02]  # named only by the summary
            if summary:
                triples.insert_triples(conn, user_id, parent, "episodic", facts(summary))
    return Built(ids, ends)


def _weights(conn, user_id: str, asked: dict[int, float], as_of) -> dict[int, float]:
    """The lane's weights: N the complete 30 s windows ended by ``as_of``."""
    (total,) = conn.execute(
        "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30"
        " AND processing_status = 'complete'"
        " AND window_end <= coalesce(%s::timestamptz, 'infinity')",
        (user_id, as_of),
    ).fetchone()
    df = ref.window_counts(conn, user_id, list(asked), as_of)
    return text_lanes.entity_weights(asked, int(total), df)


def _question(rng: random.Random, built: Built) -> tuple[dict[int, float], Filters]:
    """One to three entities (commoner ones likelier), a strength each, a time and a range."""
    n = rng.choice((1, 1, 2, 2, 3))
    picked = rng.sample(built.entities, n)
    asked = {e: rng.choice((1.0, 1.0, 0.7)) for e in picked}
    ends = built.ends
    as_of = rng.choice((None, ends[-1], ends[rng.randrange(len(ends))]))
    start = end = None
    if rng.random() < 0.3:
        lo = rng.randrange(len(ends) - 60)
        start, end = ends[lo], ends[lo + rng.randrange(10, 60)] + timedelta(seconds=7)
    return asked, Filters(as_of, start, end)


def test_a_proven_capped_ranking_is_the_full_one(db, built, user_id) -> None:
    rng = random.Random(11)
    proven = {"one": 0, "more": 0}
    asked_of = {"one": 0, "more": 0}
    reader = MemoryReader(db)
    with db.connection() as conn:
        for _ in range(150):
            asked, filters = _question(rng, built)
            weights = _weights(conn, user_id, asked, filters.as_of)
            kind = "one" if len(asked) == 1 else "more"
            for k, cap in ((1, 4), (5, 8), (20, 32), (5, 64)):
                exact = ref.exact_ranking(conn, user_id, weights, k, filters)
                capped = ref.proven(conn, user_id, weights, k, filters, cap)
                asked_of[kind] += 1
                if capped is not None:
                    proven[kind] += 1
                    assert capped == exact, (asked, filters, k, cap)
            # the lane reads once: the exact ranking where proven, else the best of its read
            lane = text_lanes.ranked_windows(reader, user_id, weights, 20, filters)
            exact = ref.exact_ranking(conn, user_id, weights, 20, filters)
            cap = text_lanes.link_cap(20)
            if ref.proven(conn, user_id, weights, 20, filters, cap) is not None:
                assert lane == exact
            else:
                assert len(lane) == len(exact) and lane[0].score >= exact[-1].score
    # the bound is not idle: most rankings are proven, also with several entities asked
    assert proven["one"] > 0.8 * asked_of["one"], (proven, asked_of)
    assert proven["more"] > 0.4 * asked_of["more"], (proven, asked_of)


def test_the_one_statement_ranks_as_the_read_step_by_step(db, built, user_id) -> None:
    """The lane's one statement equals the bounded read done in Python (the links, the
    boundaries, the windows read again, then scored): the same windows, scores to the bit and
    order, for every cap and size asked, proven or not, an entity weighing 0 among them."""
    rng = random.Random(23)
    compared = 0
    with db.connection() as conn:
        for _ in range(120):
            asked, filters = _question(rng, built)
            weights = _weights(conn, user_id, asked, filters.as_of)
            if len(weights) > 1 and rng.random() < 0.2:
                weights[min(weights)] = 0.0  # in every window: no window ranks for it alone
            for k, cap in ((1, 4), (5, 8), (20, 32), (5, 64), (40, 600)):
                got = entity_links.ranked_windows(
                    conn, user_id, weights, cap, k, filters, text_lanes.AROUND_WEIGHT
                )
                step_by_step, _ = ref.bounded_ranking(conn, user_id, weights, k, filters, cap)
                assert [tuple(w) for w in got] == [
                    (c.segment_id, c.scale, c.start, c.end, c.score) for c in step_by_step
                ], (asked, filters, k, cap)
                compared += bool(got)
    assert compared > 400


def test_the_lane_reads_once_and_never_every_link(stack, built, user_id, monkeypatch) -> None:
    """With caps far below the housemates' links, many rankings are not proven: the lane
    still answers from its one bounded read (one statement), the best windows it reached."""
    from bench import plans

    monkeypatch.setattr(text_lanes, "LINK_CAP_MIN", 8)
    rng = random.Random(5)
    unproven = 0
    logged = Database(
        stack.database_url, min_size=1, max_size=2, cursor_factory=plans.RecordingCursor
    )
    reader = MemoryReader(logged)
    try:
        with logged.connection() as conn:
            for _ in range(40):
                asked, filters = _question(rng, built)
                weights = _weights(conn, user_id, asked, filters.as_of)
                with plans.recording() as log:
                    lane = text_lanes.ranked_windows(reader, user_id, weights, 2, filters)
                assert len(log.statements) == 1  # one bounded read, ranked where it is
                ranked, exact = ref.bounded_ranking(conn, user_id, weights, 2, filters, 8)
                assert lane == ranked
                unproven += not exact
                assert all(c.scale == 30 and c.score > 0 for c in lane)
    finally:
        logged.close()
    assert unproven > 0  # the path where the proof falls short was taken


def test_a_housemate_alone_reads_only_its_newest_windows(db, built, user_id) -> None:
    """The commonest entity alone, asked now: every window holding it ties, the newest win,
    and a cap of a few times ``k`` proves them."""
    housemate = built.entities[0]
    with db.connection() as conn:
        weights = _weights(conn, user_id, {housemate: 1.0}, None)
        rows = ref.newest_links(conn, user_id, [housemate], 12, Filters())
        got = ref.proven(conn, user_id, weights, 5, Filters(), 12)
        exact = ref.exact_ranking(conn, user_id, weights, 5, Filters())
    assert len(rows) == 24  # 12 as subject, 12 as object, of ~430 windows
    assert got is not None and got == exact
    assert [c.end for c in got] == sorted((c.end for c in got), reverse=True)
    assert len({c.score for c in got}) == 1


def test_a_window_near_an_older_link_of_a_capped_entity_is_read_again(
    db, user_id, settings
) -> None:
    """B is capped (its fourth link, newest first, is in c2 of the 3 min window P); c3-c5 hold
    A and ended after B's boundary, but P began before it: that B is near them, and c2 itself,
    are known only once P's window is read again. Without that, B's three later windows would
    be the top three, and the bound would prove them."""
    vec = np.ones(settings.text_embed_dim, np.float32)
    with db.transaction() as conn:
        users.ensure_user(conn, user_id)
        a, b, other = (
            entities.insert_canonical_entity(conn, user_id, name, vec).id
            for name in ("A", "B", "other")
        )
        parent = make_segment(conn, user_id, T0, 180, processing_status="complete")
        kids = [
            make_segment(
                conn, user_id, T0 + timedelta(seconds=30 * i), processing_status="complete"
            )
            for i in range(6)
        ]
        segments.link_children(conn, user_id, parent, kids)
        later = [
            make_segment(
                conn, user_id, T0 + timedelta(minutes=10 + i), processing_status="complete"
            )
            for i in range(3)
        ]
        for seg, names in [
            (kids[2], [b]),
            *((k, [a]) for k in kids[3:]),
            *((x, [b]) for x in later),
        ]:
            rows = [
                TripleWrite(
                    subject_entity_id=e, predicate="is", object_entity_id=other, embedding=vec
                )
                for e in names
            ]
            triples.insert_triples(conn, user_id, seg, "episodic", rows)
    with db.connection() as conn:
        weights = _weights(conn, user_id, {a: 0.7, b: 1.0}, None)
        assert weights[a] < weights[b] < 2 * weights[a]
        exact = ref.exact_ranking(conn, user_id, weights, 3, Filters())
        got = ref.proven(conn, user_id, weights, 3, Filters(), 4)
    # c2 holds B near A, c5 and c4 hold A near B: all above B's own windows, near nothing
    assert [c.segment_id for c in exact] == [kids[2], kids[5], kids[4]]
    assert got == exact


def test_kept_window_counts_equal_the_store_count(db, built, user_id, settings, monkeypatch):
    """The lane's document frequencies, kept in process and brought up to date with the
    triples written since, equal a count in the store: first read, after new windows, and
    after the newest triples are deleted (read again)."""
    from worldmm.memory.retrieval import frequencies

    clock = [0.0]
    monkeypatch.setattr(frequencies.time, "monotonic", lambda: clock[0])
    whole: list[list[int]] = []
    real = entity_links.newest_windows
    monkeypatch.setattr(
        entity_links,
        "newest_windows",
        lambda c, u, ids, *a: whole.append(list(ids)) or real(c, u, ids, *a),
    )
    memo = frequencies.EntityWindowsMemo()
    ends, asked = built.ends, built.entities
    vec = np.ones(settings.text_embed_dim, np.float32)

    def same(conn) -> None:
        base = read_all(conn, user_id)[0].base_ends  # every entity is under the cap here
        for as_of in (None, ends[-1], ends[len(ends) // 2], ends[3], ends[-1] + timedelta(hours=1)):
            kept = memo.counts(conn, db, user_id, asked, as_of, base)
            assert kept == ref.window_counts(conn, user_id, asked, as_of)

    with db.connection() as conn:
        base = read_all(conn, user_id)[0].base_ends
        assert memo.counts(conn, db, user_id, asked[:3], None, base)
        same(conn)  # the rest read when first asked
        assert whole == [asked[:3], asked[3:]]
        with db.transaction() as tx:  # new windows naming a housemate and a rare thing
            for i in range(12):
                at = ends[-1] + timedelta(seconds=30 * i)
                kid = make_segment(tx, user_id, at, 30, processing_status="complete")
                named = [asked[0], asked[-1]] if i % 3 == 0 else [asked[0]]
                facts = [
                    TripleWrite(subject_entity_id=e, predicate="uses", object_entity_id=asked[1],
                                embedding=vec)
                    for e in named
                ]  # fmt: skip
                triples.insert_triples(tx, user_id, kid, "episodic", facts)
        clock[0] += frequencies.TERM_STATS_CHECK_S
        same(conn)
        assert len(whole) == 2  # only the new triples were read
        with db.transaction() as tx:  # the newest windows forgotten: the top id goes down
            tx.execute(
                "DELETE FROM segments WHERE user_id = %s AND window_end > %s", (user_id, ends[-1])
            )
        clock[0] += frequencies.TERM_STATS_CHECK_S
        same(conn)
        assert len(whole) == 3  # read again


def test_a_common_entitys_count_is_read_bounded_and_estimated_close(
    db, built, user_id, monkeypatch
):
    """Past the cap, an entity's first read stops at its newest links, and its count is the
    windows read plus its rate in them times the windows not read: within sampling spread of
    the store's count at any ``as_of`` on this steady memory; entities under the cap are
    counted exactly."""
    from worldmm.memory.retrieval import frequencies

    cap = 40
    monkeypatch.setattr(frequencies, "WINDOW_COUNT_CAP", cap)
    read: list[int] = []
    real = entity_links.newest_windows
    monkeypatch.setattr(
        entity_links,
        "newest_windows",
        lambda c, u, ids, n, scale: read.append(n) or real(c, u, ids, n, scale),
    )
    memo, ends, asked = frequencies.EntityWindowsMemo(), built.ends, built.entities
    with db.connection() as conn:
        base = read_all(conn, user_id)[0].base_ends
        sampled = 0
        for as_of in (None, ends[-1], ends[len(ends) // 2], ends[len(ends) // 4]):
            got = memo.counts(conn, db, user_id, asked, as_of, base)
            exact = ref.window_counts(conn, user_id, asked, as_of)
            for e in asked:
                if e in memo._users[(id(db), user_id)].cutoffs:
                    sampled += 1
                    # a binomial count's spread: about its square root
                    assert abs(got[e] - exact[e]) <= 3 * exact[e] ** 0.5 + 2, (e, as_of)
                else:
                    assert got[e] == exact[e]
    assert sampled >= 8  # the commoner entities were sampled, at every as_of
    assert read == [cap]  # one read, of at most the cap per side
    # a sampled entity's windows are those its newest ``cap`` links per side name, after its
    # boundary, as the links read one by one give them
    with db.connection() as conn:
        rows = ref.newest_links(conn, user_id, asked, cap, scale=30)
        got = real(conn, user_id, asked, cap, 30)
    bounds = ref.boundaries(rows, cap)
    assert set(bounds) == {e for e in asked if got[e].cutoff is not None} and bounds
    for e in asked:
        v = bounds.get(e)
        want = {r.segment_id for r in rows if r.entity_id == e and (v is None or r.valid_from > v)}
        assert sorted(got[e].segments) == sorted(want)
        assert got[e].cutoff == (v.timestamp() if v is not None else None)


def test_the_estimate_counts_what_is_known_and_extrapolates_the_rest() -> None:
    from worldmm.memory.retrieval.frequencies import estimate

    base = np.arange(1.0, 101.0)  # 100 windows, ends 1..100
    known = np.array([62.0, 70.0, 71.0, 80.0, 90.0])  # 5 of the 40 windows after 60: 1 in 8
    assert estimate(known, 60.0, base, float("inf")) == 13  # 5 known + 60 / 8 (7.5)
    assert estimate(known, 60.0, base, 80.0) == 12  # 4 known + 7.5
    assert estimate(known, 60.0, base, 30.0) == 4  # 30 / 8 (3.75), none known yet
    assert estimate(known, 60.0, base, 0.5) == 0  # before every window
    assert estimate(np.array([]), 100.0, base, 200.0) == 0  # nothing read after the cutoff
