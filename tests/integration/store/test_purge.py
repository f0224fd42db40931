"""Purging a user leaves no row of theirs anywhere; forgetting a range removes it and what
hangs off it, and hands back the blob keys."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.store import (
    DIM,
    T0,
    insert_alias,
    insert_one,
    make_segment,
    triple,
    unit_vector,
)
from worldmm.store import audit, entities, frames, purge, segments, triples, visual
from worldmm.store.models import AudioChunkRow, FrameRow
from worldmm.store.users import create_user, upsert_session

pytestmark = pytest.mark.integration
S = timedelta(seconds=1)


def _populate(conn, user: str) -> dict:
    """Two 30 s windows with everything hanging off them, a 3 min parent, captures."""
    upsert_session(conn, user, "s1", started_at=T0)
    seg_a = make_segment(conn, user, T0, session_id="s1")
    seg_b = make_segment(conn, user, T0 + 300 * S, session_id="s1")
    parent = make_segment(conn, user, T0, scale=180)
    segments.link_children(conn, user, parent, [seg_a])
    alice = entities.insert_canonical_entity(conn, user, "Alice", unit_vector(DIM, 1))
    insert_alias(conn, user, "Al", alice.id, unit_vector(DIM, 1))
    bob = entities.insert_canonical_entity(conn, user, "Bob", unit_vector(DIM, 2))
    insert_one(conn, user, seg_a, "episodic", triple(alice.id, "meets", 3, object_entity_id=bob.id))
    ep_b = insert_one(
        conn, user, seg_b, "episodic", triple(bob.id, "reads", 4, object_literal="a book")
    )
    # a semantic fact from window B that cites window A as evidence
    friends = triple(
        alice.id, "is friends with", 5, object_entity_id=bob.id, evidence_segment_ids=[seg_a, seg_b]
    )
    sem = insert_one(conn, user, seg_b, "semantic", friends)
    visual.upsert_visual_embedding(conn, user, seg_a, unit_vector(1536, 1))
    visual.upsert_visual_embedding(conn, user, seg_b, unit_vector(1536, 2))
    audit.insert_consolidation_audit(
        conn, user, {"new": sem}, "add", {"ids": [sem]}, segment_id=seg_a
    )
    for i, t in enumerate((T0 + 5 * S, T0 + 305 * S)):
        frames.insert_frame(
            conn,
            FrameRow(
                user_id=user, session_id="s1", captured_at=t, seq=i, blob_key=f"{user}/f{i}.jpg"
            ),
        )
        frames.insert_audio_chunk(
            conn,
            AudioChunkRow(
                user_id=user, started_at=t, duration_ms=4000, blob_key=f"{user}/a{i}.wav"
            ),
        )
    return {"a": seg_a, "b": seg_b, "parent": parent, "ep_b": ep_b, "bob": bob.id}


def test_purge_leaves_no_row_of_the_user(conn, other_user) -> None:
    user = "purge-" + other_user
    create_user(conn, user)
    _populate(conn, user)
    _populate(conn, other_user)
    before_other = purge.count_user_rows(conn, other_user)
    counts = purge.purge_user(conn, user)
    assert counts["users"] == 1 and counts["segments"] == 3 and counts["frames"] == 2
    tables = purge.user_tables(conn)
    # every table with a user_id column is covered, including any added later
    assert {
        "segments",
        "entities",
        "triples",
        "visual_embeddings",
        "frames",
        "audio_chunks",
        "consolidation_audit",
        "sessions",
    } <= set(tables)
    assert all(n == 0 for n in purge.count_user_rows(conn, user).values())
    assert purge.count_user_rows(conn, other_user) == before_other
    assert purge.purge_user(conn, user)["users"] == 0


def test_forget_range(conn, user_id, other_user) -> None:
    ids = _populate(conn, user_id)
    _populate(conn, other_user)
    before_other = purge.count_user_rows(conn, other_user)
    # forget the first minute: window A, its 3 min parent, their captures
    result = purge.forget_range(conn, user_id, T0, T0 + 60 * S)
    assert result.counts["segments"] == 2
    # window A's episodic triple and the semantic one citing A; window B's triple stays
    assert result.counts["triples"] == 2
    assert result.counts["visual_embeddings"] == 1 and result.counts["consolidation_audit"] == 1
    assert result.frame_blob_keys == [f"{user_id}/f0.jpg"]
    assert result.audio_blob_keys == [f"{user_id}/a0.wav"]
    assert [s.id for s in segments.list_segments(conn, user_id)] == [ids["b"]]
    left = triples.triples_for_segments(conn, user_id, [ids["b"]])
    assert [t.id for t in left] == [ids["ep_b"]]
    # Alice (and her alias) only appeared in forgotten memories; Bob is still used
    assert result.counts["entities"] == 2
    assert entities.find_entity_by_surface(conn, user_id, "Alice") is None
    assert entities.find_entity_by_surface(conn, user_id, "al") is None
    assert entities.find_entity_by_surface(conn, user_id, "Bob").id == ids["bob"]
    assert [f.blob_key for f in frames.list_frames(conn, user_id)] == [f"{user_id}/f1.jpg"]
    assert len(frames.list_audio_chunks(conn, user_id)) == 1
    assert purge.count_user_rows(conn, other_user) == before_other
    # an audio chunk that started before the range but runs into it is forgotten too
    again = purge.forget_range(conn, user_id, T0 + 308 * S, T0 + 400 * S)
    assert again.audio_blob_keys == [f"{user_id}/a1.wav"]
    assert again.frame_blob_keys == []
    with pytest.raises(ValueError):
        purge.forget_range(conn, user_id, T0, T0)


def test_forget_detaches_what_points_into_the_forgotten_range(conn, user_id) -> None:
    """A summary that goes leaves its surviving children without a parent, and a fact
    replaced by one that goes is no longer marked replaced (the code detaches them: no key
    that carries the wearer may set NULL on delete, schema/0019)."""
    seg_a = make_segment(conn, user_id, T0)
    seg_c = make_segment(conn, user_id, T0 + 150 * S)
    parent = make_segment(conn, user_id, T0, scale=180)
    segments.link_children(conn, user_id, parent, [seg_a, seg_c])
    alice = entities.insert_canonical_entity(conn, user_id, "Alice", unit_vector(DIM, 1))
    fact = triple(alice.id, "drinks", 6, object_literal="tea", evidence_segment_ids=[seg_c])
    old = insert_one(conn, user_id, seg_c, "semantic", fact)
    newer = triple(alice.id, "drinks", 7, object_literal="coffee", evidence_segment_ids=[seg_a])
    new = insert_one(conn, user_id, seg_c, "semantic", newer)
    triples.invalidate_triples(conn, user_id, [old], T0 + 200 * S, replaced_by=new)

    result = purge.forget_range(conn, user_id, T0, T0 + 60 * S)

    assert result.counts["segments"] == 2  # window A and the summary over it
    (left,) = segments.list_segments(conn, user_id)
    assert left.id == seg_c and left.parent_segment_id is None
    (kept,) = triples.triples_for_segments(conn, user_id, [seg_c])
    assert kept.id == old and kept.replaced_by is None
