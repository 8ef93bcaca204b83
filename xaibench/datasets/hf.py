"""``hf``: a dataset read through Hugging Face ``datasets`` (``--dataset hf:NAME_OR_PATH``).

``path`` is one of:

- a local folder: an ``imagefolder`` (images, optionally in class folders and split folders,
  optionally a ``metadata.jsonl``/``.csv`` whose ``*_file_name`` columns add image columns such
  as a mask), a folder of parquet/arrow files, or a folder written by ``save_to_disk``;
- a local ``.parquet`` or ``.arrow`` file (its split is ``train``);
- a Hub dataset name (``owner/name``), loaded where there is network or from the local
  ``datasets`` cache. With ``HF_HUB_OFFLINE=1`` and nothing cached it fails at once.

Parameters: ``split`` (default: the only split; required when there are several),
``image_column`` (default ``image``, else the only image column), ``label_column`` (default
``label`` when present), ``mask_column`` (default ``mask`` when present), ``id_column``
(default: the image file names when unique, else the row numbers ``00000``, ``00001``, ...)
and ``config`` (the Hub dataset's configuration name).

Labels: a ``ClassLabel`` or integer column is used as is (``label_names`` from the
``ClassLabel``); strings are indices into their sorted distinct values. The label is not
taken to be a model class: tracks explain the prediction unless they set ``target = "label"``.
Masks follow the folder dataset's rule (:func:`xaibench.datasets.folder.mask_to_ground_truth`):
at most two values are binary, more are a multi-level map scaled by its maximum; a mask must
have its image's size. Every problem raises ``ValueError`` naming the dataset, the row and the
column. ``samples(limit)`` first checks the rows it will yield from their image headers alone
(readable, mask size = image size) and reports every problem found at once, in one line.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image as PILImage

from xaibench.api import Dataset, Sample
from xaibench.datasets.folder import mask_to_ground_truth
from xaibench.datasets.io import digest_files, mask_array, rgb_array

__all__ = ["HFDataset", "hub_offline"]

FILE_BUILDERS = {".parquet": "parquet", ".arrow": "arrow"}
_TRUE = {"1", "on", "yes", "true"}


def hub_offline() -> bool:
    """Whether the Hugging Face Hub is switched off (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE``)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as exc:
        raise ValueError("the hf dataset needs the package datasets: pip install datasets") from exc
    datasets.disable_progress_bars()
    return datasets


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).strip().splitlines()[:1])
    return f"{type(exc).__name__}: {text[:300]}"


def _looks_local(path: str) -> bool:
    """A path rather than a Hub id (``name`` or ``owner/name``)."""
    return (
        path.startswith(("/", ".", "~", "\\"))
        or path.count("/") > 1
        or "\\" in path
        or (len(path) > 1 and path[1] == ":")
        or Path(path).suffix.lower() in FILE_BUILDERS
    )


def _mask_array(value: Any, where: str) -> np.ndarray:
    """A mask cell (PIL image or array) as a 2-D array of its stored values (an image as
    :func:`xaibench.datasets.io.mask_array` reads it: palette indices kept, equal RGB channels
    read as grey)."""
    if hasattr(value, "mode"):
        return mask_array(value, where)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: mask is not an image or an array ({_first_line(exc)})") from None
    if arr.dtype == bool:
        arr = arr.astype(np.uint8)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: mask is not numeric (dtype {arr.dtype})")
    return arr


def _header_size(cell: Any, row: int, column: str, problems: list[tuple[int, str, str]]) -> tuple[int, int] | None:
    """``(H, W)`` of an undecoded image cell (``{"bytes", "path"}``) from its header, or of an array
    cell; ``None`` (and a problem unless the cell is empty) when it cannot be told."""
    if cell is None:
        problems.append((row, column, "no image"))
        return None
    if isinstance(cell, dict) and ("bytes" in cell or "path" in cell):
        source = io.BytesIO(cell["bytes"]) if cell.get("bytes") else cell.get("path")
        if source is None:
            problems.append((row, column, "no image"))
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", PILImage.DecompressionBombWarning)
                with PILImage.open(source) as image:
                    width, height = image.size
        except Exception as exc:  # noqa: BLE001 - PIL raises many types; report one line
            problems.append((row, column, f"cannot read image ({_first_line(exc)})"))
            return None
        return int(height), int(width)
    shape = np.shape(cell)
    return (int(shape[0]), int(shape[1])) if len(shape) == 2 else None


