"""Ordered SQL migrations from ``schema/`` and the start-up schema check.

Migration files are templates: vector dimensions come from settings, so ``{text_dim}``,
``{text_vec}``, ``{visual_dim}`` and ``{visual_vec}`` are substituted strictly (an unknown
placeholder is an error). Each applied file is recorded in ``schema_migrations`` with the
checksum of its template and the dimensions used; applying again is a no-op, an edited
applied file is an error, and so is migrating an existing database with other dimensions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from worldmm.settings import Settings
from worldmm.store.distribute import distribute, spans_wearers

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# pgvector indexes (HNSW) take at most 2000 dims for vector and 4000 for halfvec.
_VECTOR_MAX_DIM = 2000
_HALFVEC_MAX_DIM = 4000
# any constant: serialises concurrent `db migrate` runs (services starting together)
_LOCK_KEY = 0x574D4D5F4D4947  # "WMM_MIG"

_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    params      jsonb NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


class SchemaError(RuntimeError):
    """The database schema is missing, out of date, edited, or built for other dimensions."""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    template: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.template.encode()).hexdigest()


def vector_type(dim: int) -> str:
    """pgvector column type for a dimension: ``vector`` up to 2000, ``halfvec`` above."""
    if dim <= _VECTOR_MAX_DIM:
        return "vector"
    if dim <= _HALFVEC_MAX_DIM:
        return "halfvec"
    raise SchemaError(
        f"embedding dimension {dim} is above {_HALFVEC_MAX_DIM}, the most pgvector can index"
    )


def template_params(settings: Settings) -> dict[str, str]:
    """The substitution variables of the migration templates, from settings."""
    text_dim, visual_dim = settings.text_embed_dim, settings.visual_embed_dim
    return {
        "text_dim": str(text_dim),
        "text_vec": vector_type(text_dim),
        "visual_dim": str(visual_dim),
        "visual_vec": vector_type(visual_dim),
    }


def render(template: str, params: dict[str, str], *, source: str = "template") -> str:
    """Substitute ``{name}`` placeholders; an unknown name is an error (never left as is)."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise SchemaError(f"{source}: unknown template variable {{{name}}}")
        return params[name]

    return _PLACEHOLDER_RE.sub(sub, template)


def load_migrations(schema_dir: Path = SCHEMA_DIR) -> list[Migration]:
    """Migration files in version order; a duplicate version or a stray .sql name is an error."""
    if not schema_dir.is_dir():
        raise SchemaError(f"schema directory not found: {schema_dir}")
    found: dict[str, Migration] = {}
    for path in sorted(schema_dir.glob("*.sql")):
        match = _FILE_RE.match(path.name)
        if not match:
            raise SchemaError(f"{path.name}: migration files are named NNNN_name.sql")
        version, name = match.groups()
        if version in found:
            raise SchemaError(f"two migrations with version {version}")
        found[version] = Migration(version, name, path.read_text(encoding="utf-8"))
    if not found:
        raise SchemaError(f"no migrations in {schema_dir}")
    return [found[v] for v in sorted(found)]


def _applied(conn: psycopg.Connection) -> dict[str, tuple[str, dict]]:
    rows = conn.execute("SELECT version, checksum, params FROM schema_migrations").fetchall()
    return {version: (checksum, params) for version, checksum, params in rows}


def _verify_applied(
    applied: dict[str, tuple[str, dict]],
    migrations: list[Migration],
    params: dict[str, str],
) -> None:
    by_version = {m.version: m for m in migrations}
    for version, (checksum, used) in sorted(applied.items()):
        migration = by_version.get(version)
        if migration is None:
            raise SchemaError(
                f"database has migration {version} that this code does not know (newer code?)"
            )
        if migration.checksum != checksum:
            raise SchemaError(
                f"migration {version}_{migration.name}.sql was edited after it was applied "
                "(add a new migration instead)"
            )
        if used != params:
            raise SchemaError(
                f"database was migrated with {_dims(used)}, settings ask for {_dims(params)}; "
                "set WORLDMM_TEXT_EMBED_DIM / WORLDMM_VISUAL_EMBED_DIM to match, or use a "
                "new database"
            )


def _dims(params: dict) -> str:
    return f"text {params.get('text_dim')}-d, visual {params.get('visual_dim')}-d"


def apply_migrations(
    database_url: str, settings: Settings, *, schema_dir: Path = SCHEMA_DIR
) -> list[str]:
    """Apply pending migrations in order, each in its own transaction; return their versions.

    Safe to run concurrently (an advisory lock serialises runners) and repeatedly (no-op).
    """
    migrations = load_migrations(schema_dir)
    params = template_params(settings)
    # render everything first so a template error stops before the database is touched
    rendered = {
        m.version: render(m.template, params, source=f"{m.version}_{m.name}.sql")
        for m in migrations
    }
    done: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        spans_wearers(conn, transaction=False)  # a migration touches every wearer's rows
        try:
            conn.execute(_BOOKKEEPING)
            applied = _applied(conn)
            _verify_applied(applied, migrations, params)
            for migration in migrations:
                if migration.version in applied:
                    continue
                with conn.transaction():
                    conn.execute(rendered[migration.version].encode())
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum, params)"
                        " VALUES (%s, %s, %s, %s)",
                        (migration.version, migration.name, migration.checksum, Jsonb(params)),
                    )
                done.append(migration.version)
            distribute(conn)  # on a Citus coordinator: every table placed (else nothing)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return done


def check_schema(
    conn: psycopg.Connection, settings: Settings, *, schema_dir: Path = SCHEMA_DIR
) -> None:
    """Raise SchemaError unless every migration is applied, unedited, with these dimensions.

    Also reads the embedding columns' real types, so a hand-altered table is caught too.
    """
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        raise SchemaError("database is not migrated: run `worldmm db migrate`")
    migrations = load_migrations(schema_dir)
    params = template_params(settings)
    applied = _applied(conn)
    _verify_applied(applied, migrations, params)
    pending = [f"{m.version}_{m.name}" for m in migrations if m.version not in applied]
    if pending:
        raise SchemaError(
            f"database schema is out of date (pending: {', '.join(pending)}): "
            "run `worldmm db migrate`"
        )
    expected = {
        ("entities", "embedding"): f"{params['text_vec']}({params['text_dim']})",
        ("triples", "embedding"): f"{params['text_vec']}({params['text_dim']})",
        ("visual_embeddings", "embedding"): f"{params['visual_vec']}({params['visual_dim']})",
    }
    for (table, column), want in expected.items():
        row = conn.execute(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " WHERE a.attrelid = to_regclass(%s) AND a.attname = %s AND NOT a.attisdropped",
            (table, column),
        ).fetchone()
        got = row[0] if row else None
        if got != want:
            raise SchemaError(f"{table}.{column} is {got}, settings need {want}")
