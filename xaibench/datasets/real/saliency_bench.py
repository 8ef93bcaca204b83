"""``saliency-bench``: the XAIdataset benchmarks ("Saliency-Bench", xaidataset.github.io),
read from their download layout::

    <benchmark>/image/<class>/<file>.jpg|png
    <benchmark>/attention_label/*.csv     columns img_idx (the image file name) and attention
                                          (a JSON 2-D list: the ground-truth explanation mask)

The root is a benchmark folder (holding ``image/`` and ``attention_label/``) or a folder
holding benchmark folders directly or under ``Benchmarks/`` (the upstream loader's
``./Benchmarks/<dataset>/``); then ``benchmark`` names one (required when there are
several).

``classes`` selects and orders the class folders (default: all, sorted); ``label`` is
the index in that order. An image with no ``attention`` row is skipped (``missing =
"skip"``, counted in ``skipped``) or kept without ground truth (``"keep"``; alignment
metrics then report n/a) -- never given the upstream loader's silent all-zero mask.

The mask is resized to the image when the sizes differ: a two-valued mask is binary
(``mask``, nearest), a multi-valued one is multi-level (``levels``, bilinear, scaled by
its max). Targets follow ``imagenet_label_map.json`` (entry ``saliency-bench``, which
inherits the VOC classes and the Oxford-IIIT Pet breeds).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_rgb
from xaibench.datasets.real.common import LayoutError, RealDataset, grey_to_truth, label_map, target_fields

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def _is_benchmark(path: Path) -> bool:
    return (path / "image").is_dir() and (path / "attention_label").is_dir()


def benchmark_dirs(root: Path) -> list[Path]:
    """Benchmark folders at ``root`` itself, under ``root/Benchmarks`` or directly under ``root``."""
    if _is_benchmark(root):
        return [root]
    found = []
    for base in (root / "Benchmarks", root):
        if base.is_dir():
            found += [p for p in sorted(base.iterdir()) if p.is_dir() and _is_benchmark(p)]
    return found


def parse_attention(text: str, where: str) -> np.ndarray:
    """The ``attention`` field (JSON nested list) as a 2-D float array; channel mean for 3-D."""
    try:
        arr = np.asarray(json.loads(text), dtype=np.float32)
    except (json.JSONDecodeError, ValueError, TypeError) as exc:
        raise ValueError(f"{where}: attention is not a JSON numeric array ({exc})") from exc
    if arr.ndim == 3:
        arr = arr.mean(axis=2)
    if arr.ndim != 2 or min(arr.shape) < 1:
        raise ValueError(f"{where}: attention must be a 2-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}: attention holds NaN or infinite values")
    return arr


def _raise_csv_limit() -> None:
    limit = sys.maxsize
    while True:  # the C long may be 32-bit
        try:
            csv.field_size_limit(max(csv.field_size_limit(), limit))
            return
        except OverflowError:
            limit //= 2


def read_attention_csv(path: Path) -> dict[str, str]:
    """``img_idx -> attention text`` of one CSV; the first row of a duplicated name wins."""
    _raise_csv_limit()
    out: dict[str, str] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("img_idx", "attention") if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} (found {reader.fieldnames})")
        for row in reader:
            out.setdefault(str(row["img_idx"]).strip(), row["attention"])
    return out


class SaliencyBenchDataset(RealDataset):
    """XAIdataset / Saliency-Bench benchmarks: class folders plus CSV ground-truth masks."""

    name: ClassVar[str] = "saliency-bench"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "XAIdataset (Saliency-Bench) benchmarks: image/<class>/ folders with ground-truth explanation "
        "masks in attention_label/*.csv"
    )
    licence: ClassVar[str] = (
        "per benchmark, see xaidataset.github.io (derived from COCO, Places365, CelebAMask-HQ, ...)"
    )
    source: ClassVar[str] = "https://xaidataset.github.io/dataset/"
    label_map_key: ClassVar[str | None] = "saliency-bench"
    folder_names: ClassVar[tuple[str, ...]] = ("XAIdataset", "xaidataset", "Benchmarks")
    layout: ClassVar[str] = """
