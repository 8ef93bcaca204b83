"""Built-in datasets, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Dataset, Register
from xaibench.datasets.builtin import DATASETS as BASE_DATASETS
from xaibench.datasets.perturbed import InputNoiseDataset
from xaibench.plugins.hookspecs import hookimpl

DATASETS: list[type[Dataset]] = [*BASE_DATASETS, InputNoiseDataset]


@hookimpl
def register_datasets(register: Register) -> None:
    for cls in DATASETS:
        register(cls)
