"""What the routes do, as plain functions over :class:`ServiceDeps` (no FastAPI here, so the
CLI can run the same code in-process)."""
