"""as_of (event time): later segments, not-yet-valid and already-invalidated facts are hidden."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.store import DIM, T0, insert_one, make_segment, triple, unit_vector
from tests.fixtures.store_reads import triples_for_graph
from worldmm.store import entities, segments, triples, visual
from worldmm.store.distribute import is_citus
from worldmm.store.models import TripleWrite

pytestmark = pytest.mark.integration
S = timedelta(seconds=1)


def test_segments_and_episodic_triples_exist_once_their_window_ends(conn, user_id) -> None:
    early = make_segment(conn, user_id, T0)  # ends T0+30
    late = make_segment(conn, user_id, T0 + 60 * S)  # ends T0+90
    e = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))
    for seg, seed in ((early, 2), (late, 3)):
        insert_one(
            conn, user_id, seg, "episodic", triple(e.id, f"did {seed}", seed, object_literal="x")
        )
    visual.upsert_visual_embedding(conn, user_id, early, unit_vector(1536, 1))
    visual.upsert_visual_embedding(conn, user_id, late, unit_vector(1536, 2))
    t = T0 + 60 * S  # the late window has started but not ended
    assert [s.id for s in segments.list_segments(conn, user_id, as_of=t)] == [early]
    assert [s.id for s in segments.list_segments(conn, user_id, as_of=T0 + 90 * S)] == [early, late]
    graph = triples_for_graph(conn, user_id, "episodic", as_of=t)
    assert [g.segment_id for g in graph] == [early]
    assert graph[0].window_end == T0 + 30 * S
    both = [early, late]
    top = triples.top_episodic_in_segments(conn, user_id, unit_vector(DIM, 3), 5, both, as_of=t)
    assert [tr.segment_id for tr, _ in top] == [early]
    # without as_of the later window's fact is the nearer one
    top = triples.top_episodic_in_segments(conn, user_id, unit_vector(DIM, 3), 5, both)
    assert [tr.segment_id for tr, _ in top] == [late, early]
    assert [
        s.id for s, _ in visual.search_visual(conn, user_id, unit_vector(1536, 2), 5, as_of=t)
    ] == [early]


def test_semantic_validity_window(conn, user_id) -> None:
    seg1 = make_segment(conn, user_id, T0, scale=600)  # ends T0+600
    seg2 = make_segment(conn, user_id, T0 + 600 * S, scale=600)  # ends T0+1200
    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    old = insert_one(
        conn, user_id, seg1, "semantic", triple(me.id, "drinks", 2, object_literal="coffee")
    )
    tea = triple(
        me.id,
        "drinks",
        3,
        object_literal="tea",
        evidence_segment_ids=[seg1, seg2],
        origin="consolidated",
    )
    new = insert_one(conn, user_id, seg2, "semantic", tea)
    assert triples.invalidate_triples(conn, user_id, [old, new], T0 + 1200 * S, new) == 1
    # invalidating again changes nothing (idempotent)
    assert triples.invalidate_triples(conn, user_id, [old], T0 + 1300 * S, new) == 0

    def active(at):
        return [t.object_name for t in triples.list_semantic(conn, user_id, as_of=at)]

    assert active(T0 + 599 * S) == []  # nothing known yet
    assert active(T0 + 600 * S) == ["coffee"]  # valid from the window end
    assert active(T0 + 1199 * S) == ["coffee"]
    assert active(T0 + 1200 * S) == ["tea"]  # replaced at the summary's end
    assert active(None) == ["tea"]
    history = triples.list_semantic(conn, user_id, history=True)
    assert [(t.object_name, t.replaced_by) for t in history] == [("coffee", new), ("tea", None)]
    assert history[0].invalidated_at == T0 + 1200 * S
    for at, want in ((T0 + 900 * S, [old]), (None, [new])):
        sims = triples.similar_active_semantic_triples(
            conn, user_id, unit_vector(DIM, 2), -1, 5, as_of=at
        )
        assert [t.id for t, _ in sims] == want
        graph = triples_for_graph(conn, user_id, "semantic", as_of=at)
        assert [g.id for g in graph] == want


def test_similar_semantic_threshold(conn, user_id) -> None:
    seg = make_segment(conn, user_id, T0, scale=600)
    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    base = unit_vector(DIM, 7)
    ids = triples.insert_triples(
        conn,
        user_id,
        seg,
        "semantic",
        [
            TripleWrite(
                subject_entity_id=me.id, predicate="likes", object_literal=lit, embedding=emb
            )
            for lit, emb in (("cats", base), ("rain", unit_vector(DIM, 8)))
        ],
    )
    hits = triples.similar_active_semantic_triples(conn, user_id, base, 0.6, 20)
    assert [(t.id, round(c, 3)) for t, c in hits] == [(ids[0], 1.0)]


def test_fingerprint_changes_on_insert_invalidate_and_forget(conn, user_id) -> None:
    from worldmm.store.purge import forget_range

    seg = make_segment(conn, user_id, T0, scale=600)
    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    seen = [triples.triples_fingerprint(conn, user_id, "semantic")]
    a = insert_one(conn, user_id, seg, "semantic", triple(me.id, "likes", 2, object_literal="tea"))
    seen.append(triples.triples_fingerprint(conn, user_id, "semantic"))
    triples.invalidate_triples(conn, user_id, [a], T0 + 700 * S, None)
    seen.append(triples.triples_fingerprint(conn, user_id, "semantic"))
    forget_range(conn, user_id, T0, T0 + 60 * S)
    seen.append(triples.triples_fingerprint(conn, user_id, "semantic"))
    # every change moves the stamp on (the empty state may repeat: same content, same graph)
    assert all(a != b for a, b in zip(seen, seen[1:], strict=False)), seen
    assert len(set(seen[:3])) == 3
    assert triples.triples_fingerprint(conn, user_id, "episodic", scale=30) == "0:0:0"
    graph = triples_for_graph(conn, user_id, "semantic")
    assert graph == []


def counted_fingerprint(conn, user_id: str, memory_type: str, scale: int | None = None) -> str:
    """``triples.triples_fingerprint`` counted from the rows themselves (a scan of that scale's
    rows); what the trigger-kept counters must agree with, except that their highest id
    never goes down."""
    where = "user_id = %s AND memory_type = %s" + (" AND scale_seconds = %s" if scale else "")
    args: tuple = (user_id, memory_type) + ((scale,) if scale else ())
    row = conn.execute(
        f"SELECT count(*), COALESCE(max(id), 0), count(invalidated_at) FROM triples WHERE {where}",
        args,
    ).fetchone()
    assert row is not None  # an aggregate always returns one row
    return f"{row[0]}:{row[1]}:{row[2]}"


def _agrees(conn, user_id: str, memory_type: str, scale: int | None) -> None:
    """The trigger-kept fingerprint equals the one counted from the rows, but for a highest
    id that never goes down."""
    kept = triples.parse_fingerprint(triples.triples_fingerprint(conn, user_id, memory_type, scale))
    counted = triples.parse_fingerprint(counted_fingerprint(conn, user_id, memory_type, scale))
    assert kept is not None and counted is not None
    assert (kept[0], kept[2]) == (counted[0], counted[2]), (memory_type, scale, kept, counted)
    assert kept[1] >= counted[1]


def _saw(conn, user_id: str, segment: int, subject: int, objects, memory_type="episodic"):
    """Insert "<subject> saw <object>" triples into ``segment``; return their ids."""
    rows = [triple(subject, "saw", len(o), object_literal=o) for o in objects]
    return triples.insert_triples(conn, user_id, segment, memory_type, rows)


def test_kept_fingerprint_follows_every_kind_of_write(conn, user_id, other_user) -> None:
    """Inserts (several scales, one statement), a replayed insert, a replaced segment's
    deletes, soft deletes, a forget and another user's writes: after each, every counter
    agrees with the rows."""
    from worldmm.store.purge import forget_range

    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    keys = [("episodic", 30), ("episodic", 180), ("episodic", None), ("semantic", None)]

    def write(seg: int, memory_type: str, objects: list[str]) -> list[int]:
        return _saw(conn, user_id, seg, me.id, objects, memory_type)

    def check() -> None:
        for memory_type, scale in keys:
            _agrees(conn, user_id, memory_type, scale)

    segs = [make_segment(conn, user_id, T0 + i * 30 * S) for i in range(4)]
    coarse = make_segment(conn, user_id, T0, scale=180)
    for i, seg in enumerate(segs):
        write(seg, "episodic", [f"thing {i}", f"other {i}"])
    write(coarse, "episodic", ["summary"])
    check()
    assert triples.triples_fingerprint(conn, user_id, "episodic", 30) == (
        counted_fingerprint(conn, user_id, "episodic", 30)
    )
    before = triples.triples_fingerprint(conn, user_id, "episodic", 30)
    write(segs[0], "episodic", ["thing 0"])  # a replayed window: same natural key, no change
    assert triples.triples_fingerprint(conn, user_id, "episodic", 30) == before
    # a replayed window that extracted something else: one row replaced, one new
    new_thing = triple(me.id, "saw", 5, object_literal="a new thing")
    triples.replace_episodic_triples(conn, user_id, segs[1], [new_thing])
    check()
    facts = write(coarse, "semantic", ["tea", "coffee", "rain"])
    triples.invalidate_triples(conn, user_id, facts[:2], T0 + 300 * S, facts[2])
    check()
    assert triples.parse_fingerprint(triples.triples_fingerprint(conn, user_id, "semantic"))[2] == 2
    # one statement that touches several scales at once
    conn.execute(
        "DELETE FROM triples WHERE user_id = %s AND object_literal LIKE 'other%%'", (user_id,)
    )
    check()
    forget_range(conn, user_id, T0, T0 + 60 * S)
    check()
    # someone else's writes never move this user's counters
    mine = [triples.triples_fingerprint(conn, user_id, t, s) for t, s in keys]
    them = entities.insert_canonical_entity(conn, other_user, "I", unit_vector(DIM, 1))
    _saw(conn, other_user, make_segment(conn, other_user, T0), them.id, ["x"])
    assert [triples.triples_fingerprint(conn, user_id, t, s) for t, s in keys] == mine
    _agrees(conn, other_user, "episodic", 30)


def test_purging_a_user_drops_their_counters(conn, user_id) -> None:
    from worldmm.store.purge import purge_user

    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    seg = make_segment(conn, user_id, T0)
    _saw(conn, user_id, seg, me.id, ["x"])
    assert triples.triples_fingerprint(conn, user_id, "episodic", 30).startswith("1:")
    purge_user(conn, user_id)
    (left,) = conn.execute(
        "SELECT count(*) FROM triple_counts WHERE user_id = %s", (user_id,)
    ).fetchone()
    assert left == 0
    assert triples.triples_fingerprint(conn, user_id, "episodic", 30) == "0:0:0"


def test_two_writers_of_one_scale_queue_and_both_count(conn, db, user_id) -> None:
    """A second transaction writing the same user's scale waits on the counter row until
    the first commits, then counts its own rows on top: no deadlock, nothing lost."""
    import threading
    import time

    me = entities.insert_canonical_entity(conn, user_id, "I", unit_vector(DIM, 1))
    first, second = (make_segment(conn, user_id, T0 + i * 30 * S) for i in range(2))
    conn.commit()

    def rows(tag: str) -> list[TripleWrite]:
        return [triple(me.id, "saw", i + 2, object_literal=f"{tag} {i}") for i in range(3)]

    done: list[BaseException | None] = []
    with db.connection() as a, db.connection() as b:
        triples.insert_triples(a, user_id, first, "episodic", rows("a"))
        # on Citus the wait is on the worker holding the wearer's shards: its global view
        if is_citus(conn):
            (b_pid,) = b.execute("SELECT citus_backend_gpid()").fetchone()
            waits = "SELECT count(*) > 0 FROM citus_lock_waits WHERE waiting_gpid = %s"
        else:
            (b_pid,) = b.execute("SELECT pg_backend_pid()").fetchone()
            waits = (
                "SELECT count(*) > 0 FROM pg_stat_activity"
                " WHERE pid = %s AND wait_event_type = 'Lock'"
            )

        def write_b() -> None:
            try:
                triples.insert_triples(b, user_id, second, "episodic", rows("b"))
                b.commit()
                done.append(None)
            except BaseException as exc:  # reported to the test below
                done.append(exc)

        writer = threading.Thread(target=write_b)
        writer.start()
        deadline = time.monotonic() + 30
        waiting = False
        try:
            while not waiting and time.monotonic() < deadline:  # poll the server, not a sleep
                (waiting,) = conn.execute(waits, (b_pid,)).fetchone()
                conn.rollback()  # a fresh snapshot of the activity each time
        finally:
            a.commit()  # whatever was seen, the second writer must not wait for ever
            writer.join(timeout=30)
        assert waiting, "the second writer never waited on the counter row"
        assert done == [None]
    assert triples.triples_fingerprint(conn, user_id, "episodic", 30).startswith("6:")
    _agrees(conn, user_id, "episodic", 30)
