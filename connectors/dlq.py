"""Dead-letter records: nothing that fails is dropped; it lands on the ``dlq`` topic with the
reason and enough to retry it, either the input record as it came (``message``) or the window
whose model calls failed (``window``, redone idempotently). The record format:
docs/architecture.md ("Delivery and recovery"). The builders are pure; :class:`DlqProducer`
is the thin Kafka adapter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from connectors.codec import from_epoch_ms, header_dict, to_epoch_ms

ORIG_PREFIX = "orig."
MAX_DETAIL_CHARS = 2000
PAYLOAD_DROPPED = "payload_dropped"
ORIG_HEADERS_DROPPED = "orig_headers_dropped"

Headers = list[tuple[str, bytes]]


class DlqRecord(BaseModel):
    """What goes onto the DLQ topic."""

    model_config = ConfigDict(frozen=True)

    key: bytes | None
    value: bytes | None
    headers: Headers

    def header(self, name: str) -> str | None:
        """One header as text (the first of that name). Not via header_dict: the copied
        ``orig.*`` headers hold whatever the client sent (not UTF-8, repeated), and reading
        the DLQ's own headers must never fail on them (a fuzzed record stopped the flow)."""
        for key, raw in self.headers:
            if key == name and raw is not None:
                return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return None


def _text_headers(pairs: Sequence[tuple[str, object]]) -> Headers:
    return [(name, str(value).encode()) for name, value in pairs if value is not None]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def message_dlq_record(
    *,
    reason: str,
    source_topic: str,
    source_partition: int | None,
    source_offset: int | None,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | str | None]] | None,
    failed_at: datetime,
    detail: str = "",
) -> DlqRecord:
    """A DLQ copy of an input record that failed (decode, validation, blob write)."""
    orig: Headers = []
    for name, raw in headers or []:
        if raw is None:
            continue
        orig.append((ORIG_PREFIX + name, raw if isinstance(raw, bytes) else str(raw).encode()))
    own = _text_headers(
        [
            ("dlq_kind", "message"),
            ("reason", reason),
            ("detail", _clip(detail) if detail else None),
            ("source_topic", source_topic),
            ("source_partition", source_partition),
            ("source_offset", source_offset),
            ("failed_at", to_epoch_ms(failed_at)),
        ]
    )
    return DlqRecord(key=key, value=value, headers=own + orig)


def window_dlq_record(
    *,
    reason: str,
    user_id: str,
    scale_seconds: int,
    window_start: datetime,
    failed_at: datetime,
    session_id: str | None = None,
    error: str = "",
    extra: dict[str, Any] | None = None,
) -> DlqRecord:
    """A DLQ record for a window whose model call (caption, summary, ASR...) failed."""
    body = {
        "user_id": user_id,
        "scale_seconds": scale_seconds,
        "window_start": window_start.isoformat(),
        "window_start_ms": to_epoch_ms(window_start),
        "session_id": session_id,
        "reason": reason,
        "error": _clip(error),
        "failed_at": failed_at.isoformat(),
        **(extra or {}),
    }
    headers = _text_headers(
        [
            ("dlq_kind", "window"),
            ("reason", reason),
            ("user_id", user_id),
            ("scale", scale_seconds),
            ("window_start", to_epoch_ms(window_start)),
            ("session_id", session_id),
            ("failed_at", to_epoch_ms(failed_at)),
        ]
    )
    value = json.dumps(body, separators=(",", ":"), default=str).encode()
    return DlqRecord(key=user_id.encode(), value=value, headers=headers)


# --- reading DLQ records back (for retries and tools) --------------------------------------


class DlqMessageEntry(BaseModel):
    kind: Literal["message"] = "message"
    reason: str
    detail: str = ""
    source_topic: str
    source_partition: int | None
    source_offset: int | None
    failed_at: AwareDatetime
    key: bytes | None
    value: bytes | None
    original_headers: Headers
    payload_dropped: int | None = None


class DlqWindowEntry(BaseModel):
    kind: Literal["window"] = "window"
    reason: str
    user_id: str
    scale_seconds: int
    window_start: AwareDatetime
    session_id: str | None
    failed_at: AwareDatetime
    body: dict[str, Any]


