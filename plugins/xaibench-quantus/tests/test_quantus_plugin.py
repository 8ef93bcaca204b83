"""xaibench-quantus: every metric through xaibench equals Quantus called directly on the same
inputs and seeds; registration, directions, seeds, n/a reasons and the default suites."""

from __future__ import annotations

import copy
import json
import os
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from xaibench_quantus.metrics import METRICS, group_size

from xaibench.kit import ExplainContext, GroundTruth, MetricInput, Sample, derive_seed, resize_bilinear, seeded
from xaibench.testing.contract import model_state
from xaibench.testing.tiny import TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")
quantus = pytest.importorskip("quantus")

SEED = 11
BY_NAME = {cls.name: cls for cls in METRICS}
EXPECTED = {  # id: (Quantus class, family)
    "quantus_faithfulness_correlation": ("FaithfulnessCorrelation", "faithfulness"),
    "quantus_monotonicity_correlation": ("MonotonicityCorrelation", "faithfulness"),
    "quantus_complexity": ("Complexity", "other"),
    "quantus_relevance_rank_accuracy": ("RelevanceRankAccuracy", "alignment"),
    "quantus_random_logit": ("RandomLogit", "sanity"),
    "quantus_avg_sensitivity": ("AvgSensitivity", "other"),
    "quantus_model_parameter_randomisation": ("MPRT", "sanity"),
}


@pytest.fixture(scope="module")
def track() -> TinyTrack:
    return tiny_track(n=3)


@pytest.fixture(scope="module")
def gradient(builtin_registry) -> Any:
    return builtin_registry.create("explainer", "gradient")


@pytest.fixture(scope="module")
def maps(track: TinyTrack, gradient: Any) -> np.ndarray:
    return track.run(gradient, seed=SEED)


def batch_of(track: TinyTrack, maps: np.ndarray, explainer: Any, part: slice = slice(None), seed: int = SEED):
    return MetricInput(
        saliency=maps[part],
        concepts=None,
        samples=track.samples[part],
        targets=track.targets[part],
        inputs=track.inputs[part],
        model=track.model,
        explainer=explainer,
        seed=seed,
    )


def direct(name: str, track: TinyTrack, maps: np.ndarray, explainer: Any, i: int, **kwargs: Any) -> float:
    """Sample ``i`` through Quantus itself: its class, the same arrays and the same seed."""
    sample = track.samples[i]
    seed = derive_seed(SEED, name, sample.id) % (2**31 - 1)

    def explain(model: Any, inputs: Any, targets: Any, **_: Any) -> np.ndarray:
        explained = copy.copy(track.model)
        explained.module = model
        x = torch.as_tensor(inputs)
        out = explainer.explain(explained, x, np.asarray(targets), seed=SEED, context=ExplainContext([sample]))
        return np.asarray(out)[:, None]

    x, y, a, s = track.inputs[i : i + 1].numpy(), track.targets[i : i + 1], maps[i][None, None], None
    model: Any = track.model.module
    if name == "quantus_relevance_rank_accuracy":  # scored at the mask's size
        mask = sample.ground_truth.binary()
        a = resize_bilinear(maps[i][None], mask.shape)[None]
        x, s, model = np.zeros((1, 1, *mask.shape), np.float32), mask[None, None].astype(np.float32), None
    if name == "quantus_complexity":
        x, model = np.zeros_like(a), None
    if name in ("quantus_random_logit", "quantus_model_parameter_randomisation"):
        kwargs["seed"] = seed
    metric = getattr(quantus, EXPECTED[name][0])(disable_warnings=True, return_aggregate=False, **kwargs)
    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = metric(model=model, x_batch=x, y_batch=y, a_batch=a, s_batch=s, explain_func=explain, device="cpu")
    return float(np.asarray(out).reshape(-1)[0])


