"""``mohseni``: the human-attention benchmark of Mohseni, Block and Ragan (IUI 2021),
"Quantitative Evaluation of Machine Learning Explanations: A Human-Grounded Benchmark",
read from its repository's layout (github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark)::

    Image/PASCAL_VOC_2012/human_attention_mask/<class>/<voc id>.jpg
    Image/ImageNet/original_images/<name><n>.jpg
    Image/ImageNet/human_attention_mask/<name><n>.jpg

(older revisions spell the folders with spaces: ``human attention mask``,
``original images``; both are accepted). The PASCAL masks come without their images:
those are read from a local VOCdevkit (``VOC2012/JPEGImages/<voc id>.jpg``) given by
``voc_root``, else found like the ``voc2012-seg`` root (``XAIBENCH_DATA_VOC2012_SEG`` or a
``voc2012-seg*``/``VOCdevkit`` folder under ``XAIBENCH_DATA_DIR``), else inside this root.

``subset``: ``all`` (default; needs the VOCdevkit), ``pascal`` or ``imagenet``.

Masks are multi-level human attention (several annotators, stored as grey JPEG): the
grey value (channel mean) is resized bilinear to the image when the sizes differ,
divided by its max, and values below ``noise_floor`` (default 0.05, JPEG ringing
around hard edges) are set to 0 -> ``GroundTruth(levels=M)``; the floor is noted.

Class = the PASCAL class folder or the ImageNet file stem without its number; ``label``
indexes the sorted class names. Targets follow ``imagenet_label_map.json`` (entry
``mohseni``, which inherits the VOC classes): e.g. ``zebra`` -> 340 (mapped),
``dog`` -> predicted with the 118 dog breeds as candidates. Sample ids:
``pascal-<class>-<voc id>`` and ``imagenet-<name><n>``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_rgb
from xaibench.datasets.real.common import (
    LayoutError,
    RealDataset,
    data_dirs,
    dataset_env_var,
    label_map,
    target_fields,
)
from xaibench.datasets.real.voc import VOC2012SegDataset, voc2012_dir
from xaibench.imaging import resize_bilinear

SUBSETS = ("all", "pascal", "imagenet")
DEFAULT_NOISE_FLOOR = 0.05
_STEM = re.compile(r"^(?P<name>[A-Za-z_]+?)(?P<n>\d+)$")
_MASK_DIRS = ("human_attention_mask", "human attention mask")
_ORIG_DIRS = ("original_images", "original images")


def _first_dir(base: Path, names: tuple[str, ...]) -> Path | None:
    for n in names:
        if (base / n).is_dir():
            return base / n
    return None


def image_dir(root: Path) -> Path:
    """The folder holding ``PASCAL_VOC_2012/`` and/or ``ImageNet/`` (``<root>/Image`` or the root)."""
    for cand in (root / "Image", root):
        if (cand / "PASCAL_VOC_2012").is_dir() or (cand / "ImageNet").is_dir():
            return cand
    raise LayoutError("missing Image/PASCAL_VOC_2012/ or Image/ImageNet/")


def attention_levels(grey: np.ndarray, size: tuple[int, int], noise_floor: float) -> np.ndarray:
    """Grey mask in any range -> levels in [0, 1] at ``size``: resize, scale by max, floor."""
    g = np.asarray(grey, dtype=np.float32)
    if g.shape != tuple(size):
        g = resize_bilinear(g, size)
    g = np.clip(g, 0.0, None)
    top = float(g.max())
    if top <= 0:
        return np.zeros(size, dtype=np.float32)
    levels = g / top
    levels[levels < noise_floor] = 0.0
    return levels.astype(np.float32)


class MohseniDataset(RealDataset):
    """Mohseni et al. 2021 human attention masks on PASCAL VOC 2012 and ImageNet images."""

    name: ClassVar[str] = "mohseni"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Mohseni et al. (IUI 2021) multi-level human attention masks on PASCAL VOC 2012 (needs a VOCdevkit) "
        "and ImageNet images"
    )
    licence: ClassVar[str] = (
        "masks: see the upstream repository (cite Mohseni et al. 2021); images: VOC/Flickr, ImageNet terms"
    )
    source: ClassVar[str] = "https://github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark"
    label_map_key: ClassVar[str | None] = "mohseni"
    folder_names: ClassVar[tuple[str, ...]] = ("ML-Interpretability-Evaluation-Benchmark",)
    layout: ClassVar[str] = """