def parse_dlq_record(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> DlqMessageEntry | DlqWindowEntry:
    """Inverse of the builders; ValueError for a record that is not one of ours."""
    own = {n: v for n, v in headers if not n.startswith(ORIG_PREFIX) and v is not None}
    h = header_dict(list(own.items()))
    kind = h.get("dlq_kind")

    def opt_int(name: str) -> int | None:
        return int(h[name]) if h.get(name) not in (None, "") else None

    try:
        if kind == "message":
            return DlqMessageEntry(
                reason=h["reason"],
                detail=h.get("detail", ""),
                source_topic=h["source_topic"],
                source_partition=opt_int("source_partition"),
                source_offset=opt_int("source_offset"),
                failed_at=from_epoch_ms(int(h["failed_at"])),
                key=key,
                value=value,
                original_headers=[
                    (n[len(ORIG_PREFIX) :], v)
                    for n, v in headers
                    if n.startswith(ORIG_PREFIX) and v is not None
                ],
                payload_dropped=opt_int(PAYLOAD_DROPPED),
            )
        if kind == "window":
            return DlqWindowEntry(
                reason=h["reason"],
                user_id=h["user_id"],
                scale_seconds=int(h["scale"]),
                window_start=from_epoch_ms(int(h["window_start"])),
                session_id=h.get("session_id"),
                failed_at=from_epoch_ms(int(h["failed_at"])),
                body=json.loads(value or b"{}"),
            )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"malformed {kind} DLQ record: {exc!r}") from None
    raise ValueError(f"not a WorldMM DLQ record (dlq_kind={kind!r})")


def without_payload(record: DlqRecord) -> DlqRecord:
    """The record with its value dropped (for payloads the broker refuses as too large)."""
    size = len(record.value or b"")
    headers = [*record.headers, (PAYLOAD_DROPPED, str(size).encode())]
    return DlqRecord(key=record.key, value=None, headers=headers)


def record_size(record: DlqRecord) -> int:
    """Bytes the record takes on the wire, near enough (key, value, header names and values)."""
    heads = sum(len(n) + len(v or b"") for n, v in record.headers)
    return len(record.key or b"") + len(record.value or b"") + heads


# Room left for the broker's own framing of one record.
_FRAMING = 512


def fit(record: DlqRecord, max_bytes: int) -> DlqRecord:
    """The record as it fits ``max_bytes``: whole, else without its payload (header
    ``payload_dropped``: the size), else also without the sender's copied headers (header
    ``orig_headers_dropped``: how many). Its own headers (the reason, the source offset)
    always stay: the failure is never lost to its size."""
    if record_size(record) + _FRAMING <= max_bytes:
        return record
    if record.value:
        record = without_payload(record)
        if record_size(record) + _FRAMING <= max_bytes:
            return record
    own = [(n, v) for n, v in record.headers if not n.startswith(ORIG_PREFIX)]
    dropped = len(record.headers) - len(own)
    return DlqRecord(
        key=record.key[:256] if record.key else record.key,
        value=None,
        headers=[*own, (ORIG_HEADERS_DROPPED, str(dropped).encode())],
    )


# --- producer ------------------------------------------------------------------------------


class DlqProducer:
    """Writes DLQ records to one topic. A record too large for the producer or the broker
    is sent again without its payload (:func:`fit`); ``flush`` raises DeliveryError for
    the records that were still lost."""

    def __init__(
        self,
        producer_or_brokers: Any,
        topic: str,
        max_record_bytes: int | None = None,
        **conf: Any,
    ) -> None:
        from connectors import kafka_io

        self._kafka_io = kafka_io
        if isinstance(producer_or_brokers, str):
            self.producer = kafka_io.make_producer(producer_or_brokers, **conf)
        else:
            self.producer = producer_or_brokers
        self.topic = topic
        self.max_record_bytes = max_record_bytes
        self.tracker = kafka_io.DeliveryTracker()
        self._too_large: list[DlqRecord] = []  # refused by the broker: resent without payload
        self.sent = 0
        self.payloads_dropped = 0

    def send(self, record: DlqRecord) -> None:
        from confluent_kafka import KafkaException

        if self.max_record_bytes is not None:
            fitted = fit(record, self.max_record_bytes)
            self.payloads_dropped += fitted is not record
            record = fitted
        try:
            self._produce(record)
        except KafkaException as exc:
            # A payload larger than the producer accepts must not lose the failure itself.
            if not (_too_large(exc.args[0] if exc.args else None) and record.value):
                raise
            self.payloads_dropped += 1
            self._produce(without_payload(record))
        self.sent += 1

    def _produce(self, record: DlqRecord) -> None:
        def delivered(err: Any, msg: Any) -> None:
            if err is not None and _too_large(err) and record.value:
                self._too_large.append(record)
            else:
                self.tracker(err, msg)

        self._kafka_io.produce(
            self.producer,
            self.topic,
            record.key,
            record.value,
            record.headers,
            on_delivery=delivered,
        )

    def flush(self, timeout: float = 30.0) -> None:
        left = self.producer.flush(timeout)
        while self._too_large and not left:
            again, self._too_large = self._too_large, []
            for record in again:
                self.payloads_dropped += 1
                self._produce(without_payload(record))
            left = self.producer.flush(timeout)
        if left:
            raise self._kafka_io.DeliveryError(
                [f"{left} message(s) still queued after {timeout:.0f}s"]
            )
        self.tracker.raise_if_failed()


def _too_large(err: Any) -> bool:
    from confluent_kafka import KafkaError

    return err is not None and err.code() in (
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
    )
