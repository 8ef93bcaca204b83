"""Complexity (entropy, effective complexity) and the axiomatic metrics (completeness,
non-sensitivity) of DESIGN 3b: hand-computed oracles on a toy linear model, and Quantus 0.6 on
the same inputs.

- ``complexity`` and ``effective_complexity`` equal Quantus's ``Complexity`` and
  ``EffectiveComplexity`` to 1e-6 on random maps.
- ``completeness``: gradient x input on a linear model with zero bias and the zero baseline
  is complete (value 0, to float32 rounding); a map scaled by 2 misses by |sum E|. Quantus's
  ``Completeness`` returns a boolean (exact equality) and by default normalises the map first:
  the test shows it calls the complete explanation incomplete.
- ``non_sensitivity``: the paper's count of the symmetric difference, on hand-made maps of a
  linear model with dead pixels; with one input channel and ``patch = 1`` it equals Quantus's
  ``NonSensitivity`` exactly; with three channels Quantus counts every channel a model ignores
  as a violation (Quantus issue 357), the test shows the difference (2 x 16 on a 4 x 4 image).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from xaibench.api import Explainer, ForwardCounter, MetricInput, Model, Sample
from xaibench.metrics.other import complexity_formulas as fc
from xaibench.metrics.other.axiomatic import (
    Completeness,
    InputInvariance,
    NonSensitivity,
    SurgeryUnsupported,
    shift_absorbed,
)
from xaibench.metrics.other.complexity import Complexity, EffectiveComplexity
from xaibench.metrics.other.field import FIELD_OTHER_METRICS
from xaibench.metrics.plugin import METRICS
from xaibench.randomisation import Shift

quantus = pytest.importorskip("quantus")


class Linear(torch.nn.Module):
    """Logits W x (no bias), x flattened."""

    def __init__(self, weight: np.ndarray) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.as_tensor(weight, dtype=torch.float32), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1) @ self.weight.T


class ToyModel(Model):
    name = "toy-linear"

    def __init__(self, module: torch.nn.Module, size: int, channels: int = 3) -> None:
        self.module = module.eval()
        self.input_size = size
        self.mean = (0.5,) * channels
        self.std = (0.5,) * channels

    @property
    def identity(self) -> str:
        return "toy-linear@0"


def batch_for(model: ToyModel, inputs: torch.Tensor, saliency: np.ndarray, targets: np.ndarray) -> MetricInput:
    n = int(inputs.shape[0])
    size = int(inputs.shape[-1])
    return MetricInput(
        saliency=saliency,
        concepts=None,
        samples=[Sample(id=f"s{i}", image=np.zeros((size, size, 3), np.float32)) for i in range(n)],
        targets=targets,
        inputs=inputs,
        model=model,
        forward=ForwardCounter(model.module),
        seed=3,
    )


def gradient_x_input(weight: np.ndarray, inputs: torch.Tensor, targets: np.ndarray) -> np.ndarray:
    """The closed form of gradient x input on logits W x: W[t] * x, summed over channels."""
    x = inputs.double().numpy()
    w = weight[targets].reshape(x.shape)
    return (w * x).sum(axis=1)


def test_registered_ids_families_and_directions() -> None:
    table = {cls.name: (cls.family, cls.direction, cls.ranking, cls.default) for cls in FIELD_OTHER_METRICS}
    assert table == {
        "complexity": ("other", "lower", False, False),
        "effective_complexity": ("other", "lower", False, False),
        "completeness": ("other", "lower", False, False),
        "non_sensitivity": ("other", "lower", False, False),
    }
    assert InputInvariance in METRICS and InputInvariance.default is False  # registered after them


# ----------------------------------------------------------------------------- complexity


def test_entropy_and_effective_complexity_oracles() -> None:
    uniform = np.ones((1, 4, 4))
    assert fc.entropy_rows(uniform)[0] == pytest.approx(np.log(16))
    one_hot = np.zeros((1, 4, 4))
    one_hot[0, 1, 2] = -3.0
    assert fc.entropy_rows(one_hot)[0] == 0.0
    two = np.zeros((1, 2, 2))
    two[0, 0, 0], two[0, 1, 1] = 1.0, -3.0  # p = (1/4, 3/4)
    assert fc.entropy_rows(two)[0] == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))
    assert np.isnan(fc.entropy_rows(np.zeros((1, 3, 3)))[0])
    ramp = np.arange(16, dtype=float).reshape(1, 4, 4)  # /15: 0 is not above eps, the others are
    assert fc.effective_complexity_rows(ramp, 1e-5)[0] == 15
    assert fc.effective_complexity_rows(ramp, 0.5)[0] == 8  # 8/15 .. 15/15


def test_complexity_metrics_equal_quantus() -> None:
    rng = np.random.default_rng(0)
    size, n = 16, 4
    weight = rng.normal(size=(3, 3 * size * size))
    model = ToyModel(Linear(weight), size)
    inputs = torch.from_numpy(rng.normal(size=(n, 3, size, size)).astype(np.float32))
    targets = np.array([0, 1, 2, 0])
    maps = rng.normal(size=(n, size, size))
    maps[:, :4] = 0.0  # some exact zeros
    maps[1, 5:, :] *= 1e-7  # and some below effective complexity's eps
    batch = batch_for(model, inputs, maps, targets)
    ours = Complexity().score(batch).values
    ours_eff = EffectiveComplexity().score(batch).values
    x, y, a = inputs.numpy(), targets, maps[:, None].astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = quantus.Complexity(disable_warnings=True)(model=model.module, x_batch=x, y_batch=y, a_batch=a.copy())
        theirs_eff = quantus.EffectiveComplexity(disable_warnings=True)(
            model=model.module, x_batch=x, y_batch=y, a_batch=a.copy()
        )
    # quantus computes in float32 maps: compare on the same float32 values
    ours32 = fc.entropy_rows(a.astype(np.float64))
    np.testing.assert_allclose(ours32, np.asarray(theirs, dtype=np.float64), atol=1e-6)
    np.testing.assert_allclose(ours, ours32, atol=1e-6)
    assert list(ours_eff) == [float(v) for v in theirs_eff]
    assert ours_eff[1] < ours_eff[0]  # the damped rows fall under eps


def test_complexity_na_reasons() -> None:
    model = ToyModel(Linear(np.ones((2, 3 * 4 * 4))), 4)
    maps = np.ones((2, 4, 4))
    maps[0] = 0.0
    maps[1, 0, 0] = np.nan
    batch = batch_for(model, torch.zeros(2, 3, 4, 4), maps, np.array([0, 1]))
    out = Complexity().score(batch)
    assert np.isnan(out.values).all()
    assert out.reasons[0] is not None and "all-zero" in out.reasons[0]
    assert out.reasons[1] is not None and "NaN" in out.reasons[1]
    assert out.forward_passes == 0


# ----------------------------------------------------------------------------- completeness


def completeness_setup(n: int = 3, size: int = 8) -> tuple[ToyModel, np.ndarray, torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(1)
    weight = rng.normal(size=(4, 3 * size * size))
    inputs = torch.from_numpy(rng.normal(size=(n, 3, size, size)).astype(np.float32))
    return ToyModel(Linear(weight), size), weight, inputs, np.arange(n) % 4


def test_gradient_x_input_on_a_linear_model_is_complete() -> None:
    model, weight, inputs, targets = completeness_setup()
    maps = gradient_x_input(weight, inputs, targets)
    out = Completeness().score(batch_for(model, inputs, maps, targets))
    assert np.all(out.values < 1e-4), out.values  # float32 logits of sums of 192 terms
    assert out.forward_passes == 3 + 1  # the inputs and one baseline image
    # twice the map misses by |sum E| exactly (f(x) - f(0) = sum E on this model)
    doubled = Completeness().score(batch_for(model, inputs, 2 * maps, targets)).values
    np.testing.assert_allclose(doubled, np.abs(maps.reshape(3, -1).sum(axis=1)), rtol=1e-5, atol=1e-4)


def test_completeness_black_baseline_oracle() -> None:
    model, weight, inputs, targets = completeness_setup()
    maps = gradient_x_input(weight, inputs, targets)
    out = Completeness(baseline="black").score(batch_for(model, inputs, maps, targets)).values
    black = np.full(weight.shape[1], -1.0)  # (0 - 0.5) / 0.5
    expected = np.abs(
        maps.reshape(3, -1).sum(axis=1)
        - np.array([weight[t] @ (inputs[b].double().numpy().ravel() - black) for b, t in enumerate(targets)])
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    assert np.all(out > 1e-2)  # the zero-baseline decomposition is not complete for another baseline


def test_quantus_completeness_is_a_boolean_off_the_paper() -> None:
    model, weight, inputs, targets = completeness_setup()
    maps = gradient_x_input(weight, inputs, targets)
    ours = Completeness().score(batch_for(model, inputs, maps, targets)).values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = quantus.Completeness(perturb_baseline=0.0, disable_warnings=True)(
            model=model.module, x_batch=inputs.numpy(), y_batch=targets, a_batch=maps[:, None].astype(np.float32)
        )
    assert np.all(ours < 1e-4)  # the paper: complete
    assert not any(bool(v) for v in theirs)  # Quantus (normalised map, exact equality): "not complete"


# ----------------------------------------------------------------------------- non-sensitivity


def dead_pixel_setup(channels: int) -> tuple[ToyModel, np.ndarray, torch.Tensor, np.ndarray]:
    """A 2-class linear model on 4 x 4 images whose pixels 0..5 are dead (zero weight in every
    channel); inputs nowhere zero."""
    rng = np.random.default_rng(2)
    weight = rng.normal(size=(2, channels, 4, 4))
    weight[:, :, 0, :] = 0.0
    weight[:, :, 1, :2] = 0.0
    inputs = torch.from_numpy((rng.uniform(0.5, 1.5, size=(2, channels, 4, 4))).astype(np.float32))
    return ToyModel(Linear(weight.reshape(2, -1)), 4, channels), weight.reshape(2, -1), inputs, np.array([0, 1])


def test_non_sensitivity_oracle_counts_the_symmetric_difference() -> None:
    model, weight, inputs, targets = dead_pixel_setup(3)
    maps = gradient_x_input(weight, inputs, targets)  # zero exactly on the dead pixels
    metric = NonSensitivity(patch=1)
    out = metric.score(batch_for(model, inputs, maps, targets))
    assert list(out.values) == [0.0, 0.0]
    assert out.forward_passes == 2 * 16 + 2  # every pixel of each sample, and the clean inputs
    wrong = maps.copy()
    wrong[0, 0, 0] = maps[0].max()  # a dead pixel given attribution
    wrong[0, 3, 3] = 0.0  # and a live pixel given none
    wrong[1, 0, :3] = 1.0  # three dead pixels given attribution
    out = metric.score(batch_for(model, inputs, wrong, targets))
    assert list(out.values) == [2.0, 3.0]
    # patches of 2 x 2: the dead patches are (0, 0) and (0, 1); (1, 0) is half dead, so live
    patched = NonSensitivity(patch=2).score(batch_for(model, inputs, maps, targets))
    assert list(patched.values) == [0.0, 0.0]
    assert patched.forward_passes == 2 * 4 + 2


def test_non_sensitivity_equals_quantus_with_one_channel() -> None:
    model, weight, inputs, targets = dead_pixel_setup(1)
    rng = np.random.default_rng(5)
    maps = gradient_x_input(weight, inputs, targets)
    maps[0, 2, 2] = 0.0  # a live pixel with no attribution
    maps[1, 0, 1] = 0.7  # a dead pixel with some
    maps[1] += rng.normal(scale=1e-7, size=(4, 4)) * (maps[1] != 0)
    ours = NonSensitivity(patch=1).score(batch_for(model, inputs, maps, targets)).values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = quantus.NonSensitivity(perturb_baseline=0.0, disable_warnings=True)(
            model=model.module, x_batch=inputs.numpy(), y_batch=targets, a_batch=maps[:, None].astype(np.float32)
        )
    assert list(ours) == [float(v) for v in theirs]
    assert list(ours) == [1.0, 1.0]


def test_quantus_non_sensitivity_counts_ignored_channels_issue_357() -> None:
    model, weight, inputs, targets = dead_pixel_setup(3)
    w = weight.reshape(2, 3, 4, 4).copy()
    w[:, 1:] = 0.0  # the model reads only the red channel
    model = ToyModel(Linear(w.reshape(2, -1)), 4)
    maps = gradient_x_input(w.reshape(2, -1), inputs, targets)
    ours = NonSensitivity(patch=1).score(batch_for(model, inputs, maps, targets)).values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = quantus.NonSensitivity(perturb_baseline=0.0, disable_warnings=True)(
            model=model.module, x_batch=inputs.numpy(), y_batch=targets, a_batch=maps[:, None].astype(np.float32)
        )
    assert list(ours) == [0.0, 0.0]  # the paper: every pixel's attribution is right
    live = 16 - 6
    assert [float(v) for v in theirs] == [2.0 * live, 2.0 * live]  # Quantus: green and blue of each live pixel


def test_axiomatic_na_without_a_model() -> None:
    model, _weight, inputs, targets = completeness_setup(2)
    batch = batch_for(model, inputs, np.ones((2, 8, 8)), targets[:2])
    batch.model = None
    for metric in (Completeness(), NonSensitivity()):
        out = metric.score(batch)
        assert np.isnan(out.values).all() and out.reasons[0] == "needs model access"


# ----------------------------------------------------------------------------- input invariance


class ConvNet(torch.nn.Module):
    """A zero-padded convolution (no bias, like EfficientNet's stem), ReLU, a linear head."""

    def __init__(self, padding: int = 1, bias: bool = False) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(4)
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=padding, bias=bias)
            side = 8 if padding else 6
            self.fc = torch.nn.Linear(4 * side * side, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x) + 0.1).flatten(1))


