"""The construction step's scheduling and recovery state, without a Bytewax runtime."""

from __future__ import annotations

import concurrent.futures as cf
import pickle

from dataflows.construct_step import ConstructLogic
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import BaseWindow, CoarseWindow

S = 1000


class ManualRunner:
    """Futures the test completes by hand."""

    def __init__(self) -> None:
        self.submitted: list = []

    def submit(self, event) -> cf.Future:
        fut: cf.Future = cf.Future()
        self.submitted.append((event, fut))
        return fut

    def finish(self, event) -> None:
        for e, fut in self.submitted:
            if e == event and not fut.done():
                scale = 30 if isinstance(e, BaseWindow) else e.scale_s
                fut.set_result(WindowOutcome(e.user_id, scale, e.start_ms, "complete"))


def _events():
    bases = [BaseWindow("u", k * 30 * S, (), False, "s") for k in range(6)]
    parent = CoarseWindow("u", 180, 0, tuple(b.wid for b in bases), False, "s")
    return bases, parent


def test_parent_waits_for_children_then_runs() -> None:
    runner = ManualRunner()
    logic = ConstructLogic(lambda: runner, None)
    bases, parent = _events()
    out, _ = logic.on_batch([*bases, parent])
    assert out == [] and [e for e, _ in runner.submitted] == bases  # parent not submitted
    assert logic.notify_at() is not None  # woken while calls are in flight
    for b in bases[:5]:
        runner.finish(b)
    out, _ = logic.on_notify()
    assert len(out) == 5 and parent not in [e for e, _ in runner.submitted]
    runner.finish(bases[5])
    out, _ = logic.on_notify()
    assert len(out) == 1 and runner.submitted[-1][0] == parent
    runner.finish(parent)
    out, _ = logic.on_eof()
    assert [o.scale_s for o in out] == [180]
    assert logic.notify_at() is None


def test_snapshot_holds_inputs_of_unfinished_work_and_resumes_them() -> None:
    runner = ManualRunner()
    logic = ConstructLogic(lambda: runner, None)
    bases, parent = _events()
    logic.on_batch([*bases, parent])
    for b in bases[:4]:
        runner.finish(b)
    logic.on_notify()
    state = pickle.loads(pickle.dumps(logic.snapshot()))  # what Bytewax would store
    assert set(state.unfinished) == {bases[4], bases[5], parent}
    assert state.done == {b.wid for b in bases[:4]}

    # after a crash: the unfinished windows are submitted again, the parent still waits
    runner2 = ManualRunner()
    resumed = ConstructLogic(lambda: runner2, state)
    assert [e for e, _ in runner2.submitted] == [bases[4], bases[5]]
    runner2.finish(bases[4])
    runner2.finish(bases[5])
    out, _ = resumed.on_notify()
    assert len(out) == 2 and runner2.submitted[-1][0] == parent


def test_a_parent_snapshotted_while_it_runs_runs_again_on_resume() -> None:
    """A crash while a 3 min window is built: the snapshot holds it and the children it
    merges, so it is submitted again at once, not left waiting for children that finished
    before the crash (issue #42's chaos run: every wearer's 3 min, 10 min and 1 h windows
    never built after a worker kill at that moment)."""
    runner = ManualRunner()
    logic = ConstructLogic(lambda: runner, None)
    bases, parent = _events()
    logic.on_batch([*bases, parent])
    for b in bases:
        runner.finish(b)
    logic.on_notify()
    assert runner.submitted[-1][0] == parent  # running now
    state = pickle.loads(pickle.dumps(logic.snapshot()))
    assert state.unfinished == [parent] and state.done == {b.wid for b in bases}

    runner2 = ManualRunner()
    ConstructLogic(lambda: runner2, state)
    assert [e for e, _ in runner2.submitted] == [parent]
