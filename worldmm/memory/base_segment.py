"""A closed 30 s window's memory: its captures stored as one container, then audio → ASR,
sampled frames → keyframes → caption → text memory, the clip embedded beside them (from every
sampled frame), and one transaction that writes it all. Audio-only windows become segments
from their transcript; a still, silent window takes the caption before it."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

# imported with the module, not at the first window's clip: the encoder package's imports
# took a CPU-second of the ingest worker's first window
from worldmm.encoder.base import EncoderRejected, EncoderUnavailable
from worldmm.media import window as window_media
from worldmm.media.window import WindowMedia
from worldmm.memory.caption_budget import caption_window
from worldmm.memory.caption_frames import FramePlan, plan_frames
from worldmm.memory.carried_captions import (
    CARRIED,
    VIEW,
    Carry,
    Slot,
    as_stored,
    carried_caption,
    encode_view,
)
from worldmm.memory.forget_fence import check_fence
from worldmm.memory.importance import model_rating, window_importance
from worldmm.memory.text_memory import TextMemory, extract_text_memory, write_text_memory
from worldmm.memory.window_inputs import AudioPiece, sample_uniform, window_audio
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.window_rows import model_versions, segment_write
from worldmm.memory.windows import BaseWindow, Item
from worldmm.store import entities as entity_store
from worldmm.store import segment_search
from worldmm.store import segments as segment_store
from worldmm.store import users as user_store
from worldmm.store import visual as visual_store
from worldmm.store.models import SegmentWrite

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.base_segment")


def sampled_frames(window: BaseWindow, k: int) -> list[Item]:
    """The frames the models see: ``k`` spread evenly over the window's frames."""
    return sample_uniform([i for i in window.items if i.kind == "frames"], k)


def store_media(deps: Deps, window: BaseWindow) -> WindowMedia:
    """Store the window's captures as one container, bystanders' faces blurred in every frame
    first (unless blurring is off or the wearer opted out), the frames the models sample
    searched first. The models see the frames as captured, or as stored with
    ``WORLDMM_FACE_BLUR_MODELS_SEE=blurred``."""
    sampled = [i.ref.blob_key for i in sampled_frames(window, deps.settings.frames_per_window)]
    blur = deps.faces.transform(window.user_id, sampled) if deps.faces is not None else None
    if blur is None:
        return window_media.store_window(deps, window)
    media = window_media.store_window(deps, window, blur, first=blur.sampled)
    if deps.faces is not None and deps.faces.models_see == "blurred":
        media.at_hand.update(blur.stored)
    return media


async def build_base_segment(
    deps: Deps, window: BaseWindow, media: WindowMedia | None = None
) -> WindowOutcome:
    """Turn one closed 30 s window into its segment, entities, triples and clip embedding
    (``media``: its captures, as :func:`worldmm.media.window.store_window` left them)."""
    slot, before = deps.recent_windows.begin(window.user_id, window.start_ms)
    try:
        return await _build(deps, window, media, before)
    finally:
        slot.settle()  # the next window may read what was written


async def _build(
    deps: Deps, window: BaseWindow, media: WindowMedia | None, before: Slot | None
) -> WindowOutcome:
    settings = deps.settings
    if media is None:
        media = await asyncio.to_thread(window_media.gather, deps, window)
    frames = [i for i in window.items if i.kind == "frames"]
    audio = [i for i in window.items if i.kind == "audio"]
    sampled = sampled_frames(window, settings.frames_per_window)
    keys = [i.ref.blob_key for i in (*sampled, *(audio if deps.transcriber else ()))]
    found = await asyncio.to_thread(window_media.read_captures, deps, media, keys)
    jpegs = [found[i.ref.blob_key] for i in sampled if i.ref.blob_key in found]
    # The clip embedding needs only the frames: it runs beside ASR → caption → NER → triples,
    # so a slow encoder or model adds the longer of the two paths, not their sum.
    encoding = (
        asyncio.create_task(_encode(deps, list(jpegs)))
        if jpegs and deps.encoder is not None
        else None
    )
    degraded: str | None = None
    carried: Carry | None = None
    plan: FramePlan | None = None
    try:
        heard = [(i, found[i.ref.blob_key]) for i in audio if i.ref.blob_key in found]
        transcript = await _transcribe(deps, window, heard)
        if jpegs:
            plan = await asyncio.to_thread(plan_frames, jpegs, settings)
            carried = await carried_caption(deps, window, before, plan.looks or [], transcript)
        if carried is not None:
            caption = carried.caption
            mem = await _carried_memory(deps, caption)
        elif plan is not None:
            caption, degraded = await caption_window(deps, window.user_id, jpegs, plan, transcript)
        else:
            caption = f"(audio only) {transcript}" if transcript else ""
        if carried is None:
            mem = await extract_text_memory(
                deps, window.user_id, caption, segment_search.search_text(caption, transcript)
            )
    except BaseException:
        if encoding is not None:
            encoding.cancel()
        raise
    visual, visual_status, visual_error = (
        await encoding if encoding is not None else (None, "none", None)
    )

    models, prompts = model_versions(deps, ["caption", "ner", "episodic_triples", "entity_confirm"])
    if degraded:  # captioned locally, not by the caption prompt: the segment says why
        models["degraded"] = degraded
        prompts.pop("caption", None)
    if carried is not None:  # no model call: the caption of the window it names
        models[CARRIED] = carried.made_for
        prompts = {k: v for k, v in prompts.items() if k == "caption"}
    view = _view(plan, transcript, degraded, caption, carried)
    if view is not None:  # the next window may take this caption while the view holds
        models[VIEW] = view
    seg = segment_write(
        window,
        caption=caption or None,
        transcript=transcript or None,
        processing_status="complete",
        visual_status=visual_status,
        error=visual_error,
        model_versions=models,
        prompt_versions=prompts,
        **model_rating(caption),
    )
    segment_id = await asyncio.to_thread(write_base, deps, window, seg, mem, visual)
    counts = {
        "frames": len(frames),
        "sampled": len(jpegs),
        "keyframes": len(plan.keyframes) if plan is not None and carried is None else 0,
        "carried": int(carried is not None),
        "audio_chunks": len(audio),
        "entities": len(mem.resolutions),
        "triples": len(mem.triples),
        "degraded": int(degraded is not None),
        "captures_missing": len(set(keys) - set(found)),
    }
    return WindowOutcome.of(
        window, "complete", segment_id, counts=counts, visual_status=visual_status
    )


