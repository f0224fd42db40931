"""Bulk loading with binary COPY (synthetic loads for the query benchmark)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql


def copy_rows(
    conn: psycopg.Connection,
    table: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> int:
    """COPY rows into ``table`` (binary format); return how many were written.

    Vector columns take numpy arrays (or pgvector values); jsonb columns take
    ``psycopg.types.json.Jsonb``; identity columns (``id``) cannot be given.
    """
    oids = _column_oids(conn, table, columns)
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    n = 0
    with conn.cursor() as cur, cur.copy(query) as copy:
        copy.set_types(oids)
        for row in rows:
            copy.write_row([_adapt(v) for v in row])
            n += 1
    return n


def _adapt(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.astype(np.float32, copy=False)
    return value


def _column_oids(conn: psycopg.Connection, table: str, columns: Sequence[str]) -> list[int]:
    rows = conn.execute(
        "SELECT attname, atttypid FROM pg_attribute"
        " WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
        (table,),
    ).fetchall()
    if not rows:
        raise ValueError(f"no table {table!r}")
    by_name = {name: int(oid) for name, oid in rows}
    unknown = [c for c in columns if c not in by_name]
    if unknown:
        raise ValueError(f"table {table!r} has no columns {unknown}")
    return [by_name[c] for c in columns]
