"""Memory construction for one closed window: plain async functions over :class:`Deps`.

* 30 s (:func:`build_base_segment`): the window's frames and audio are stored as one
  container (worldmm.media.window) before anything else; audio → ASR; frames sampled
  uniformly (the same frames go to the captioner and the visual encoder); caption → NER →
  episodic triples → entity resolution → visual embedding; then one transaction writes
  segment, entities, triples and embedding. Audio-only windows become segments from their
  transcript. A window whose container cannot be stored is ``failed`` with reason
  ``store_failed`` (its captures stay in the spool for ``worldmm retrigger``).
* 3 min / 10 min / 1 h (:func:`build_summary_segment`): merge the children's captions, then
  episodic triples of the summary, parent links; at 10 min also semantic triples and
  consolidation.

Every write is keyed by (user, scale, window start), so a replayed window overwrites itself.
:func:`process_window` wraps either with the status protocol: a ``pending`` row first, then
``complete``; after ``window_max_attempts`` failures the row is ``failed`` with the error and
the caller records it in the DLQ.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

# imported with the module, not at the first window's clip: the encoder package's imports
# took a CPU-second of the ingest worker's first window
from worldmm.encoder.base import EncoderRejected, EncoderUnavailable
from worldmm.llm.schemas import importance_of
from worldmm.llm.usage import for_user
from worldmm.media import window as window_media
from worldmm.media.window import MediaStoreFailed, WindowMedia
from worldmm.memory.caption_budget import caption_window
from worldmm.memory.consolidation import consolidate_semantic
from worldmm.memory.construct_inputs import AudioPiece, CaptureRef, sample_uniform, window_audio
from worldmm.memory.entity_resolution import (
    EntityResolution,
    apply_resolutions,
    resolve_entities,
    surface_key,
)
from worldmm.memory.importance import summary_importance, window_importance
from worldmm.memory.windows import (
    TEN_MIN_S,
    BaseWindow,
    CoarseWindow,
    Item,
    children_of,
    ms_to_dt,
)
from worldmm.models import Triple
from worldmm.store import frames as frame_store
from worldmm.store import privacy as privacy_store
from worldmm.store import segment_search
from worldmm.store import segments as segment_store
from worldmm.store import triples as triple_store
from worldmm.store import users as user_store
from worldmm.store import visual as visual_store
from worldmm.store.frames import AudioBatchRow, FrameBatchRow, MediaRef
from worldmm.store.models import AudioChunkRow, FrameRow, SegmentRow, SegmentWrite, TripleWrite
from worldmm.store.outage import is_db_unavailable

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.construct")

Window = BaseWindow | CoarseWindow


@dataclass
class WindowOutcome:
    """What became of one window (the flow logs it, counts it, and DLQs failures)."""

    user_id: str
    scale_s: int
    start_ms: int
    status: Literal["complete", "failed", "late", "paused"]
    partial: bool = False
    segment_id: int | None = None
    visual_status: str = "none"
    error: str | None = None
    attempts: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    # Why a failed window failed: window_failed (its models) or store_failed (the blob
    # store: its captures are kept in the spool, or ``capture`` for a late one).
    reason: str | None = None
    capture: Any = None  # the late capture whose store failed (it goes to the DLQ whole)

    @property
    def media_durable(self) -> bool:
        """The window's captures are in the blob store (its spool may go)."""
        return self.reason != "store_failed"

    @property
    def key(self) -> str:
        return f"{self.user_id}/{self.scale_s}/{self.start_ms}"

    @classmethod
    def of(
        cls,
        window: Window,
        status: Literal["complete", "failed", "paused"],
        segment_id: int | None,
        **fields: Any,
    ) -> WindowOutcome:
        """What became of ``window`` (its user, scale, start and partial flag) and its
        segment; ``fields``: the rest."""
        return cls(
            window.user_id,
            window.scale_s,
            window.start_ms,
            status,
            partial=window.partial,
            segment_id=segment_id,
            **fields,
        )


# --- shared pieces ---------------------------------------------------------------------


@dataclass
class TextMemory:
    """Entities and episodic triples extracted from one text, resolved, ready to write."""

    triples: list[Triple]
    resolutions: dict[str, EntityResolution]
    embeddings: np.ndarray
    # The segment's own text embedding (caption + transcript), searched by the dense lane;
    # None when there was no text.
    search_embedding: np.ndarray | None = None


