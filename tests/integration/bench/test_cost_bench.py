"""`worldmm bench cost` at its smallest: two minutes of a busy and of a quiet wearer through
the ingest flow at the old and the new caption defaults, and two EgoLife questions through the
agent, all against the fake OpenAI provider."""

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
        frame_size="320x180",
        limit_questions=2,
        guard=False,
    )
    report = json.loads(json.dumps(run_benchmark(cfg, settings, lambda _m: None)))

    busy, quiet = report["wearer_hour"]["busy"], report["wearer_hour"]["quiet"]
    for hour in (busy["old"], busy["new"], quiet["old"], quiet["new"]):
        assert hour["scaled_to_an_hour_by"] == 30 and hour["windows_complete"]["30"] == 4
        assert hour["windows_failed"] == 0
        # what the service recorded (llm_usage) is what the counter billed, call by call
        assert hour["recorded_usage_equals_counted"] is True
    price = load_prices().price_of("gpt-5-mini").image
    old, new = busy["old"]["model"]["by_role"], busy["new"]["model"]["by_role"]
    # before: 16 sampled frames a window as captured; now at most 4 keyframes within 512 px
    assert old["caption"]["images"] == 4 * 16 * 30
    assert old["caption"]["image_tokens"] == old["caption"]["images"] * price.tokens(320, 180)
    assert 0 < new["caption"]["images"] <= 4 * 4 * 30
    measured = new["caption"]["images"] * price.tokens(320, 180, measured=True)
    assert new["caption"]["image_tokens_measured"] == measured
    assert (
        new["caption"]["prompt_tokens"]
        == new["caption"]["text_tokens"] + new["caption"]["image_tokens"]
    )
    # reasoning: the model's default effort before (assumed medium), minimal now
    assert old["caption"]["reasoning_tokens"] == 448 * 4 * 30
    assert all(r["reasoning_tokens"] == 0 for r in new.values())
    # the quiet desk: the first window is captioned, the three still, silent ones carry it
    assert quiet["new"]["windows_carried"] == 3 * 30
    assert quiet["new"]["model"]["by_role"]["caption"]["calls"] == 1 * 30
    assert quiet["old"]["model"]["by_role"]["caption"]["calls"] == 4 * 30
    rows = {(r["session"], r["defaults"]): r for r in report["summary"]}
    for name in ("busy", "quiet"):
        assert rows[(name, "new")]["cost"] < rows[(name, "old")]["cost"]
        for r in (rows[(name, "new")], rows[(name, "old")]):
            assert r["cost_cheaper_tier"] < r["cost"] and r["cost_measured_images"] <= r["cost"]

    asked = report["question"]
    assert asked["n"] == 2 and asked["rounds"]["p50"] == 2  # two searches, then the answer
    for row in asked["per_question"]:
        # the entity lane (on by default since #23) names the query's people and things: one
        # NER call per episodic search, the agent's one and each of the two options' look-ups
        assert row["calls"] == {"reasoning_agent": 3, "response": 1, "ner": 3}
        assert 0 < row["tokens"] <= asked["goal_tokens"]
        assert row["reasoning_tokens"] == 3 * 640 + 512  # the agent at its own effort
    assert report["prices"]["as_of"] == str(load_prices().as_of)
    assert report["quality_guard"] is None
