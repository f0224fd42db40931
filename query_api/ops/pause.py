"""A privacy pause sent from the API: a ``pause``/``resume`` control record on the control
topic, exactly what the glasses would send (the flow then drops the span's captures)."""

from __future__ import annotations

from datetime import datetime

from fastapi import HTTPException, status

from worldmm.deps import Deps
from worldmm.store.privacy import latest_session
from worldmm.wire.schemas import PauseResponse


def check_within_flow_limits(deps: Deps, when: datetime, now: datetime) -> None:
    """422 for a time the flow would drop: further ahead than its future skew, or older than
    its past limit (the same limits it applies to every record, against its own clock)."""
    s = deps.settings
    ahead = (when - now).total_seconds()
    if ahead > s.max_future_skew_s:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"at is {ahead:.0f} s ahead; the flow takes pauses at most "
            f"{s.max_future_skew_s:.0f} s ahead (WORLDMM_MAX_FUTURE_SKEW_S)",
        )
    if -ahead > s.max_past_age_s:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"at is {-ahead:.0f} s old; the flow takes pauses at most "
            f"{s.max_past_age_s:.0f} s old (WORLDMM_MAX_PAST_AGE_S)",
        )


def send_pause(
    deps: Deps, user_id: str, *, resume: bool, session_id: str | None, at: datetime | None
) -> PauseResponse:
    from connectors.gateway import BrokerUnavailable, GlassesProducer
    from connectors.kafka_io import DeliveryError

    now = deps.clock()
    when = at or now
    check_within_flow_limits(deps, when, now)
    if session_id is None:
        with deps.db.connection() as conn:
            session_id = latest_session(conn, user_id)
        if session_id is None:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                "no capture session of this user is known yet: give session_id",
            )
    unavailable = HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        "the control topic cannot be reached; the pause was not sent",
        headers={"Retry-After": "5"},
    )
    try:
        producer = GlassesProducer(deps.settings)
        producer.pause(user_id, session_id, when, resume=resume)
        producer.flush(10.0)  # acknowledged, or the caller hears it was not sent
    except (BrokerUnavailable, DeliveryError, TimeoutError):
        raise unavailable from None
    return PauseResponse(
        user_id=user_id, session_id=session_id, event="resume" if resume else "pause", at=when
    )
