"""Writes are idempotent (replays leave one row) and constraints hold."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from tests.fixtures.store import T0, insert_alias, make_segment, unit_vector
from tests.fixtures.store_reads import list_aliases
from worldmm.store import entities, frames, segments, triples
from worldmm.store.errors import NotFoundError
from worldmm.store.models import AudioChunkRow, FrameRow, SegmentWrite, TripleWrite

pytestmark = pytest.mark.integration
DIM = 384


def _count(conn: psycopg.Connection, table: str, user_id: str) -> int:
    (n,) = conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = %s", (user_id,)).fetchone()
    return n


def test_segment_replay_overwrites_and_keeps_id(conn, user_id) -> None:
    write = SegmentWrite(
        user_id=user_id,
        session_id="s1",
        scale_seconds=30,
        window_start=T0,
        window_end=T0 + timedelta(seconds=30),
        caption="first",
        processing_status="pending",
        source_topic="worldmm.frames",
        source_partition=0,
        source_offset_first=10,
        source_offset_last=20,
        model_versions={"caption": "m1"},
    )
    first = segments.upsert_segment(conn, write)
    second = segments.upsert_segment(
        conn, write.model_copy(update={"caption": "second", "processing_status": "complete"})
    )
    assert first == second
    assert _count(conn, "segments", user_id) == 1
    seg = segments.get_segment(conn, user_id, first)
    assert seg is not None
    assert (seg.caption, seg.processing_status, seg.attempts) == ("second", "complete", 2)
    assert seg.model_versions == {"caption": "m1"} and seg.source_offset_last == 20
    assert seg.window_start == T0 and seg.window_start.tzinfo is not None


def test_segment_status_children_and_work_list(conn, user_id) -> None:
    kids = [make_segment(conn, user_id, T0 + timedelta(seconds=30 * i)) for i in range(6)]
    parent = make_segment(conn, user_id, T0, scale=180)
    assert segments.link_children(conn, user_id, parent, kids) == 6
    assert [s.id for s in segments.children_of(conn, user_id, parent)] == kids
    segments.set_segment_status(conn, user_id, kids[0], "complete")
    segments.set_segment_status(conn, user_id, kids[1], "failed", error="llm: bad json")
    make_segment(conn, user_id, T0 + timedelta(seconds=60), visual_status="pending")  # kids[2]
    todo = segments.segments_needing_work(conn, user_id, statuses=("failed",))
    assert [(s.id, s.error) for s in todo] == [(kids[1], "llm: bad json")]
    assert [s.id for s in segments.segments_needing_work(conn, user_id, visual=True)] == [kids[2]]
    pending = {s.id for s in segments.segments_needing_work(conn, user_id)}
    assert pending == set(kids[1:]) | {parent}
    with pytest.raises(NotFoundError):
        segments.set_segment_status(conn, "someone-else", kids[0], "complete")


def test_list_segments_time_range_and_scale(conn, user_id) -> None:
    ids = [make_segment(conn, user_id, T0 + timedelta(seconds=30 * i)) for i in range(4)]
    hour = make_segment(conn, user_id, T0, scale=3600)
    got = segments.list_segments(
        conn, user_id, start=T0 + timedelta(seconds=40), end=T0 + timedelta(seconds=90)
    )
    assert [s.id for s in got] == [hour, ids[1], ids[2]]
    assert [s.id for s in segments.list_segments(conn, user_id, scale=30, limit=2)] == ids[:2]


def test_keyset_pages_neither_skip_nor_repeat(conn, user_id) -> None:
    # the hour is written first: pages follow (window_start, scale), not insertion order
    hour = make_segment(conn, user_id, T0, scale=3600)
    ids = [make_segment(conn, user_id, T0 + timedelta(seconds=30 * i)) for i in range(3)]
    seen, after = [], None
    for _ in range(5):  # bounded: a cursor that is ignored fails instead of looping
        page = segments.list_segments(conn, user_id, limit=1, after=after)
        seen += [s.id for s in page]
        after = (page[-1].window_start, page[-1].scale_seconds) if page else after
    assert seen == [ids[0], hour, ids[1], ids[2]]
    with pytest.raises(ValueError):
        segments.list_segments(conn, user_id, descending=True, after=after)
    for seq, key in enumerate(["f/b.jpg", "f/a.jpg", "f/c.jpg"]):  # two share a capture time
        at = T0 if seq < 2 else T0 + timedelta(seconds=1)
        frames.insert_frame(conn, FrameRow(user_id=user_id, captured_at=at, seq=seq, blob_key=key))
    keys, cursor = [], None
    for _ in range(4):
        page = frames.list_frames(conn, user_id, limit=1, after=cursor)
        keys += [f.blob_key for f in page]
        cursor = (page[-1].captured_at, page[-1].id) if page else cursor
    assert keys == ["f/b.jpg", "f/a.jpg", "f/c.jpg"]


def test_triple_check_rejects_both_or_neither_object(conn, user_id) -> None:
    seg = make_segment(conn, user_id, T0)
    a = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))
    b = entities.insert_canonical_entity(conn, user_id, "Bob", unit_vector(DIM, 2))
    insert = (
        "INSERT INTO triples (user_id, memory_type, segment_id, subject_entity_id, predicate,"
        " object_entity_id, object_literal, embedding, valid_from)"
        " VALUES (%s, 'episodic', %s, %s, 'met', %s, %s, %s, %s)"
    )
    for obj, lit in ((b.id, "literal too"), (None, None)):
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute(insert, (user_id, seg, a.id, obj, lit, unit_vector(DIM, 3), T0))
    with pytest.raises(ValueError, match="exactly one"):
        TripleWrite(subject_entity_id=a.id, predicate="met", embedding=unit_vector(DIM, 3))


def test_triples_replay_leaves_one_row_and_merges_evidence(conn, user_id) -> None:
    seg = make_segment(conn, user_id, T0)
    other = make_segment(conn, user_id, T0 + timedelta(seconds=30))
    a = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))
    b = entities.insert_canonical_entity(conn, user_id, "Bob", unit_vector(DIM, 2))
    rows = [
        TripleWrite(
            subject_entity_id=a.id,
            predicate="talks to",
            object_entity_id=b.id,
            embedding=unit_vector(DIM, 3),
        ),
        TripleWrite(
            subject_entity_id=a.id,
            predicate="arrived at",
            object_literal="9:00 AM",
            embedding=unit_vector(DIM, 4),
        ),
    ]
    first = triples.insert_triples(conn, user_id, seg, "episodic", rows)
    again = triples.insert_triples(conn, user_id, seg, "episodic", rows)
    assert first == again and len(set(first)) == 2
    assert _count(conn, "triples", user_id) == 2
    # episodic valid_from is the segment's window end, evidence defaults to the segment
    got = {t.id: t for t in triples.get_triples(conn, user_id, first)}
    t0 = got[first[0]]
    assert t0.valid_from == T0 + timedelta(seconds=30) and t0.evidence_segment_ids == [seg]
    assert t0.as_list() == ["Alice", "talks to", "Bob"] and t0.scale_seconds == 30
    assert got[first[1]].object_name == "9:00 AM" and got[first[1]].object_is_literal
    # a semantic fact restated with new evidence keeps one row and gains the evidence
    sem = [rows[0].model_copy(update={"evidence_segment_ids": [seg]})]
    s1 = triples.insert_triples(conn, user_id, seg, "semantic", sem)
    sem2 = [rows[0].model_copy(update={"evidence_segment_ids": [other]})]
    s2 = triples.insert_triples(conn, user_id, seg, "semantic", sem2)
    assert s1 == s2
    assert triples.get_triples(conn, user_id, s1)[0].evidence_segment_ids == [seg, other]


def test_a_fact_given_twice_in_one_call_is_written_once(conn, user_id) -> None:
    """One statement writes a call's rows: the same fact twice (another case, an alias of the
    subject) is one row, with both rows' evidence, and each row gets its id back in order."""
    seg = make_segment(conn, user_id, T0, scale=600)
    other = make_segment(conn, user_id, T0 + timedelta(seconds=600), scale=600)
    alice = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))
    insert_alias(conn, user_id, "Ali", alice.id, unit_vector(DIM, 2))
    (ali,) = conn.execute(
        "SELECT id FROM entities WHERE user_id = %s AND surface_form = 'Ali'", (user_id,)
    ).fetchone()

    def row(subject: int, predicate: str, lit: str, evidence: int) -> TripleWrite:
        return TripleWrite(
            subject_entity_id=subject,
            predicate=predicate,
            object_literal=lit,
            embedding=unit_vector(DIM, 3),
            evidence_segment_ids=[evidence],
        )

    given = [row(alice.id, "Holds", "Cup", seg), row(ali, "holds ", "cup", other)]
    ids = triples.insert_triples(
        conn, user_id, seg, "semantic", [*given, row(ali, "holds", "pen", seg)]
    )
    assert ids[0] == ids[1] != ids[2]
    fact = triples.get_triples(conn, user_id, [ids[0]])[0]
    assert (fact.subject_entity_id, fact.predicate, fact.object_literal) == (
        alice.id,
        "Holds",
        "Cup",
    )
    assert fact.evidence_segment_ids == [seg, other]
    assert _count(conn, "triples", user_id) == 2
    assert triples.insert_triples(conn, user_id, seg, "semantic", given[::-1]) == ids[:2]


