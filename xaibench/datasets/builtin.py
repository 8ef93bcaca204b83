"""The built-in datasets that read or make data of their own (``input-noise`` wraps one of them)."""

from __future__ import annotations

from xaibench.api import Dataset
from xaibench.datasets.folder import FolderDataset
from xaibench.datasets.hf import HFDataset
from xaibench.datasets.imdb import ImdbDataset
from xaibench.datasets.mechanisms import MechanismsDataset
from xaibench.datasets.photos import PhotosDataset
from xaibench.datasets.planted_tokens import PlantedTokensDataset
from xaibench.datasets.real.coco import CocoDataset
from xaibench.datasets.real.human_attention import HumanAttentionDataset
from xaibench.datasets.real.mohseni import MohseniDataset
from xaibench.datasets.real.mohseni_text import MohseniTextDataset
from xaibench.datasets.real.pets import OxfordPetsDataset
from xaibench.datasets.real.saliency_bench import SaliencyBenchDataset
from xaibench.datasets.real.voc import VOC2012SegDataset
from xaibench.datasets.shapes import ShapesDataset, ShapesShortcutDataset

DATASETS: list[type[Dataset]] = [
    ShapesDataset,
    ShapesShortcutDataset,
    MechanismsDataset,
    PlantedTokensDataset,
    ImdbDataset,
    PhotosDataset,
    FolderDataset,
    HFDataset,
    HumanAttentionDataset,
    MohseniDataset,
    MohseniTextDataset,
    VOC2012SegDataset,
    OxfordPetsDataset,
    CocoDataset,
    SaliencyBenchDataset,
]


def base_dataset_class(name: str) -> type[Dataset]:
    """The built-in dataset class registered as ``name``; ``ValueError`` naming the known ones."""
    for cls in DATASETS:
        if cls.name == name:
            return cls
    known = ", ".join(c.name for c in DATASETS)
    raise ValueError(f"{name!r} is not a built-in dataset (perturbation wraps only built-in datasets: {known})")
