"""Simulated models and wearers for the ingest and chaos benchmarks and the concurrency
tests: every model call waits a fixed latency and answers cheaply, so a process's CPU is the
pipeline's own; ``log(role, start, end)`` is told of each call (the tests measure overlap)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import numpy as np
from PIL import Image

from bench.harness import words
from connectors.codec import wav_bytes
from worldmm.llm.schemas import ConsolidationDecision, SemanticExtraction
from worldmm.models import Triple

SIM_VERSION = "sim-v1"
PEOPLE = ("Alice", "Bob", "Carol", "Dan", "Erin", "Frank")
PLACES = ("Kitchen", "Office", "Garden", "Cafe")
OBJECTS = ("red mug", "laptop", "bicycle", "notebook")
_VOCAB = (*PEOPLE, *PLACES)
OnCall = Callable[[str, float, float], None]  # (role, start, end) in time.perf_counter()
INGEST_ROLES = words(
    "caption, ner, episodic_triples, merge_captions, semantic_triples, consolidation,"
    " entity_confirm"
)


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


class _Simulated:
    def __init__(self, latency_s: float, log: OnCall | None = None) -> None:
        self.latency_s, self.log = latency_s, log or (lambda *_: None)

    async def _wait(self, role: str) -> None:
        """Await ``latency_s`` (never holding a thread), logged as a call of ``role``."""
        start = time.perf_counter()
        await asyncio.sleep(self.latency_s)
        self.log(role, start, time.perf_counter())


class SimulatedRoles(_Simulated):
    """Every ingest role waits and answers from templates; no query-time roles."""

    label = "simulated"
    versions = {r: f"{r}/{SIM_VERSION}" for r in INGEST_ROLES}

    async def caption(
        self, frames: Sequence[bytes], transcript: str, seen_text: Sequence[str] | None = None
    ) -> str:
        await self._wait("caption")
        h = _digest(frames[0][-256:] if frames else b"") + len(frames)
        p1, p2 = PEOPLE[h % len(PEOPLE)], PEOPLE[(h // 7 + 1 + h % len(PEOPLE)) % len(PEOPLE)]
        place, obj = PLACES[(h // 3) % len(PLACES)], OBJECTS[(h // 5) % len(OBJECTS)]
        text = f"I talked with {p1} and {p2} in the {place}. {p1} held a {obj}."
        return f"{text} I heard: {transcript}" if transcript else text

    async def ner(self, text: str) -> list[str]:
        await self._wait("ner")
        return [w for w in _VOCAB if w in text]

    async def episodic_triples(self, text: str, entities: list[str]) -> list[Triple]:
        await self._wait("episodic_triples")
        pairs = zip(entities, entities[1:], strict=False)
        out = [Triple(subject=a, predicate="was with", object=b) for a, b in pairs]
        held = [obj for obj in OBJECTS if obj in text and entities]
        literal = {"predicate": "held", "object_is_literal": True}
        return out + [Triple(subject=entities[0], object=obj, **literal) for obj in held]

    async def merge_captions(self, captions: list[str], level_seconds: int) -> str:
        await self._wait("merge_captions")
        firsts = dict.fromkeys(c.split(". ")[0].rstrip(".") + "." for c in captions if c)
        return " ".join(list(firsts)[:8])

    async def semantic_triples(self, summary: str, episodic: list[Triple]) -> SemanticExtraction:
        await self._wait("semantic_triples")
        people = [p for p in PEOPLE if p in summary]
        places = [p for p in PLACES if p in summary]
        triples = [
            Triple(subject=p, predicate="often visits", object=places[0])
            for p in (people[:2] if places else [])
        ]
        return SemanticExtraction(semantic_triples=triples, episodic_evidence=[[] for _ in triples])

    async def consolidate(self, new: Triple, candidates: list[Triple]) -> ConsolidationDecision:
        await self._wait("consolidation")
        return ConsolidationDecision(updated_triple=new, triples_to_remove=[])

    async def entity_confirm(self, surface: str, candidate: str, context: str) -> bool:
        await self._wait("entity_confirm")
        return surface.lower() == candidate.lower()


class SimulatedTranscriber(_Simulated):
    """Speech to text that blocks its (worker) thread for ``latency_s``, as a synchronous
    HTTP call to a hosted ASR would; the pipeline calls it through ``asyncio.to_thread``."""

    name = "simulated-asr"

    def transcribe(self, audio_bytes: bytes, *, content_type: str, sample_rate: int):
        start = time.perf_counter()
        time.sleep(self.latency_s)
        self.log("asr", start, time.perf_counter())
        return SimpleNamespace(text=f"see you at the {PLACES[len(audio_bytes) % len(PLACES)]}")


class SimulatedEncoder(_Simulated):
    """The GPU worker's clip encoder: waits, returns a unit vector seeded by the input."""

    def __init__(self, dim: int, latency_s: float, log: OnCall | None = None) -> None:
        super().__init__(latency_s, log)
        self.dim = dim

    async def _vector(self, role: str, data: bytes) -> np.ndarray:
        await self._wait(role)
        v = np.random.default_rng(_digest(data)).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:
        return await self._vector("encode_video", frames[0][-256:] if frames else b"")

    async def encode_text(self, text: str) -> np.ndarray:
        return await self._vector("encode_text", text.encode())


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text: cheap, and equal texts match."""

    name = "sim-hash"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        digests = [_digest(t.lower().encode()) for t in texts]
        rows = [np.random.default_rng(d).standard_normal(self.dim) for d in digests]
        m = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def small_jpeg(seed: int, size: tuple[int, int] = (96, 72)) -> bytes:
    """A small frame (≈1–2 kB): two colour blocks chosen by ``seed``."""
    rng = np.random.default_rng(seed)
    colour = lambda: tuple(int(x) for x in rng.integers(0, 255, 3))  # noqa: E731
    img, half = Image.new("RGB", size, colour()), (size[0] // 2, size[1] // 2)
    block = Image.new("RGB", half, colour())
    img.paste(block, (int(rng.integers(0, half[0])), int(rng.integers(0, half[1]))))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=70)
    return buf.getvalue()


AUDIO_CHUNK_S = 5
AUDIO_RATE = 8000
FRAMES_PER_USER = 4  # distinct JPEGs cycled per user


def ten_minute_start() -> datetime:
    """The last 10 min boundary: event time starts there, so coarse windows close in a run."""
    now = datetime.now(UTC)
    return now.replace(minute=now.minute - now.minute % 10, second=0, microsecond=0)


class Wearers:
    """Simulated wearers in session ``s1``: one small JPEG a second each (cycling through a
    few), a silent 5 s WAV chunk every 5 s."""

    def __init__(self, names: Sequence[str], seed: int) -> None:
        self.names = list(names)
        self.jpegs = [
            [small_jpeg(seed * 100_003 + u * 7 + i) for i in range(FRAMES_PER_USER)]
            for u in range(len(self.names))
        ]
        self.wav = wav_bytes(b"\x00\x00" * AUDIO_CHUNK_S * AUDIO_RATE, AUDIO_RATE)

    def stream(
        self,
        producer: Any,
        t0: datetime,
        seconds: int,
        at: Callable[[int], None],
        frames_s: int | None = None,
    ) -> float:
        """Seconds 0 to ``seconds`` of the stream through ``producer`` (a
        :class:`connectors.gateway.GlassesProducer`) in real time from now: every wearer's
        frame (only before ``frames_s``) and each audio chunk as it ends. ``at(k)`` is called
        as second ``k`` is due; returns how far the producer fell behind (a busy machine)."""
        wall0, lag = time.time(), 0.0
        for k in range(seconds + 1):
            due = wall0 + k
            time.sleep(max(0.0, due - time.time()))
            lag = max(lag, time.time() - due)
            at(k)
            ts = t0 + timedelta(seconds=k)
            for u, name in enumerate(self.names):
                if frames_s is None or k < frames_s:
                    producer.send_frame(name, "s1", ts, self.jpegs[u][k % FRAMES_PER_USER], seq=k)
                if k >= AUDIO_CHUNK_S and k % AUDIO_CHUNK_S == 0:
                    chunk_start = ts - timedelta(seconds=AUDIO_CHUNK_S)
                    producer.send_audio(name, "s1", chunk_start, self.wav)
            producer.producer.poll(0)
        return lag
