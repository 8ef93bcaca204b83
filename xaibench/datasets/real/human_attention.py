"""``human-attention``: Langlois et al. (NeurIPS 2021), "Passive attention in artificial
neural networks predicts human visual selectivity", read from the upstream repository's
own layout (github.com/czhao39/neurips-attention)::

    images/all/image_r_<id>.jpg          natural scenes (405 x 405 RGB)
    human-maps/img<id>_<kind>.mat        MATLAB v5, one float array under the key ``map``

Seven map kinds (``map_kind``): ``objFIX``, ``salFIX``, ``freeFIX`` (eye fixations in
object search, saliency search and free viewing), ``chainKDE`` (serial reproduction),
``discr`` (discrimination accuracy), ``patchRate`` (patch ratings) and ``humanPC`` (the
first principal component of the human maps). **Default: ``humanPC``**, the component
the six tasks share (and the upstream notebook's default view); its negative values
(below-average selectivity) are clipped, which also gives a meaningful ``levels > 0``
region, whereas the KDE-type maps are positive almost everywhere.

Ground truth is ``GroundTruth(levels=M)`` at the image's size: the map is resized
bilinear to the image's height and width (rows stay rows: no flip, no transpose, as
the upstream notebook overlays it), negatives are clipped to 0 (the clipped fraction
is in ``notes`` and ``meta["negative_fraction"]``) and the result divided by its max
(DESIGN 2). There are no class labels: ``label`` and ``target`` are ``None`` and the
explained class is the model's prediction (``meta["target_source"] = "predicted"``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_rgb
from xaibench.datasets.real.common import LayoutError, RealDataset, require
from xaibench.imaging import resize_bilinear

MAP_KINDS: tuple[str, ...] = ("objFIX", "salFIX", "freeFIX", "chainKDE", "discr", "patchRate", "humanPC")
DEFAULT_MAP_KIND = "humanPC"
_IMAGE_RE = re.compile(r"^image_r_(\d+)\.jpg$")
_COMMIT = "ee580ee2ec74d98384e2510fc0fcabe0e0f7fbcd"


def load_map(path: Path) -> np.ndarray:
    """The 2-D float64 array under key ``map`` of a MATLAB file; ``ValueError`` naming the file otherwise."""
    from scipy.io import loadmat

    try:
        contents = loadmat(str(path))
    except (OSError, ValueError, NotImplementedError) as exc:
        raise ValueError(f"{path}: cannot read MATLAB file ({type(exc).__name__}: {exc})") from exc
    if "map" not in contents:
        keys = sorted(k for k in contents if not k.startswith("__"))
        raise ValueError(f"{path}: no variable 'map' (found {keys})")
    arr = np.asarray(contents["map"], dtype=np.float64)
    if arr.ndim != 2 or min(arr.shape) < 1:
        raise ValueError(f"{path}: 'map' must be a 2-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{path}: 'map' holds NaN or infinite values")
    return arr


def human_map_levels(raw: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, float]:
    """Resize (bilinear, no flip) to ``size``, clip negatives, scale by the max.

    Returns ``(levels in [0, 1] float32, fraction of pixels that were negative)``. A map
    with no positive value becomes all zeros.
    """
    resized = resize_bilinear(raw, size)
    negative = float(np.mean(resized < 0))
    clipped = np.clip(resized, 0.0, None)
    top = float(clipped.max())
    levels = clipped / top if top > 0 else np.zeros_like(clipped)
    return levels.astype(np.float32), negative


class HumanAttentionDataset(RealDataset):
    """Langlois et al. 2021 natural scenes with seven kinds of human attention maps."""

    name: ClassVar[str] = "human-attention"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Langlois et al. (NeurIPS 2021) natural scenes with continuous human attention maps "
        "(7 kinds; default humanPC); no labels, the predicted class is explained"
    )
    licence: ClassVar[str] = "images CC BY 4.0; human maps research use (cite Langlois et al. 2021)"
    source: ClassVar[str] = "https://github.com/czhao39/neurips-attention"
    folder_names: ClassVar[tuple[str, ...]] = ("neurips-attention",)
    layout: ClassVar[str] = """
images/all/image_r_<id>.jpg
human-maps/img<id>_<kind>.mat   (key 'map'; kind one of objFIX salFIX freeFIX chainKDE discr patchRate humanPC)
"""
    get_from: ClassVar[str] = "https://github.com/czhao39/neurips-attention (folders images/ and human-maps/)"
    downloads: ClassVar[tuple[tuple[str, str], ...]] = (
        (f"https://github.com/czhao39/neurips-attention/archive/{_COMMIT}.zip", ""),
    )

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        map_kind: str = DEFAULT_MAP_KIND,
        download: bool = False,
    ) -> None:
        if map_kind not in MAP_KINDS:
            raise ValueError(f"human-attention: unknown map_kind {map_kind!r}; choose one of {', '.join(MAP_KINDS)}")
        super().__init__(root=root, download=download)
        self.map_kind = map_kind
        self.label_names = ()
        images = self.root / "images" / "all"
        maps = self.root / "human-maps"
        ids = sorted(
            (int(m.group(1)) for p in images.iterdir() if (m := _IMAGE_RE.match(p.name))),
        )
        self.unpaired: list[int] = []
        for i in ids:
            mat = maps / f"img{i}_{map_kind}.mat"
            if mat.is_file():
                self._items.append((i, images / f"image_r_{i}.jpg", mat))
            else:
                self.unpaired.append(i)
        if not self._items:
            raise LayoutError(f"{self.root}: no image_r_<id>.jpg has a human-maps/img<id>_{map_kind}.mat")
        self._files = [p for _, img, mat in self._items for p in (img, mat)]

    @classmethod
    def check_root(cls, root: Path) -> Path:
        images = require(root / "images" / "all", "images/all/")
        require(root / "human-maps", "human-maps/")
        if not any(_IMAGE_RE.match(p.name) for p in images.iterdir()):
            raise LayoutError(f"no image_r_<id>.jpg in {images}")
        return root

    def _load(self, item: Any) -> Sample:
        idx, image_path, mat_path = item
        image = read_rgb(image_path)
        raw = load_map(mat_path)
        levels, negative = human_map_levels(raw, image.shape[:2])
        notes = [
            f"human map {self.map_kind} {raw.shape[0]}x{raw.shape[1]} resized bilinear to "
            f"{image.shape[0]}x{image.shape[1]} (no flip), scaled by its max"
        ]
        if negative > 0:
            notes.append(f"negative values clipped to 0 on {negative:.1%} of pixels")
        if not levels.any():
            notes.append("map has no positive value: all-zero ground truth")
        return Sample(
            id=f"image_r_{idx}",
            image=image,
            label=None,
            ground_truth=GroundTruth(levels=levels, notes=tuple(notes)),
            target=None,
            meta={
                "target_source": "predicted",
                "map_kind": self.map_kind,
                "map_shape": [int(raw.shape[0]), int(raw.shape[1])],
                "negative_fraction": negative,
                "source_file": mat_path.name,
            },
        )
