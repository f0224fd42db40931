"""One wearer's vector searches: exact and index paths agree, other wearers' rows change
nothing, and the plan check catches a search whose HNSW index is gone."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from bench import plans
from tests.fixtures.store import T0, make_segment, near, unit_vector
from worldmm.store import segment_search, visual
from worldmm.store.db import Database
from worldmm.store.users import ensure_user

pytestmark = pytest.mark.integration
DIM, VDIM = 384, 1536
MODEL = "test-embedder"


def _fill(conn: psycopg.Connection, user: str, n: int, seed: int) -> list[int]:
    """``n`` 30 s segments with a clip and a text vector each, spread around two anchors."""
    ids = []
    for i in range(n):
        seg = make_segment(conn, user, T0 + timedelta(seconds=30 * i), caption=f"clip {i}")
        visual.upsert_visual_embedding(conn, user, seg, near(unit_vector(VDIM, 1), 1.0, seed + i))
        text = near(unit_vector(DIM, 2), 1.0, seed + i)
        segment_search.upsert_segment_embeddings(conn, user, [(seg, text)], MODEL)
        ids.append(seg)
    return ids


def _searches(conn: psycopg.Connection, user: str, exact_rows: int | None) -> dict[str, list]:
    as_of = T0 + timedelta(minutes=10)
    clips = visual.search_visual(conn, user, unit_vector(VDIM, 1), 8, exact_rows=exact_rows)
    clips_then = visual.search_visual(
        conn, user, unit_vector(VDIM, 1), 8, as_of, exact_rows=exact_rows
    )
    dense = segment_search.dense_search(conn, user, unit_vector(DIM, 2), 8, exact_rows=exact_rows)
    return {
        "visual": [(s.id, round(score, 5)) for s, score in clips],
        "visual_as_of": [(s.id, round(score, 5)) for s, score in clips_then],
        "dense": [(r.segment_id, round(r.score, 5)) for r in dense],
    }


def test_a_wearers_search_ignores_other_wearers_rows(conn, user_id) -> None:
    _fill(conn, user_id, 40, seed=100)
    conn.commit()
    alone = {rows: _searches(conn, user_id, rows) for rows in (None, 0)}
    assert len(alone[None]["visual"]) == len(alone[None]["dense"]) == 8
    assert len(alone[None]["visual_as_of"]) == 8  # 20 clips had ended by then
    # the exact scan (few rows) and the HNSW walk (forced) find the same neighbours
    assert alone[None] == alone[0]

    # other wearers' clips and texts nearer the query than any of the user's: a search that
    # crossed wearers, or stopped its walk early among their rows, would change
    for i in range(3):
        other = f"{user_id}-other{i}"
        ensure_user(conn, other)
        for j in range(60):
            seg = make_segment(conn, other, T0 + timedelta(seconds=30 * j))
            visual.upsert_visual_embedding(conn, other, seg, near(unit_vector(VDIM, 1), 0.1, j))
            text = near(unit_vector(DIM, 2), 0.1, j)
            segment_search.upsert_segment_embeddings(conn, other, [(seg, text)], MODEL)
    conn.commit()
    shared = {rows: _searches(conn, user_id, rows) for rows in (None, 0)}
    assert shared == alone


def _recorded_visual_search(database_url: str, user: str) -> plans.Recorded:
    db = Database(database_url, min_size=1, max_size=1, cursor_factory=plans.RecordingCursor)
    try:
        with db.connection() as c, plans.recording() as log:
            visual.search_visual(c, user, unit_vector(VDIM, 1), 5, exact_rows=0)
    finally:
        db.close()
    (search,) = [s for s in log.statements if plans.is_index_search(s)]
    return search


def _vector_problems(conn: psycopg.Connection, plan: dict) -> list[str]:
    """The plan check's findings, less the join to a tiny segments table (read whole: at
    this size that is the right plan; the bench checks at 10,000 rows and more)."""
    found = plans.problems(conn, plan, needs_hnsw=True, min_rows=1)
    return [p for p in found if not p.startswith("sequential scan of segments ")]


def test_plan_check_fails_on_a_memory_whose_index_is_dropped(conn, stack, user_id) -> None:
    _fill(conn, user_id, 20, seed=7)
    conn.commit()
    conn.execute("ANALYZE visual_embeddings")  # the check reads its row count
    search = _recorded_visual_search(stack.database_url, user_id)
    assert search.settings["hnsw.iterative_scan"] == "strict_order"

    plan = plans.explain(conn, search)
    assert _vector_problems(conn, plan) == []
    assert any("visual_embeddings_p" in line for line in plans.render(plan))

    with conn.transaction(force_rollback=True):
        conn.execute("DROP INDEX visual_embeddings_hnsw")  # every partition's goes with it
        dropped = plans.explain(conn, search)
        found = _vector_problems(conn, dropped)
    assert any(p.startswith("no HNSW index scanned") for p in found), found
    # the index is back (the drop was rolled back): the check passes again
    assert _vector_problems(conn, plans.explain(conn, search)) == []


def test_a_search_known_too_large_for_a_scan_goes_to_the_index_without_counting(
    conn, stack, user_id
) -> None:
    _fill(conn, user_id, 12, seed=11)
    conn.commit()
    db = Database(stack.database_url, min_size=1, max_size=1, cursor_factory=plans.RecordingCursor)
    query = unit_vector(DIM, 2)
    try:
        with db.connection() as c, plans.recording() as counted:
            scanned = segment_search.dense_search(c, user_id, query, 5, exact_rows=20)
        with db.connection() as c, plans.recording() as told:
            walked = segment_search.dense_search(c, user_id, query, 5, exact_rows=5, at_least=6)
        with db.connection() as c, plans.recording() as small:
            segment_search.dense_search(c, user_id, query, 5, exact_rows=20, at_least=6)
    finally:
        db.close()
    # no bound: the rows are counted (12, under 20) and scanned exactly
    assert any("count(*)" in s.sql for s in counted.statements)
    assert not any(plans.is_index_search(s) for s in counted.statements)
    # told at least 6 pass a limit of 5: no count, the index walk, the same neighbours
    assert not any("count(*)" in s.sql for s in told.statements)
    assert [plans.is_index_search(s) for s in told.statements] == [True]
    assert [(r.segment_id, round(r.score, 5)) for r in walked] == [
        (r.segment_id, round(r.score, 5)) for r in scanned
    ]
    # a bound under the limit proves nothing: the rows are counted as before
    assert any("count(*)" in s.sql for s in small.statements)
