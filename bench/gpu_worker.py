"""GPU worker benchmark: clips/s, text queries/s and p95 latency at several batch sizes.

Runs the real service (uvicorn on a loopback port) around one backend and drives it with
``batch`` concurrent clients per round, the service's batch size set to the same number, so a
round is one full batch. Run:

    python -m bench.gpu_worker --backend offline --out gpu.json
    python -m bench.gpu_worker --random-model 2b --out gpu-2b.json     # on a GPU machine
    worldmm bench gpu-worker --random-model tiny --out tiny.json

Prints the JSON result; ``--out`` also writes it (and ``--plot`` draws the curves).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont

DEFAULT_BATCHES = (1, 4, 8, 16, 32)
QUERIES = (
    "the coffee shop sign",
    "a red car in the street",
    "where did I leave my phone",
    "reading a book at the kitchen table",
    "the green door",
    "people walking in the park",
)


def make_clip(seed: int, frames: int, size: tuple[int, int]) -> list[bytes]:
    """Synthetic frames: a coloured scene with a sign (so OCR has something to read)."""
    rng = np.random.default_rng(seed)
    base = tuple(int(c) for c in rng.integers(20, 235, 3))
    font = ImageFont.load_default(size=max(12, size[1] // 10))
    out = []
    for i in range(frames):
        image = Image.new("RGB", size, base)
        draw = ImageDraw.Draw(image)
        shift = i * size[0] // (4 * frames)
        draw.rectangle((shift, size[1] // 3, shift + size[0] // 2, size[1] // 2), fill=(240,) * 3)
        draw.text((shift + 8, size[1] // 3 + 4), f"SHOP {seed}", fill=(10, 10, 10), font=font)
        buf = io.BytesIO()
        image.save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def build_backend(
    backend: str,
    *,
    random_model: Literal["tiny", "2b"] | None,
    model_dir: Path | None,
    dim: int,
    device: str | None,
    ocr_frames: int,
):
    if random_model:
        import torch

        from apps.gpu_worker.backends.random_model import build_random_model
        from apps.gpu_worker.backends.vlm2vec import Vlm2VecBackend

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        model, tokenizer = build_random_model(random_model, device=device, dtype=dtype)
        return Vlm2VecBackend(model, tokenizer, label=f"random-{random_model} (Qwen2-VL shapes)")
    from apps.gpu_worker.backends import load_backend

    return load_backend(backend, dim=dim, model_dir=model_dir, ocr_frames=ocr_frames, device=device)


async def _round(client, path: str, payloads: list[dict]) -> list[float]:
    async def one(payload: dict) -> float:
        started = time.perf_counter()
        response = await client.post(path, **payload)
        response.raise_for_status()
        return time.perf_counter() - started

    return await asyncio.gather(*[one(p) for p in payloads])


async def _measure(url: str, batch: int, rounds: int, text_rounds: int, clips: list) -> dict:
    import httpx

    video_payloads = [
        {"files": [("frames", (f"{i}.jpg", f, "image/jpeg")) for i, f in enumerate(clip)]}
        for clip in clips
    ]
    # Drop idle connections before uvicorn does (5 s): reusing one it just closed is a ReadError.
    limits = httpx.Limits(max_connections=batch * 2, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        pick = [video_payloads[i % len(video_payloads)] for i in range(batch)]
        texts = [{"json": {"text": QUERIES[i % len(QUERIES)]}} for i in range(batch)]
        await _round(client, "/encode-video", pick[:1])  # warm-up: first-use model loading
        await _round(client, "/encode-text", texts[:1])
        video_lat: list[float] = []
        started = time.perf_counter()
        for r in range(rounds):
            pick = [video_payloads[(r * batch + i) % len(video_payloads)] for i in range(batch)]
            video_lat += await _round(client, "/encode-video", pick)
        video_s = time.perf_counter() - started
        text_lat: list[float] = []
        started = time.perf_counter()
        for _ in range(text_rounds):
            text_lat += await _round(client, "/encode-text", texts)
        text_s = time.perf_counter() - started
    return {
        "clips_per_s": round(len(video_lat) / video_s, 3),
        "texts_per_s": round(len(text_lat) / text_s, 3),
        "p95_ms": round(float(np.percentile(video_lat, 95)) * 1000, 1),
        "text_p95_ms": round(float(np.percentile(text_lat, 95)) * 1000, 1),
    }


def run_benchmark(
    *,
    backend: str = "offline",
    random_model: Literal["tiny", "2b"] | None = None,
    model_dir: Path | None = None,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    rounds: int = 3,
    text_rounds: int = 10,
    frames: int = 16,
    frame_size: tuple[int, int] = (640, 480),
    dim: int = 1536,
    device: str | None = None,
    ocr_frames: int = 4,
    max_wait_ms: float = 5.0,
    progress=None,
) -> dict:
    from apps.gpu_worker.app import WorkerConfig, create_app
    from apps.gpu_worker.threaded import ThreadedServer

    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    say(f"loading backend {random_model and 'random-' + random_model or backend} ...")
    encoder = build_backend(
        backend,
        random_model=random_model,
        model_dir=model_dir,
        dim=dim,
        device=device,
        ocr_frames=ocr_frames,
    )
    clips = [make_clip(seed, frames, frame_size) for seed in range(max(batches))]
    result: dict = {
        "backend": encoder.name,
        "model": encoder.model,
        "device": _device_name(encoder.device),
        "dim": encoder.dim,
        "frames_per_clip": frames,
        "frame_size": list(frame_size),
        "rounds": rounds,
        "text_rounds": text_rounds,
        "batches": {},
    }
    for batch in batches:
        config = WorkerConfig(batch_size=batch, max_wait_ms=max_wait_ms, queue_size=4 * batch)
        with ThreadedServer(create_app(encoder, config)) as server:
            figures = asyncio.run(_measure(server.url, batch, rounds, text_rounds, clips))
        result["batches"][str(batch)] = figures
        say(f"batch {batch:>3}: {figures}")
    return result


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    import platform

    return f"cpu ({platform.processor() or platform.machine()})"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [int(b) for b in result["batches"]]
    rows = list(result["batches"].values())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(sizes, [r["clips_per_s"] for r in rows], "o-", label="clips/s")
    left.plot(sizes, [r["texts_per_s"] for r in rows], "s-", label="text queries/s")
    left.set(xscale="log", yscale="log", xlabel="batch size", ylabel="per second")
    left.set_xticks(sizes, [str(s) for s in sizes])
    left.legend()
    right.plot(sizes, [r["p95_ms"] for r in rows], "o-", label="clip p95")
    right.plot(sizes, [r["text_p95_ms"] for r in rows], "s-", label="text p95")
    right.set(xscale="log", yscale="log", xlabel="batch size", ylabel="latency ms")
    right.set_xticks(sizes, [str(s) for s in sizes])
    right.legend()
    fig.suptitle(f"GPU worker: {result['model']} on {result['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu_worker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("offline", "vlm2vec"), default="offline")
    parser.add_argument(
        "--random-model",
        choices=("tiny", "2b"),
        default=None,
        help="VLM2Vec code path on random weights of this Qwen2-VL size",
    )
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    parser.add_argument("--rounds", type=int, default=3, help="full video batches per size")
    parser.add_argument("--text-rounds", type=int, default=10)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--frame-size", default="640x480")
    parser.add_argument("--dim", type=int, default=1536, help="offline backend dimension")
    parser.add_argument("--device", default=None)
    parser.add_argument("--ocr-frames", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    width, height = (int(x) for x in args.frame_size.lower().split("x"))
    result = run_benchmark(
        backend=args.backend,
        random_model=args.random_model,
        model_dir=args.model_dir,
        batches=tuple(int(b) for b in args.batches.split(",")),
        rounds=args.rounds,
        text_rounds=args.text_rounds,
        frames=args.frames,
        frame_size=(width, height),
        dim=args.dim,
        device=args.device,
        ocr_frames=args.ocr_frames,
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.plot:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main()
