"""What every benchmark's command line does around its measurement: timestamped progress on
stderr, and the JSON report (with the command that produced it and its wall time) written to
``--out`` and printed."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Echo = Callable[[str], None]


def stamped_echo(t0: float) -> Echo:
    """Progress lines on stderr, prefixed with the seconds since ``t0`` (perf_counter)."""

    def echo(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    return echo


def write_report(
    result: dict[str, Any], module: str, argv: Sequence[str] | None, t0: float, out: Path
) -> str:
    """Stamp ``result`` with its command and wall time, write it to ``out``, print it."""
    result["command"] = f"python -m {module} " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(result, indent=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(text)
    return text
