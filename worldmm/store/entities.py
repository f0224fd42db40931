"""Entities: canonical rows and aliases pointing at them, one surface form per user."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg

from worldmm.store._sql import as_vector, fetch_models, fetch_one_dict, knn_dicts, vec_cast
from worldmm.store.errors import NotFoundError
from worldmm.store.models import EntityRow

ENTITY_COLUMNS = "id, user_id, canonical_entity_id, surface_form, canonical_name, created_at"
_E_COLUMNS = ", ".join(f"e.{c.strip()}" for c in ENTITY_COLUMNS.split(","))


def _canonical_of_surface(conn: psycopg.Connection, user_id: str, surface: str) -> EntityRow | None:
    # the row with this surface, or, if it is an alias, its canonical row
    row = fetch_one_dict(
        conn,
        f"SELECT {_E_COLUMNS} FROM entities s"
        " JOIN entities e ON e.user_id = s.user_id"
        "  AND e.id = COALESCE(s.canonical_entity_id, s.id)"
        " WHERE s.user_id = %s AND lower(s.surface_form) = lower(%s)",
        (user_id, surface.strip()),
    )
    return EntityRow.model_validate(row) if row else None


def find_entity_by_surface(
    conn: psycopg.Connection, user_id: str, surface: str
) -> EntityRow | None:
    """The canonical entity whose name or alias is ``surface`` (case-insensitive), or None."""
    return _canonical_of_surface(conn, user_id, surface)


def nearest_canonical_entities(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    min_cosine: float,
    k: int,
) -> list[tuple[EntityRow, float]]:
    """This user's canonical entities with cosine >= min_cosine, best first, at most k."""
    q = as_vector(embedding)
    cast = vec_cast(q)
    rows = knn_dicts(
        conn,
        "WITH nearest AS MATERIALIZED ("
        f" SELECT {ENTITY_COLUMNS}, embedding <=> %(q)s{cast} AS distance FROM entities"
        " WHERE user_id = %(u)s AND canonical_entity_id IS NULL"
        f" ORDER BY embedding <=> %(q)s{cast} LIMIT %(k)s)"
        " SELECT * FROM nearest WHERE distance <= %(maxd)s ORDER BY distance",
        {"q": q, "u": user_id, "k": k, "maxd": 1.0 - min_cosine},
        k=k,
    )
    return [(EntityRow.model_validate(r), 1.0 - float(r["distance"])) for r in rows]


def _insert_surface(
    conn: psycopg.Connection,
    user_id: str,
    surface: str,
    embedding: Sequence[float] | np.ndarray,
    canonical_id: int | None,
) -> EntityRow:
    """Insert ``surface`` (a canonical entity named so, or with ``canonical_id`` an alias of
    it) unless the user has it in any case already; return its canonical entity."""
    q = as_vector(embedding)
    conn.execute(
        "INSERT INTO entities (user_id, canonical_entity_id, surface_form, canonical_name,"
        f" embedding) VALUES (%s, %s, %s, %s, %s{vec_cast(q)})"
        " ON CONFLICT (user_id, lower(surface_form)) DO NOTHING",
        (user_id, canonical_id, surface, surface if canonical_id is None else None, q),
    )
    found = _canonical_of_surface(conn, user_id, surface)
    assert found is not None  # just inserted, or there before
    return found


def insert_canonical_entity(
    conn: psycopg.Connection,
    user_id: str,
    name: str,
    embedding: Sequence[float] | np.ndarray,
) -> EntityRow:
    """Create a canonical entity named ``name``. Idempotent on (user, lower(name)): if that
    surface form exists already, its canonical entity is returned instead."""
    return _insert_surface(conn, user_id, name.strip(), embedding, None)


def insert_alias(
    conn: psycopg.Connection,
    user_id: str,
    surface: str,
    canonical_id: int,
    embedding: Sequence[float] | np.ndarray,
) -> EntityRow:
    """Record ``surface`` as an alias of this user's canonical entity ``canonical_id`` and
    return the canonical entity. Idempotent on (user, lower(surface)): an existing surface
    keeps its mapping and its canonical entity is returned."""
    canonical = fetch_one_dict(
        conn,
        f"SELECT {ENTITY_COLUMNS} FROM entities"
        " WHERE user_id = %s AND id = %s AND canonical_entity_id IS NULL",
        (user_id, canonical_id),
    )
    if canonical is None:
        raise NotFoundError(f"no canonical entity {canonical_id} for this user")
    return _insert_surface(conn, user_id, surface.strip(), embedding, canonical_id)


def list_aliases(conn: psycopg.Connection, user_id: str, canonical_id: int) -> list[EntityRow]:
    where = "user_id = %s AND canonical_entity_id = %s ORDER BY id"
    query = f"SELECT {ENTITY_COLUMNS} FROM entities WHERE {where}"
    return fetch_models(conn, EntityRow, query, (user_id, canonical_id))
