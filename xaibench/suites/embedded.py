"""Built-in suites: ``default`` (the offline ~2 minute run), ``full`` (the same tracks with every
metric and sample) and ``real`` (EfficientNet-Lite0 on the real datasets whose roots exist)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xaibench.api import Suite, TrackSpec

# Budget of the default run (2 cores): EfficientNet-Lite0 forwards about 35 images/s and the
# shapes CNN about 1000/s, while ROAD alone needs 100 forward passes per sample and order. So the
# default suite keeps the ranking metrics of every family (ROAD with its default `road`
# perturbation only), the sanity check, fewer samples and, on photos, coarser deletion/insertion
# curves; the metric parameters are recorded with every result. `--suite full` runs everything.
# A metric ranks on a track only with at least 8 samples shared by the explainers (DESIGN 7): the
# shapes tracks keep 16 samples, and photos takes all 9 photos. Only one photo (imgaug's quokka)
# has a real mask, so photos ranks on faithfulness only: no alignment metric runs there. Measured
# on 2 cores with the models cached: 1 min 55 s with 10-step deletion/insertion curves on photos
# (2 min 18 s with 20 steps; the cut that costs least: the curves stay monotone AUCs, coarser).
# Robustness (DESIGN 3b) runs on the two shapes tracks only: its members with `default = True`
# (max_sensitivity, avg_sensitivity, local_lipschitz_estimate) share one pass of n = 10 perturbed
# inputs per sample, explainer re-run on each; on photos that is 90 EfficientNet-Lite0
# explanations per explainer, beyond the budget, while the shapes CNN makes them cheap. Measured
# (seed 0, 2 cores shared with other jobs, so wall times are inflated): the robustness records'
# wall time sums to 2.8 s of 209 s; CPU time (user + sys) 2 min 39 s against 2 min 35 s without.
FAMILIES = ("family:alignment", "family:perceptual", "model_randomisation")
ROBUSTNESS = ("family:robustness",)
SHAPES_METRICS = (
    *FAMILIES,
    "deletion",
    "insertion",
    "road_sufficiency",
    "road_necessity",
    "road_faithfulness",
    *ROBUSTNESS,
)
SHORTCUT_METRICS = (*FAMILIES, "deletion", "sparseness", *ROBUSTNESS)
PHOTOS_METRICS = ("family:perceptual", "model_randomisation", "deletion", "insertion", "average_drop", "sparseness")
FULL_METRICS = ("all", "native")
"""What ``full`` runs: every metric with ``default = True`` (plugins' too) and every built-in one,
``default = False`` included (the field's metrics of DESIGN 3b)."""
DEFAULT_PHOTOS: tuple[str, ...] | None = None
"""Every photo (9): faithfulness needs at least 8 shared samples to rank."""
PHOTOS_METRIC_PARAMS = {"deletion": {"steps": 10}, "insertion": {"steps": 10}}


def embedded_tracks(
    *,
    shapes_limit: int | None,
    photos: tuple[str, ...] | None,
    metrics: Mapping[str, tuple[str, ...] | None],
    metric_params: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> list[TrackSpec]:
    """The three offline tracks: synthetic shapes, its shortcut variant, and real photos."""
    return [
        TrackSpec(
            name="shapes",
            dataset="shapes",
            model="shapes-cnn",
            model_params={"variant": "shapes"},
            synthetic=True,
            limit=shapes_limit,
            metrics=metrics.get("shapes"),
            description="Synthetic shapes on cluttered backgrounds; a small CNN trained by xaibench.",
        ),
        TrackSpec(
            name="shapes-shortcut",
            dataset="shapes-shortcut",
            model="shapes-cnn",
            model_params={"variant": "shapes-shortcut"},
            synthetic=True,
            limit=shapes_limit,
            metrics=metrics.get("shapes-shortcut"),
            description="Synthetic shapes with a class-correlated watermark the model learned to use.",
        ),
        TrackSpec(
            name="photos",
            dataset="photos",
            dataset_params={"ids": list(photos)} if photos else {},
            model="efficientnet-lite0",
            target="label",  # a photo's ImageNet label (Sample.target), else the prediction
            metrics=metrics.get("photos"),
            metric_params=metric_params.get("photos", {}),
            description="Real photographs shipped by installed packages; EfficientNet-Lite0 (ImageNet).",
        ),
    ]


class DefaultSuite(Suite):
    """Runs offline on a fresh machine in about two minutes: shapes, shapes-shortcut, photos."""

    name = "default"
    version = "1.0.0"
    description = "Embedded offline suite: synthetic `shapes`, `shapes-shortcut` and real `photos` (~2 min)."
    licence = "Apache-2.0"

    def tracks(self) -> list[TrackSpec]:
        return embedded_tracks(
            shapes_limit=16,
            photos=DEFAULT_PHOTOS,
            metrics={"shapes": SHAPES_METRICS, "shapes-shortcut": SHORTCUT_METRICS, "photos": PHOTOS_METRICS},
            metric_params={"photos": PHOTOS_METRIC_PARAMS},
        )

    def status(self) -> str:
        return (
            "offline; 16 synthetic shapes per shapes track, 9 photos (faithfulness only: one has a mask); "
            "ranking metrics of every family and the sanity check"
        )


class FullSuite(Suite):
    """The default suite's tracks with every installed metric at its default parameters."""

    name = "full"
    version = "1.0.0"
    description = "The embedded tracks with every metric, every sample and default metric parameters."
    licence = "Apache-2.0"

    def tracks(self) -> list[TrackSpec]:
        every = dict.fromkeys(("shapes", "shapes-shortcut", "photos"), FULL_METRICS)
        return embedded_tracks(shapes_limit=None, photos=None, metrics=every, metric_params={})

    def status(self) -> str:
        return "offline; 64 synthetic shapes per shapes track, every photo, every metric"
