"""Memory construction against the real store (embedded PostgreSQL) with scripted model roles
and an embedder whose similarities the test chooses."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta

import pytest

from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10, jpeg_window, segment_at
from worldmm.llm.schemas import ConsolidationDecision
from worldmm.memory.caption_ingest import ingest_caption_windows
from worldmm.memory.entity_resolution import resolve_entities
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, Item, dt_to_ms
from worldmm.models import Triple

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder, window_max_attempts=2),
]


def test_base_window_writes_everything_and_degrades_without_encoder(deps, user_id) -> None:
    from tests.fixtures.store_reads import get_visual_embedding
    from worldmm.store.frames import list_frames
    from worldmm.store.triples import triples_for_segments

    out = asyncio.run(process_window(deps, jpeg_window(deps, user_id, T10)))
    assert out.status == "complete" and out.counts["sampled"] == 16 and out.counts["frames"] == 20
    seg = segment_at(deps, user_id, 30, T10)
    assert seg.processing_status == "complete" and seg.visual_status == "complete"
    # a still window: the captioner got its one keyframe, the encoder the 16 sampled frames
    assert seg.caption.endswith("1 frames.") and out.counts["keyframes"] == 1
    with deps.db.connection() as conn:
        assert get_visual_embedding(conn, user_id, seg.id) is not None
        assert len(list_frames(conn, user_id, limit=100)) == 20
        (t,) = triples_for_segments(conn, user_id, [seg.id])
        assert (t.subject_name, t.predicate, t.object_name) == ("Katrina", "holds", "red mug")

    deps.encoder = Encoder(up=False)
    later = T10 + timedelta(seconds=30)
    out = asyncio.run(process_window(deps, jpeg_window(deps, user_id, later)))
    seg = segment_at(deps, user_id, 30, later)
    assert out.status == "complete" and seg.processing_status == "complete"
    assert seg.visual_status == "pending"  # retried later; the text memory did not wait


def test_model_failure_marks_the_segment_failed(deps, user_id) -> None:
    deps.roles.fail_caption = True
    out = asyncio.run(process_window(deps, jpeg_window(deps, user_id, T10)))
    assert out.status == "failed" and out.attempts == 2 and "model down" in out.error
    seg = segment_at(deps, user_id, 30, T10)
    assert seg.processing_status == "failed" and "model down" in seg.error


def test_entity_resolution_exact_alias_confirmed_or_new(deps, user_id) -> None:
    from worldmm.store.entities import insert_canonical_entity
    from worldmm.store.users import ensure_user

    deps.embedder = Embedder(near={"Kat": ("Katrina", 0.8), "Katia": ("Katrina", 0.7)})
    with deps.db.transaction() as conn:
        ensure_user(conn, user_id)
        insert_canonical_entity(conn, user_id, "Katrina", deps.embedder.embed(["Katrina"])[0])
    deps.roles.confirm[("Kat", "Katrina")] = True
    got = asyncio.run(resolve_entities(deps, user_id, ["katrina", "Kat", "Katia", "Bob"], "ctx"))
    assert {k: r.action for k, r in got.items()} == {
        "katrina": "existing",
        "kat": "alias",
        "katia": "new",
        "bob": "new",
    }
    assert got["kat"].canonical_name == "Katrina" and got["kat"].similarity == pytest.approx(
        0.8, abs=1e-3
    )


def test_semantic_consolidation_soft_deletes_with_provenance(deps, user_id) -> None:
    from tests.fixtures.store_reads import list_consolidation_audit
    from worldmm.store.triples import list_semantic

    old = Triple(subject="Lucia", predicate="likes", object="sweet desserts")
    new = Triple(subject="Lucia", predicate="dislikes", object="overly sweet food")
    deps.embedder = Embedder(
        near={"Lucia dislikes overly sweet food": ("Lucia likes sweet desserts", 0.9)}
    )
    windows = [
        (T10 + timedelta(seconds=30 * k), None, f"Lucia eats cake {k}.", "") for k in range(20)
    ]
    windows = [(s, s + timedelta(seconds=30), c, t) for s, _e, c, t in windows]
    deps.roles.semantic = [old]
    asyncio.run(ingest_caption_windows(deps, user_id, windows[:20]))  # first 10 min
    deps.roles.semantic = [new]
    deps.roles.decision = ConsolidationDecision(updated_triple=new, triples_to_remove=[0])
    later = [(s + timedelta(minutes=10), e + timedelta(minutes=10), c, t) for s, e, c, t in windows]
    asyncio.run(ingest_caption_windows(deps, user_id, later[:20]))

    with deps.db.connection() as conn:
        history = list_semantic(conn, user_id, history=True)
        active = list_semantic(conn, user_id)
        audit = list_consolidation_audit(conn, user_id)
    assert [t.as_list() for t in active] == [new.as_list()]
    (gone,) = [t for t in history if t.as_list() == old.as_list()]
    assert gone.invalidated_at == T10 + timedelta(minutes=20)  # the event time of the update
    assert gone.replaced_by == active[0].id
    assert set(gone.evidence_segment_ids) <= set(active[0].evidence_segment_ids)
    assert [a["decision"] for a in audit] == ["update", "insert"]


def test_caption_windows_build_the_cascade(deps, user_id) -> None:
    from worldmm.store.segments import list_segments

    windows = [
        (
            T10 + timedelta(seconds=30 * k),
            T10 + timedelta(seconds=30 * (k + 1)),
            f"Ann cooks {k}.",
            "",
        )
        for k in range(7)
    ]
    outcomes = asyncio.run(ingest_caption_windows(deps, user_id, windows))
    assert all(o.status == "complete" for o in outcomes)
    with deps.db.connection() as conn:
        segs = list_segments(conn, user_id)
    scales = sorted((s.scale_seconds, s.partial) for s in segs)
    assert scales == [(30, False)] * 7 + [(180, False), (180, True), (600, True), (3600, True)]
    ids = {s.id: s for s in segs}
    for s in segs:
        if s.scale_seconds == 30:
            assert ids[s.parent_segment_id].scale_seconds == 180


class Transcriber:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.prompts: list[str | None] = []

    def transcribe(self, audio_bytes, *, content_type, sample_rate, prompt=None):
        import wave

        self.prompts.append(prompt)
        with wave.open(io.BytesIO(audio_bytes)) as w:
            self.seen.append(w.getnframes())

        class T:
            text = "Katrina says the Oven is hot"

        return T()


def test_audio_only_window_becomes_a_transcript_segment(deps, user_id) -> None:
    from connectors.codec import wav_bytes
    from worldmm.store.triples import triples_for_segments

    deps.transcriber = Transcriber()
    start = dt_to_ms(T10)
    items = []
    for k in range(7):  # 5 s chunks from 0 s to 35 s: the last one spills into the next window
        ts = start + k * 5000
        key = f"audio/{user_id}/s1/{ts}.wav"
        deps.blobs.put(key, wav_bytes(b"\x01\x00" * 8000 * 5, 8000))
        ref = CaptureRef(key, sample_rate=8000, duration_ms=5000, content_type="audio/wav")
        items.append(Item("audio", key, "s1", ts, ts + 5000, ref))
    out = asyncio.run(process_window(deps, BaseWindow(user_id, start, tuple(items), False, "s1")))
    assert out.status == "complete" and out.visual_status == "none"
    assert deps.transcriber.seen == [8000 * 30]  # exactly the window's 30 s went to ASR
    seg = segment_at(deps, user_id, 30, T10)
    assert seg.transcript == "Katrina says the Oven is hot"
    assert "Oven" in seg.caption and seg.visual_status == "none"
    with deps.db.connection() as conn:
        assert triples_for_segments(conn, user_id, [seg.id])


def _audio_window(deps, user_id, at) -> BaseWindow:
    from connectors.codec import wav_bytes

    ts = dt_to_ms(at)
    key = f"audio/{user_id}/s1/{ts}.wav"
    deps.blobs.put(key, wav_bytes(b"\x01\x00" * 8000 * 5, 8000))
    ref = CaptureRef(key, sample_rate=8000, duration_ms=5000, content_type="audio/wav")
    return BaseWindow(user_id, ts, (Item("audio", key, "s1", ts, ts + 5000, ref),), False, "s1")


def test_the_recogniser_is_prompted_with_the_wearers_newest_names(deps, user_id) -> None:
    """WORLDMM_ASR_PROMPT_NAMES: the names the wearer's memory holds go to the recogniser
    (newest first, at most that many); 0, the default, sends none."""
    deps.transcriber = Transcriber()
    asyncio.run(process_window(deps, _audio_window(deps, user_id, T10)))  # no memory yet
    assert deps.transcriber.prompts == [None]
    # the first window's transcript put Katrina and the Oven in the memory
    later = T10 + timedelta(seconds=30)
    asyncio.run(process_window(deps, _audio_window(deps, user_id, later)))
    assert deps.transcriber.prompts[1] is None  # off by default
    prompted = deps.with_settings(asr_prompt_names=1)
    prompted.transcriber = deps.transcriber
    asyncio.run(process_window(prompted, _audio_window(deps, user_id, later + timedelta(30))))
    (prompt,) = deps.transcriber.prompts[2:]
    assert prompt is not None and prompt.endswith(".") and prompt.count(",") == 0
    with deps.db.connection() as conn:
        names = conn.execute(
            "SELECT canonical_name FROM entities WHERE user_id = %s"
            " AND canonical_entity_id IS NULL",
            (user_id,),
        ).fetchall()
    assert len(names) > 1 and prompt[:-1] in {n for (n,) in names}  # one name, the wearer's


def test_retrigger_reruns_failed_windows_and_pending_clips(deps, user_id) -> None:
    from worldmm.memory.rebuild import retrigger

    w1 = jpeg_window(deps, user_id, T10)
    w2 = jpeg_window(deps, user_id, T10 + timedelta(seconds=30))
    deps.roles.fail_caption = True
    asyncio.run(process_window(deps, w1))
    deps.roles.fail_caption = False
    deps.encoder = Encoder(up=False)
    asyncio.run(process_window(deps, w2))
    assert segment_at(deps, user_id, 30, T10).processing_status == "failed"
    second = T10 + timedelta(seconds=30)
    assert segment_at(deps, user_id, 30, second).visual_status == "pending"

    deps.encoder = Encoder(up=True)
    result = asyncio.run(retrigger(deps, user_id))
    assert [(o.scale_s, o.status) for o in result.windows] == [(30, "complete")]
    assert result.visual_done == 1 and result.visual_still_pending == 0
    first = segment_at(deps, user_id, 30, T10)
    assert first.processing_status == "complete" and first.error is None
    assert first.caption.endswith("1 frames.")  # rebuilt from the stored frames
    assert segment_at(deps, user_id, 30, T10 + timedelta(seconds=30)).visual_status == "complete"
    assert asyncio.run(retrigger(deps, user_id)).windows == []  # nothing left to do


def test_a_coarse_window_of_paused_windows_is_paused_and_links_them(deps, user_id) -> None:
    from worldmm.memory.windows import CoarseWindow, children_of

    start = dt_to_ms(T10)
    kids = children_of((180, start))
    for _scale, kid in kids:
        out = asyncio.run(process_window(deps, BaseWindow(user_id, kid, (), False, "s1", True)))
        assert out.status == "paused"
    coarse = CoarseWindow(user_id, 180, start, tuple(kids), False, "s1")
    out = asyncio.run(process_window(deps, coarse))
    assert out.status == "paused" and out.counts == {"children": len(kids)}
    for _scale, kid in kids:
        child = segment_at(deps, user_id, 30, T10 + timedelta(milliseconds=kid - start))
        assert child.processing_status == "paused" and child.parent_segment_id == out.segment_id
