"""The entity lane's reads stay on indexes at a memory's real size.

A week of memory holds ~20,000 30 s windows. The lane's reads once each read the user's whole
segments table on every question (a count of the windows for its IDF, and a join that hashed
every segment to meet the triples of one entity); the query bench's plan check found them. The
count now comes from the per-user statistics the lexical lane keeps (read when the memory
changed, at most once a minute), and the links are read, bounded, through indexes and ranked in
one statement. Here a memory of 12,000 windows, with one entity linked from every 12th, is
planned with the same check.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import psycopg
import pytest

from bench import plans
from tests.fixtures import entity_exact as ref
from tests.fixtures.store import DIM, T0
from worldmm.memory.retrieval import text_lanes
from worldmm.store import entities, entity_links
from worldmm.store.db import Database
from worldmm.store.segment_search import Filters
from worldmm.store.term_stats import read_all

pytestmark = pytest.mark.integration


WINDOWS = 12_000
K = 100  # the windows the lane returns (episodic_lane_candidates)


def _fill(conn: psycopg.Connection, user: str) -> int:
    """``WINDOWS`` complete 30 s windows; every 12th window's triple links one entity, and
    every window holds a triple of another (the table it was at), so the triples are many
    too."""
    conn.execute(
        "INSERT INTO segments (user_id, scale_seconds, window_start, window_end, caption,"
        " processing_status) SELECT %(u)s, 30, %(t0)s + g * interval '30 s',"
        " %(t0)s + (g + 1) * interval '30 s', 'window ' || g, 'complete'"
        " FROM generate_series(0, %(n)s - 1) AS g",
        {"u": user, "t0": T0, "n": WINDOWS},
    )
    entity = entities.insert_canonical_entity(conn, user, "Shure", np.ones(DIM, np.float32)).id
    table = entities.insert_canonical_entity(conn, user, "table", np.ones(DIM, np.float32)).id
    for linked, every in ((entity, 12), (table, 1)):
        conn.execute(
            "INSERT INTO triples (user_id, memory_type, segment_id, scale_seconds,"
            " subject_entity_id, predicate, object_literal, embedding, valid_from)"
            " SELECT s.user_id, 'episodic', s.id, 30, %(e)s, 'talks about', 'window ' || s.id,"
            " (SELECT embedding FROM entities WHERE user_id = %(u)s AND id = %(e)s), s.window_end"
            " FROM (SELECT *, row_number() OVER (ORDER BY id) AS n FROM segments"
            "       WHERE user_id = %(u)s) AS s WHERE s.n %% %(every)s = 0",
            {"u": user, "e": linked, "every": every},
        )
    conn.commit()
    # as autovacuum keeps a memory written over days: statistics and the visibility map
    conn.autocommit = True
    try:
        conn.execute("VACUUM (ANALYZE) segments, triples")
    finally:
        conn.autocommit = False
    return entity


def test_entity_lane_reads_no_table_whole(conn, stack, user_id) -> None:
    try:
        entity = _fill(conn, user_id)
        as_of = T0 + timedelta(days=3)
        db = Database(
            stack.database_url, min_size=1, max_size=1, cursor_factory=plans.RecordingCursor
        )
        try:
            with db.connection() as c:
                with plans.recording() as log:
                    links = ref.linked_segments(c, user_id, [entity], Filters(as_of))
                # read when the memory changed (at most once a minute), not per question
                stats = read_all(c, user_id)[0]
                # what the lane reads per question: the count, and one statement that reads
                # a bounded number of links, reads windows near a boundary again and ranks
                with plans.recording() as bounded:
                    df = ref.window_counts(c, user_id, [entity], as_of)
                    weights = text_lanes.entity_weights({entity: 1.0}, 8_640, df)
                    cap = text_lanes.link_cap(K)
                    lane = entity_links.ranked_windows(
                        c, user_id, weights, cap, K, Filters(as_of), text_lanes.AROUND_WEIGHT
                    )
                ranked = ref.proven(c, user_id, weights, K, Filters(as_of), cap)
                exact = ref.exact_ranking(c, user_id, weights, K, Filters(as_of))
                day = (as_of - timedelta(days=1), as_of)
                with plans.recording() as span:  # the step-by-step read's range read
                    again = ref.links_within(c, user_id, [entity], [day], Filters(as_of))
        finally:
            db.close()
        # three days: 8,640 windows had ended (the memory runs 4.2 days), every 12th linked
        total = stats.windows_at(as_of)
        assert total == 3 * 24 * 120 and stats.windows_at(None) == WINDOWS
        assert stats.windows_at(as_of - timedelta(seconds=1)) == total - 1
        assert len(links) == total // 12 and all(link.entity_ids == {entity} for link in links)
        assert max(link.end for link in links) <= as_of
        checked = plans.check(conn, log)
        assert [p for c in checked for p in c["problems"]] == [], checked
        assert len(checked) == len(log.statements) == 2  # the triples, then the windows
        # the bounded read: 720 windows name the entity by then; the newest K of them, proven
        assert df == {entity: total // 12}
        assert ranked is not None and ranked == exact and len(ranked) == K
        assert [(w.segment_id, w.score) for w in lane] == [(c.segment_id, c.score) for c in exact]
        assert len(again) == 24 * 120 // 12
        checked = plans.check(conn, bounded)
        assert [p for c in checked for p in c["problems"]] == [], checked
        # the count; the lane's one statement
        assert len(checked) == len(bounded.statements) == 2
        checked = plans.check(conn, span)
        assert [p for c in checked for p in c["problems"]] == [] and len(checked) == 1, checked
    finally:
        conn.rollback()
        conn.execute("DELETE FROM users WHERE id = %s", (user_id,))
        conn.commit()
