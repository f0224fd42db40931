"""Typed failures of the model layer; callers decide what a failure means for their step."""

from __future__ import annotations


class ModelCallError(Exception):
    """A model call failed after all retries (network, HTTP status, timeout, batch failure)."""

    def __init__(self, message: str, *, role: str | None = None, status: int | None = None):
        super().__init__(message)
        self.role = role
        self.status = status


class ParseError(ModelCallError):
    """The model answered, but not in the expected shape, even after one repair retry.

    ``raw`` keeps the last reply so the failure can be recorded and inspected.
    """

    def __init__(self, message: str, *, role: str | None = None, raw: str = ""):
        super().__init__(message, role=role)
        self.raw = raw


class PromptError(ValueError):
    """A prompt template is malformed, or a variable is missing or unexpected."""
