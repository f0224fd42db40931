import json
from datetime import UTC, datetime, timedelta

import pytest

from bench.egolife.baselines import Bm25Search, DenseSearch, tokenize
from bench.egolife.data import Window, load_windows
from bench.egolife.run import BenchConfig, run_benchmark
from tests.fixtures.egolife_data import write_questions, write_sync_dir
from worldmm.settings import load_settings

T0 = datetime(2025, 1, 1, 11, 0, 0, tzinfo=UTC)


def window(i: int, caption: str) -> Window:
    start = T0 + timedelta(seconds=30 * i)
    return Window(
        start=start,
        end=start + timedelta(seconds=30),
        caption=caption,
        transcript="",
        source=f"clip{i}",
    )


WINDOWS = [
    window(0, "I fold the laundry on the bed."),
    window(1, "I water the plants on the balcony."),
    window(2, "The red kettle boils on the stove and I pour tea."),  # best match, latest
]


def test_tokenize():
    assert tokenize("Jake: Who's got the RED kettle?") == [
        "jake",
        "who",
        "s",
        "got",
        "the",
        "red",
        "kettle",
    ]


@pytest.mark.parametrize("make", ["bm25", "dense"])
def test_window_ending_after_the_query_time_is_never_returned(make, minilm):
    search = Bm25Search(WINDOWS) if make == "bm25" else DenseSearch(WINDOWS, minilm)
    query = "red kettle boils on the stove, tea"
    # with everything visible the kettle window wins
    assert search.search(query, None, 1)[0].start == WINDOWS[2].start
    # one second before it closes it must not appear at all, whatever k
    as_of = WINDOWS[2].end - timedelta(seconds=1)
    got = search.search(query, as_of, 10)
    assert [r.start for r in got] == [WINDOWS[0].start, WINDOWS[1].start] or sorted(
        r.start for r in got
    ) == [WINDOWS[0].start, WINDOWS[1].start]
    assert all(r.end <= as_of for r in got)
    # a window that ends exactly at the query time is visible
    assert search.search(query, WINDOWS[2].end, 1)[0].start == WINDOWS[2].start
    # before anything closed: nothing
    assert search.search(query, T0 + timedelta(seconds=29), 3) == []


def test_results_are_30s_windows_in_score_order(minilm):
    got = DenseSearch(WINDOWS, minilm).search("watering plants", None, 3)
    assert got[0].start == WINDOWS[1].start
    assert {r.scale for r in got} == {30}
    assert len({r.start for r in got}) == 3


def test_dense_embedding_cache_is_kept_per_day_and_reused(tmp_path, minilm):
    day2 = window(2880, "I water the plants again the next morning.")  # 24 h later
    first = DenseSearch([*WINDOWS, day2], minilm, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("dense-*.npy"))) == 2  # one matrix per day
    seen: list[int] = []
    again = DenseSearch(WINDOWS, minilm, on_progress=seen.append, cache_dir=tmp_path)
    assert seen == [len(WINDOWS)]  # day 1 came from the cache in one step
    assert (again._matrix == first._matrix[:3]).all()
    assert len(list(tmp_path.glob("dense-*.npy"))) == 2
    DenseSearch(WINDOWS[:2], minilm, cache_dir=tmp_path)  # other texts: another key
    assert len(list(tmp_path.glob("dense-*.npy"))) == 3


def test_baselines_end_to_end_on_a_synthetic_sync_dir(tmp_path, minilm):
    sync = write_sync_dir(tmp_path / "data")
    questions = write_questions(tmp_path / "data")
    assert len(load_windows(sync, {1})) == 2
    cfg = BenchConfig(
        sync_dir=sync,
        questions=questions,
        out=tmp_path / "out" / "r.json",
        days=[1],
        methods=["bm25", "dense"],
        cache_dir=tmp_path / "cache",
    )
    report = run_benchmark(cfg, load_settings(state_dir=tmp_path / "state"))
    on_disk = json.loads(cfg.out.read_text())
    assert on_disk["questions"] == report["questions"] == 2  # the DAY2 question is not asked
    assert set(on_disk["methods"]) == {"bm25", "dense"}
    for method in ("bm25", "dense"):
        overall = on_disk["methods"][method]["overall"]
        assert set(overall) >= {"hit@1", "hit@3", "tiou"}
        assert set(on_disk["methods"][method]["by_type"]) == {"EventRecall", "TaskMaster"}
        # two windows only, each question's answer is one of them: both found within top 3
        assert overall["hit@3"] == 1.0
    for row in on_disk["per_question"]:
        for method in ("bm25", "dense"):
            # top 3 = both windows (never the DAY2 one), truth = one of them
            assert len(row["methods"][method]["top"]) == 2
            assert row["methods"][method]["tiou"] == pytest.approx(0.5)
    assert cfg.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
