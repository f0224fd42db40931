"""Benchmarks (``worldmm bench ...``; each module also runs as ``python -m bench.<name>``)."""
