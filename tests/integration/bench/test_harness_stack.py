"""The harness's stack-or-start: configured services are used as they are, running embedded
servers are used and left running, missing ones are started and only those are stopped
after. The starter is a fake standing in for `deploy.stack` (no server is started); the
database it hands out is the test stack's, so the migrations really run."""

from __future__ import annotations

import pytest

from bench.harness import stack_or_start
from deploy.stack import StackError, StackUrls

pytestmark = pytest.mark.integration


class FakeStack:
    """`deploy.stack`'s resolvers, up and down over a set of running embedded servers."""

    StackError = StackError

    def __init__(self, urls: dict[str, str], running: set[str]) -> None:
        self.urls, self.running = urls, set(running)
        self.started: list[str] = []
        self.stopped: list[str] = []

    def _embedded(self, name: str) -> str:
        if name not in self.running:
            raise StackError(f"{name} is not running")
        return self.urls[name]

    def kafka_brokers(self, settings) -> str:
        return settings.kafka_brokers or self._embedded("kafka")

    def database_url(self, settings) -> str:
        return settings.database_url or self._embedded("postgres")

    def redis_url(self, settings) -> str:
        return settings.redis_url or self._embedded("redis")

    def up(self, settings) -> StackUrls:
        fresh = [n for n in ("kafka", "postgres", "redis") if n not in self.running]
        self.running |= set(fresh)
        self.started += fresh
        return StackUrls(
            kafka_brokers=self.urls["kafka"], database_url=self.urls["postgres"],
            redis_url=self.urls["redis"], started=fresh,
        )  # fmt: skip

    def down(self, settings, only) -> None:
        self.stopped += list(only)
        self.running -= set(only)


@pytest.fixture
def urls(stack) -> dict[str, str]:
    return {"kafka": stack.kafka_brokers, "postgres": stack.database_url, "redis": stack.redis_url}


def test_configured_services_are_used_and_nothing_is_started(settings, urls) -> None:
    fake = FakeStack(urls, running=set())
    with stack_or_start(settings, print, stack=fake) as resolved:
        assert resolved.database_url == settings.database_url
    assert fake.started == fake.stopped == []


def test_only_the_servers_it_started_are_stopped(settings, urls) -> None:
    bare = settings.model_copy(
        update={"database_url": None, "redis_url": None, "kafka_brokers": None}
    )
    fake = FakeStack(urls, running={"kafka"})  # someone's broker, already up
    with stack_or_start(bare, print, stack=fake) as resolved:
        assert fake.started == ["postgres", "redis"]
        assert (resolved.database_url, resolved.redis_url) == (urls["postgres"], urls["redis"])
        assert resolved.kafka_brokers == urls["kafka"]
    assert fake.stopped == ["postgres", "redis"] and fake.running == {"kafka"}


def test_a_failed_run_still_stops_what_it_started_and_keep_leaves_it(settings, urls) -> None:
    bare = settings.model_copy(update={"database_url": None, "redis_url": None})
    fake = FakeStack(urls, running={"kafka"})
    with pytest.raises(RuntimeError, match="boom"), stack_or_start(bare, print, stack=fake):
        raise RuntimeError("boom")
    assert fake.stopped == ["postgres", "redis"]

    fake = FakeStack(urls, running={"kafka"})
    with stack_or_start(bare, print, keep=True, stack=fake):
        pass
    assert fake.started == ["postgres", "redis"] and fake.stopped == []


def test_running_embedded_servers_are_used_and_left_running(settings, urls) -> None:
    bare = settings.model_copy(update={"database_url": None, "redis_url": None})
    fake = FakeStack(urls, running={"kafka", "postgres", "redis"})
    with stack_or_start(bare, print, need=("postgres", "redis"), stack=fake) as resolved:
        assert resolved.database_url == urls["postgres"]
    assert fake.started == fake.stopped == [] and fake.running == {"kafka", "postgres", "redis"}


def test_up_says_what_it_started_and_down_stops_only_those(stack) -> None:
    """The real `deploy.stack` the harness relies on: ``up().started`` and ``down(only=)``."""
    import shutil
    import tempfile
    from pathlib import Path

    from deploy import stack as embedded
    from deploy.stack import redis_server
    from deploy.stack.process import pid_alive, read_pid
    from worldmm.settings import load_settings

    state = Path(tempfile.mkdtemp(prefix="worldmm-test-started-"))
    configured = load_settings(
        state_dir=state, kafka_brokers=stack.kafka_brokers, database_url=stack.database_url,
        redis_url=None,
    )  # fmt: skip
    try:
        assert embedded.up(configured).started == ["redis"]  # the others are configured
        pid = read_pid(state / "redis" / "redis.pid")
        assert embedded.up(configured).started == []  # found running
        assert embedded.down(configured, only=[])["redis"] is False
        assert pid_alive(pid, redis_server.MARKER)
        assert embedded.down(configured, only=["redis"])["redis"] is True
        assert not pid_alive(pid, redis_server.MARKER)
        assert not (state / "stack.json").exists()
    finally:
        embedded.down(configured)
        shutil.rmtree(state, ignore_errors=True)
