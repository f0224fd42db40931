"""Keep the README's configuration table and `.env.example` in step with `Settings`.

`python -m worldmm.config_docs` rewrites both; a unit test fails when they drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import SecretStr

from worldmm.settings import ENV_PREFIX, Settings, settings_table

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def env_example() -> str:
    lines = [
        "# WorldMM Live settings (all optional; the defaults run everything embedded/offline).",
        "# Generated from worldmm/settings.py by `python -m worldmm.config_docs`.",
    ]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "" if default is None or isinstance(default, SecretStr) else str(default)
        lines += [f"# {field.description or ''}", f"#{ENV_PREFIX}{name.upper()}={shown}"]
    return "\n".join(lines) + "\n"


def readme_with_table(readme: str) -> str:
    head, sep, rest = readme.partition(START)
    if not sep or END not in rest:
        raise ValueError(f"README lacks the {START} ... {END} markers")
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


def main() -> int:
    readme = ROOT / "README.md"
    readme.write_text(readme_with_table(readme.read_text()))
    (ROOT / ".env.example").write_text(env_example())
    print("updated README.md configuration table and .env.example")
    return 0


if __name__ == "__main__":
    sys.exit(main())
