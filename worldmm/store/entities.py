"""Entities: canonical rows and aliases pointing at them, one surface form per user."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg

from worldmm.store._sql import as_vector, fetch_dicts, fetch_one_dict, vec_cast
from worldmm.store.errors import NotFoundError
from worldmm.store.knn import knn_dicts
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


def newest_names(conn: psycopg.Connection, user_id: str, limit: int) -> list[str]:
    """The wearer's ``limit`` newest canonical entity names, newest first."""
    rows = conn.execute(
        "SELECT canonical_name FROM entities WHERE user_id = %s AND canonical_entity_id IS NULL"
        " ORDER BY id DESC LIMIT %s",
        (user_id, limit),
    ).fetchall()
    return [r[0] for r in rows]


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


def insert_surfaces(
    conn: psycopg.Connection,
    user_id: str,
    items: Sequence[tuple[str, Sequence[float] | np.ndarray, int | None]],
) -> list[EntityRow]:
    """Insert each ``(surface, embedding, canonical_id)``: a canonical entity named
    ``surface``, or with ``canonical_id`` an alias of that canonical entity, unless the user
    has the surface in any case already (then it keeps its mapping). Returns each item's
    canonical entity, in order. Three statements whatever the number of items (a window's
    new names: one round trip each, not two or three per name). NotFoundError when a
    ``canonical_id`` is not one of the user's canonical entities."""
    if not items:
        return []
    surfaces = [surface.strip() for surface, _, _ in items]
    targets = sorted({c for _, _, c in items if c is not None})
    if targets:
        found = conn.execute(
            "SELECT id FROM entities WHERE user_id = %s AND id = ANY(%s)"
            " AND canonical_entity_id IS NULL",
            (user_id, targets),
        ).fetchall()
        if missing := set(targets) - {int(r[0]) for r in found}:
            raise NotFoundError(f"no canonical entities {sorted(missing)} for this user")
    vectors = [as_vector(e) for _, e, _ in items]
    # Inserted in one order for every writer (by the unique key): two windows naming the
    # same new people in different orders would otherwise wait on each other (a deadlock).
    conn.execute(
        "INSERT INTO entities (user_id, canonical_entity_id, surface_form, canonical_name,"
        " embedding) SELECT %s, g.c, g.s, CASE WHEN g.c IS NULL THEN g.s END, g.e"
        f" FROM unnest(%s::bigint[], %s::text[], %s{vec_cast(vectors[0])}[])"
        " WITH ORDINALITY AS g(c, s, e, ord) ORDER BY lower(g.s), g.ord"
        " ON CONFLICT (user_id, lower(surface_form)) DO NOTHING",
        (user_id, [c for _, _, c in items], surfaces, vectors),
    )
    # each surface's row (just inserted, or there before) and, if an alias, its canonical row
    rows = fetch_dicts(
        conn,
        f"SELECT g.ord, {_E_COLUMNS} FROM unnest(%s::text[]) WITH ORDINALITY AS g(s, ord)"
        " JOIN entities s ON s.user_id = %s AND lower(s.surface_form) = lower(g.s)"
        " JOIN entities e ON e.user_id = s.user_id AND e.id = COALESCE(s.canonical_entity_id, s.id)"
        " ORDER BY g.ord",
        (surfaces, user_id),
    )
    assert len(rows) == len(items)  # every surface is there now
    return [EntityRow.model_validate(r) for r in rows]


def insert_canonical_entity(
    conn: psycopg.Connection,
    user_id: str,
    name: str,
    embedding: Sequence[float] | np.ndarray,
) -> EntityRow:
    """Create a canonical entity named ``name``. Idempotent on (user, lower(name)): if that
    surface form exists already, its canonical entity is returned instead."""
    return insert_surfaces(conn, user_id, [(name, embedding, None)])[0]
