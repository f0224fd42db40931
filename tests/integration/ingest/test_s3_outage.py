"""An S3 outage in the middle of a stream (issue 24, part 2): the windows whose container
cannot be stored are ``failed`` with reason ``store_failed`` and go to the DLQ, the flow goes
on with the next windows, and ``worldmm retrigger`` stores and builds them once S3 is back,
from the captures kept in the spool. Against a real S3-protocol server (moto) on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.fixtures.ingest_runs import fed_settings, session_frames
from tests.fixtures.processes import set_env
from tests.fixtures.s3 import S3Server, s3_server
from tests.fixtures.store_reads import segment_states

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


def test_s3_outage_mid_stream_goes_to_the_dlq_and_retrigger_rebuilds(
    settings, user_id, tmp_path, monkeypatch, s3: S3Server
) -> None:
    import psycopg
    from bytewax.testing import run_main

    from connectors import kafka_io
    from connectors.dlq import parse_dlq_record
    from connectors.topics import topic_names
    from dataflows.ingest import build_flow
    from worldmm.blobs import S3BlobStore
    from worldmm.deps import build_deps
    from worldmm.media.window import read_capture
    from worldmm.store.frames import MediaRef

    bucket = s3.bucket("worldmm-outage")
    frames_dir = session_frames(tmp_path / "session", 2)
    jpegs = {p.read_bytes() for p in frames_dir.iterdir()}
    settings = fed_settings(
        settings,
        [user_id],
        frames_dir,
        blob_s3_uri=f"s3://{bucket}/blobs",
        blob_s3_endpoint_url=s3.url,
    )

    class OutageMidStream(S3BlobStore):
        """S3 hangs from the second window's container to the third's (the timing is the
        test's; the failures are the real client's against a frozen server)."""

        containers = 0

        def put(self, key: str, data: bytes) -> bool:
            if not key.startswith("media/"):
                return super().put(key, data)
            OutageMidStream.containers += 1
            n = OutageMidStream.containers
            if n == 2:
                s3.freeze()
            try:
                return super().put(key, data)
            finally:
                if n == 3:
                    s3.thaw()

    def deps_factory(s):
        deps = build_deps(s, role="ingest")
        deps.blobs = OutageMidStream(bucket, "blobs", client=s3.client())
        return deps

    run_main(build_flow(settings, tail=False, deps_factory=deps_factory))

    bases = {k: v for k, v in segment_states(settings.database_url, user_id).items() if k[0] == 30}
    assert len(bases) == 4
    failed = sorted(k[1] for k, (status, _e) in bases.items() if status == "failed")
    assert len(failed) == 2, bases  # the flow went on: the others are complete
    assert all(bases[(30, t)][1].startswith("store_failed") for t in failed)
    dlq = kafka_io.consume_all(settings.kafka_brokers, topic_names(settings)["dlq"])
    entries = [parse_dlq_record(r.key, r.value, r.headers) for r in dlq]
    assert sorted((e.kind, e.reason, e.window_start) for e in entries) == [
        ("window", "store_failed", t) for t in failed
    ]
    assert sorted(settings.resolved_spool_dir.rglob("*.spool")), "failed windows keep a spool"

    # -- S3 is back: retrigger stores the kept captures and builds the windows -------------
    from apps.cli import app

    set_env(monkeypatch, settings)
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WORLDMM_BLOB_S3_URI", settings.blob_s3_uri)
    result = CliRunner().invoke(app, ["retrigger", "--user", user_id])
    assert result.exit_code == 0, result.output
    after = segment_states(settings.database_url, user_id)
    assert {v[0] for v in after.values()} == {"complete"}, after
    assert not sorted(settings.resolved_spool_dir.rglob("*.spool"))

    # every frame is inside a stored container, and reads back as it was captured
    store = S3BlobStore(bucket, "blobs", client=s3.client())
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(
            "SELECT blob_key, media_key, media_offset, media_length FROM frames WHERE user_id = %s",
            (user_id,),
        ).fetchall()
    assert rows and all(r[1] for r in rows)
    for key, media_key, offset, length in rows:
        assert read_capture(store, key, MediaRef(media_key, offset, length)) in jpegs
    assert len(store.list(f"media/{user_id}/")) == 4  # one object per window
