"""Bulk loading with binary COPY (synthetic loads for the query benchmark)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
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


# pgvector builds an HNSW graph fast while it fits in maintenance_work_mem and much more slowly
# once it spills (it says "hnsw graph no longer fits"); the graph is about the size of its
# vectors plus neighbour lists, so the table's own size with some headroom is a fair budget.
HNSW_BUILD_MEM_MIN = 256 << 20
HNSW_BUILD_MEM_MAX = 6 << 30


def hnsw_build_memory(table_bytes: int, *, cap: int = HNSW_BUILD_MEM_MAX) -> int:
    """Bytes of maintenance_work_mem for building an HNSW index over a table this large."""
    return int(min(cap, max(HNSW_BUILD_MEM_MIN, table_bytes * 1.5)))


def largest_part_bytes(conn: psycopg.Connection, table: str) -> int:
    """Bytes of ``table``, or of its largest partition: an index on a partitioned table is
    built one partition at a time."""
    row = conn.execute(
        "SELECT max(pg_table_size(relid)) FROM pg_partition_tree(to_regclass(%s)) WHERE isleaf",
        (table,),
    ).fetchone()
    return int(row[0] or 0) if row else 0


@contextmanager
def vector_indexes_dropped(
    conn: psycopg.Connection, tables: Sequence[str], *, max_build_memory: int = HNSW_BUILD_MEM_MAX
) -> Iterator[list[str]]:
    """Drop the HNSW indexes of ``tables`` for a bulk load and rebuild them afterwards.

    Inserting into an HNSW index row by row is slow (20k x 1536-d took minutes on a busy
    2-core machine); building it once after the load is much faster. Each rebuild gets
    maintenance_work_mem sized to its table or largest partition (``hnsw_build_memory``, at most
    ``max_build_memory``). For benchmark and restore loads only: the tables are locked and
    unindexed while the block runs. Yields the names of the dropped indexes.
    """
    rows = conn.execute(
        "SELECT indexname, indexdef, tablename FROM pg_indexes"
        " WHERE schemaname = current_schema()"
        " AND tablename = ANY(%s) AND indexdef ILIKE '%%USING hnsw%%' ORDER BY indexname",
        (list(tables),),
    ).fetchall()
    for name, _, _ in rows:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    try:
        yield [name for name, _, _ in rows]
    finally:
        for _, definition, table in rows:
            budget = hnsw_build_memory(largest_part_bytes(conn, table), cap=max_build_memory)
            conn.execute(
                sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(f"{budget // 1024}kB"))
            )
            conn.execute(on_every_partition(definition).encode())
        conn.execute("RESET maintenance_work_mem")


def on_every_partition(definition: str) -> str:
    """An index definition from ``pg_indexes`` that builds on every partition: a partitioned
    table's reads ``CREATE INDEX ... ON ONLY parent``, which alone makes an invalid index of
    the parent and none of its partitions (searches then sort the whole partition)."""
    return re.sub(r"\bON ONLY\b", "ON", definition, count=1)
