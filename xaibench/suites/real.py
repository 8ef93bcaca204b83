"""The ``real`` suite: EfficientNet-Lite0 (ImageNet) on every real dataset whose root is present.

Roots are found exactly as the loaders find them (see
:mod:`xaibench.datasets.real.common`): ``XAIBENCH_DATA_<NAME>`` or a conventionally
named folder in ``XAIBENCH_DATA_DIR`` (``xaibench --data-dir DIR`` sets it). With
``XAIBENCH_DATA_DIR=/work/shared/data`` the folders ``human-attention-25``,
``voc2012-seg-14``, ``oxford-pets-26`` and ``coco-val2017-10`` are found. Each track
passes the found root as ``dataset_params={"root": ...}`` and says ``target="label"``: the
explained class is ``Sample.target`` where the dataset maps its class to ImageNet, the most
probable of ``meta["target_candidates"]`` where the class spans several ImageNet classes, else
the prediction (:func:`xaibench.runner.track.resolve_targets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from xaibench.api import Suite, TrackSpec
from xaibench.datasets.real.coco import CocoDataset
from xaibench.datasets.real.common import DATA_DIR_ENV, DataRootError, LayoutError, RealDataset
from xaibench.datasets.real.human_attention import HumanAttentionDataset
from xaibench.datasets.real.mohseni import MohseniDataset
from xaibench.datasets.real.pets import OxfordPetsDataset
from xaibench.datasets.real.saliency_bench import SaliencyBenchDataset, benchmark_dirs
from xaibench.datasets.real.voc import VOC2012SegDataset

MODEL = "efficientnet-lite0"
REAL_DATASETS: tuple[type[RealDataset], ...] = (
    HumanAttentionDataset,
    VOC2012SegDataset,
    OxfordPetsDataset,
    CocoDataset,
    MohseniDataset,
    SaliencyBenchDataset,
)


def find_roots() -> dict[str, Path | str | None]:
    """Dataset name -> found root, ``None`` (absent) or an error string (explicit root with a bad layout)."""
    out: dict[str, Path | str | None] = {}
    for cls in REAL_DATASETS:
        try:
            out[cls.name] = cls.find_root()[0]
        except DataRootError as exc:
            out[cls.name] = str(exc).splitlines()[0] + " " + "; ".join(str(exc).splitlines()[2:3])
    return out


# Human ground truth is what these tracks add, so they run every alignment metric; faithfulness
# is limited to deletion/insertion with 20 steps (EfficientNet-Lite0 costs ~30 ms a forward pass
# on 2 cores); the sanity check runs on every track with a model (DESIGN 4b). `--metric` or
# `--suite` choices override this.
REAL_METRICS = ("family:alignment", "family:perceptual", "model_randomisation", "deletion", "insertion")
REAL_METRIC_PARAMS = {"deletion": {"steps": 20}, "insertion": {"steps": 20}}


class RealSuite(Suite):
    """Real images with human ground truth; tracks only for the datasets found on this machine."""

    name: ClassVar[str] = "real"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "EfficientNet-Lite0 on the real datasets whose roots are present: human-attention, voc2012-seg, "
        "oxford-pets, coco, mohseni, saliency-bench (set --data-dir / XAIBENCH_DATA_DIR)"
    )
    licence: ClassVar[str] = "Apache-2.0 (suite); each dataset keeps its own licence"

    def tracks(self) -> list[TrackSpec]:
        """One track per found dataset (saliency-bench: one per benchmark folder).

        Raises :class:`DataRootError` when an explicit root (``XAIBENCH_DATA_<NAME>``)
        does not hold its layout: a misconfigured dataset is never skipped silently.
        """
        specs: list[TrackSpec] = []
        for cls in REAL_DATASETS:
            root, _ = cls.find_root()
            if root is None:
                continue
            params: dict[str, object] = {"root": str(root)}
            if cls is MohseniDataset:
                try:
                    MohseniDataset(root=root, subset="all")
                except LayoutError:
                    params["subset"] = "imagenet"  # no VOCdevkit for the PASCAL part
            if cls is SaliencyBenchDataset:
                for bench in benchmark_dirs(root):
                    specs.append(
                        TrackSpec(
                            name=f"{cls.name}-{bench.name}" if bench != root else cls.name,
                            dataset=cls.name,
                            model=MODEL,
                            target="label",
                            dataset_params={**params, "benchmark": bench.name} if bench != root else params,
                            metrics=REAL_METRICS,
                            metric_params=REAL_METRIC_PARAMS,
                            description=f"{cls.description} [{bench.name}]",
                        )
                    )
                continue
            specs.append(
                TrackSpec(
                    name=cls.name,
                    dataset=cls.name,
                    model=MODEL,
                    target="label",
                    dataset_params=params,
                    metrics=REAL_METRICS,
                    metric_params=REAL_METRIC_PARAMS,
                    description=cls.description,
                )
            )
        return specs

    def status(self) -> str:
        roots = find_roots()
        found = [f"{k} ({v})" for k, v in roots.items() if isinstance(v, Path)]
        missing = [k for k, v in roots.items() if v is None]
        errors = [f"{k}: {v}" for k, v in roots.items() if isinstance(v, str)]
        parts = [f"found: {', '.join(found) if found else 'none'}"]
        if missing:
            parts.append(f"missing: {', '.join(missing)} (set --data-dir / ${DATA_DIR_ENV} or XAIBENCH_DATA_<NAME>)")
        if errors:
            parts.append("errors: " + " | ".join(errors))
        return "; ".join(parts)
