"""The foundation smoke run: stack up → migrate → topics → one frame message produced to
Kafka, consumed back and recorded in PostgreSQL → read back → stack down (unless kept)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from confluent_kafka import Consumer, Producer

from connectors.topics import create_topics, topic_names
from worldmm import stack
from worldmm.settings import Settings
from worldmm.store.db import Database
from worldmm.store.migrate import apply_migrations
from worldmm.store.users import ensure_user, upsert_session


def run_smoke(settings: Settings, *, keep: bool, echo: Callable[[str], None]) -> int:
    t0 = time.monotonic()
    echo(f"[1/5] starting the embedded stack in {settings.resolved_state_dir}")
    urls = stack.up(settings)
    try:
        echo(f"[2/5] migrating {urls.database_url}")
        apply_migrations(urls.database_url, settings)
        echo(f"[3/5] creating topics on {urls.kafka_brokers}")
        create_topics(urls.kafka_brokers, settings)
        user, session = "demo-user", f"s-{uuid.uuid4().hex[:8]}"
        topic = topic_names(settings)["control"]
        ts = int(datetime.now(UTC).timestamp() * 1000)
        headers = [("user_id", user.encode()), ("session_id", session.encode()),
                   ("ts", str(ts).encode())]
        echo(f"[4/5] producing a session_start for {user}/{session} to {topic}")
        producer = Producer({"bootstrap.servers": urls.kafka_brokers})
        producer.produce(topic, key=user.encode(), value=b'{"event":"session_start"}',
                         headers=headers)
        producer.flush(10)
        del producer  # no client thread left to complain when the broker stops
        msg = _consume_one(urls.kafka_brokers, topic, session)
        if msg is None:
            echo("error: the message did not come back from Kafka")
            return 1
        got = dict(msg.headers() or [])
        started = datetime.fromtimestamp(int(got["ts"]) / 1000, UTC)
        db = Database(urls.database_url)
        try:
            with db.transaction() as conn:
                ensure_user(conn, got["user_id"].decode())
                upsert_session(conn, got["user_id"].decode(), got["session_id"].decode(),
                               started_at=started)
            with db.connection() as conn:
                row = conn.execute(
                    "SELECT user_id, session_id, started_at FROM sessions"
                    " WHERE user_id = %s AND session_id = %s",
                    (user, session),
                ).fetchone()
        finally:
            db.close()
        echo(f"[5/5] PostgreSQL has the session: {row}")
        echo(f"done in {time.monotonic() - t0:.1f}s; data in {settings.resolved_state_dir}")
        return 0 if row is not None else 1
    finally:
        if keep:
            echo("the stack keeps running (`worldmm down` stops it)")
        else:
            stack.down(settings)
            echo("stack stopped")


def _consume_one(brokers: str, topic: str, session: str):
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": f"demo-{session}",
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if dict(msg.headers() or []).get("session_id") == session.encode():
                return msg
        return None
    finally:
        consumer.close()
