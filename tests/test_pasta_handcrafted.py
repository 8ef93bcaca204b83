"""The handcrafted PASTA variant (appendix D): criteria on hand-made maps, decoding, the encoder, training."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench import hookimpl
from xaibench.imaging import resize_bilinear
from xaibench.pasta.handcrafted import (
    FEATURE_SETS,
    HandcraftedFeatures,
    augmentation_variances,
    classification_criterion,
    classifier_inputs,
    criterion_from_probs,
    decode_overlay,
    map_features,
    normalise_map,
    pca_complexity,
    roughness,
    sparseness,
)
from xaibench.pasta.network import TrainSettings
from xaibench.pasta.render import render_overlay

G = 56


def _blob(cy: float = 28, cx: float = 20, sigma: float = 6.0) -> np.ndarray:
    yy, xx = np.mgrid[0:G, 0:G]
    return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))


def _noise(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((G, G))


# ----------------------------------------------------------------------------- criteria on hand-made maps


def test_a_constant_map_has_zero_augmentation_variance_and_no_complexity() -> None:
    for value in (0.0, 0.3, 7.0):
        const = np.full((G, G), value)
        assert augmentation_variances(const) == {"var_photometric": 0.0, "var_geometric": 0.0, "var_degradation": 0.0}
        assert pca_complexity(const) == (0.0, 1.0)
        assert sparseness(const) == 0.0 and roughness(const) == 0.0


def test_augmentation_variances_by_hand_and_by_direction() -> None:
    # A left half lit, right half dark: the left-right flip swaps every cell, the up-down flip none.
    half = np.zeros((8, 8))
    half[:, :4] = 1.0
    # Shifts replicate the edge, so the 1-cell column shift changes column 4 only (8 cells of 64).
    shifted_x = np.pad(half, 1, mode="edge")[1:9, 0:8]
    shifted_y = np.pad(half, 1, mode="edge")[0:8, 1:9]
    stack = np.stack([half, half[:, ::-1], half[::-1, :], shifted_y, shifted_x])
    assert augmentation_variances(half)["var_geometric"] == pytest.approx(float(stack.var(axis=0).mean()))
    # Noise changes more than a smooth blob under every set.
    blob, noise = augmentation_variances(_blob()), augmentation_variances(_noise())
    for name in blob:
        assert noise[name] > blob[name] > 0.0, name
    assert all(0.0 <= v <= 0.25 for v in noise.values())


def test_pca_complexity_a_single_blob_is_simpler_than_noise() -> None:
    blob_k, blob_first = pca_complexity(_blob())
    noise_k, noise_first = pca_complexity(_noise())
    assert blob_k == pytest.approx(1 / G)  # a separable Gaussian is one component
    assert blob_first > 0.99
    assert noise_k > 20 / G and noise_first < 0.2
    # Two blobs at different rows and columns need two components.
    two = _blob(15, 15, 4.0) + _blob(40, 40, 4.0)
    assert pca_complexity(two)[0] == pytest.approx(2 / G)


def test_project_statistics_direction() -> None:
    point = np.zeros((G, G))
    point[10, 10] = 1.0
    assert sparseness(point) > sparseness(_blob()) > sparseness(np.ones((G, G)) + _noise() * 1e-3)
    assert roughness(_noise()) > 10 * roughness(_blob())
    assert set(map_features(_blob())) == set(FEATURE_SETS["all"]) - {
        "cls_agreement",
        "cls_masked_prob",
        "cls_masked_entropy",
    }


def test_classification_criterion_by_hand() -> None:
    image = np.full((16, 16, 3), 0.8)
    saliency = np.zeros((4, 4))
    saliency[:2, :2] = 1.0
    pair = classifier_inputs(image, saliency)
    assert pair.shape == (2, 16, 16, 3) and pair.dtype == np.float32
    np.testing.assert_allclose(pair[0], 0.8, atol=1e-6)
    assert pair[1, 0, 0, 0] == pytest.approx(0.8) and pair[1, -1, -1, 0] == pytest.approx(0.0)
    out = criterion_from_probs(np.array([0.1, 0.7, 0.2]), np.array([0.5, 0.25, 0.25]))
    assert out["cls_agreement"] == 0.0 and out["cls_masked_prob"] == pytest.approx(0.25)
    assert out["cls_masked_entropy"] == pytest.approx(-(0.5 * np.log(0.5) + 2 * 0.25 * np.log(0.25)))

    # A "classifier" that reads the mean brightness: masking darkens the image and flips its class.
    def predict(x: np.ndarray) -> np.ndarray:
        bright = x.mean(axis=(1, 2, 3))
        return np.stack([bright, 1.0 - bright], axis=1)

    assert classification_criterion(image, saliency, predict)["cls_agreement"] == 0.0
    almost_everywhere = np.ones((4, 4))
    almost_everywhere[0, 0] = 0.0
    kept = classification_criterion(image, almost_everywhere, predict)
    assert kept["cls_agreement"] == 1.0 and 0.5 < kept["cls_masked_prob"] < 0.8


# ----------------------------------------------------------------------------- decoding the render


def test_decode_overlay_inverts_the_render_on_a_grey_image() -> None:
    image = np.full((100, 120, 3), 0.45)
    saliency = _blob()
    levels, decoded_image = decode_overlay(render_overlay(image, saliency, 224))
    expected = np.clip(resize_bilinear(normalise_map(saliency), (G, G), dtype=np.float64), 0, 1)
    assert levels.shape == (G, G) and decoded_image.shape == (224, 224, 3)
    assert np.abs(levels - expected).max() < 0.05
    assert np.abs(decoded_image - 0.45).max() < 0.1
    # A constant map renders uniformly dark blue and decodes to zeros: no variance, no complexity.
    levels, _ = decode_overlay(render_overlay(image, np.full((7, 7), 2.0), 224))
    assert levels.max() < 0.01
    with pytest.raises(ValueError, match="decode_overlay"):
        decode_overlay(np.zeros((4, 4)))


def test_decode_overlay_on_a_colourful_image_is_approximate() -> None:
    image = np.random.default_rng(1).random((64, 64, 3))
    levels, _ = decode_overlay(render_overlay(image, _blob(), 224))
    assert np.abs(levels - normalise_map(_blob())).mean() < 0.05


# ----------------------------------------------------------------------------- the encoder


def test_encoder_is_registered_and_validates_its_params() -> None:
    from xaibench.pasta.encoders import ENCODERS
    from xaibench.plugins.manager import get_registry

    assert HandcraftedFeatures in ENCODERS
    enc = get_registry().create("encoder", "pasta-handcrafted", classifier="none")
    assert enc.modalities == ("image",) and enc.unavailable() is None
    assert enc.identity == "pasta-handcrafted/1.0.0@none/all/grid56"
    with pytest.raises(ValueError, match="pasta-handcrafted: features must be one of"):
        HandcraftedFeatures(features="some")
    with pytest.raises(ValueError, match="pasta-handcrafted: classifier"):
        HandcraftedFeatures(classifier="resnet")
    with pytest.raises(ValueError, match="expected \\(N, S, S, 3\\)"):
        enc.encode_images(np.zeros((2, 8, 8)))


def test_encoder_features_follow_the_maps() -> None:
    image = np.full((64, 64, 3), 0.5)
    renders = np.stack([render_overlay(image, m, 224) for m in (_blob(), _noise(), np.zeros((G, G)))])
    enc = HandcraftedFeatures(classifier="none", features="paper")
    emb = enc.encode_images(renders)
    assert emb.shape == (3, len(FEATURE_SETS["paper"])) and emb.dtype == np.float32
    col = {n: i for i, n in enumerate(FEATURE_SETS["paper"])}
    blob, noise, zero = emb
    assert noise[col["pca_components"]] > 5 * blob[col["pca_components"]]
    assert noise[col["var_degradation"]] > blob[col["var_degradation"]]
    assert np.all(zero[[col["var_photometric"], col["var_geometric"], col["var_degradation"]]] == 0.0)
    assert np.all(emb[:, [col["cls_agreement"], col["cls_masked_prob"]]] == 0.0)  # no classifier


def test_encoder_with_the_bundled_classifier() -> None:
    enc = HandcraftedFeatures()
    if enc.unavailable():
        pytest.skip(f"bundled classifier unavailable: {enc.unavailable()}")
    image = np.random.default_rng(3).random((64, 64, 3))
    renders = np.stack([render_overlay(image, m, 224) for m in (_blob(), np.ones((G, G)) + _blob())])
    emb = enc.encode_images(renders)
    col = {n: i for i, n in enumerate(FEATURE_SETS["all"])}
    assert emb.shape == (2, len(FEATURE_SETS["all"])) and np.all(np.isfinite(emb))
    assert 0.0 <= emb[0, col["cls_masked_prob"]] <= 1.0 and emb[0, col["cls_agreement"]] in (0.0, 1.0)
    assert 0.0 < emb[0, col["cls_masked_entropy"]] <= np.log(1000) + 1e-4
    one = enc.features(renders[0])
    np.testing.assert_allclose(emb[0], [one[n] for n in FEATURE_SETS["all"]], rtol=1e-4, atol=1e-6)
    assert enc.identity.startswith("pasta-handcrafted/1.0.0@efficientnet-lite0@")


# ----------------------------------------------------------------------------- train and evaluate end to end


@pytest.fixture
def tiny(register_plugin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from xaibench.testing.tiny import TinyCNN, TinyDataset

    module = types.ModuleType("xaibench_handcrafted_tiny")

    @hookimpl
    def register_models(register: Any) -> None:
        register(TinyCNN)

    @hookimpl
    def register_datasets(register: Any) -> None:
        register(TinyDataset)

    module.register_models = register_models  # type: ignore[attr-defined]
    module.register_datasets = register_datasets  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    register_plugin(module, name="handcrafted-tiny")
    from xaibench.plugins.manager import get_registry

    return get_registry()


def test_train_and_evaluate_on_a_tiny_table(tiny, tmp_path: Path) -> None:
    from xaibench.pasta.training.generate import TrackChoice
    from xaibench.pasta.training.train import BranchConfig, EvalConfig, evaluate_checkpoint, train_from_table

    table = tmp_path / "table.csv"
    table.write_text(
        "technique,backbone,explanation_type,fidelity_q1,complexity_q2_q3,objectivity_q4,robustness_q5_q6\n"
        "Center,Toy,saliency,4.0,3.5,3.0,2.0\n"
        "Sobel,Toy,saliency,2.0,2.5,2.0,3.0\n"
        "Random,Toy,saliency,1.0,1.5,1.0,4.0\n"
        "Grad,Toy,saliency,3.0,3.0,3.0,3.0\n"
    )
    config = BranchConfig(
        kind="saliency",
        backbones=("Toy",),
        choice=TrackChoice(dataset="tiny-squares", model="tiny-cnn", dataset_params={"n": 6}),
        encoder="pasta-handcrafted",
        encoder_params={"classifier": "none"},
        mapping={"Center": "center", "Sobel": "sobel", "Random": "random", "Grad": "gradient"},
    )
    out = tmp_path / "hc.pt"
    card = train_from_table(
        table,
        out,
        branches=[config],
        registry=tiny,
        settings=TrainSettings(epochs=30, hidden=8, seed=0),
        ev=EvalConfig(protocols=("loto",), k=2, image_folds=2),
        workdir=tmp_path / "work",
        command="xaibench pasta train ... --image-encoder pasta-handcrafted",
        untrained={"concept": "no concept rows in the toy table"},
        render_size=32,
    )
    branch = card["branches"]["saliency"]
    assert branch["encoder"]["name"] == "pasta-handcrafted"
    assert branch["encoder"]["identity"] == "pasta-handcrafted/1.0.0@none/all/grid56"
    assert branch["n_items"] == 24 and branch["evaluation"]["loto"]["n_splits"] == 8
    q1 = branch["evaluation"]["loto"]["questions"]["Q1"]
    assert q1["n"] == 24 and -1.0 <= q1["technique_spearman"] <= 1.0
    again = evaluate_checkpoint(out, table, registry=tiny, workdir=tmp_path / "work")
    assert again["saliency"]["matches"] is True


# ----------------------------------------------------------------------------- the shipped checkpoint


def test_shipped_handcrafted_checkpoint_scores_and_reports_its_card(tiny) -> None:
    from xaibench.api import MetricInput
    from xaibench.pasta.checkpoint import PROXY_LABEL, load_checkpoint, packaged_dir
    from xaibench.testing.tiny import tiny_track

    path = packaged_dir() / "proxy-handcrafted-v1.pt"
    if not path.is_file():
        pytest.skip("proxy-handcrafted-v1 is not shipped")
    card = json.loads(path.with_suffix(".card.json").read_text())
    assert card["label"] == PROXY_LABEL
    assert card["branches"]["saliency"]["encoder"]["name"] == "pasta-handcrafted"
    assert card["branches"]["concept"]["trained"] is False
    loto = card["branches"]["saliency"]["evaluation"]["loto"]["questions"]["Q1"]["technique_spearman"]
    assert load_checkpoint(path).heldout_q1_spearman() == pytest.approx(loto)
    assert loto < 0.3  # below the validity gate: shown, never ranked

    metric = tiny.create("metric", "pasta_q1", checkpoint="proxy-handcrafted-v1")
    assert metric.params["heldout_q1_spearman"] == pytest.approx(loto)
    track = tiny_track(n=2)
    maps = np.stack([np.outer(np.hanning(32), np.hanning(32)), np.random.default_rng(0).random((32, 32))])
    batch = MetricInput(
        saliency=maps,
        concepts=None,
        samples=track.samples,
        targets=track.targets,
        inputs=track.inputs,
        model=track.model,
    )
    values = metric.score(batch).values
    assert values.shape == (2,) and np.all((values >= 1) & (values <= 5))