class HFDataset(Dataset):
    """A Hugging Face ``datasets`` dataset: local imagefolder, parquet, arrow, or a Hub name."""

    name: ClassVar[str] = "hf"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Hugging Face datasets: hf:PATH (imagefolder, .parquet, .arrow, save_to_disk) or hf:OWNER/NAME"
    )
    licence: ClassVar[str] = "the dataset's"
    source: ClassVar[str] = "a local folder or file, or the Hugging Face Hub"

    def __init__(
        self,
        path: str | os.PathLike[str],
        split: str | None = None,
        image_column: str | None = None,
        label_column: str | None = None,
        mask_column: str | None = None,
        id_column: str | None = None,
        config: str | None = None,
    ) -> None:
        self.path = str(path).strip()
        if not self.path:
            raise ValueError("hf: parameter 'path' must be a local folder or file, or a Hub dataset name")
        local = Path(self.path).expanduser()
        self.local: Path | None = local if local.exists() else None
        if self.local is None and _looks_local(self.path):
            raise ValueError(f"{self.path}: not found (expected an imagefolder, a .parquet or an .arrow file)")
        self.where = str(self.local) if self.local is not None else repr(self.path)
        dataset = self._load(config)
        self.split, self._ds = self._pick_split(dataset, split)
        features = self._ds.features
        self.image_column = self._image_column(features, image_column)
        self.label_column = self._optional_column(features, label_column, "label", "label_column")
        self.mask_column = self._optional_column(features, mask_column, "mask", "mask_column")
        self.id_column = self._optional_column(features, id_column, None, "id_column")
        self._labels, self.label_names = self._read_labels()
        self._ids = self._read_ids()

    # ------------------------------------------------------------------ loading

    def _load(self, config: str | None) -> Any:
        datasets = _datasets()
        local = self.local
        builder = FILE_BUILDERS.get(local.suffix.lower()) if local is not None and local.is_file() else None
        if local is not None and local.is_file() and builder is None:
            raise ValueError(f"{local}: expected a .parquet or .arrow file, or a folder")
        try:
            if local is not None and builder is not None:
                return datasets.load_dataset(builder, data_files={"train": str(local)})
            if local is not None:
                if (local / "dataset_dict.json").is_file() or (local / "state.json").is_file():
                    return datasets.load_from_disk(str(local))
                return datasets.load_dataset(str(local), name=config)
            return datasets.load_dataset(self.path, name=config)
        except Exception as exc:  # noqa: BLE001 - datasets raises many types; report one line
            if local is None and hub_offline():
                raise ValueError(
                    f"{self.where}: not a local folder or file, and not in the local datasets cache while "
                    f"HF_HUB_OFFLINE=1 keeps the Hub off; pass a local imagefolder, .parquet or .arrow path"
                ) from None
            where = "from the Hugging Face Hub" if local is None else "with Hugging Face datasets"
            raise ValueError(f"{self.where}: cannot load {where} ({_first_line(exc)})") from None

    def _pick_split(self, dataset: Any, split: str | None) -> tuple[str, Any]:
        if not hasattr(dataset, "keys"):  # a single Dataset (save_to_disk of one split)
            only = str(dataset.split) if getattr(dataset, "split", None) is not None else "train"
            if split is not None and split != only:
                raise ValueError(f"{self.where}: no split {split!r}; splits: {only}")
            return only, dataset
        splits = list(dataset.keys())
        if split is None:
            if len(splits) != 1:
                raise ValueError(f"{self.where}: has splits {', '.join(splits)}; choose one with split=NAME")
            split = splits[0]
        if split not in dataset:
            raise ValueError(f"{self.where}: no split {split!r}; splits: {', '.join(splits)}")
        return split, dataset[split]

    def _image_column(self, features: Any, wanted: str | None) -> str:
        from datasets import Image

        columns = list(features)
        if wanted is not None:
            if wanted not in features:
                raise ValueError(f"{self.where}: no column {wanted!r} (image_column); columns: {', '.join(columns)}")
            if not isinstance(features[wanted], Image):
                raise ValueError(f"{self.where}: column {wanted!r} is not an image column ({features[wanted]})")
            return wanted
        images = [c for c in columns if isinstance(features[c], Image)]
        if "image" in images:
            return "image"
        if len(images) == 1:
            return images[0]
        found = f"image columns {', '.join(images)}" if images else "no image column"
        raise ValueError(f"{self.where}: {found}; name one with image_column=NAME (columns: {', '.join(columns)})")

    def _optional_column(self, features: Any, wanted: str | None, default: str | None, param: str) -> str | None:
        if wanted is None:
            return default if default is not None and default in features else None
        if wanted not in features:
            raise ValueError(f"{self.where}: no column {wanted!r} ({param}); columns: {', '.join(features)}")
        return wanted

    def _read_labels(self) -> tuple[list[int | None], tuple[str, ...]]:
        n = len(self._ds)
        if self.label_column is None:
            return [None] * n, ()
        from datasets import ClassLabel

        feature = self._ds.features[self.label_column]
        values = self._ds[self.label_column]
        if isinstance(feature, ClassLabel):
            return [int(v) if v is not None and int(v) >= 0 else None for v in values], tuple(feature.names)
        if all(v is None or (isinstance(v, int | np.integer) and not isinstance(v, bool)) for v in values):
            return [int(v) if v is not None and int(v) >= 0 else None for v in values], ()
        if all(v is None or isinstance(v, str) for v in values):
            names = tuple(sorted({v for v in values if v}))
            index = {name: i for i, name in enumerate(names)}
            return [index[v] if v else None for v in values], names
        raise ValueError(
            f"{self.where}: column {self.label_column!r} (label_column) must hold class indices or class names, "
            f"not {feature}"
        )

    def _read_ids(self) -> list[str]:
        n = len(self._ds)
        if self.id_column is not None:
            ids = [str(v) if v is not None else "" for v in self._ds[self.id_column]]
            empty = next((i for i, v in enumerate(ids) if not v), None)
            if empty is not None:
                raise ValueError(f"{self.where}: row {empty}: empty id in column {self.id_column!r} (id_column)")
            seen: dict[str, int] = {}
            for i, key in enumerate(ids):
                if key in seen:
                    raise ValueError(f"{self.where}: row {i}: id {key!r} is also row {seen[key]}'s (id_column)")
                seen[key] = i
            return ids
        from datasets import Image

        cells = self._ds.cast_column(self.image_column, Image(decode=False))[self.image_column]
        stems = [Path(c["path"]).stem if isinstance(c, dict) and c.get("path") else "" for c in cells]
        if all(stems) and len(set(stems)) == n:
            return stems
        width = max(5, len(str(n - 1)))
        return [f"{i:0{width}d}" for i in range(n)]

    # ------------------------------------------------------------------ dataset

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    @cached_property
    def _revision(self) -> str:
        local = self.local
        if local is not None:
            if local.is_file():
                return digest_files([local])
            files = sorted(p for p in local.rglob("*") if p.is_file() and not p.name.startswith("."))
            return digest_files(files, root=local)
        return str(getattr(self._ds, "_fingerprint", "") or "unknown")[:16]

    @property
    def revision(self) -> str:
        """Local data: SHA-256 (16 hex) over the relative names and bytes of its files; a Hub
        dataset: the ``datasets`` fingerprint of the split (it follows the Hub revision)."""
        return self._revision

    def __len__(self) -> int:
        return len(self._ids)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        n = len(self._ids) if limit is None else min(len(self._ids), max(0, int(limit)))
        self._check_rows(n)
        for i in range(n):
            yield self._sample(i)

    def _check_rows(self, n: int) -> None:
        """Check the first ``n`` rows from their image headers alone (readable, mask size = image
        size) and raise every problem found as one ``ValueError``: one problem reads ``WHERE row
        I column C: what``; several ``WHERE split S: N problems: row I column C (what), ...`` (the
        first 10, then ``and K more``). What only decoding shows fails when the row is read."""
        from datasets import Image as ImageFeature

        columns = [c for c in (self.image_column, self.mask_column) if c is not None]
        raw = self._ds.select_columns(columns)
        for column in columns:
            if isinstance(raw.features[column], ImageFeature):
                raw = raw.cast_column(column, ImageFeature(decode=False))
        problems: list[tuple[int, str, str]] = []
        for i in range(n):
            row = raw[i]
            image_size = _header_size(row[self.image_column], i, self.image_column, problems)
            if self.mask_column is None or row[self.mask_column] is None:
                continue
            mask_size = _header_size(row[self.mask_column], i, self.mask_column, problems)
            if image_size is not None and mask_size is not None and mask_size != image_size:
                problems.append(
                    (
                        i,
                        self.mask_column,
                        f"mask is {mask_size[0]}x{mask_size[1]} (HxW) but its image is {image_size[0]}x{image_size[1]}",
                    )
                )
        if len(problems) == 1:
            i, column, what = problems[0]
            raise ValueError(f"{self.where} split {self.split!r} row {i} column {column!r}: {what}")
        if problems:
            shown = ", ".join(f"row {i} column {column!r} ({what})" for i, column, what in problems[:10])
            more = f" and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise ValueError(f"{self.where} split {self.split!r}: {len(problems)} problems: {shown}{more}")

    def _sample(self, i: int) -> Sample:
        where = f"{self.where} split {self.split!r} row {i}"
        try:
            row = self._ds[i]
        except Exception as exc:  # noqa: BLE001 - a cell that cannot be decoded: name the row
            raise ValueError(f"{where}: cannot read ({_first_line(exc)})") from None
        image_cell = row[self.image_column]
        if image_cell is None:
            raise ValueError(f"{where}: no image in column {self.image_column!r}")
        image = rgb_array(image_cell)
        meta: dict[str, Any] = {"split": self.split, "row": i}
        ground_truth = None
        if self.mask_column is not None and row[self.mask_column] is not None:
            mask_where = f"{where} column {self.mask_column!r}"
            mask = _mask_array(row[self.mask_column], mask_where)
            if mask.shape != image.shape[:2]:
                raise ValueError(
                    f"{mask_where}: mask is {mask.shape[0]}x{mask.shape[1]} (HxW) but its image is "
                    f"{image.shape[0]}x{image.shape[1]}"
                    if mask.ndim == 2
                    else f"{mask_where}: mask must be 2-D, got shape {mask.shape}"
                )
            ground_truth, kind = mask_to_ground_truth(mask, mask_where)
            meta["mask_kind"] = kind
        return Sample(id=self._ids[i], image=image, label=self._labels[i], ground_truth=ground_truth, meta=meta)
