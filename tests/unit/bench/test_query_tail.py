"""The query bench's tail profile: the slowest tenth of searches against the middle ones,
per step, so a p95 says what the slow searches do that the median does not."""

from __future__ import annotations

from bench.query import primed, tail_profile


def test_the_tail_shows_the_step_that_makes_searches_slow() -> None:
    # 100 searches: ten of them spend 40 ms more in the lexical read, one collected garbage
    times, shares = [], []
    for i in range(100):
        slow = i % 10 == 0
        lexical = 0.050 if slow else 0.010
        times.append(1000 * (lexical + 0.020) + i * 0.001)
        shares.append({"reader.lexical_segments": lexical, "reader.dense_segments": 0.020,
                       "gc": 1.0 if i == 0 else 0.0})  # fmt: skip
    out = tail_profile(times, shares)
    tail, middle = out["tail"], out["middle"]
    assert tail["n"] == 10 and middle["n"] == 20
    assert tail["per_step"]["reader.lexical_segments"] == 50.0
    assert middle["per_step"]["reader.lexical_segments"] == 10.0
    assert tail["per_step"]["reader.dense_segments"] == middle["per_step"]["reader.dense_segments"]
    assert tail["per_step"]["gc"] == 0.1 and middle["per_step"]["gc"] == 0.0
    assert tail["ms"] > middle["ms"]


def test_too_few_searches_give_no_tail() -> None:
    assert tail_profile([1.0] * 9, [{}] * 9) == {}
    assert tail_profile([1.0] * 20, []) == {}


def test_priming_stops_once_a_batch_is_steady() -> None:
    def b(p50: float, p95: float) -> dict[str, float]:
        return {"p50": p50, "p95": p95}

    assert not primed([])
    assert not primed([b(8.0, 12.0)])  # one batch says nothing about the next
    assert not primed([b(200.0, 400.0), b(40.0, 120.0)])  # still falling
    assert primed([b(200.0, 400.0), b(40.0, 120.0), b(38.0, 110.0)]) is False  # a long tail
    assert primed([b(200.0, 400.0), b(40.0, 60.0), b(38.0, 55.0)])
    assert primed([b(8.0, 12.0), b(9.0, 14.0)])  # warm from the start
    assert not primed([b(8.0, 12.0), b(7.0, 9.5)])  # a fifth faster
