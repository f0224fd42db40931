"""Pure parts of the migration runner: strict templates, vector type choice, file naming."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldmm.settings import load_settings
from worldmm.store.migrate import (
    SCHEMA_DIR,
    SchemaError,
    load_migrations,
    render,
    template_params,
    vector_type,
)


def test_render_substitutes_and_leaves_sql_braces() -> None:
    out = render(
        "x {text_vec}({text_dim}) DEFAULT '{}' j '{\"a\": 1}'",
        {"text_vec": "vector", "text_dim": "384"},
    )
    assert out == "x vector(384) DEFAULT '{}' j '{\"a\": 1}'"


def test_render_unknown_variable_is_an_error() -> None:
    with pytest.raises(SchemaError, match="visual_dim"):
        render("v vector({visual_dim})", {"text_dim": "384"}, source="0009_x.sql")


@pytest.mark.parametrize(
    ("dim", "kind"), [(384, "vector"), (2000, "vector"), (2001, "halfvec"), (4000, "halfvec")]
)
def test_vector_type(dim: int, kind: str) -> None:
    assert vector_type(dim) == kind


def test_vector_type_too_large() -> None:
    with pytest.raises(SchemaError, match="4000"):
        vector_type(4001)


def test_template_params_from_settings() -> None:
    params = template_params(load_settings(text_embed_dim=3072, visual_embed_dim=1536))
    assert params == {
        "text_dim": "3072",
        "text_vec": "halfvec",
        "visual_dim": "1536",
        "visual_vec": "vector",
    }


def test_shipped_migrations_render_with_default_settings() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == sorted(m.version for m in migrations)
    params = template_params(load_settings())
    for m in migrations:
        assert "{text_" not in render(m.template, params)
    assert "CREATE EXTENSION IF NOT EXISTS vector" in migrations[0].template


def test_bad_file_name_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "init.sql").write_text("SELECT 1;")
    with pytest.raises(SchemaError, match="NNNN_name"):
        load_migrations(tmp_path)


def test_duplicate_version_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;")
    with pytest.raises(SchemaError, match="0001"):
        load_migrations(tmp_path)


def test_schema_dir_is_the_repository_schema_folder() -> None:
    assert SCHEMA_DIR.name == "schema"
    assert (SCHEMA_DIR / "0001_init.sql").is_file()
