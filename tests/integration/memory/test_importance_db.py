"""Importance is stored with every segment: the model's rating when it gives one, else the
offline estimate against the user's earlier windows; summaries take their children's."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
import pytest

from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10, jpeg_window, segment_at
from worldmm.llm.schemas import Scored
from worldmm.memory.caption_ingest import ingest_caption_windows
from worldmm.memory.window_status import process_window
from worldmm.store.segments import list_segments

# the bundle of the construction tests: scripted roles, a chosen embedder, the real store
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder, window_max_attempts=2),
]


def _windows(captions: list[tuple[str, str]]):
    return [
        (T10 + timedelta(seconds=30 * k), T10 + timedelta(seconds=30 * (k + 1)), c, t)
        for k, (c, t) in enumerate(captions)
    ]


def test_routine_repeats_weigh_less_than_a_new_conversation_with_names(deps, user_id) -> None:
    routine = ("I sat at my desk and typed.", "")
    talk = (
        "I met Lucia and Jake at the door.",
        "Lucia said the dentist moved my appointment to Friday at three, Jake will drive us",
    )
    windows = _windows([routine, routine, routine, talk])
    # one at a time: each window's novelty is measured against the ones stored before it
    for w in windows:
        asyncio.run(ingest_caption_windows(deps, user_id, [w]))
    with deps.db.connection() as conn:
        segs = {s.window_start: s for s in list_segments(conn, user_id, scale=30)}
    first, second, third, fourth = (segs[w[0]] for w in windows)
    assert {s.importance_source for s in (first, second, third, fourth)} == {"estimate"}
    assert second.importance < first.importance  # the same again is not news
    assert third.importance == pytest.approx(second.importance, abs=1e-3)
    assert fourth.importance > first.importance + 0.15


def test_a_models_rating_is_stored_and_a_summary_takes_its_highest_child(deps, user_id) -> None:
    ratings = iter([0.9, 0.2])

    async def caption(frames, transcript, seen_text=None):
        return Scored(f"I held the red mug {len(frames)}.", next(ratings))

    deps.roles.caption = caption
    # every window captioned (the second, still and silent, would take the first's caption)
    deps = deps.with_settings(still_window_change=0.0)
    asyncio.run(process_window(deps, jpeg_window(deps, user_id, T10)))
    asyncio.run(process_window(deps, jpeg_window(deps, user_id, T10 + timedelta(seconds=30))))
    first = segment_at(deps, user_id, 30, T10)
    assert (first.importance, first.importance_source) == (pytest.approx(0.9), "model")
    assert segment_at(deps, user_id, 30, T10 + timedelta(seconds=30)).importance == pytest.approx(
        0.2
    )

    # a replay's pending mark (the window written again without a rating) keeps the rating
    # until the rebuild writes its own
    from worldmm.memory.window_rows import segment_write
    from worldmm.store.segments import upsert_segment

    with deps.db.transaction() as conn:
        window = jpeg_window(deps, user_id, T10)
        upsert_segment(conn, segment_write(window, processing_status="pending"))
    assert segment_at(deps, user_id, 30, T10).importance == pytest.approx(0.9)

    from worldmm.memory.summary_segment import build_summary_segment
    from worldmm.memory.windows import CoarseWindow, dt_to_ms

    kids = ((30, dt_to_ms(T10)), (30, dt_to_ms(T10) + 30_000))
    window = CoarseWindow(user_id, 180, dt_to_ms(T10), kids, True, "s1")
    asyncio.run(build_summary_segment(deps, window))  # the scripted merge gives no rating
    summary = segment_at(deps, user_id, 180, T10)
    assert (summary.importance, summary.importance_source) == (pytest.approx(0.9), "estimate")


def test_the_backfill_estimates_what_was_written_before_importance(deps, user_id) -> None:
    from worldmm.memory.importance import backfill_importance

    routine = ("I sat at my desk and typed.", "")
    talk = ("I met Lucia and Jake at the door.", "Lucia said the dentist moved to Friday")
    asyncio.run(ingest_caption_windows(deps, user_id, _windows([routine, routine, talk])))
    with deps.db.transaction() as conn:  # as a memory from before migration 0015
        conn.execute(
            "UPDATE segments SET importance = NULL, importance_source = NULL WHERE user_id = %s",
            (user_id,),
        )
        fine, coarse = backfill_importance(conn, user_id)
    assert (fine, coarse) == (3, 3)  # 3 windows; the 3 min, 10 min and 1 h above them
    with deps.db.connection() as conn:
        segs = list_segments(conn, user_id)
    by_scale = {}
    for s in segs:
        by_scale.setdefault(s.scale_seconds, []).append(s)
    first, second, third = by_scale[30]
    assert second.importance < first.importance < third.importance
    assert {s.importance_source for s in segs} == {"estimate"}
    for scale in (180, 600, 3600):
        assert by_scale[scale][0].importance == pytest.approx(third.importance)


def test_the_novelty_reads_the_recent_windows_vectors_without_parsing_text(
    deps, user_id, monkeypatch
) -> None:
    # every 30 s window reads its 20 predecessors' vectors: parsing their text form was a
    # CPU cost of the ingest worker (~170 µs each), the binary form is a copy
    from pgvector import Vector

    from worldmm.store.importance_recall import recent_embeddings

    talk = [(f"I met Lucia at the door {k}.", f"Lucia said hello {k}") for k in range(3)]
    asyncio.run(ingest_caption_windows(deps, user_id, _windows(talk)))
    end = T10 + timedelta(minutes=10)
    with deps.db.connection() as conn:
        as_text = conn.execute(
            "SELECT embedding FROM segment_embeddings WHERE user_id = %s AND scale_seconds = 30"
            " ORDER BY window_end DESC",
            (user_id,),
        ).fetchall()
        parsed = []
        from_text = Vector.from_text.__func__
        monkeypatch.setattr(
            Vector, "from_text", classmethod(lambda cls, v: parsed.append(v) or from_text(cls, v))
        )
        recent = recent_embeddings(conn, user_id, 30, end, 20)
    assert parsed == []
    assert recent.dtype == np.float32 and recent.shape == (3, deps.embedder.dim)
    assert np.array_equal(recent, np.stack([r[0].to_numpy() for r in as_text]))
