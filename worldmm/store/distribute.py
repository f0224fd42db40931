"""Distributing the schema on a Citus coordinator (``worldmm db migrate`` calls it after the
migrations; on plain PostgreSQL it does nothing).

Every table that holds a wearer's rows is distributed by ``user_id`` (``users`` by ``id``) and
colocated with ``users``, so one wearer's rows of every table live in one shard group on one
node: a one-wearer statement is a router query, foreign keys and the triple counters' triggers
stay inside the shard group, and a wearer moves between nodes as a whole. The few global tables
are reference tables, replicated to every node. A table this module does not know how to place
stops the migration: a new table must say where it belongs.
"""

from __future__ import annotations

import psycopg

# Not a wearer's rows: the index from a key (or a browser session) to its wearer, looked up
# by key alone on every request; the admin's record (it outlives the users it names); model
# usage made for no one.
REFERENCE_TABLES = ("api_keys", "ui_sessions", "admin_audit", "llm_usage_unattributed")
LOCAL_TABLES = ("schema_migrations",)  # the coordinator's own bookkeeping


class PlacementError(RuntimeError):
    """A table is neither per-wearer (no user_id column) nor listed as global."""


def spans_wearers(conn: psycopg.Connection, *, transaction: bool = True) -> None:
    """The statements that follow span wearers on purpose (a migration, an admin's listing, a
    batch of many wearers' rows): on a Citus cluster set to log or refuse multi-shard
    statements (``citus.multi_task_query_log_level``, which the tests set to 'error'), they
    pass; until the transaction ends, or for the session with ``transaction=False``. A no-op
    setting on plain PostgreSQL."""
    conn.execute("SELECT set_config('citus.multi_task_query_log_level', 'off', %s)", (transaction,))


def is_citus(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
    return row is not None


def _tables(conn: psycopg.Connection) -> dict[str, bool]:
    """Top-level tables of the public schema (partitions go with their parent), each with
    whether it has a user_id column."""
    rows = conn.execute(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid"
        "   AND a.attname = 'user_id' AND NOT a.attisdropped)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
    ).fetchall()
    return {name: has_user for name, has_user in rows}


def _referenced(conn: psycopg.Connection) -> dict[str, set[str]]:
    """For each table, the other tables its foreign keys point at."""
    rows = conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
        " WHERE contype = 'f' AND conrelid <> confrelid AND conparentid = 0"
    ).fetchall()
    refs: dict[str, set[str]] = {}
    for table, target in rows:
        refs.setdefault(table, set()).add(target)
    return refs


def placement_order(tables: dict[str, bool], refs: dict[str, set[str]]) -> list[str]:
    """The per-wearer tables in an order where every table comes after those it references
    (``users`` first); PlacementError for a table that is neither per-wearer nor global."""
    unknown = [
        t
        for t, has_user in tables.items()
        if not has_user and t != "users" and t not in REFERENCE_TABLES + LOCAL_TABLES
    ]
    if unknown:
        raise PlacementError(
            f"tables without user_id that are not listed as global: {', '.join(sorted(unknown))}"
            " (add them to worldmm/store/distribute.py REFERENCE_TABLES or LOCAL_TABLES)"
        )
    pending = {t for t, has_user in tables.items() if has_user and t not in REFERENCE_TABLES}
    order = ["users"]
    while pending:
        ready = sorted(t for t in pending if refs.get(t, set()) & pending == set())
        if not ready:
            raise PlacementError(f"foreign keys form a cycle among {sorted(pending)}")
        order += ready
        pending -= set(ready)
    return order


def distribute(conn: psycopg.Connection) -> list[str]:
    """Distribute (or replicate) every table that is not yet; returns those it placed. An
    autocommit connection; a no-op on plain PostgreSQL and when everything is placed."""
    if not is_citus(conn):
        return []
    placed = {
        r[0] for r in conn.execute("SELECT logicalrelid::text FROM pg_dist_partition").fetchall()
    }
    tables = _tables(conn)
    # the triple counters' triggers write only their colocated shard (schema/0019)
    conn.execute("SET citus.enable_unsafe_triggers TO on")
    done: list[str] = []
    order = placement_order(tables, _referenced(conn))
    # A per-wearer table may point at a global one (never the other way). Citus places neither
    # while the other is local, so those keys step aside while both are placed.
    aside = _keys_to_global(conn, [t for t in order if t not in placed])
    for table, name, _ in aside:
        conn.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
    for table in REFERENCE_TABLES:
        if table in tables and table not in placed:
            conn.execute("SELECT create_reference_table(%s)", (table,))
            done.append(table)
    for table in order:
        if table in placed:
            continue
        if table == "users":
            conn.execute("SELECT create_distributed_table('users', 'id')")
        else:
            conn.execute(
                "SELECT create_distributed_table(%s, 'user_id', colocate_with => 'users')",
                (table,),
            )
        done.append(table)
    for table, name, definition in aside:
        conn.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    return done


def _keys_to_global(conn: psycopg.Connection, tables: list[str]) -> list[tuple[str, str, str]]:
    """Foreign keys of ``tables`` that point at a global table: (table, name, definition)."""
    rows = conn.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE contype = 'f' AND conparentid = 0 AND conrelid::regclass::text = ANY(%s)"
        " AND confrelid::regclass::text = ANY(%s)",
        (tables, list(REFERENCE_TABLES)),
    ).fetchall()
    return [(t, n, d) for t, n, d in rows]
