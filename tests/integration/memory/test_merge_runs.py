"""A summary's merge is given each run of one repeated caption once, and a window whose
children all say one thing takes it without a model call."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10, segment_at
from worldmm.memory.caption_ingest import ingest_caption_windows
from worldmm.memory.summary_segment import NOT_MERGED, distinct_runs

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder, window_max_attempts=2),
]

DESK = "I sat at my desk and read the quarterly report on the screen."
DOOR = "I got up and opened the door for Lucia."


def test_runs_are_given_once_in_order() -> None:
    assert distinct_runs(["a", "a", "b", "b", "b", "a"]) == ["a", "b", "a"]
    assert distinct_runs(["a"]) == ["a"] and distinct_runs([]) == []


def _build(deps, user_id, captions: list[str]) -> list[tuple[list[str], int]]:
    merges: list[tuple[list[str], int]] = []
    merge = deps.roles.merge_captions

    async def counted(captions, level_seconds):
        merges.append((list(captions), level_seconds))
        return await merge(captions, level_seconds)

    deps.roles.merge_captions = counted
    windows = [
        (T10 + timedelta(seconds=30 * k), T10 + timedelta(seconds=30 * (k + 1)), c, "")
        for k, c in enumerate(captions)
    ]
    asyncio.run(ingest_caption_windows(deps, user_id, windows))
    return merges


def test_children_that_all_say_one_thing_cost_no_merge(deps, user_id) -> None:
    merges = _build(deps, user_id, [DESK] * 6)
    assert merges == []  # 3 min, 10 min and 1 h: one caption each, nothing to merge
    summary = segment_at(deps, user_id, 180, T10)
    assert summary.caption == DESK and summary.processing_status == "complete"
    assert summary.model_versions["merge_captions"] == NOT_MERGED
    assert "merge_captions" not in summary.prompt_versions
    assert segment_at(deps, user_id, 600, T10).caption == DESK


def test_a_merge_reads_each_run_once(deps, user_id) -> None:
    merges = _build(deps, user_id, [DESK, DESK, DOOR, DOOR, DESK, DESK])
    assert merges[0] == ([DESK, DOOR, DESK], 180)
    summary = segment_at(deps, user_id, 180, T10)
    assert summary.caption == f"{DESK} {DOOR}"  # the scripted merge: its first two entries
    assert "merge_captions" not in summary.model_versions
