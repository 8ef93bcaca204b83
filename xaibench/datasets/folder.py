"""``folder``: bring your own data (DESIGN 8).

Layout under ``root``::

    images/<id>.jpg | .jpeg | .png     one image per id (required, at least one)
    masks/<id>.png                     optional ground truth for that id
    labels.csv                         optional, header ``id,label``

Masks: a mask with at most two distinct values is **binary** (foreground = the
larger value, so 0/1, 0/255 and 0/k all work; a constant mask is all foreground
when non-zero, empty when zero); three or more distinct values make a
**multi-level** map (e.g. human attention) scaled to [0, 1] by its maximum.
Palette PNGs are read as their palette indices. A mask must have its image's size.
A mask that was resized with interpolation has many values and is read as multi-level.

Labels: each row's ``label`` is either an integer class index or a class name.
- integer: used as is; with ``label_names`` given it must be in range;
- name with ``label_names="imagenet"``: matched case-insensitively against the
  ImageNet-1k names or any of their comma-separated synonyms ("tabby",
  "tabby cat" -> 281);
- name with ``label_names=[...]``: matched case-insensitively in that list;
- name without ``label_names``: the dataset's classes are the sorted distinct
  names (as an imagefolder's class folders are for the ``hf`` dataset).
Ids without a row have ``label=None``. ``Sample.target`` stays ``None``: like ``hf``, a track
explains the model's prediction unless it says ``target = "label"`` (``--target label``), and
then the label index is the explained model class (DESIGN 1,
:func:`xaibench.runner.track.resolve_targets`).

The folder is checked in one pass when the dataset is built (file names, image and mask
headers and sizes, every row of ``labels.csv``; headers only, no pixel is decoded), and every
problem found is reported at once: one ``ValueError`` whose one line names each bad file and
its problem (``folder ROOT: 3 problems: images/a.png (cannot read image ...), masks/b.png
(mask is 10x10 (HxW) but its image images/b.png is 32x32), labels.csv line 4 (unknown id
'c' ...)``, the first 10 and ``and N more``; a single problem reads ``PATH: problem``). What
only decoding shows (a truncated image, a colour mask) raises when that sample is read.
"""

from __future__ import annotations

import csv
import difflib
import io
import os
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Dataset, GroundTruth, Sample
from xaibench.datasets.io import digest_files, image_size, read_mask, read_rgb

