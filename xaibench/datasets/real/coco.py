"""``coco``: COCO 2017 images with COCO-Stuff pixel maps and/or COCO-format annotations::

    <split>/<12-digit id>.jpg                     (or images/<split>/...)
    stuffthingmaps_<split>/<id>.png               pixel = category_id - 1, 255 unlabelled
                                                  (or stuffthingmaps/<split>/, stuffthingmaps_trainval2017/<split>/)
    annotations/instances_<split>.json            COCO JSON: images, annotations (bbox [x, y, w, h],
                                                  category_id, optional segmentation), categories

``split`` defaults to ``val2017``; ``annotations`` names the JSON explicitly (else
``instances_<split>.json``, else the single other ``annotations/*<split>*.json``).

**Masks** (``masks="auto"``): the stuffthingmaps when present, else the JSON's instance
segmentations (polygons or RLE), else the boxes rasterised (pixel centres inside a box).
Only *thing* categories (ids 1-91) are evidence; stuff regions never are.

**One sample per image** (id = file stem). Among the thing categories present, those
with an ImageNet target in ``imagenet_label_map.json`` and covering at least
``min_fraction`` of the image (default 1 %, so a 0.1 % apple in a desk scene does not
become the explained class) are eligible, and the one with the largest area (pixels of
the map, else summed annotation areas) is explained (ties: lower id):
``Sample.target`` = its ImageNet index (``"mapped"``), mask = its pixels,
``GroundTruth.boxes`` = its boxes. With no eligible category ``target`` is
``None`` (``"predicted"``), the mask covers every thing pixel and the boxes are every
thing box. Boxes are ``(N, 4)`` float ``x0, y0, x1, y1`` (``x1 = x + w``, exclusive).
``label`` is ``category_id - 1`` into ``label_names`` (so it equals the map's pixel value).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_mask, read_rgb
from xaibench.datasets.real.common import LayoutError, RealDataset, label_map, target_fields

N_CATEGORIES = 182
"""COCO-Stuff ids 1-182 (things 1-91, stuff 92-182; ``other`` 183 is outside the label space)."""
MAX_THING_ID = 91
UNLABELLED = 255
MASK_MODES = ("auto", "stuffthingmaps", "segmentation", "boxes")
_SKIP_JSON_PREFIXES = ("captions_", "person_keypoints_", "stuff_")


def is_thing(category_id: int) -> bool:
    return 1 <= int(category_id) <= MAX_THING_ID


# ----------------------------------------------------------------------------- rasterising


def rle_counts_from_string(s: str) -> list[int]:
    """Decode COCO's compressed RLE string (6-bit chunks, deltas from the count two back)."""
    counts: list[int] = []
    p = 0
    while p < len(s):
        x = 0
        k = 0
        more = True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def rle_decode(rle: dict[str, Any]) -> np.ndarray:
    """A COCO RLE (``{"size": [h, w], "counts": list | str}``; column-major runs starting with 0s) as a bool mask."""
    h, w = (int(v) for v in rle["size"])
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii")
    runs = rle_counts_from_string(counts) if isinstance(counts, str) else [int(c) for c in counts]
    if sum(runs) != h * w or min(runs, default=0) < 0:
        raise ValueError(f"RLE runs sum to {sum(runs)}, expected {h}x{w}={h * w}")
    values = np.arange(len(runs)) % 2 == 1
    flat = np.repeat(values, runs)
    return flat.reshape(w, h).T.copy()


def polygons_mask(polygons: list[list[float]], shape: tuple[int, int]) -> np.ndarray:
    """Union of COCO polygons ``[x1, y1, x2, y2, ...]``: pixels whose centre lies inside."""
    from skimage.draw import polygon as draw_polygon

    mask = np.zeros(shape, dtype=bool)
    for poly in polygons:
        xy = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
        if len(xy) < 3:
            continue
        rr, cc = draw_polygon(xy[:, 1] - 0.5, xy[:, 0] - 0.5, shape=shape)
        mask[rr, cc] = True
    return mask


