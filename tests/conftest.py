"""Shared fixtures: one embedded stack (Kafka broker, PostgreSQL+pgvector, Redis) per test
session, on free loopback ports, started here and stopped here by PID; the rest are the
plugins below (tests/fixtures), loaded here so that every test sees one copy of each.

Tests isolate by user id (every read is user-scoped) and by topic prefix, not by database.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from worldmm.settings import Settings, load_settings

pytest_plugins = [
    "tests.fixtures.api",
    "tests.fixtures.database",
    "tests.fixtures.deps",
    "tests.fixtures.fake_openai",
    "tests.fixtures.local_models",
    "tests.fixtures.random_model",
]

# Models load from wheels only; a hub lookup must fail fast rather than hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Most tests stream for users they never made through the API: let the flow create them
# (the default refuses them: tests of that set it false, tests/integration/ingest).
os.environ.setdefault("WORLDMM_INGEST_CREATE_USERS", "true")
# Anything that resolves the state dir without being given one (a CLI run, a bench's
# stack-or-start) must find an empty one, never the developer's running stack in ./.worldmm.
if "WORLDMM_STATE_DIR" not in os.environ:
    _STATE = tempfile.mkdtemp(prefix="worldmm-test-state-")
    os.environ["WORLDMM_STATE_DIR"] = _STATE
    atexit.register(shutil.rmtree, _STATE, True)


class TestStack:
    def __init__(self, state_dir: Path, urls) -> None:
        self.state_dir = state_dir
        self.kafka_brokers: str = urls.kafka_brokers
        self.database_url: str = urls.database_url
        self.redis_url: str = urls.redis_url


def _base_settings(state_dir: Path, **extra: object) -> Settings:
    # Face blurring costs ~0.3 s per frame on these 2 shared cores: off for the flow tests,
    # on in the tests of blurring itself (tests/integration/privacy, tests/unit/privacy).
    extra.setdefault("face_blur", False)
    # No /metrics server and no process-wide consumer-lag probe in flows built in-process:
    # the probe outlives the test's broker and logs "Connection refused" until pytest exits
    # (the metrics test runs a worker process with a port of its own).
    extra.setdefault("dataflow_metrics_port", 0)
    return load_settings(state_dir=state_dir, **extra)


# The Citus lane (`pytest -m on_citus --database citus`, run by `make test`): the tests of the
# memory's paths on a coordinator and two workers, where any statement that plans to more than
# one shard is an error unless the code marks it as spanning wearers (spans_wearers in
# worldmm/store/distribute.py).
CITUS_WORKERS = 2
CITUS_SHARDS = 8  # a few per node: enough to route, quick to create


# The memory's paths: the store's SQL, retrieval, the API (questions, forget, purge, export,
# keys, usage), construction and consolidation across processes, privacy, ingest end to end.
CITUS_PATHS = (
    "tests/integration/store/",
    "tests/integration/retrieval/",
    "tests/integration/query_api/",
    "tests/integration/memory/",
    "tests/integration/privacy/",
    "tests/e2e/test_ingest_e2e.py",
    "tests/integration/citus/",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if str(Path(str(item.path)).relative_to(root)).startswith(CITUS_PATHS):
            item.add_marker(pytest.mark.on_citus)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database",
        choices=("postgres", "citus"),
        default="postgres",
        help="the embedded database the tests run on: single-node PostgreSQL, or a Citus "
        "coordinator with two workers (built from the vendored source when missing)",
    )


def _start_database(stack_mod, settings: Settings, kind: str):
    from worldmm.store.migrate import apply_migrations

    if kind == "postgres":
        urls = stack_mod.up(settings)
        apply_migrations(urls.database_url, settings)
        return urls
    import psycopg

    from deploy.stack import citus

    citus.build()  # a failed build fails the lane loudly, with what is missing
    urls = stack_mod.up(settings, citus_workers=CITUS_WORKERS)
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE worldmm SET citus.shard_count = {CITUS_SHARDS}")
    apply_migrations(urls.database_url, settings)
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute("ALTER DATABASE worldmm SET citus.multi_task_query_log_level = 'error'")
    return urls


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[TestStack]:
    from deploy import stack as stack_mod

    # Not pytest's tmp dir: PostgreSQL runs as another OS user and needs to enter it.
    state_dir = Path(tempfile.mkdtemp(prefix="worldmm-test-stack-"))
    state_dir.chmod(0o755)
    settings = _base_settings(state_dir)
    try:
        urls = _start_database(stack_mod, settings, request.config.getoption("--database"))
        yield TestStack(state_dir, urls)
    finally:
        stack_mod.down(settings)
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def settings(stack: TestStack, tmp_path: Path) -> Settings:
    return _base_settings(
        tmp_path / "state",
        kafka_brokers=stack.kafka_brokers,
        database_url=stack.database_url,
        redis_url=stack.redis_url,
        blob_dir=tmp_path / "blobs",
        topic_prefix=f"t{uuid.uuid4().hex[:10]}.",
    )


@pytest.fixture
def user_id() -> str:
    return f"user-{uuid.uuid4().hex[:12]}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "on_citus: also runs in the Citus lane (pytest -m on_citus --database citus)"
    )
    config.addinivalue_line(
        "markers", "served_settings(**values): settings of the module's own API (served)"
    )
    config.addinivalue_line(
        "markers", "deps(**parts_and_settings): the parts and settings of the deps fixture"
    )
