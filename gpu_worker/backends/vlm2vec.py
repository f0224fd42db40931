"""VLM2Vec-V2 backend: a Qwen2-VL model used as an embedder (last-token pooling).

Weights come from a local directory only (``local_files_only``); nothing is fetched from a hub.
The directory must hold a merged Qwen2-VL checkpoint (config.json, safetensors, tokenizer files,
optionally preprocessor_config.json). bf16 on CUDA when present, float32 on CPU.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
from PIL import Image

from gpu_worker.backends.vlm2vec_inputs import VisionGeometry, video_patches, video_token_count

# VLM2Vec-V2's instructions for text→video retrieval (query side and video side).
TEXT_INSTRUCTION = "Find a video that contains the following visual content: "
VIDEO_INSTRUCTION = "Understand the content of the provided video."
VIDEO_TYPE = 2  # mm_token_type_ids: text 0, image 1, video 2


class ModelNotFound(FileNotFoundError):
    """The model directory is missing or incomplete."""


class Vlm2VecBackend:
    name = "vlm2vec"

    def __init__(self, model, tokenizer, *, label: str, geometry: VisionGeometry | None = None):
        import torch

        self._torch = torch
        self._model = model.eval()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        config = model.config
        self.model = label
        self.dim = int(config.text_config.hidden_size)
        self.device = str(next(model.parameters()).device)
        vision = config.vision_config
        self._geo = geometry or VisionGeometry(
            patch_size=vision.patch_size,
            merge_size=vision.spatial_merge_size,
            temporal_patch_size=vision.temporal_patch_size,
        )
        self._ids = {
            "video": config.video_token_id,
            "start": config.vision_start_token_id,
            "end": config.vision_end_token_id,
            "pad": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        }
        self._video_suffix = self._encode("\n" + VIDEO_INSTRUCTION + "\n")

    # --- loading ---------------------------------------------------------------------
    @classmethod
    def load(cls, model_dir: Path, *, device: str | None = None) -> Vlm2VecBackend:
        import torch
        from transformers import AutoTokenizer, Qwen2VLForConditionalGeneration

        model_dir = Path(model_dir).expanduser()
        if not (model_dir / "config.json").is_file():
            raise ModelNotFound(
                f"{model_dir} has no config.json: put a merged VLM2Vec-V2 (Qwen2-VL) checkpoint "
                "there (weights, config and tokenizer files)"
            )
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        model = Qwen2VLForConditionalGeneration.from_pretrained(
            model_dir, local_files_only=True, dtype=dtype
        ).to(device)
        geometry = _geometry_from(model_dir, model)
        return cls(model, tokenizer, label=str(model_dir), geometry=geometry)

    # --- encoding --------------------------------------------------------------------
    def encode_texts(self, texts: list[str]) -> np.ndarray:
        rows = [(self._encode(TEXT_INSTRUCTION + t + "\n"), None) for t in texts]
        return self._embed(rows, pixel_values=None, grids=None)

    def encode_videos(self, clips: list[list[Image.Image]]) -> np.ndarray:
        rows, patches, grids = [], [], []
        for frames in clips:
            flat, grid = video_patches(frames, self._geo)
            n = video_token_count(grid, self._geo)
            ids = [self._ids["start"], *([self._ids["video"]] * n), self._ids["end"]]
            rows.append((ids + self._video_suffix, (1, n)))
            patches.append(flat)
            grids.append(grid)
        return self._embed(rows, pixel_values=np.concatenate(patches), grids=grids)

    def _encode(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _embed(self, rows, *, pixel_values, grids) -> np.ndarray:
        torch = self._torch
        length = max(len(ids) for ids, _ in rows)
        batch = len(rows)
        input_ids = torch.full((batch, length), self._ids["pad"], dtype=torch.long)
        attention = torch.zeros((batch, length), dtype=torch.long)
        types = torch.zeros((batch, length), dtype=torch.int)
        for i, (ids, video_span) in enumerate(rows):
            offset = length - len(ids)  # left padding: the last position is every row's last token
            input_ids[i, offset:] = torch.tensor(ids)
            attention[i, offset:] = 1
            if video_span is not None:
                start, n = video_span
                types[i, offset + start : offset + start + n] = VIDEO_TYPE
        device = self.device
        kwargs = {}
        grid_tensor = None
        if pixel_values is not None:
            grid_tensor = torch.tensor(grids, dtype=torch.long, device=device)
            dtype = next(self._model.parameters()).dtype
            kwargs["pixel_values_videos"] = torch.from_numpy(pixel_values).to(device, dtype)
            kwargs["video_grid_thw"] = grid_tensor
        input_ids, attention, types = input_ids.to(device), attention.to(device), types.to(device)
        with self._lock, torch.inference_mode():
            inner = self._model.model
            # Positions computed here (M-RoPE for video, padding-aware for text): the model's
            # own fallback for text-only input ignores left padding.
            positions, _ = inner.get_rope_index(
                input_ids, types, video_grid_thw=grid_tensor, attention_mask=attention
            )
            out = inner(
                input_ids=input_ids,
                attention_mask=attention,
                position_ids=positions,
                mm_token_type_ids=types,
                use_cache=False,
                **kwargs,
            )
            last = out.last_hidden_state[:, -1, :].float()
            last = torch.nn.functional.normalize(last, dim=-1)
        return last.cpu().numpy().astype(np.float32)


def _geometry_from(model_dir: Path, model) -> VisionGeometry:
    """Take patch sizes from the model config and mean/std from preprocessor_config.json."""
    vision = model.config.vision_config
    geo = dict(
        patch_size=vision.patch_size,
        merge_size=vision.spatial_merge_size,
        temporal_patch_size=vision.temporal_patch_size,
    )
    pre = model_dir / "preprocessor_config.json"
    if pre.is_file():
        data = json.loads(pre.read_text())
        if "image_mean" in data and "image_std" in data:
            geo.update(mean=tuple(data["image_mean"]), std=tuple(data["image_std"]))
    return VisionGeometry(**geo)
