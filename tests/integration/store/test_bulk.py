"""Binary COPY for synthetic loads."""

from __future__ import annotations

from datetime import timedelta

import pytest
from psycopg.types.json import Jsonb

from bench.bulk import copy_rows
from tests.fixtures.store import T0, unit_vector
from worldmm.store import segments, visual

pytestmark = pytest.mark.integration


def test_copy_segments_and_vectors(conn, user_id) -> None:
    n = 50
    rows = [
        (
            user_id,
            30,
            T0 + timedelta(seconds=30 * i),
            T0 + timedelta(seconds=30 * (i + 1)),
            f"caption {i}",
            "complete",
            Jsonb({"caption": "bulk"}),
        )
        for i in range(n)
    ]
    cols = (
        "user_id",
        "scale_seconds",
        "window_start",
        "window_end",
        "caption",
        "processing_status",
        "model_versions",
    )
    assert copy_rows(conn, "segments", cols, rows) == n
    segs = segments.list_segments(conn, user_id, limit=n + 1)
    assert [s.caption for s in segs] == [f"caption {i}" for i in range(n)]
    assert segs[0].model_versions == {"caption": "bulk"}
    vrows = [
        (user_id, s.id, s.window_start, s.window_end, unit_vector(1536, i))
        for i, s in enumerate(segs)
    ]
    copy_rows(
        conn,
        "visual_embeddings",
        ("user_id", "segment_id", "window_start", "window_end", "embedding"),
        vrows,
    )
    hits = visual.search_visual(conn, user_id, unit_vector(1536, 7), 3)
    assert hits[0][0].id == segs[7].id and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="no columns"):
        copy_rows(conn, "segments", ("nope",), [])


def test_vector_indexes_dropped_and_rebuilt(fresh_database_url) -> None:
    from bench.bulk import vector_indexes_dropped
    from worldmm.settings import load_settings
    from worldmm.store.db import Database
    from worldmm.store.migrate import apply_migrations
    from worldmm.store.users import ensure_user

    url = fresh_database_url()
    apply_migrations(url, load_settings())
    db = Database(url, max_size=1)
    hnsw = (
        "SELECT indexname FROM pg_indexes WHERE tablename = 'visual_embeddings'"
        " AND indexdef ILIKE '%%hnsw%%'"
    )
    try:
        with db.transaction() as conn:
            ensure_user(conn, "u")
            with vector_indexes_dropped(conn, ["visual_embeddings"]) as dropped:
                assert dropped == ["visual_embeddings_hnsw"]
                assert conn.execute(hnsw).fetchall() == []
                copy_rows(
                    conn,
                    "segments",
                    ("user_id", "scale_seconds", "window_start", "window_end"),
                    [("u", 30, T0, T0 + timedelta(seconds=30))],
                )
            assert conn.execute(hnsw).fetchall() == [("visual_embeddings_hnsw",)]
            # the partitioned table's index is valid and built on every partition (0009)
            partitions = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE i.indisvalid)"
                " FROM pg_inherits h JOIN pg_index i ON i.indexrelid = h.inhrelid"
                " WHERE h.inhparent = 'visual_embeddings_hnsw'::regclass"
            ).fetchone()
            assert partitions == (32, 32)
            (valid,) = conn.execute(
                "SELECT indisvalid FROM pg_index"
                " WHERE indexrelid = 'visual_embeddings_hnsw'::regclass"
            ).fetchone()
            assert valid
    finally:
        db.close()
