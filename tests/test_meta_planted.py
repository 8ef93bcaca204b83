"""DESIGN 9's planted-cue test: on shapes-shortcut the model relies on the watermark; deletion ranks
the cue above the object (valid); a metric that scores the object region instead of the model is
invalid. Unit cases of the verdict and of painting a region over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xaibench
from xaibench import hookimpl
from xaibench.api import Metric, MetricInput, MetricOutput
from xaibench.explainers.planted import paint_over, relies_on
from xaibench.metaeval.planted import planted_validity
from xaibench.plugins import manager

CUE_RELIANCE = {"n": 8, "accuracy": 1.0, "accuracy_without_cue": 0.25, "accuracy_without_object": 1.0}


def test_painting_over_fills_the_region_with_the_median_of_the_ring_around_it() -> None:
    image = np.zeros((12, 12, 3), dtype=np.uint8)
    image[:, :] = (10, 20, 30)
    image[4:8, 4:8] = (200, 200, 200)  # the region
    image[0, :] = (90, 90, 90)  # far from the region: outside its ring
    region = np.zeros((12, 12), dtype=bool)
    region[4:8, 4:8] = True
    out = paint_over(image, region, np.zeros_like(region))
    assert out.dtype == np.uint8 and (out[4:8, 4:8] == (10, 20, 30)).all()
    assert (out[~region] == image[~region]).all() and (image[4:8, 4:8] == 200).all()  # a copy


def test_the_verdict_follows_the_models_reliance() -> None:
    rng = np.random.default_rng(0)
    cue = {f"s{i}": float(v) for i, v in enumerate(0.1 + 0.05 * rng.random(10))}
    obj = {f"s{i}": float(v) for i, v in enumerate(0.6 + 0.05 * rng.random(10))}
    # deletion (lower is better): deleting the cue first drops the score sooner
    valid = planted_validity(cue, obj, "lower", CUE_RELIANCE, seed=0, track="t", metric="deletion")
    assert (valid.verdict, valid.test, valid.figure) == ("valid", "planted-cue", "cue - object")
    assert valid.value is not None and valid.value > 0 and valid.details["relies_on"] == "cue"
    assert planted_validity(cue, obj, "higher", CUE_RELIANCE, seed=0, track="t", metric="m").verdict == "invalid"
    object_reliance = {**CUE_RELIANCE, "accuracy_without_cue": 1.0, "accuracy_without_object": 0.25}
    assert relies_on(object_reliance) == "object"
    assert planted_validity(cue, obj, "higher", object_reliance, seed=0, track="t", metric="m").verdict == "valid"
    tie = planted_validity(cue, dict(cue), "lower", CUE_RELIANCE, seed=0, track="t", metric="m")
    assert tie.verdict == "untested" and tie.test == "planted-cue"
    even = {**CUE_RELIANCE, "accuracy_without_cue": 1.0}
    assert relies_on(even) is None
    assert planted_validity(cue, obj, "lower", even, seed=0, track="t", metric="m").verdict == "untested"


class ObjectMass(Metric):
    """A planted broken faithfulness metric: the share of the map's mass on the object's
    ground-truth region, whatever the model does."""

    name = "object_mass"
    version = "1.0.0"
    family = "faithfulness"
    direction = "higher"
    licence = "test"

    def score(self, batch: MetricInput) -> MetricOutput:
        assert batch.saliency is not None
        values = []
        for sample, saliency in zip(batch.samples, batch.saliency, strict=True):
            mask = sample.ground_truth.binary() if sample.ground_truth is not None else None
            assert mask is not None
            h, w = saliency.shape
            ys = (np.arange(h) * mask.shape[0] // h)[:, None]
            xs = (np.arange(w) * mask.shape[1] // w)[None, :]
            inside = mask[ys, xs]
            total = float(np.abs(saliency).sum())
            values.append(float(np.abs(saliency)[inside].sum()) / total if total else np.nan)
        return MetricOutput(values=np.array(values), reasons=[None] * len(values))


class Plugin:
    @hookimpl
    def register_metrics(self, register: Any) -> None:
        register(ObjectMass)


def test_on_shapes_shortcut_deletion_follows_the_cue_and_a_metric_of_the_object_region_is_invalid(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    registry.add_plugin(Plugin(), name="planted-metric")
    result = xaibench.meta(
        ["random", "gradient"],
        suite="default",
        tracks="shapes-shortcut",
        metrics=["deletion", "object_mass"],
        limit=12,
        output_path=tmp_path / "out",
        progress=False,
    )
    cards = result.tracks["shapes-shortcut"].cards
    deletion, blind = cards["deletion"].validity, cards["object_mass"].validity
    reliance = deletion.details["reliance"]
    assert deletion.details["relies_on"] == "cue"
    assert reliance["accuracy_without_cue"] < reliance["accuracy_without_object"]
    assert (deletion.verdict, blind.verdict) == ("valid", "invalid")
    assert blind.value is not None and blind.value < 0  # it ranks the object above the cue
