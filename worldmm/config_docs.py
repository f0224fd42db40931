"""Keep the settings docs in step with `Settings`: every setting, group by group, in
docs/settings.md; the ones a production deployment must set in the README; `.env.example`
and `deploy/production.env.example`.

`python -m worldmm.config_docs` rewrites all four; a unit test fails when they drift.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from worldmm.settings import GROUPS, env_names, must_set, production_example

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- settings:start -->", "<!-- settings:end -->"
MUST = "must set in production"


def _default(field: FieldInfo) -> str:
    default = field.default
    return "" if default is None or isinstance(default, SecretStr) else str(default)


def _old_names(name: str, field: FieldInfo) -> list[str]:
    return env_names(field, name)[1:]


def _meaning(name: str, field: FieldInfo) -> str:
    text = field.description or ""
    if must_set(field):
        text = f"**{MUST[0].upper()}{MUST[1:]}.** {text}"
    old = _old_names(name, field)
    if old:
        text += f" {_older(old)}: " + ", ".join(f"`{n}`" for n in old) + "."
    return text


def _older(names: list[str]) -> str:
    return "Older names still read" if len(names) > 1 else "Older name still read"


def settings_tables() -> str:
    """Every setting: one table per group."""
    parts = [
        f"Settings marked **{MUST}** are the ones a production deployment sets (with example "
        "values in `deploy/production.env.example`); every other one has a default that works."
    ]
    for group in GROUPS:
        rows = ["| variable | default | meaning |", "|---|---|---|"]
        for name, field in group.model_fields.items():
            var = env_names(field, name)[0]
            rows.append(f"| `{var}` | `{_default(field)}` | {_meaning(name, field)} |")
        parts += [f"### {group.title}", _doc_line(group), "\n".join(rows)]
    return "\n\n".join(parts)


SETTINGS_PAGE_HEAD = """# Settings

Every setting is an environment variable (prefix `WORLDMM_`), validated at start-up: an invalid
value stops the command with a message naming the variable. They come in groups, one class
each in `worldmm/settings.py`; `.env.example` lists them all at their defaults,
`deploy/production.env.example` the ones a production deployment sets. This page and both
files are generated from `worldmm/settings.py` (`python -m worldmm.config_docs`; a test fails
when they are stale).
"""


def settings_page() -> str:
    """docs/settings.md: every setting, group by group."""
    return f"{SETTINGS_PAGE_HEAD}\n{settings_tables()}\n"


def must_set_table() -> str:
    """The README's settings: those a production deployment must set, with an example."""
    rows = ["| variable | example | meaning |", "|---|---|---|"]
    for group in GROUPS:
        for name, field in group.model_fields.items():
            if must_set(field):
                var, example = env_names(field, name)[0], production_example(field)
                rows.append(f"| `{var}` | `{example}` | {field.description or ''} |")
    return "\n".join(rows)


def _doc_line(group: type) -> str:
    return " ".join((group.__doc__ or "").split())


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, width=98, initial_indent="# ", subsequent_indent="# ")


def _group_header(group: type) -> list[str]:
    return [
        "",
        f"# --- {group.title} " + "-" * max(3, 90 - len(group.title)),
        *_comment(_doc_line(group)),
    ]


def env_example() -> str:
    """Every setting, grouped, commented out at its default."""
    lines = [
        "# WorldMM Live settings (all optional; the defaults run everything embedded/offline).",
        "# Generated from worldmm/settings.py by `python -m worldmm.config_docs`.",
        f'# "{MUST}" marks what a production deployment sets: deploy/production.env.example.',
    ]
    for group in GROUPS:
        lines += _group_header(group)
        for name, field in group.model_fields.items():
            names = env_names(field, name)
            note = f" ({MUST})" if must_set(field) else ""
            lines += _comment(f"{field.description or ''}{note}")
            if names[1:]:
                lines += _comment(f"{_older(names[1:])}: " + ", ".join(names[1:]) + ".")
            lines.append(f"#{names[0]}={_default(field)}")
    return "\n".join(lines) + "\n"


def production_env_example() -> str:
    """The settings a production deployment sets, with example values, grouped."""
    lines = _comment(
        "Production: the settings a deployment sets, with example values; every other setting "
        "keeps its default (.env.example lists them all). With the service URLs set, nothing "
        "is started locally. Generated from worldmm/settings.py by `python -m "
        f'worldmm.config_docs`; "{MUST}" marks what production cannot do without.'
    )
    for group in GROUPS:
        fields = [
            (name, field)
            for name, field in group.model_fields.items()
            if production_example(field) is not None
        ]
        if not fields:
            continue
        lines += _group_header(group)
        for name, field in fields:
            note = f" ({MUST})" if must_set(field) else ""
            lines += _comment(f"{field.description or ''}{note}")
            lines.append(f"{env_names(field, name)[0]}={production_example(field)}")
    return "\n".join(lines) + "\n"


def readme_with_tables(readme: str) -> str:
    head, sep, rest = readme.partition(START)
    if not sep or END not in rest:
        raise ValueError(f"README lacks the {START} ... {END} markers")
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{must_set_table()}\n{END}{tail}"


# Each generated file and how to make it from its current text.
GENERATED = {
    "README.md": readme_with_tables,
    "docs/settings.md": lambda _: settings_page(),
    ".env.example": lambda _: env_example(),
    "deploy/production.env.example": lambda _: production_env_example(),
}


def main() -> int:
    for relative, make in GENERATED.items():
        path = ROOT / relative
        path.write_text(make(path.read_text() if path.exists() else ""))
    print("updated " + ", ".join(GENERATED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
