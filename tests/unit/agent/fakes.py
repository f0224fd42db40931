"""In-memory fakes of our own interfaces (ModelRoles, TextEmbedder, VisualEncoder,
MemoryReader) for retriever and agent tests. No hosted API is mocked here."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from worldmm.encoder.base import EncoderUnavailable
from worldmm.graph.types import GraphTriple, is_active, normalise
from worldmm.llm.schemas import AgentAction, AgentRound, Passage, Response
from worldmm.memory.retrieval.deps import ClipMatch, FrameRef
from worldmm.models import SegmentRecord
from worldmm.providers.errors import ModelCallError, ParseError

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Bag of words hashed into ``dim`` buckets, L2-normalised: shared words → high cosine."""

    name = "hash"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in _WORD.findall(text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])


@dataclass
class ScriptedRoles:
    """ModelRoles whose agent steps follow a script; an item may be an exception to raise."""

    script: list[AgentAction | Exception] = field(default_factory=list)
    rerank_ids: list[str] | None = None  # None: keep the given order
    rerank_error: Exception | None = None
    ner_error: Exception | None = None
    label: str = "scripted"
    versions: dict[str, str] = field(default_factory=dict)
    steps_seen: list[list[AgentRound]] = field(default_factory=list)
    respond_calls: list[tuple[str, list[Passage], list[str] | None]] = field(default_factory=list)
    choose: int = 0  # the option index respond picks when given choices
    rerank_calls: list[tuple[str, list[tuple[str, str]], int]] = field(default_factory=list)

    async def ner(self, text: str) -> list[str]:
        if self.ner_error:
            raise self.ner_error
        return re.findall(r"\b[A-Z][a-z]+\b", text)

    async def rerank(self, query: str, candidates: list[tuple[str, str]], keep: int) -> list[str]:
        self.rerank_calls.append((query, candidates, keep))
        if self.rerank_error:
            raise self.rerank_error
        ids = self.rerank_ids if self.rerank_ids is not None else [c[0] for c in candidates]
        return ids[:keep]

    async def agent_step(self, question: str, rounds: list[AgentRound]) -> AgentAction:
        self.steps_seen.append(list(rounds))
        if not self.script:
            return AgentAction(action="ANSWER")
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def respond(
        self, question: str, passages: list[Passage], choices: list[str] | None
    ) -> Response:
        self.respond_calls.append((question, passages, choices))
        return Response(
            answer=f"answer to {question!r} from {len(passages)} passages",
            choice_index=self.choose if choices else None,
            evidence=[p.ref for p in passages[:1]],
            guess=not passages,
        )


def search(memory: str, query: str) -> AgentAction:
    return AgentAction(action="SEARCH", memory_type=memory, query=query)


def parse_error() -> ParseError:
    return ParseError("not json", role="reasoning_agent", raw="garbage")


def call_error() -> ModelCallError:
    return ModelCallError("HTTP 500 after retries", role="reasoning_agent", status=500)


class FakeEncoder:
    dim = 256

    def __init__(self, embedder: HashEmbedder, available: bool = True) -> None:
        self._embedder = embedder
        self.available = available
        self.texts: list[str] = []

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    async def encode_text(self, text: str) -> np.ndarray:
        self.texts.append(text)
        if not self.available:
            raise EncoderUnavailable("circuit open")
        return self._embedder.vector(text)


@dataclass
class Clip:
    segment_id: int
    start: datetime
    end: datetime
    vector: np.ndarray


