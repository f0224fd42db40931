"""The programs built on the core library: CLI, demo, MCP server, client, query API,
dataflow and GPU worker. Nothing in ``worldmm`` or ``connectors`` imports from here."""
