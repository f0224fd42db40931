"""The tools: ``ask``, ``search_memory``, ``list_segments``, ``remember``, ``forget``,
``forget_recent``, ``pause_recording``, ``resume_recording``, and ``profile`` /
``set_timezone`` (the wearer's time zone, which their questions are read in).

Every tool goes through ``apps.client`` with the one key the server was started with, so
each call is scoped to that key's user: the API enforces it, the server adds nothing to trust.
Failures come back as tool errors with the API's message (``isError`` results the agent can
read and correct), never as crashes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Annotated, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AwareDatetime, Field, ValidationError

from apps.client import ApiError, AsyncWorldMMClient
from worldmm.wire.schemas import (
    MAX_CHOICES,
    ForgetResponse,
    PauseResponse,
    QueryResponse,
    RememberResponse,
    SearchResponse,
    SegmentPage,
    UserProfileOut,
)

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = """\
The memory of one camera-glasses wearer: what they saw, heard and were told, as episodic
segments (30 s, 3 min, 10 min, 1 h), semantic facts and stored frames. Use `ask` for an
answer with evidence, `search_memory` to look things up yourself, `list_segments` to read a
time range. Questions are read on the wearer's clock at the moment they are asked: pass
"yesterday afternoon" or "the last time" as the wearer said it (no `as_of` needed); `profile`
gives the wearer's time zone. Times are ISO 8601 with a zone (replies carry the wearer's
offset). `forget` deletes for good and needs confirm=true.
"""

Time = Annotated[
    AwareDatetime, Field(description="ISO 8601 with a zone, e.g. 2026-11-20T10:00:00Z")
]


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """API and input errors become tool errors with their message (the SDK would otherwise
    hide an unexpected exception behind a generic one)."""

    @wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ApiError as exc:
            raise ToolError(f"the memory API refused: {exc.detail} ({exc.status})") from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments: {problems}") from None
        except ValueError as exc:
            raise ToolError(f"invalid arguments: {exc}") from None

    return wrapper


def build_server(client: AsyncWorldMMClient, *, name: str = "worldmm-memory") -> MCPServer:
    server = MCPServer(name=name, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(description="Ask a question about the wearer's past; the answer with evidence.")
    @tool_errors
    async def ask(
        question: Annotated[str, Field(description="The question.", min_length=1)],
        as_of: Annotated[
            Time | None, Field(description="Answer only from memory that existed then.")
        ] = None,
        choices: Annotated[
            list[str] | None,
            Field(
                description="Multiple-choice options; the answer is one of them.",
                max_length=MAX_CHOICES,
            ),
        ] = None,
    ) -> QueryResponse:
        return await client.query(question, as_of=as_of, choices=choices)

    @server.tool(description="Search one memory (episodic, semantic or visual); no answer.")
    @tool_errors
    async def search_memory(
        memory_type: Literal["episodic", "semantic", "visual"],
        query: Annotated[str, Field(description="What to look for.", min_length=1)],
        as_of: Annotated[Time | None, Field(description="Only memory that existed then.")] = None,
    ) -> SearchResponse:
        return await client.search(memory_type, query, as_of=as_of)

    @server.tool(description="The wearer's profile: user id, time zone, creation time.")
    @tool_errors
    async def profile() -> UserProfileOut:
        return await client.profile()

    @server.tool(
        description="Set the wearer's time zone (an IANA name such as 'Asia/Tokyo'): the "
        "clock their questions are read on and answers speak."
    )
    @tool_errors
    async def set_timezone(
        timezone: Annotated[str, Field(description="IANA time zone name.", min_length=1)],
    ) -> UserProfileOut:
        return await client.update_profile(timezone=timezone)

    @server.tool(description="List segments overlapping [start, end), oldest first, paged.")
    @tool_errors
    async def list_segments(
        start: Time | None = None,
        end: Time | None = None,
        scale: Annotated[
            Literal[30, 180, 600, 3600] | None, Field(description="Seconds; all scales if unset.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor of the last page.")] = None,
    ) -> SegmentPage:
        return await client.segments(start=start, end=end, scale=scale, limit=limit, cursor=cursor)

    @server.tool(description="Remember a note (stored as episodic and semantic memory).")
    @tool_errors
    async def remember(
        text: Annotated[str, Field(description="What to remember.", min_length=1)],
        at: Annotated[Time | None, Field(description="When it was true (default now).")] = None,
    ) -> RememberResponse:
        return await client.remember(text, at=at)

    @server.tool(
        description=(
            "Forget everything captured in [start, end): segments, facts drawn from them, "
            "frames and audio. Irreversible: only runs with confirm=true."
        )
    )
    @tool_errors
    async def forget(
        start: Time,
        end: Time,
        confirm: Annotated[bool, Field(description="Must be true: forgetting is final.")] = False,
    ) -> ForgetResponse:
        _confirmed(confirm, "forget", f"{start.isoformat()} to {end.isoformat()}")
        return await client.forget(start, end)

    @server.tool(
        description=(
            "Forget the last N minutes up to now (segments, facts drawn from them, frames "
            "and audio): 'forget what just happened'. Irreversible: only runs with confirm=true."
        )
    )
    @tool_errors
    async def forget_recent(
        minutes: Annotated[int, Field(ge=1, le=10080, description="Minutes back from now.")],
        confirm: Annotated[bool, Field(description="Must be true: forgetting is final.")] = False,
    ) -> ForgetResponse:
        _confirmed(confirm, "forget_recent", f"the last {minutes} minutes")
        return await client.forget_recent(minutes)

    @server.tool(
        description=(
            "Privacy pause: stop the memory recording now (frames and audio of the current "
            "session are dropped unstored) until resume_recording or the session ends."
        )
    )
    @tool_errors
    async def pause_recording() -> PauseResponse:
        return await client.pause()

    @server.tool(description="End a privacy pause: the memory records again from now.")
    @tool_errors
    async def resume_recording() -> PauseResponse:
        return await client.resume()

    return server


def _confirmed(confirm: bool, tool: str, what: str) -> None:
    """Forgetting is final: a forget tool runs only when called again with confirm=true."""
    if confirm is not True:
        raise ToolError(
            f"{tool} deletes memory for good: call it again with confirm=true to forget {what}"
        )
