"""GPU worker benchmark: clips/s, text queries/s and p95 latency at several batch sizes, the
real service around one backend driven by ``batch`` concurrent clients per round (one full
batch); docs/gpu-worker.md.

    python -m bench.gpu_worker --random-model 2b --out gpu-2b.json     # on a GPU machine
"""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import Field

from bench import harness
from bench.harness import Echo, IntList, percentile, words


class GpuOptions(harness.Options):
    backend: Literal["offline", "vlm2vec"] = Field("offline", description="The encoder.")
    random_model: Literal["tiny", "2b"] | None = Field(
        None, description="The VLM2Vec code path on random weights of this Qwen2-VL size."
    )
    model_dir: Path | None = Field(None, description="VLM2Vec-V2 checkpoint dir.")
    batches: IntList = Field((1, 4, 8, 16, 32), description="Batch sizes, comma-separated.")
    rounds: int = Field(3, description="Full video batches per size.")
    text_rounds: int = Field(10, description="Full text batches per size.")
    frames: int = Field(16, description="Frames per clip.")
    frame_size: str = Field("640x480", pattern=r"^\d+x\d+$", description="Frame WIDTHxHEIGHT.")
    dim: int = Field(1536, description="The offline backend's dimension.")
    device: str | None = Field(None, description="cpu | cuda (default: the best there is).")
    ocr_frames: int = Field(4, description="Frames per clip the offline backend reads text of.")
    plot: Path | None = Field(None, description="Also draw the curves (PNG).")
    max_wait_ms: float = 5.0  # the service's batching wait


QUERIES = words(
    "the coffee shop sign, a red car in the street, where did I leave my phone,"
    " reading a book at the kitchen table, the green door, people walking in the park"
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


def build_backend(opts: GpuOptions):
    device = opts.device
    if opts.random_model:
        import torch

        from gpu_worker.backends.random_model import build_random_model
        from gpu_worker.backends.vlm2vec import Vlm2VecBackend

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        model, tokenizer = build_random_model(opts.random_model, device=device, dtype=dtype)
        label = f"random-{opts.random_model} (Qwen2-VL shapes)"
        return Vlm2VecBackend(model, tokenizer, label=label)
    from gpu_worker.backends import load_backend

    kwargs = opts.model_dump(include={"dim", "model_dir", "ocr_frames"})
    return load_backend(opts.backend, device=device, **kwargs)


async def _rounds(client, path: str, rounds: list[list[dict]]) -> tuple[list[float], float]:
    """Each round's requests at once, rounds one after another: latencies and seconds."""

    async def one(payload: dict) -> float:
        started = time.perf_counter()
        (await client.post(path, **payload)).raise_for_status()
        return time.perf_counter() - started

    latencies: list[float] = []
    started = time.perf_counter()
    for payloads in rounds:
        latencies += await asyncio.gather(*[one(p) for p in payloads])
    return latencies, time.perf_counter() - started


async def _measure(url: str, batch: int, rounds: int, text_rounds: int, clips: list) -> dict:
    import httpx

    videos = [
        {"files": [("frames", (f"{i}.jpg", f, "image/jpeg")) for i, f in enumerate(clip)]}
        for clip in clips
    ]
    texts = [{"json": {"text": QUERIES[i % len(QUERIES)]}} for i in range(batch)]
    video_rounds = [
        [videos[(r * batch + i) % len(videos)] for i in range(batch)] for r in range(rounds)
    ]
    # Drop idle connections before uvicorn does (5 s): reusing one it just closed is a ReadError.
    limits = httpx.Limits(max_connections=batch * 2, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        await _rounds(client, "/encode-video", [videos[:1]])  # warm-up: first-use model loading
        await _rounds(client, "/encode-text", [texts[:1]])
        video_lat, video_s = await _rounds(client, "/encode-video", video_rounds)
        text_lat, text_s = await _rounds(client, "/encode-text", [texts] * text_rounds)
    return {
        "clips_per_s": round(len(video_lat) / video_s, 3),
        "texts_per_s": round(len(text_lat) / text_s, 3),
        "p95_ms": round(1000 * (percentile(video_lat, 95) or 0.0), 1),
        "text_p95_ms": round(1000 * (percentile(text_lat, 95) or 0.0), 1),
    }


def run_benchmark(opts: GpuOptions, say: Echo) -> dict:
    from gpu_worker.app import WorkerConfig, create_app
    from gpu_worker.threaded import ThreadedServer

    run = harness.Run()
    say(f"loading backend {opts.random_model and 'random-' + opts.random_model or opts.backend}")
    encoder = build_backend(opts)
    frame_size = tuple(int(x) for x in opts.frame_size.split("x"))
    clips = [make_clip(seed, opts.frames, frame_size) for seed in range(max(opts.batches))]
    result: dict = {
        "backend": encoder.name,
        "model": encoder.model,
        "device": _device_name(encoder.device),
        "dim": encoder.dim,
        "frames_per_clip": opts.frames,
        "frame_size": list(frame_size),
        "rounds": opts.rounds,
        "text_rounds": opts.text_rounds,
        "batches": {},
    }
    for batch in opts.batches:
        config = WorkerConfig(batch_size=batch, max_wait_ms=opts.max_wait_ms, queue_size=4 * batch)
        with ThreadedServer(create_app(encoder, config)) as server:
            figures = asyncio.run(_measure(server.url, batch, opts.rounds, opts.text_rounds, clips))
        result["batches"][str(batch)] = figures
        say(f"batch {batch:>3}: {figures}")
    return run.stamp(result)


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    import platform

    return f"cpu ({platform.processor() or platform.machine()})"


def plot(result: dict, path: Path) -> None:
    plt = harness.pyplot()
    sizes = [int(b) for b in result["batches"]]
    rows = list(result["batches"].values())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    series = (
        (left, "clips_per_s", "o-", "clips/s"),
        (left, "texts_per_s", "s-", "text queries/s"),
        (right, "p95_ms", "o-", "clip p95"),
        (right, "text_p95_ms", "s-", "text p95"),
    )
    for ax, key, style, label in series:
        ax.plot(sizes, [r[key] for r in rows], style, label=label)
    for ax, ylabel in ((left, "per second"), (right, "latency ms")):
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel=ylabel)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.legend()
    fig.suptitle(f"GPU worker: {result['model']} on {result['device']}")
    harness.save_figure(fig, path)


@harness.main(GpuOptions, required=())
def main(opts: GpuOptions) -> dict:
    """Clips/s, text queries/s and p95 latency of the GPU worker at several batch sizes."""
    result = run_benchmark(opts, harness.stamped_echo())
    harness.write_report(result, opts.out)
    if opts.plot:
        plot(result, opts.plot)
    return result


if __name__ == "__main__":
    main()