async def extract_text_memory(
    deps: Deps, user_id: str, text: str, search: str | None = None
) -> TextMemory:
    """NER → episodic triples → entity resolution (triple subjects/objects included), and
    the embedding of ``search`` (the segment's searchable text; default ``text``)."""
    search = text if search is None else search
    if not text.strip():
        empty = np.zeros((0, deps.embedder.dim), dtype=np.float32)
        vec = await asyncio.to_thread(deps.embedder.embed, [search]) if search.strip() else None
        return TextMemory([], {}, empty, None if vec is None else vec[0])
    entities = await deps.roles.ner(text)
    triples = await deps.roles.episodic_triples(text, entities) if entities else []
    surfaces = list(entities)
    for t in triples:
        surfaces.append(t.subject)
        if not t.object_is_literal:
            surfaces.append(t.object)
    resolutions = await resolve_entities(deps, user_id, surfaces, text)
    texts = [f"{t.subject} {t.predicate} {t.object}" for t in triples]
    embeddings = (
        await asyncio.to_thread(deps.embedder.embed, texts)
        if texts
        else np.zeros((0, deps.embedder.dim), dtype=np.float32)
    )
    # A call of its own: a batch is padded to its longest text, and a caption is ten times
    # longer than a triple.
    vec = await asyncio.to_thread(deps.embedder.embed, [search]) if search.strip() else None
    return TextMemory(triples, resolutions, embeddings, None if vec is None else vec[0])


def write_search_embedding(conn, deps: Deps, user_id: str, segment_id: int, mem) -> None:
    """The dense lane's row for a segment just written (same transaction)."""
    if mem.search_embedding is not None:
        segment_search.upsert_segment_embeddings(
            conn, user_id, [(segment_id, mem.search_embedding)], deps.embedder.name
        )


def triple_rows(mem: TextMemory, ids: dict[str, int]) -> list[TripleWrite]:
    """The episodic triples of ``mem`` as store rows, entities by resolved id (``ids`` maps
    surface keys to entity ids, as apply_resolutions returns them)."""
    rows = []
    for t, emb in zip(mem.triples, mem.embeddings, strict=True):
        rows.append(
            TripleWrite(
                subject_entity_id=ids[surface_key(t.subject)],
                predicate=t.predicate,
                object_entity_id=None if t.object_is_literal else ids[surface_key(t.object)],
                object_literal=t.object if t.object_is_literal else None,
                embedding=emb,
            )
        )
    return rows


def _versions(deps: Deps, roles: list[str]) -> tuple[dict, dict]:
    versions = getattr(deps.roles, "versions", {}) or {}
    prompts = {r: versions[r] for r in roles if r in versions}
    return {"llm": getattr(deps.roles, "label", "?"), "embed": deps.embedder.name}, prompts


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


def model_rating(text: str) -> dict:
    """The segment fields of a model's importance rating (none when it gave none)."""
    value = importance_of(text)
    return {} if value is None else {"importance": value, "importance_source": "model"}


def _segment(window: Window, **fields) -> SegmentWrite:
    return SegmentWrite(
        user_id=window.user_id,
        session_id=window.session_id,
        scale_seconds=window.scale_s,
        window_start=ms_to_dt(window.start_ms),
        window_end=ms_to_dt(window.end_ms),
        partial=window.partial,
        **fields,
    )


# --- 30 s ------------------------------------------------------------------------------


