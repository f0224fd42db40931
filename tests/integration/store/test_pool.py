"""Every pooled connection plans each statement for its own parameters (no generic plans)."""

from __future__ import annotations

import pytest

from worldmm.store import segment_search as ss

pytestmark = pytest.mark.integration


def test_prepared_searches_stay_custom_planned(database, user_id) -> None:
    with database.connection() as conn:
        assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_custom_plan"
        for _ in range(8):  # past psycopg's prepare threshold: a server-side prepared search
            ss.first_segment_start(conn, user_id)
        # statements without parameters always count as generic; those with them never may
        prepared = conn.execute(
            "SELECT count(*), coalesce(sum(generic_plans), 0) FROM pg_prepared_statements"
            " WHERE cardinality(parameter_types) > 0"
        ).fetchone()
        assert prepared[0] >= 1 and prepared[1] == 0  # prepared, never planned generically
