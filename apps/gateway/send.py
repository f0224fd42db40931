"""The gateway's send loop: a session's captures to the topics, in the order a device would
have each (a frame at its capture time, an audio chunk once fully recorded), ``session_start``
first and ``session_end`` last; with ``realtime``, paced by capture time."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from apps.gateway.recording import AudioItem, FrameItem, GatewayInputError
from connectors import codec
from connectors.gateway import GlassesProducer


@dataclass
class GatewayStats:
    frames: int = 0
    audio_chunks: int = 0
    control: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    wall_s: float = 0.0
    bytes_sent: int = 0


def _available_at(item: FrameItem | AudioItem) -> datetime:
    if isinstance(item, AudioItem):
        return item.ts + timedelta(milliseconds=item.duration_ms)
    return item.ts


def run_gateway(
    producer: GlassesProducer,
    *,
    user: str,
    session: str,
    start: datetime,
    frames: Iterable[FrameItem],
    audio: Iterable[AudioItem] = (),
    realtime: bool = False,
    on_item: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    flush_timeout: float = 60.0,
    pauses: Iterable[tuple[datetime, bool]] = (),
) -> GatewayStats:
    """Send session_start, the frames and audio chunks merged by availability time, then
    session_end; wait for all acks. ``realtime`` paces sends by capture time. ``pauses``
    ((time, is_resume) pairs) go as pause/resume control records at their time; captures
    in a paused span are still sent (the flow drops them: that is what a pause guarantees)."""
    stats = GatewayStats()
    t0 = clock()

    def pace(at: datetime) -> None:
        if realtime:
            delay = (at - start).total_seconds() - (clock() - t0)
            if delay > 0:
                sleep(delay)

    producer.start_session(user, session, start)
    stats.control += 1
    end = start
    last_ms: dict[codec.StreamKind, int] = {}  # per stream, where its last sent capture ends
    merged = heapq.merge(
        ((_available_at(f), 0, i, f) for i, f in enumerate(frames)),
        ((_available_at(a), 1, i, a) for i, a in enumerate(audio)),
        ((at, 2, i, resume) for i, (at, resume) in enumerate(sorted(pauses))),
    )
    try:
        for at, _kind, _i, item in merged:
            pace(at)
            kind: codec.StreamKind
            if isinstance(item, bool):
                producer.pause(user, session, at, resume=item)
                stats.control += 1
                continue
            if isinstance(item, FrameItem):
                producer.send_frame(user, session, item.ts, item.jpeg, item.seq)
                stats.frames += 1
                stats.bytes_sent += len(item.jpeg)
                kind = "frames"
            else:
                producer.send_audio(user, session, item.ts, item.wav, duration_ms=item.duration_ms)
                stats.audio_chunks += 1
                stats.bytes_sent += len(item.wav)
                kind = "audio"
            stats.first_ts = item.ts if stats.first_ts is None else min(stats.first_ts, item.ts)
            stats.last_ts = item.ts if stats.last_ts is None else max(stats.last_ts, item.ts)
            end = max(end, at)
            last_ms[kind] = max(last_ms.get(kind, 0), codec.to_epoch_ms(at))
            if on_item is not None:
                on_item(kind)
    except (GatewayInputError, KeyboardInterrupt):
        # The input broke (or the user stopped us) midway: what was sent is valid, so close
        # the session where it stopped (the flow then flushes those windows), then re-raise.
        producer.end_session(user, session, end, last_ms)
        producer.flush(flush_timeout)
        raise
    producer.end_session(user, session, end, last_ms)
    stats.control += 1
    producer.flush(flush_timeout)
    stats.wall_s = clock() - t0
    return stats
