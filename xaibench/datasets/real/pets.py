"""``oxford-pets``: the Oxford-IIIT Pet dataset in its official layout::

    images/<Breed>_<n>.jpg
    annotations/trimaps/<Breed>_<n>.png    1 = pet, 2 = background, 3 = boundary (not classified)
    annotations/<split>.txt                 "<name> <class id 1-37> <species 1 cat, 2 dog> <breed id>"

``split`` is ``test`` (default, ``test.txt``), ``trainval`` or ``all`` (``list.txt``);
``#`` lines are comments. ``label`` is ``class id - 1`` into the 37 breeds of
:data:`PET_BREEDS` (the official order); ``meta`` holds ``breed`` and ``species``.

Ground truth is the **trimap foreground** (DESIGN 2): ``mask = trimap == 1``. The
boundary band (3) is the annotators' "not classified" strip around the pet's outline;
by default it is **excluded** (not evidence, like VOC void) and its size is noted;
``include_boundary=True`` adds it to the mask.

Targets: a breed that is itself an ImageNet class (``imagenet_label_map.json``, e.g.
``great_pyrenees`` -> 257 Great Pyrenees, ``Persian`` -> 283 Persian cat) is explained
as that class (``"mapped"``); other breeds (e.g. ``Maine_Coon``) explain the model's
prediction (``"predicted"``) and record the ImageNet cats (281-285) or dogs (151-268) in
``meta["target_candidates"]``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.io import read_mask, read_rgb
from xaibench.datasets.real.common import LayoutError, RealDataset, label_map, require, target_fields

PET_BREEDS: tuple[str, ...] = (
    "Abyssinian",
    "american_bulldog",
    "american_pit_bull_terrier",
    "basset_hound",
    "beagle",
    "Bengal",
    "Birman",
    "Bombay",
    "boxer",
    "British_Shorthair",
    "chihuahua",
    "Egyptian_Mau",
    "english_cocker_spaniel",
    "english_setter",
    "german_shorthaired",
    "great_pyrenees",
    "havanese",
    "japanese_chin",
    "keeshond",
    "leonberger",
    "Maine_Coon",
    "miniature_pinscher",
    "newfoundland",
    "Persian",
    "pomeranian",
    "pug",
    "Ragdoll",
    "Russian_Blue",
    "saint_bernard",
    "samoyed",
    "scottish_terrier",
    "shiba_inu",
    "Siamese",
    "Sphynx",
    "staffordshire_bull_terrier",
    "wheaten_terrier",
    "yorkshire_terrier",
)
"""The 37 breeds in class-id order (class id = index + 1); cats are capitalised."""
SPECIES = {1: "cat", 2: "dog"}
SPLIT_FILES = {"test": "test.txt", "trainval": "trainval.txt", "all": "list.txt"}
PET, BACKGROUND, BOUNDARY = 1, 2, 3


def parse_list(path: Path) -> list[tuple[str, int, int]]:
    """``(name, class id, species)`` rows of an Oxford-IIIT Pet list file, validated."""
    rows: list[tuple[str, int, int]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        try:
            name, class_id, species = parts[0], int(parts[1]), int(parts[2])
        except (IndexError, ValueError) as exc:
            raise ValueError(
                f"{path}:{lineno}: expected '<name> <class id> <species> <breed id>', got {line!r}"
            ) from exc
        if not 1 <= class_id <= len(PET_BREEDS) or species not in SPECIES:
            raise ValueError(f"{path}:{lineno}: class id {class_id} or species {species} out of range")
        breed = name.rsplit("_", 1)[0]
        if breed != PET_BREEDS[class_id - 1]:
            raise ValueError(
                f"{path}:{lineno}: {name} has class id {class_id} ({PET_BREEDS[class_id - 1]}), not its breed {breed}"
            )
        if (species == 1) != breed[0].isupper():
            raise ValueError(f"{path}:{lineno}: {name} species {species} contradicts the breed's capitalisation")
        rows.append((name, class_id, species))
    return rows


class OxfordPetsDataset(RealDataset):
    """Oxford-IIIT Pet: 37 cat and dog breeds, trimap foreground masks."""

    name: ClassVar[str] = "oxford-pets"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Oxford-IIIT Pet: cat and dog breeds with trimap foreground masks (boundary excluded by default); "
        "ImageNet breeds explained as mapped"
    )
    licence: ClassVar[str] = "CC BY-SA 4.0"
    source: ClassVar[str] = "https://www.robots.ox.ac.uk/~vgg/data/pets/"
    label_map_key: ClassVar[str | None] = "oxford-pets"
    folder_names: ClassVar[tuple[str, ...]] = ("oxford-iiit-pet", "oxford_pets", "pets")
    layout: ClassVar[str] = """
