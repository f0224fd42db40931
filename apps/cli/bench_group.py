"""``worldmm bench``: the benchmarks of a checkout, added to the CLI when they are there.

``bench/`` is not shipped in the wheel. In a checkout (an editable install, as ``make
setup`` makes) it sits beside ``apps/``; an installed wheel gets a command that says where
the benchmarks are instead of an import error.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import typer

import apps


def checkout_root() -> Path | None:
    """The checkout holding ``bench/``, or None for an installed wheel."""
    root = Path(apps.__file__).resolve().parents[1]
    return root if (root / "bench" / "cli" / "__init__.py").is_file() else None


def register(app: typer.Typer) -> None:
    if importlib.util.find_spec("bench") is None:
        root = checkout_root()
        if root is not None:
            sys.path.append(str(root))
    try:
        from bench.cli import register as register_bench
    except ModuleNotFoundError:

        @app.command("bench", context_settings={"allow_extra_args": True})
        def bench() -> None:
            """Benchmarks (in a checkout of the project only)."""
            print(
                "error: the benchmarks are not part of the installed package; run them from "
                "a checkout of the project (`make setup`, then `worldmm bench ...`)",
                file=sys.stderr,
            )
            raise SystemExit(2)

        return
    register_bench(app)
