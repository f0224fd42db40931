"""Per-wearer state in the flow is bounded (issue #42): a wearer with nothing open is dropped
after ``user_state_idle_s`` of wall time, and made again where their built windows end, so a
capture older than that is late (stored alone), never a window built a second time; the
construction step forgets a wearer with nothing in flight or kept for a parent."""

from __future__ import annotations

import concurrent.futures as cf

from dataflows.construct_step import ConstructLogic
from dataflows.window_step import WindowLogic
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import (
    BaseWindow,
    CoarseWindow,
    Item,
    LateItem,
    Pause,
    SessionEnd,
    WindowConfig,
)

T0 = 1_767_225_600_000  # a 10 min boundary
CONFIG = WindowConfig(allowed_lateness_s=0, state_idle_s=600)


def _frame(k: int, session: str = "s1") -> Item:
    return Item("frames", f"f{k}", session, T0 + k * 1000, T0 + k * 1000, None)


def test_an_idle_wearer_is_dropped_and_starts_again_where_their_windows_end() -> None:
    now = [100.0]
    logic = WindowLogic(None, CONFIG, lambda: now[0])
    frames = [("u1", _frame(k)) for k in range(60)]
    logic.on_batch([*frames, ("u1", SessionEnd("s1", T0 + 60_000))])
    now[0] = 110.0  # the end's grace passed: its windows close
    events, _ = logic.on_notify()
    assert len([e for e in events if isinstance(e, BaseWindow)]) == 2
    assert logic.state.holds_nothing()
    assert logic.notify_at().timestamp() == 100.0 + 600  # woken to drop it
    now[0] = 500.0
    assert logic.on_notify() == ([], logic.RETAIN)
    now[0] = 701.0
    assert logic.on_notify() == ([], logic.DISCARD)

    # made again, the state starts where the user's windows end (read from the store)
    fresh = WindowLogic(None, CONFIG, lambda: now[0], floor=lambda user: T0 + 60_000)
    events, _ = fresh.on_batch([("u1", _frame(10)), ("u1", _frame(70, "s2"))])
    assert [type(e) for e in events] == [LateItem]  # not a second build of its window
    assert list(fresh.state.open_base) == [T0 + 60_000]


def test_a_wearer_in_a_pause_or_with_open_windows_is_kept() -> None:
    now = [100.0]
    logic = WindowLogic(None, CONFIG, lambda: now[0])
    logic.on_batch([("u1", _frame(1)), ("u1", Pause("s1", T0 + 2_000))])
    now[0] = 100.0 + 10 * 600
    _, keep = logic.on_notify()
    assert keep == logic.RETAIN and logic.state.evict_at() is None


class _Runner:
    def __init__(self) -> None:
        self.submitted: list = []

    def submit(self, event) -> cf.Future:
        fut: cf.Future = cf.Future()
        scale = 30 if isinstance(event, BaseWindow) else event.scale_s
        fut.set_result(WindowOutcome(event.user_id, scale, event.start_ms, "complete"))
        self.submitted.append(event)
        return fut


def test_construction_state_goes_once_nothing_waits() -> None:
    runner = _Runner()
    logic = ConstructLogic(lambda: runner, None)
    base = BaseWindow("u1", T0, (), False, "s1")
    out, keep = logic.on_batch([base])
    assert len(out) == 1 and keep == logic.RETAIN  # kept for its 3 min parent
    three = CoarseWindow("u1", 180, T0, (base.wid,), True, "s1")
    ten = CoarseWindow("u1", 600, T0, (three.wid,), True, "s1")
    for coarse in (three, ten):
        (outcome,), keep = logic.on_batch([coarse])
        assert outcome.scale_s == coarse.scale_s and keep == logic.RETAIN
    hour = CoarseWindow("u1", 3600, T0, (ten.wid,), True, "s1")
    _, keep = logic.on_batch([hour])
    # the hour has no parent: nothing is kept for it, and the state goes
    assert keep == logic.DISCARD and not logic.done
    assert [e.wid for e in runner.submitted] == [base.wid, three.wid, ten.wid, hour.wid]
