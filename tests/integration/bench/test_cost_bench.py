"""`worldmm bench cost` at its smallest: two minutes of one wearer through the ingest flow and
two EgoLife questions through the agent, both against the fake OpenAI provider."""

from __future__ import annotations

import json

import pytest

from bench.cost import CostConfig, run_benchmark
from tests.fixtures.egolife_data import write_scene_slice
from worldmm.llm.prices import load_prices

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_cost_benchmark(settings, tmp_path, user_id) -> None:
    sync, questions = write_scene_slice(tmp_path / "data")
    cfg = CostConfig(
        out=tmp_path / "cost.json",
        sync_dir=sync,
        questions=questions,
        user_id=user_id,
        minutes=2,
        frame_size="64x48",
        reasoning_tokens=100,
        limit_questions=2,
    )
    report = json.loads(json.dumps(run_benchmark(cfg, settings, lambda _m: None)))

    hour = report["wearer_hour"]
    assert hour["scaled_to_an_hour_by"] == 30 and hour["windows_complete"]["30"] == 4
    assert hour["windows_failed"] == 0
    # what the service recorded (llm_usage) is what the counter billed, call by call
    assert hour["recorded_usage_equals_counted"] is True
    roles = hour["model"]["by_role"]
    caption = roles["caption"]
    assert caption["calls"] == 4 * 30 and caption["model"] == "gpt-5-mini"
    assert caption["images"] == 4 * 16 * 30  # 16 sampled frames per window
    per_image = load_prices().price_of("gpt-5-mini").image.tokens(64, 48)
    assert caption["image_tokens"] == caption["images"] * per_image
    assert caption["prompt_tokens"] == caption["text_tokens"] + caption["image_tokens"]
    # the test captions name nobody: NER finds no one, so no episodic triples are asked for
    assert {"ner", "semantic_triples"} <= set(roles) and "episodic_triples" not in roles
    assert all(r["completion_tokens"] >= 100 * r["calls"] for r in roles.values())
    assert hour["model"]["total"]["cost"] > 0
    assert hour["model"]["total"]["cost_with_batch_api"] == pytest.approx(
        hour["model"]["total"]["cost"] / 2, abs=1e-6
    )
    assert hour["blob_store"]["requests_total"] > 0
    blob = hour["blob_store"]
    assert blob["captured_bytes"]["frames"] > 0 and blob["captured_bytes"]["audio"] > 0
    # every capture is stored: the objects written hold at least the captures' bytes
    assert sum(blob["bytes_written"].values()) >= sum(blob["captured_bytes"].values())
    assert hour["database"]["row_bytes"] > 0 and hour["database"]["vector_bytes"] > 0
    assert "segments" in hour["database"]["tables"]

    asked = report["question"]
    assert asked["n"] == 2 and asked["rounds"]["p50"] == 2  # two searches, then the answer
    for row in asked["per_question"]:
        # the entity lane (on by default since #23) names the query's people and things: one
        # NER call per episodic search, the agent's one and each of the two options' look-ups
        assert row["calls"] == {"reasoning_agent": 3, "response": 1, "ner": 3}
        assert 0 < row["tokens"] <= asked["goal_tokens"]
    assert asked["within_goal"] == 1.0
    assert report["prices"]["as_of"] == str(load_prices().as_of)