images/<Breed>_<n>.jpg
annotations/trimaps/<Breed>_<n>.png   (1 pet, 2 background, 3 boundary)
annotations/test.txt | trainval.txt | list.txt   ('<name> <class id> <species> <breed id>')
"""
    get_from: ClassVar[str] = "https://www.robots.ox.ac.uk/~vgg/data/pets/ (images.tar.gz and annotations.tar.gz)"
    downloads: ClassVar[tuple[tuple[str, str], ...]] = (
        ("https://www.robots.ox.ac.uk/~vgg/data/pets/data/images.tar.gz", ""),
        ("https://www.robots.ox.ac.uk/~vgg/data/pets/data/annotations.tar.gz", ""),
    )

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        split: str = "test",
        include_boundary: bool = False,
        download: bool = False,
    ) -> None:
        if split not in SPLIT_FILES:
            raise ValueError(f"oxford-pets: unknown split {split!r}; choose one of {', '.join(SPLIT_FILES)}")
        super().__init__(root=root, download=download)
        self.split = split
        self.include_boundary = bool(include_boundary)
        self.label_names = PET_BREEDS
        list_file = self.root / "annotations" / SPLIT_FILES[split]
        if not list_file.is_file():
            raise LayoutError(f"{list_file}: list file for split {split!r} not found")
        for name, class_id, species in parse_list(list_file):
            img = self.root / "images" / f"{name}.jpg"
            tri = self.root / "annotations" / "trimaps" / f"{name}.png"
            for p in (img, tri):
                if not p.is_file():
                    raise LayoutError(f"{p}: listed in {list_file.name} but missing")
            self._items.append((name, class_id, species, img, tri))
        if not self._items:
            raise LayoutError(f"{list_file}: no rows")
        self._files = [list_file, *(p for *_, img, tri in self._items for p in (img, tri))]

    @classmethod
    def check_root(cls, root: Path) -> Path:
        require(root / "images", "images/")
        require(root / "annotations" / "trimaps", "annotations/trimaps/")
        if not any((root / "annotations" / f).is_file() for f in SPLIT_FILES.values()):
            raise LayoutError("missing annotations/test.txt, trainval.txt or list.txt")
        return root

    def _load(self, item: Any) -> Sample:
        name, class_id, species, img_path, tri_path = item
        image = read_rgb(img_path)
        trimap = read_mask(tri_path)
        if trimap.shape != image.shape[:2]:
            raise ValueError(f"{tri_path}: trimap {trimap.shape} does not match image {image.shape[:2]}")
        bad = np.setdiff1d(np.unique(trimap), [PET, BACKGROUND, BOUNDARY])
        if bad.size:
            raise ValueError(f"{tri_path}: unexpected trimap values {bad.tolist()} (expected 1, 2, 3)")
        boundary = trimap == BOUNDARY
        mask = (trimap == PET) | boundary if self.include_boundary else trimap == PET
        breed = PET_BREEDS[class_id - 1]
        target, meta = target_fields(label_map("oxford-pets").get(breed))
        n_boundary = int(boundary.sum())
        verb = "included in" if self.include_boundary else "excluded from"
        notes = (f"trimap boundary (3) {verb} the mask: {n_boundary} px ({n_boundary / boundary.size:.1%})",)
        meta.update({"class": breed, "breed": breed, "species": SPECIES[species], "boundary_pixels": n_boundary})
        return Sample(
            id=name,
            image=image,
            label=class_id - 1,
            ground_truth=GroundTruth(mask=mask, notes=notes),
            target=target,
            meta=meta,
        )
