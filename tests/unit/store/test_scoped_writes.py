"""Every UPDATE and DELETE the code sends carries the user in its WHERE clause, so an id
alone (from a request, a replay, a bug) can never reach another user's row. Read from the
source: a new statement without it fails here before it runs anywhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("worldmm", "connectors", "dataflows", "gpu_worker", "query_api", "apps")
WRITE = re.compile(r"^\s*(UPDATE|DELETE FROM) +(\S+)( +\w+)? +(SET|WHERE)\b")  # SQL is upper case
UNSCOPED_TABLES = {"users"}  # its id is the user


def _sql_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants and the literal parts of f-strings (placeholders as {})."""
    out = []
    inside_fstrings = {
        id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
    }
    for node in ast.walk(tree):
        if id(node) in inside_fstrings:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            out.append((node.lineno, "".join(parts)))
    return out


def scoped_write_violations(source: str) -> list[str]:
    found = []
    for line, text in _sql_texts(ast.parse(source)):
        m = WRITE.match(text)
        if m is None or m.group(2).strip('"').lower() in UNSCOPED_TABLES:
            continue
        where = re.split(r"\bWHERE\b", text, maxsplit=1, flags=re.IGNORECASE)
        if len(where) < 2 or "user_id" not in where[1]:
            found.append(f"line {line}: {' '.join(text.split())[:120]}")
    return found


def test_the_checker_finds_an_unscoped_write() -> None:
    bad = 'conn.execute("UPDATE segments SET caption = %s WHERE id = %s", (c, i))'
    good = 'conn.execute("UPDATE segments SET caption = %s" " WHERE user_id = %s AND id = %s")'
    fstring = 'conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (ids,))'
    assert scoped_write_violations(bad) and scoped_write_violations(fstring)
    assert scoped_write_violations(good) == []
    assert scoped_write_violations('x = "DELETE FROM users WHERE id = %s"') == []


def test_every_update_and_delete_names_the_user() -> None:
    problems = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for where in scoped_write_violations(path.read_text()):
                problems.append(f"{path.relative_to(REPO)} {where}")
    assert problems == [], "writes without user_id in their WHERE:\n" + "\n".join(problems)