def test_entities_idempotent_and_alias_resolution(conn, user_id) -> None:
    kat = entities.insert_canonical_entity(conn, user_id, "Katrina", unit_vector(DIM, 1))
    again = entities.insert_canonical_entity(conn, user_id, "katrina ", unit_vector(DIM, 9))
    assert again.id == kat.id and kat.is_canonical and kat.name == "Katrina"
    alias = insert_alias(conn, user_id, "Kate", kat.id, unit_vector(DIM, 2))
    assert alias.id == kat.id
    assert insert_alias(conn, user_id, "KATE", kat.id, unit_vector(DIM, 2)).id == kat.id
    # inserting an alias's surface as a new canonical returns the canonical it maps to
    assert entities.insert_canonical_entity(conn, user_id, "kate", unit_vector(DIM, 3)).id == kat.id
    assert _count(conn, "entities", user_id) == 2
    found = entities.find_entity_by_surface(conn, user_id, "kAtE")
    assert found is not None and found.id == kat.id and found.canonical_name == "Katrina"
    assert entities.find_entity_by_surface(conn, user_id, "Bob") is None
    assert [a.surface_form for a in list_aliases(conn, user_id, kat.id)] == ["Kate"]
    # a triple naming the alias id points at the canonical entity
    seg = make_segment(conn, user_id, T0)
    kate_row = conn.execute(
        "SELECT id FROM entities WHERE user_id = %s AND surface_form = 'Kate'", (user_id,)
    ).fetchone()[0]
    (tid,) = triples.insert_triples(
        conn,
        user_id,
        seg,
        "episodic",
        [
            TripleWrite(
                subject_entity_id=kate_row,
                predicate="cooks",
                object_literal="pasta",
                embedding=unit_vector(DIM, 5),
            )
        ],
    )
    assert triples.get_triples(conn, user_id, [tid])[0].subject_entity_id == kat.id


