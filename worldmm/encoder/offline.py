"""The offline visual embedding: runs on a CPU with models shipped inside wheels.

What it captures, honestly: the text visible in the frames (rapidocr, embedded with MiniLM)
and the clip's colour make-up (named-colour shares). A query lands in the same space through
MiniLM of the query text and the colour words it names. So "the coffee shop sign" finds a clip
whose frames show "COFFEE SHOP", and "the red door" favours clips that are largely red. It
does not recognise objects, people, actions or scenes; a clip without legible text is only its
colours. See docs/gpu-worker.md.

Layout of a vector (before L2 normalisation):
    [0, 384)    MiniLM of the OCR text (video) / of the query (text); zeros when absent
    [384, 395)  colour vector (video: sqrt of colour shares; text: named colours)
    [395, dim)  zeros — or, when dim < 395, a fixed seeded random projection of the 395 values
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
from PIL import Image

from worldmm.encoder.colours import COLOURS, clip_colour_vector, query_colour_vector
from worldmm.encoder.frames import check_text, decode_frames

TEXT_DIM = 384
CORE_DIM = TEXT_DIM + len(COLOURS)
OCR_MIN_SCORE = 0.5
OCR_MAX_SIDE = 960
_DUPLICATE_DIFF = 6.0  # mean abs grey-level difference below which a frame is not re-OCR'd
_PROJECTION_SEED = 1536


class OfflineVisualEmbedder:
    """Synchronous, thread-safe; models load on first use (MiniLM ≈5 s, rapidocr ≈1 s)."""

    name = "offline"
    description = "offline: OCR text (rapidocr) + MiniLM, and named-colour shares"

    def __init__(
        self, dim: int, *, ocr_frames: int = 4, text_weight: float = 1.0, colour_weight: float = 1.0
    ) -> None:
        if dim < 8:
            raise ValueError(f"dimension must be at least 8, got {dim}")
        self.dim = dim
        self.ocr_frames = ocr_frames
        self._weights = (text_weight, colour_weight)
        self._lock = threading.Lock()
        self._minilm = None
        self._ocr = None
        self._projection = _projection(dim) if dim < CORE_DIM else None

    # --- public ---------------------------------------------------------------------------
    def embed_videos(self, clips: Sequence[Sequence[Image.Image]]) -> np.ndarray:
        with self._lock:
            texts = [self._clip_text(frames) for frames in clips]
            text_vecs = self._embed_texts(texts)
            colours = np.stack([clip_colour_vector(list(frames)) for frames in clips])
        return self._finish(text_vecs, colours)

    def embed_texts(self, queries: Sequence[str]) -> np.ndarray:
        with self._lock:
            text_vecs = self._embed_texts(list(queries))
        colours = np.stack([query_colour_vector(q) for q in queries])
        return self._finish(text_vecs, colours)

    # --- parts ----------------------------------------------------------------------------
    def _finish(self, text_vecs: np.ndarray, colours: np.ndarray) -> np.ndarray:
        wt, wc = self._weights
        core = np.concatenate([wt * text_vecs, wc * colours], axis=1).astype(np.float32)
        if self._projection is not None:
            out = core @ self._projection
        else:
            out = np.zeros((len(core), self.dim), np.float32)
            out[:, :CORE_DIM] = core
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), TEXT_DIM), np.float32)
        present = [i for i, t in enumerate(texts) if t.strip()]
        if present:
            vecs = self._load_minilm().embed([texts[i] for i in present])
            out[present] = np.asarray(vecs, np.float32)
        return out

    def _clip_text(self, frames: Sequence[Image.Image]) -> str:
        lines: list[str] = []
        for frame in _distinct_frames(frames, self.ocr_frames):
            for line in self._read_text(frame):
                if line not in lines:
                    lines.append(line)
        return " ".join(lines)

    def _read_text(self, frame: Image.Image) -> list[str]:
        engine = self._load_ocr()
        image = frame.convert("RGB")
        if max(image.size) > OCR_MAX_SIDE:
            image.thumbnail((OCR_MAX_SIDE, OCR_MAX_SIDE))
        result, _ = engine(np.asarray(image))
        return [
            str(text).strip()
            for _, text, score in (result or [])
            if float(score) >= OCR_MIN_SCORE and str(text).strip()
        ]

    def _load_minilm(self):
        if self._minilm is None:
            # The project's text embedder: one MiniLM per process, shared with text memory.
            from worldmm.embed.local import MiniLMEmbedder

            self._minilm = MiniLMEmbedder()
        return self._minilm

    def _load_ocr(self):
        if self._ocr is None:
            from rapidocr_onnxruntime import RapidOCR

            self._ocr = RapidOCR()
        return self._ocr


def _distinct_frames(frames: Sequence[Image.Image], limit: int) -> list[Image.Image]:
    """Up to ``limit`` evenly spaced frames, skipping ones that look like the last kept one."""
    if limit <= 0 or not frames:
        return []
    step = max(1, len(frames) / limit)
    picked = [frames[min(len(frames) - 1, int(i * step))] for i in range(min(limit, len(frames)))]
    kept: list[Image.Image] = []
    last = None
    for frame in picked:
        thumb = np.asarray(frame.convert("L").resize((32, 32)), np.float32)
        if last is None or np.abs(thumb - last).mean() >= _DUPLICATE_DIFF:
            kept.append(frame)
            last = thumb
    return kept


def _projection(dim: int) -> np.ndarray:
    """A fixed Gaussian projection CORE_DIM → dim (approximately preserves cosines)."""
    rng = np.random.default_rng(_PROJECTION_SEED)
    return (rng.standard_normal((CORE_DIM, dim)) / np.sqrt(dim)).astype(np.float32)


class InProcessOfflineEncoder:
    """The :class:`VisualEncoder` running the offline algorithm in this process (no HTTP).

    Work runs in a thread so an event loop is never blocked by OCR or MiniLM.
    """

    def __init__(
        self, dim: int, *, ocr_frames: int = 4, embedder: OfflineVisualEmbedder | None = None
    ) -> None:
        self._embedder = embedder or OfflineVisualEmbedder(dim, ocr_frames=ocr_frames)
        self.dim = self._embedder.dim

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:
        images = await asyncio.to_thread(decode_frames, frames)  # JPEG decoding is CPU work
        return (await asyncio.to_thread(self._embedder.embed_videos, [images]))[0]

    async def encode_text(self, text: str) -> np.ndarray:
        query = check_text(text)
        return (await asyncio.to_thread(self._embedder.embed_texts, [query]))[0]

    async def aclose(self) -> None:
        return None
