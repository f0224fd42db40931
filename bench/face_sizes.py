"""Face detection size: cost and recall of detecting on a smaller copy of a 512×512 frame
(docs/privacy.md). Per detection size: detection and whole-blur time (wall and CPU), in
interleaved rounds, and recall of the faces found at the largest size, by face height. Frames:
photographs with a face from installed packages, tiled at 1/2 … 1/5, or ``--frames DIR``.
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
from pydantic import Field

from bench import harness
from bench.harness import IntList, percentile
from worldmm.privacy.faces import Box, FaceDetector, FrameBlurrer

FRAME = 512


def photos() -> dict[str, np.ndarray]:
    """RGB 512×512 crops of the shipped photographs with a face."""
    import matplotlib.cbook
    from skimage import data

    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        hopper = cv2.imdecode(np.frombuffer(f.read(), np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
    side = min(hopper.shape[:2])
    hopper = cv2.resize(np.ascontiguousarray(hopper[:side, :side]), (FRAME, FRAME))
    camera = np.dstack([data.camera()] * 3)
    return {"astronaut": data.astronaut(), "cameraman": camera, "hopper": hopper}


def tiled(photo: np.ndarray, k: int) -> np.ndarray:
    """The photo shrunk k times, tiled k×k into a 512×512 frame (k² faces, 1/k the size)."""
    small = cv2.resize(photo, (FRAME // k, FRAME // k), interpolation=cv2.INTER_AREA)
    return cv2.resize(np.tile(small, (k, k, 1)), (FRAME, FRAME))


def frames() -> dict[str, np.ndarray]:
    return {f"{name}/{k}": tiled(p, k) for name, p in photos().items() for k in range(1, 6)}


HEIGHTS = (24, 32, 48, 64)


def _bin(height: int) -> str:
    lo = max((h for h in HEIGHTS if h <= height), default=0)
    hi = min((h for h in HEIGHTS if h > height), default=None)
    return f"{lo:03d}-{hi}" if hi else f"{lo:03d}+"


def from_folder(folder: Path) -> dict[str, np.ndarray]:
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    return {p.name: cv2.imread(str(p), cv2.IMREAD_COLOR)[..., ::-1].copy() for p in paths}


def _iou(a: Box, b: Box) -> float:
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else 0.0


def found(ref: Box, boxes: list[Box]) -> bool:
    cx, cy = (ref[0] + ref[2]) / 2, (ref[1] + ref[3]) / 2
    return any(_iou(ref, b) >= 0.3 or (b[0] <= cx < b[2] and b[1] <= cy < b[3]) for b in boxes)


def measure(
    sizes: list[int], rounds: int, threshold: float, images: dict[str, np.ndarray] | None = None
) -> dict:
    images = images if images is not None else frames()
    jpegs = {
        n: cv2.imencode(".jpg", im[..., ::-1].copy(), [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
        for n, im in images.items()
    }
    detectors = {s: FaceDetector(threshold=threshold, max_side=s) for s in sizes}
    boxes = {
        s: {n: [d.box for d in det.detect(im)] for n, im in images.items()}
        for s, det in detectors.items()
    }
    ref = boxes[max(sizes)]
    # seconds per frame by size: detection, the whole blur, and its CPU time (all threads)
    timed: dict[str, dict[int, list[float]]] = {
        k: {s: [] for s in sizes} for k in ("detect", "blur_frame", "blur_frame_cpu")
    }
    for _ in range(rounds):  # interleaved: each round runs every size on every frame
        for s, det in detectors.items():
            t = time.perf_counter()
            for im in images.values():
                det.detect(im)
            timed["detect"][s].append((time.perf_counter() - t) / len(images))
            blur = FrameBlurrer(det)
            t, c = time.perf_counter(), time.process_time()
            for jpeg in jpegs.values():
                blur(jpeg)
            timed["blur_frame"][s].append((time.perf_counter() - t) / len(images))
            timed["blur_frame_cpu"][s].append((time.process_time() - c) / len(images))
    out: dict = {"frames": len(images), "reference_faces": sum(map(len, ref.values()))}
    for s in sizes:
        by_height: dict[str, list[int]] = {}  # reference face height (px of the frame)
        for n, refs in ref.items():
            for r in refs:
                hits = by_height.setdefault(_bin(r[3] - r[1]), [0, 0])
                hits[0] += found(r, boxes[s][n])
                hits[1] += 1
        hit, total = (sum(v[i] for v in by_height.values()) for i in (0, 1))
        row = {
            "recall": round(hit / total, 3) if total else None,
            "recall_by_face_height_px": {b: f"{h}/{t}" for b, (h, t) in sorted(by_height.items())},
            "faces_found": sum(map(len, boxes[s].values())),
        }
        if rounds:
            mid = {k: percentile(v[s], 50) or 0.0 for k, v in timed.items()}
            row |= {f"{k}_ms": round(1000 * v, 1) for k, v in mid.items()}
            full = percentile(timed["detect"][max(sizes)], 50) or 1.0
            row["relative_detect"] = round(mid["detect"] / full, 2)
        out[str(s)] = row
    return out


class FaceSizeOptions(harness.Options):
    sizes: IntList = Field(
        (512, 384, 320, 256), description="Detection sizes; the largest is the reference."
    )
    rounds: int = Field(5, ge=0, description="Timed rounds (every size on every frame).")
    threshold: float = Field(0.4, description="Face detector score a face needs.")
    frames: Path | None = Field(None, description="A folder of frames instead of the photos.")


@harness.main(FaceSizeOptions, required=())
def main(opts: FaceSizeOptions) -> dict:
    """Cost and recall of detecting faces on a smaller copy of a frame, by detection size."""
    run, images = harness.Run(), from_folder(opts.frames) if opts.frames else None
    figures = measure(list(opts.sizes), opts.rounds, opts.threshold, images)
    report = run.stamp({"benchmark": "face-sizes", "threshold": opts.threshold, **figures})
    harness.write_report(report, opts.out)
    return report


if __name__ == "__main__":
    main()
