"""xaibench-rise: discovered through its entry point, runs on the shapes CNN and on
EfficientNet-Lite0, meets the explainer contract (seeded per sample), checks its parameters,
and computes the probability-weighted mean of its masks."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from xaibench_rise.rise import Rise, rise_masks

from xaibench.testing.contract import assert_explainer_contract, assert_seeded_per_sample, model_state
from xaibench.testing.tiny import TinyCNN, TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny() -> TinyTrack:
    return tiny_track(n=4)


def test_registers_through_its_entry_point(installed_registry) -> None:
    registry = installed_registry
    status = registry.plugins.get("rise")
    assert status is not None, "xaibench-rise is not installed: pip install -e plugins/xaibench-rise"
    assert status.ok, status.error
    assert (status.distribution, status.version, status.components) == ("xaibench-rise", "0.1.0", ["explainer:rise"])
    info = registry.info("explainer", "rise")
    assert (info.distribution, info.distribution_version, info.plugin) == ("xaibench-rise", "0.1.0", "rise")
    assert info.licence == "Apache-2.0" and info.description
    assert Rise.default_params == Rise().params


def test_runs_on_the_shapes_cnn(builtin_registry) -> None:
    model = builtin_registry.create("model", "shapes-cnn", variant="shapes")
    track = tiny_track(2, model=model, dataset=builtin_registry.create("dataset", "shapes"))
    before = model_state(model.module)
    assert track.run(Rise()).shape == (2, 64, 64)
    assert model_state(model.module) == before


def test_runs_on_efficientnet_lite0(builtin_registry) -> None:
    dataset = builtin_registry.create("dataset", "photos", ids=["chelsea", "coffee"])
    if len(dataset) < 2:
        pytest.skip(f"photos not available: {getattr(dataset, 'skipped', {})}")
    track = tiny_track(2, model=builtin_registry.create("model", "efficientnet-lite0"), dataset=dataset)
    before = model_state(track.model.module)
    assert track.run(Rise(n_masks=32)).shape == (2, 224, 224)
    assert model_state(track.model.module) == before


def test_leaves_no_trace_and_is_deterministic(tiny: TinyTrack) -> None:
    assert_explainer_contract(Rise, tiny)


def test_maps_depend_on_seed_not_on_batch(tiny: TinyTrack) -> None:
    assert_seeded_per_sample(Rise(), tiny, index=2)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"p": 1.0}, r"'p' must be a number in \[0.01, 0.99\]"),
        ({"n_masks": "many"}, "n_masks"),
        ({"grid": 1}, r"'grid' must be an integer in \[2, 64\]"),
        ({"baseline": "white"}, r"'baseline' must be one of 'zero', 'black'"),
        ({"masks": 3}, r"unknown parameter\(s\) \['masks'\]"),
    ],
)
def test_bad_parameters_give_clear_errors(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Rise(**params)


def test_parameters_are_coerced_to_one_canonical_form() -> None:
    assert Rise(n_masks="64", p="0.25").params == {"n_masks": 64, "grid": 7, "p": 0.25, "baseline": "zero"}


def test_rise_is_the_probability_weighted_mean_of_its_masks() -> None:
    class RegionProbability(torch.nn.Module):
        """p(class 0) = mean of channel 0 over the top-left quarter (inputs in [0, 1])."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = x[:, 0, :8, :8].mean(dim=(1, 2)).clamp(1e-6, 1 - 1e-6)
            return torch.stack([a.log(), (1 - a).log()], dim=1)

    model = TinyCNN(input_size=16)
    model.module = RegionProbability()
    inputs = torch.ones(1, 3, 16, 16)
    maps = Rise(n_masks=200, grid=4, p=0.5).explain(model, inputs, np.array([0]), seed=5)
    masks = rise_masks(200, 16, 4, 0.5, 5).numpy()
    probs = masks[:, :8, :8].mean(axis=(1, 2))  # the masked image is the mask itself (baseline 0)
    expected = np.einsum("n,nhw->hw", probs, masks) / (200 * 0.5)
    np.testing.assert_allclose(maps[0], expected, rtol=1e-5)
    assert maps[0, :8, :8].mean() > maps[0, 8:, 8:].mean()
    assert masks.shape == (200, 16, 16) and masks.min() >= 0 and masks.max() <= 1
    assert abs(rise_masks(2000, 32, 7, 0.3, 0).numpy().mean() - 0.3) < 0.02


def test_black_baseline_masks_towards_pixel_zero(tiny: TinyTrack) -> None:
    zero, black = tiny.run(Rise(n_masks=64)), tiny.run(Rise(n_masks=64, baseline="black"))
    assert zero.shape == black.shape and not np.array_equal(zero, black)