def test_nearest_canonical_entities_threshold(conn, user_id) -> None:
    base = unit_vector(DIM, 1)
    kat = entities.insert_canonical_entity(conn, user_id, "Katrina", base)
    entities.insert_canonical_entity(conn, user_id, "Paris", unit_vector(DIM, 2))
    insert_alias(conn, user_id, "Kate", kat.id, base)  # aliases are never candidates
    hits = entities.nearest_canonical_entities(conn, user_id, base, min_cosine=0.6, k=5)
    assert [(e.id, round(c, 4)) for e, c in hits] == [(kat.id, 1.0)]
    # random 384-d vectors are nearly orthogonal: a low threshold admits both, in order
    both = entities.nearest_canonical_entities(conn, user_id, base, min_cosine=-1.0, k=5)
    assert [e.name for e, _ in both] == ["Katrina", "Paris"]
    assert both[0][1] > both[1][1]


def test_frames_and_audio_idempotent(conn, user_id) -> None:
    f = FrameRow(
        user_id=user_id, session_id="s", captured_at=T0, seq=1, blob_key="f/1.jpg", late=True
    )
    assert frames.insert_frame(conn, f) == frames.insert_frame(conn, f)
    frames.insert_frame(conn, f.model_copy(update={"late": False}))
    frames.insert_frame(
        conn,
        FrameRow(user_id=user_id, captured_at=T0 + timedelta(seconds=5), seq=2, blob_key="f/2.jpg"),
    )
    got = frames.list_frames(conn, user_id, T0, T0 + timedelta(seconds=5))
    assert [(x.blob_key, x.late) for x in got] == [("f/1.jpg", False)]
    assert _count(conn, "frames", user_id) == 2
    a = AudioChunkRow(
        user_id=user_id, started_at=T0, duration_ms=2000, sample_rate=16000, blob_key="a/1.wav"
    )
    assert frames.insert_audio_chunk(conn, a) == frames.insert_audio_chunk(conn, a)
    # overlap: a chunk from T0 to T0+2s is in [T0+1s, T0+3s)
    chunks = frames.list_audio_chunks(
        conn, user_id, T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)
    )
    assert [c.blob_key for c in chunks] == ["a/1.wav"]
    assert frames.list_audio_chunks(conn, user_id, T0 + timedelta(seconds=2)) == []


def test_replace_episodic_triples_drops_stale_ones(conn, user_id) -> None:
    seg = make_segment(conn, user_id, T0)
    a = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))

    def row(lit: str, seed: int) -> TripleWrite:
        return TripleWrite(
            subject_entity_id=a.id,
            predicate="holds",
            object_literal=lit,
            embedding=unit_vector(DIM, seed),
        )

    first = triples.replace_episodic_triples(conn, user_id, seg, [row("cup", 2), row("pen", 3)])
    second = triples.replace_episodic_triples(conn, user_id, seg, [row("cup", 2), row("key", 4)])
    assert second[0] == first[0] and second[1] not in first
    left = triples.triples_for_segments(conn, user_id, [seg])
    assert sorted(t.object_name for t in left) == ["cup", "key"]


def test_database_check_schema(db, stack) -> None:
    from worldmm.settings import load_settings
    from worldmm.store.migrate import SchemaError

    db.check_schema(load_settings())
    with pytest.raises(SchemaError):
        db.check_schema(load_settings(visual_embed_dim=512))
