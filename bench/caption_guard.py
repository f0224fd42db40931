"""What the cheaper caption call must not lose, checked where it can fail.

- Text: in every 30 s window of a session, each text the caption path read before (OCR of
  ``ocr_frames`` evenly spaced sampled frames, full size) must be among the text the new
  caption call is given (OCR of its keyframes, full size), up to OCR's own wobble between two
  frames of one view (a similarity of 0.8 on letters and digits). The frame clock the demo
  draws (a new time every second) is the capture time, which the segment holds anyway: left
  out.
- Answers: the demo's session goes through the ingest flow at the old and at the new
  defaults (the offline provider, whose captioner reads only what a vision model would be
  given), and the demo's questions must get the same answers from both memories.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import harness
from bench.cost_hour import KeyedTranscriber, ocr_read_once, stream, variant
from bench.cost_sessions import WINDOW_S
from worldmm.memory.caption_frames import plan_frames, seen_text
from worldmm.memory.window_inputs import sample_uniform
from worldmm.settings import Settings

_CLOCK = re.compile(r"^\d{1,2}[:.]\d{2}(?:[:.]\d{2})?$")
SIMILAR = 0.8


def _letters(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def kept(text: str, given: Sequence[str]) -> bool:
    """Whether ``text`` is among ``given``, as OCR reads one text in two frames."""
    a = _letters(text)
    return any(difflib.SequenceMatcher(None, a, _letters(g)).ratio() >= SIMILAR for g in given)


def windows_of(frames: Sequence[bytes], per_window: int) -> list[list[bytes]]:
    """Each 30 s window's sampled frames, from one frame a second."""
    return [
        sample_uniform(list(frames[i : i + WINDOW_S]), per_window)
        for i in range(0, len(frames), WINDOW_S)
    ]


def text_guard(frames: Sequence[bytes], settings: Settings) -> dict[str, Any]:
    """Texts read before, and those the new caption call is not given (per window)."""
    from worldmm.llm.rule_based.vision import read_text

    before = after = 0
    lost: list[dict[str, Any]] = []
    with ocr_read_once():
        for i, sampled in enumerate(windows_of(frames, settings.frames_per_window)):
            old = [t for t in read_text(sampled, settings.ocr_frames) if not _CLOCK.match(t)]
            given = seen_text(sampled, plan_frames(sampled, settings), settings) or []
            before += len(old)
            after += len([t for t in given if not _CLOCK.match(t)])
            lost += [{"window": i, "text": t} for t in old if not kept(t, given)]
    return {
        "windows": -(-len(frames) // WINDOW_S),
        "texts_read_before": before,
        "texts_given_now": after,
        "lost": lost,
        "ok": not lost,
    }


def demo_session(minutes: float, seed: int, tmp: Path) -> tuple[Any, list[bytes], dict[int, str]]:
    """The demo's scripted session (``apps/demo``): its files, its frames, and what was
    said in each window (the script's lines, by the window they start in)."""
    from apps.demo.script import aligned_start, demo_script
    from apps.demo.speech import place_kept_speech
    from apps.demo.synthetic import generate_session

    start = aligned_start(minutes * 60)
    session = generate_session(
        tmp, minutes=minutes, start=start, script=demo_script(minutes * 60), seed=seed, audio=False
    )
    place_kept_speech(session.scenes, start, minutes * 60, tmp / "audio.wav")  # lines' times
    frames = [p.read_bytes() for p in sorted(session.frames_dir.glob("*.jpg"))]
    said: dict[int, list[str]] = {}
    for scene in session.scenes:
        for line in scene.spoken:
            k = int((line.start - start).total_seconds()) // WINDOW_S
            said.setdefault(k, []).append(line.text)
    return session, frames, {k: " ".join(v) for k, v in said.items()}


def demo_answers(settings: Settings, echo: harness.Echo, minutes: float, seed: int) -> dict:
    """The demo's questions over its session built at the old and the new defaults."""
    from apps.demo.script import demo_questions

    with tempfile.TemporaryDirectory() as tmp:
        session, frames, said = demo_session(minutes, seed, Path(tmp))
    as_of = session.start + timedelta(seconds=session.duration_s + 60)
    asked = demo_questions(len(session.scenes))
    answers: dict[str, list[str]] = {}
    for defaults in ("old", "new"):
        s = variant(settings, defaults).model_copy(update={"llm_provider": "offline"})
        answers[defaults] = _built_and_asked(s, echo, frames, said, session.start, asked, as_of)
    same = [a == b for a, b in zip(answers["old"], answers["new"], strict=True)]
    return {
        "questions": [q.question for q in asked],
        "answers_old": answers["old"],
        "answers_new": answers["new"],
        "same": same,
        "ok": all(same),
        "text": text_guard(frames, settings),
    }


def _built_and_asked(settings, echo, frames, said, start, asked, as_of) -> list[str]:
    import asyncio
    import uuid

    from bytewax.testing import TestingSink, TestingSource, run_main

    from dataflows.ingest import build_flow
    from worldmm.agent import answer_question
    from worldmm.deps import build_deps
    from worldmm.store.purge import purge_user
    from worldmm.store.users import ensure_user

    user = f"bench-guard-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory() as blobs:
        s = settings.model_copy(update={"blob_dir": Path(blobs), "gpu_worker_url": None})
        deps = build_deps(s, role="ingest", transcriber=KeyedTranscriber(said))
        try:
            with deps.db.transaction() as conn:  # a wearer the API made (the flow may insist)
                ensure_user(conn, user)
            echo(f"quality guard: the demo session at {user}")
            sinks = {"dlq_sink": TestingSink([]), "report_sink": TestingSink([])}
            flow = build_flow(
                s,
                source=TestingSource(stream(user, start, frames)),
                deps_factory=lambda _s: deps,
                tail=False,
                **sinks,
            )
            run_main(flow)
            out = []
            for q in asked:
                ask = answer_question(deps, user, q.question, choices=q.choices, as_of=as_of)
                out.append(asyncio.run(ask).answer)
            return out
        finally:
            with deps.db.transaction() as conn:
                purge_user(conn, user)
            deps.close()
