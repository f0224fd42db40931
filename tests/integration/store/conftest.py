"""Store fixtures: a pool on the session stack's (migrated) database, embedding helpers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from worldmm.store import triples
from worldmm.store.db import Database
from worldmm.store.models import TripleWrite
from worldmm.store.users import ensure_user

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
DIM = 384  # text embeddings


@pytest.fixture(scope="session")
def database(stack) -> Iterator[Database]:
    db = Database(stack.database_url, min_size=1, max_size=4)
    yield db
    db.close()


@pytest.fixture
def conn(database: Database, user_id: str) -> Iterator[psycopg.Connection]:
    """A pooled connection with the test's user created; committed at the end."""
    with database.connection() as c:
        ensure_user(c, user_id)
        c.commit()
        yield c


@pytest.fixture
def other_user(conn: psycopg.Connection) -> str:
    uid = f"user-{uuid.uuid4().hex[:12]}"
    ensure_user(conn, uid)
    return uid


@pytest.fixture
def fresh_database_url(stack) -> Iterator[Callable[[], str]]:
    """Factory of new empty databases on the stack's server (dropped afterwards)."""
    created: list[str] = []

    def make() -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(stack.database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return make_conninfo(stack.database_url, dbname=name)

    yield make
    with psycopg.connect(stack.database_url, autocommit=True) as admin:
        for name in created:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def unit_vector(dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """A vector close to v (cosine drops as noise grows)."""
    w = v + noise * unit_vector(v.shape[0], seed)
    return (w / np.linalg.norm(w)).astype(np.float32)


def triple(subject_id: int, predicate: str, seed: int, **fields: object) -> TripleWrite:
    """A triple of ``subject_id`` embedded as ``unit_vector(DIM, seed)``; ``fields``: its
    object (``object_literal`` or ``object_entity_id``) and the rest."""
    return TripleWrite(
        subject_entity_id=subject_id,
        predicate=predicate,
        embedding=unit_vector(DIM, seed),
        **fields,
    )


def insert_one(
    conn: psycopg.Connection, user_id: str, segment_id: int, memory_type: str, row: TripleWrite
) -> int:
    """Insert one triple; its id."""
    (triple_id,) = triples.insert_triples(conn, user_id, segment_id, memory_type, [row])
    return triple_id
