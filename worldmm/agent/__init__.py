"""The retrieval agent (adaptive multi-round search), the response step and multiple choice."""

from worldmm.agent.choices import ChoiceAnswer, answer_choices
from worldmm.agent.loop import answer_question, run_agent
from worldmm.agent.result import AgentResult, RoundRecord

__all__ = [
    "AgentResult",
    "ChoiceAnswer",
    "RoundRecord",
    "answer_choices",
    "answer_question",
    "run_agent",
]
