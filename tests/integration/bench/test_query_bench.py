"""The query benchmark end to end on one hour of synthetic memory (PostgreSQL + Redis)."""

from __future__ import annotations

import json

import pytest

from bench.query import ALL_LANES, QueryOptions, main, run_benchmark
from bench.query_synth import SynthConfig, expected_counts
from worldmm.models import SCALES
from worldmm.store.db import Database
from worldmm.store.purge import purge_user
from worldmm.store.users import user_exists

pytestmark = pytest.mark.integration


def test_cli_writes_the_report_and_purges_the_user(stack, tmp_path, monkeypatch, user_id):
    monkeypatch.setenv("WORLDMM_DATABASE_URL", stack.database_url)
    monkeypatch.setenv("WORLDMM_REDIS_URL", stack.redis_url)
    monkeypatch.setenv("WORLDMM_STATE_DIR", str(tmp_path / "state"))
    # the configured lanes are measured unless --lanes asks for others, as here; main() sets
    # them in the environment (for the cold child processes): restored after the test
    monkeypatch.setenv("WORLDMM_EPISODIC_LANE_WEIGHTS", "lexical:1.0")
    out = tmp_path / "query.json"
    main(
        [
            "--out",
            str(out),
            "--days",
            "0.04",
            "--queries",
            "4",
            "--cold-queries",
            "2",
            "--user",
            user_id,
            "--users",
            "2",
            "--new-segments",
            "2",
            "--settle-s",
            "0",
            "--lanes",
            ALL_LANES,
        ]
    )
    report = json.loads(out.read_text())
    # the map names every lane (#23 added the entity lane); one left out of --lanes weighs 0
    assert report["episodic_lane_weights"] == {
        "lexical": 1.0,
        "dense": 1.0,
        "graph": 0.5,
        "entity": 0.0,
    }

    for memory_type in ("episodic", "semantic", "visual"):
        for phase, n in (("warm", 4), ("cold", 2)):
            stats = report["retrieval_ms"][memory_type][phase]
            assert stats["n"] == n and 0 < stats["p50"] <= stats["p95"] <= stats["max"]
            assert report["retrieval"][memory_type][phase]["mean_hits"] > 0
        # primed in batches until one was steady (or no primer was left)
        primed = report["retrieval"][memory_type]["primed"]
        assert primed["batches"] == len(primed["ms"]) >= 2
        assert all(0 < b["p50"] <= b["p95"] for b in primed["ms"])
    # where a warm episodic search's time went: each stage that ran, none that did not
    stages = report["retrieval"]["episodic"]["warm"]["mean_ms_per_stage"]
    assert set(stages) == {"prepare", "lexical", "dense", "graph", "drill_down", "hits"}
    assert all(ms > 0 for ms in stages.values())
    # warm finds every graph in the process's memo (Redis is not asked); cold is a new
    # process: every graph comes from Redis (numpy buffers), none is rebuilt
    assert report["retrieval"]["episodic"]["warm"]["cache"] == {"hits": 0, "misses": 0}
    assert report["retrieval"]["episodic"]["cold"]["cache"]["hits"] == 2 * len(SCALES)
    assert report["retrieval"]["episodic"]["cold"]["cache"]["misses"] == 0
    assert report["retrieval"]["semantic"]["cold"]["cache"]["hits"] == 2
    # as_of questions reuse the warm graphs: no Redis read, no rebuild
    assert report["retrieval_ms"]["episodic"]["as_of"]["n"] == 4
    assert report["retrieval"]["episodic"]["as_of"]["cache"]["misses"] == 0
    assert report["new_segment_visible"] == [True, True]
    assert report["new_segment_visible_ms"]["n"] == 2
    assert report["users"] == 2
    # the same questions were timed with the user alone, then with the other's memory loaded
    # (its rows really are there: counted before the purge)
    assert report["retrieval_ms_alone"]["episodic"]["warm"]["n"] == 4
    assert report["others"]["user_ids"] == [f"{user_id}-other1"]
    # each timed phase says the load it began at (no wait asked for here)
    for phase in ("settle_alone", "settle"):
        assert report["loadavg"][phase]["waited_s"] == 0
    assert report["others"]["load"]["total_rows"] == report["load"]["total_rows"]
    for memory_type in ("episodic", "semantic", "visual"):
        ratios = report["others_effect"][memory_type]["warm"]
        assert ratios["p50_ratio"] > 0 and ratios["p95_ratio"] > 0
    assert "as_of" in report["others_effect"]["episodic"]
    assert report["load_rows_per_s"] > 0
    assert report["rows"] == report["expected_rows"] == expected_counts(SynthConfig(hours=1))
    assert report["rows_match"] is True
    assert len(report["loadavg"]["start"]) == 3
    assert report["kept"] is False and report["purge_s"] >= 0
    # each memory's search was EXPLAINed with its own parameters: the memory tables are read
    # through their indexes, and the bench's check found nothing to fail on
    assert set(report["plans"]) == {"episodic", "semantic", "visual", "episodic_as_of"}
    visual_plans = report["plans"]["visual"]
    assert any("visual_embeddings_p" in line for s in visual_plans for line in s["plan"])
    assert all(s["sql"] and s["plan"] for p in report["plans"].values() for s in p)
    assert report["plan_problems"] == []
    with Database(stack.database_url, max_size=1) as db, db.connection() as conn:
        assert not user_exists(conn, user_id)
        assert not user_exists(conn, f"{user_id}-other1")


