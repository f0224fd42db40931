"""HTTP client of the GPU encoder service: timeouts, retries (``worldmm.retry``), a circuit
breaker (``worldmm.breaker``).

Failures that say "try later" (connection refused, timeouts, 5xx, 503 queue full, circuit
open) raise :class:`EncoderUnavailable`; a 4xx or an unusable answer raises
:class:`EncoderRejected`. Its timeout, retry policy and breaker come from settings
(worldmm.encoder.factory), so their defaults are written once.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np

from worldmm.breaker import CircuitBreaker
from worldmm.encoder.base import EncoderRejected, EncoderUnavailable
from worldmm.retry import RetryPolicy, acall_with_retry


class HttpVisualEncoder:
    def __init__(
        self,
        base_url: str,
        dim: int,
        *,
        timeout_s: float,
        retry: RetryPolicy,
        breaker: CircuitBreaker,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.dim = dim
        self.retry = retry
        self.breaker = breaker
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            # Expire idle connections before servers do (uvicorn: 5 s), so a POST never goes
            # out on a connection the server has just closed.
            limits=httpx.Limits(keepalive_expiry=2.0),
            transport=transport,
        )

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:
        files = [("frames", (f"{i:02d}.jpg", data, "image/jpeg")) for i, data in enumerate(frames)]
        return await self._embedding("/encode-video", files=files)

    async def encode_text(self, text: str) -> np.ndarray:
        return await self._embedding("/encode-text", json={"text": text})

    async def health(self) -> dict:
        try:
            response = await self._client.get("/healthz")
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise EncoderUnavailable(f"GPU worker {self.base_url} is not healthy: {exc}") from exc
        return response.json()

    async def aclose(self) -> None:
        await self._client.aclose()

    # --- internals -----------------------------------------------------------------------
    async def _embedding(self, path: str, **request) -> np.ndarray:
        body = await self._post(path, **request)
        try:
            vector = np.asarray(body["embedding"], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EncoderRejected(f"{path}: malformed answer from the GPU worker: {exc}") from exc
        if vector.shape != (self.dim,):
            raise EncoderRejected(
                f"{path}: the GPU worker returns {vector.shape[-1] if vector.ndim else 0}-d "
                f"vectors but {self.dim} are configured (WORLDMM_VISUAL_EMBED_DIM)"
            )
        if not np.all(np.isfinite(vector)):
            raise EncoderRejected(f"{path}: the GPU worker returned non-finite values")
        return vector

    async def _post(self, path: str, **request) -> dict:
        attempts, problem = 0, "no attempt made"

        async def attempt() -> dict:
            nonlocal attempts, problem
            if not self.breaker.allow():
                raise EncoderUnavailable(
                    f"GPU worker circuit open after repeated failures ({problem}); "
                    f"next trial in {self.breaker.retry_in():.1f} s"
                )
            attempts += 1
            try:
                response = await self._client.post(path, **request)
            except asyncio.CancelledError:
                self.breaker.abandon()
                raise
            except httpx.TransportError as exc:
                self.breaker.record_failure()
                problem = f"{type(exc).__name__}: {exc}"
                raise _TryLater(problem) from exc
            if response.status_code < 400:
                self.breaker.record_success()
                return response.json()
            if response.status_code < 500:
                self.breaker.record_success()  # the service is up; the input is the problem
                raise EncoderRejected(f"{path}: {response.status_code} {_detail(response)}")
            self.breaker.record_failure()
            problem = f"HTTP {response.status_code} {_detail(response)}"
            raise _TryLater(problem, response)

        try:
            return await acall_with_retry(
                attempt, self.retry, step=f"gpu_worker{path}", retry_on=_try_later
            )
        except _TryLater as exc:
            raise EncoderUnavailable(
                f"GPU worker {path} failed {attempts} times: {problem}"
            ) from exc


class _TryLater(Exception):
    """The worker could not be reached or answered 5xx (its Retry-After, if any, is kept)."""

    def __init__(self, problem: str, response: httpx.Response | None = None) -> None:
        super().__init__(problem)
        self.response = response


def _try_later(exc: BaseException) -> str | None:
    return "unavailable" if isinstance(exc, _TryLater) else None


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", response.text))[:300]
    except ValueError:
        return response.text[:300]
