"""The service on a real loopback socket, called with the real HttpVisualEncoder."""

from __future__ import annotations

import asyncio
import threading

import httpx
import numpy as np
import pytest

from gpu_worker.app import WorkerConfig, create_app
from gpu_worker.threaded import ThreadedServer
from tests.fixtures.clocks import ManualClock
from tests.fixtures.images import noise, to_jpeg
from worldmm.breaker import encoder_breaker
from worldmm.encoder import (
    BreakerState,
    CircuitBreaker,
    EncoderRejected,
    EncoderUnavailable,
    HttpVisualEncoder,
)
from worldmm.encoder.frames import decode_frames
from worldmm.retry import RetryPolicy, encoder_policy
from worldmm.settings import load_settings


def _encoder(url: str, dim: int, **overrides) -> HttpVisualEncoder:
    """The client as the settings build it (timeout, retries, breaker), with overrides."""
    settings = load_settings()
    built = {
        "timeout_s": settings.gpu_timeout_s,
        "retry": encoder_policy(settings),
        "breaker": encoder_breaker(settings),
    }
    return HttpVisualEncoder(url, dim, **(built | overrides))


class GatedBackend:
    """The real backend, but each video batch waits for ``gate`` (to fill the queue on cue)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.name, self.model, self.dim, self.device = (
            inner.name,
            inner.model,
            inner.dim,
            inner.device,
        )
        self.gate = threading.Event()
        self.entered = threading.Event()

    def encode_videos(self, clips):
        self.entered.set()
        self.gate.wait(30)
        return self._inner.encode_videos(clips)

    def encode_texts(self, texts):
        return self._inner.encode_texts(texts)


def _clip(seed: int, n: int = 4) -> list[bytes]:
    return [to_jpeg(noise(seed * 100 + i)) for i in range(n)]


def test_client_round_trip_and_concurrent_batching(tiny_backend):
    app = create_app(tiny_backend, WorkerConfig(batch_size=8, max_wait_ms=50))

    async def main(url):
        encoder = _encoder(url, tiny_backend.dim, timeout_s=30)
        health = await encoder.health()
        videos = await asyncio.gather(*[encoder.encode_video(_clip(s)) for s in range(6)])
        text = await encoder.encode_text("the red door")
        await encoder.aclose()
        return health, videos, text

    with ThreadedServer(app) as server:
        health, videos, text = asyncio.run(main(server.url))
        metrics = httpx.get(f"{server.url}/metrics").text
    assert health["backend"] == "vlm2vec" and health["dim"] == tiny_backend.dim
    # Whatever batches the server formed, each answer equals encoding that clip alone.
    for seed, vector in enumerate(videos):
        alone = tiny_backend.encode_videos([decode_frames(_clip(seed))])[0]
        assert vector.shape == (tiny_backend.dim,)
        np.testing.assert_allclose(vector, alone, atol=1e-5)
    assert len({tuple(np.round(v, 4)) for v in videos}) == 6
    assert text.shape == (tiny_backend.dim,)
    assert 'gpu_worker_requests_total{endpoint="/encode-video",status="200"} 6.0' in metrics


def test_rejections_and_dimension_mismatch_are_typed(tiny_backend):
    app = create_app(tiny_backend, WorkerConfig())

    async def main(url):
        right = _encoder(url, tiny_backend.dim, retry=RetryPolicy(0))
        wrong = _encoder(url, 1536, retry=RetryPolicy(0))
        with pytest.raises(EncoderRejected, match="422 frame 0: not a decodable image"):
            await right.encode_video([b"definitely not a jpeg"])
        with pytest.raises(EncoderRejected, match="1536 are configured"):
            await wrong.encode_text("cat")
        assert right.breaker.state is BreakerState.CLOSED  # a 4xx is not an outage
        await right.aclose()
        await wrong.aclose()

    with ThreadedServer(app) as server:
        asyncio.run(main(server.url))


def test_circuit_opens_when_the_server_stops_and_closes_after_a_trial(tiny_backend):
    clock = ManualClock()
    breaker = CircuitBreaker(2, 30.0, clock=clock)
    server = ThreadedServer(create_app(tiny_backend, WorkerConfig())).start()
    port = server.port
    encoder = _encoder(
        server.url, tiny_backend.dim, retry=RetryPolicy(0), timeout_s=5, breaker=breaker
    )

    async def call():
        return await encoder.encode_text("a cat")

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(call()).shape == (tiny_backend.dim,)
        server.stop()
        for _ in range(2):
            with pytest.raises(EncoderUnavailable, match="ConnectError"):
                loop.run_until_complete(call())
        assert breaker.state is BreakerState.OPEN
        with pytest.raises(EncoderUnavailable, match="circuit open"):
            loop.run_until_complete(call())

        # Back on the same port: after the open period one trial call goes out and closes it.
        with ThreadedServer(create_app(tiny_backend, WorkerConfig()), port=port):
            with pytest.raises(EncoderUnavailable, match="circuit open"):
                loop.run_until_complete(call())  # still open: fails fast though the server is up
            clock.now += 30.0
            assert breaker.state is BreakerState.HALF_OPEN
            assert loop.run_until_complete(call()).shape == (tiny_backend.dim,)
            assert breaker.state is BreakerState.CLOSED
    finally:
        loop.run_until_complete(encoder.aclose())
        loop.close()


def test_full_queue_answers_503_with_retry_after(tiny_backend):
    backend = GatedBackend(tiny_backend)
    app = create_app(backend, WorkerConfig(batch_size=1, max_wait_ms=0, queue_size=1))

    async def main(url):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            files = [("frames", ("0.jpg", _clip(1, 1)[0], "image/jpeg"))]
            running = asyncio.create_task(http.post("/encode-video", files=files))
            await asyncio.to_thread(backend.entered.wait, 10)  # batch 1 holds the model
            waiting = asyncio.create_task(http.post("/encode-video", files=files))
            while (await http.get("/healthz")).json()["queue"]["video"] < 1:
                await asyncio.sleep(0.01)  # poll until the second request sits in the queue
            refused = await http.post("/encode-video", files=files)
            encoder = _encoder(url, backend.dim, retry=RetryPolicy(0))
            with pytest.raises(EncoderUnavailable, match="HTTP 503"):
                await encoder.encode_video(_clip(1, 1))
            await encoder.aclose()
            backend.gate.set()
            done = await asyncio.gather(running, waiting)
            metrics = (await http.get("/metrics")).text
        return refused, done, metrics

    with ThreadedServer(app) as server:
        refused, done, metrics = asyncio.run(main(server.url))
    assert refused.status_code == 503
    assert int(refused.headers["retry-after"]) >= 1
    assert "queue full" in refused.json()["detail"]
    assert [r.status_code for r in done] == [200, 200]
    assert 'gpu_worker_rejected_total{kind="video"} 2.0' in metrics
