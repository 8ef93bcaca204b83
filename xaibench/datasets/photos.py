"""``photos``: real colour photographs that installed Python packages ship.

Nothing is downloaded. Each photo lives in a package's own files and is read in
place (the packages are located with ``importlib.util.find_spec``, which does not
import them). A photo whose package is not installed is skipped and the reason is
recorded in :attr:`PhotosDataset.skipped`.

Labels are ImageNet-1k class indices (``label_names`` are the 1000 ImageNet
names) where a photo's subject has an ImageNet class (chelsea -> 281 "tabby",
coffee -> 967 "espresso", grace_hopper -> 652 "military uniform"); the same index
is set as ``target`` for ImageNet-1k models. Other photos have ``label=None``:
the explained class is the model's prediction (DESIGN 1). Only ``quokka`` has a
real human mask (a polygon drawn by imgaug's author around the animal); the
others have ``ground_truth=None``, so alignment metrics answer n/a for them.

imgaug is not a dependency of xaibench: imgaug 0.4.0 (the wheel that ships the
quokka) does not import under NumPy 2 (``np.sctypes`` was removed) and its
dependencies pull in opencv, matplotlib and Shapely. The ``make`` set-up installs it
with ``pip install --no-deps imgaug==0.4.0`` for its files alone; this module only
reads them. Without it the quokka is skipped with that hint, and the photos track
has 8 photos (none with a mask). matplotlib and scikit-learn are not dependencies
either (the ``make`` set-up has them through the plugins and test extras); without
them their photos are skipped the same way.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Dataset, GroundTruth, Sample
from xaibench.datasets.io import digest_files, read_rgb
from xaibench.imagenet import imagenet_label_names

__all__ = ["PHOTOS", "PhotoSpec", "PhotosDataset", "package_dir", "polygon_mask"]


@dataclass(frozen=True)
class PhotoSpec:
    """One photo: where its file lives, what it shows and under which licence."""

    id: str
    package: str  # import name of the package that ships the file
    distribution: str  # its PyPI distribution name
    path: str  # file path inside the package directory
    licence: str
    source: str
    label: int | None = None  # ImageNet-1k index, or None when no class fits
    acceptable: tuple[int, ...] = ()  # other ImageNet classes that also describe the subject
    label_note: str = ""
    polygons: str | None = None  # JSON annotation file (imgaug format) whose polygons form the mask
    install: str = ""  # how to install the package, which is not a dependency of xaibench


PHOTOS: tuple[PhotoSpec, ...] = (
    PhotoSpec(
        "chelsea",
        "skimage",
        "scikit-image",
        "data/chelsea.png",
        "CC0-1.0",
        "Chelsea the cat, photograph by Stefan van der Walt (scikit-image sample data)",
        label=281,
        acceptable=(281, 282, 283, 284, 285),
        label_note="a tabby cat; ImageNet's domestic-cat classes 281-285 all fit",
    ),
    PhotoSpec(
        "coffee",
        "skimage",
        "scikit-image",
        "data/coffee.png",
        "CC0-1.0",
        "Coffee cup, photograph by Rachel Michetti, courtesy of Pikolo Espresso Bar (scikit-image sample data)",
        label=967,
        acceptable=(967, 968, 504),
        label_note="a coffee cup on a saucer; espresso, cup and coffee mug fit",
    ),
    PhotoSpec(
        "astronaut",
        "skimage",
        "scikit-image",
        "data/astronaut.png",
        "public domain",
        "Astronaut Eileen Collins, NASA Great Images database (scikit-image sample data)",
        label_note="a person; ImageNet-1k has no person class",
    ),
    PhotoSpec(
        "rocket",
        "skimage",
        "scikit-image",
        "data/rocket.jpg",
        "public domain",
        "Falcon 9 on the launch pad, photograph by SpaceX released into the public domain (scikit-image sample data)",
        label_note="a launch vehicle; no ImageNet-1k class fits (missile and space shuttle are other objects)",
    ),
    PhotoSpec(
        "motorcycle",
        "skimage",
        "scikit-image",
        "data/motorcycle_left.png",
        "Middlebury stereo 2014 (free for research; cite Scharstein et al., GCPR 2014)",
        "Middlebury 2014 stereo benchmark, Motorcycle scene, left view (scikit-image sample data)",
        label_note="a motorcycle; ImageNet-1k has only moped and motor scooter",
    ),
    PhotoSpec(
        "grace_hopper",
        "matplotlib",
        "matplotlib",
        "mpl-data/sample_data/grace_hopper.jpg",
        "public domain",
        "Commodore Grace M. Hopper, U.S. Navy photograph (matplotlib sample data)",
        label=652,
        acceptable=(652, 457, 906, 834),
        label_note="a person in a navy uniform; military uniform (bow tie, Windsor tie, suit also fit)",
        install="pip install matplotlib",
    ),
    PhotoSpec(
        "china",
        "sklearn",
        "scikit-learn",
        "datasets/images/china.jpg",
        "CC-BY-2.0",
        "Summer Palace tower, Beijing; photograph by Flickr user danielbuechele (scikit-learn sample images)",
        label_note="a Chinese pagoda tower; no ImageNet-1k class fits (palace, bell cote are near)",
        install="pip install scikit-learn",
    ),
    PhotoSpec(
        "flower",
        "sklearn",
        "scikit-learn",
        "datasets/images/flower.jpg",
        "CC-BY-2.0",
        "Dahlia; photograph by Flickr user vultilion (scikit-learn sample images)",
        label_note="a dahlia; ImageNet-1k has only daisy among garden flowers",
        install="pip install scikit-learn",
    ),
    PhotoSpec(
        "quokka",
        "imgaug",
        "imgaug",
        "quokka.jpg",
        "shipped in imgaug 0.4.0 (MIT); the photo's own licence is not stated",
        "Quokka with a hand-drawn polygon around the animal (imgaug example data)",
        label_note="a quokka; no ImageNet-1k class (wallaby and wombat are near)",
        polygons="quokka_annotations.json",
        install="pip install --no-deps imgaug==0.4.0",
    ),
)


def package_dir(package: str) -> Path | None:
    """Directory of an installed package, found without importing it (``None`` when absent)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _dist_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def polygon_mask(annotation: Path, shape: tuple[int, int]) -> np.ndarray:
    """Binary mask (bool, H x W) of the union of the polygons in an imgaug-style JSON file:
    ``{"polygons": [{"keypoints": [{"x": .., "y": ..}, ...]}, ...]}`` in pixel coordinates."""
    from skimage.draw import polygon

    try:
        data = json.loads(Path(annotation).read_text(encoding="utf-8"))
        polys = [np.array([[float(p["y"]), float(p["x"])] for p in poly["keypoints"]]) for poly in data["polygons"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{annotation}: cannot read polygon annotation ({type(exc).__name__}: {exc})") from exc
    if not polys or any(len(p) < 3 for p in polys):
        raise ValueError(f"{annotation}: expected polygons with at least 3 points")
    mask = np.zeros(shape, dtype=bool)
    for pts in polys:
        rr, cc = polygon(pts[:, 0], pts[:, 1], shape=shape)
        mask[rr, cc] = True
    return mask


class PhotosDataset(Dataset):
    """Real photographs from installed packages' sample data (see module docstring).

    Parameters: ``ids`` (optional subset of photo ids, in the order of :data:`PHOTOS`).
    """

    name: ClassVar[str] = "photos"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Real colour photos shipped by scikit-image, matplotlib, scikit-learn and imgaug; one with a polygon mask"
    )
    licence: ClassVar[str] = "per sample (CC0-1.0, public domain, CC-BY-2.0, Middlebury research use); see meta"
    source: ClassVar[str] = "sample data inside installed Python packages (no download)"

    def __init__(self, ids: Sequence[str] | str | None = None) -> None:
        known = {spec.id: spec for spec in PHOTOS}
        if isinstance(ids, str):
            ids = [part.strip() for part in ids.split(",") if part.strip()]
        if ids is not None:
            unknown = [i for i in ids if i not in known]
            if unknown:
                raise ValueError(f"photos: unknown photo id(s) {unknown}; known: {', '.join(known)}")
            wanted = set(ids)
            specs = [spec for spec in PHOTOS if spec.id in wanted]
        else:
            specs = list(PHOTOS)
        self.label_names = imagenet_label_names()
        self.skipped: dict[str, str] = {}
        self._entries: list[tuple[PhotoSpec, Path, Path | None]] = []
        for spec in specs:
            root = package_dir(spec.package)
            if root is None:
                hint = f" (for its files only: {spec.install})" if spec.install else ""
                self.skipped[spec.id] = f"package {spec.distribution} is not installed{hint}"
                continue
            image = root / spec.path
            annotation = root / spec.polygons if spec.polygons else None
            missing = [p for p in (image, annotation) if p is not None and not p.is_file()]
            if missing:
                self.skipped[spec.id] = f"{missing[0]} is missing from the installed {spec.distribution}"
                continue
            self._entries.append((spec, image, annotation))

    @property
    def notes(self) -> list[str]:
        """One line per skipped photo."""
        return [f"photo {pid!r} skipped: {why}" for pid, why in self.skipped.items()]

    @property
    def ids(self) -> list[str]:
        return [spec.id for spec, _, _ in self._entries]

    @cached_property
    def _revision(self) -> str:
        files: list[Path] = []
        for _, image, annotation in self._entries:
            files.append(image)
            if annotation is not None:
                files.append(annotation)
        return digest_files(files)

    @property
    def revision(self) -> str:
        """SHA-256 (16 hex) over the included photos' (and annotations') bytes."""
        return self._revision

    def __len__(self) -> int:
        return len(self._entries)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        entries = self._entries if limit is None else self._entries[: max(0, int(limit))]
        for spec, image_path, annotation in entries:
            yield self._sample(spec, image_path, annotation)

    def _sample(self, spec: PhotoSpec, image_path: Path, annotation: Path | None) -> Sample:
        image = read_rgb(image_path)
        ground_truth = None
        if annotation is not None:
            mask = polygon_mask(annotation, image.shape[:2])
            ground_truth = GroundTruth(mask=mask, notes=(f"polygon annotation from {annotation.name}",))
        meta: dict[str, Any] = {
            "licence": spec.licence,
            "source": spec.source,
            "package": f"{spec.distribution} {_dist_version(spec.distribution)}",
            "file": spec.path,
            "label_note": spec.label_note,
        }
        if spec.label is not None:
            meta["imagenet_class"] = self.label_names[spec.label]
            meta["imagenet_acceptable"] = list(spec.acceptable)
        return Sample(
            id=spec.id,
            image=image,
            label=spec.label,
            ground_truth=ground_truth,
            target=spec.label,
            meta=meta,
        )