QUANTUS_ARGS = {
    "quantus_faithfulness_correlation": {"nr_runs": 100, "subset_size": 224, "perturb_baseline": "black"},
    "quantus_monotonicity_correlation": {"nr_samples": 10, "features_in_step": 128},  # 32 steps of 3 x 32 x 32
    "quantus_complexity": {},
    "quantus_relevance_rank_accuracy": {},
    "quantus_random_logit": {"num_classes": 3},
    "quantus_avg_sensitivity": {"nr_samples": 10, "lower_bound": 0.2},
    "quantus_model_parameter_randomisation": {"return_last_correlation": True, "skip_layers": True},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_metric_equals_quantus_called_directly(name, track, maps, gradient) -> None:
    before = model_state(track.model.module)
    out = BY_NAME[name]().score(batch_of(track, maps, gradient))
    assert out.reasons == [None] * 3 and np.isfinite(out.values).all(), out.reasons
    theirs = [direct(name, track, maps, gradient, i, **QUANTUS_ARGS[name]) for i in range(3)]
    np.testing.assert_allclose(out.values, theirs, rtol=1e-6, atol=1e-9)
    assert model_state(track.model.module) == before


def test_registers_through_its_entry_point(installed_registry) -> None:
    registry = installed_registry
    status = registry.plugins.get("quantus")
    assert status is not None, "xaibench-quantus is not installed: pip install -e plugins/xaibench-quantus"
    assert status.ok, status.error
    assert sorted(status.components) == sorted(f"metric:{name}" for name in EXPECTED)
    for name, (cls_name, family) in EXPECTED.items():
        cls = registry.entry("metric", name).cls
        info = registry.info("metric", name)
        assert (info.distribution, info.version) == ("xaibench-quantus", f"0.1.0+quantus.{quantus.__version__}")
        assert cls.family == family and cls.ranking is False and cls.default is False
        assert cls.direction == getattr(quantus, cls_name).score_direction.value  # Quantus' own direction


def test_list_metrics_shows_the_quantus_metrics_with_directions(xaibench_cli) -> None:
    result = xaibench_cli("list", "metrics", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    shown = {name: (row["family"], row["direction"]) for name, row in rows.items() if name.startswith("quantus_")}
    assert shown == {name: (fam, BY_NAME[name].direction) for name, (_, fam) in EXPECTED.items()}
    assert shown["quantus_complexity"][1] == "lower" and shown["quantus_faithfulness_correlation"][1] == "higher"


def test_scores_do_not_depend_on_the_batch_and_leave_global_seeds_alone(track, maps, gradient) -> None:
    metric = BY_NAME["quantus_faithfulness_correlation"](nr_runs=20)
    np_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    whole = metric.score(batch_of(track, maps, gradient)).values
    assert np.array_equal(np.random.get_state()[1], np_state) and torch.equal(torch.get_rng_state(), torch_state)
    alone = metric.score(batch_of(track, maps, gradient, slice(2, 3))).values
    assert alone[0] == whole[2]
    assert not np.array_equal(metric.score(batch_of(track, maps, gradient, seed=SEED + 1)).values, whole)


def test_empty_and_missing_masks_are_na_with_the_reason(track, maps) -> None:
    empty = Sample(id="empty", image=track.samples[0].image, ground_truth=GroundTruth(mask=np.zeros((40, 40), bool)))
    bare = Sample(id="bare", image=track.samples[0].image)
    batch = batch_of(track, maps, None)
    batch.samples = [track.samples[0], empty, bare]
    out = BY_NAME["quantus_relevance_rank_accuracy"]().score(batch)
    assert out.reasons == [None, "empty ground-truth mask", "no ground-truth mask"]
    assert np.isfinite(out.values[0]) and np.isnan(out.values[1:]).all()
    # the defect worked around: Quantus itself divides by the empty mask's size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = quantus.RelevanceRankAccuracy(disable_warnings=True)(
            model=None,
            x_batch=np.zeros((1, 1, 8, 8)),
            y_batch=np.zeros(1, int),
            a_batch=maps[:1, None, :8, :8],
            s_batch=np.zeros((1, 1, 8, 8)),
        )
    assert np.isnan(raw[0])


def test_explainer_reruns_need_the_explainer_and_mprt_an_in_process_one(track, maps, gradient) -> None:
    out = BY_NAME["quantus_avg_sensitivity"]().score(batch_of(track, maps, None))
    assert out.reasons == ["needs the explainer to re-run it"] * 3 and np.isnan(out.values).all()

    class WorkerHandle:  # what the runner passes: the explainer runs in another process
        def explain(self, model, inputs, targets, *, seed=0, context=None):
            return gradient.explain(model, inputs, targets, seed=seed, context=context)

    out = BY_NAME["quantus_model_parameter_randomisation"]().score(batch_of(track, maps, WorkerHandle()))
    assert all("explainer runs in a worker" in r for r in out.reasons)
    out = BY_NAME["quantus_random_logit"]().score(batch_of(track, maps, WorkerHandle()))
    assert out.reasons == [None] * 3 and out.forward_passes == 3  # one re-run each, on the track's model


def test_concept_explanations_are_na() -> None:
    batch = MetricInput(
        saliency=None, concepts=[{"a": 1.0}], samples=[Sample("s", np.zeros((4, 4, 3)))], targets=np.zeros(1)
    )
    out = BY_NAME["quantus_complexity"]().score(batch)
    assert np.isnan(out.values[0]) and "saliency" in out.reasons[0]


def test_monotonicity_group_size_divides_the_pixels() -> None:
    assert group_size((1, 3, 32, 32), 32) == 128
    assert group_size((1, 3, 224, 224), 32) == 3584 and (224 * 224) % 3584 == 0


def test_built_in_suites_leave_the_quantus_metrics_out(suite_metrics) -> None:
    for suite in ("default", "full"):
        tracks = suite_metrics(suite)
        assert tracks and all(tracks.values()), f"suite {suite!r}: no track or no metric"
        for track, metrics in tracks.items():
            assert not [m for m in metrics if m.startswith("quantus_")], f"{suite}/{track} scores Quantus metrics"
