"""One API on a real socket and one headless Chromium (Debian's, launched by path) per
module: the browser tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.served_api import Served, serve_api

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def served(stack, tmp_path_factory) -> Iterator[Served]:
    with serve_api(stack, tmp_path_factory.mktemp("ui-api")) as api:
        yield api


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (`make setup` installs it; `playwright install` cannot download).
    Playwright gives each launch a fresh profile dir; each test opens its own context."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `make setup` (apt chromium)"
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
