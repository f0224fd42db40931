"""An MCP server over the query API: one wearer's memory as tools for agents (``worldmm mcp``)."""

from apps.mcp.server import build_server

__all__ = ["build_server"]