class GradientMap(Explainer):
    """d logit_t / d x summed over channels; ``times_input``: gradient x input."""

    name = "gradient-map"
    version = "1.0.0"

    def __init__(self, times_input: bool = False) -> None:
        super().__init__()
        self.times_input = times_input

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        x = torch.as_tensor(inputs).clone().requires_grad_(True)
        out = model.module(x).gather(1, torch.as_tensor(targets).view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(out, x)
        return (grad * x if self.times_input else grad).sum(dim=1).detach().numpy()


def invariance_batch(module: torch.nn.Module, explainer: Explainer) -> MetricInput:
    model = ToyModel(module, 8)
    inputs = torch.from_numpy(np.random.default_rng(6).normal(size=(2, 3, 8, 8)).astype(np.float32))
    targets = np.array([0, 2])
    batch = batch_for(model, inputs, explainer.explain(model, inputs, targets), targets)
    batch.explainer = explainer
    return batch


@pytest.mark.parametrize("padding", [0, 1])
def test_shift_absorbed_reproduces_the_model(padding: int) -> None:
    model = ToyModel(ConvNet(padding), 8)
    x = torch.from_numpy(np.random.default_rng(7).normal(size=(2, 3, 8, 8)).astype(np.float32))
    shifted = shift_absorbed(model, -1.0)
    torch.testing.assert_close(shifted.module(x - 1.0), model.module(x), atol=1e-5, rtol=1e-5)
    assert shifted.identity == "toy-linear@0~shifted(-1)"
    assert model.module.conv.bias is None  # the original is untouched
    linear = ToyModel(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64, 3, bias=False)), 8)
    torch.testing.assert_close(shift_absorbed(linear, 2.0).module(x + 2.0), linear.module(x), atol=1e-4, rtol=1e-5)
    with pytest.raises(SurgeryUnsupported, match="BatchNorm2d"):
        shift_absorbed(ToyModel(torch.nn.Sequential(torch.nn.BatchNorm2d(3)), 8), 1.0)


