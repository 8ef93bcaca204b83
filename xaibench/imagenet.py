"""The 1000 ImageNet-1k class names, read offline from the files timm's wheel ships.

timm carries ``data/_info/imagenet_synsets.txt`` (the 1000 WordNet ids in class
index order) and ``imagenet_synset_to_lemma.txt`` (id -> "tabby, tabby cat").
They are read as package files, without importing timm.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

__all__ = ["imagenet_label_names", "imagenet_synsets"]

_SYNSETS = "imagenet_synsets.txt"
_LEMMAS = "imagenet_synset_to_lemma.txt"


def _info_dir() -> Path:
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("ImageNet class names come from the timm package, which is not installed (pip install timm)")
    info = Path(next(iter(spec.submodule_search_locations))) / "data" / "_info"
    for name in (_SYNSETS, _LEMMAS):
        if not (info / name).is_file():
            raise RuntimeError(f"{info / name}: ImageNet class-name file missing from the installed timm package")
    return info


@lru_cache(maxsize=1)
def imagenet_synsets() -> tuple[str, ...]:
    """The 1000 WordNet ids (``n01440764`` ...) in ImageNet-1k class index order."""
    path = _info_dir() / _SYNSETS
    synsets = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    if len(synsets) != 1000:
        raise RuntimeError(f"{path}: expected 1000 ImageNet synsets, found {len(synsets)}")
    return synsets


@lru_cache(maxsize=1)
def imagenet_label_names() -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names in index order (index 281 is ``"tabby, tabby cat"``)."""
    path = _info_dir() / _LEMMAS
    lemmas: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("\t")
        lemmas[key.strip()] = value.strip()
    missing = [s for s in imagenet_synsets() if s not in lemmas]
    if missing:
        raise RuntimeError(f"{path}: no name for synset(s) {missing[:5]}")
    return tuple(lemmas[s] for s in imagenet_synsets())
