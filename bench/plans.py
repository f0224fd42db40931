"""Query plans of a search: record the statements it runs, EXPLAIN them with the same
parameters and settings, and check that no memory table was read whole.

A search that silently stops using its index is correct but slow, and gets slower with every
day of memory (a 4-week clip search read and sorted 80k vectors: 260 ms instead of 5). The
query benchmark records the plans of each memory's search with this module and fails its own
check when one reads a memory table whole or an index search leaves its HNSW index out.

Recording: a :class:`RecordingCursor` (``Database(cursor_factory=RecordingCursor)``) notes
each statement while a :func:`recording` block is open in the calling context (threads
started with ``asyncio.to_thread`` inherit it); outside one it only runs them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from worldmm.store import knn
from worldmm.store._sql import fetch_count

# The tables a memory grows in; a sequential scan of one of them grows with the memory.
MEMORY_TABLES = ("segments", "segment_embeddings", "visual_embeddings", "triples", "entities")
# Below this many rows a sequential scan is a fine plan (small memories, tests).
WHOLE_SCAN_MIN_ROWS = 10_000

_SET_LOCAL = re.compile(r"^\s*SET\s+LOCAL\s+([\w.\"]+)\s*=\s*'?([^';]*)'?\s*$", re.IGNORECASE)
_SET_CONFIG = re.compile(r"^\s*SELECT\s+set_config\(", re.IGNORECASE)
_READ = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


class Recorded(NamedTuple):
    """One statement a search ran: its SQL, parameters and the settings set just before it
    in its transaction (``SET LOCAL`` or ``set_config(..., true)``)."""

    sql: str
    params: Any
    settings: dict[str, str]


class StatementLog:
    """The statements recorded in one :func:`recording` block, in order."""

    def __init__(self) -> None:
        self.statements: list[Recorded] = []
        # per connection: a search's lanes run at once in threads, each on its own
        # connection, and one lane's SET LOCAL belongs to its own next statement only
        self._pending: dict[int, dict[str, str]] = {}
        self._lock = threading.Lock()

    def note(self, conn: psycopg.Connection, query: Any, params: Any) -> None:
        text = query.as_string(conn) if isinstance(query, sql.Composable) else str(query)
        if isinstance(query, bytes):
            text = query.decode()
        sets = [_SET_LOCAL.match(part) for part in text.split(";") if part.strip()]
        with self._lock:
            pending = self._pending.setdefault(id(conn), {})
            if sets and all(sets):  # one or several SET LOCALs in one statement
                for m in sets:
                    assert m is not None
                    pending[m.group(1).replace('"', "")] = m.group(2)
            elif _SET_CONFIG.match(text) and isinstance(params, list | tuple) and len(params) >= 2:
                pending[str(params[0])] = str(params[1])
            elif _READ.match(text):
                self.statements.append(Recorded(text, params, pending))
                self._pending[id(conn)] = {}


_LOG: ContextVar[StatementLog | None] = ContextVar("worldmm_statement_log", default=None)


@contextmanager
def recording() -> Iterator[StatementLog]:
    """Record the statements run through :class:`RecordingCursor` connections in this
    context (and threads it starts) until the block ends."""
    log = StatementLog()
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


class RecordingCursor(psycopg.Cursor):
    """A cursor that notes what it executes inside a :func:`recording` block."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        log = _LOG.get()
        if log is not None:
            log.note(self.connection, query, params)
        return super().execute(query, params, **kwargs)


