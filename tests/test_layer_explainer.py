"""``kit.LayerAttributionExplainer`` (issue 24 item 6): a target-layer method in a few lines. A
Grad-CAM written on it matches Grad-CAM computed by hand on the tiny CNN, meets the explainer
contract, and the layer, shape and override rules give clear errors."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from xaibench.kit import ExplainBatch, LayerAttributionExplainer, Model
from xaibench.testing.contract import assert_explainer_contract


class HandGradCAM(LayerAttributionExplainer):
    """Grad-CAM (Selvaraju et al. 2017): the layer's activations weighted by their spatially
    averaged gradients, summed over channels, ReLU."""

    name = "hand-gradcam"
    default_params: ClassVar[dict[str, Any]] = {"target_layer": None}

    def attribute_layer(self, model: Model, batch: ExplainBatch, layer: torch.nn.Module) -> torch.Tensor:
        seen: list[torch.Tensor] = []
        handle = layer.register_forward_hook(lambda _module, _inputs, output: seen.append(output))
        try:
            logits = model.module(batch.x)
        finally:
            handle.remove()
        (grads,) = torch.autograd.grad(logits.gather(1, batch.targets[:, None]).sum(), seen[0])
        return torch.relu((grads.mean(dim=(2, 3), keepdim=True) * seen[0]).sum(dim=1, keepdim=True))


def by_hand(model: Model, inputs: torch.Tensor, targets: np.ndarray, split: int) -> np.ndarray:
    """Grad-CAM of the tiny CNN's ``features.<split>`` output, the network cut in two by hand."""
    net = model.module
    with torch.no_grad():
        acts = net.features[: split + 1](inputs)
    acts.requires_grad_(True)
    logits = net.classifier(net.flatten(net.pool(net.features[split + 1 :](acts))))
    (grads,) = torch.autograd.grad(logits[torch.arange(len(targets)), torch.as_tensor(targets)].sum(), acts)
    cam = torch.relu((grads.mean(dim=(2, 3), keepdim=True) * acts).sum(dim=1, keepdim=True))
    return F.interpolate(cam, size=inputs.shape[-2:], mode="bilinear", align_corners=False)[:, 0].detach().numpy()


def test_grad_cam_on_the_kit_matches_the_hand_computation(tiny_track: Any) -> None:
    maps = tiny_track.run(HandGradCAM())
    assert maps.shape == (4, 32, 32) and (maps >= 0).all()
    expected = by_hand(tiny_track.model, tiny_track.inputs, tiny_track.targets, split=2)  # features.2: the model's
    np.testing.assert_allclose(maps, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(maps, by_hand(tiny_track.model, tiny_track.inputs, tiny_track.targets, split=0))


def test_target_layer_parameter_overrides_the_models_layers(tiny_track: Any) -> None:
    maps = tiny_track.run(HandGradCAM(target_layer="features.0"))
    expected = by_hand(tiny_track.model, tiny_track.inputs, tiny_track.targets, split=0)
    np.testing.assert_allclose(maps, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"target_layer 'features\.9' is not a submodule of model 'tiny-cnn'"):
        tiny_track.run(HandGradCAM(target_layer="features.9"))


def test_several_target_layers_are_averaged(tiny_track: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tiny_track.model, "target_layers", ("features.0", "features.2"))
    maps = tiny_track.run(HandGradCAM())
    parts = [by_hand(tiny_track.model, tiny_track.inputs, tiny_track.targets, split=s) for s in (0, 2)]
    np.testing.assert_allclose(maps, (parts[0] + parts[1]) / 2, rtol=1e-5, atol=1e-6)


def test_meets_the_explainer_contract(tiny_track: Any) -> None:
    maps = assert_explainer_contract(HandGradCAM, tiny_track)
    assert maps.shape == (4, 32, 32)
    alone = tiny_track.select([1]).run(HandGradCAM())  # a map never depends on the rest of its batch
    np.testing.assert_allclose(alone[0], maps[1], rtol=1e-5, atol=1e-7)


def test_a_model_without_target_layers_and_wrong_maps_are_clear_errors(
    tiny_track: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Flat(HandGradCAM):
        name = "flat"

        def attribute_layer(self, model: Model, batch: ExplainBatch, layer: torch.nn.Module) -> torch.Tensor:
            return torch.ones(int(batch.x.shape[0]), 2, 4, 4)

    with pytest.raises(RuntimeError, match=r"'flat': attribute_layer returned maps of shape \(4, 2, 4, 4\)"):
        tiny_track.run(Flat())
    monkeypatch.setattr(tiny_track.model, "target_layers", ())
    with pytest.raises(ValueError, match="explainer 'hand-gradcam' needs a target layer"):
        tiny_track.run(HandGradCAM())
