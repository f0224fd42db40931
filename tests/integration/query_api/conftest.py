"""One service (models loaded once) over the session's embedded stack; users per test."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from query_api.app import create_app
from tests.integration.served_api import ADMIN_KEY, api_settings_for
from worldmm.deps import Deps, build_deps
from worldmm.settings import Settings


@pytest.fixture(scope="session")
def api_settings(stack, tmp_path_factory) -> Settings:
    return api_settings_for(stack, tmp_path_factory.mktemp("query-api"))


@pytest.fixture(scope="session")
def api_deps(api_settings) -> Iterator[Deps]:
    deps = build_deps(api_settings, role="api")
    yield deps
    deps.close()


@pytest.fixture(scope="session")
def client(api_settings, api_deps) -> Iterator[TestClient]:
    with TestClient(create_app(api_settings, deps=api_deps)) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ADMIN = auth(ADMIN_KEY)


@dataclasses.dataclass
class ApiUser:
    user_id: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return auth(self.key)


@pytest.fixture
def make_user(client):
    def make() -> ApiUser:
        user_id = f"user-{uuid.uuid4().hex[:12]}"
        r = client.post("/v1/users", json={"user_id": user_id}, headers=ADMIN)
        assert r.status_code == 201, r.text
        return ApiUser(user_id, r.json()["api_key"])

    return make
