"""Migrations against a real PostgreSQL: idempotent, dimension-checked, edit-detecting."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from tests.fixtures.store import unit_vector
from worldmm.settings import load_settings
from worldmm.store import entities
from worldmm.store.db import Database
from worldmm.store.migrate import SCHEMA_DIR, SchemaError, apply_migrations, check_schema
from worldmm.store.users import ensure_user

pytestmark = pytest.mark.integration


def test_apply_twice_second_is_noop(fresh_database_url) -> None:
    url = fresh_database_url()
    settings = load_settings()
    first = apply_migrations(url, settings)
    assert first == sorted(p.name[:4] for p in SCHEMA_DIR.glob("*.sql"))
    assert apply_migrations(url, settings) == []
    with psycopg.connect(url) as conn:
        check_schema(conn, settings)
        (n,) = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
        assert n == len(first)
        (params,) = conn.execute(
            "SELECT params FROM schema_migrations ORDER BY version LIMIT 1"
        ).fetchone()
        assert params == {
            "text_dim": "384",
            "text_vec": "vector",
            "visual_dim": "1536",
            "visual_vec": "vector",
        }


def test_other_dimensions_are_refused(fresh_database_url) -> None:
    url = fresh_database_url()
    apply_migrations(url, load_settings())
    other = load_settings(text_embed_dim=768)
    with pytest.raises(SchemaError, match="768"):
        apply_migrations(url, other)
    with psycopg.connect(url) as conn, pytest.raises(SchemaError, match="768"):
        check_schema(conn, other)


def test_unmigrated_database_fails_check(fresh_database_url) -> None:
    url = fresh_database_url()
    with psycopg.connect(url) as conn, pytest.raises(SchemaError, match="db migrate"):
        check_schema(conn, load_settings())


def test_edited_applied_migration_is_an_error(fresh_database_url, tmp_path: Path) -> None:
    url = fresh_database_url()
    schema = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, schema)
    settings = load_settings()
    apply_migrations(url, settings, schema_dir=schema)
    first = sorted(schema.glob("*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    with pytest.raises(SchemaError, match="edited"):
        apply_migrations(url, settings, schema_dir=schema)


def test_new_migration_is_applied_and_pending_detected(fresh_database_url, tmp_path) -> None:
    url = fresh_database_url()
    schema = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, schema)
    settings = load_settings()
    apply_migrations(url, settings, schema_dir=schema)
    (schema / "0999_extra.sql").write_text("CREATE TABLE extra (v vector({text_dim}));")
    with psycopg.connect(url) as conn, pytest.raises(SchemaError, match="0999_extra"):
        check_schema(conn, settings, schema_dir=schema)
    assert apply_migrations(url, settings, schema_dir=schema) == ["0999"]
    with psycopg.connect(url) as conn:
        (typ,) = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'extra'::regclass AND attname = 'v'"
        ).fetchone()
    assert typ == "vector(384)"


def test_large_dimensions_use_halfvec(fresh_database_url) -> None:
    url = fresh_database_url()
    settings = load_settings(text_embed_dim=3072, visual_embed_dim=2048)
    apply_migrations(url, settings)
    db = Database(url, max_size=1)
    try:
        with db.transaction() as conn:
            check_schema(conn, settings)
            ensure_user(conn, "u-half")
            v = unit_vector(3072, 1)
            e = entities.insert_canonical_entity(conn, "u-half", "Katrina", v)
            hits = entities.nearest_canonical_entities(conn, "u-half", v, 0.9, 5)
            assert [(h.id, round(c, 2)) for h, c in hits] == [(e.id, 1.0)]
            (typ,) = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = 'visual_embeddings'::regclass AND attname = 'embedding'"
            ).fetchone()
            assert typ == "halfvec(2048)"
    finally:
        db.close()


def test_0009_moves_existing_vectors_into_per_wearer_partitions(
    fresh_database_url, tmp_path
) -> None:
    """A memory written before 0009 keeps its clip and text vectors, now found by search,
    and new clips get ids above the old ones."""
    from datetime import UTC, datetime

    from tests.fixtures.store import make_segment
    from worldmm.store import segment_search, visual
    from worldmm.store.db import configure_connection

    url = fresh_database_url()
    before = tmp_path / "schema"
    before.mkdir()
    for path in SCHEMA_DIR.glob("*.sql"):
        if path.name < "0009":
            shutil.copy(path, before / path.name)
    settings = load_settings()
    apply_migrations(url, settings, schema_dir=before)
    t0 = datetime(2025, 3, 1, 9, tzinfo=UTC)
    with psycopg.connect(url) as conn:
        configure_connection(conn)
        ensure_user(conn, "wearer")
        old = [old_segment(conn, "wearer", t0.replace(minute=i)) for i in range(3)]
        for i, seg in enumerate(old):
            visual.upsert_visual_embedding(conn, "wearer", seg, unit_vector(1536, i))
            conn.execute(
                "INSERT INTO segment_embeddings (segment_id, user_id, scale_seconds,"
                " window_start, window_end, model, embedding)"
                " SELECT id, user_id, scale_seconds, window_start, window_end, 'm', %s"
                " FROM segments WHERE id = %s",
                (unit_vector(384, 10 + i), seg),
            )
        (old_max,) = conn.execute("SELECT max(id) FROM visual_embeddings").fetchone()
    assert "0009" in apply_migrations(url, settings)  # with any later ones
    with psycopg.connect(url) as conn:
        configure_connection(conn)
        check_schema(conn, settings)
        (kind,) = conn.execute(
            "SELECT relkind FROM pg_class WHERE relname = 'visual_embeddings'"
        ).fetchone()
        assert kind == "p"  # partitioned
        clips = visual.search_visual(conn, "wearer", unit_vector(1536, 1), 3)
        assert clips[0][0].id == old[1] and {s.id for s, _ in clips} == set(old)
        dense = segment_search.dense_search(conn, "wearer", unit_vector(384, 12), 3)
        assert dense[0].segment_id == old[2] and len(dense) == 3
        new = make_segment(conn, "wearer", t0.replace(minute=30))
        assert visual.upsert_visual_embedding(conn, "wearer", new, unit_vector(1536, 9)) > old_max


def old_segment(conn, user_id: str, start) -> int:
    """A segment as a schema before 0015 holds it (today's store writes columns it lacks)."""
    from datetime import timedelta

    row = conn.execute(
        "INSERT INTO segments (user_id, scale_seconds, window_start, window_end)"
        " VALUES (%s, 30, %s, %s) RETURNING id",
        (user_id, start, start + timedelta(seconds=30)),
    ).fetchone()
    return int(row[0])
