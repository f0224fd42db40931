"""The EgoLife benchmark ingests captions as text, so the caption call's budget (issue 38)
cannot move its figures: the same slice at the old and the new caption defaults gives the
same hits, answers and segments."""

from __future__ import annotations

import pytest

from bench.cost_hour import variant
from bench.egolife.run import BenchConfig, run_benchmark
from tests.fixtures.egolife_data import write_scene_slice

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_caption_defaults_do_not_move_egolife(tmp_path, settings, user_id) -> None:
    sync, questions = write_scene_slice(tmp_path / "data")
    figures = {}
    for defaults in ("old", "new"):
        cfg = BenchConfig(
            sync_dir=sync,
            questions=questions,
            out=tmp_path / f"{defaults}.json",
            methods=["worldmm"],
            user_id=user_id,
            cache_dir=tmp_path / "cache",
        )
        report = run_benchmark(cfg, variant(settings, defaults))
        rows = {r["id"]: r["methods"]["worldmm"] for r in report["per_question"]}
        figures[defaults] = (
            report["methods"]["worldmm"],
            report["worldmm"]["rows"]["segments"],
            {i: (r["answer"], r["top"]) for i, r in rows.items()},
        )
    assert figures["old"] == figures["new"]
