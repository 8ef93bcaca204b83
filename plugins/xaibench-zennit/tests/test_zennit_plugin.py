"""xaibench-zennit: discovered through its entry point and kept out of the default explainer set,
runs on the shapes CNN and on EfficientNet-Lite0 leaving the model exactly as it came, meets the
explainer contract (deterministic), conserves relevance where the rules promise it, equals
gradient x input where LRP-0 does, and folds batch norms as a hand-folded network."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn
from xaibench_zennit import lrp
from xaibench_zennit.canonize import batch_norm_pairs

from xaibench.kit import input_gradients
from xaibench.testing.contract import assert_explainer_contract, model_state
from xaibench.testing.tiny import TinyCNN, TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXPLAINERS = {cls.name: cls for cls in lrp.EXPLAINERS}
NAMES = sorted(EXPLAINERS)


@pytest.fixture(scope="module")
def tiny() -> TinyTrack:
    return tiny_track(n=4)


def _state(module: nn.Module) -> tuple[list, dict[str, torch.Tensor]]:
    return model_state(module), {k: v.clone() for k, v in module.state_dict().items()}


def _assert_unchanged(module: nn.Module, before: tuple[list, dict[str, torch.Tensor]], name: str) -> None:
    state, values = before
    assert model_state(module) == state, f"{name} changed the model (hooks, grad flags, .grad or mode)"
    now = module.state_dict()
    assert now.keys() == values.keys(), f"{name} added or removed parameters"
    assert all(torch.equal(now[k], v) for k, v in values.items()), f"{name} left canonized (folded) parameters"


def _model(net: nn.Module, size: int = 8) -> TinyCNN:
    model = TinyCNN(input_size=size)
    model.module = net.eval()
    return model


# ----------------------------------------------------------------------------- discovery


def test_registers_through_its_entry_point_and_stays_out_of_the_default_set(
    installed_registry, default_explainers
) -> None:
    registry = installed_registry
    status = registry.plugins.get("zennit")
    assert status is not None, "xaibench-zennit is not installed: pip install -e plugins/xaibench-zennit"
    assert status.ok, status.error
    assert (status.distribution, status.version) == ("xaibench-zennit", "0.1.0")
    assert sorted(status.components) == [f"explainer:{n}" for n in NAMES]
    for name in NAMES:
        info = registry.info("explainer", name)
        assert (info.distribution, info.plugin, info.licence) == ("xaibench-zennit", "zennit", "Apache-2.0")
        assert info.version.endswith(f"+zennit.{lrp.LIBRARY_VERSION}") and info.description
        assert EXPLAINERS[name].default_params == EXPLAINERS[name]().params, f"{name}: defaults must validate"
    assert default_explainers and not set(NAMES) & set(default_explainers)


# ----------------------------------------------------------------------------- real models


def test_runs_on_the_shapes_cnn(builtin_registry) -> None:
    model = builtin_registry.create("model", "shapes-cnn", variant="shapes")
    track = tiny_track(2, model=model, dataset=builtin_registry.create("dataset", "shapes"))
    before = _state(model.module)
    for name in NAMES:
        assert track.run(EXPLAINERS[name]()).shape == (2, 64, 64)
        _assert_unchanged(model.module, before, name)
    assert not np.array_equal(track.run(lrp.LRPEpsilonPlusFlat(canonize=False)), track.run(lrp.LRPEpsilonPlusFlat()))


def test_runs_on_efficientnet_lite0(builtin_registry) -> None:
    dataset = builtin_registry.create("dataset", "photos", ids=["chelsea"])
    if len(dataset) < 1:
        pytest.skip(f"photos not available: {getattr(dataset, 'skipped', {})}")
    track = tiny_track(1, model=builtin_registry.create("model", "efficientnet-lite0"), dataset=dataset)
    assert len(batch_norm_pairs(track.model.module)) == 49  # every batch norm, behind padded convolutions too
    before = _state(track.model.module)
    for name in ("lrp-epsilon-plus-flat", "lrp-epsilon-gamma-box", "excitation-backprop"):
        assert track.run(EXPLAINERS[name]()).shape == (1, 224, 224)
        _assert_unchanged(track.model.module, before, name)


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("name", NAMES)
def test_leaves_no_trace_and_is_deterministic(name: str, tiny: TinyTrack) -> None:
    maps = assert_explainer_contract(EXPLAINERS[name], tiny)
    np.testing.assert_array_equal(tiny.run(EXPLAINERS[name]()), maps)  # seed-free: any seed, same maps
    alone = EXPLAINERS[name]().explain(tiny.model, tiny.inputs[1:2].clone(), tiny.targets[1:2])
    np.testing.assert_allclose(alone[0], maps[1], rtol=1e-5, atol=1e-7 * np.abs(maps[1]).max())


# ----------------------------------------------------------------------------- the rules


def _bias_free_net() -> nn.Module:
    """Conv (no bias) -> batch norm with zero mean and shift -> ReLU -> conv -> ReLU -> avg pool ->
    linear (no bias): every rule of every composite conserves relevance on it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1, bias=False),
            nn.BatchNorm2d(6),
            nn.ReLU(),
            nn.Conv2d(6, 8, 3, padding=1, bias=False),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 3, bias=False),
        )
        net[1].running_var.uniform_(0.5, 2.0)
        net[1].weight.data.uniform_(0.5, 1.5)  # running mean and bias stay 0: the folded bias is 0
    return net


