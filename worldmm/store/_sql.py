"""Small helpers shared by the repository modules (not part of the public API)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg.rows import dict_row, scalar_row
from pydantic import BaseModel

from worldmm.store.errors import NotFoundError
from worldmm.store.migrate import vector_type

M = TypeVar("M", bound=BaseModel)


def as_vector(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-D float32 array (pgvector's numpy dumper sends it as ``vector``)."""
    arr = np.asarray(values, dtype=np.float32)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"an embedding must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("an embedding contains NaN or infinite values")
    return arr


def vec_cast(embedding: np.ndarray) -> str:
    """SQL cast suffix for a parameter of this length (halfvec columns above 2000 dims)."""
    return f"::{vector_type(int(embedding.shape[0]))}"


def user_filter(user_id: str, filters: Sequence[tuple[str, Any]]) -> tuple[str, list]:
    """``user_id = %s AND <clause> ...`` over the filters whose value is not None, with the
    arguments in order (a tuple value fills a clause of several placeholders)."""
    where, args = ["user_id = %s"], [user_id]
    for clause, value in filters:
        if value is None:
            continue
        where.append(clause)
        if isinstance(value, tuple):
            args.extend(value)
        else:
            args.append(value)
    return " AND ".join(where), args


def fetch_dicts(conn: psycopg.Connection, query: Any, params: Any = None) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return cur.fetchall()


def fetch_one_dict(conn: psycopg.Connection, query: Any, params: Any = None) -> dict | None:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return cur.fetchone()


def fetch_found(conn: psycopg.Connection, query: Any, params: Any, missing: str) -> tuple:
    """The first row; :class:`NotFoundError` saying ``missing`` when there is none."""
    row = conn.execute(query, params).fetchone()
    if row is None:
        raise NotFoundError(missing)
    return row


def fetch_count(conn: psycopg.Connection, query: Any, params: Any = None) -> int:
    """The integer in the first column of the first row (a count; 0 when no row)."""
    row = conn.execute(query, params).fetchone()
    return int(row[0]) if row else 0


def segments_by_id(
    conn: psycopg.Connection, user_id: str, columns: str, ids: Sequence[int]
) -> dict[int, tuple]:
    """``columns`` of each of this user's segments among ``ids``, by id (none read when
    ``ids`` is empty)."""
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT id, {columns} FROM segments WHERE user_id = %s AND id = ANY(%s)",  # noqa: S608
        (user_id, list(ids)),
    ).fetchall()
    return {int(r[0]): tuple(r[1:]) for r in rows}


def fetch_models(
    conn: psycopg.Connection, model: type[M], query: Any, params: Any = None
) -> list[M]:
    """Every row as a ``model`` (columns matched to fields by name)."""
    return [model.model_validate(r) for r in fetch_dicts(conn, query, params)]


def fetch_column(conn: psycopg.Connection, query: Any, params: Any = None) -> list:
    """The first column of every row."""
    with conn.cursor(row_factory=scalar_row) as cur:
        cur.execute(query, params)
        return cur.fetchall()
