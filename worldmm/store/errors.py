"""Typed errors of the store layer."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of store errors."""


class NotFoundError(StoreError):
    """A referenced row does not exist for this user (or belongs to another user)."""


class AlreadyExistsError(StoreError):
    """A row that must be new already exists (e.g. creating a user twice)."""


class ConflictError(StoreError):
    """A write kept meeting concurrent changes of the same rows; retry later."""