async def _carried_memory(deps: Deps, caption: str) -> TextMemory:
    """A carrying window's text memory: its search vector (the same text as its source's),
    no entities or triples of its own (the window it carries from holds them)."""
    empty = np.zeros((0, deps.embedder.dim), dtype=np.float32)
    search = segment_search.search_text(caption, "")
    vec = await asyncio.to_thread(deps.embedder.embed, [search]) if search.strip() else None
    return TextMemory([], {}, empty, None if vec is None else vec[0])


def _view(
    plan: FramePlan | None,
    transcript: str,
    degraded: str | None,
    caption: object,
    carried: Carry | None,
) -> str | None:
    """The view a window's caption describes, stored when the next window may take it: a
    caption made from one view and no speech (a carried one passes its source's on)."""
    if carried is not None:
        return encode_view(carried.view)
    if plan is None or plan.one_view is None or transcript.strip() or degraded or not caption:
        return None
    return encode_view(as_stored(plan.one_view))


def _vocabulary(deps: Deps, user_id: str, names: int) -> str:
    """The wearer's newest names as a recogniser prompt ("Alice, Tasha, the red mug.")."""
    with deps.db.connection() as conn:
        found = entity_store.newest_names(conn, user_id, names)
    return ", ".join(found) + "." if found else ""


async def _transcribe(deps: Deps, window: BaseWindow, audio: list[tuple[Any, bytes]]) -> str:
    if not audio or deps.transcriber is None:
        return ""
    pieces = [AudioPiece(i.ts_ms, w) for i, w in audio]
    wav, rate = window_audio(pieces, window.start_ms, window.end_ms)
    if not wav:
        return ""
    extra = {}
    names = deps.settings.asr_prompt_names
    if names and (prompt := await asyncio.to_thread(_vocabulary, deps, window.user_id, names)):
        extra["prompt"] = prompt
    result = await asyncio.to_thread(
        deps.transcriber.transcribe, wav, content_type="audio/wav", sample_rate=rate, **extra
    )
    return (getattr(result, "text", result) or "").strip()


async def _encode(deps: Deps, jpegs: list[bytes]):
    assert deps.encoder is not None
    try:
        return await deps.encoder.encode_video(jpegs), "complete", None
    except EncoderUnavailable as exc:
        # Text memory must not wait for the GPU: retried later (visual_status pending).
        log.warning("encoder_unavailable error=%s", exc)
        return None, "pending", None
    except EncoderRejected as exc:
        return None, "failed", f"visual: {exc}"


def rated(conn, seg: SegmentWrite, mem: TextMemory) -> SegmentWrite:
    """``seg`` with its importance: the model's rating when it gave one, else the offline
    estimate against the user's windows already stored (read in the writing transaction)."""
    if seg.importance is not None:
        return seg
    value = window_importance(
        conn,
        seg.user_id,
        seg.window_start,
        caption=seg.caption or "",
        transcript=seg.transcript or "",
        entities=[r.surface for r in mem.resolutions.values()],
        vector=mem.search_embedding,
    )
    return seg.model_copy(update={"importance": value, "importance_source": "estimate"})


def write_base(
    deps, window: BaseWindow, seg, mem: TextMemory, visual, session_id: str | None = None
) -> int:
    """One 30 s window's memory in one transaction: its segment, entities, episodic triples,
    text and clip (when given) embeddings, and its session (``session_id``, else the
    window's) recorded."""
    user = window.user_id
    session_id = session_id or window.session_id
    with deps.db.transaction() as conn:
        check_fence(conn)  # a forget since the build started: built again
        user_store.ensure_user(conn, user)
        if session_id:
            user_store.upsert_session(conn, user, session_id)
        segment_id = segment_store.upsert_segment(conn, rated(conn, seg, mem))
        write_text_memory(conn, deps, user, segment_id, mem)
        if visual is not None:  # the segment was written with visual status complete
            visual_store.upsert_visual_embedding(
                conn, user, segment_id, visual, mark_segment=seg.visual_status != "complete"
            )
    return segment_id
