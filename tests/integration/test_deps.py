"""The one dependency bundle: ingest and the API meet the same services, named by settings
alone; the embedded stack's URLs are filled in by the programs that run beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.stack import StackError, with_stack_urls
from tests.fixtures.fake_models import HashEmbedder, ScriptedRoles
from worldmm.deps import build_deps, pool_size
from worldmm.graph.cache import GraphCache
from worldmm.settings import SettingsError, load_settings

pytestmark = pytest.mark.integration


def _embedded_settings(stack, tmp_path: Path, **extra):
    """Settings that name no service: everything comes from the embedded stack's state."""
    named = {"database_url": None, "redis_url": None, "kafka_brokers": None, **extra}
    return load_settings(
        state_dir=stack.state_dir, blob_dir=tmp_path / "blobs", asr_backend="none", **named
    )


def _build(settings, role):
    return build_deps(settings, role=role, roles=ScriptedRoles(), embedder=HashEmbedder())


def test_ingest_and_the_api_resolve_the_embedded_database_alike(stack, tmp_path):
    settings = with_stack_urls(_embedded_settings(stack, tmp_path, in_flight_start=40))
    ingest, api = _build(settings, "ingest"), _build(settings, "api")
    try:
        assert ingest.db.database_url == api.db.database_url == stack.database_url
        # the API reads graphs through the embedded Redis; ingest writes none and needs none
        assert isinstance(api.cache, GraphCache) and api.redis is not None
        assert api.redis.ping()
        assert ingest.redis is None and not isinstance(ingest.cache, GraphCache)
        # the role sizes the pool: ingest by the windows in flight, the API small
        assert ingest.db.pool.max_size == pool_size(40) == 20
        assert api.db.pool.max_size == 8
    finally:
        ingest.close()
        api.close()


def test_redis_none_turns_the_cache_off_for_every_role(stack, tmp_path):
    settings = with_stack_urls(_embedded_settings(stack, tmp_path, redis_url="none"))
    assert settings.redis_url == "none"  # a disabled Redis is not filled in
    for role in ("ingest", "api"):
        deps = _build(settings, role)
        try:
            assert deps.redis is None and not isinstance(deps.cache, GraphCache)
        finally:
            deps.close()


def test_a_service_neither_configured_nor_running_is_named(stack, tmp_path):
    settings = load_settings(
        state_dir=tmp_path / "no-stack", database_url=stack.database_url, redis_url=None
    )
    with pytest.raises(StackError, match="WORLDMM_REDIS_URL"):
        with_stack_urls(settings, "postgres", "redis")
    assert with_stack_urls(settings, "postgres") == settings


def test_the_services_read_their_urls_from_settings_alone(stack, tmp_path):
    """The embedded stack runs, but a bundle built from settings that name no database does
    not go looking for it: production never depends on the dev stack's state."""
    with pytest.raises(SettingsError, match="WORLDMM_DATABASE_URL"):
        _build(_embedded_settings(stack, tmp_path), "ingest")
    api = _build(_embedded_settings(stack, tmp_path, database_url=stack.database_url), "api")
    try:  # no Redis named: graphs come from the database
        assert api.redis is None and not isinstance(api.cache, GraphCache)
    finally:
        api.close()