Image/PASCAL_VOC_2012/human_attention_mask/<class>/<voc id>.jpg   (+ a VOCdevkit for the images)
Image/ImageNet/original_images/<name><n>.jpg
Image/ImageNet/human_attention_mask/<name><n>.jpg
"""
    get_from: ClassVar[str] = (
        "https://github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark (folder Image/); "
        "PASCAL images from http://host.robots.ox.ac.uk/pascal/VOC/voc2012/"
    )
    downloads: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "https://github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark/archive/"
            "c019297b5177037c834d80ccce4de2122eb42366.zip",
            "",
        ),
    )

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        subset: str = "all",
        voc_root: str | os.PathLike[str] | None = None,
        noise_floor: float = DEFAULT_NOISE_FLOOR,
        download: bool = False,
    ) -> None:
        if subset not in SUBSETS:
            raise ValueError(f"mohseni: unknown subset {subset!r}; choose one of {', '.join(SUBSETS)}")
        if not 0.0 <= float(noise_floor) < 1.0:
            raise ValueError(f"mohseni: noise_floor must be in [0, 1), got {noise_floor}")
        super().__init__(root=root, download=download)
        self.subset = subset
        self.noise_floor = float(noise_floor)
        base = image_dir(self.root)
        items: list[tuple[str, str, Path, Path]] = []
        if subset in ("all", "pascal"):
            items += self._pascal_items(base, voc_root)
        if subset in ("all", "imagenet"):
            items += self._imagenet_items(base)
        if not items:
            raise LayoutError(f"{base}: no masks found for subset {subset!r}")
        self.label_names = tuple(sorted({cls for _, cls, _, _ in items}))
        self._items = items
        self._files = [p for *_, img, mask in items for p in (img, mask)]

    # -- layout ------------------------------------------------------------------------

    @classmethod
    def check_root(cls, root: Path) -> Path:
        base = image_dir(root)
        voc = base / "PASCAL_VOC_2012"
        inet = base / "ImageNet"
        if not (_first_dir(voc, _MASK_DIRS) or (_first_dir(inet, _MASK_DIRS) and _first_dir(inet, _ORIG_DIRS))):
            raise LayoutError(
                "missing Image/PASCAL_VOC_2012/human_attention_mask/ or "
                "Image/ImageNet/{original_images,human_attention_mask}/"
            )
        return root

    def _find_voc(self, voc_root: str | os.PathLike[str] | None) -> tuple[Path | None, list[str]]:
        tried: list[str] = []
        cands: list[tuple[str, Path]] = []
        if voc_root is not None:
            cands.append(("voc_root parameter", Path(voc_root).expanduser()))
        else:
            env = os.environ.get(dataset_env_var(VOC2012SegDataset.name))
            if env:
                cands.append((f"${dataset_env_var(VOC2012SegDataset.name)}", Path(env).expanduser()))
            for d in data_dirs():
                cands += [(f"data dir {d}", c) for c in VOC2012SegDataset._candidates(d)]
            cands.append(("this root", self.root))
        for label, c in cands:
            try:
                return voc2012_dir(c) / "JPEGImages", tried
            except LayoutError as exc:
                tried.append(f"{label} {c}: {exc}")
        return None, tried

    def _pascal_items(self, base: Path, voc_root: str | os.PathLike[str] | None) -> list[tuple[str, str, Path, Path]]:
        masks_dir = _first_dir(base / "PASCAL_VOC_2012", _MASK_DIRS)
        if masks_dir is None:
            if self.subset == "pascal":
                raise LayoutError(f"{base}: missing PASCAL_VOC_2012/human_attention_mask/")
            return []
        jpeg, tried = self._find_voc(voc_root)
        if jpeg is None:
            raise LayoutError(
                "mohseni: the PASCAL masks need the VOC 2012 images (VOCdevkit/VOC2012/JPEGImages/<voc id>.jpg); "
                "pass voc_root=DIR, set $XAIBENCH_DATA_VOC2012_SEG, or use subset='imagenet'. Tried: "
                + ("; ".join(tried) or "nothing")
            )
        items = []
        for cls_dir in sorted(p for p in masks_dir.iterdir() if p.is_dir()):
            for mask in sorted(cls_dir.glob("*.jpg")):
                img = jpeg / f"{mask.stem}.jpg"
                if not img.is_file():
                    raise LayoutError(f"{img}: VOC image for mask {mask} not found")
                items.append((f"pascal-{cls_dir.name}-{mask.stem}", cls_dir.name, img, mask))
        return items

    def _imagenet_items(self, base: Path) -> list[tuple[str, str, Path, Path]]:
        inet = base / "ImageNet"
        masks_dir, orig_dir = _first_dir(inet, _MASK_DIRS), _first_dir(inet, _ORIG_DIRS)
        if masks_dir is None or orig_dir is None:
            if self.subset == "imagenet":
                raise LayoutError(f"{inet}: missing original_images/ or human_attention_mask/")
            return []
        keyed = []
        for mask in masks_dir.glob("*.jpg"):
            m = _STEM.match(mask.stem)
            if m is None:
                raise LayoutError(f"{mask}: file name is not <name><n>.jpg")
            img = orig_dir / mask.name
            if not img.is_file():
                raise LayoutError(f"{img}: original image for mask {mask} not found")
            keyed.append(((m["name"], int(m["n"])), (f"imagenet-{mask.stem}", m["name"], img, mask)))
        return [item for _, item in sorted(keyed)]

    # -- samples -----------------------------------------------------------------------

    def _load(self, item: Any) -> Sample:
        sid, cls, img_path, mask_path = item
        image = read_rgb(img_path)
        grey = read_rgb(mask_path).mean(axis=2)
        levels = attention_levels(grey, image.shape[:2], self.noise_floor)
        target, meta = target_fields(label_map("mohseni").get(cls))
        notes = [f"grey mask scaled by its max; values < {self.noise_floor:g} set to 0 (JPEG noise)"]
        if grey.shape != image.shape[:2]:
            notes.append(f"mask {grey.shape[0]}x{grey.shape[1]} resized bilinear to the image")
        meta.update({"class": cls, "part": sid.split("-", 1)[0]})
        return Sample(
            id=sid,
            image=image,
            label=self.label_names.index(cls),
            ground_truth=GroundTruth(levels=levels, notes=tuple(notes)),
            target=target,
            meta=meta,
        )
