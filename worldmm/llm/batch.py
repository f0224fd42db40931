"""Batch dispatch through the OpenAI Batch API.

Requests are collected for ``flush_s`` (or until ``max_lines``), written as one JSONL file,
uploaded, and run as one batch job; the job is polled until it ends, the output and error files
are downloaded, and results are mapped back to callers by ``custom_id``. Lines that failed (in
the error file, missing from the output, or a failed/expired job) are retried directly, so a
caller only sees an error when the direct retry fails too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from worldmm import metrics
from worldmm.llm.dispatch import DirectDispatcher, record_success
from worldmm.llm.request import ChatRequest, ChatResult, result_from_body
from worldmm.providers.calls import call_model
from worldmm.providers.errors import ModelCallError

log = logging.getLogger(__name__)
TERMINAL = {"completed", "failed", "expired", "cancelled"}
ENDPOINT = "/v1/chat/completions"


@dataclass
class _Pending:
    request: ChatRequest
    future: asyncio.Future[ChatResult]


@dataclass
class BatchOutcome:
    """What one job returned: results by line index, and the lines that need a direct retry."""

    batch_id: str | None
    status: str
    results: dict[int, ChatResult]
    failed: dict[int, str]  # index → reason


class BatchDispatcher:
    name = "batch"

    def __init__(
        self,
        direct: DirectDispatcher,
        *,
        poll_s: float,
        flush_s: float,
        max_lines: int,
    ) -> None:
        self.direct = direct
        self.provider = direct.provider
        self.poll_s = poll_s
        self.flush_s = flush_s
        self.max_lines = max_lines
        self._pending: list[_Pending] = []
        self._timer: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()

    # --- collecting single requests ---------------------------------------------------------
    async def complete(self, request: ChatRequest) -> ChatResult:
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(request, future))
        if len(self._pending) >= self.max_lines:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())
        return await future

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.flush_s)
        self._timer = None
        self._flush()

    def _flush(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
            self._timer = None
        items, self._pending = self._pending, []
        if items:
            job = asyncio.create_task(self._resolve(items))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _resolve(self, items: list[_Pending]) -> None:
        results = await self.run_batch([p.request for p in items])
        for pending, result in zip(items, results, strict=True):
            if pending.future.done():
                continue
            if isinstance(result, ChatResult):
                pending.future.set_result(result)
            else:
                pending.future.set_exception(result)

    # --- one job -------------------------------------------------------------------------------
    async def run_batch(self, requests: list[ChatRequest]) -> list[ChatResult | ModelCallError]:
        """Run ``requests`` as one batch job; failed lines are retried directly."""
        started = time.perf_counter()
        try:
            outcome = await self._submit_and_wait(requests)
        except ModelCallError as exc:
            log.warning(
                "batch job could not run, retrying %d lines directly: %s", len(requests), exc
            )
            outcome = BatchOutcome(None, "error", {}, {i: str(exc) for i in range(len(requests))})
        metrics.LLM_BATCHES.labels(provider=self.provider, status=outcome.status).inc()
        out: list[ChatResult | ModelCallError] = []
        retries = {
            i: asyncio.create_task(self._retry_line(requests[i], why))
            for i, why in outcome.failed.items()
        }
        for i, request in enumerate(requests):
            if i in outcome.results:
                result = outcome.results[i]
                result.latency_s = time.perf_counter() - started
                record_success(request, result, self.provider, self.name, self.direct.usage)
                out.append(result)
            else:
                try:
                    out.append(await retries[i])
                except ModelCallError as exc:
                    out.append(exc)
        return out

    async def _retry_line(self, request: ChatRequest, why: str) -> ChatResult:
        metrics.LLM_BATCH_LINES_RETRIED.labels(provider=self.provider).inc()
        log.info("batch line for %s failed (%s); retrying directly", request.role, why)
        return await self.direct.complete(request)

    async def _submit_and_wait(self, requests: list[ChatRequest]) -> BatchOutcome:
        client = self.direct.client()
        retry = self.direct.retry
        ids = [f"{uuid.uuid4().hex[:12]}-{i}" for i in range(len(requests))]
        jsonl = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": r.body()})
            + "\n"
            for cid, r in zip(ids, requests, strict=True)
        ).encode()

        async def call(fn, *args, **kwargs):
            return await call_model(
                lambda: fn(*args, **kwargs), retry, role="batch", provider=self.provider
            )

        upload = await call(client.files.create, file=("requests.jsonl", jsonl), purpose="batch")
        batch = await call(
            client.batches.create,
            input_file_id=upload.id,
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata={"source": "worldmm", "lines": str(len(requests))},
        )
        while batch.status not in TERMINAL:
            await asyncio.sleep(self.poll_s)
            batch = await call(client.batches.retrieve, batch.id)
        index = {cid: i for i, cid in enumerate(ids)}
        results: dict[int, ChatResult] = {}
        failed: dict[int, str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await call(client.files.content, file_id)
            for line in content.text.splitlines():
                if line.strip():
                    self._read_line(json.loads(line), index, results, failed)
        for i in range(len(requests)):
            if i not in results and i not in failed:
                failed[i] = f"no result in batch {batch.id} (status {batch.status})"
        return BatchOutcome(batch.id, batch.status, results, failed)

    @staticmethod
    def _read_line(
        line: dict[str, Any],
        index: dict[str, int],
        results: dict[int, ChatResult],
        failed: dict[int, str],
    ) -> None:
        i = index.get(line.get("custom_id", ""))
        if i is None:
            return
        response = line.get("response") or {}
        status = response.get("status_code")
        if status == 200 and not line.get("error"):
            try:
                results[i] = result_from_body(response.get("body") or {})
                return
            except ValueError as exc:
                failed[i] = f"unreadable output line: {exc}"
                return
        error = line.get("error") or (response.get("body") or {}).get("error") or {}
        failed[i] = (
            f"status {status}: {error.get('message', error) if isinstance(error, dict) else error}"
        )