def explain(conn: psycopg.Connection, stmt: Recorded) -> dict[str, Any]:
    """The planner's plan (EXPLAIN's JSON root ``Plan``) of ``stmt`` with its parameters,
    under its settings, in a transaction rolled back afterwards."""
    with conn.transaction(force_rollback=True):
        knn.set_local(conn, stmt.settings)
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {stmt.sql}", stmt.params).fetchone()
    return row[0][0]["Plan"]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan, depth first (init plans and subplans included, and on a Citus
    coordinator the plans its tasks run on the workers)."""
    yield plan
    for child in _children(plan):
        yield from nodes(child)


def _children(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(plan.get("Plans", []))
    job = plan.get("Distributed Query", {}).get("Job", {})
    for task in job.get("Tasks", []):
        for remote in task.get("Remote Plan", []):
            found += [r["Plan"] for r in remote if "Plan" in r]
    return found


def task_counts(plan: dict[str, Any]) -> list[int]:
    """The task count of every distributed job in ``plan`` (none on plain PostgreSQL): a
    one-wearer statement must plan to one task, on the one shard group of its wearer."""
    return [
        int(n["Distributed Query"]["Job"]["Task Count"])
        for n in nodes(plan)
        if "Job" in n.get("Distributed Query", {})
    ]


def render(plan: dict[str, Any], depth: int = 0) -> list[str]:
    """A plan as short indented lines: node, index, relation, estimated rows."""
    parts = [plan["Node Type"]]
    if "Index Name" in plan:
        parts.append(f"using {plan['Index Name']}")
    if "Relation Name" in plan:
        parts.append(f"on {plan['Relation Name']}")
    line = "  " * depth + " ".join(parts) + f" (rows={plan.get('Plan Rows')})"
    return [line, *(x for child in _children(plan) for x in render(child, depth + 1))]


def memory_table(relation: str) -> str | None:
    """The memory table a relation is, or is a partition (``visual_embeddings_p07``) or a
    Citus shard (``segments_102253``, ``visual_embeddings_p07_102600``) of."""
    for table in MEMORY_TABLES:
        if re.fullmatch(rf"{table}(_p\d+)?(_\d{{5,}})?", relation):
            return table
    return None


def problems(
    conn: psycopg.Connection,
    plan: dict[str, Any],
    *,
    needs_hnsw: bool,
    min_rows: int = WHOLE_SCAN_MIN_ROWS,
) -> list[str]:
    """What is wrong with ``plan``: a sequential scan of a memory table (or partition) of at
    least ``min_rows`` rows, unless a Limit right above it stops it early; and, with
    ``needs_hnsw``, no HNSW index scanned although a scan of a memory table expects that
    many rows (fewer rows, read through a btree and sorted, are a fine plan)."""
    found = [f"multi-shard plan ({n} tasks)" for n in task_counts(plan) if n > 1]
    indexes, most = [], 0
    for node, parent in _with_parents(plan, None):
        if "Index Name" in node:  # a Citus shard's index: its shell's name
            indexes.append(re.sub(r"_\d{5,}$", "", node["Index Name"]))
        relation = node.get("Relation Name", "")
        if not memory_table(relation):
            continue
        most = max(most, int(node.get("Plan Rows", 0)))
        if node["Node Type"] != "Seq Scan" or (parent or {}).get("Node Type") == "Limit":
            continue
        rows = table_rows(conn, relation)
        if rows >= min_rows:
            found.append(f"sequential scan of {relation} ({rows} rows)")
    if needs_hnsw and most >= min_rows and not hnsw_indexes(conn, indexes):
        found.append(f"no HNSW index scanned (indexes: {sorted(set(indexes)) or 'none'})")
    return found


def _with_parents(
    plan: dict[str, Any], parent: dict[str, Any] | None
) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    yield plan, parent
    for child in _children(plan):
        yield from _with_parents(child, plan)


def table_rows(conn: psycopg.Connection, relation: str) -> int:
    """The planner's row count of a table (``reltuples``; 0 when never analysed)."""
    return fetch_count(
        conn,
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)",
        (relation,),
    )


def hnsw_indexes(conn: psycopg.Connection, names: list[str]) -> list[str]:
    """Those of ``names`` that are HNSW indexes."""
    if not names:
        return []
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_am a ON a.oid = c.relam"
        " WHERE c.relname = ANY(%s) AND a.amname = 'hnsw'",
        (sorted(set(names)),),
    ).fetchall()
    return [r[0] for r in rows]


def is_index_search(stmt: Recorded) -> bool:
    """Whether ``stmt`` is an HNSW search (it runs with iterative scans set)."""
    return "hnsw.iterative_scan" in stmt.settings


def check(
    conn: psycopg.Connection, log: StatementLog, *, min_rows: int = WHOLE_SCAN_MIN_ROWS
) -> list[dict[str, Any]]:
    """Each recorded statement that reads a memory table: its SQL, parameters (vectors
    shortened), settings, plan (:func:`render` lines) and :func:`problems`."""
    out = []
    for stmt in log.statements:
        plan = explain(conn, stmt)
        tables = {memory_table(n.get("Relation Name", "")) for n in nodes(plan)} - {None}
        if not tables:
            continue
        out.append(
            {
                "sql": " ".join(stmt.sql.split()),
                "params": _shown(stmt.params),
                "settings": stmt.settings,
                "plan": render(plan),
                "problems": problems(
                    conn, plan, needs_hnsw=is_index_search(stmt), min_rows=min_rows
                ),
            }
        )
    return out


def _shown(params: Any) -> Any:
    """Parameters for a report: a vector as its length, not its values."""
    if isinstance(params, dict):
        return {k: _shown(v) for k, v in params.items()}
    if isinstance(params, list | tuple):
        return [_shown(v) for v in params]
    if hasattr(params, "shape"):
        return f"<vector {params.shape[0]}>"
    return params if isinstance(params, int | float | str | bool | None) else str(params)
