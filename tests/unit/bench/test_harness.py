"""The benchmark harness: percentiles, run metadata, and options declared once for the CLI."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from bench import harness
from bench.cli import BENCHMARKS
from bench.harness import IntList, percentile, summary

ROOT = Path(__file__).resolve().parents[3]


def test_summary_of_known_data() -> None:
    s = summary([float(x) for x in range(1, 101)])
    assert s == {"p50": 50.5, "p95": 95.05, "mean": 50.5, "max": 100.0, "n": 100}
    ms = summary([0.001, 0.002, 0.003, 0.004], qs=(50, 99), digits=1, scale=1000, suffix="_ms")
    assert ms == {"p50_ms": 2.5, "p99_ms": 4.0, "mean_ms": 2.5, "max_ms": 4.0, "n": 4}
    assert summary([]) == {"n": 0}
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([], 95) is None


def test_every_report_carries_the_run_metadata() -> None:
    run = harness.Run()
    report = run.stamp({"benchmark": "x", "machine": {"postgres": "16.4"}})
    machine = report["machine"]
    assert len(machine["loadavg_start"]) == 3 and len(machine["loadavg_end"]) == 3
    assert machine["cpus"] >= 1 and machine["host"] and machine["postgres"] == "16.4"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", report["commit"])
    assert report["commit"].startswith(head.stdout.strip())
    assert report["started_at"].endswith("+00:00") and report["wall_s"] >= 0
    assert report["command"] is None  # called from Python, not from a command line


class ToyOptions(harness.Options):
    rounds: int = Field(3, ge=1, description="Rounds.")
    batches: IntList = Field((1, 4), description="Batch sizes.")
    keep: bool = Field(False, description="Keep it.")
    speech: bool = Field(True, description="Speech.")
    hidden: float = 0.5  # not a flag


@harness.main(ToyOptions)
def toy(opts: ToyOptions) -> dict:
    """A toy benchmark."""
    report = harness.Run().stamp({"options": opts.model_dump(mode="json")})
    harness.write_report(report, opts.out)
    return report


def test_options_declared_once_parse_validate_and_are_recorded(tmp_path, capsys) -> None:
    out = tmp_path / "r" / "toy.json"
    argv = ["--out", str(out), "--rounds", "2", "--batches", "8,16", "--keep", "--no-speech"]
    report = toy(argv)
    assert report["options"] == {"out": str(out), "rounds": 2, "batches": [8, 16],
                                 "keep": True, "speech": False, "hidden": 0.5}  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(capsys.readouterr().out) == report
    # the command repeats the run: every flag with its value, defaults included
    assert report["command"] == (
        f"python -m {__name__} --out {out} --rounds 2 --batches 8,16 --keep --no-speech"
    )
    assert toy(["--out", str(out)])["options"]["batches"] == [1, 4]
    with pytest.raises(typer.BadParameter, match="--rounds"):
        toy(["--out", str(out), "--rounds", "0"])
    with pytest.raises(typer.BadParameter, match="Missing parameter: out"):
        toy([])
    with pytest.raises(Exception, match="No such option: --hidden"):
        toy(["--out", str(out), "--hidden", "1"])


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_benchmark_is_a_worldmm_bench_command(name: str) -> None:
    from apps.cli import app

    done = CliRunner().invoke(app, ["bench", name, "--help"])
    assert done.exit_code == 0, done.output
    assert "--out" in done.output


def test_settle_waits_for_the_load_to_fall_and_gives_up_at_its_limit() -> None:
    from bench.harness import settle

    def fake(loads: list[float]):
        t = [0.0]
        seq = iter(loads)
        said: list[str] = []
        kwargs = dict(
            load=lambda: next(seq),
            clock=lambda: t[0],
            sleep=lambda s: t.__setitem__(0, t[0] + s),
            poll_s=30.0,
        )
        return said, kwargs

    said, kw = fake([2.4, 1.6, 0.8])
    got = settle(said.append, below=1.0, timeout_s=600, **kw)
    assert got == {"waited_s": 60.0, "load": 0.8, "settled": True}
    assert said and "2.40" in said[0]  # the wait is shown, with the load it waits on

    said, kw = fake([3.0] * 10)
    got = settle(said.append, below=1.0, timeout_s=90, **kw)
    assert got == {"waited_s": 90.0, "load": 3.0, "settled": False}
    assert "measuring anyway" in said[-1]

    said, kw = fake([0.5])
    assert settle(said.append, **kw) == {"waited_s": 0.0, "load": 0.5, "settled": True}
    assert said == []
