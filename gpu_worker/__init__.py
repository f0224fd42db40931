"""The GPU encoder service (FastAPI): VLM2Vec-V2 or the offline CPU backend, with dynamic
batching. Build an app with :func:`gpu_worker.app.create_app`; run it with
``worldmm gpu-worker``."""
