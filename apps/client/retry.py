"""When to try a request again: on 429 and 503, after the server's Retry-After when it sends
one, else after an exponential backoff. Pure functions; the clients do the waiting."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5  # first wait without Retry-After; doubles each retry
    max_delay_s: float = 60.0  # longest wait we accept, whatever the server asks

    def delay(self, status: int, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before retry ``attempt`` (0-based), or None: do not retry."""
        if status not in RETRY_STATUSES or attempt >= self.max_retries:
            return None
        asked = parse_retry_after(retry_after)
        wait = asked if asked is not None else self.backoff_s * 2**attempt
        return min(max(wait, 0.0), self.max_delay_s)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: either delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to our own backoff
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
