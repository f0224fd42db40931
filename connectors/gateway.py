"""The device side of the glasses: :class:`GlassesProducer` sends one wearer's frames, audio
chunks and session events to the ``frames``/``audio``/``control`` topics, keyed by user.
Reading a recording into such a session is the `worldmm gateway` program's job
(``apps/gateway``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from connectors import codec, kafka_io

DEFAULT_TOPICS = {k: f"worldmm.{k}" for k in ("frames", "audio", "control", "dlq")}


class BrokerUnavailable(RuntimeError):
    """The broker cannot be reached or a topic is missing."""


# --- producer API ----------------------------------------------------------------------------


class GlassesProducer:
    """Send one wearer's frames, audio and session events (the device-side API).

    >>> p = GlassesProducer("127.0.0.1:9092")                      # doctest: +SKIP
    >>> p.send_frame("alice", "s1", datetime.now(UTC), jpeg, seq=0)  # doctest: +SKIP
    >>> p.flush()                                                   # doctest: +SKIP
    """

    def __init__(
        self,
        target: Any,
        topics: Mapping[str, str] | None = None,
        *,
        producer: Any = None,
        **conf: Any,
    ) -> None:
        if isinstance(target, str):
            brokers = target
            topics = dict(topics or DEFAULT_TOPICS)
        else:  # Settings
            from connectors.topics import topic_names

            if not target.kafka_brokers:
                raise BrokerUnavailable("settings.kafka_brokers is not set")
            brokers = target.kafka_brokers
            topics = dict(topics or topic_names(target))
        self.brokers = brokers
        self.topics = topics
        conf.setdefault("message_timeout_ms", 60_000)
        self.producer = producer or kafka_io.make_producer(brokers, **conf)
        self.tracker = kafka_io.DeliveryTracker()
        self.sent: dict[str, int] = {"frames": 0, "audio": 0, "control": 0}

    def check(self, timeout: float = 10.0) -> None:
        """Raise BrokerUnavailable unless the broker answers and our topics exist."""
        from confluent_kafka import KafkaException

        try:
            meta = self.producer.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailable(f"Kafka at {self.brokers} does not answer: {exc}") from None
        missing = [self.topics[k] for k in self.sent if self.topics[k] not in meta.topics]
        if missing:
            names = ", ".join(missing)
            hint = "run `worldmm topics create`"
            raise BrokerUnavailable(f"topic(s) {names} missing on {self.brokers}: {hint}")

    def _send(self, kind: Literal["frames", "audio", "control"], record: codec.Record) -> None:
        key, value, headers = record
        kafka_io.produce(
            self.producer, self.topics[kind], key, value, headers, on_delivery=self.tracker
        )
        self.sent[kind] += 1

    def send_frame(self, user: str, session: str, ts: datetime, jpeg: bytes, seq: int) -> None:
        codec.check_jpeg(jpeg)  # a bad frame is the sender's bug: fail here, not in the flow
        self._send("frames", codec.encode_frame(user, session, ts, seq, jpeg))

    def send_audio(
        self,
        user: str,
        session: str,
        ts: datetime,
        data: bytes,
        *,
        duration_ms: int | None = None,
        sample_rate: int | None = None,
        content_type: Literal["audio/wav", "audio/pcm"] = codec.WAV,
    ) -> None:
        if content_type == codec.WAV:
            rate, channels, n = codec.wav_info(data)
            sample_rate = sample_rate or rate
            duration_ms = duration_ms or max(1, round(1000 * n / rate))
        elif sample_rate is None:
            raise ValueError("audio/pcm needs sample_rate")
        else:
            duration_ms = duration_ms or max(1, round(1000 * (len(data) // 2) / sample_rate))
        self._send(
            "audio",
            codec.encode_audio(
                user,
                session,
                ts,
                data,
                duration_ms=duration_ms,
                sample_rate=sample_rate,
                content_type=content_type,
            ),
        )

    def start_session(self, user: str, session: str, ts: datetime) -> None:
        self._send("control", codec.encode_control(user, session, ts, "session_start"))

    def end_session(
        self,
        user: str,
        session: str,
        ts: datetime,
        last_ms: dict[codec.StreamKind, int] | None = None,
    ) -> None:
        """Tell the flow the session is over: it flushes the user's open windows once it has
        seen each stream up to ``last_ms`` (kind → end of its last capture, epoch ms)."""
        msg = codec.encode_control(user, session, ts, "session_end", last_ms or None)
        self._send("control", msg)

    def pause(self, user: str, session: str, ts: datetime, *, resume: bool = False) -> None:
        """A privacy pause (or its end) at ``ts``: the flow drops every capture between a pause
        and its resume, or the session's end, unstored."""
        event: codec.ControlEvent = "resume" if resume else "pause"
        self._send("control", codec.encode_control(user, session, ts, event))

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every acknowledgement; DeliveryError if any message was lost."""
        kafka_io.flush(self.producer, self.tracker, timeout)

    def __enter__(self) -> GlassesProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.flush()