<benchmark>/image/<class>/<file>.jpg|png
<benchmark>/attention_label/*.csv   (columns img_idx, attention = JSON 2-D list)
(the root is a benchmark folder, or holds them directly or under Benchmarks/)
"""
    get_from: ClassVar[str] = "https://xaidataset.github.io/dataset/ (one download link per benchmark)"

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        benchmark: str | None = None,
        classes: list[str] | None = None,
        missing: str = "skip",
        download: bool = False,
    ) -> None:
        if missing not in ("skip", "keep"):
            raise ValueError(f"saliency-bench: missing must be 'skip' or 'keep', got {missing!r}")
        super().__init__(root=root, download=download)
        benches = benchmark_dirs(self.root)
        if benchmark is not None:
            benches = [b for b in benches if b.name == benchmark]
            if not benches:
                raise LayoutError(f"{self.root}: no benchmark folder named {benchmark!r}")
        elif len(benches) > 1:
            names = ", ".join(b.name for b in benches)
            raise LayoutError(f"{self.root}: several benchmarks ({names}); pass benchmark=<name>")
        self.bench = benches[0]
        self.missing = missing
        class_dirs = sorted(p.name for p in (self.bench / "image").iterdir() if p.is_dir())
        if classes is not None:
            unknown = sorted(set(classes) - set(class_dirs))
            if unknown:
                raise LayoutError(f"{self.bench / 'image'}: no class folder(s) {unknown} (have {class_dirs})")
            class_dirs = list(classes)
        if not class_dirs:
            raise LayoutError(f"{self.bench / 'image'}: no class folders")
        self.label_names = tuple(class_dirs)
        csvs = sorted((self.bench / "attention_label").glob("*.csv"))
        if not csvs:
            raise LayoutError(f"{self.bench / 'attention_label'}: no CSV files")
        self._where: dict[str, Path] = {}
        for c in csvs:
            for key in read_attention_csv(c):
                self._where.setdefault(key, c)
        self.skipped: list[str] = []
        for label, cls in enumerate(class_dirs):
            for img in sorted(p for p in (self.bench / "image" / cls).iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES):
                if img.name not in self._where and missing == "skip":
                    self.skipped.append(f"{cls}/{img.name}")
                    continue
                self._items.append((label, cls, img))
        if not self._items:
            raise LayoutError(f"{self.bench}: no image has an attention row")
        self._files = [*csvs, *(img for *_, img in self._items)]
        self._csv_cache: tuple[Path, dict[str, str]] | None = None

    @classmethod
    def check_root(cls, root: Path) -> Path:
        if not benchmark_dirs(root):
            raise LayoutError("no folder with image/ and attention_label/ (at the root, under it or under Benchmarks/)")
        return root

    def _attention_text(self, name: str) -> tuple[str, Path] | None:
        path = self._where.get(name)
        if path is None:
            return None
        if self._csv_cache is None or self._csv_cache[0] != path:
            self._csv_cache = (path, read_attention_csv(path))
        return self._csv_cache[1][name], path

    def _load(self, item: Any) -> Sample:
        label, cls, img_path = item
        image = read_rgb(img_path)
        found = self._attention_text(img_path.name)
        meta: dict[str, Any]
        target, meta = target_fields(label_map("saliency-bench").get(cls))
        meta.update({"class": cls, "benchmark": self.bench.name})
        truth = None
        if found is not None:
            text, csv_path = found
            att = parse_attention(text, f"{csv_path} row {img_path.name}")
            mask, levels, kind = grey_to_truth(att, image.shape[:2])
            notes = [f"attention {att.shape[0]}x{att.shape[1]} read as {kind}"]
            if att.shape != image.shape[:2]:
                notes.append("resized to the image size")
            truth = GroundTruth(mask=mask, levels=levels, notes=tuple(notes))
        else:
            meta["ground_truth"] = "no attention row"
        return Sample(
            id=f"{cls}-{img_path.stem}",
            image=image,
            label=label,
            ground_truth=truth,
            target=target,
            meta=meta,
        )
