"""A window's media: its captures' bytes gathered, stored as one container, read back.

A capture's bytes are looked for in the window's item (captured since the last snapshot),
then in the window's spool file, then in the blob store (a retrigger, a window redone after a
crash). What was found in memory or spool becomes one container, written with a single put
before any row points at it; construction gets the bytes as captured, never reading back.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from worldmm.blobs import BlobNotFound, BlobStore, window_media_key
from worldmm.media.container import Capture, build, payload, read_index
from worldmm.store.frames import MediaRef, stored_media

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.windows import BaseWindow, Item

log = logging.getLogger("worldmm.media")

FrameTransform = Callable[[Capture], bytes]
"""What a frame is stored as (gets the capture as taken, returns the bytes to store)."""


def keep_frame(capture: Capture) -> bytes:
    """The default transform: frames are stored as captured."""
    return capture.data


class MediaStoreFailed(Exception):
    """The window's container could not be written. ``refs`` say where its captures would
    have been (rows may point there: the same captures make the same object again)."""

    def __init__(self, key: str, refs: dict[str, MediaRef], cause: OSError) -> None:
        super().__init__(f"store_failed: {cause}")
        self.key = key
        self.refs = refs
        self.cause = cause


@dataclass
class WindowMedia:
    """A window's captures after :func:`store_window`."""

    at_hand: dict[str, bytes]  # bytes as captured, from memory or the spool
    refs: dict[str, MediaRef]  # the captures just stored, and where
    stored: dict[str, MediaRef | None] = field(default_factory=dict)  # in the store before
    container_key: str | None = None


def key_of(item: Item) -> str:
    """The capture's blob key (its identity in containers, spools and rows)."""
    return item.ref.blob_key


def capture_of(item: Item, data: bytes) -> Capture:
    ref = item.ref
    return Capture(
        key=key_of(item),
        kind=item.kind,
        ts_ms=item.ts_ms,
        end_ms=item.end_ms,
        data=data,
        seq=getattr(ref, "seq", None),
        sample_rate=getattr(ref, "sample_rate", None),
        content_type=getattr(ref, "content_type", "image/jpeg"),
    )


def _transformed(
    captures: list[Capture], transform: FrameTransform, first: Collection[str]
) -> list[Capture]:
    """The captures with their frames transformed, those named in ``first`` before the others
    (the order a detection budget serves them in); the captures keep their order."""
    frames = sorted((c for c in captures if c.kind == "frames"), key=lambda c: c.key not in first)
    data = {c.key: transform(c) for c in frames}
    return [
        Capture(**{**c.__dict__, "data": data[c.key]})
        if c.kind == "frames" and data[c.key] is not c.data
        else c
        for c in captures
    ]


def gather(deps: Deps, window: BaseWindow) -> WindowMedia:
    """Find every capture of the window: at hand (memory, spool) or already stored."""
    items = {key_of(i): i for i in window.items}
    at_hand = {k: i.ref.data for k, i in items.items() if getattr(i.ref, "data", None)}
    rest = [k for k in items if k not in at_hand]
    if rest:
        spooled = deps.spool.read(window.user_id, window.start_ms)
        at_hand.update((k, spooled[k]) for k in rest if k in spooled)
        rest = [k for k in rest if k not in at_hand]
    stored: dict[str, MediaRef | None] = {}
    if rest:
        with deps.db.connection() as conn:
            rows = stored_media(conn, window.user_id, rest)
        stored = {k: rows.get(k) for k in rest}  # no row: maybe a blob under its key
    return WindowMedia(at_hand, {}, stored)


def store_window(
    deps: Deps,
    window: BaseWindow,
    transform: FrameTransform = keep_frame,
    first: Collection[str] = (),
) -> WindowMedia:
    """Gather the window's captures and write those at hand as one container (one put), the
    frames through ``transform`` (those keyed in ``first`` before the others). Raises
    :class:`MediaStoreFailed` when the blob store fails."""
    media = gather(deps, window)
    if not media.at_hand:
        return media
    by_key = {key_of(i): i for i in window.items}
    captures = [capture_of(by_key[k], data) for k, data in media.at_hand.items()]
    container = build(_transformed(captures, transform, first))
    key = window_media_key(window.user_id, window.start_ms, container.digest)
    refs = {e.key: MediaRef(key, e.offset, e.length) for e in container.entries}
    try:
        deps.blobs.put(key, container.data)
    except OSError as exc:
        raise MediaStoreFailed(key, refs, exc) from exc
    media.refs, media.container_key = refs, key
    return media


def spool_carried(deps: Deps, window: BaseWindow) -> None:
    """Keep the bytes the window's items carry in its spool (a store that failed leaves them
    there for ``worldmm retrigger``); what was spooled before stays as it is."""
    carried = [(key_of(i), i.ref.data) for i in window.items if getattr(i.ref, "data", None)]
    deps.spool.append(window.user_id, window.start_ms, carried)


def read_captures(deps: Deps, media: WindowMedia, keys: Iterable[str]) -> dict[str, bytes]:
    """The bytes of ``keys``: at hand, else read from the store (a container whose several
    captures are wanted is read whole, once). A capture found nowhere is left out."""
    out: dict[str, bytes] = {}
    by_container: dict[str, list[tuple[str, MediaRef]]] = defaultdict(list)
    for k in keys:
        if k in media.at_hand:
            out[k] = media.at_hand[k]
        elif (ref := media.stored.get(k)) is not None:
            by_container[ref.key].append((k, ref))
        else:
            try:
                out[k] = deps.blobs.get(k)
            except BlobNotFound:
                log.warning("capture_missing key=%s", k)
    for container, wanted in by_container.items():
        out.update(read_refs(deps.blobs, container, wanted))
    return out


def read_refs(
    blobs: BlobStore, container: str, wanted: list[tuple[str, MediaRef]]
) -> dict[str, bytes]:
    """Captures of one container: one ranged read for one capture, the whole object for
    more (CRC-checked through its index)."""
    try:
        if len(wanted) == 1:
            ((k, ref),) = wanted
            return {k: blobs.get_range(container, ref.offset, ref.length)}
        data = blobs.get(container)
    except BlobNotFound:
        log.warning("container_missing key=%s captures=%d", container, len(wanted))
        return {}
    index = {e.key: e for e in read_index(data)}
    return {k: payload(data, index[k]) for k, _ in wanted if k in index}


def read_capture(blobs: BlobStore, blob_key: str, ref: MediaRef | None) -> bytes:
    """One stored capture's bytes (the API's frame route): a ranged read of its container,
    or the blob under its own key. BlobNotFound when neither holds it."""
    if ref is None:
        return blobs.get(blob_key)
    return blobs.get_range(ref.key, ref.offset, ref.length)
