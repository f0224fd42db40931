"""Helpers shared by the CLI modules: settings loading with a clean exit on bad config."""

from __future__ import annotations

import sys

from worldmm.settings import Settings, SettingsError, load_settings


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
