"""``shapes-vit``: a small timm Vision Transformer trained by xaibench on ``shapes``, shipped as
reference weights like ``shapes-cnn``. Its shipped weights load offline with the manifest's
digests and reach the manifest's held-out accuracy; it is a built-in model; attention rollout (the
``xaibench-vit`` plugin) and the built-in ``gradient`` explainer give maps of the input size on it,
through the kit and through the runner. Nothing here trains (retraining: the slow test in
``tests/test_shipped_weights.py``)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from xaibench.datasets.shapes import ShapesDataset
from xaibench.models.shapes_vit import ShapesViT, TrainConfig
from xaibench.models.ship import held_out_accuracy
from xaibench.models.shipped import manifest, shipped_dir
from xaibench.models.trained import weights_digest
from xaibench.testing.tiny import TinyTrack, tiny_track

KEY = "shapes-vit"
MIN_ACCURACY = 0.9
"""The least held-out accuracy (400 test-split images) at which the model is worth ranking explainers on."""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def vit() -> ShapesViT:
    return ShapesViT()


@pytest.fixture(scope="module")
def vit_track(vit: ShapesViT) -> TinyTrack:
    """Two test-split ``shapes`` images on the shipped ``shapes-vit``, targets its predictions."""
    return tiny_track(2, model=vit, dataset=ShapesDataset(split="test", n=2))


def test_the_shipped_weights_load_offline_with_the_manifest_digests(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path))
    entry = manifest()[KEY]
    path = shipped_dir() / entry["file"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(data) < 1_000_000, f"{path.name}: {len(data)} bytes; the shipped weights must stay small"
    model = ShapesViT()
    assert model.weights == "shipped" and not model.trained_now
    assert not any(tmp_path.iterdir()), "loading shipped weights wrote to the model cache"
    assert weights_digest(model.module.state_dict()) == entry["weights_sha256"]
    assert model.identity == f"shapes-vit@{entry['weights_sha256'][:12]}"
    assert entry["train_key"] == model.cache_key
    assert not model.module.training


def test_it_is_a_timm_vision_transformer_that_attention_rollout_can_read(vit: ShapesViT) -> None:
    from timm.models.vision_transformer import VisionTransformer
    from xaibench_vit.rollout import attention_modules

    net = vit.module
    assert isinstance(net, VisionTransformer)
    assert len(attention_modules(net)) == TrainConfig().depth == 4
    assert net.num_prefix_tokens == 1 and tuple(net.patch_embed.grid_size) == (8, 8)  # 8 px patch tokens
    assert (vit.input_size, vit.mean, vit.std) == (64, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    assert vit.label_names == ("circle", "square", "triangle", "cross") and ShapesViT.synthetic
    assert vit.target_layers == ("blocks.3.norm1",)
    assert dict(net.named_modules()).keys() >= set(vit.target_layers)


def test_the_held_out_accuracy_is_the_manifests(vit: ShapesViT) -> None:
    recorded = manifest()[KEY]["accuracy"]
    got = held_out_accuracy(vit)
    assert got.keys() == recorded.keys() == {"accuracy"}
    assert recorded["accuracy"] >= MIN_ACCURACY
    # one image of 400 is 0.0025: float rounding of another CPU's kernels may flip a borderline one
    assert got["accuracy"] == pytest.approx(recorded["accuracy"], abs=0.005)


def test_it_is_a_built_in_model(builtin_registry) -> None:
    info = builtin_registry.info("model", "shapes-vit")
    assert info.licence.startswith("Apache-2.0") and info.description
    model = builtin_registry.create("model", "shapes-vit")
    assert isinstance(model, ShapesViT) and model.weights == "shipped"


def test_shipped_weights_serve_only_their_training_configuration(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use weights='train'"):
        ShapesViT(train_config=TrainConfig(epochs=1), weights="shipped", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="weights must be one of shipped, train"):
        ShapesViT(weights="downloaded", cache_dir=tmp_path)


def _explainer(name: str, registry):
    if name == "attention-rollout":  # a third-party plugin's class (the registry holds a stand-in for workers)
        rollout = pytest.importorskip("xaibench_vit.rollout", reason="attention-rollout comes from xaibench-vit")
        return rollout.AttentionRollout()
    return registry.create("explainer", name)


@pytest.mark.parametrize("explainer", ["attention-rollout", "gradient"])
def test_explainers_give_finite_maps_of_the_input_size(builtin_registry, vit_track: TinyTrack, explainer) -> None:
    """Through the kit: the runner's own check of every map (finite, not constant, ``(B, 64, 64)``)."""
    before = weights_digest(vit_track.model.module.state_dict())
    maps = vit_track.run(_explainer(explainer, builtin_registry))
    assert maps.shape == (2, 64, 64) and np.isfinite(maps).all()
    assert weights_digest(vit_track.model.module.state_dict()) == before
    assert not vit_track.model.module.training


def test_the_runner_scores_rollout_and_gradient_on_shapes_vit(tmp_path: Path, xaibench_cli) -> None:
    pytest.importorskip("xaibench_vit", reason="attention-rollout comes from xaibench-vit: pip install -e it")
    args = ["run", "-q", "-e", "attention-rollout,gradient", "--model", "shapes-vit", "--dataset", "shapes"]
    args += ["--limit", "2", "--metric", "iou,deletion", "--workdir", str(tmp_path / "work")]
    args += ["--submissions", str(tmp_path / "subs"), "--leaderboard-dir", str(tmp_path / "board")]
    result = xaibench_cli(*args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    path = tmp_path / "work" / "results" / "shapes-vit-on-shapes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for explainer in ("attention-rollout", "gradient"):
        for metric in ("iou", "deletion"):
            values = [r["value"] for r in rows if r["explainer"]["name"] == explainer and r["metric"] == metric]
            assert len(values) == 2, (explainer, metric, rows)
            assert all(isinstance(v, float) and math.isfinite(v) for v in values), (explainer, metric, values)
    summary = json.loads((tmp_path / "work" / "summary.json").read_text())
    identity = summary["tracks"]["shapes-vit-on-shapes"]["provenance"]["model"]["identity"]
    assert identity == f"shapes-vit@{manifest()[KEY]['weights_sha256'][:12]}"
