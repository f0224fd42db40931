"""Connection pool for the store: pgvector types registered on every pooled connection.

The store API is synchronous (psycopg 3); async callers run it in threads. Repository
functions take a connection, so several of them compose inside one ``transaction()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from worldmm.settings import Settings
from worldmm.store.migrate import check_schema


def configure_connection(conn: psycopg.Connection) -> None:
    """Register pgvector's types (values come back as ``Vector``/``HalfVector``), and have
    every statement planned for its own parameters."""
    register_vector(conn)
    # psycopg prepares a statement run five times, and PostgreSQL may then plan it once,
    # without the user: blind to the wearer's partition (a 4-week clip search went from 11 ms
    # to 210 p50). Not preparing at all keeps every search planned for its parameters.
    # (`plan_cache_mode = force_custom_plan` did that too, but also for the foreign-key
    # checks: a new wearer, missing from the statistics, had each check scan its rows.)
    conn.prepare_threshold = None
    # On a Citus coordinator a search's SET LOCAL settings (its HNSW candidate list) must reach
    # the worker that runs it; on plain PostgreSQL this names a placeholder and does nothing.
    conn.execute("SET citus.propagate_set_commands = 'local'")
    conn.commit()


class Database:
    """A pool of connections to one PostgreSQL database (already migrated)."""

    def __init__(
        self,
        database_url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout_s: float = 30.0,
        name: str = "worldmm",
        cursor_factory: type[psycopg.Cursor] | None = None,
    ) -> None:
        """``cursor_factory``: the cursors every pooled connection makes (the query
        benchmark's :class:`~bench.plans.RecordingCursor`); psycopg's by default."""
        self.database_url = database_url

        def configure(conn: psycopg.Connection) -> None:
            configure_connection(conn)
            if cursor_factory is not None:
                conn.cursor_factory = cursor_factory

        self.pool = ConnectionPool(
            database_url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            configure=configure,
            open=False,
            name=name,
        )
        # fail here, with the server's message, rather than on the first query
        self.pool.open(wait=True, timeout=timeout_s)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; committed when the block ends, rolled back on error."""
        with self.pool.connection() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[psycopg.Connection]:
        """A pooled connection for reads, in autocommit: each statement is its own
        transaction, as each already had its own snapshot under READ COMMITTED, and a read
        pays no BEGIN and COMMIT round trips (two of a search's three trips to the server
        per call). A statement that needs ``SET LOCAL`` opens a transaction itself."""
        with self.pool.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.autocommit = False  # as the pool's other users expect it

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One transaction: every write in the block commits together or not at all."""
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def dedicated(
        self,
        *,
        statement_timeout_s: float | None = None,
        idle_timeout_s: float | None = None,
        application_name: str = "worldmm",
    ) -> Iterator[psycopg.Connection]:
        """A connection of its own, outside the pool (a long read, such as an export, never
        holds a pooled one); committed when the block ends, rolled back on error, then
        closed. ``statement_timeout_s`` bounds each statement and ``idle_timeout_s`` how long
        an open transaction may wait on its caller (the server ends the session after it)."""
        options = []
        if statement_timeout_s is not None:
            options.append(f"-c statement_timeout={round(statement_timeout_s * 1000)}")
        if idle_timeout_s is not None:
            options.append(f"-c idle_in_transaction_session_timeout={round(idle_timeout_s * 1000)}")
        with psycopg.connect(
            self.database_url, options=" ".join(options), application_name=application_name
        ) as conn:
            configure_connection(conn)
            yield conn

    def check_schema(self, settings: Settings) -> None:
        """Raise SchemaError unless the database is fully migrated for these settings."""
        with self.connection() as conn:
            check_schema(conn, settings)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
