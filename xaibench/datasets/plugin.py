"""Built-in datasets, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Dataset, Register
from xaibench.datasets.folder import FolderDataset
from xaibench.datasets.hf import HFDataset
from xaibench.datasets.photos import PhotosDataset
from xaibench.datasets.real.coco import CocoDataset
from xaibench.datasets.real.human_attention import HumanAttentionDataset
from xaibench.datasets.real.mohseni import MohseniDataset
from xaibench.datasets.real.pets import OxfordPetsDataset
from xaibench.datasets.real.saliency_bench import SaliencyBenchDataset
from xaibench.datasets.real.voc import VOC2012SegDataset
from xaibench.datasets.shapes import ShapesDataset, ShapesShortcutDataset
from xaibench.plugins.hookspecs import hookimpl

DATASETS: list[type[Dataset]] = [
    ShapesDataset,
    ShapesShortcutDataset,
    PhotosDataset,
    FolderDataset,
    HFDataset,
    HumanAttentionDataset,
    MohseniDataset,
    VOC2012SegDataset,
    OxfordPetsDataset,
    CocoDataset,
    SaliencyBenchDataset,
]


@hookimpl
def register_datasets(register: Register) -> None:
    for cls in DATASETS:
        register(cls)
