"""The one request builder for every LLM call, and the result every dispatch mode returns."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from worldmm.llm.prompts import RenderedPrompt


def image_part(jpeg: bytes, detail: str = "low") -> dict[str, Any]:
    """A JPEG as an ``image_url`` content part (base64 data URL)."""
    data = base64.b64encode(jpeg).decode("ascii")
    url = f"data:image/jpeg;base64,{data}"
    return {"type": "image_url", "image_url": {"url": url, "detail": detail}}


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request; ``role``, ``prompt_version`` and ``user_id`` (whose usage
    the call is, :mod:`worldmm.llm.usage_ledger`) are ours, not sent."""

    role: str
    model: str
    messages: list[dict[str, Any]]
    max_completion_tokens: int | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None  # "flex": the cheaper, slower tier
    json_mode: bool = True
    prompt_version: str = ""
    user_id: str | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body of ``POST /v1/chat/completions`` (also a Batch API line's body)."""
        out: dict[str, Any] = {"model": self.model, "messages": self.messages}
        if self.max_completion_tokens is not None:
            out["max_completion_tokens"] = self.max_completion_tokens
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        if self.service_tier is not None:
            out["service_tier"] = self.service_tier
        if self.json_mode:
            out["response_format"] = {"type": "json_object"}
        return out

    def with_repair(self, bad_reply: str, reason: str) -> ChatRequest:
        """The same conversation plus the unusable reply and what was wrong with it."""
        repair = (
            f"That reply could not be used: {reason}. Reply again with only one JSON object "
            "that matches the schema, with no other text."
        )
        messages = [
            *self.messages,
            {"role": "assistant", "content": bad_reply},
            {"role": "user", "content": repair},
        ]
        return replace(self, messages=messages)


def build_request(
    role: str,
    model: str,
    prompt: RenderedPrompt,
    images: Sequence[bytes] = (),
    *,
    max_completion_tokens: int | None = None,
    reasoning_effort: str | None = None,
    service_tier: str | None = None,
    json_mode: bool = True,
    user_id: str | None = None,
) -> ChatRequest:
    user: str | list[dict[str, Any]] = prompt.user
    if images:
        user = [{"type": "text", "text": prompt.user}, *(image_part(img) for img in images)]
    return ChatRequest(
        role=role,
        model=model,
        messages=[{"role": "system", "content": prompt.system}, {"role": "user", "content": user}],
        max_completion_tokens=max_completion_tokens,
        reasoning_effort=reasoning_effort,
        service_tier=service_tier,
        json_mode=json_mode,
        prompt_version=prompt.version,
        user_id=user_id,
    )


@dataclass
class ChatResult:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    reasoning_tokens: int = 0  # of completion_tokens, spent reasoning (billed as output)
    service_tier: str | None = None  # the tier that served the call, when the reply says
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def result_from_body(body: dict[str, Any], latency_s: float = 0.0) -> ChatResult:
    """A ChatResult from a chat completion JSON body (direct reply or Batch API output line)."""
    choices = body.get("choices") or []
    if not choices:
        raise ValueError("chat completion without choices")
    choice = choices[0]
    usage = body.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return ChatResult(
        text=(choice.get("message") or {}).get("content") or "",
        model=body.get("model", ""),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        service_tier=body.get("service_tier"),
        latency_s=latency_s,
    )
