"""`python -m bench.egolife ...`: the same command as `worldmm bench egolife ...`."""

from __future__ import annotations

import typer

from bench.cli.egolife import egolife


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(egolife)
    app()


if __name__ == "__main__":
    main()