async def build_base_segment(
    deps: Deps, window: BaseWindow, media: WindowMedia | None = None
) -> WindowOutcome:
    """Turn one closed 30 s window into its segment, entities, triples and clip embedding
    (``media``: its captures, as :func:`worldmm.media.window.store_window` left them)."""
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
    try:
        heard = [(i, found[i.ref.blob_key]) for i in audio if i.ref.blob_key in found]
        transcript = await _transcribe(deps, window, heard)
        if jpegs:
            caption, degraded = await caption_window(deps, window.user_id, list(jpegs), transcript)
        else:
            caption = f"(audio only) {transcript}" if transcript else ""
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

    models, prompts = _versions(deps, ["caption", "ner", "episodic_triples", "entity_confirm"])
    if degraded:  # captioned locally, not by the caption prompt: the segment says why
        models["degraded"] = degraded
        prompts.pop("caption", None)
    seg = _segment(
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
    segment_id = await asyncio.to_thread(_write_base, deps, window, seg, mem, visual)
    counts = {
        "frames": len(frames),
        "sampled": len(jpegs),
        "audio_chunks": len(audio),
        "entities": len(mem.resolutions),
        "triples": len(mem.triples),
        "degraded": int(degraded is not None),
        "captures_missing": len(set(keys) - set(found)),
    }
    return WindowOutcome.of(
        window, "complete", segment_id, counts=counts, visual_status=visual_status
    )


async def _transcribe(deps: Deps, window: BaseWindow, audio: list[tuple[Any, bytes]]) -> str:
    if not audio or deps.transcriber is None:
        return ""
    pieces = [AudioPiece(i.ts_ms, w) for i, w in audio]
    wav, rate = window_audio(pieces, window.start_ms, window.end_ms)
    if not wav:
        return ""
    result = await asyncio.to_thread(
        deps.transcriber.transcribe, wav, content_type="audio/wav", sample_rate=rate
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


def _write_base(
    deps, window: BaseWindow, seg, mem: TextMemory, visual, session_id: str | None = None
) -> int:
    """One 30 s window's memory in one transaction: its segment, entities, episodic triples,
    text and clip (when given) embeddings, and its session (``session_id``, else the
    window's) recorded."""
    user = window.user_id
    session_id = session_id or window.session_id
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, user)
        if session_id:
            user_store.upsert_session(conn, user, session_id)
        segment_id = segment_store.upsert_segment(conn, rated(conn, seg, mem))
        ids = apply_resolutions(conn, user, mem.resolutions)
        triple_store.replace_episodic_triples(conn, user, segment_id, triple_rows(mem, ids))
        write_search_embedding(conn, deps, user, segment_id, mem)
        if visual is not None:  # the segment was written with visual status complete
            visual_store.upsert_visual_embedding(
                conn, user, segment_id, visual, mark_segment=seg.visual_status != "complete"
            )
    return segment_id


def audio_row(user_id: str, item, *, late: bool = False) -> AudioChunkRow:
    ref: CaptureRef = item.ref
    return AudioChunkRow(
        user_id=user_id,
        session_id=item.session_id,
        started_at=ms_to_dt(item.ts_ms),
        duration_ms=item.end_ms - item.ts_ms,
        sample_rate=ref.sample_rate,
        codec="wav",
        blob_key=ref.blob_key,
        late=late,
    )


def record_session(deps: Deps, msg) -> None:
    """A control message in the store: a session's start/end times, or a privacy pause
    (a session's end also ends its open pauses)."""
    start = msg.ts if msg.event == "session_start" else None
    end = msg.ts if msg.event == "session_end" else None
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, msg.user_id)
        user_store.upsert_session(conn, msg.user_id, msg.session_id, start, end)
        if msg.event == "pause":
            privacy_store.record_pause(conn, msg.user_id, msg.session_id, msg.ts)
        elif msg.event in ("resume", "session_end"):
            privacy_store.end_pauses(conn, msg.user_id, msg.session_id, msg.ts)


def record_late(deps: Deps, user_id: str, item) -> None:
    """Keep a capture that missed its window (timestamp retrieval still finds it): stored
    alone under its own key (its window's container is written already), a frame with its
    faces blurred as in a window, then its row. Raises OSError (BlobStoreError) when the
    blob store fails."""
    data = getattr(item.ref, "data", None)
    if data is not None:
        if item.kind == "frames":
            blur = deps.faces.transform(user_id) if deps.faces is not None else None
            data = (blur or window_media.keep_frame)(window_media.capture_of(item, data))
        deps.blobs.put(item.ref.blob_key, data)
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, user_id)
        if item.kind == "frames":
            frame_store.insert_frame(
                conn,
                FrameRow(
                    user_id=user_id,
                    session_id=item.session_id,
                    captured_at=ms_to_dt(item.ts_ms),
                    seq=item.ref.seq,
                    blob_key=item.ref.blob_key,
                    late=True,
                ),
            )
        else:
            frame_store.insert_audio_chunk(conn, audio_row(user_id, item, late=True))


# --- 3 min / 10 min / 1 h ----------------------------------------------------------------


