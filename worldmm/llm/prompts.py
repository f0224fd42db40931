"""Prompt templates: plain text files in ``prompts/`` with strict ``{{variable}}``
substitution, the JSON schema of the reply beside each (generated from the wire models), and
a version (``<role>/v<version>-<hash of template and schema>``) stored with everything the
role produces, so an output can be traced to the exact prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from worldmm.llm.schemas import ROLE_REPLIES
from worldmm.providers.errors import PromptError

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
_VAR = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^\[(system|user)\]\s*$", re.MULTILINE)


def compact_schema(schema: str) -> str:
    """A reply schema as the prompt carries it: one line, without the ``title`` pydantic
    derives from each field's name. Every call pays for these tokens (about half of the
    indented file's), and a model reads the compact form as well."""

    def strip(node: object, field_names: bool = False) -> object:
        if isinstance(node, dict):
            return {
                k: strip(v, field_names=k in ("properties", "$defs") and not field_names)
                for k, v in node.items()
                if field_names or not (k == "title" and isinstance(v, str))
            }
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(json.loads(schema)), separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class RenderedPrompt:
    system: str
    user: str
    version: str


@dataclass(frozen=True)
class PromptTemplate:
    role: str
    system: str
    user: str
    schema: str
    version: str

    @property
    def variables(self) -> set[str]:
        return set(_VAR.findall(self.system)) | set(_VAR.findall(self.user))

    def render(self, **values: object) -> RenderedPrompt:
        """Substitute every ``{{var}}``; a missing or an unexpected variable is an error."""
        values = {**values, "response_schema": self.schema}
        needed = self.variables
        missing = needed - values.keys()
        extra = values.keys() - needed - {"response_schema"}
        if missing or extra:
            raise PromptError(
                f"prompt {self.role!r}: missing variables {sorted(missing)}, "
                f"unexpected {sorted(extra)}"
            )

        def sub(text: str) -> str:
            return _VAR.sub(lambda m: str(values[m.group(1)]), text)

        return RenderedPrompt(sub(self.system).strip(), sub(self.user).strip(), self.version)


def parse_template(role: str, text: str, schema: str) -> PromptTemplate:
    """A template from its file's text, laid out as::

    # version: 3
    # any comment lines
    [system]
    ...text...
    [user]
    ...text with {{variables}}...
    """
    header, _, _ = text.partition("[")
    m = re.search(r"^#\s*version:\s*(\d+)\s*$", header, re.MULTILINE)
    if not m:
        raise PromptError(f"prompt {role!r}: no '# version: N' header line")
    parts = _SECTION.split(text)
    # split gives [header, name, body, name, body, ...]
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if set(sections) != {"system", "user"}:
        raise PromptError(f"prompt {role!r}: needs exactly one [system] and one [user] section")
    sent = compact_schema(schema)
    # the digest covers what is sent: a change in how the schema is written is a new version
    digest = hashlib.sha256((text + sent).encode()).hexdigest()[:8]
    return PromptTemplate(
        role=role,
        system=sections["system"],
        user=sections["user"],
        schema=sent,
        version=f"{role}/v{m.group(1)}-{digest}",
    )


@cache
def load_prompt(role: str, prompts_dir: Path = PROMPTS_DIR) -> PromptTemplate:
    path = prompts_dir / f"{role}.txt"
    schema_path = prompts_dir / f"{role}.schema.json"
    if not path.is_file() or not schema_path.is_file():
        raise PromptError(f"prompt {role!r}: expected {path} and {schema_path}")
    return parse_template(role, path.read_text(encoding="utf-8"), schema_path.read_text("utf-8"))


def schema_text(role: str) -> str:
    """The JSON schema of a role's reply, as written beside its template."""
    return json.dumps(ROLE_REPLIES[role].model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(prompts_dir: Path = PROMPTS_DIR) -> list[Path]:
    """Regenerate ``<role>.schema.json`` from the wire models (a test checks they match)."""
    written = []
    for role in ROLE_REPLIES:
        path = prompts_dir / f"{role}.schema.json"
        path.write_text(schema_text(role), encoding="utf-8")
        written.append(path)
    return written


ROLES: tuple[str, ...] = tuple(ROLE_REPLIES)
