"""The service in-process (FastAPI TestClient runs the lifespan) with the tiny VLM2Vec model."""

import base64

import numpy as np
import pytest
from fastapi.testclient import TestClient

from gpu_worker.app import WorkerConfig, create_app
from tests.fixtures.images import noise, to_jpeg


@pytest.fixture(scope="module")
def client(tiny_backend):
    app = create_app(tiny_backend, WorkerConfig(batch_size=4, max_wait_ms=5, max_text_chars=100))
    with TestClient(app) as c:
        yield c


def _frames(n: int, seed: int = 0) -> list[bytes]:
    return [to_jpeg(noise(seed + i)) for i in range(n)]


def test_healthz_reports_the_backend(client, tiny_backend):
    body = client.get("/healthz").json()
    assert body["backend"] == "vlm2vec"
    assert body["dim"] == tiny_backend.dim
    assert body["device"] == "cpu"
    assert body["model"] == tiny_backend.model


def test_multipart_and_json_frames_give_the_same_embedding(client, tiny_backend):
    frames = _frames(5)
    multipart = client.post(
        "/encode-video",
        files=[("frames", (f"{i}.jpg", f, "image/jpeg")) for i, f in enumerate(frames)],
    )
    as_json = client.post(
        "/encode-video", json={"frames": [base64.b64encode(f).decode() for f in frames]}
    )
    assert multipart.status_code == as_json.status_code == 200
    a = np.asarray(multipart.json()["embedding"])
    b = np.asarray(as_json.json()["embedding"])
    assert a.shape == (tiny_backend.dim,)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_text_lands_in_the_same_dimension(client, tiny_backend):
    response = client.post("/encode-text", json={"text": "a red car"})
    assert response.status_code == 200
    body = response.json()
    assert body["dim"] == len(body["embedding"]) == tiny_backend.dim


@pytest.mark.parametrize(
    ("request_kwargs", "status", "message"),
    [
        ({"json": {"frames": []}}, 422, "at least one frame"),
        ({"json": {"frames": ["AAAA"] * 17}}, 422, "at most 16 frames"),
        ({"json": {"frames": ["%%%"]}}, 422, "not valid base64"),
        ({"json": {"frames": [base64.b64encode(b"nope").decode()]}}, 422, "not a decodable"),
        (
            {"files": [("frames", (f"{i}.jpg", b"x", "image/jpeg")) for i in range(17)]},
            400,
            "Too many files",
        ),
        ({"content": b"raw", "headers": {"content-type": "image/jpeg"}}, 415, "multipart"),
    ],
)
def test_bad_video_requests_get_4xx_messages(client, request_kwargs, status, message):
    response = client.post("/encode-video", **request_kwargs)
    assert response.status_code == status
    assert message in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "message"),
    [({"text": "   "}, "empty"), ({"text": "x" * 101}, "limit 100")],
)
def test_bad_text_requests_get_4xx_messages(client, body, message):
    response = client.post("/encode-text", json=body)
    assert response.status_code == 422
    assert message in response.json()["detail"]


def test_metrics_count_requests_and_batches(client):
    client.post("/encode-text", json={"text": "cat"})
    text = client.get("/metrics").text
    assert 'gpu_worker_requests_total{endpoint="/encode-text",status="200"}' in text
    assert 'gpu_worker_batch_size_count{kind="text"}' in text
    assert "gpu_worker_queue_depth" in text