async def build_summary_segment(deps: Deps, window: CoarseWindow) -> WindowOutcome:
    """Merge the children's captions into this window's summary and extract its memory."""
    children = await asyncio.to_thread(load_children, deps, window)
    if children and all(c.processing_status == "paused" for c in children):
        segment_id = await asyncio.to_thread(_write_paused, deps, window, children)
        return WindowOutcome.of(window, "paused", segment_id, counts={"children": len(children)})
    captions = [c.caption for c in children if c.processing_status == "complete" and c.caption]
    summary = await deps.roles.merge_captions(captions, window.scale_s) if captions else ""
    mem = await extract_text_memory(deps, window.user_id, summary)
    models, prompts = _versions(deps, ["merge_captions", "ner", "episodic_triples"])
    failed_children = [c.id for c in children if c.processing_status == "failed"]
    rating = model_rating(summary)
    if not rating:  # the most important moment it holds
        value = summary_importance(c.importance for c in children)
        rating = {} if value is None else {"importance": value, "importance_source": "estimate"}
    seg = _segment(
        window,
        caption=summary or None,
        processing_status="complete",
        error=f"children failed: {failed_children}" if failed_children else None,
        model_versions=models,
        prompt_versions=prompts,
        **rating,
    )
    segment_id = await asyncio.to_thread(_write_summary, deps, window, seg, mem, children)
    counts = {
        "children": len(children),
        "entities": len(mem.resolutions),
        "triples": len(mem.triples),
    }
    if window.scale_s == TEN_MIN_S and summary:
        extraction = await deps.roles.semantic_triples(summary, mem.triples)
        # serialised per user in the database (worldmm.memory.consolidation)
        stats = await consolidate_semantic(
            deps,
            window.user_id,
            segment_id,
            ms_to_dt(window.end_ms),
            extraction.semantic_triples,
            summary,
        )
        counts.update(
            semantic=len(extraction.semantic_triples),
            semantic_updated=stats.updated,
            semantic_invalidated=stats.invalidated,
            semantic_redecided=stats.retried,
        )
    return WindowOutcome.of(window, "complete", segment_id, counts=counts)


def load_children(deps: Deps, window: CoarseWindow) -> list[SegmentRow]:
    """Every stored child of the window (a re-closed window also sees earlier sessions')."""
    wanted = {(s, ms_to_dt(start)) for s, start in children_of(window.wid)}
    with deps.db.connection() as conn:
        rows = segment_store.list_segments(
            conn, window.user_id, ms_to_dt(window.start_ms), ms_to_dt(window.end_ms)
        )
    return [r for r in rows if (r.scale_seconds, r.window_start) in wanted]


def _write_summary(deps, window: CoarseWindow, seg, mem: TextMemory, children) -> int:
    user = window.user_id
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, user)
        segment_id = segment_store.upsert_segment(conn, seg)
        segment_store.link_children(conn, user, segment_id, [c.id for c in children])
        ids = apply_resolutions(conn, user, mem.resolutions)
        triple_store.replace_episodic_triples(conn, user, segment_id, triple_rows(mem, ids))
        write_search_embedding(conn, deps, user, segment_id, mem)
    return segment_id


def _write_paused(deps: Deps, window: Window, children: list[SegmentRow] | None = None) -> int:
    """A window inside a privacy pause: a segment that says so, with no text, no triples and
    no model call (the day view shows the gap and its reason)."""
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, window.user_id)
        segment_id = segment_store.upsert_segment(
            conn, _segment(window, processing_status="paused", caption=None, transcript=None)
        )
        if children:
            segment_store.link_children(conn, window.user_id, segment_id, [c.id for c in children])
    return segment_id


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


# --- the status protocol -------------------------------------------------------------------


async def process_window(deps: Deps, window: Window) -> WindowOutcome:
    """pending → complete, or failed (with the error) after ``window_max_attempts`` tries.
    A 30 s window's captures are stored first; if the blob store fails the window is failed
    at once with reason ``store_failed`` (no model runs: retrigger rebuilds it). Every model
    call made for it is the window's user's usage."""
    with for_user(window.user_id):
        return await _process_window(deps, window)


