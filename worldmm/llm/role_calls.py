"""How each role's calls go out: the reasoning effort they ask for, the service tier, and
whether the Batch API carries them.

Construction roles extract and rewrite text into JSON: the lowest effort that keeps the JSON
valid is enough, and reasoning tokens are billed as output at eight times the input price.
The query roles (agent, answer, rerank) keep the model's own effort unless set. Roles that
can wait for their reply (merges, triples, consolidation) may go on a cheaper tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldmm.llm.prompts import ROLES

if TYPE_CHECKING:
    from worldmm.settings import Settings

QUERY_ROLES = frozenset({"reasoning_agent", "response", "cross_scale_rerank"})
NOT_SENT = "default"  # an effort setting that sends no reasoning_effort


@dataclass(frozen=True)
class RoleCall:
    effort: str | None = None  # reasoning_effort sent; None: not sent
    service_tier: str | None = None  # "flex", or None: the project's default tier
    batch: bool = False  # through the Batch API


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


def role_calls(settings: Settings) -> dict[str, RoleCall]:
    """Every role's :class:`RoleCall`; ValueError naming the setting when it names a role
    that does not exist, or defers a query role (a person is waiting for those)."""
    from worldmm.settings import parse_role_efforts

    efforts = parse_role_efforts(settings.llm_role_reasoning_effort)
    deferred = _names(settings.llm_deferred_roles)
    for name, roles in (
        ("WORLDMM_LLM_ROLE_REASONING_EFFORT", list(efforts)),
        ("WORLDMM_LLM_DEFERRED_ROLES", deferred),
    ):
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"{name}: no role named {unknown}; roles: {list(ROLES)}")
    if QUERY_ROLES & set(deferred):
        raise ValueError(
            f"WORLDMM_LLM_DEFERRED_ROLES: {sorted(QUERY_ROLES & set(deferred))} answer a "
            "person who is waiting and cannot be deferred"
        )
    tier = settings.llm_deferred_tier
    out = {}
    for role in ROLES:
        group = (
            settings.llm_agent_reasoning_effort
            if role in QUERY_ROLES
            else settings.llm_reasoning_effort
        )
        effort = efforts.get(role, group)
        waits = role in deferred
        out[role] = RoleCall(
            effort=None if effort == NOT_SENT else effort,
            service_tier="flex" if waits and tier == "flex" else None,
            batch=waits and tier == "batch",
        )
    return out
