"""The embedded suite's models ship as reference weights (DESIGN 6): loaded offline with their
digests, the same identity everywhere, refused when changed, and retraining is an explicit choice
that reaches the shipped accuracy."""

from __future__ import annotations

import shutil

import pytest

from xaibench.models.shapes_cbm import ShapesCBM
from xaibench.models.shapes_cnn import VARIANTS, ShapesCNN, TrainConfig
from xaibench.models.shapes_vit import ShapesViT
from xaibench.models.ship import held_out_accuracy
from xaibench.models.shipped import load_shipped, manifest, shipped_dir
from xaibench.models.trained import weights_digest

RETRAIN_TOLERANCE = 0.02
"""Retrained on another CPU, a model differs in its weights (float rounding of other kernels) but
not in what it learned: held-out accuracy within 2 points of the shipped model's (400 images)."""


def _build(key: str, **kwargs):
    if key == "shapes-cbm":
        return ShapesCBM(**kwargs)
    if key == "shapes-vit":
        return ShapesViT(**kwargs)
    return ShapesCNN(key.split("/")[1], **kwargs)


@pytest.mark.parametrize("key", ["shapes-cnn/shapes", "shapes-cnn/shapes-shortcut", "shapes-cbm", "shapes-vit"])
def test_shipped_weights_load_offline_with_the_manifest_identity(key, tmp_path, monkeypatch):
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path))
    entry = manifest()[key]
    model = _build(key)
    assert model.weights == "shipped" and not model.trained_now
    assert not any(tmp_path.iterdir()), "loading shipped weights wrote to the model cache"
    assert model.identity.endswith("@" + entry["weights_sha256"][:12])
    assert weights_digest(model.module.state_dict()) == entry["weights_sha256"]
    assert not model.module.training


def test_the_default_suite_models_are_the_shipped_ones(tmp_path, monkeypatch):
    """Two loads in two cache folders give one identity: nothing is trained or read from a cache."""
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "a"))
    first = ShapesCNN("shapes")
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "b"))
    assert ShapesCNN("shapes").identity == first.identity


def test_changed_shipped_files_are_refused(tmp_path):
    folder = tmp_path / "models"
    shutil.copytree(shipped_dir(), folder)
    key = "shapes-cnn/shapes"
    train_key = manifest(folder)[key]["train_key"]
    path = folder / manifest(folder)[key]["file"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"shapes-cnn-shapes\.safetensors: sha256 differs"):
        load_shipped(key, train_key, folder)
    path.unlink()
    with pytest.raises(ValueError, match="are missing"):
        load_shipped(key, train_key, folder)
    with pytest.raises(ValueError, match="no shipped weights for nope"):
        load_shipped("nope", train_key, folder)


def test_shipped_weights_serve_only_their_training_configuration(tmp_path):
    with pytest.raises(ValueError, match="use weights='train'"):
        ShapesCNN("shapes", train_config=TrainConfig(epochs=1), weights="shipped", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="weights must be one of shipped, train"):
        ShapesCNN("shapes", weights="downloaded", cache_dir=tmp_path)


def test_the_manifest_records_the_shipped_models_accuracy():
    for key, entry in manifest().items():
        if key in ("imdb-cnn", "minilm-imdb"):
            continue  # text models: tests/test_imdb_text.py and tests/test_minilm_text.py check them
        got = held_out_accuracy(_build(key))
        assert got.keys() == entry["accuracy"].keys()
        for name, value in got.items():
            assert value == pytest.approx(entry["accuracy"][name], abs=0.005), (key, name)
    assert manifest()["shapes-cnn/shapes"]["accuracy"]["accuracy"] >= 0.95
    shortcut = manifest()["shapes-cnn/shapes-shortcut"]["accuracy"]
    assert shortcut["accuracy"] >= 0.95 and shortcut["accuracy_without_cue"] < 0.75  # it relies on the cue
    assert manifest()["shapes-vit"]["accuracy"]["accuracy"] >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("key", [f"shapes-cnn/{v}" for v in VARIANTS] + ["shapes-cbm", "shapes-vit"])
def test_retraining_reaches_the_shipped_accuracy(key, tmp_path):
    """``weights="train"`` trains here (30 s per CNN, 1-4 min for the CBM on 2 cores, about 5 min for
    the ViT on one core) and caches."""
    retrained = _build(key, cache_dir=tmp_path, weights="train")
    assert retrained.trained_now and retrained.weights_path.is_file()
    shipped = manifest()[key]["accuracy"]
    got = held_out_accuracy(retrained)
    for name, value in shipped.items():
        assert got[name] == pytest.approx(value, abs=RETRAIN_TOLERANCE), (key, name, got)
    again = _build(key, cache_dir=tmp_path, weights="train")
    assert not again.trained_now and again.identity == retrained.identity
