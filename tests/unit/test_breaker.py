from tests.fixtures.clocks import ManualClock
from worldmm.breaker import BreakerState, CircuitBreaker, encoder_breaker
from worldmm.settings import Settings


def test_opens_after_n_consecutive_failures_then_half_opens():
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(3, 10.0, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    assert breaker.retry_in() == 10.0
    clock.now += 10.0
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()  # one trial call
    assert not breaker.allow()  # and only one
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allow()


def _in_trial(reset_s: float) -> tuple[ManualClock, CircuitBreaker]:
    """A breaker opened by one failure, ``reset_s`` later letting its trial call through."""
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(1, reset_s, clock=clock)
    breaker.record_failure()
    clock.now += reset_s
    assert breaker.allow()
    return clock, breaker


def test_a_failed_trial_reopens_for_a_full_period():
    clock, breaker = _in_trial(5.0)
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 4.9
    assert not breaker.allow()


def test_success_resets_the_failure_count():
    breaker = CircuitBreaker(2, 5.0, clock=ManualClock(100.0))
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


def test_abandoned_trial_frees_the_slot():
    _clock, breaker = _in_trial(1.0)
    breaker.abandon()
    assert breaker.allow()


def test_the_encoder_breaker_takes_its_values_from_settings():
    breaker = encoder_breaker(Settings(gpu_breaker_failures=2, gpu_breaker_reset_s=7.5))
    assert (breaker.failure_threshold, breaker.reset_after_s) == (2, 7.5)
    assert breaker.state is BreakerState.CLOSED
