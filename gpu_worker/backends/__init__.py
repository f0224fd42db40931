"""Encoder backends of the GPU worker: ``vlm2vec`` (weights from a local directory) and
``offline`` (CPU, no download)."""

from __future__ import annotations

from pathlib import Path

from gpu_worker.backends.base import EncoderBackend


def load_backend(
    name: str,
    *,
    dim: int,
    model_dir: Path | None = None,
    ocr_frames: int = 4,
    device: str | None = None,
) -> EncoderBackend:
    if name == "offline":
        from gpu_worker.backends.offline import OfflineBackend

        return OfflineBackend(dim, ocr_frames=ocr_frames)
    if name == "vlm2vec":
        from gpu_worker.backends.vlm2vec import ModelNotFound, Vlm2VecBackend

        if model_dir is None:
            raise ModelNotFound(
                "the vlm2vec backend needs --model-dir (or WORLDMM_GPU_MODEL_DIR): a local "
                "VLM2Vec-V2 checkpoint directory; nothing is downloaded"
            )
        return Vlm2VecBackend.load(model_dir, device=device)
    raise ValueError(f"unknown backend {name!r}; expected 'vlm2vec' or 'offline'")


__all__ = ["EncoderBackend", "load_backend"]
