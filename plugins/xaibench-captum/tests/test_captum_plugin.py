"""xaibench-captum: discovered through its entry point, runs on the shapes CNN and on
EfficientNet-Lite0, meets the explainer contract (randomised methods seeded per sample),
checks its parameters, and matches closed forms (plain gradient, IG completeness)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from xaibench_captum import attributions
from xaibench_captum.maps import reduce_channels, superpixels

from xaibench.testing.contract import assert_explainer_contract, assert_seeded_per_sample, model_state
from xaibench.testing.tiny import TinyCNN, TinyDataset, TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXPLAINERS = {cls.name: cls for cls in attributions.EXPLAINERS}
NAMES = sorted(EXPLAINERS)
RANDOMISED = ["gradient-shap", "kernel-shap", "lime", "smoothgrad"]
FAST = {
    "lime": {"n_samples": 16},
    "kernel-shap": {"n_samples": 16},
    "integrated-gradients": {"n_steps": 4},
    "gradient-shap": {"n_samples": 4},
    "smoothgrad": {"n_samples": 4},
    "occlusion": {"window": 0.5, "stride": 0.5},
}
"""Cheap settings for the 224 px EfficientNet test (the defaults are timed in bench/)."""


@pytest.fixture(scope="module")
def tiny() -> TinyTrack:
    return tiny_track(n=4)


@pytest.fixture(scope="module")
def shapes(builtin_registry) -> TinyTrack:
    model = builtin_registry.create("model", "shapes-cnn", variant="shapes")
    return tiny_track(2, model=model, dataset=builtin_registry.create("dataset", "shapes"))


@pytest.fixture(scope="module")
def photos(builtin_registry) -> TinyTrack:
    dataset = builtin_registry.create("dataset", "photos", ids=["chelsea", "coffee"])
    if len(dataset) < 2:
        pytest.skip(f"photos not available: {getattr(dataset, 'skipped', {})}")
    return tiny_track(2, model=builtin_registry.create("model", "efficientnet-lite0"), dataset=dataset)


# ----------------------------------------------------------------------------- discovery


def test_registers_through_its_entry_point(installed_registry) -> None:
    registry = installed_registry
    status = registry.plugins.get("captum")
    assert status is not None, "xaibench-captum is not installed: pip install -e plugins/xaibench-captum"
    assert status.ok, status.error
    assert (status.distribution, status.version) == ("xaibench-captum", "0.1.0")
    assert sorted(status.components) == [f"explainer:{n}" for n in NAMES]
    for name in NAMES:
        info = registry.info("explainer", name)
        assert (info.distribution, info.distribution_version, info.plugin) == ("xaibench-captum", "0.1.0", "captum")
        assert info.licence == "Apache-2.0" and info.description
        assert EXPLAINERS[name].default_params == EXPLAINERS[name]().params, f"{name}: defaults must validate unchanged"


# ----------------------------------------------------------------------------- real tracks


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_the_shapes_cnn(name: str, shapes: TinyTrack) -> None:
    before = model_state(shapes.model.module)
    maps = shapes.run(EXPLAINERS[name]())
    assert maps.shape == (2, 64, 64)
    assert model_state(shapes.model.module) == before, f"{name} changed the model"


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_efficientnet_lite0(name: str, photos: TinyTrack) -> None:
    before = model_state(photos.model.module)
    maps = photos.run(EXPLAINERS[name](**FAST.get(name, {})))
    assert maps.shape == (2, 224, 224)
    assert model_state(photos.model.module) == before, f"{name} changed the model"


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("name", NAMES)
def test_leaves_no_trace_and_is_deterministic(name: str, tiny: TinyTrack) -> None:
    assert_explainer_contract(EXPLAINERS[name], tiny)


@pytest.mark.parametrize("name", RANDOMISED)
def test_randomised_maps_depend_on_seed_not_on_batch(name: str, tiny: TinyTrack) -> None:
    assert_seeded_per_sample(EXPLAINERS[name](), tiny, index=2)


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("integrated-gradients", {"n_steps": True}, "n_steps"),
        ("integrated-gradients", {"baseline": "white"}, "baseline"),
        ("occlusion", {"window": 1.5}, r"'window' must be a number in \[0.001, 1\]"),
        ("lime", {"segmentation": "quickshift"}, "segmentation"),
        ("smoothgrad", {"noise_level": float("nan")}, "noise_level"),
        ("saliency", {"reduce": "mean"}, r"'reduce' must be one of 'sum', 'abs_sum', 'max_abs'"),
        ("deeplift", {"steps": 3}, r"unknown parameter\(s\) \['steps'\]"),
    ],
)
def test_bad_parameters_give_clear_errors(name: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EXPLAINERS[name](**params)


def test_parameters_are_coerced_to_one_canonical_form() -> None:
    assert attributions.Lime(n_segments=np.int64(9)).params["n_segments"] == 9
    assert attributions.IntegratedGradients(n_steps="8").params["n_steps"] == 8
    assert attributions.SmoothGrad(noise_level=1).params["noise_level"] == 1.0


# ----------------------------------------------------------------------------- closed forms


def test_saliency_equals_the_builtin_gradient(builtin_registry, tiny: TinyTrack) -> None:
    np.testing.assert_allclose(
        tiny.run(attributions.Saliency()), tiny.run(builtin_registry.create("explainer", "gradient")), rtol=1e-6
    )


def test_integrated_gradients_are_complete(tiny: TinyTrack) -> None:
    """Sum of IG attributions = f(x) - f(baseline) (up to quadrature error)."""
    maps = tiny.run(attributions.IntegratedGradients(n_steps=64))
    with torch.no_grad():
        rows = torch.arange(len(tiny.targets))
        logits, reference = tiny.model.module(tiny.inputs), tiny.model.module(0 * tiny.inputs)
        gap = logits[rows, tiny.targets] - reference[rows, tiny.targets]
    np.testing.assert_allclose(maps.sum(axis=(1, 2)), gap.numpy(), rtol=0.02, atol=1e-5)


def test_superpixels_are_fixed_and_contiguous() -> None:
    image = np.random.default_rng(0).random((32, 32, 3))
    grid = superpixels(image, "grid", 16, 10.0)
    assert grid.max() == 15 and set(np.unique(grid)) == set(range(16))
    assert (grid[:8, :8] == 0).all() and (grid[-8:, -8:] == 15).all()
    slic = superpixels(image, "slic", 9, 10.0)
    np.testing.assert_array_equal(slic, superpixels(image, "slic", 9, 10.0))
    assert set(np.unique(slic)) == set(range(slic.max() + 1))


def test_channel_reductions() -> None:
    a = torch.tensor([[[[1.0]], [[-3.0]], [[2.0]]]])
    assert reduce_channels(a, "sum").item() == 0.0
    assert reduce_channels(a, "abs_sum").item() == 6.0
    assert reduce_channels(a, "max_abs").item() == 3.0


class _Quadrants(torch.nn.Module):
    """Class 0's logit: ``margin`` + sum_q w_q x (mean of quadrant q's first channel), w = 1..4 / 2;
    class 1's: 0. On an all-ones input the margin is ``margin`` + 5: a confident model."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin
        self.w = torch.tensor([0.5, 1.0, 1.5, 2.0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        q = x[:, 0].unfold(1, h, h).unfold(2, h, h).mean(dim=(-1, -2)).reshape(x.shape[0], 4)
        first = self.margin + q @ self.w
        return torch.stack([first, torch.zeros_like(first)], dim=1)


@pytest.mark.parametrize(
    "name, params",
    [
        ("occlusion", {"window": 0.5, "stride": 0.5}),
        ("kernel-shap", {"segmentation": "grid", "n_segments": 4, "n_samples": 256}),
        ("lime", {"segmentation": "grid", "n_segments": 4, "n_samples": 256}),
    ],
)
def test_a_confident_models_regions_are_ranked_by_their_effect_not_by_rounding(name: str, params: dict) -> None:
    """Class 0's probability is 1 - e with e = exp(-30) ~ 1e-13, below float32's ulp at 1 (6e-8):
    scored in float32 every coalition's probability is 1.0 and every region gets 0 (before 1.1).
    Scored in float64 (and, for the surrogates, as the change from the explained input), the
    quadrants rank as their weights do."""
    model = TinyCNN()
    model.module = _Quadrants(margin=25.0)
    inputs = torch.ones((1, 3, 32, 32))
    dataset = TinyDataset(n=1)
    track = TinyTrack(
        model=model,
        dataset=dataset,
        samples=list(dataset.samples()),
        inputs=inputs,
        targets=np.zeros(1, dtype=np.int64),
    )
    maps = track.run(EXPLAINERS[name](**params))[0]
    quadrants = [maps[:16, :16].mean(), maps[:16, 16:].mean(), maps[16:, :16].mean(), maps[16:, 16:].mean()]
    assert np.all(np.diff(quadrants) > 0), quadrants
