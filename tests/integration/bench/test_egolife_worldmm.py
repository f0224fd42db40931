"""The WorldMM method of the EgoLife benchmark on a small synthetic slice, real stack."""

from __future__ import annotations

from datetime import datetime

import pytest

from bench.egolife.run import METHODS, BenchConfig, run_benchmark
from tests.fixtures.egolife_data import write_scene_slice

pytestmark = pytest.mark.integration


def test_worldmm_method_ingests_asks_and_scores(tmp_path, settings, user_id):
    sync, questions = write_scene_slice(tmp_path / "data")
    cfg = BenchConfig(
        sync_dir=sync,
        questions=questions,
        out=tmp_path / "r.json",
        methods=list(METHODS),  # every method, as the CLI's default runs them
        user_id=user_id,
        cache_dir=tmp_path / "cache",
    )
    report = run_benchmark(cfg, settings)

    info = report["worldmm"]
    assert info["ingest"]["windows"] == 6
    assert info["rows"]["segments"]["30s:complete"] == 6
    assert info["rows"]["segments"].get("180s:complete") == 1  # 11:00-11:03, all six
    assert info["rows"]["triples"].get("episodic:active", 0) > 0
    assert list(report["methods"]) == list(METHODS)
    for method in METHODS:
        overall = report["methods"][method]["overall"]
        assert set(overall) == {"hit@1", "hit@3", "tiou", "accuracy", "n"}
        assert 0.0 <= overall["accuracy"] <= 1.0
        if method == "random":
            assert overall["hit@1"] is None  # no retrieval, accuracy only
        else:
            assert 0.0 <= overall["hit@3"] <= 1.0
    assert report["worldmm"]["query_ms"] > 0 and report["wall_s"] > 0
    # what one served question costs, every question timed
    asked = info["agent"]["question_ms"]
    assert asked["n"] == 3 and 0 < asked["p50"] <= asked["p95"] <= asked["max"]
    # the served agent's evidence reweighed under every pair of the answerer's weights: the
    # shipped pair gives its own letter on every question, and its held-out figures are kept
    # with its weights chosen on its own answers
    assert info["agent_grid"] == {"questions": 3, "shipped_pair_matches_served": 3}
    cv = report["answerer_cv_agent"]
    assert cv["chosen_by"] == "agent"
    for scheme in ("day", "type"):
        held = cv["both"][scheme]
        assert set(held["pooled"]) >= {"agent", "worldmm", "bm25", "dense"}
        assert set(held["by_type"]) == {r["type"] for r in report["per_question"]}
    # worldmm answers from its hits and one search per option; its top 3 alone is kept
    assert 0.0 <= info["accuracy_top3_only"] <= 1.0
    rows = {r["id"]: r for r in report["per_question"]}
    for row in rows.values():
        asked = datetime.fromisoformat(row["query_time"])
        for method in METHODS:
            assert row["methods"][method]["answer"] in ("A", "B")
            if method == "random":
                continue
            top = row["methods"][method]["top"]
            assert all(datetime.fromisoformat(end) <= asked for _s, end, _scale in top)
        top = row["methods"]["worldmm"]["top"]
        assert top, f"no segments returned for question {row['id']}"
    # the fused retriever found the kettle's window and the offline answerer read it
    assert rows["1"]["methods"]["worldmm"]["hit1"]
    assert rows["1"]["methods"]["worldmm"]["answer"] == "A"
    # the API's search asked live (the question time as the clock's now) is the same search
    assert report["methods"]["worldmm-live"] == report["methods"]["worldmm"]
    # where each retrieving method misses, from the same rows
    assert "random" not in report["misses"]
    hits = report["misses"]["worldmm"]["by_type"]
    assert sum(v["n"] for v in hits.values()) == report["questions"]
    for row in rows.values():
        assert row["methods"]["worldmm-live"]["top"] == row["methods"]["worldmm"]["top"]
    assert len(rows["3"]["methods"]["worldmm"]["top"]) <= 2  # two windows existed then
    assert not rows["3"]["methods"]["worldmm"]["hit3"]  # its evidence came later

    again = run_benchmark(cfg.model_copy(update={"reuse": True, "methods": ["worldmm"]}), settings)
    assert again["worldmm"]["ingest"] == {"reused_windows": 6, "windows": 0}
    assert again["worldmm"]["rows"]["segments"] == info["rows"]["segments"]
