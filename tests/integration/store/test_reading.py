"""Reads in autocommit (``Database.reading``): no transaction is opened around them, the
connection goes back to the pool as the pool's other users expect it, and a vector search's
``SET LOCAL`` settings still hold for its statement alone."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from worldmm.store import knn
from worldmm.store.db import Database

pytestmark = pytest.mark.integration


def test_a_read_opens_no_transaction_and_the_pool_gets_its_connection_back(stack) -> None:
    with Database(stack.database_url, min_size=1, max_size=1) as db:
        with db.reading() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.info.transaction_status == TransactionStatus.IDLE  # no BEGIN sent
            with pytest.raises(psycopg.errors.DivisionByZero):
                conn.execute("SELECT 1 / 0")
            assert conn.execute("SELECT 2").fetchone() == (2,)  # nothing to roll back
        with pytest.raises(psycopg.errors.DivisionByZero), db.reading() as conn:
            conn.execute("SELECT 1 / 0")
        with db.connection() as conn:  # the one pooled connection, as writers expect it
            assert not conn.autocommit
            conn.execute("SELECT 1")
            assert conn.info.transaction_status == TransactionStatus.INTRANS


def test_a_vector_search_keeps_its_settings_to_its_own_statement(db) -> None:
    probe = knn.Statement(
        "SELECT current_setting('hnsw.ef_search') AS ef, current_setting('enable_sort') AS sort",
        {},
        {"hnsw.ef_search": "123", "enable_sort": "off"},
    )
    with db.reading() as conn:
        assert knn.run(conn, probe) == [{"ef": "123", "sort": "off"}]  # one SET for both
        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)  # gone with its statement
