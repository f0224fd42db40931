"""Opaque paging cursors: a page's last (time, tiebreak) key, base64url JSON.

The store pages by that key (``after=``); encoding it for clients is the API's concern.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from worldmm.store.models import FrameRecord, SegmentRow

R = TypeVar("R")


class CursorError(ValueError):
    """A paging cursor that this service did not issue."""


def encode_cursor(ts: datetime, tiebreak: int) -> str:
    raw = json.dumps([ts.isoformat(), tiebreak]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_BIGINT_MAX = 2**63 - 1


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """The key of a cursor this service issued; CursorError for anything else. Strict on
    purpose: base64 decoding skips stray characters and json accepts ``true`` as an int, so
    a mangled cursor used to page from a wrong key (a 200 with an empty page) instead of
    failing."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
        ts, tiebreak = json.loads(raw)
        if not isinstance(ts, str) or type(tiebreak) is not int:
            raise ValueError("bad cursor fields")
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None or not 0 <= tiebreak <= _BIGINT_MAX:
            raise ValueError("bad cursor fields")
        if encode_cursor(parsed, tiebreak) != cursor:  # only the exact form we issue
            raise ValueError("not a cursor of this service")
        return parsed, tiebreak
    except (binascii.Error, ValueError, TypeError, UnicodeError) as exc:
        raise CursorError(
            "invalid cursor: pass next_cursor from the previous page unchanged"
        ) from exc


def page_of(
    rows: Sequence[R], limit: int, key: Callable[[R], tuple[datetime, int]]
) -> tuple[list[R], str | None]:
    """One page from the ``limit + 1`` rows a store read fetched: the first ``limit``, and
    the cursor after the last of them when the extra row says that more follow."""
    items = list(rows[:limit])
    return items, encode_cursor(*key(items[-1])) if len(rows) > limit else None


def segment_key(row: SegmentRow) -> tuple[datetime, int]:
    """A segment's place in the order ``list_segments(after=...)`` pages by."""
    return row.window_start, row.scale_seconds


def frame_key(row: FrameRecord) -> tuple[datetime, int]:
    """A frame's place in the order ``list_frames(after=...)`` pages by."""
    return row.captured_at, row.id
