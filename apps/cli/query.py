"""CLI commands: ``serve`` (the query API under uvicorn) and ``ask`` (one question, printed).

FastAPI and the service package are imported inside the commands, so ``worldmm --help`` stays
fast and the core library never imports them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from typing import Annotated, Any

import typer

from apps.cli.common import parse_time, service_settings, settings_or_exit
from worldmm.redact import RedactingFilter


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command("serve", help="Run the query API (FastAPI under uvicorn).")(serve)
    app.command("ask", help="Ask a question about a user's past and print the answer.")(ask)


def serve(
    host: Annotated[
        str | None, typer.Option(help="Bind address (default WORLDMM_API_HOST).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default WORLDMM_API_PORT).")] = None,
) -> None:
    import uvicorn

    from query_api.app import create_app
    from worldmm.redact import configure_logging

    # what is missing is said before uvicorn starts (the app connects in its lifespan)
    settings = service_settings("postgres", "redis")
    from deploy.stack import StackError, with_stack_urls

    # the broker only carries pauses sent through the API (503 without one)
    with contextlib.suppress(StackError):
        settings = with_stack_urls(settings, "kafka")
    if settings.admin_api_key is None:
        print(
            "warning: WORLDMM_ADMIN_API_KEY is not set: no one can create users or purge",
            file=sys.stderr,
        )
    configure_logging(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=host or settings.api_host,
        port=port or settings.api_port,
        log_level=settings.log_level.lower(),
        log_config=_uvicorn_log_config(),
        proxy_headers=False,  # the app believes only WORLDMM_API_TRUSTED_PROXIES
    )


def _uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, its handlers masking URL passwords."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redact": {"()": RedactingFilter}}
    for handler in config["handlers"].values():
        handler["filters"] = ["redact"]
    return config


def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    user: Annotated[str, typer.Option("--user", "-u", help="Whose memory to ask.")],
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Only memory that existed then (ISO 8601).")
    ] = None,
    choice: Annotated[
        list[str] | None, typer.Option("--choice", "-c", help="A multiple-choice option (repeat).")
    ] = None,
    max_rounds: Annotated[int | None, typer.Option(help="Retrieval rounds (1..max).")] = None,
    api: Annotated[
        str | None, typer.Option(help="Query API base URL; without it the agent runs here.")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="API key for --api (default $WORLDMM_API_KEY).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON.")] = False,
) -> None:
    when = parse_time(as_of, "--as-of")
    body: dict[str, Any] = {"question": question}
    if choice:
        body["choices"] = choice
    if when is not None:
        body["as_of"] = when.isoformat()
    if max_rounds is not None:
        body["max_rounds"] = max_rounds
    if api:
        result, where = _ask_api(api, key or os.environ.get("WORLDMM_API_KEY"), user, body)
    else:
        result, where = _ask_in_process(user, body)
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        render_answer(result, where)


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(1)


def _ask_api(api: str, key: str | None, user: str, body: dict) -> tuple[dict, str]:
    from pydantic import ValidationError

    from apps.client import ApiConnectionError, ApiError, WorldMMClient
    from worldmm.wire.schemas import QueryRequest

    if not key:
        raise _fail("--api needs --key (or WORLDMM_API_KEY)")
    try:
        req = QueryRequest.model_validate(body)
    except ValidationError as exc:
        raise _fail(str(exc)) from None
    try:
        with WorldMMClient(api, key, user) as mm:
            reply = mm.query(
                req.question, choices=req.choices, as_of=req.as_of, max_rounds=req.max_rounds
            )
    except ApiConnectionError as exc:
        raise _fail(exc.detail) from None
    except ApiError as exc:
        raise _fail(f"{exc.status} from the API: {exc.detail}") from None
    return reply.model_dump(mode="json"), f"via the API at {api}"


def _ask_in_process(user: str, body: dict) -> tuple[dict, str]:
    import asyncio

    from pydantic import ValidationError

    from deploy.stack import StackError, with_stack_urls
    from query_api.depends import recall_queue
    from query_api.ops.query import RoundsOutOfRange, run_query
    from worldmm.deps import build_deps
    from worldmm.providers.errors import ModelCallError
    from worldmm.store.users import user_exists
    from worldmm.wire.schemas import QueryRequest

    settings = settings_or_exit()
    try:
        req = QueryRequest.model_validate(body)
    except ValidationError as exc:
        raise _fail(str(exc)) from None
    try:
        deps = build_deps(with_stack_urls(settings, "postgres", "redis"), role="api")
    except StackError as exc:
        raise _fail(str(exc)) from None
    try:
        with deps.db.connection() as conn:
            if not user_exists(conn, user):
                raise _fail(f"unknown user {user!r}")
        recalls = recall_queue(deps)  # the answer's evidence is recalled, as over the API

        async def ask():
            reply = await run_query(deps, user, req, recalls=recalls)
            await recalls.close()
            return reply

        result = asyncio.run(ask())
    except RoundsOutOfRange as exc:
        raise _fail(str(exc)) from None
    except ModelCallError as exc:
        raise _fail(f"the model call failed: {exc}") from None
    finally:
        deps.close()
    return result.model_dump(mode="json"), "in-process against the configured stack"


def render_answer(result: dict, where: str) -> None:
    """The answer, the evidence with its time ranges, and the rounds, as rich tables."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = Console()
    subtitle = f"provider {result.get('provider', '?')}, {where}"
    if result.get("as_of"):
        subtitle += f", as of {result['as_of']}"
    elif result.get("asked_at"):
        subtitle += f", asked {result['asked_at']} ({result.get('timezone') or 'UTC'})"
    console.print(Panel(result["answer"], title="answer", subtitle=subtitle))

    evidence = Table(title="evidence (the wearer's clock)", show_lines=False)
    for col in ("segment", "scale", "when", "from", "to", "text"):
        evidence.add_column(col, overflow="fold")
    for e in result.get("evidence", []):
        evidence.add_row(
            str(e["segment_id"]),
            f"{e['scale']} s",
            e.get("when") or "",
            e["start"],
            e["end"],
            e["text"],
        )
    for t in result.get("triples", []):
        evidence.add_row(
            "fact",
            "",
            "",
            t.get("valid_from") or "",
            "",
            f"{t['subject']} {t['predicate']} {t['object']}",
        )
    for url in result.get("frames", []):
        evidence.add_row("frame", "", "", "", "", url)
    console.print(evidence)

    rounds = Table(title=f"rounds (stopped: {result.get('stopped', '?')})")
    for col in ("#", "memory", "query", "hits", "best hit"):
        rounds.add_column(col, overflow="fold")
    for i, r in enumerate(result.get("rounds", []), 1):
        best = _hit_text(r["results"][0]) if r["results"] else (r.get("note") or "")
        rounds.add_row(str(i), r["memory_type"], r["query"], str(len(r["results"])), best)
    console.print(rounds)


def _hit_text(hit: dict) -> str:
    if "text" in hit:
        return f"[{hit['start']} to {hit['end']}] {hit['text']}"
    if "predicate" in hit:
        return f"{hit['subject']} {hit['predicate']} {hit['object']}"
    return f"frame {hit.get('key', '')} at {hit.get('ts', '')}"
