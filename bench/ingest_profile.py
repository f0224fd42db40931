"""Where the ingest worker's CPU goes (``worldmm bench ingest --profile``): py-spy samples
of the worker's Python threads (not librdkafka's native ones, like ``cpu_ms_per_window``), idle
threads left out, each charged to the innermost frame of a known part (:data:`PARTS`).
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from bench.child import Child
from bench.harness import words

# Part -> path fragments of its code. Order matters only between fragments that could both
# match one frame; the leaf-most matching frame decides.
PARTS = {
    "decode": words("connectors/codec.py"),
    "blob writes": words("worldmm/blobs.py, worldmm/media/"),
    "window state": words("worldmm/memory/windows.py, apps/dataflows/window_step.py"),
    "store writes": words("worldmm/store/, psycopg/, psycopg_pool/, psycopg_binary/"),
    "cache calls": words("worldmm/graph/cache, redis/"),
    "construction": words(
        "worldmm/memory/, apps/dataflows/construct_step.py, bench/ingest_sim.py, worldmm/llm/"
    ),
    "asyncio loop": words("asyncio/"),
    "flow glue": words(
        "apps/dataflows/ingest.py, apps/dataflows/metrics.py, bench/ingest_worker.py"
    ),
    "metrics": words("prometheus_client/"),
    "Kafka input (Python side)": words(
        "confluent_kafka/, bytewax/connectors/kafka, apps/dataflows/kafka_source.py,"
        " apps/dataflows/input_gaps.py"
    ),
    "Bytewax": words("bytewax/"),
}
# Leaf frames that are a thread blocked, not running: py-spy's idle detection misses some
# under --nonblocking (a pool worker waiting for a task, a caller waiting for a connection).
WAITS = words(
    "Condition.wait (, _worker (, Event.wait (, EpollSelector.select (, Connection.wait (,"
    " Queue.get (, SimpleQueue.get ("
)
WAITING = "waiting (not CPU)"


def part_of(stack: list[str]) -> str:
    """The part a sampled stack (root first, ``func (file:line)`` frames) is charged to."""
    if stack and stack[-1].startswith(WAITS):
        return WAITING
    if stack and stack[-1].startswith("main (") and "bench/ingest_worker.py" in stack[-1]:
        return "Bytewax"  # the Rust runtime, inside run_main(), between Python callbacks
    for frame in reversed(stack):
        for part, fragments in PARTS.items():
            if any(f in frame for f in fragments):
                return part
    return "other"


def _samples(lines: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """(stack, count) of each line of py-spy's ``raw`` (folded) output: ``f1;f2;...;fn count``."""
    for line in lines:
        stack, _, count = line.strip().rpartition(" ")
        if count.isdigit():
            yield stack.split(";"), int(count)


def fold(lines: Iterable[str]) -> Counter[str]:
    """Samples per part."""
    out: Counter[str] = Counter()
    for stack, count in _samples(lines):
        out[part_of(stack)] += count
    return out


def top_frames(lines: Iterable[str], n: int = 15) -> list[tuple[str, int]]:
    """The leaf frames with the most samples (what to look at inside a part)."""
    leaves: Counter[str] = Counter()
    for stack, count in _samples(lines):
        if stack[-1]:  # a sample with no frames has no leaf
            leaves[stack[-1]] += count
    return leaves.most_common(n)


def breakdown(samples: Counter[str], cpu_ms_per_window: float | None) -> dict[str, dict]:
    """Each part's share of the busy samples and, scaled to the measured CPU, its ms per
    window; waits are listed with their count only."""
    total = sum(n for part, n in samples.items() if part != WAITING)
    out: dict[str, dict] = {}
    for part, n in samples.most_common():
        if part == WAITING:
            continue
        share = n / total if total else 0.0
        ms = None if cpu_ms_per_window is None else round(share * cpu_ms_per_window, 2)
        out[part] = {"samples": n, "share": round(share, 4), "ms_per_window": ms}
    if samples.get(WAITING):
        out[WAITING] = {"samples": samples[WAITING], "share": None, "ms_per_window": None}
    return out


class Sampler:
    """``py-spy record`` attached to a running process until :meth:`stop`."""

    def __init__(self, pid: int, out: Path, rate: int = 97) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(exe).exists():
            raise RuntimeError("--profile needs py-spy (pip install py-spy==0.4.3)")
        self.out = out
        cmd = [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate)]
        cmd += ["--nonblocking", "--full-filenames", "--output", str(out)]
        self.child = Child("py-spy", cmd, out.with_suffix(".log")).start()

    def stop(self) -> list[str]:
        """Stop sampling (py-spy writes its file on SIGINT); the folded lines."""
        self.child.stop(timeout_s=30)
        return self.out.read_text().splitlines() if self.out.exists() else []
