"""``voc2012-seg``: PASCAL VOC 2012 segmentation, read from the VOCdevkit layout::

    VOCdevkit/VOC2012/JPEGImages/<id>.jpg
    VOCdevkit/VOC2012/SegmentationClass/<id>.png        palette PNG: class index, 255 = void
    VOCdevkit/VOC2012/ImageSets/Segmentation/<split>.txt

The root may be the folder holding ``VOCdevkit/``, ``VOCdevkit/`` itself or ``VOC2012/``.

**One sample per image** (id = VOC id). The explained class is chosen
deterministically: among the object classes present, those with an ImageNet target
in ``imagenet_label_map.json`` covering at least ``min_fraction`` of the image (default
1 %) are eligible and the one with the most pixels wins (ties: lower VOC index). Then
``Sample.target`` is its ImageNet index (``meta["target_source"] = "mapped"``), ``label``
its VOC index and the mask is exactly that class's pixels. When no present class
qualifies (person, dog, bird, ... have no single ImageNet class),
``target`` is ``None`` (the model's prediction is explained, ``"predicted"``), ``label``
is the largest object class and the mask is every object pixel (classes 1-20).

**Void (255)** pixels -- object outlines and ambiguous regions -- are treated as
not-evidence: never in the mask. Their count is in ``meta["void_pixels"]`` and a note.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_mask, read_rgb
from xaibench.datasets.real.common import (
    LayoutError,
    RealDataset,
    label_map,
    require,
    target_fields,
)

VOC_CLASSES: tuple[str, ...] = (
    "background",
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)
VOID = 255


def voc2012_dir(root: Path) -> Path:
    """The ``VOC2012`` folder for a root that is its parent's parent, its parent or itself."""
    for cand in (root / "VOCdevkit" / "VOC2012", root / "VOC2012", root):
        if (cand / "JPEGImages").is_dir():
            return cand
    raise LayoutError("missing VOCdevkit/VOC2012/JPEGImages/")


def choose_class(
    seg: np.ndarray, dataset_key: str = "voc2012-seg", min_fraction: float = 0.0
) -> tuple[int | None, dict[int, int]]:
    """The VOC index of the largest present class with an ImageNet target covering at least
    ``min_fraction`` of the image (ties: lower index), or ``None``; plus the pixel count of
    every present object class (1-20)."""
    values, counts = np.unique(seg, return_counts=True)
    present = {int(v): int(c) for v, c in zip(values, counts, strict=True) if 1 <= v < len(VOC_CLASSES)}
    mapping = label_map(dataset_key)
    floor = min_fraction * seg.size
    eligible = [
        (-n, k)
        for k, n in present.items()
        if n >= floor and (e := mapping.get(VOC_CLASSES[k])) is not None and e.imagenet is not None
    ]
    return (min(eligible)[1] if eligible else None), present