class FakeReader:
    """MemoryReader over lists; records every call's ``as_of`` and ``user_id``."""

    def __init__(self, embedder: HashEmbedder) -> None:
        self.embedder = embedder
        self.triples: dict[str, list[tuple[str, GraphTriple]]] = {}  # user -> (type, triple)
        self.entities: dict[str, list[str]] = {}
        self.segs: dict[str, dict[int, SegmentRecord]] = {}
        self.clips: dict[str, list[Clip]] = {}
        self.frame_rows: dict[str, list[FrameRef]] = {}
        self.calls: list[tuple[str, str, datetime | None]] = []  # (method, user, as_of)
        self.graph_reads = 0
        self.fingerprint_override: str | None = None  # freeze it to test stale-cache paths

    # --- fixtures-side helpers -----------------------------------------------------------
    def add_segment(self, user: str, seg: SegmentRecord) -> None:
        self.segs.setdefault(user, {})[seg.id] = seg

    def add_triple(self, user: str, memory_type: str, t: GraphTriple) -> None:
        self.triples.setdefault(user, []).append((memory_type, t))
        names = self.entities.setdefault(user, [])
        objs = [] if t.object_is_literal else [t.object]
        for name in (t.subject, *objs):
            if normalise(name) not in map(normalise, names):
                names.append(name)

    # --- MemoryReader ---------------------------------------------------------------------
    def _exists(self, user: str, memory_type: str, t: GraphTriple, as_of: datetime | None):
        if memory_type == "semantic":
            return is_active(t, as_of) and (as_of is None or t.valid_from <= as_of)
        seg = self.segs[user][t.segment_id]
        return as_of is None or seg.window_end <= as_of

    def _rows(self, user, memory_type, scale, as_of):
        return [
            t
            for m, t in self.triples.get(user, [])
            if m == memory_type
            and (scale is None or t.scale == scale)
            and self._exists(user, m, t, as_of)
        ]

    def graph_history(self, user_id, memory_type, scale=None, *, id_range=None):
        """Every row whatever its time; episodic rows carry their segment's window end as
        valid_from, as the store writes them."""
        self.calls.append(("graph_history", user_id, None))
        self.graph_reads += 1
        out = []
        for m, t in self.triples.get(user_id, []):
            if m != memory_type or (scale is not None and t.scale != scale):
                continue
            if id_range is not None and not id_range[0] < t.triple_id <= id_range[1]:
                continue
            if m == "episodic":
                t = t.model_copy(update={"valid_from": self.segs[user_id][t.segment_id].window_end})
            out.append(t)
        return out

    def graph_fingerprint(self, user_id, memory_type, scale=None):
        self.calls.append(("graph_fingerprint", user_id, None))
        if self.fingerprint_override is not None:
            return self.fingerprint_override
        rows = self._rows(user_id, memory_type, scale, None)
        return f"{len(rows)}:{max((t.triple_id for t in rows), default=0)}"

    def top_triples(self, user_id, memory_type, embedding, k, scale=None, as_of=None):
        self.calls.append(("top_triples", user_id, as_of))
        rows = self._rows(user_id, memory_type, scale, as_of)
        scored = [
            (t, float(self.embedder.vector(f"{t.subject} {t.predicate} {t.object}") @ embedding))
            for t in rows
        ]
        return sorted(scored, key=lambda p: -p[1])[:k]

    def triples_by_id(self, user_id: str, ids: Sequence[int]):
        self.calls.append(("triples_by_id", user_id, None))
        wanted = set(ids)
        return [t for _, t in self.triples.get(user_id, []) if t.triple_id in wanted]

    def nearest_entities(self, user_id, embedding, min_cosine, k):
        self.calls.append(("nearest_entities", user_id, None))
        scored = [
            (n, float(self.embedder.vector(n) @ embedding)) for n in self.entities.get(user_id, [])
        ]
        return sorted([p for p in scored if p[1] >= min_cosine], key=lambda p: -p[1])[:k]

    def segments(self, user_id, ids):
        self.calls.append(("segments", user_id, None))
        return [self.segs.get(user_id, {})[i] for i in ids if i in self.segs.get(user_id, {})]

    def search_visual(self, user_id, embedding, k, as_of=None):
        self.calls.append(("search_visual", user_id, as_of))
        clips = [c for c in self.clips.get(user_id, []) if as_of is None or c.end <= as_of]
        scored = sorted(clips, key=lambda c: -float(c.vector @ embedding))[:k]
        return [
            ClipMatch(
                segment_id=c.segment_id, start=c.start, end=c.end, score=float(c.vector @ embedding)
            )
            for c in scored
        ]

    def frames(self, user_id, start, end, limit):
        self.calls.append(("frames", user_id, None))
        rows = [f for f in self.frame_rows.get(user_id, []) if start <= f.ts < end]
        return sorted(rows, key=lambda f: f.ts)[:limit]
