"""The model layer: prompts, one LLM client (direct + batch), parsing, the rule-based roles."""

from worldmm.llm.roles import ModelRoles, build_roles
from worldmm.llm.schemas import AgentAction, AgentRound, ConsolidationDecision, SemanticExtraction
from worldmm.providers.errors import ModelCallError, ParseError

__all__ = [
    "AgentAction",
    "AgentRound",
    "ConsolidationDecision",
    "ModelCallError",
    "ModelRoles",
    "ParseError",
    "SemanticExtraction",
    "build_roles",
]
