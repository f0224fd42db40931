"""Live questions in the wearer's own time, end to end: short spoken sessions on past days go
gateway → Kafka → the ingest dataflow → PostgreSQL, then questions without ``as_of`` are asked
through the served API (a real uvicorn socket) at an injected "now". Each question names a
time in its own words; its first evidence must come from the session those words name, read
on the wearer's clock.

Both wearers record the very same five sessions (same UTC times, same words). One lives in
UTC, the other in Pacific/Auckland (UTC+13 in March, daylight time), so "yesterday
afternoon", "last night" and "this morning" name different sessions for the two: if the zone
were ignored, the Auckland wearer would get the UTC wearer's answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from apps.demo.synthetic import SceneSpec, espeak_available, generate_session
from query_api.app import create_app
from tests.fixtures.api import ADMIN_KEY, api_settings_for, on_socket
from worldmm.deps import build_deps
from worldmm.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

# Every question is asked at this moment: Thursday 13 March 2025, 21:00 UTC, which is
# Friday 14 March, 10:00 in Auckland (NZDT, UTC+13 until 6 April).
NOW = datetime(2025, 3, 13, 21, 0, tzinfo=UTC)
SESSION_S = 15.0  # one spoken line; a session on the hour is one partial 30 s window


@dataclass(frozen=True)
class Recording:
    start: datetime  # UTC, on the hour: each session has an hour window of its own
    line: str  # what the wearer says (the dataflow's ASR makes it the transcript)


# The sessions, with their readings: UTC's | Auckland's (local time in brackets).
SESSIONS: dict[str, Recording] = {
    # Tue 09:00 UTC: two days ago, Tuesday morning | Tue 22:00, Tuesday night
    "blue drawer": Recording(
        datetime(2025, 3, 11, 9, tzinfo=UTC), "I put my keys in the blue drawer."
    ),
    # Wed 15:00 UTC: yesterday afternoon | Thu 04:00, the small hours of yesterday
    "kitchen shelf": Recording(
        datetime(2025, 3, 12, 15, tzinfo=UTC), "I put my keys on the kitchen shelf."
    ),
    # Thu 02:00 UTC: last night | Thu 15:00, yesterday afternoon
    "garden shed": Recording(
        datetime(2025, 3, 13, 2, tzinfo=UTC), "I put my keys in the garden shed."
    ),
    # Thu 08:00 UTC: this morning | Thu 21:00, last night
    "coat pocket": Recording(
        datetime(2025, 3, 13, 8, tzinfo=UTC), "I put my keys in my coat pocket."
    ),
    # Thu 19:00 UTC: this evening (before now) | Fri 08:00, this morning
    "car glovebox": Recording(
        datetime(2025, 3, 13, 19, tzinfo=UTC), "I put my keys in the car glovebox."
    ),
}

# question → (the session UTC's reading names, the session Auckland's reading names)
READINGS: dict[str, tuple[str, str]] = {
    "Where did I put my keys yesterday afternoon?": ("kitchen shelf", "garden shed"),
    "Where did I put my keys last night?": ("garden shed", "coat pocket"),
    "Where did I put my keys this morning?": ("coat pocket", "car glovebox"),
}
# How the Auckland wearer's answers say when: on its clock, relative to Friday 10:00 NZDT.
AUCKLAND_WHEN = {
    "Where did I put my keys yesterday afternoon?": "yesterday at 15:00",
    "Where did I put my keys last night?": "yesterday at 21:00",
    "Where did I put my keys this morning?": "today at 08:00",
}
# Only the UTC wearer: Auckland's "two days ago" (Wednesday 12 March, NZDT) holds no session.
UTC_ONLY = {
    "Where did I put my keys two days ago?": "blue drawer",
    "Where did I put my keys on Tuesday?": "blue drawer",
}
ZONES = {"utc": "UTC", "auckland": "Pacific/Auckland"}


@dataclass
class Wearer:
    user_id: str
    headers: dict[str, str]
    timezone: str
    segments: dict[str, set[int]]  # session → the ids of every window overlapping it


@dataclass
class Live:
    http: httpx.Client
    wearers: dict[str, Wearer]


def _ingest_settings(stack, root: Path) -> Settings:
    """The API's settings over the test stack, plus a topic prefix of its own and the ingest
    fault tests' cost cuts (no OCR, four frames a window, one window at a time)."""
    return api_settings_for(stack, root).model_copy(
        update={
            "topic_prefix": f"t{uuid.uuid4().hex[:10]}.",
            "face_blur": False,
            "allowed_lateness_s": 5.0,
            "in_flight_start": 1,
            "in_flight_max": 1,
            "ocr_frames": 0,
            "frames_per_window": 4,
            "max_past_age_s": 20 * 365 * 86400.0,  # the sessions lie in 2025
            # no /metrics server and no process-wide lag probe thread, which would outlive
            # this module's flow (and, at the session's end, the broker it polls)
            "dataflow_metrics_port": 0,
        }
    )


def _record(root: Path) -> dict[str, Path]:
    """Each session's frames and spoken audio (espeak-ng), generated once for both wearers."""
    out = {}
    for i, (place, rec) in enumerate(SESSIONS.items()):
        scene = SceneSpec(sign="HALLWAY", speech=[rec.line], duration_s=SESSION_S)
        files = generate_session(
            root / f"s{i}", minutes=SESSION_S / 60, fps=1, start=rec.start, seed=i, script=[scene]
        )
        assert files.audio_wav is not None and files.scenes[0].spoken, place
        out[place] = files.frames_dir
    return out


