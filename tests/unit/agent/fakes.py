"""Fakes of our own interfaces (ModelRoles, TextEmbedder, VisualEncoder) for retriever and
agent tests, and a recorder around the real PostgreSQL reader. No hosted API is mocked here."""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from worldmm.encoder.base import EncoderUnavailable
from worldmm.llm.schemas import AgentAction, AgentRound, OptionNote, Passage, Response
from worldmm.localtime import Asked
from worldmm.memory.retrieval.reader import MemoryReader
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
    asked_seen: list[Asked | None] = field(default_factory=list)  # agent steps, then answers
    choose: int = 0  # the option index respond picks when given choices
    notes_seen: list[list[OptionNote] | None] = field(default_factory=list)  # per answer
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

    async def agent_step(
        self, question: str, rounds: list[AgentRound], *, asked: Asked | None = None
    ) -> AgentAction:
        self.steps_seen.append(list(rounds))
        self.asked_seen.append(asked)
        if not self.script:
            return AgentAction(action="ANSWER")
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def respond(self, question, passages, choices, *, asked=None, notes=None) -> Response:
        self.respond_calls.append((question, passages, choices))
        self.asked_seen.append(asked)
        self.notes_seen.append(notes)
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


class RecordingReader:
    """The real reader over PostgreSQL, recording every call's (method, user_id, as_of) and
    counting graph reads; ``fingerprint_override`` freezes the fingerprint to test the paths
    where a change goes unseen. Tests put it on a bundle with ``deps.reader = ...``."""

    def __init__(self, inner: MemoryReader) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, datetime | None]] = []
        self.graph_reads = 0
        self.fingerprint_override: str | None = None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.inner, name)
        signature = inspect.signature(method)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs).arguments
            self.calls.append((name, bound["user_id"], bound.get("as_of")))
            if name == "graph_history":
                self.graph_reads += 1
            if name == "graph_fingerprint" and self.fingerprint_override is not None:
                return self.fingerprint_override
            return method(*args, **kwargs)

        return recorded
