"""What the routes do, as plain functions over :class:`worldmm.deps.Deps` (no FastAPI here,
so the CLI can run the same code in-process)."""
