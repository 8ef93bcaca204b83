"""Shared machinery of the real-data loaders (``human-attention``, ``mohseni``,
``voc2012-seg``, ``oxford-pets``, ``coco``, ``saliency-bench``).

- **Data roots.** A loader's root is, in this order: the ``root`` parameter (from
  the API, a suite's ``dataset_params`` or a config); the environment variable
  ``XAIBENCH_DATA_<NAME>`` (``<NAME>`` is the dataset name upper-cased with ``-``
  as ``_``, e.g. ``XAIBENCH_DATA_OXFORD_PETS``); a folder with one of the
  dataset's conventional names inside a directory of ``XAIBENCH_DATA_DIR``
  (``os.pathsep``-separated; ``xaibench --data-dir DIR`` sets it); the download
  cache ``XAIBENCH_DATA_CACHE`` (default ``~/.cache/xaibench/data``) ``/<name>``.
  Conventional names are tried as ``<name>`` then ``<name>-*`` in sorted order
  (``oxford-pets`` matches ``oxford-pets-26``). An explicit root (parameter or
  dataset variable) that does not hold the layout is an error, never skipped.
- **Missing data** raises :class:`DataRootError` naming the places searched, the
  expected layout and where to get the data.
- **Downloads** happen only with ``download=True``, never when
  ``XAIBENCH_OFFLINE``, ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` is set
  (fail fast, no network attempt), and only from the upstream URLs a loader lists.
- **Revision**: a digest over each file's relative path, size and the bytes of its
  first and last 64 KiB (the whole file when smaller), plus the label-map version:
  cheap on full datasets, stable across copies (no mtimes).
- **ImageNet label map**: ``xaibench/data/imagenet_label_map.json`` (data, not
  code); see :func:`label_map`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Dataset, Sample
from xaibench.errors import XaibenchError
from xaibench.imaging import resize_bilinear

__all__ = [
    "DATA_DIR_ENV",
    "DataRootError",
    "LabelEntry",
    "LayoutError",
    "RealDataset",
    "dataset_env_var",
    "fingerprint",
    "label_map",
    "label_map_version",
]

DATA_DIR_ENV = "XAIBENCH_DATA_DIR"
CACHE_ENV = "XAIBENCH_DATA_CACHE"
OFFLINE_ENVS = ("XAIBENCH_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
LABEL_MAP_FILE = "imagenet_label_map.json"
_EDGE = 64 * 1024


class DataRootError(XaibenchError, FileNotFoundError):
    """No usable data root: the message names where we looked, the layout and the source."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class LayoutError(ValueError):
    """A directory does not hold a loader's expected layout (the message says what is missing)."""


def dataset_env_var(name: str) -> str:
    """``XAIBENCH_DATA_<NAME>`` for a dataset name (``oxford-pets`` -> ``XAIBENCH_DATA_OXFORD_PETS``)."""
    return "XAIBENCH_DATA_" + "".join(c if c.isalnum() else "_" for c in name.upper())