__all__ = ["IMAGE_SUFFIXES", "FolderDataset", "mask_to_ground_truth"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
MASK_SUFFIXES = (".png",)


def _image_size(path: Path) -> tuple[int, int]:
    """(height, width) from the file header, without decoding the pixels (a decompression bomb
    is a ``ValueError`` naming the file, see :func:`xaibench.datasets.io.image_size`)."""
    return image_size(path)


def mask_to_ground_truth(mask: np.ndarray, path: Path | str = "mask") -> tuple[GroundTruth, str]:
    """Binary (at most two distinct values) or multi-level (three or more) ground truth.

    Returns the ground truth and its kind, ``"binary"`` or ``"multilevel"``.
    """
    if mask.ndim != 2:
        raise ValueError(f"{path}: mask must be 2-D, got shape {mask.shape}")
    values = np.unique(mask)
    if values.size and values[0] < 0:
        raise ValueError(f"{path}: mask has negative values")
    if values.size <= 2:
        top = values[-1] if values.size else 0
        binary = mask == top if top > 0 else np.zeros(mask.shape, dtype=bool)
        return GroundTruth(mask=binary, notes=(f"binary mask from {Path(path).name}",)), "binary"
    levels = (mask.astype(np.float32) / np.float32(values[-1])).astype(np.float32)
    return GroundTruth(levels=levels, notes=(f"multi-level mask from {Path(path).name}, scaled by its max",)), (
        "multilevel"
    )


def _entries(directory: Path, suffixes: tuple[str, ...], what: str, problems: Problems) -> dict[str, Path]:
    """Map id -> file for the visible files in ``directory``; other files and duplicate ids are problems."""
    found: dict[str, Path] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        if not entry.is_file() or entry.suffix.lower() not in suffixes:
            allowed = ", ".join(suffixes)
            problems.add(entry, f"not {what} file (expected {directory.name}/<id> with suffix {allowed})")
            continue
        key = entry.stem
        if key in found:
            problems.add(entry, f"id {key!r} already has {found[key].name}; keep one file per id")
            continue
        found[key] = entry
    return found


class Problems:
    """Every problem of a folder, gathered in one pass and raised as one ``ValueError``.

    One problem reads ``PATH: what``; several read ``folder ROOT: N problems: REL (what), ...``
    with the first :attr:`SHOWN` named and ``and K more``. ``where`` is a path under the root
    (a file, or ``labels.csv line 4``)."""

    SHOWN: ClassVar[int] = 10

    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[tuple[str, str]] = []

    def add(self, where: Path | str, what: str) -> None:
        path = Path(where)
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            rel = str(where)
        self.items.append((rel, what))

    def add_error(self, path: Path, exc: ValueError) -> None:
        """A reader's ``ValueError`` (``PATH: what``) as the problem of ``path``."""
        text = str(exc)
        self.add(path, text[len(f"{path}: ") :] if text.startswith(f"{path}: ") else text)

    def __bool__(self) -> bool:
        return bool(self.items)

    def message(self) -> str:
        if len(self.items) == 1:
            rel, what = self.items[0]
            return f"{self.root / rel}: {what}"
        shown = ", ".join(f"{rel} ({what})" for rel, what in self.items[: self.SHOWN])
        more = f" and {len(self.items) - self.SHOWN} more" if len(self.items) > self.SHOWN else ""
        return f"folder {self.root}: {len(self.items)} problems: {shown}{more}"

    def check(self) -> None:
        """Raise the gathered problems, if any, as one ``ValueError``."""
        if self.items:
            raise ValueError(self.message())


class FolderDataset(Dataset):
    """Images (and optional masks and labels) from a folder; see the module docstring.

    Parameters: ``root`` (required), ``label_names`` (optional: ``"imagenet"`` or a list
    of class names that ``labels.csv`` names refer to).
    """

    name: ClassVar[str] = "folder"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Your own data: root/images/<id>.{jpg,png}, optional masks/<id>.png and labels.csv"
    licence: ClassVar[str] = "the data owner's"
    source: ClassVar[str] = "a local folder"
    needs: ClassVar[tuple[str, ...]] = ("data_root",)

    def __init__(self, root: str | os.PathLike[str], label_names: Sequence[str] | str | None = None) -> None:
        self.root = Path(root).expanduser()
        if not self.root.exists():
            raise ValueError(f"{self.root}: folder dataset root not found")
        if not self.root.is_dir():
            raise ValueError(f"{self.root}: folder dataset root is not a directory")
        images_dir = self.root / "images"
        if not images_dir.is_dir():
            raise ValueError(f"{images_dir}: missing; put the images in {images_dir}/<id>.jpg or .png")
        problems = Problems(self.root)
        self._images = _entries(images_dir, IMAGE_SUFFIXES, "an image", problems)
        if not self._images:
            problems.add(images_dir, "empty; no .jpg/.jpeg/.png images found")
            problems.check()
        self._ids = sorted(self._images)

        masks_dir = self.root / "masks"
        self._masks = _entries(masks_dir, MASK_SUFFIXES, "a mask", problems) if masks_dir.is_dir() else {}
        for key, path in list(self._masks.items()):
            if key not in self._images:
                problems.add(path, f"mask has no matching image images/{key}.jpg or .png")
                del self._masks[key]

        self._sizes: dict[str, tuple[int, int]] = {}
        for key, path in self._images.items():
            try:
                self._sizes[key] = _image_size(path)
            except ValueError as exc:
                problems.add_error(path, exc)
        for key, path in self._masks.items():
            try:
                mask_size = _image_size(path)
            except ValueError as exc:
                problems.add_error(path, exc)
                continue
            image_size = self._sizes.get(key)
            if image_size is not None and mask_size != image_size:
                problems.add(
                    path,
                    f"mask is {mask_size[0]}x{mask_size[1]} (HxW) but its image "
                    f"{self._images[key].relative_to(self.root).as_posix()} is {image_size[0]}x{image_size[1]}",
                )

        self._labels, self.label_names = self._read_labels(label_names, problems)
        problems.check()

    # ------------------------------------------------------------------ labels

    def _read_labels(
        self, label_names: Sequence[str] | str | None, problems: Problems
    ) -> tuple[dict[str, int], tuple[str, ...]]:
        names: tuple[str, ...] | None
        imagenet = isinstance(label_names, str) and label_names.strip().lower() == "imagenet"
        if imagenet:
            from xaibench.imagenet import imagenet_label_names

            names = imagenet_label_names()
        elif isinstance(label_names, str):
            raise ValueError(f"folder: label_names must be 'imagenet' or a list of class names, got {label_names!r}")
        else:
            names = tuple(str(n) for n in label_names) if label_names is not None else None

        path = self.root / "labels.csv"
        if not path.exists():
            return {}, names or ()
        rows = self._csv_rows(path, problems)

        lookup: dict[str, int] = {}
        if names is not None:
            for index, full in enumerate(names):
                lookup.setdefault(full.strip().lower(), index)
                if imagenet:
                    for synonym in full.split(","):
                        lookup.setdefault(synonym.strip().lower(), index)

        raw: dict[str, tuple[int, str]] = {}
        for line_no, key, label in rows:
            raw[key] = (line_no, label)
        textual = sorted({label for _, label in raw.values() if not _is_int(label)})
        if names is None and textual:
            numeric = [line for line, label in raw.values() if _is_int(label)]
            if numeric:
                problems.add(
                    f"{path} line {min(numeric)}",
                    "labels mix integer indices and class names; use one kind, "
                    "or pass label_names so names and indices refer to the same classes",
                )
                return {}, ()
            names = tuple(textual)
            lookup = {n.lower(): i for i, n in enumerate(names)}

        labels: dict[str, int] = {}
        for key, (line_no, label) in raw.items():
            where = f"{path} line {line_no}"
            if _is_int(label):
                index = int(label)
                if index < 0 or (names is not None and index >= len(names)):
                    bound = f"0..{len(names) - 1}" if names is not None else ">= 0"
                    problems.add(where, f"label index {index} out of range ({bound})")
                else:
                    labels[key] = index
                continue
            found = lookup.get(label.lower())
            if found is None:
                assert names is not None
                close = difflib.get_close_matches(label.lower(), list(lookup), n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                problems.add(where, f"unknown class name {label!r}{hint}")
            else:
                labels[key] = found
        return labels, names or ()

    def _csv_rows(self, path: Path, problems: Problems) -> list[tuple[int, str, str]]:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(path, f"cannot read ({type(exc).__name__}: {exc})")
            return []
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header] != ["id", "label"]:
            got = ",".join(header) if header else "an empty file"
            problems.add(path, f"header must be 'id,label', got {got!r}")
            return []
        rows: list[tuple[int, str, str]] = []
        seen: dict[str, int] = {}
        for row in reader:
            line_no = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != 2:
                problems.add(f"{path} line {line_no}", f"expected 2 columns (id,label), got {len(row)}")
                continue
            key, label = row[0].strip(), row[1].strip()
            if key not in self._images:
                stem, suffix = os.path.splitext(key)
                if suffix.lower() in IMAGE_SUFFIXES and stem in self._images:
                    key = stem
                else:
                    problems.add(f"{path} line {line_no}", f"unknown id {key!r} (no images/{key}.jpg or .png)")
                    continue
            if not label:
                problems.add(f"{path} line {line_no}", f"empty label for id {key!r}")
                continue
            if key in seen:
                problems.add(f"{path} line {line_no}", f"id {key!r} already labelled on line {seen[key]}")
                continue
            seen[key] = line_no
            rows.append((line_no, key, label))
        return rows

    # ------------------------------------------------------------------ dataset

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    @cached_property
    def _revision(self) -> str:
        files = [self._images[k] for k in self._ids]
        files += [self._masks[k] for k in self._ids if k in self._masks]
        if (self.root / "labels.csv").is_file():
            files.append(self.root / "labels.csv")
        return digest_files(files, root=self.root)

    @property
    def revision(self) -> str:
        """SHA-256 (16 hex) over the relative names and bytes of every image, mask and labels.csv."""
        return self._revision

    def __len__(self) -> int:
        return len(self._ids)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        keys = self._ids if limit is None else self._ids[: max(0, int(limit))]
        for key in keys:
            yield self._sample(key)

    def _sample(self, key: str) -> Sample:
        image_path = self._images[key]
        image = read_rgb(image_path)
        meta: dict[str, Any] = {"image_file": image_path.relative_to(self.root).as_posix()}
        ground_truth = None
        mask_path = self._masks.get(key)
        if mask_path is not None:
            mask = read_mask(mask_path)
            if mask.shape != image.shape[:2]:
                raise ValueError(
                    f"{mask_path}: mask is {mask.shape[0]}x{mask.shape[1]} but its image is "
                    f"{image.shape[0]}x{image.shape[1]}"
                )
            ground_truth, kind = mask_to_ground_truth(mask, mask_path)
            meta["mask_file"] = mask_path.relative_to(self.root).as_posix()
            meta["mask_kind"] = kind
        return Sample(
            id=key,
            image=image,
            label=self._labels.get(key),
            ground_truth=ground_truth,
            meta=meta,
        )


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