def test_input_invariance_gradient_is_invariant_gradient_x_input_is_not() -> None:
    out = InputInvariance().score(invariance_batch(ConvNet(1), GradientMap()))
    assert np.all(out.values < 1e-5), out.values
    assert out.extras is not None and all(e == {"invariant": True} for e in out.extras)
    assert out.forward_passes == 2 + 2 + 2  # the check (model and shifted model) and the explanations
    # gradient x input: E' - E = grad * shift (the gradients are equal), by hand
    batch = invariance_batch(ConvNet(1), GradientMap(times_input=True))
    out = InputInvariance().score(batch)
    grad = GradientMap().explain(batch.model, batch.inputs, batch.targets)
    expected = [np.linalg.norm(-1.0 * grad[b]) / np.linalg.norm(batch.saliency[b]) for b in range(2)]
    np.testing.assert_allclose(out.values, expected, rtol=1e-4)
    assert np.all(out.values > 0.1)


def test_quantus_input_invariance_breaks_a_padded_convolution() -> None:
    for padding, quantus_says in ((0, True), (1, False)):
        batch = invariance_batch(ConvNet(padding, bias=True), GradientMap())  # Quantus needs a bias
        ours = InputInvariance().score(batch).values
        assert np.all(ours < 1e-5)  # the paper: the gradient is input invariant
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = quantus.InputInvariance(disable_warnings=True)(
                model=batch.model.module,
                x_batch=batch.inputs.numpy(),
                y_batch=batch.targets,
                a_batch=batch.saliency[:, None].astype(np.float32),
                explain_func=lambda model, inputs, targets, **_: GradientMap().explain(
                    type("M", (), {"module": model})(), inputs, targets
                )[:, None],
            )
        # Quantus agrees without padding; with zero padding its bias (set from one output value of
        # the shifted layer, the border's) does not reproduce the model, and the maps differ
        assert [bool(v) for v in theirs] == [quantus_says] * 2


