"""Opaque paging cursors: a page's last (time, tiebreak) key, base64url JSON.

The store pages by that key (``after=``); encoding it for clients is the API's concern.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime


class CursorError(ValueError):
    """A paging cursor that this service did not issue."""


def encode_cursor(ts: datetime, tiebreak: int) -> str:
    raw = json.dumps([ts.isoformat(), tiebreak]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        ts, tiebreak = json.loads(base64.urlsafe_b64decode(padded.encode()))
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None or not isinstance(tiebreak, int):
            raise ValueError("bad cursor fields")
        return parsed, tiebreak
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise CursorError("invalid cursor") from exc
