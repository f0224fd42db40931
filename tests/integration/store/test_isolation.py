"""One user's memory is never visible to, nor referenceable by, another user."""

from __future__ import annotations

import psycopg
import pytest

from tests.fixtures.store import T0, insert_alias, make_segment, unit_vector
from tests.fixtures.store_reads import get_visual_embedding, triples_for_graph
from worldmm.store import entities, segments, triples, visual
from worldmm.store.errors import NotFoundError
from worldmm.store.models import TripleWrite

pytestmark = pytest.mark.integration
DIM, VDIM = 384, 1536


def _fill(conn, user: str, name: str) -> dict:
    """Same vectors for every user, so only the user filter can tell their rows apart."""
    seg = make_segment(conn, user, T0)
    e = entities.insert_canonical_entity(conn, user, name, unit_vector(DIM, 1))
    row = TripleWrite(
        subject_entity_id=e.id,
        predicate="likes",
        object_literal="tea",
        embedding=unit_vector(DIM, 2),
    )
    (ep,) = triples.insert_triples(conn, user, seg, "episodic", [row])
    (se,) = triples.insert_triples(conn, user, seg, "semantic", [row])
    visual.upsert_visual_embedding(conn, user, seg, unit_vector(VDIM, 3))
    return {"seg": seg, "entity": e.id, "episodic": ep, "semantic": se}


def test_vector_search_never_crosses_users(conn, user_id, other_user) -> None:
    mine = _fill(conn, user_id, "Alice")
    theirs = _fill(conn, other_user, "Alice")
    for user, ids in ((user_id, mine), (other_user, theirs)):
        ents = entities.nearest_canonical_entities(conn, user, unit_vector(DIM, 1), -1.0, 50)
        assert [e.id for e, _ in ents] == [ids["entity"]]
        both = [mine["seg"], theirs["seg"]]  # another user's segment id is not a way in
        for mt, hits in (
            (
                "episodic",
                triples.top_episodic_in_segments(conn, user, unit_vector(DIM, 2), 50, both),
            ),
            ("semantic", triples.top_semantic_triples(conn, user, unit_vector(DIM, 2), 50)),
        ):
            assert [t.id for t, _ in hits] == [ids[mt]]
            assert all(t.user_id == user for t, _ in hits)
        sims = triples.similar_active_semantic_triples(conn, user, unit_vector(DIM, 2), -1, 50)
        assert [t.id for t, _ in sims] == [ids["semantic"]]
        clips = visual.search_visual(conn, user, unit_vector(VDIM, 3), 50)
        assert [(s.id, round(score, 3)) for s, score in clips] == [(ids["seg"], 1.0)]
        assert {g.id for g in triples_for_graph(conn, user, "episodic")} == {ids["episodic"]}
        assert entities.find_entity_by_surface(conn, user, "alice").id == ids["entity"]
        assert [s.id for s in segments.list_segments(conn, user)] == [ids["seg"]]


def test_reads_by_id_are_user_scoped(conn, user_id, other_user) -> None:
    theirs = _fill(conn, other_user, "Bob")
    assert segments.get_segment(conn, user_id, theirs["seg"]) is None
    assert triples.get_triples(conn, user_id, [theirs["episodic"]]) == []
    assert triples.triples_for_segments(conn, user_id, [theirs["seg"]]) == []
    assert get_visual_embedding(conn, user_id, theirs["seg"]) is None


def test_cannot_reference_another_users_rows(conn, user_id, other_user) -> None:
    theirs = _fill(conn, other_user, "Carol")
    mine = make_segment(conn, user_id, T0)
    row = TripleWrite(
        subject_entity_id=theirs["entity"],
        predicate="knows",
        object_literal="x",
        embedding=unit_vector(DIM, 2),
    )
    with pytest.raises(NotFoundError):
        triples.insert_triples(conn, user_id, mine, "episodic", [row])
    with pytest.raises(NotFoundError):
        triples.insert_triples(conn, user_id, theirs["seg"], "episodic", [row])
    with pytest.raises(NotFoundError):
        visual.upsert_visual_embedding(conn, user_id, theirs["seg"], unit_vector(VDIM, 3))
    with pytest.raises(NotFoundError):
        insert_alias(conn, user_id, "Caz", theirs["entity"], unit_vector(DIM, 2))
    assert segments.link_children(conn, user_id, theirs["seg"], [mine]) == 0
    # acting as the other user, my segment cannot be linked under their parent either
    assert segments.link_children(conn, other_user, theirs["seg"], [mine]) == 0
    with pytest.raises(NotFoundError):
        segments.set_segment_status(conn, user_id, theirs["seg"], "failed", "not mine")
    # and the database itself refuses it, whatever the code does
    with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
        conn.execute(
            "INSERT INTO triples (user_id, memory_type, segment_id, subject_entity_id,"
            " predicate, object_literal, embedding, valid_from)"
            " VALUES (%s, 'episodic', %s, %s, 'knows', 'x', %s, %s)",
            (user_id, mine, theirs["entity"], unit_vector(DIM, 2), T0),
        )