class VOC2012SegDataset(RealDataset):
    """PASCAL VOC 2012 segmentation (class masks; void excluded) with ImageNet targets where meaningful."""

    name: ClassVar[str] = "voc2012-seg"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "PASCAL VOC 2012 segmentation: one sample per image, mask of the largest ImageNet-mapped class "
        "(else all objects, predicted class); void excluded"
    )
    licence: ClassVar[str] = "PASCAL VOC annotations; images under Flickr terms of use"
    source: ClassVar[str] = "http://host.robots.ox.ac.uk/pascal/VOC/voc2012/"
    label_map_key: ClassVar[str | None] = "voc2012-seg"
    folder_names: ClassVar[tuple[str, ...]] = ("voc2012", "VOC2012", "voc", "VOCdevkit")
    layout: ClassVar[str] = """
VOCdevkit/VOC2012/JPEGImages/<id>.jpg
VOCdevkit/VOC2012/SegmentationClass/<id>.png   (palette indices 0-20, 255 void)
VOCdevkit/VOC2012/ImageSets/Segmentation/<split>.txt   (split: val by default)
"""
    get_from: ClassVar[str] = (
        "http://host.robots.ox.ac.uk/pascal/VOC/voc2012/ (VOCtrainval_11-May-2012.tar, extract as is)"
    )
    downloads: ClassVar[tuple[tuple[str, str], ...]] = (
        ("http://host.robots.ox.ac.uk/pascal/VOC/voc2012/VOCtrainval_11-May-2012.tar", ""),
    )

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        split: str = "val",
        min_fraction: float = 0.01,
        download: bool = False,
    ) -> None:
        if not 0.0 <= float(min_fraction) < 1.0:
            raise ValueError(f"voc2012-seg: min_fraction must be in [0, 1), got {min_fraction}")
        super().__init__(root=root, download=download)
        self.split = split
        self.min_fraction = float(min_fraction)
        self.voc = voc2012_dir(self.root)
        self._revision_base = self.voc
        self.label_names = VOC_CLASSES
        list_file = self.voc / "ImageSets" / "Segmentation" / f"{split}.txt"
        if not list_file.is_file():
            raise LayoutError(f"{list_file}: split list not found (split={split!r})")
        ids = [line.split()[0] for line in list_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not ids:
            raise LayoutError(f"{list_file}: empty split list")
        for i in ids:
            img = self.voc / "JPEGImages" / f"{i}.jpg"
            seg = self.voc / "SegmentationClass" / f"{i}.png"
            for p in (img, seg):
                if not p.is_file():
                    raise LayoutError(f"{p}: listed in {list_file.name} but missing")
            self._items.append((i, img, seg))
        self._files = [list_file, *(p for _, img, seg in self._items for p in (img, seg))]

    @classmethod
    def check_root(cls, root: Path) -> Path:
        voc = voc2012_dir(root)
        require(voc / "SegmentationClass", "VOC2012/SegmentationClass/")
        require(voc / "ImageSets" / "Segmentation", "VOC2012/ImageSets/Segmentation/")
        return root

    def _load(self, item: Any) -> Sample:
        sid, img_path, seg_path = item
        image = read_rgb(img_path)
        seg = read_mask(seg_path)
        if seg.shape != image.shape[:2]:
            raise ValueError(f"{seg_path}: mask {seg.shape} does not match image {image.shape[:2]} ({img_path.name})")
        bad = np.setdiff1d(np.unique(seg), [*range(len(VOC_CLASSES)), VOID])
        if bad.size:
            raise ValueError(f"{seg_path}: unexpected class values {bad.tolist()} (VOC uses 0-20 and 255)")
        chosen, present = choose_class(seg, self.label_map_key or "voc2012-seg", self.min_fraction)
        void = int(np.count_nonzero(seg == VOID))
        mapping = label_map(self.label_map_key or "voc2012-seg")
        if chosen is not None:
            mask = seg == chosen
            label: int | None = chosen
            entry = mapping[VOC_CLASSES[chosen]]
        else:
            mask = (seg >= 1) & (seg < len(VOC_CLASSES))
            label = max(present, key=lambda k: (present[k], -k)) if present else None
            entry = mapping.get(VOC_CLASSES[label]) if label is not None else None
        target, meta = target_fields(entry)  # when chosen is None, no present class has a target
        notes = [f"void (255) pixels treated as not-evidence: {void} px ({void / seg.size:.1%})"]
        if chosen is None:
            notes.append("no present class maps to an ImageNet target: mask = all object pixels")
        meta.update(
            {
                "class": VOC_CLASSES[label] if label is not None else None,
                "classes_present": {VOC_CLASSES[k]: n for k, n in sorted(present.items())},
                "void_pixels": void,
                "mask_scope": "class" if chosen is not None else "all_objects",
            }
        )
        return Sample(
            id=sid,
            image=image,
            label=label,
            ground_truth=GroundTruth(mask=mask, notes=tuple(notes)),
            target=target,
            meta=meta,
        )