def data_dirs() -> list[Path]:
    """The directories listed in ``XAIBENCH_DATA_DIR`` (``os.pathsep``-separated), in order."""
    raw = os.environ.get(DATA_DIR_ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def cache_dir() -> Path:
    raw = os.environ.get(CACHE_ENV)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "xaibench" / "data"


def offline_reason() -> str | None:
    for var in OFFLINE_ENVS:
        if os.environ.get(var, "").strip().lower() not in ("", "0", "false", "no"):
            return f"{var}={os.environ[var]}"
    return None


# ----------------------------------------------------------------------------- revision


def fingerprint(paths: Iterable[Path], root: Path) -> str:
    """SHA-256 over (relative path, size, first and last 64 KiB) of each file, in the given order."""
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        try:
            rel = p.relative_to(root).as_posix()
        except ValueError:
            rel = p.as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with p.open("rb") as fh:
            if size <= 2 * _EDGE:
                h.update(fh.read())
            else:
                h.update(fh.read(_EDGE))
                fh.seek(size - _EDGE)
                h.update(fh.read(_EDGE))
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------- resizing


def grey_to_truth(grey: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """A grey ground-truth map (any scale) at the image's ``size`` as ``(mask, levels, note)``.

    Two distinct values: binary (``mask = value > min``; resized by nearest, i.e.
    bilinear then >= 0.5). More values: multi-level, negatives clipped, scaled by the
    max (DESIGN 8 folder rule), resized bilinear. A constant map is all evidence when positive,
    else none.
    """
    g = np.asarray(grey, dtype=np.float32)
    values = np.unique(g)
    if values.size <= 2:
        mask = g > values.min() if values.size == 2 else np.full(g.shape, bool(values.size and values[0] > 0))
        if mask.shape != tuple(size):
            mask = resize_bilinear(mask.astype(np.float32), size) >= 0.5
        return mask, None, "binary"
    g = resize_bilinear(np.clip(g, 0.0, None), size)
    g = np.clip(g, 0.0, None)
    top = float(g.max())
    levels = (g / top).astype(np.float32) if top > 0 else np.zeros(size, dtype=np.float32)
    return None, levels, "multi-level, scaled by max"


# ----------------------------------------------------------------------------- label map


@dataclass(frozen=True)
class LabelEntry:
    """One dataset class's ImageNet mapping (see the JSON's ``match`` glossary)."""

    name: str
    imagenet: int | None
    match: str
    candidates: tuple[int, ...]
    note: str
    lemma: str | None = None
    wnid: str | None = None
    coco_id: int | None = None


def _label_map_path() -> Any:
    return resources.files("xaibench") / "data" / LABEL_MAP_FILE


@lru_cache(maxsize=1)
def _label_doc() -> dict[str, Any]:
    path = _label_map_path()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise XaibenchError(f"{path}: cannot read the ImageNet label map ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), dict):
        raise XaibenchError(f"{path}: label map must be an object with a 'datasets' object")
    return doc


def label_map_version() -> str:
    """Digest of the label-map file (part of every mapped dataset's revision)."""
    text = _label_map_path().read_bytes()
    return hashlib.sha256(text).hexdigest()[:12]


@cache
def label_map(dataset: str) -> dict[str, LabelEntry]:
    """Class name -> :class:`LabelEntry` for ``dataset``, following its ``inherit`` list
    (own entries first, then each inherited dataset in order; the first entry wins)."""
    doc = _label_doc()
    datasets = doc["datasets"]
    if dataset not in datasets:
        raise XaibenchError(f"{_label_map_path()}: no entry for dataset {dataset!r}")
    out: dict[str, LabelEntry] = {}
    for parent in datasets[dataset].get("inherit", []):
        for k, v in label_map(parent).items():
            out.setdefault(k, v)
    own: dict[str, LabelEntry] = {}
    for name, e in datasets[dataset].get("classes", {}).items():
        try:
            imagenet = e["imagenet"]
            entry = LabelEntry(
                name=name,
                imagenet=None if imagenet is None else int(imagenet),
                match=str(e["match"]),
                candidates=tuple(int(c) for c in e.get("candidates", ())),
                note=str(e.get("note", "")),
                lemma=e.get("lemma"),
                wnid=e.get("wnid"),
                coco_id=None if e.get("coco_id") is None else int(e["coco_id"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise XaibenchError(f"{_label_map_path()}: bad entry {dataset}/{name}: {exc}") from exc
        own[name] = entry
    return {**out, **own}


def target_fields(entry: LabelEntry | None) -> tuple[int | None, dict[str, Any]]:
    """``(Sample.target, meta additions)`` for a sample explained as ``entry``'s class."""
    if entry is None:
        return None, {"target_source": "predicted", "target_candidates": [], "target_match": "none"}
    meta: dict[str, Any] = {
        "target_source": "mapped" if entry.imagenet is not None else "predicted",
        "target_candidates": list(entry.candidates),
        "target_match": entry.match,
    }
    if entry.imagenet is not None:
        meta["target_name"] = entry.lemma
    return entry.imagenet, meta


# ----------------------------------------------------------------------------- downloads


def _safe_extract(archive: Path, dest: Path) -> None:
    dest_resolved = dest.resolve()

    def check(name: str) -> None:
        target = (dest / name).resolve()
        if target != dest_resolved and dest_resolved not in target.parents:
            raise XaibenchError(f"{archive}: archive member {name!r} escapes the destination; refusing to extract")

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for n in zf.namelist():
                check(n)
            zf.extractall(dest)
        return
    try:
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                check(m.name)
                if m.issym() or m.islnk():
                    raise XaibenchError(f"{archive}: archive member {m.name!r} is a link; refusing to extract")
            tf.extractall(dest)
    except tarfile.TarError as exc:
        raise XaibenchError(f"{archive}: not a zip or tar archive ({exc})") from exc


def download_into(dest: Path, downloads: Sequence[tuple[str, str]], what: str, timeout: float = 30.0) -> None:
    """Fetch each ``(url, subfolder)`` archive and extract it into ``dest / subfolder``.

    Fails fast, without any network attempt, when an offline variable is set.
    """
    reason = offline_reason()
    if reason:
        raise DataRootError(f"{what}: download requested but offline ({reason}); no network attempt was made")
    dest.mkdir(parents=True, exist_ok=True)
    for url, sub in downloads:
        target = dest / sub if sub else dest
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=dest, suffix=".part", delete=False) as tmp:
            tmp_path = Path(tmp.name)
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    shutil.copyfileobj(resp, tmp)
            except OSError as exc:
                tmp.close()
                tmp_path.unlink(missing_ok=True)
                raise DataRootError(f"{what}: download of {url} failed ({exc})") from exc
        try:
            _safe_extract(tmp_path, target)
        finally:
            tmp_path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- base class


class RealDataset(Dataset):
    """Base of the file-backed real datasets: root resolution, revision, sample iteration.

    Subclasses set ``name``, ``folder_names``, ``layout``, ``get_from``, optionally
    ``downloads``, and implement :meth:`check_root`, :meth:`_index` (build the item
    list) and :meth:`_load` (one item -> :class:`Sample`).
    """

    needs: ClassVar[tuple[str, ...]] = ("data_root",)
    folder_names: ClassVar[tuple[str, ...]] = ()
    layout: ClassVar[str] = ""
    get_from: ClassVar[str] = ""
    downloads: ClassVar[tuple[tuple[str, str], ...]] = ()
    label_map_key: ClassVar[str | None] = None

    def __init__(self, root: str | os.PathLike[str] | None = None, download: bool = False) -> None:
        self.root = self.resolve_root(root, download=download)
        self._items: list[Any] = []
        self._files: list[Path] = []
        self._revision: str | None = None
        self._revision_base: Path = self.root  # file names in the revision are relative to this

    # -- root resolution ---------------------------------------------------------------

    @classmethod
    def check_root(cls, root: Path) -> Path:
        """Return the normalised root if ``root`` holds the layout, else raise :class:`LayoutError`."""
        raise NotImplementedError

    @classmethod
    def _try(cls, root: Path) -> tuple[Path | None, str | None]:
        if not root.is_dir():
            return None, f"{root}: not a directory"
        try:
            return cls.check_root(root), None
        except LayoutError as exc:
            return None, f"{root}: {exc}"

    @classmethod
    def _candidates(cls, base: Path) -> list[Path]:
        out: list[Path] = []
        for stem in (cls.name, *cls.folder_names):
            exact = base / stem
            if exact.is_dir() and exact not in out:
                out.append(exact)
            if base.is_dir():
                for p in sorted(base.glob(f"{stem}-*")):
                    if p.is_dir() and p not in out:
                        out.append(p)
        return out

    @classmethod
    def find_root(cls, root: str | os.PathLike[str] | None = None) -> tuple[Path | None, list[str]]:
        """Search for the data root without raising on absence. Returns ``(root or None, log)``.

        An explicit ``root`` or ``XAIBENCH_DATA_<NAME>`` that fails the layout check
        raises :class:`DataRootError` (a wrong explicit path is never skipped).
        """
        log: list[str] = []
        env_var = dataset_env_var(cls.name)
        explicit = [("root parameter", root), (f"${env_var}", os.environ.get(env_var) or None)]
        for label, value in explicit:
            if value is None:
                log.append(f"{label}: not set")
                continue
            found, problem = cls._try(Path(value).expanduser())
            if found is None:
                raise DataRootError(cls.missing_message([f"{label} = {value}: {problem}"]))
            return found, log
        dirs = data_dirs()
        if not dirs:
            log.append(f"${DATA_DIR_ENV}: not set")
        for base in dirs:
            cands = cls._candidates(base)
            if not cands:
                names = ", ".join(f"{n}[-*]" for n in (cls.name, *cls.folder_names))
                log.append(f"${DATA_DIR_ENV} entry {base}: no folder named {names}")
            for cand in cands:
                found, problem = cls._try(cand)
                if found is not None:
                    return found, log
                log.append(f"${DATA_DIR_ENV} entry {base}: {problem}")
        cached = cache_dir() / cls.name
        if cached.is_dir():
            for cand in [cached, *sorted(p for p in cached.iterdir() if p.is_dir())]:
                found, problem = cls._try(cand)
                if found is not None:
                    return found, log
            log.append(f"download cache {cached}: layout not found")
        else:
            log.append(f"download cache {cached}: absent")
        return None, log

    @classmethod
    def missing_message(cls, log: Sequence[str]) -> str:
        env_var = dataset_env_var(cls.name)
        names = ", ".join(f"{n}[-*]" for n in (cls.name, *cls.folder_names))
        lines = [f"dataset {cls.name!r}: no data root found.", "Looked at:"]
        lines += [f"  - {entry}" for entry in log]
        lines += [
            f"Give the root with dataset_params {{'root': DIR}}, ${env_var}=DIR, or ${DATA_DIR_ENV} (--data-dir) "
            f"holding a folder named {names}.",
            "Expected layout under the root:",
            *(f"  {line}" for line in cls.layout.strip().splitlines()),
            f"Get it from: {cls.get_from}",
        ]
        if cls.downloads:
            lines.append("Or pass download=True when online (fetches: " + ", ".join(u for u, _ in cls.downloads) + ").")
        return "\n".join(lines)

    @classmethod
    def resolve_root(cls, root: str | os.PathLike[str] | None = None, download: bool = False) -> Path:
        found, log = cls.find_root(root)
        if found is not None:
            return found
        if download and cls.downloads:
            dest = cache_dir() / cls.name
            download_into(dest, cls.downloads, f"dataset {cls.name!r}")
            found, log = cls.find_root(None)
            if found is not None:
                return found
            raise DataRootError(cls.missing_message([*log, f"downloaded into {dest} but the layout was not found"]))
        if download:
            log.append("download=True: no public download for this dataset")
        raise DataRootError(cls.missing_message(log))

    # -- dataset protocol -------------------------------------------------------------

    def _load(self, item: Any) -> Sample:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._items)

    @property
    def revision(self) -> str:
        """Digest of every file the full dataset reads (see :func:`fingerprint`) and the label map."""
        if self._revision is None:
            digest = fingerprint(self._files, self._revision_base)
            if self.label_map_key is not None:
                digest = hashlib.sha256(f"{digest}:{label_map_version()}".encode()).hexdigest()[:16]
            self._revision = digest
        return self._revision

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        stop = len(self._items) if limit is None else max(0, min(len(self._items), int(limit)))
        for item in self._items[:stop]:
            yield self._load(item)


def require(path: Path, what: str) -> Path:
    """Raise :class:`LayoutError` naming ``what`` when ``path`` does not exist."""
    if not path.exists():
        raise LayoutError(f"missing {what} ({path})")
    return path
