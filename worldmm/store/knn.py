"""One user's nearest vectors: the HNSW index when the rows to search are many, an exact scan
of just those rows when they are few.

Every vector search here is one user's, often narrowed further (``as_of``, a time range, an
id set). An HNSW index holds every row of its table (of its partition, for the per-user-hash
partitioned tables of migration 0009) and a filtered walk discards the rows that do not pass:
with iterative scans it walks on until it has ``k``, up to ``hnsw.max_scan_tuples``. So:

- **exact** when at most :func:`exact_row_limit` rows pass the user's filters (counted with a
  bounded count, never more than that many index entries): those rows are read through the
  user's btree and sorted by distance. Exact, as fast as the index at that size, and
  untouched by other wearers' rows (a new wearer beside a wearer with months of memory would
  otherwise get fewer than ``k`` results once the walk passed ``max_scan_tuples``);
- **index** otherwise: the HNSW index with iterative scans, and sorting disabled for the
  statement. The planner prices an HNSW scan against a sort of the user's rows from the
  table's pages, which leave out the vectors kept in TOAST: 1536-d clip vectors look cheap
  to read, and at four weeks of memory it chose to read and sort all 80k of them (260 ms
  instead of about 5). The row count has already said which plan is right.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg import sql

from worldmm.store._sql import as_vector, fetch_count, fetch_dicts, vec_cast

# Vector values (rows x dimensions) an exact scan reads at most: about the cost of an HNSW
# search here (docs/benchmarks/query.md, "Exact scan or index"). 1536-d clips: 1,300 rows;
# 384-d segment texts: 5,200.
EXACT_MAX_VALUES = 2_000_000


def exact_row_limit(dim: int) -> int:
    """Rows of ``dim`` dimensions below which an exact scan is as cheap as the index."""
    return max(1, EXACT_MAX_VALUES // max(1, dim))


def ef_search(k: int) -> int:
    """HNSW's candidate list for ``k`` results: 100 at least (pgvector's 40 measured recall@10
    0.56 on 20k filtered 1536-d vectors, 100 gave 1.0); ef = k at k = 100 was no faster on
    EgoLife's week and lost one hit@3 (docs/benchmarks/query.md)."""
    return min(1000, max(100, 2 * k))


def iterative_settings(k: int) -> dict[str, str]:
    """Iterative scans, so the user filter cannot leave fewer than ``k`` results."""
    return {"hnsw.iterative_scan": "strict_order", "hnsw.ef_search": str(ef_search(k))}


def hnsw_settings(k: int) -> dict[str, str]:
    """What an index search of ``k`` rows runs under (``SET LOCAL``): iterative scans, and
    no sorts, so the index is what orders the rows (module doc)."""
    return {**iterative_settings(k), "enable_sort": "off"}


class VectorQuery(NamedTuple):
    """One user's nearest-neighbour search over ``table`` (alias ``alias``).

    ``columns`` are returned besides ``distance``; ``tiebreak`` (one of them, by its output
    name) orders equal distances. ``where`` holds the conditions after the user's (each led
    by `` AND ``) and ``params`` their values; ``count_where`` the part of them the user's
    btree answers without the table (the window end, an id set), which bounds how many rows
    pass: when it is ``None``, ``where`` itself. ``wrap`` turns the nearest rows' SQL into
    the statement that runs (``{}`` stands for it)."""

    table: str
    alias: str
    columns: str
    tiebreak: str
    where: str = ""
    params: dict[str, Any] = {}
    count_where: str | None = None
    wrap: str = "{}"


class Statement(NamedTuple):
    """A statement with its parameters and the settings it runs under (``SET LOCAL``)."""

    sql: str
    params: dict[str, Any]
    settings: dict[str, str]


def count_upto(conn: psycopg.Connection, query: VectorQuery, user_id: str, cap: int) -> int:
    """How many of the user's rows pass ``query``'s count filters (at least as many as pass
    all of them), counting at most ``cap``."""
    a = query.alias
    where = query.where if query.count_where is None else query.count_where
    return fetch_count(
        conn,
        f"SELECT count(*) FROM (SELECT 1 FROM {query.table} {a}"
        f" WHERE {a}.user_id = %(u)s{where} LIMIT %(cap)s) AS few",
        {**query.params, "u": user_id, "cap": cap},
    )


def statement(
    query: VectorQuery, user_id: str, embedding: np.ndarray, k: int, *, exact: bool
) -> Statement:
    """The SQL of the exact or the index search (pure: the caller chose which)."""
    q = as_vector(embedding)
    a, cast = query.alias, vec_cast(q)
    distance = f"{a}.embedding <=> %(q)s{cast}"
    where = f"{a}.user_id = %(u)s{query.where}"
    if exact:
        # Distances computed in a materialized subquery: nothing there can be ordered by an
        # index, so the planner reads the user's rows through its btree and sorts only them.
        nearest = (
            f"SELECT * FROM (SELECT {query.columns}, {distance} AS distance"
            f" FROM {query.table} {a} WHERE {where} OFFSET 0) AS mine"
            f" ORDER BY distance, {query.tiebreak} LIMIT %(k)s"
        )
        settings: dict[str, str] = {}
    else:
        nearest = (
            f"SELECT {query.columns}, {distance} AS distance FROM {query.table} {a}"
            f" WHERE {where} ORDER BY {distance} LIMIT %(k)s"
        )
        settings = hnsw_settings(k)
    params = {**query.params, "q": q, "u": user_id, "k": k}
    return Statement(query.wrap.format(nearest), params, settings)


def set_local(conn: psycopg.Connection, settings: dict[str, str]) -> None:
    """``SET LOCAL`` each setting: it lasts for this transaction, and a Citus coordinator
    passes it on to the worker that runs the search (``citus.propagate_set_commands``)."""
    if not settings:
        return
    # one trip to the server for all of them (no parameters: several statements may go)
    conn.execute(
        sql.SQL("; ").join(
            sql.SQL("SET LOCAL {} = {}").format(
                sql.SQL(".").join(map(sql.Identifier, name.split("."))), sql.Literal(value)
            )
            for name, value in settings.items()
        )
    )


def run(conn: psycopg.Connection, stmt: Statement) -> list[dict]:
    """Execute ``stmt`` under its settings (they last for this transaction or savepoint)."""
    with conn.transaction():
        set_local(conn, stmt.settings)
        return fetch_dicts(conn, stmt.sql, stmt.params)


def knn_dicts(
    conn: psycopg.Connection, query: Any, params: Any = None, *, k: int = 10
) -> list[dict]:
    """Run a nearest-neighbour ``query`` of ``k`` rows, written by the caller, under
    :func:`iterative_settings`."""
    return run(conn, Statement(query, params, iterative_settings(k)))


def nearest(
    conn: psycopg.Connection,
    query: VectorQuery,
    user_id: str,
    embedding: np.ndarray,
    k: int,
    *,
    exact_rows: int | None = None,
    at_least: int = 0,
) -> list[dict]:
    """The user's ``k`` rows nearest ``embedding`` (cosine distance as ``distance``), best
    first: exact when at most ``exact_rows`` rows (default :func:`exact_row_limit` of the
    vector's dimension) pass the filters, else through the index. ``at_least``: rows the
    caller knows pass; above the limit, the index is used without counting them."""
    if k <= 0:
        return []
    limit = exact_row_limit(len(embedding)) if exact_rows is None else exact_rows
    exact = limit > 0 and at_least <= limit and count_upto(conn, query, user_id, limit + 1) <= limit
    return run(conn, statement(query, user_id, embedding, k, exact=exact))
