"""Live round trips through the configured model providers (``worldmm llm check``)."""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from worldmm.llm.prompts import ROLES
from worldmm.providers.errors import ModelCallError

if TYPE_CHECKING:
    from worldmm.settings import Settings

AGENT_ROLES = {"reasoning_agent", "response"}
CHECK_TEXT = "Lucia handed me a red mug in the kitchen and asked me to buy coffee beans."
CHECK_SPEECH = "Please buy coffee beans tomorrow."


@dataclass
class CheckResult:
    name: str
    ok: bool
    seconds: float
    detail: str


def role_models(settings: Settings) -> dict[str, str]:
    """Which model serves each role under these settings."""
    if settings.llm_provider == "offline":
        return {role: "offline (rules + MiniLM + OCR)" for role in ROLES}
    out = {}
    for role in ROLES:
        if role in AGENT_ROLES:
            out[role] = f"{settings.llm_agent_model} (direct)"
        elif role == "cross_scale_rerank":
            out[role] = f"{settings.llm_construction_model} (direct)"
        else:
            out[role] = f"{settings.llm_construction_model} ({settings.llm_dispatch})"
    return out


def check_frame() -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (640, 360), (30, 70, 160))
    ImageDraw.Draw(img).text(
        (60, 140), "COFFEE BEANS", fill="white", font=ImageFont.load_default(size=56)
    )
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def check_audio() -> tuple[bytes, str | None]:
    """Speech from espeak-ng when installed (expected words), else a second of silence."""
    exe = shutil.which("espeak-ng")
    if exe:
        wav = subprocess.run([exe, "--stdout", CHECK_SPEECH], check=True, capture_output=True)
        return wav.stdout, "coffee"
    import numpy as np

    from worldmm.asr.audio import to_wav

    return to_wav(np.zeros(16000, dtype=np.float32)), None


def _timed(name: str, fn: Callable[[], Any], judge: Callable[[Any], str | None]) -> CheckResult:
    started = time.perf_counter()
    try:
        value = fn()
    except (ModelCallError, ValueError, OSError) as exc:
        return CheckResult(
            name, False, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
        )
    problem = judge(value)
    detail = problem or (str(value)[:160].replace("\n", " "))
    return CheckResult(name, problem is None, time.perf_counter() - started, detail)


def run_checks(settings: Settings) -> tuple[dict[str, str], list[CheckResult]]:
    """Build each component from settings and make one real call through it."""
    from worldmm.asr import build_transcriber
    from worldmm.embed import build_embedder
    from worldmm.llm.roles import build_roles

    results: list[CheckResult] = []
    models = role_models(settings)
    holder: dict[str, Any] = {}

    def nonempty(value: Any) -> str | None:
        return None if value else "empty result"

    def embed() -> str:
        vectors = holder.setdefault("embedder", build_embedder(settings)).embed([CHECK_TEXT])
        if vectors.shape != (1, settings.text_embed_dim):
            raise ValueError(
                f"embedding shape {vectors.shape}, expected 1 x {settings.text_embed_dim}"
            )
        return f"{vectors.shape[1]}-d vector, norm {float((vectors[0] ** 2).sum() ** 0.5):.2f}"

    results.append(_timed("embedding", embed, nonempty))
    models["embedding"] = getattr(holder.get("embedder"), "name", settings.embed_backend)
    embedder = holder.get("embedder")
    if embedder is None:
        return models, results

    try:
        roles = build_roles(settings, embedder)
    except ValueError as exc:
        results.append(CheckResult("llm", False, 0.0, str(exc)))
        return models, results
    loop = asyncio.new_event_loop()
    try:
        call = loop.run_until_complete
        results.append(
            _timed("caption", lambda: call(roles.caption([check_frame()], "")), nonempty)
        )
        results.append(
            _timed(
                "ner", lambda: holder.setdefault("entities", call(roles.ner(CHECK_TEXT))), nonempty
            )
        )
        results.append(
            _timed(
                "triples",
                lambda: call(
                    roles.episodic_triples(CHECK_TEXT, holder.get("entities") or ["Lucia"])
                ),
                nonempty,
            )
        )
    finally:
        loop.close()

    if settings.asr_backend == "none":
        results.append(CheckResult("asr", True, 0.0, "disabled (WORLDMM_ASR_BACKEND=none)"))
        models["asr"] = "none"
        return models, results
    audio, expected = check_audio()

    def transcribe() -> str:
        transcriber = holder.setdefault("asr", build_transcriber(settings))
        return transcriber.transcribe(audio).text

    def judge_asr(text: str) -> str | None:
        if expected and expected not in text.lower():
            return f"expected {expected!r} in {text!r}"
        return None

    results.append(_timed("asr", transcribe, judge_asr))
    models["asr"] = getattr(holder.get("asr"), "name", settings.asr_backend)
    return models, results
