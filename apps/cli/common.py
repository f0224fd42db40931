"""Helpers shared by the CLI modules: settings loading with a clean exit on bad config (and
the embedded stack's URLs where none are configured), and time options."""

from __future__ import annotations

import sys
from datetime import datetime

import typer

from worldmm.settings import Settings, SettingsError, load_settings


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def service_settings(*services: str) -> Settings:
    """Settings with the named services' URLs (``kafka``, ``postgres``, ``redis``; all by
    default) filled from the running embedded stack where not configured; exits 2 naming
    what is missing. The services themselves read URLs from settings only."""
    from deploy.stack import StackError, with_stack_urls

    try:
        return with_stack_urls(settings_or_exit(), *services)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 time option with its zone (None when not given); BadParameter otherwise."""
    if value is None:
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from None
    if ts.tzinfo is None:
        raise typer.BadParameter(
            "needs a timezone, e.g. 2026-03-01T09:00:00Z or +01:00", param_hint=option
        )
    return ts
