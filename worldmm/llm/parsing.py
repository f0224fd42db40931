"""Tolerant JSON extraction and validation of model replies.

Models wrap JSON in code fences or prose, or stop mid-object. ``extract_json`` finds the first
complete JSON value; ``parse_reply`` validates it into the role's wire model and raises
:class:`ParseError` (with the reason, for the repair prompt) when it cannot.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from worldmm.providers.errors import ParseError

M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class _NoJSON(ValueError):
    pass


def extract_json(text: str) -> Any:
    """Return the first complete JSON object or array in ``text``.

    Tries, in order: the whole text, the contents of each code fence, then every ``{`` or
    ``[`` position (objects first) with a raw decode, so surrounding prose is ignored.
    """
    stripped = text.strip()
    if not stripped:
        raise _NoJSON("the reply is empty")
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for block in _FENCE.findall(stripped):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for opener in "{[":
        start = stripped.find(opener)
        while start != -1:
            try:
                value, _ = decoder.raw_decode(stripped, start)
                return value
            except json.JSONDecodeError:
                start = stripped.find(opener, start + 1)
    raise _NoJSON("no complete JSON object found (is the reply truncated?)")


def parse_reply(model: type[M], text: str, *, role: str | None = None) -> M:
    """Validate a reply into ``model``; raise ParseError with a short, repairable reason."""
    try:
        data = extract_json(text)
    except _NoJSON as exc:
        raise ParseError(str(exc), role=role, raw=text) from None
    fields = list(model.model_fields)
    # A bare list or string for a one-field model is the field itself ({"x": [...]} → [...]).
    if not isinstance(data, dict) and len(fields) == 1:
        data = {fields[0]: data}
    if not isinstance(data, dict):
        raise ParseError(f"expected a JSON object, got {type(data).__name__}", role=role, raw=text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        )
        reason = f"reply does not match the schema: {problems}"
        raise ParseError(reason, role=role, raw=text) from None
