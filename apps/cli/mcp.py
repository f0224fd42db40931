"""CLI: ``worldmm mcp --api URL --key KEY [--http PORT]``: the MCP server over one key's
memory (stdio by default, for agents that start it as a subprocess)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("mcp", help="Serve one user's memory as MCP tools (stdio, or --http PORT).")(mcp)


def mcp(
    api: Annotated[str, typer.Option(help="Query API base URL, e.g. http://127.0.0.1:8080.")],
    key: Annotated[
        str | None,
        typer.Option(
            help="The user's API key (default $WORLDMM_API_KEY; the env keeps it "
            "out of the process list)."
        ),
    ] = None,
    user: Annotated[
        str | None, typer.Option(help="Whose memory, when the key is the admin key.")
    ] = None,
    http: Annotated[
        int | None, typer.Option("--http", help="Serve streamable HTTP on this port.")
    ] = None,
    host: Annotated[str, typer.Option(help="Bind address for --http.")] = "127.0.0.1",
) -> None:
    import anyio

    from apps.client import ApiError, AsyncWorldMMClient
    from apps.mcp import build_server

    key = key or os.environ.get("WORLDMM_API_KEY")
    if not key:
        print("error: give --key or set WORLDMM_API_KEY", file=sys.stderr)
        raise typer.Exit(2)

    async def check() -> str:
        async with AsyncWorldMMClient(api, key, user) as probe:
            return await probe.resolve_user()

    try:  # fail at start, with the API's own message, rather than on every tool call
        user_id = anyio.run(check)
    except ApiError as exc:
        print(f"error: the API at {api} refused the key: {exc.detail}", file=sys.stderr)
        raise typer.Exit(2) from None
    except ValueError as exc:
        print(f"error: {exc} (--user)", file=sys.stderr)
        raise typer.Exit(2) from None

    client = AsyncWorldMMClient(api, key, user_id)
    server = build_server(client)
    # stdout carries the protocol on stdio: everything else goes to stderr
    print(f"worldmm mcp: memory of {user_id!r} via {api}", file=sys.stderr)
    if http is None:
        server.run("stdio")
    else:
        print(f"worldmm mcp: streamable HTTP at http://{host}:{http}/mcp", file=sys.stderr)
        if host not in ("127.0.0.1", "localhost", "::1"):
            # the endpoint has no auth of its own: whoever reaches it acts with this key
            print(
                f"warning: {host} is not loopback; anyone who can reach port {http} can read "
                "and forget this user's memory. Put it behind an authenticating proxy.",
                file=sys.stderr,
            )
        server.run("streamable-http", host=host, port=http)
