"""The retrieval agent (adaptive multi-round search) and the response step."""

from worldmm.agent.loop import answer_question, render_context, run_agent
from worldmm.agent.result import AgentResult, Evidence, RoundRecord

__all__ = [
    "AgentResult",
    "Evidence",
    "RoundRecord",
    "answer_question",
    "render_context",
    "run_agent",
]
