"""Replies that follow each model role's protocol, for the fake OpenAI server.

The role of a request is read from its prompt (the reply schema each prompt embeds, which is
the role's own), and the reply is built from the prompt's own text: a caption (the next of
``captions`` when given), the capitalised names of a passage as its entities, triples
between them, a summary of the first sentence of each entry, and an agent that searches the
memories in ``searches`` (with the question) and then answers, citing the first passage it
was shown. The usage each reply reports comes from ``usage`` (default: a quarter of the
characters; ``worldmm bench cost`` adds reasoning tokens apart), so tests and the bench can
check what gets recorded.

    with FakeOpenAI(ProtocolResponder()) as fake: ...
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

from fakes.openai_server import Reply, chat_body
from worldmm.llm.prompts import ROLES, load_prompt

Usage = Callable[[dict[str, Any], str], dict[str, Any]]
_NAME_RE = re.compile(r"\b[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?\b")
_NOT_NAMES = {"The", "This", "That", "Then", "There", "They", "She", "His", "Her", "And", "But"}
_REF_RE = re.compile(r"\[([SF]\d+)\]")


def text_of(message: dict[str, Any]) -> str:
    """A message's text (the text parts of a message with images)."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def role_of(body: dict[str, Any]) -> str | None:
    """The role a chat request is for, from the reply schema in its system prompt (the
    longest that matches: no schema is part of another, but that is not promised)."""
    system = text_of(body["messages"][0])
    return next((role for schema, role in _schemas() if schema in system), None)


@cache
def _schemas() -> list[tuple[str, str]]:
    """(schema as the prompt carries it, role), longest first."""
    return sorted(((load_prompt(r).schema, r) for r in ROLES), key=lambda x: -len(x[0]))


def quoted(prompt: str) -> str:
    """The text between the prompt's ``<<<`` and ``>>>`` (the passage)."""
    m = re.search(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)
    return m.group(1) if m else ""


def after(prompt: str, label: str) -> str:
    """The rest of the line that starts with ``label``."""
    m = re.search(rf"^{re.escape(label)}(.*)$", prompt, re.MULTILINE)
    return m.group(1).strip() if m else ""


def names(text: str, most: int = 8) -> list[str]:
    found = [n for n in _NAME_RE.findall(text) if n.split()[0] not in _NOT_NAMES]
    return list(dict.fromkeys(found))[:most]


def rough_usage(body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt = sum(len(text_of(m)) for m in body["messages"])
    return {"prompt_tokens": prompt // 4, "completion_tokens": max(1, len(content) // 4)}


class ProtocolResponder:
    """A default responder for :class:`fakes.openai_server.FakeOpenAI` that answers
    every role; ``calls`` counts the requests per role."""

    def __init__(
        self,
        *,
        captions: Iterable[str] = (),
        searches: tuple[str, ...] = ("episodic", "semantic"),
        usage: Usage = rough_usage,
    ) -> None:
        self._captions: Iterator[str] = iter(captions)
        self.searches = searches
        self.usage = usage
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        role = role_of(body) or "unknown"
        with self._lock:
            self.calls[role] = self.calls.get(role, 0) + 1
            reply = getattr(self, role, lambda _p: {})(text_of(body["messages"][-1]))
        content = json.dumps(reply)
        response = chat_body(content, body.get("model", "fake-model"))
        if body.get("service_tier"):  # the tier that served it, as OpenAI's replies say
            response["service_tier"] = body["service_tier"]
        response["usage"] = {**self.usage(body, content)}
        response["usage"]["total_tokens"] = sum(
            response["usage"].get(k, 0) for k in ("prompt_tokens", "completion_tokens")
        )
        return Reply(body=response)

    # --- one method per role: the user prompt in, the reply's JSON out -----------------
    def caption(self, prompt: str) -> dict:
        recorded = next(self._captions, None)
        if recorded:
            return {"caption": recorded}
        caption, said = "I stood in the kitchen and looked at the table.", quoted(prompt).strip()
        if said and said != "(nothing was said)":
            caption += f' Someone said: "{said[:200]}"'
        return {"caption": caption}

    def ner(self, prompt: str) -> dict:
        return {"named_entities": names(quoted(prompt))}

    def episodic_triples(self, prompt: str) -> dict:
        entities = json.loads(after(prompt, "Entities:") or "[]")
        pairs = zip(entities, entities[1:], strict=False)
        return {"triples": [[a, "was with", b] for a, b in pairs]}

    def merge_captions(self, prompt: str) -> dict:
        entries = [re.sub(r"^\d+\. ", "", line) for line in quoted(prompt).splitlines()]
        firsts = [e.split(". ")[0].rstrip(".") + "." for e in entries if e.strip()]
        return {"summary": " ".join(firsts[:8]) or "Nothing happened."}

    def semantic_triples(self, prompt: str) -> dict:
        people = names(quoted(prompt), most=3)
        pairs = zip(people, people[1:], strict=False)
        triples = [[p, "often spends time with", q] for p, q in pairs]
        return {"semantic_triples": triples, "episodic_evidence": [[] for _ in triples]}

    def consolidation(self, prompt: str) -> dict:
        return {"updated_triple": json.loads(after(prompt, "New fact:")), "triples_to_remove": []}

    def entity_confirm(self, prompt: str) -> dict:
        same = after(prompt, "New mention:").casefold() == after(prompt, "Known entity:").casefold()
        return {"same_entity": same}

    def cross_scale_rerank(self, prompt: str) -> dict:
        return {"ranked_ids": re.findall(r"^\[([^\]]+)\]", prompt, re.MULTILINE)}

    def reasoning_agent(self, prompt: str) -> dict:
        done = len(re.findall(r"^Step \d+: searched", prompt, re.MULTILINE))
        if done >= len(self.searches):
            return {"action": "ANSWER"}
        question = after(prompt, "Question:")
        return {"action": "SEARCH", "memory_type": self.searches[done], "query": question}

    def response(self, prompt: str) -> dict:
        refs = _REF_RE.findall(quoted(prompt))[:1]
        choice = "A" if re.search(r"^Choices:", prompt, re.MULTILINE) else None
        answer = "From what I saw, the first passage answers it."
        return {"answer": answer, "choice": choice, "evidence": refs}
