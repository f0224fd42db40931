"""The one retry loop (worldmm.retry): what is retried, how long it waits, when it stops. Sleep
and clock are injected: nothing here really sleeps."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from worldmm.retry import (
    RetryPolicy,
    acall_with_retry,
    call_with_retry,
    encoder_policy,
    model_policy,
)
from worldmm.settings import Settings


class Down(Exception):
    """A failure the tests call retryable; ``response`` carries a Retry-After like httpx's."""

    def __init__(self, retry_after: str | None = None) -> None:
        super().__init__("service down")
        self.response = httpx.Response(
            503, headers={"retry-after": retry_after} if retry_after else {}
        )


def down(exc: BaseException) -> str | None:
    return "down" if isinstance(exc, Down) else None


class Script:
    """A call that raises (or returns) the scripted outcomes in turn, counting its calls."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> object:
        outcome = self.outcomes[self.calls]
        self.calls += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def run(script: Script, policy: RetryPolicy, **kwargs) -> tuple[object, list[float]]:
    slept: list[float] = []
    result = call_with_retry(script, policy, step="t", retry_on=down, sleep=slept.append, **kwargs)
    return result, slept


def test_backoff_doubles_up_to_the_cap_and_the_value_comes_back():
    policy = RetryPolicy(max_retries=5, backoff_s=0.5, max_delay_s=3.0)
    script = Script(Down(), Down(), Down(), Down(), "ok")
    assert run(script, policy) == ("ok", [0.5, 1.0, 2.0, 3.0])
    assert script.calls == 5


def test_retry_after_in_seconds_replaces_the_backoff_and_is_capped():
    policy = RetryPolicy(max_retries=3, backoff_s=0.5, max_delay_s=10.0)
    script = Script(Down("2"), Down("0.25"), Down("3600"), "ok")
    assert run(script, policy) == ("ok", [2.0, 0.25, 10.0])


def test_retry_after_as_an_http_date_is_honoured_and_capped():
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    _, slept = run(Script(Down(soon), Down(later), "ok"), RetryPolicy(3, max_delay_s=60.0))
    assert 28.0 < slept[0] <= 30.0  # the date has whole seconds
    assert slept[1] == 60.0


def test_retry_after_is_ignored_when_the_policy_says_so():
    policy = RetryPolicy(max_retries=1, backoff_s=0.25, retry_after=False)
    assert run(Script(Down("9"), "ok"), policy) == ("ok", [0.25])


def test_full_jitter_stays_within_the_backoff():
    policy = RetryPolicy(max_retries=None, backoff_s=1.0, max_delay_s=4.0, jitter=True)
    for attempt, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (6, 4.0)]:
        draws = [policy.delay(attempt) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert len(set(draws)) > 100  # spread out, not one value
    assert policy.delay(0, "5") == 4.0  # a server's Retry-After is not jittered


def test_retries_spent_raise_the_last_error_itself():
    last = Down()
    script = Script(Down(), Down(), last)
    with pytest.raises(Down) as raised:
        run(script, RetryPolicy(max_retries=2, backoff_s=0.1))
    assert raised.value is last and script.calls == 3
    never = Script(Down())
    with pytest.raises(Down):
        run(never, RetryPolicy(0))
    assert never.calls == 1


def test_the_predicate_decides_what_is_retried():
    script = Script(ValueError("bad input"), "never reached")
    with pytest.raises(ValueError, match="bad input"):
        run(script, RetryPolicy(max_retries=5))
    assert script.calls == 1
    # interrupts are never retried, whatever the predicate says
    interrupted = Script(KeyboardInterrupt(), "never reached")
    with pytest.raises(KeyboardInterrupt):
        call_with_retry(interrupted, RetryPolicy(5), step="t", retry_on=lambda _: "any")
    assert interrupted.calls == 1


def test_a_returned_value_may_be_retried_and_the_last_one_comes_back():
    def busy(status: int) -> str | None:
        return "busy" if status == 503 else None

    slept: list[float] = []
    policy = RetryPolicy(max_retries=2, backoff_s=1.0)
    got = call_with_retry(
        Script(503, 503, 503), policy, step="t", retry_result=busy, sleep=slept.append
    )
    assert (got, slept) == (503, [1.0, 2.0])
    assert call_with_retry(Script(503, 200), policy, step="t", retry_result=busy) == 200


def test_give_up_time_stops_an_endless_policy():
    now = [100.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    policy = RetryPolicy(max_retries=None, backoff_s=0.25, max_delay_s=0.25, give_up_s=1.0)
    script = Script(*[Down() for _ in range(50)])
    with pytest.raises(Down):
        call_with_retry(script, policy, step="t", retry_on=down, sleep=sleep, clock=lambda: now[0])
    assert script.calls == 5  # tried at 0, 0.25, 0.5, 0.75 and 1.0 s: then it gave up
    assert now[0] == 101.0


def test_async_form_retries_reports_each_retry_and_awaits_the_injected_sleep():
    slept: list[float] = []
    reasons: list[str] = []
    calls = 0

    async def fetch() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise Down("1")
        return "ok"

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def main() -> str:
        return await acall_with_retry(
            fetch, RetryPolicy(3), step="t", retry_on=down, on_retry=reasons.append, sleep=sleep
        )

    assert asyncio.run(main()) == "ok"
    assert (calls, slept, reasons) == (3, [1.0, 1.0], ["down", "down"])


def test_async_cancellation_is_never_retried():
    calls = 0

    async def cancelled() -> None:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    async def main() -> None:
        await acall_with_retry(cancelled, RetryPolicy(5), step="t", retry_on=lambda _: "any")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert calls == 1


def test_each_retry_is_logged_under_its_step_then_every_tenth(caplog):
    policy = RetryPolicy(max_retries=12, backoff_s=0.0)
    with caplog.at_level(logging.INFO, logger="worldmm.retry"):
        run(Script(*[Down() for _ in range(12)], "ok"), policy, log_level=logging.INFO)
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split()[2] for line in lines] == [f"attempt={n}" for n in (1, 2, 3, 10)]
    assert lines[0] == "retry step=t attempt=1 reason=down wait_s=0.00 error=service down"
    assert {r.levelno for r in caplog.records} == {logging.INFO}


def test_the_model_and_encoder_policies_take_their_values_from_settings():
    defaults = Settings.model_construct()  # every field at its declared default, no env
    assert model_policy(defaults) == RetryPolicy(3, backoff_s=0.5, max_delay_s=30.0, jitter=True)
    assert encoder_policy(defaults) == RetryPolicy(2, backoff_s=0.2, max_delay_s=10.0)
    tuned = Settings(llm_max_retries=0, gpu_max_retries=5, gpu_retry_backoff_s=1.5)
    assert model_policy(tuned).max_retries == 0 and model_policy(tuned).jitter
    assert (encoder_policy(tuned).max_retries, encoder_policy(tuned).backoff_s) == (5, 1.5)


def test_a_policy_refuses_negative_values():
    for bad in ({"max_retries": -1}, {"backoff_s": -0.1}, {"give_up_s": -1.0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)