def _send(settings: Settings, user_ids: list[str], session: int, frames_dir: Path) -> None:
    """One session, recorded by each wearer, through the glasses gateway as a device sends it."""
    from apps.gateway.recording import plan_recording
    from apps.gateway.send import run_gateway
    from connectors.gateway import GlassesProducer

    start = list(SESSIONS.values())[session].start
    with GlassesProducer(settings) as producer:
        for user_id in user_ids:
            plan = plan_recording(
                frames_dir=frames_dir, audio=frames_dir.parent / "audio.wav", fps=1, start=start
            )
            run_gateway(
                producer, user=user_id, session=f"s{session}", start=start,
                frames=plan.frames, audio=plan.audio,
            )  # fmt: skip


def _run_flow(settings: Settings) -> None:
    """The real ingest dataflow, reading the topics to their end: it returns once every
    window that the sessions' ends close is built and stored (the test's synchronisation)."""
    from bytewax.testing import TestingSink, run_main

    from dataflows.ingest import build_flow

    outcomes: list = []
    run_main(build_flow(settings, tail=False, report_sink=TestingSink(outcomes)))
    assert outcomes and [o for o in outcomes if o.status == "failed"] == []


def _session_windows(settings: Settings, user_id: str) -> dict[str, set[int]]:
    """Each session's windows (30 s, 3 min, 10 min, hour), all complete, each overlapping
    exactly one session (sessions lie in different hours)."""
    from worldmm.store.db import Database
    from worldmm.store.segments import list_segments

    with Database(settings.database_url, max_size=1) as db, db.connection() as conn:
        segments = list_segments(conn, user_id, limit=1_000)
    assert all(s.processing_status == "complete" for s in segments)
    out: dict[str, set[int]] = {}
    span = timedelta(seconds=SESSION_S)
    for place, rec in SESSIONS.items():
        out[place] = {
            s.id for s in segments if s.window_start < rec.start + span and s.window_end > rec.start
        }
        assert {s.scale_seconds for s in segments if s.id in out[place]} == {30, 180, 600, 3600}
    assert sum(len(ids) for ids in out.values()) == len(segments)
    return out


@pytest.fixture(scope="module")
def live(stack, tmp_path_factory) -> Iterator[Live]:
    if not espeak_available():
        pytest.skip("espeak-ng not installed (the sessions' speech)")
    from connectors.topics import create_topics

    root = tmp_path_factory.mktemp("live-time")
    settings = _ingest_settings(stack, root)
    frames = _record(root / "sessions")
    deps = build_deps(settings, role="api")
    # The API's one clock, stopped at NOW: questions without as_of are asked then.
    app = create_app(settings, deps=deps.with_clock(lambda: NOW))
    try:
        with on_socket(app) as url, httpx.Client(base_url=url, timeout=120) as http:
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            made = {}
            for name, zone in ZONES.items():
                user_id = f"live-{name}-{uuid.uuid4().hex[:8]}"
                r = http.post(
                    "/v1/users", json={"user_id": user_id, "timezone": zone}, headers=admin
                )
                assert r.status_code == 201, r.text
                made[name] = (user_id, {"Authorization": f"Bearer {r.json()['api_key']}"})
            # Sessions hours apart reach a live flow one by one: each is sent, on topics of
            # its own, and built before the next. (Sent back to back on one set of topics,
            # a session's audio can lose the race against the next session's frames: see
            # the report on WindowCascade' session ends.)
            for i, frames_dir in enumerate(frames.values()):
                topics = settings.model_copy(
                    update={"topic_prefix": f"{settings.topic_prefix}{i}."}
                )
                create_topics(topics.kafka_brokers, topics)
                _send(topics, [user_id for user_id, _ in made.values()], i, frames_dir)
                _run_flow(topics)
            wearers = {
                name: Wearer(user_id, headers, ZONES[name], _session_windows(settings, user_id))
                for name, (user_id, headers) in made.items()
            }
            yield Live(http, wearers)
    finally:
        deps.close()


def ask(live: Live, wearer: Wearer, question: str) -> dict:
    r = live.http.post(
        f"/v1/users/{wearer.user_id}/query", json={"question": question}, headers=wearer.headers
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["as_of"] is None and body["timezone"] == wearer.timezone
    assert datetime.fromisoformat(body["asked_at"]) == NOW
    assert body["evidence"], body
    return body


def first_session(wearer: Wearer, body: dict) -> str | None:
    first = body["evidence"][0]["segment_id"]
    return next((p for p, ids in wearer.segments.items() if first in ids), None)


def test_live_questions_name_their_session_through_the_gateway(live):
    """A UTC wearer: each phrase picks the session it names among five that all put the
    keys somewhere; the words of that session (heard by the flow's ASR) lead the evidence."""
    wearer = live.wearers["utc"]
    expected = {q: utc for q, (utc, _) in READINGS.items()} | UTC_ONLY
    for question, place in expected.items():
        body = ask(live, wearer, question)
        assert first_session(wearer, body) == place, (question, body["evidence"][:3])
        assert place.split()[-1] in body["evidence"][0]["text"].lower(), body["evidence"][0]


def test_far_zone_wearer_reading_wins_through_the_gateway(live):
    """The Auckland wearer recorded the same sessions at the same UTC times; each phrase
    names, on Auckland's clock, a different session than on UTC's (see SESSIONS): the
    wearer's reading must win. The UTC wearer's test is the control: on the same recordings,
    UTC's reading of each phrase gives the other session, so a query path that dropped the
    zone would fail here."""
    wearer = live.wearers["auckland"]
    for question, (utc_reading, auckland_reading) in READINGS.items():
        assert utc_reading != auckland_reading
        body = ask(live, wearer, question)
        assert first_session(wearer, body) == auckland_reading, (question, body["evidence"][:3])
        first = body["evidence"][0]
        assert datetime.fromisoformat(first["start"]).utcoffset() == timedelta(hours=13)
        assert first["when"] == AUCKLAND_WHEN[question], first
