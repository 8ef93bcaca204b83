"""xaibench-vit: discovered through its entry point; attention rollout matches a hand computation
(hand-worked numbers, and a 2-layer toy timm ViT whose attention is recomputed from its weights),
meets the explainer contract, refuses a model without attention; the `vit` suite runs offline
with rollout and a CAM."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from xaibench_vit.rollout import AttentionRollout, attention_modules, rollout
from xaibench_vit.suite import VitSuite

from xaibench.testing.contract import assert_explainer_contract
from xaibench.testing.tiny import TinyCNN, TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _toy_vit() -> TinyCNN:
    """A 2-layer timm ViT: 16 px inputs, 8 px patches (a 2 x 2 grid and a class token), 2 heads."""
    from timm.models.vision_transformer import VisionTransformer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = VisionTransformer(img_size=16, patch_size=8, embed_dim=8, depth=2, num_heads=2, num_classes=3)
        net.pos_embed.data.normal_(std=1.0)  # timm starts it near zero: make the tokens differ
    model = TinyCNN(input_size=16)
    model.module = net.eval()
    model.target_layers = ("blocks.1.norm1",)
    return model


@pytest.fixture(scope="module")
def vit_track() -> TinyTrack:
    return tiny_track(4, model=_toy_vit())


def test_registers_through_its_entry_point(installed_registry) -> None:
    registry = installed_registry
    status = registry.plugins.get("vit")
    assert status is not None, "xaibench-vit is not installed: pip install -e plugins/xaibench-vit"
    assert status.ok, status.error
    assert (status.distribution, status.version) == ("xaibench-vit", "0.1.0")
    assert sorted(status.components) == ["explainer:attention-rollout", "suite:vit"]
    info = registry.info("explainer", "attention-rollout")
    assert (info.distribution, info.licence) == ("xaibench-vit", "Apache-2.0") and info.description
    assert AttentionRollout.default_params == AttentionRollout().params
    (track,) = VitSuite().tracks()
    assert track.model == "timm" and track.model_params["pretrained"] is False and track.limit == 8


def test_rollout_of_hand_worked_attentions() -> None:
    # layer 1: two heads whose mean is [[.5, .5], [0, 1]]; layer 2 swaps the two tokens
    layer1 = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]]])
    layer2 = torch.tensor([[[[0.0, 1.0], [1.0, 0.0]]]])
    # 0.5 A + 0.5 I: [[.75, .25], [0, 1]] and [[.5, .5], [.5, .5]]; their product, layer 2 on the left
    expected = torch.tensor([[[0.375, 0.625], [0.375, 0.625]]], dtype=torch.float64)
    torch.testing.assert_close(rollout([layer1, layer2]), expected)
    # max over heads: [[1, 1], [0, 1]] -> + I, rows renormalised: [[2/3, 1/3], [0, 1]]
    torch.testing.assert_close(
        rollout([layer1], head_fusion="max"), torch.tensor([[[2 / 3, 1 / 3], [0.0, 1.0]]], dtype=torch.float64)
    )
    torch.testing.assert_close(rollout([layer1], residual=1.0), torch.eye(2, dtype=torch.float64)[None])


def test_rollout_matches_a_hand_computation_on_a_two_layer_vit(vit_track: TinyTrack) -> None:
    net, x = vit_track.model.module, vit_track.inputs
    assert all(m.fused_attn for m in attention_modules(net)), "timm computes fused attention by default"
    with torch.no_grad():  # the forward pass written out: attention recomputed from the weights
        tokens = net._pos_embed(net.patch_embed(x))
        flow = torch.eye(5, dtype=torch.float64).expand(4, 5, 5)
        for block in net.blocks:
            attn = block.attn
            q, k, _ = attn.qkv(block.norm1(tokens)).reshape(4, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
            probs = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)  # scale 1 / sqrt(head dim 4)
            step = 0.5 * probs.double().mean(dim=1) + 0.5 * torch.eye(5, dtype=torch.float64)
            flow = step / step.sum(dim=-1, keepdim=True) @ flow
            tokens = block(tokens)
    expected = flow[:, 0, 1:].reshape(4, 2, 2)  # class token's row over the 2 x 2 patches
    grid = AttentionRollout().grid(vit_track.model, x)
    torch.testing.assert_close(grid, expected, rtol=1e-5, atol=1e-7)
    assert all(m.fused_attn for m in attention_modules(net)), "fused attention must be switched back on"
    maps = vit_track.run(AttentionRollout())
    assert maps.shape == (4, 16, 16)
    np.testing.assert_allclose(maps[:, ::15, ::15], expected.numpy(), rtol=1e-5)  # corners: the 4 patches


def test_leaves_no_trace_and_is_deterministic(vit_track: TinyTrack) -> None:
    assert_explainer_contract(AttentionRollout, vit_track)
    assert_explainer_contract(lambda: AttentionRollout(head_fusion="max", residual=0.25), vit_track)


def test_a_model_without_attention_names_the_problem() -> None:
    track = tiny_track(2)
    with pytest.raises(ValueError, match=r"'attention-rollout' needs a vision transformer.*'tiny-cnn'"):
        AttentionRollout().explain(track.model, track.inputs, track.targets)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"head_fusion": "sum"}, r"'head_fusion' must be one of 'mean', 'max', 'min'"),
        ({"residual": 1.5}, r"'residual' must be a number in \[0, 1\]"),
        ({"layer": 3}, r"unknown parameter\(s\) \['layer'\]"),
    ],
)
def test_bad_parameters_give_clear_errors(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AttentionRollout(**params)


def test_the_vit_suite_runs_offline_with_rollout_and_a_cam(tmp_path: Path, xaibench_cli) -> None:
    pytest.importorskip("xaibench_gradcam", reason="the CAM comes from xaibench-gradcam: pip install -e it")
    args = ["run", "--suite", "vit", "-e", "attention-rollout,gradcam", "--metric", "iou", "--quiet"]
    args += ["--workdir", str(tmp_path / "w"), "--submissions", str(tmp_path / "s")]
    args += ["--leaderboard-dir", str(tmp_path / "lb")]
    result = xaibench_cli(*args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    with (tmp_path / "lb" / "leaderboard.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["track"] == "vit-shapes" and r["metric"] == "iou"]
    assert sorted(r["explainer"] for r in rows) == ["attention-rollout", "gradcam"]
    assert all(int(r["n"]) == 8 and int(r["n_na"]) == 0 and r["rank"] for r in rows), rows