async def _process_window(deps: Deps, window: Window) -> WindowOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    if isinstance(window, BaseWindow) and window.paused:
        segment_id = await asyncio.to_thread(_write_paused, deps, window)
        return WindowOutcome.of(window, "paused", segment_id, duration_s=loop.time() - started)
    media: WindowMedia | None = None
    if isinstance(window, BaseWindow):
        try:
            media = await asyncio.to_thread(store_media, deps, window)
        except MediaStoreFailed as exc:
            return await _store_failed(deps, window, exc, loop.time() - started)
    await asyncio.to_thread(_mark_pending, deps, window, media.refs if media else {})
    attempts = deps.settings.window_max_attempts
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            if isinstance(window, BaseWindow):
                outcome = await build_base_segment(deps, window, media)
            else:
                outcome = await build_summary_segment(deps, window)
            outcome.attempts = attempt
            outcome.duration_s = loop.time() - started
            return outcome
        except Exception as exc:  # noqa: BLE001 - recorded on the segment and in the DLQ
            if is_db_unavailable(exc):
                raise  # not this window's fault: the caller waits for the server and redoes it
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "window_failed user=%s scale=%s start=%s attempt=%d error=%s",
                window.user_id,
                window.scale_s,
                window.start_ms,
                attempt,
                error,
            )
    segment_id = await asyncio.to_thread(_mark_failed, deps, window, error)
    duration_s = loop.time() - started
    return WindowOutcome.of(
        window,
        "failed",
        segment_id,
        error=error,
        attempts=attempts,
        duration_s=duration_s,
        reason="window_failed",
    )


async def _store_failed(
    deps: Deps, window: BaseWindow, exc: MediaStoreFailed, duration_s: float
) -> WindowOutcome:
    """The container could not be written: keep the captures in the spool, record the rows
    where the same captures will be stored, mark the window failed."""
    error = f"store_failed: {type(exc.cause).__name__}: {exc.cause}"
    log.warning(
        "window_store_failed user=%s start=%s error=%s", window.user_id, window.start_ms, error
    )

    def record() -> int:
        window_media.spool_carried(deps, window)
        _mark_pending(deps, window, exc.refs)
        return _mark_failed(deps, window, error)

    segment_id = await asyncio.to_thread(record)
    return WindowOutcome.of(
        window, "failed", segment_id, error=error, duration_s=duration_s, reason="store_failed"
    )


def _mark_pending(deps: Deps, window: Window, refs: dict[str, MediaRef]) -> None:
    with deps.db.transaction() as conn:
        user_store.ensure_user(conn, window.user_id)
        existing = segment_store.get_segment_by_window(
            conn, window.user_id, window.scale_s, ms_to_dt(window.start_ms)
        )
        if existing is None:
            segment_store.upsert_segment(conn, _segment(window, processing_status="pending"))
        else:
            segment_store.set_segment_status(conn, window.user_id, existing.id, "pending", None)
        if isinstance(window, BaseWindow):
            # Captures are recorded before any model runs: a failed window can be rebuilt
            # from them, and timestamp retrieval finds its frames regardless.
            _record_captures(conn, window, refs)


def _record_captures(conn, window: BaseWindow, refs: dict[str, MediaRef]) -> None:
    # One statement per table for the whole window (was one INSERT per capture). A capture
    # stored before (not in ``refs``) keeps the reference its row has.
    frames, audio = [], []
    for i in window.items:
        key = i.ref.blob_key
        if i.kind == "frames":
            ts = ms_to_dt(i.ts_ms)
            frames.append(FrameBatchRow(i.session_id, ts, i.ref.seq, key, media=refs.get(key)))
        else:
            start, ms, rate = ms_to_dt(i.ts_ms), i.end_ms - i.ts_ms, i.ref.sample_rate
            audio.append(AudioBatchRow(i.session_id, start, ms, rate, key, media=refs.get(key)))
    frame_store.insert_frames(conn, window.user_id, frames)
    frame_store.insert_audio_chunks(conn, window.user_id, audio)


def _mark_failed(deps: Deps, window: Window, error: str) -> int:
    with deps.db.transaction() as conn:
        existing = segment_store.get_segment_by_window(
            conn, window.user_id, window.scale_s, ms_to_dt(window.start_ms)
        )
        if existing is None:
            return segment_store.upsert_segment(
                conn, _segment(window, processing_status="failed", error=error)
            )
        segment_store.set_segment_status(conn, window.user_id, existing.id, "failed", error[:2000])
        return existing.id
