"""Fixtures of the retrieval tests: a connection pool to the test database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worldmm.settings import Settings
from worldmm.store.db import Database


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    database = Database(settings.database_url, max_size=6)
    yield database
    database.close()
