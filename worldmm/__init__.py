"""WorldMM Live: the core library (settings, models, LLM, embeddings, ASR, store, memory,
graph, agent). It imports neither FastAPI nor Bytewax; the services wrap it."""

__version__ = "0.1.0"
