"""The detection-size probe at its smallest: one photograph at full size and tiled 5×5 (its
face 1/5 the size), two sizes, one timed round."""

from __future__ import annotations

import cv2
from skimage import data

from bench.face_sizes import from_folder, measure, tiled


def test_face_size_probe_reports_cost_and_recall_by_face_height(tmp_path) -> None:
    photo = data.astronaut()
    cv2.imwrite(str(tmp_path / "a.png"), photo[..., ::-1])
    images = {**from_folder(tmp_path), "tiled": tiled(photo, 5)}
    assert (images["a.png"] == photo).all()

    out = measure([512, 256], rounds=1, threshold=0.4, images=images)
    full, small = out["512"], out["256"]
    assert out["reference_faces"] == full["faces_found"] == 26  # 1 + 25 tiled
    assert full["recall"] == 1.0
    assert small["recall_by_face_height_px"]["064+"] == "1/1"  # the full-size face stays
    assert small["recall"] < 0.2  # the faces under 32 px are lost at 256
    assert small["relative_detect"] < 1 and full["blur_frame_cpu_ms"] > 0
