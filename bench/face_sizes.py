"""Face detection size: cost and recall of detecting on a smaller copy of a 512×512 frame.

For each detection size (the detector's ``max_side``) it times detection and the whole
blur of a frame (decode, detect, blur, encode; wall and CPU time of all threads) in
interleaved rounds, so every size sees the same machine load, and counts how many of the
faces found at full size (512) are found again (box centre inside a reference box, or
IoU ≥ 0.3), by the face's height. Run:

    python -m bench.face_sizes --sizes 512,384,320,256 --rounds 5
    python -m bench.face_sizes --frames DIR --sizes 1280,640,384   # your own frames

The frames are the real photographs with faces that ship in installed packages
(scikit-image's astronaut and cameraman, matplotlib's Grace Hopper), each also tiled at
1/2 … 1/5 of its size into a 512×512 frame: the same real faces, smaller. Three faces are a
probe of how recall falls with face size, not a quality claim for wearers' frames; a claim
needs real egocentric frames with bystanders (``--frames``: a folder of JPEG/PNG frames; the
largest of ``--sizes`` is the reference, so give the frames' own size).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import cv2
import numpy as np

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
    detect_s: dict[int, list[float]] = {s: [] for s in sizes}
    blur_s: dict[int, list[float]] = {s: [] for s in sizes}
    blur_cpu: dict[int, list[float]] = {s: [] for s in sizes}  # all threads' CPU time
    for _ in range(rounds):  # interleaved: each round runs every size on every frame
        for s, det in detectors.items():
            t = time.perf_counter()
            for im in images.values():
                det.detect(im)
            detect_s[s].append((time.perf_counter() - t) / len(images))
            blur = FrameBlurrer(det)
            t, c = time.perf_counter(), time.process_time()
            for jpeg in jpegs.values():
                blur(jpeg)
            blur_s[s].append((time.perf_counter() - t) / len(images))
            blur_cpu[s].append((time.process_time() - c) / len(images))
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
            row["detect_ms"] = round(1000 * statistics.median(detect_s[s]), 1)
            row["blur_frame_ms"] = round(1000 * statistics.median(blur_s[s]), 1)
            row["blur_frame_cpu_ms"] = round(1000 * statistics.median(blur_cpu[s]), 1)
            row["relative_detect"] = round(
                statistics.median(detect_s[s]) / statistics.median(detect_s[max(sizes)]), 2
            )
        out[str(s)] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="512,384,320,256")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threshold", type=float, default=0.4)
    p.add_argument("--frames", type=Path, help="a folder of frames instead of the photos")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    images = from_folder(a.frames) if a.frames else None
    print(json.dumps(measure(sizes, a.rounds, a.threshold, images), indent=2))


if __name__ == "__main__":
    main()