@pytest.mark.parametrize("composite", lrp.COMPOSITES)
def test_relevance_is_conserved_on_a_bias_free_net(composite: str) -> None:
    model = _model(_bias_free_net())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        inputs = torch.rand(4, 3, 8, 8) * 2 - 1  # within the z-box bounds [-1, 1] (mean = std = 0.5)
    logits = model.module(inputs)
    targets = logits.argmax(dim=1).numpy()
    maps = lrp.ZennitLRP(composite=composite, epsilon=1e-9).explain(model, inputs, targets)
    # relevance 1 on the target logit arrives at the input whole
    np.testing.assert_allclose(maps.reshape(4, -1).sum(axis=1), np.ones(4), rtol=1e-4, err_msg=composite)


def test_epsilon_rule_equals_gradient_times_input_on_a_relu_mlp() -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        net = nn.Sequential(nn.Flatten(), nn.Linear(48, 16, bias=False), nn.ReLU(), nn.Linear(16, 3, bias=False))
        inputs = torch.randn(3, 3, 4, 4)
    model = _model(net, size=4)
    targets = np.array([0, 1, 2])
    maps = lrp.ZennitLRP(composite="epsilon_plus", epsilon=1e-9).explain(model, inputs, targets)
    # LRP-0 on a bias-free ReLU net: relevance = gradient x input, scaled by the output relevance
    # (1 on the target logit, zennit's one-hot) over the logit
    logits = net(inputs).gather(1, torch.as_tensor(targets).view(-1, 1)).detach()
    expected = ((input_gradients(model, inputs, targets) * inputs).sum(dim=1) / logits[:, :, None]).numpy()
    np.testing.assert_allclose(maps, expected, rtol=1e-4, atol=1e-6)


def test_canonized_batch_norm_equals_a_hand_folded_network() -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        conv, bn, head = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(4, 2)
        bn.running_mean.normal_(), bn.running_var.uniform_(0.5, 2), bn.weight.data.normal_(), bn.bias.data.normal_()
        inputs = torch.randn(2, 3, 8, 8)
    with_bn = nn.Sequential(conv, bn, nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), head)
    folded = nn.Conv2d(3, 4, 3, padding=1)
    scale = bn.weight.data / (bn.running_var + bn.eps).sqrt()
    folded.weight.data = conv.weight.data * scale[:, None, None, None]
    folded.bias.data = (conv.bias.data - bn.running_mean) * scale + bn.bias.data
    by_hand = nn.Sequential(folded, nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), head)
    targets = np.array([0, 1])
    assert batch_norm_pairs(with_bn) == [(("0",), "1")]
    for cls in (lrp.LRPEpsilonPlusFlat, lrp.LRPEpsilonGammaBox, lrp.ExcitationBackprop):
        ours = cls().explain(_model(with_bn), inputs, targets)
        np.testing.assert_allclose(ours, cls().explain(_model(by_hand), inputs, targets), rtol=1e-4, atol=1e-6)


def test_batch_norm_pairs_see_past_a_layers_own_children() -> None:
    class PaddedConv(nn.Conv2d):  # like EfficientNet's Conv2dStaticSamePadding
        def __init__(self) -> None:
            super().__init__(3, 4, 3)
            self.static_padding = nn.ZeroPad2d(1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(self.static_padding(x))

    net = nn.Sequential(PaddedConv(), nn.BatchNorm2d(4), nn.ReLU(), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 1))
    assert batch_norm_pairs(net) == [(("0",), "1")]  # the second batch norm follows a ReLU


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("zennit-lrp", {"composite": "alpha1beta0"}, r"'composite' must be one of 'epsilon_plus_flat'"),
        ("zennit-lrp", {"epsilon": -1}, r"'epsilon' must be a number in \[0, 1000\]"),
        ("lrp-epsilon-gamma-box", {"gamma": "big"}, "gamma"),
        ("excitation-backprop", {"epsilon": 0.1}, r"unknown parameter\(s\) \['epsilon'\]"),
        ("lrp-epsilon-plus-flat", {"canonize": 2}, "'canonize' must be a boolean"),
    ],
)
def test_bad_parameters_give_clear_errors(name: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EXPLAINERS[name](**params)