def test_input_invariance_na() -> None:
    batch = invariance_batch(ConvNet(1), GradientMap())
    batch.model = ToyModel(torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Flatten()), 8)
    assert "cannot absorb" in str(InputInvariance().score(batch).reasons[0])
    batch = invariance_batch(ConvNet(1), GradientMap())
    batch.explainer = None
    assert "needs the explainer" in str(InputInvariance().score(batch).reasons[0])


def test_input_invariance_explains_through_a_handle_with_the_shift() -> None:
    """An explainer that is not in this process (an executor's handle, a metric worker's stand-in)
    gets the shifted copy, which carries its Shift (what the worker rebuilds the copy from)."""
    seen: list[Any] = []

    def explain(model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        seen.append(model.shift)
        return GradientMap().explain(model, inputs, targets)

    batch = invariance_batch(ConvNet(1), GradientMap())
    batch.explainer = type("Handle", (), {"explain": staticmethod(explain)})()
    out = InputInvariance().score(batch)
    assert np.all(out.values < 1e-5), out.reasons
    assert seen == [Shift("toy-linear@0", -1.0)]


def test_quantus_non_sensitivity_cannot_group_features() -> None:
    """Quantus 0.6 compares (B, steps) with (B, features): any ``features_in_step`` above 1 raises,
    so it needs one forward per value (C H W per image); ours groups pixels in patches."""
    model, weight, inputs, targets = dead_pixel_setup(1)
    maps = gradient_x_input(weight, inputs, targets)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="broadcast"):
        warnings.simplefilter("ignore")
        quantus.NonSensitivity(perturb_baseline=0.0, features_in_step=2, disable_warnings=True)(
            model=model.module, x_batch=inputs.numpy(), y_batch=targets, a_batch=maps[:, None].astype(np.float32)
        )
    assert list(NonSensitivity(patch=2).score(batch_for(model, inputs, maps, targets)).values) == [0.0, 0.0]
