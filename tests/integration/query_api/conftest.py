"""One service (models loaded once) over the session's embedded stack; users per test."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from apps.query_api.app import create_app
from worldmm.deps import Deps, build_deps
from worldmm.settings import Settings, load_settings
from worldmm.store import entities as entity_store
from worldmm.store import segments as segment_store
from worldmm.store import triples as triple_store
from worldmm.store.models import SegmentWrite, TripleWrite

ADMIN_KEY = "admin-" + uuid.uuid4().hex


@pytest.fixture(scope="session")
def api_settings(stack, tmp_path_factory) -> Settings:
    root: Path = tmp_path_factory.mktemp("query-api")
    return load_settings(
        state_dir=root / "state",
        blob_dir=root / "blobs",
        kafka_brokers=stack.kafka_brokers,
        database_url=stack.database_url,
        redis_url=stack.redis_url,
        admin_api_key=ADMIN_KEY,
        llm_provider="offline",
        embed_backend="local",
    )


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


def seed_segment(
    deps: Deps,
    user_id: str,
    start: datetime,
    end: datetime,
    caption: str,
    triples: list[tuple[str, str, str]],
    *,
    scale: int = 30,
) -> int:
    """A complete segment with its entities and episodic triples, written through the store
    (no ingest dataflow)."""
    names = sorted({t[0] for t in triples} | {t[2] for t in triples})
    name_vecs = dict(zip(names, deps.embedder.embed(names), strict=True)) if names else {}
    triple_vecs = deps.embedder.embed([" ".join(t) for t in triples]) if triples else []
    with deps.db.transaction() as conn:
        segment_id = segment_store.upsert_segment(
            conn,
            SegmentWrite(
                user_id=user_id,
                scale_seconds=scale,
                window_start=start,
                window_end=end,
                caption=caption,
                processing_status="complete",
            ),
        )
        ids = {
            n: entity_store.insert_canonical_entity(conn, user_id, n, name_vecs[n]).id
            for n in names
        }
        rows = [
            TripleWrite(
                subject_entity_id=ids[s],
                predicate=p,
                object_entity_id=ids[o],
                embedding=np.asarray(v),
            )
            for (s, p, o), v in zip(triples, triple_vecs, strict=True)
        ]
        triple_store.insert_triples(conn, user_id, segment_id, "episodic", rows)
    return segment_id
