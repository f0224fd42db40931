"""A scripted OpenAI-compatible HTTP server on a free loopback port, for tests.

The real ``openai`` SDK talks to it over HTTP. Each endpoint has a queue of scripted replies
(status code, JSON body, delay); when a queue is empty a default responder answers. Every request
is recorded. Batch jobs run their lines through the chat queue/responder, so a test can make
single lines fail.

    with FakeOpenAI() as fake:
        fake.chat.push(Reply.chat('{"caption": "I ..."}'))
        fake.chat.push(Reply.error(429))
        client = openai.OpenAI(base_url=fake.base_url, api_key="x")
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.datastructures import FormData, UploadFile


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def chat(content: str, *, model: str = "fake-model", delay_s: float = 0.0) -> Reply:
        return Reply(body=chat_body(content, model), delay_s=delay_s)

    @staticmethod
    def error(status: int, message: str = "scripted error", **headers: str) -> Reply:
        body = {"error": {"message": message, "type": "scripted", "code": str(status)}}
        return Reply(status=status, body=body, headers=headers)


def chat_body(content: str, model: str = "fake-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector per text (same text → same vector)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


class Script:
    """A queue of scripted replies with a default responder for when it is empty."""

    def __init__(self, default: Callable[[dict[str, Any]], Reply]) -> None:
        self.queue: deque[Reply] = deque()
        self.default = default
        self._lock = threading.Lock()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def next(self, request_body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        return self.default(request_body)


@dataclass
class Recorded:
    method: str
    path: str
    body: Any


class FakeOpenAI:
    """``chat``: the responder when no chat reply is scripted (default: ``{}``)."""

    def __init__(self, chat: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.chat = Script(chat or (lambda body: Reply.chat("{}", model=body.get("model", "fake"))))
        self.embeddings = Script(self._default_embeddings)
        self.transcriptions = Script(
            lambda body: Reply(body={"text": "", "segments": [], "duration": 0.0})
        )
        # Statuses a batch reports on successive retrieves; the last one repeats.
        self.batch_statuses: list[str] = ["in_progress", "completed"]
        self.requests: list[Recorded] = []
        # The usage of every successful chat reply, direct or in a batch, as sent.
        self.reported_usage: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.app = self._build_app()

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def paths(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.requests]

    def _chat_reply(self, body: dict[str, Any]) -> Reply:
        reply = self.chat.next(body)
        if reply.status == 200 and isinstance(reply.body, dict):
            self.reported_usage.append(dict(reply.body.get("usage") or {}))
        return reply

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/v1/chat/completions"]

    # --- behaviour -------------------------------------------------------------------------------
    def _default_embeddings(self, body: dict[str, Any]) -> Reply:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = int(body.get("dimensions") or 8)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return Reply(body={"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _run_batch_lines(self, batch: dict[str, Any]) -> None:
        out_lines, err_lines = [], []
        for raw in self.files[batch["input_file_id"]].decode().splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            reply = self._chat_reply(line["body"])
            if reply.status == 200:
                response = {"status_code": 200, "request_id": "req", "body": reply.body}
                out_lines.append(
                    {"id": "r", "custom_id": line["custom_id"], "response": response, "error": None}
                )
            else:
                err_lines.append(
                    {
                        "id": "r",
                        "custom_id": line["custom_id"],
                        "response": {
                            "status_code": reply.status,
                            "request_id": "req",
                            "body": reply.body,
                        },
                        "error": None,
                    }
                )
        for key, lines in (("output_file_id", out_lines), ("error_file_id", err_lines)):
            if lines:
                file_id = self._new_id("file")
                self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                batch[key] = file_id

    def _batch_view(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        polls = batch.setdefault("_polls", 0)
        status = self.batch_statuses[min(polls, len(self.batch_statuses) - 1)]
        batch["_polls"] = polls + 1
        if status == "completed" and not batch.get("_ran"):
            self._run_batch_lines(batch)
            batch["_ran"] = True
        batch["status"] = status
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        async def respond(reply: Reply) -> Response:
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)

        def scripted(path: str, next_reply: Callable[[dict[str, Any]], Reply]) -> None:
            """POST ``path``: record the JSON body, answer with ``next_reply(body)``."""

            async def answer(request: Request) -> Response:
                body = await request.json()
                self.requests.append(Recorded("POST", path, body))
                return await respond(next_reply(body))

            app.post(path)(answer)

        scripted("/v1/chat/completions", self._chat_reply)
        scripted("/v1/embeddings", self.embeddings.next)

        async def multipart(request: Request) -> tuple[FormData, UploadFile, bytes]:
            form = await request.form()
            upload = form["file"]
            assert isinstance(upload, UploadFile)
            return form, upload, await upload.read()

        @app.post("/v1/audio/transcriptions")
        async def transcriptions(request: Request) -> Response:
            form, upload, data = await multipart(request)
            fields = {k: v for k, v in form.multi_items() if k != "file"}
            body = {"fields": fields, "filename": upload.filename, "audio": data}
            self.requests.append(Recorded("POST", "/v1/audio/transcriptions", body))
            return await respond(self.transcriptions.next(body))

        @app.post("/v1/files")
        async def upload_file(request: Request) -> Response:
            form, upload, data = await multipart(request)
            file_id = self._new_id("file")
            self.files[file_id] = data
            body = {"purpose": form.get("purpose"), "filename": upload.filename, "bytes": data}
            self.requests.append(Recorded("POST", "/v1/files", body))
            return JSONResponse(
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(data),
                    "created_at": 0,
                    "filename": upload.filename,
                    "purpose": form.get("purpose"),
                    "status": "processed",
                }
            )

        @app.get("/v1/files/{file_id}/content")
        async def file_content(file_id: str) -> Response:
            self.requests.append(Recorded("GET", f"/v1/files/{file_id}/content", None))
            if file_id not in self.files:
                return JSONResponse({"error": {"message": "no such file"}}, status_code=404)
            return PlainTextResponse(self.files[file_id].decode())

        @app.post("/v1/batches")
        async def create_batch(request: Request) -> Response:
            body = await request.json()
            self.requests.append(Recorded("POST", "/v1/batches", body))
            batch_id = self._new_id("batch")
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
                "completion_window": "24h",
                "status": "validating",
                "created_at": 0,
                "output_file_id": None,
                "error_file_id": None,
                "metadata": body.get("metadata"),
            }
            return JSONResponse(
                {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}
            )

        @app.get("/v1/batches/{batch_id}")
        async def get_batch(batch_id: str) -> Response:
            self.requests.append(Recorded("GET", f"/v1/batches/{batch_id}", None))
            return JSONResponse(self._batch_view(batch_id))

        return app