def test_kept_user_holds_the_promised_rows(settings, user_id):
    cfg = SynthConfig(hours=1, seed=3, frames_per_segment=2)
    opts = QueryOptions(
        queries=2, cold_queries=1, user=user_id, keep=True, keep_indexes=True, settle_s=0
    )
    report = run_benchmark(settings, cfg, opts)
    want = expected_counts(cfg)
    assert report["load"]["dropped_indexes"] == []
    with Database(settings.database_url, max_size=1) as db, db.connection() as conn:

        def count(sql: str) -> int:
            return conn.execute(sql, (user_id,)).fetchone()[0]

        assert count("SELECT count(*) FROM segments WHERE user_id = %s") == want["segments"]
        assert (
            count(
                "SELECT count(*) FROM segments WHERE user_id = %s"
                " AND scale_seconds < 3600 AND parent_segment_id IS NULL"
            )
            == 0
        )
        assert count("SELECT count(*) FROM triples WHERE user_id = %s") == (
            want["episodic"] + want["semantic"]
        )
        assert (
            count(
                "SELECT count(*) FROM triples t JOIN triples r ON r.id = t.replaced_by"
                " WHERE t.user_id = %s AND r.invalidated_at IS NULL"
                " AND t.invalidated_at = r.valid_from"
            )
            == want["semantic_invalidated"]
        )
        assert (
            count("SELECT count(*) FROM visual_embeddings WHERE user_id = %s") == (want["visual"])
        )
        assert count("SELECT count(*) FROM frames WHERE user_id = %s") == want["frames"]

    # --reuse measures the kept user again without loading, and checks it is the same memory
    again = run_benchmark(settings, cfg, opts.model_copy(update={"reuse": True}))
    assert again["load"] is None and again["rows_match"] is True
    assert again["retrieval_ms"]["episodic"]["warm"]["p50"] > 0
    with pytest.raises(ValueError, match="does not hold"):
        run_benchmark(
            settings, SynthConfig(hours=2, seed=3), QueryOptions(user=user_id, reuse=True)
        )
    with pytest.raises(ValueError, match="does not exist"):
        run_benchmark(settings, cfg, QueryOptions(user=user_id + "-nobody", reuse=True))
    with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
        purge_user(conn, user_id)


def test_users_never_loads_over_or_purges_someone_elses_kept_memory(settings, user_id):
    from worldmm.store.users import ensure_user

    kept = f"{user_id}-other1"
    with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
        ensure_user(conn, kept)
    with pytest.raises(ValueError, match="already exist"):
        run_benchmark(
            settings, SynthConfig(hours=1), QueryOptions(queries=2, user=user_id, users=2)
        )
    with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
        assert user_exists(conn, kept)
        assert not user_exists(conn, user_id)  # nothing was loaded
        purge_user(conn, kept)
