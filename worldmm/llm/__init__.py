"""The model layer: prompts, one LLM client (direct + batch), parsing, offline provider."""

from worldmm.llm.errors import ModelCallError, ParseError
from worldmm.llm.roles import ModelRoles, build_roles
from worldmm.llm.schemas import AgentAction, AgentRound, ConsolidationDecision, SemanticExtraction

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