def boxes_mask(boxes: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pixels whose centre lies inside any ``x0, y0, x1, y1`` box."""
    mask = np.zeros(shape, dtype=bool)
    h, w = shape
    for x0, y0, x1, y1 in np.asarray(boxes, dtype=np.float64).reshape(-1, 4):
        c0, c1 = max(0, int(np.ceil(x0 - 0.5))), min(w, int(np.floor(x1 - 0.5)) + 1)
        r0, r1 = max(0, int(np.ceil(y0 - 0.5))), min(h, int(np.floor(y1 - 0.5)) + 1)
        if c1 > c0 and r1 > r0:
            mask[r0:r1, c0:c1] = True
    return mask


def annotation_mask(ann: dict[str, Any], shape: tuple[int, int]) -> np.ndarray:
    seg = ann.get("segmentation")
    if isinstance(seg, list) and seg:
        return polygons_mask(seg, shape)
    if isinstance(seg, dict):
        m = rle_decode(seg)
        if m.shape != shape:
            raise ValueError(f"annotation {ann.get('id')}: RLE size {m.shape} != image {shape}")
        return m
    return boxes_mask(_xyxy([ann["bbox"]]), shape)


def _xyxy(bboxes: list[list[float]]) -> np.ndarray:
    b = np.asarray(bboxes, dtype=np.float64).reshape(-1, 4)
    return np.column_stack([b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]])


# ----------------------------------------------------------------------------- dataset


def _images_dir(root: Path, split: str) -> Path | None:
    for cand in (root / split, root / "images" / split):
        if cand.is_dir():
            return cand
    return None


def _maps_dir(root: Path, split: str) -> Path | None:
    for cand in (
        root / f"stuffthingmaps_{split}",
        root / "stuffthingmaps" / split,
        root / "stuffthingmaps_trainval2017" / split,
    ):
        if cand.is_dir():
            return cand
    return None


def _annotations_file(root: Path, split: str, explicit: str | os.PathLike[str] | None) -> Path | None:
    if explicit is not None:
        p = Path(explicit)
        p = p if p.is_absolute() else root / p
        if not p.is_file():
            raise LayoutError(f"annotations file {p} not found")
        return p
    ann_dir = root / "annotations"
    official = ann_dir / f"instances_{split}.json"
    if official.is_file():
        return official
    if not ann_dir.is_dir():
        return None
    found = sorted(p for p in ann_dir.glob(f"*{split}*.json") if not p.name.startswith(_SKIP_JSON_PREFIXES))
    if len(found) > 1:
        raise LayoutError(
            f"several annotation files in {ann_dir} ({', '.join(p.name for p in found)}); pass annotations=<file>"
        )
    return found[0] if found else None


class CocoDataset(RealDataset):
    """COCO 2017 with COCO-Stuff thing maps and/or instance annotations and boxes."""

    name: ClassVar[str] = "coco"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "COCO 2017: one sample per image, mask and boxes of the largest ImageNet-mapped thing "
        "(else all things, predicted class)"
    )
    licence: ClassVar[str] = "annotations CC BY 4.0 (COCO, COCO-Stuff); images under Flickr terms of use"
    source: ClassVar[str] = "https://cocodataset.org/ and https://github.com/nightrome/cocostuff"
    label_map_key: ClassVar[str | None] = "coco"
    folder_names: ClassVar[tuple[str, ...]] = ("coco2017", "mscoco")
    layout: ClassVar[str] = """
<split>/<id>.jpg   (split: val2017 by default; or images/<split>/)
stuffthingmaps_<split>/<id>.png   (pixel = category_id - 1, 255 unlabelled; or stuffthingmaps/<split>/)
annotations/instances_<split>.json   (COCO JSON; at least one of the maps or the JSON)
"""
    get_from: ClassVar[str] = (
        "https://cocodataset.org/#download (val2017.zip, annotations_trainval2017.zip) and "
        "https://github.com/nightrome/cocostuff (stuffthingmaps_trainval2017.zip)"
    )
    downloads: ClassVar[tuple[tuple[str, str], ...]] = (
        ("http://images.cocodataset.org/zips/val2017.zip", ""),
        ("http://images.cocodataset.org/annotations/annotations_trainval2017.zip", ""),
    )

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        split: str = "val2017",
        masks: str = "auto",
        annotations: str | os.PathLike[str] | None = None,
        min_fraction: float = 0.01,
        download: bool = False,
    ) -> None:
        if not 0.0 <= float(min_fraction) < 1.0:
            raise ValueError(f"coco: min_fraction must be in [0, 1), got {min_fraction}")
        self.min_fraction = float(min_fraction)
        if masks not in MASK_MODES:
            raise ValueError(f"coco: unknown masks mode {masks!r}; choose one of {', '.join(MASK_MODES)}")
        super().__init__(root=root, download=download)
        self.split = split
        images_dir = _images_dir(self.root, split)
        if images_dir is None:
            raise LayoutError(f"{self.root}: no image folder {split}/ or images/{split}/")
        maps_dir = _maps_dir(self.root, split)
        ann_file = _annotations_file(self.root, split, annotations)
        if masks == "auto":
            masks = "stuffthingmaps" if maps_dir is not None else "segmentation"
        if masks == "stuffthingmaps" and maps_dir is None:
            raise LayoutError(f"{self.root}: masks='stuffthingmaps' but no stuffthingmaps_{split}/ folder")
        if masks in ("segmentation", "boxes") and ann_file is None:
            raise LayoutError(f"{self.root}: masks={masks!r} needs annotations/instances_{split}.json")
        self.masks = masks
        self.maps_dir, self.ann_file, self.images_dir = maps_dir, ann_file, images_dir

        names = [f"category-{i}" for i in range(1, N_CATEGORIES + 1)]
        for entry in label_map("coco").values():
            if entry.coco_id is not None:
                names[entry.coco_id - 1] = entry.name
        self._anns: dict[int, list[dict[str, Any]]] = defaultdict(list)
        records: list[tuple[str, int | None, Path]] = []
        if ann_file is not None:
            doc = self._read_json(ann_file)
            for c in doc["categories"]:
                if 1 <= int(c["id"]) <= N_CATEGORIES:
                    names[int(c["id"]) - 1] = str(c["name"])
            for a in doc["annotations"]:
                if is_thing(a["category_id"]):
                    self._anns[int(a["image_id"])].append(a)
            for im in sorted(doc["images"], key=lambda r: str(r["file_name"])):
                path = images_dir / str(im["file_name"])
                if path.is_file():
                    records.append((path.stem, int(im["id"]), path))
            self.missing_images = len(doc["images"]) - len(records)
        else:
            records = [(p.stem, None, p) for p in sorted(images_dir.glob("*.jpg"))]
            self.missing_images = 0
        self.label_names = tuple(names)
        for stem, image_id, path in records:
            seg = maps_dir / f"{stem}.png" if maps_dir is not None else None
            if masks == "stuffthingmaps" and (seg is None or not seg.is_file()):
                raise LayoutError(f"{seg}: stuffthingmap for {path.name} missing")
            self._items.append((stem, image_id, path, seg if masks == "stuffthingmaps" else None))
        if not self._items:
            raise LayoutError(f"{images_dir}: no images found")
        self._files = [
            *([ann_file] if ann_file is not None else []),
            *(p for _, _, img, seg in self._items for p in (img, seg) if p is not None),
        ]

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read COCO JSON ({exc})") from exc
        missing = [k for k in ("images", "annotations", "categories") if k not in doc]
        if missing:
            raise ValueError(f"{path}: COCO JSON lacks {missing}")
        return doc

    @classmethod
    def check_root(cls, root: Path) -> Path:
        """Any split: an image folder ``<split>/`` or ``images/<split>/`` and stuffthingmaps or annotations/."""
        splits = [
            p.name
            for p in (*root.glob("*20[0-9][0-9]"), *root.glob("images/*20[0-9][0-9]"))
            if p.is_dir() and not p.name.startswith("stuffthingmaps")
        ]
        if not splits:
            raise LayoutError("missing an image folder such as val2017/ (or images/val2017/)")
        has_maps = any(_maps_dir(root, s) is not None for s in splits)
        if not has_maps and not (root / "annotations").is_dir():
            raise LayoutError("missing stuffthingmaps_<split>/ and annotations/")
        return root

    def _load(self, item: Any) -> Sample:
        stem, image_id, img_path, seg_path = item
        image = read_rgb(img_path)
        shape = image.shape[:2]
        anns = self._anns.get(image_id, []) if image_id is not None else []
        seg: np.ndarray | None = None
        if seg_path is not None:
            seg = read_mask(seg_path)
            if seg.shape != shape:
                raise ValueError(f"{seg_path}: map {seg.shape} does not match image {shape} ({img_path.name})")
            values, counts = np.unique(seg, return_counts=True)
            area = {int(v) + 1: int(c) for v, c in zip(values, counts, strict=True) if is_thing(int(v) + 1)}
        else:
            area_f: dict[int, float] = defaultdict(float)
            for a in anns:
                w, h = a["bbox"][2], a["bbox"][3]
                use_box = self.masks == "boxes" or "area" not in a
                area_f[int(a["category_id"])] += float(w * h if use_box else a["area"])
            area = {k: round(v) for k, v in area_f.items()}
        mapping = label_map("coco")
        floor = self.min_fraction * shape[0] * shape[1]
        eligible = [
            (-n, cid)
            for cid, n in area.items()
            if n >= floor and (e := mapping.get(self.label_names[cid - 1])) is not None and e.imagenet is not None
        ]
        chosen = min(eligible)[1] if eligible else None
        wanted = {chosen} if chosen is not None else set(area) | {int(a["category_id"]) for a in anns}
        sel = [a for a in anns if int(a["category_id"]) in wanted]
        if seg is not None:
            mask = seg == chosen - 1 if chosen is not None else seg <= MAX_THING_ID - 1
        elif self.masks == "boxes":
            mask = boxes_mask(_xyxy([a["bbox"] for a in sel]), shape)
        else:
            mask = np.zeros(shape, dtype=bool)
            for a in sel:
                mask |= annotation_mask(a, shape)
        boxes = _xyxy([a["bbox"] for a in sel]) if anns or self.ann_file is not None else None
        label = chosen if chosen is not None else (max(area, key=lambda k: (area[k], -k)) if area else None)
        entry = mapping.get(self.label_names[label - 1]) if label is not None else None
        target, meta = target_fields(entry)
        notes = [f"mask from {self.masks}; stuff and unlabelled pixels are not evidence"]
        if chosen is None:
            notes.append("no present thing maps to an ImageNet target: mask = all things")
        meta.update(
            {
                "class": self.label_names[label - 1] if label is not None else None,
                "classes_present": {self.label_names[k - 1]: n for k, n in sorted(area.items())},
                "mask_scope": "class" if chosen is not None else "all_things",
                "coco_image_id": image_id,
            }
        )
        return Sample(
            id=stem,
            image=image,
            label=None if label is None else label - 1,
            ground_truth=GroundTruth(mask=mask, boxes=boxes, notes=tuple(notes)),
            target=target,
            meta=meta,
        )
