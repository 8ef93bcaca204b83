"""PASTA perceptual score: render, encoders, scoring network, training formats, metrics, concepts."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from xaibench import hookimpl
from xaibench.api import Encoder, MetricInput
from xaibench.errors import XaibenchError
from xaibench.pasta.checkpoint import PROXY_LABEL, load_checkpoint, save_checkpoint
from xaibench.pasta.network import ScoringNetwork, TrainSettings, pasta_loss, train_network
from xaibench.pasta.render import JET_LUT, concept_sentence, render_overlay
from xaibench.pasta.render import resize_square as resize_bilinear
from xaibench.pasta.training.data import load_release, load_table, mode_rating, parse_explanation_name
from xaibench.pasta.training.evaluation import make_splits, quadratic_weighted_kappa, spearman, to_stars_int

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
TABLE = SHARED / "pasta-paper" / "human_ratings_by_technique.csv"


# ----------------------------------------------------------------------------- render


def _render_fixture() -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:48, 0:64].astype(np.float64)
    image = np.stack([xx / 63.0, yy / 47.0, 0.5 + 0.5 * np.sin(xx / 5.0) * np.cos(yy / 7.0)], axis=-1)
    saliency = np.exp(-((yy - 20) ** 2 + (xx - 40) ** 2) / 60.0) - 0.3 * np.exp(
        -((yy - 35) ** 2 + (xx - 10) ** 2) / 30.0
    )
    return image, saliency


RENDER_SHA256 = "bd2379433643e51f357c3337e509e661bc550a1be09ff88810fc9f21b00fbc47"


def test_render_is_pinned_by_pixel_hash() -> None:
    image, saliency = _render_fixture()
    out = render_overlay(image, saliency, size=224)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    digest = hashlib.sha256(out.tobytes()).hexdigest()
    # Changing this hash means the render changed: bump RENDER_VERSION (PASTA scores depend on it).
    assert digest == RENDER_SHA256, digest


def test_render_recipe_by_hand() -> None:
    """At the same size: blend 0.5 image + 0.5 jet(min-max of the positive part)."""
    rng = np.random.default_rng(0)
    image = rng.random((16, 16, 3))
    sal = rng.normal(size=(16, 16))
    out = render_overlay(image, sal, size=16)
    pos = np.maximum(sal, 0)
    scaled = (pos - pos.min()) / (pos.max() - pos.min())
    colour = JET_LUT[np.rint(scaled * 255).astype(int)] / 255.0
    expected = np.rint(np.clip(0.5 * image + 0.5 * colour, 0, 1) * 255).astype(np.uint8)
    assert np.array_equal(out, expected)
    # A constant map renders as the lowest colour everywhere (dark blue), never as noise.
    flat = render_overlay(image, np.full((16, 16), 3.0), size=16)
    assert np.array_equal(flat, np.rint(np.clip(0.5 * image + 0.5 * JET_LUT[0] / 255.0, 0, 1) * 255).astype(np.uint8))


def test_jet_table_and_resize() -> None:
    assert JET_LUT.shape == (256, 3)
    assert tuple(JET_LUT[0]) == (0, 0, 128) and tuple(JET_LUT[255]) == (128, 0, 0)
    assert tuple(JET_LUT[128])[1] == 255  # green peaks mid-scale
    # Box-averaging when shrinking by an integer factor of 2 with a triangle of support 2: constant stays constant,
    # and a linear ramp stays linear in the interior.
    ramp = np.tile(np.arange(64, dtype=np.float64), (64, 1))
    small = resize_bilinear(ramp, 32)
    assert np.allclose(np.diff(small[5, 4:-4]), 2.0)
    assert np.allclose(resize_bilinear(np.full((30, 50), 0.25), 7), 0.25)


def test_render_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="H x W x 3"):
        render_overlay(np.zeros((8, 8)), np.zeros((8, 8)))
    with pytest.raises(ValueError, match="NaN"):
        render_overlay(np.zeros((8, 8, 3)), np.full((8, 8), np.nan))


def test_concept_sentence_template() -> None:
    text = concept_sentence(
        {"red": 0.1, "four_corners": 0.9, "large_object": -0.2, "blue": 0.1}, top_k=3, target="square"
    )
    assert text == "The model predicts square because of four corners (+0.90), blue (+0.10), red (+0.10)."
    assert concept_sentence({"a": 1.0}).startswith("The model predicts this class because of a (+1.00)")


# ----------------------------------------------------------------------------- statistics


def _qwk_by_hand(a: np.ndarray, b: np.ndarray, low: int = 1, high: int = 5) -> float:
    """The hand-written QWK that scikit-learn's replaced (the oracle): observed and expected
    rating matrices on the fixed scale, quadratic weights normalised by ``(n - 1)^2``."""
    n = high - low + 1
    observed = np.zeros((n, n))
    np.add.at(observed, (a - low, b - low), 1.0)
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    idx = np.arange(n)
    weights = (idx[:, None] - idx[None, :]) ** 2 / (n - 1) ** 2
    denom = float((weights * expected).sum())
    return float("nan") if denom == 0.0 else 1.0 - float((weights * observed).sum()) / denom


def test_qwk_matches_the_hand_written_oracle_and_hand_values() -> None:
    rng = np.random.default_rng(1)
    for case in range(200):
        n = int(rng.integers(2, 300))
        a = rng.integers(1, 6, n)
        b = np.clip(a + rng.integers(-2, 3, n), 1, 5) if case % 4 else rng.integers(1, 6, n)
        # scikit-learn sums in another order: equal to the last bit or within 2 ulp of 1.
        assert quadratic_weighted_kappa(a, b) == pytest.approx(_qwk_by_hand(a, b), abs=4.5e-16, nan_ok=True)
    assert quadratic_weighted_kappa(a, a) == 1.0
    # Hand computed: ratings (1, 5) vs (5, 1): observed weight 2 x 1, expected 2 x 0.5 -> kappa = 1 - 2 / 1 = -1.
    assert quadratic_weighted_kappa(np.array([1, 5]), np.array([5, 1])) == -1.0
    # The weights are distances on the 1..5 scale, not between the ratings that occur: (1, 2, 5) vs
    # (2, 1, 5) observes 1 + 1 = 2 and expects (1 + 16 + 1 + 9 + 16 + 9) / 3 = 52 / 3, so 1 - 6 / 52
    # (weights on the ranks of the ratings present would give 1 - 2 / 4 = 0.5).
    assert quadratic_weighted_kappa(np.array([1, 2, 5]), np.array([2, 1, 5])) == pytest.approx(23 / 26, abs=1e-15)
    assert quadratic_weighted_kappa(np.array([3, 3]), np.array([4, 4])) == 0.0
    assert np.isnan(quadratic_weighted_kappa(np.array([3, 3]), np.array([3, 3])))  # both constant, same value
    assert np.isnan(quadratic_weighted_kappa(np.array([3]), np.array([3])))  # fewer than 2 items
    assert list(to_stars_int(np.array([0.2, 1.5, 2.49, 4.5, 7.0]))) == [1, 2, 2, 5, 5]
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 25])) == pytest.approx(0.8)


def test_splits_keep_images_and_techniques_disjoint() -> None:
    images = [f"img{i}" for i in range(6) for _ in range(4)]
    techniques = [f"t{j}" for _ in range(6) for j in range(4)]
    images_arr, tech_arr = np.array(images), np.array(techniques)
    for protocol in ("loto", "kfold"):
        splits = make_splits(images, techniques, protocol, k=2, image_folds=3, seed=0)
        tested = np.concatenate([s.test for s in splits])
        assert sorted(tested.tolist()) == list(range(len(images)))  # every item predicted exactly once
        for s in splits:
            assert not set(images_arr[s.train]) & set(images_arr[s.test])
            assert not set(tech_arr[s.train]) & set(tech_arr[s.test])
    assert len(make_splits(images, techniques, "loto", image_folds=3)) == 4 * 3


# ----------------------------------------------------------------------------- network


def test_scores_are_bounded() -> None:
    torch.manual_seed(0)
    net = ScoringNetwork(8, hidden=4)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(1000.0)
    z = np.concatenate([np.full((1, 8), 1e6), np.full((1, 8), -1e6), np.random.default_rng(0).normal(size=(50, 8))])
    s = net.scores(z)
    assert s.shape == (52, 6)
    assert np.all(s >= 1.0) and np.all(s <= 5.0)


def test_loss_parts_by_hand() -> None:
    pred = torch.tensor([[0.2], [0.4], [0.9]])
    target = torch.tensor([[0.0], [0.5], [1.0]])
    total, parts = pasta_loss(pred, target, a=1.0, b=0.01, c=0.1, margin=0.05)
    uc, yc = pred[:, 0] - pred.mean(), target[:, 0] - target.mean()
    cos = float((uc * yc).sum() / (uc.norm() * yc.norm()))
    mse = float(((pred - target) ** 2).mean())
    # ordered pairs (i better than j): (2,1) diff .5, (2,0) .7, (1,0) .2: all beyond the margin -> hinge 0
    assert parts["rank"] == pytest.approx(0.0)
    assert float(total) == pytest.approx((1 - cos) + 0.01 * mse, rel=1e-5)
    # A wrongly ordered pair costs margin + gap.
    _, parts = pasta_loss(torch.tensor([[0.6], [0.4]]), torch.tensor([[0.0], [1.0]]), margin=0.05)
    assert parts["rank"] == pytest.approx(0.25)
    # Missing labels (NaN) are ignored.
    total_nan, _ = pasta_loss(torch.tensor([[0.2, 0.5]]).repeat(3, 1), torch.tensor([[0.0, float("nan")]] * 3))
    assert torch.isfinite(total_nan)


def _synthetic(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, d)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, d)
    u = 1.0 / (1.0 + np.exp(-(z @ w) / np.sqrt((w**2).sum()) * 2.5))
    stars = np.floor(1.0 + 4.0 * u + 0.5).clip(1, 5)
    labels = np.stack([stars, 6.0 - stars, stars, stars, 6.0 - stars, stars], axis=1)
    return z, labels


def test_loss_falls_and_head_recovers_a_known_rating_function() -> None:
    z, labels = _synthetic(600, 12, seed=0)
    # b = 1: the centred cosine fixes the order, the MSE term the scale (the paper's b = 0.01 calibrates slowly).
    settings = TrainSettings(epochs=150, batch_size=128, hidden=16, dropout=0.0, b=1.0, lr=3e-3, seed=0)
    net, history = train_network(z[:400], labels[:400], settings)
    assert history[-1] < 0.5 * history[0]
    pred = net.scores(z[400:])
    for q in range(6):
        kappa = quadratic_weighted_kappa(to_stars_int(labels[400:, q]), to_stars_int(pred[:, q]))
        assert kappa > 0.8, (q, kappa)
    # Deterministic for fixed inputs and settings.
    again, _ = train_network(z[:400], labels[:400], settings)
    assert np.array_equal(again.scores(z[400:]), pred)


def test_checkpoint_roundtrip_uses_weights_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    net = ScoringNetwork(5, hidden=3)
    net.set_standardisation(torch.randn(10, 5))
    path = tmp_path / "c.pt"
    sha = save_checkpoint(
        path, {"name": "c", "label": PROXY_LABEL, "branches": {"saliency": {"render": "x"}}}, {"saliency": net}
    )
    calls: list[Any] = []
    real_load = torch.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    ckpt = load_checkpoint(path)
    assert calls == [True]
    assert ckpt.sha256 == sha and ckpt.label == PROXY_LABEL
    z = np.random.default_rng(0).normal(size=(4, 5))
    assert np.allclose(ckpt.networks["saliency"].scores(z), net.scores(z))
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"bad\.pt"):
        load_checkpoint(tmp_path / "bad.pt")


# ----------------------------------------------------------------------------- input formats


def test_mode_and_file_names() -> None:
    assert mode_rating([1, 2, 2, 5, 5]) == 2  # tie 2/5, mean 3 -> 2 is closer
    assert mode_rating([1, 1, 4, 4, 3]) == 4  # tie 1/4, mean 2.6 -> 4 is closer
    assert mode_rating([2, 4]) == 2  # equally close: the lower
    assert parse_explanation_name("imgs/ImageNet_n0123_45_GradCAM.png") == ("ImageNet", "n0123_45", "GradCAM")
    with pytest.raises(ValueError, match="<dataset>_<image id>_<xai id>"):
        parse_explanation_name("x_y.png")


def _write_release(root: Path, n_images: int = 6, techniques: tuple[str, ...] = ("gc", "lime", "rand")) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    entries = []
    (root / "exp").mkdir(parents=True)
    for i in range(n_images):
        for j, tech in enumerate(techniques):
            name = f"exp/toy_{i:02d}_{tech}.png"
            Image.fromarray((rng.random((20, 20, 3)) * 255).astype(np.uint8)).save(root / name)
            votes = [{f"Q{q}": int(1 + (j + q + k) % 5) for q in range(1, 7)} for k in (0, 0, 1, 2, 3)]
            entries.append(
                {
                    "img": f"images/{i}.png",
                    "explication": name,
                    "GTclass": "cat",
                    "predictedclass": "cat",
                    "Annotation": votes,
                }
            )
    (root / "human_annotations.json").write_text(json.dumps(entries))


def test_release_format_loads(tmp_path: Path) -> None:
    _write_release(tmp_path)
    entries = load_release(tmp_path)
    assert len(entries) == 18
    e = entries[1]
    assert (e.dataset, e.image_id, e.xai) == ("toy", "toy_00", "lime")
    # votes for Q1 with j=1: (1+1+k) % 5 + 1 for k = 0,0,1,2,3 -> 3,3,4,5,1 -> mode 3
    assert e.labels[0] == 3.0 and e.n_votes == 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"img": "a", "explication": "toy_1_x.png", "Annotation": [{"Q1": 9}]}]))
    with pytest.raises(ValueError, match=r"bad.json: entry 0: Q1 votes must be in 1..5"):
        load_release(bad)


def test_table_format_loads(tmp_path: Path) -> None:
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(
        "technique,backbone,explanation_type,fidelity_q1,complexity_q2_q3,objectivity_q4,robustness_q5_q6\n"
        "GradCAM,ResNet50,saliency,2.5,2.6,2.7,3.8\n"
        "LIME-CBM,ConceptBottleneck,concepts,1.7,1.6,1.6,3.5\n"
    )
    rows = load_table(csv_path)
    assert rows[0].ratings == (2.5, 2.6, 2.6, 2.7, 3.8, 3.8)
    assert rows[1].explanation_type == "concepts"
    csv_path.write_text("technique,backbone\nx,y\n")
    with pytest.raises(ValueError, match="missing column"):
        load_table(csv_path)


@pytest.mark.skipif(not TABLE.is_file(), reason=f"shared PASTA table not found at {TABLE}")
def test_shared_table_has_the_resnet50_rows() -> None:
    from xaibench.pasta.training.data import SALIENCY_TECHNIQUES, select_rows

    rows, skipped = select_rows(load_table(TABLE), ("ResNet50",), "saliency", SALIENCY_TECHNIQUES)
    assert len(rows) == 13 and not skipped
    assert {r.technique: r.ratings[0] for r in rows}["FullGrad"] == pytest.approx(3.65)


# ----------------------------------------------------------------------------- plugins used end to end


class ToyImageEncoder(Encoder):
    """Fast deterministic image features: per-channel means and a coarse 4 x 4 grid of the red channel."""

    name: ClassVar[str] = "toy-image"
    version: ClassVar[str] = "1.0.0"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    calls: ClassVar[list[int]] = []

    @property
    def identity(self) -> str:
        return "toy-image/1"

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        ToyImageEncoder.calls.append(len(images))
        x = np.asarray(images, dtype=np.float32) / 255.0
        grid = resize_bilinear_batch(x[..., 0], 4)
        return np.concatenate([x.mean(axis=(1, 2)), grid.reshape(len(x), -1)], axis=1).astype(np.float32)


def resize_bilinear_batch(x: np.ndarray, size: int) -> np.ndarray:
    return np.stack([resize_bilinear(im, size) for im in x])


def _toy_plugin() -> types.ModuleType:
    from xaibench.testing.tiny import TinyCNN, TinyDataset

    module = types.ModuleType("xaibench_pasta_toy")

    @hookimpl
    def register_encoders(register: Any) -> None:
        register(ToyImageEncoder)

    @hookimpl
    def register_models(register: Any) -> None:
        register(TinyCNN)

    @hookimpl
    def register_datasets(register: Any) -> None:
        register(TinyDataset)

    module.register_encoders = register_encoders  # type: ignore[attr-defined]
    module.register_models = register_models  # type: ignore[attr-defined]
    module.register_datasets = register_datasets  # type: ignore[attr-defined]
    return module


@pytest.fixture
def toy(register_plugin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    module = _toy_plugin()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    register_plugin(module, name="pasta-toy")
    ToyImageEncoder.calls.clear()
    from xaibench.plugins.manager import get_registry

    return get_registry()


def _toy_table(path: Path) -> Path:
    path.write_text(
        "technique,backbone,explanation_type,fidelity_q1,complexity_q2_q3,objectivity_q4,robustness_q5_q6\n"
        "Center,Toy,saliency,4.0,3.5,3.0,2.0\n"
        "Sobel,Toy,saliency,2.0,2.5,2.0,3.0\n"
        "Random,Toy,saliency,1.0,1.5,1.0,4.0\n"
        "Grad,Toy,saliency,3.0,3.0,3.0,3.0\n"
        "BCos,Other,saliency,3.0,3.0,3.0,3.0\n"
    )
    return path


def test_train_from_table_end_to_end_then_score(toy, tmp_path: Path) -> None:
    from xaibench.pasta.training.generate import TrackChoice
    from xaibench.pasta.training.train import BranchConfig, EvalConfig, evaluate_checkpoint, train_from_table

    table = _toy_table(tmp_path / "table.csv")
    config = BranchConfig(
        kind="saliency",
        backbones=("Toy",),
        choice=TrackChoice(dataset="tiny-squares", model="tiny-cnn", dataset_params={"n": 6}),
        encoder="toy-image",
        mapping={"Center": "center", "Sobel": "sobel", "Random": "random", "Grad": "gradient"},
    )
    settings = TrainSettings(epochs=30, hidden=8, seed=0)
    ev = EvalConfig(protocols=("loto", "kfold"), k=2, image_folds=2)
    out = tmp_path / "toy.pt"
    card = train_from_table(
        table,
        out,
        branches=[config],
        registry=toy,
        settings=settings,
        ev=ev,
        workdir=tmp_path / "work",
        command="xaibench pasta train ...",
        untrained={"concept": "no concept rows in the toy table"},
        render_size=32,
    )
    branch = card["branches"]["saliency"]
    assert branch["n_items"] == 24 and branch["techniques"] == ["Center", "Grad", "Random", "Sobel"]
    assert set(branch["evaluation"]) == {"loto", "kfold"}
    assert branch["evaluation"]["loto"]["n_splits"] == 8
    assert card["label"] == PROXY_LABEL and card["branches"]["concept"]["trained"] is False
    assert out.with_suffix(".card.md").read_text().count("PASTA (proxy, technique-level labels)") >= 1
    # `evaluate` reproduces the recorded numbers (cached explanations and embeddings, same seeds).
    again = evaluate_checkpoint(out, table, registry=toy, workdir=tmp_path / "work")
    assert again["saliency"]["matches"] is True and again["saliency"]["items"] == "shipped"
    # ... from the training items shipped beside the checkpoint alone (no table, no explainers) ...
    items_file = out.with_suffix(".items.npz")
    assert card["training_items"]["file"] == items_file.name
    alone = evaluate_checkpoint(out)
    assert alone["saliency"]["evaluation"] == branch["evaluation"] and alone["saliency"]["largest_difference"] == 0
    # ... and from items made anew (here the same: the explanations and embeddings are cached).
    rebuilt = evaluate_checkpoint(out, table, registry=toy, workdir=tmp_path / "work", rebuild=True)
    assert rebuilt["saliency"]["items"] == "rebuilt" and rebuilt["saliency"]["matches"] is True
    data = bytearray(items_file.read_bytes())
    data[len(data) // 2] ^= 1
    items_file.write_bytes(bytes(data))
    with pytest.raises(XaibenchError, match=r"toy\.items\.npz: sha256 differs"):
        evaluate_checkpoint(out)
    items_file.unlink()
    with pytest.raises(XaibenchError, match="training items of checkpoint toy are missing"):
        evaluate_checkpoint(out)

    # The metrics read the checkpoint: one embedding pass for all six questions; concept -> n/a with the reason.
    from xaibench.testing.tiny import tiny_track

    track = tiny_track(n=3)
    maps = np.stack([np.outer(np.hanning(32), np.hanning(32))] * 3)
    metrics = [toy.create("metric", f"pasta_q{q}", checkpoint=str(out)) for q in range(1, 7)]
    assert metrics[0].params["label"] == PROXY_LABEL and metrics[0].params["render"] == "xaibench-jet-overlay/1"
    ToyImageEncoder.calls.clear()
    batch = MetricInput(
        saliency=maps,
        concepts=None,
        samples=track.samples,
        targets=track.targets,
        inputs=track.inputs,
        model=track.model,
    )
    values = np.stack([m.score(batch).values for m in metrics], axis=1)
    assert len(batch.memo) == 1  # one scored batch, shared by the six metrics
    assert values.shape == (3, 6) and np.all((values >= 1) & (values <= 5))
    assert sum(ToyImageEncoder.calls) <= 3  # embedded once (or served from the embedding cache)
    concept_batch = MetricInput(
        saliency=None, concepts=[{"a": 1.0}] * 3, samples=track.samples, targets=track.targets, model=track.model
    )
    out_c = metrics[0].score(concept_batch)
    assert np.all(np.isnan(out_c.values))
    assert "no concept branch: no concept rows in the toy table" in out_c.reasons[0]


def test_train_from_release_fixture(toy, tmp_path: Path) -> None:
    from xaibench.pasta.training.train import EvalConfig, train_from_release

    _write_release(tmp_path / "rel")
    card = train_from_release(
        tmp_path / "rel",
        tmp_path / "rel.pt",
        image_encoder=("toy-image", {}),
        text_encoder=None,
        settings=TrainSettings(epochs=20, hidden=8),
        ev=EvalConfig(("kfold",), k=2),
        workdir=tmp_path / "work",
        command="xaibench pasta train --from-pasta rel --out rel.pt",
    )
    assert card["label"] == "PASTA"
    assert card["branches"]["saliency"]["n_items"] == 18
    assert load_checkpoint(tmp_path / "rel.pt").label == "PASTA"


def test_na_paths(toy, tmp_path: Path) -> None:
    from xaibench.testing.tiny import tiny_track

    track = tiny_track(n=2)
    maps = np.random.default_rng(0).random((2, 32, 32))

    def batch() -> MetricInput:
        return MetricInput(
            saliency=maps,
            concepts=None,
            samples=track.samples,
            targets=track.targets,
            inputs=track.inputs,
            model=track.model,
        )

    # 1. a checkpoint that does not exist
    m = toy.create("metric", "pasta_q1", checkpoint=str(tmp_path / "missing.pt"))
    out = m.score(batch())
    assert np.all(np.isnan(out.values)) and "could not be loaded" in out.reasons[0]

    def ckpt(path: Path, **meta: Any) -> str:
        net = ScoringNetwork(19, hidden=2)
        base = {
            "name": path.stem,
            "label": PROXY_LABEL,
            "branches": {
                "saliency": {
                    "encoder": {"name": "toy-image", "params": {}, "identity": "toy-image/1"},
                    "render": "xaibench-jet-overlay/1",
                    "render_size": 32,
                }
            },
        }
        base.update(meta)
        save_checkpoint(path, base, {"saliency": net})
        return str(path)

    # 2. a fixed label vocabulary that does not hold the explained class
    names = list(track.model.label_names)
    vocab = [names[int(track.targets[0])]]
    m = toy.create("metric", "pasta_q1", checkpoint=ckpt(tmp_path / "vocab.pt", label_vocabulary=vocab))
    out = m.score(batch())
    assert np.isfinite(out.values[0]) and out.reasons[0] is None
    if int(track.targets[1]) != int(track.targets[0]):
        assert np.isnan(out.values[1]) and "label vocabulary" in out.reasons[1]
    # 3. an encoder that differs from the one the checkpoint was trained with
    other = ckpt(tmp_path / "ident.pt")
    meta = load_checkpoint(other).meta
    meta["branches"]["saliency"]["encoder"]["identity"] = "toy-image/OTHER"
    save_checkpoint(tmp_path / "ident2.pt", meta, load_checkpoint(other).networks)
    out = toy.create("metric", "pasta_q2", checkpoint=str(tmp_path / "ident2.pt")).score(batch())
    assert np.all(np.isnan(out.values)) and "toy-image/OTHER" in out.reasons[0]
    # 4. an encoder that cannot run here (open_clip without weights)
    meta["branches"]["saliency"]["encoder"] = {"name": "open_clip", "params": {"model": "ViT-B-32"}, "identity": "x"}
    save_checkpoint(tmp_path / "clip.pt", meta, load_checkpoint(other).networks)
    out = toy.create("metric", "pasta_q3", checkpoint=str(tmp_path / "clip.pt")).score(batch())
    assert np.all(np.isnan(out.values)) and "pretrained=" in out.reasons[0]
    # 5. a render version the checkpoint was not trained on
    meta["branches"]["saliency"]["encoder"] = {"name": "toy-image", "params": {}, "identity": "toy-image/1"}
    meta["branches"]["saliency"]["render"] = "xaibench-jet-overlay/0"
    save_checkpoint(tmp_path / "render.pt", meta, load_checkpoint(other).networks)
    out = toy.create("metric", "pasta_q4", checkpoint=str(tmp_path / "render.pt")).score(batch())
    assert np.all(np.isnan(out.values)) and "trained on render xaibench-jet-overlay/0" in out.reasons[0]


def test_open_clip_fails_fast_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("open_clip")
    from xaibench.pasta.encoders import OpenClipEncoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reason = OpenClipEncoder(model="ViT-B-32", pretrained="laion2b_s34b_b79k", cache_dir="/nonexistent").unavailable()
    assert reason and "pretrained=/path/to/" in reason and "not cached" in reason
    assert "not found" in (OpenClipEncoder(pretrained="/no/such/file.bin").unavailable() or "")
    assert "random weights are refused" in (OpenClipEncoder().unavailable() or "")


def test_open_clip_local_checkpoint(tmp_path: Path) -> None:
    open_clip = pytest.importorskip("open_clip")
    from xaibench.pasta.encoders import OpenClipEncoder

    cfg = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "xb-tiny-clip.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(tmp_path / "cfg")
    torch.manual_seed(0)
    model = open_clip.create_model("xb-tiny-clip", pretrained=None)
    torch.save(model.state_dict(), tmp_path / "tiny.bin")
    enc = OpenClipEncoder(model="xb-tiny-clip", pretrained=str(tmp_path / "tiny.bin"))
    assert enc.unavailable() is None
    assert enc.identity.startswith("open_clip/1.0.0/xb-tiny-clip@file-")
    img = enc.encode_images(np.zeros((2, 40, 40, 3), dtype=np.uint8))
    txt = enc.encode_texts(["a cat", "a dog"])
    assert img.shape == (2, 16) and txt.shape == (2, 16)
    assert np.allclose(np.linalg.norm(img, axis=1), 1.0, atol=1e-5)


def test_embedding_cache_keys_on_identity_and_input(tmp_path: Path) -> None:
    from xaibench.pasta.encoders import EmbeddingCache, embed_images

    cache = EmbeddingCache(tmp_path)
    enc = ToyImageEncoder()
    ToyImageEncoder.calls.clear()
    imgs = np.random.default_rng(0).integers(0, 255, (3, 8, 8, 3), dtype=np.uint8)
    imgs[2] = imgs[0]
    first = embed_images(enc, imgs, cache)
    assert ToyImageEncoder.calls == [2]  # the duplicate is embedded once
    second = embed_images(enc, imgs, cache)
    assert ToyImageEncoder.calls == [2] and np.array_equal(first, second)
    assert cache.get("another-identity", "image", EmbeddingCache.image_key(imgs[0])) is None


# ----------------------------------------------------------------------------- concepts


class _LinearCBM:
    """A stand-in concept-bottleneck model: fixed concept probabilities and a linear head."""

    name = "toy-cbm"
    concept_names = ("a", "b", "c", "d")
    label_names = ("x", "y")

    def __init__(self) -> None:
        self.module = types.SimpleNamespace(head=torch.nn.Linear(4, 2))
        with torch.no_grad():
            self.module.head.weight.copy_(torch.tensor([[2.0, -1.0, 0.5, 0.0], [-2.0, 1.0, 0.0, 0.0]]))
            self.module.head.bias.zero_()
        self.p = torch.tensor([[0.9, 0.2, 0.6, 0.5]], dtype=torch.float64)

    def concept_probs(self, inputs: Any) -> torch.Tensor:
        return self.p.repeat(len(inputs), 1)

    def class_logits(self, concepts: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.module.head(concepts.float())


def test_concept_explainers_on_a_known_model() -> None:
    from xaibench.explainers.concepts import ConceptLIME, ConceptLinear, ConceptRISE, ConceptSHAP

    model = _LinearCBM()
    inputs, targets = torch.zeros(1, 3, 4, 4), torch.tensor([0])
    lin = ConceptLinear().explain(model, inputs, targets)[0]
    assert lin == pytest.approx({"a": 1.8, "b": -0.2, "c": 0.3, "d": 0.0}, abs=1e-6)
    shap = ConceptSHAP().explain(model, inputs, targets)[0]
    probs = lambda c: float(torch.softmax(model.class_logits(c), -1)[0, 0])  # noqa: E731
    full, empty = probs(model.p), probs(torch.zeros(1, 4))
    assert sum(shap.values()) == pytest.approx(full - empty, abs=1e-6)  # efficiency
    assert shap["d"] == pytest.approx(0.0, abs=1e-9)  # dummy axiom: d changes no logit
    assert shap["a"] > shap["c"] > 0 > shap["b"]
    lime = ConceptLIME(n_samples=512).explain(model, inputs, targets, seed=1)[0]
    assert lime["a"] > lime["c"] > lime["b"]
    assert ConceptLIME(n_samples=512).explain(model, inputs, targets, seed=1)[0] == lime  # seeded
    rise = ConceptRISE(n_masks=2000).explain(model, inputs, targets, seed=0)[0]
    assert rise["a"] > rise["b"]
    with pytest.raises(ValueError, match="not a concept-bottleneck model"):
        ConceptLinear().explain(types.SimpleNamespace(name="plain"), inputs, targets)


def test_shapes_concept_labels_follow_the_generator() -> None:
    from xaibench.datasets.shape_concepts import CONCEPTS, SHAPE_CONCEPTS, concept_labels
    from xaibench.datasets.shapes import ShapesDataset

    for sample in ShapesDataset(n=8).samples():
        labels = concept_labels(sample)
        on = {c for c, v in zip(CONCEPTS, labels, strict=True) if v}
        assert set(SHAPE_CONCEPTS[sample.meta["shape"]]) <= on
        colour = np.median(sample.image[sample.ground_truth.mask], axis=0)
        bits = tuple(int(x > 0.5) for x in colour)
        names = {(0, 0, 0): "black", (1, 1, 1): "white", (1, 0, 0): "red", (0, 0, 1): "blue"}
        if bits in names:
            assert names[bits] in on
        assert ("large_object" in on) == (sample.meta["radius"] > 0.22 * 64)


def test_shapes_cbm_plumbing_with_a_tiny_training(tmp_path: Path) -> None:
    """A CBM trained for one short epoch: cached on disk, concept explainers give a weight per concept."""
    from xaibench.datasets.shape_concepts import CONCEPTS
    from xaibench.datasets.shapes import ShapesDataset
    from xaibench.explainers.concepts import CONCEPT_EXPLAINERS
    from xaibench.models.shapes_cbm import CBMTrainConfig, ShapesCBM

    config = CBMTrainConfig(n_train=32, epochs=1, batch_size=16, widths=(8, 8, 8, 8))
    model = ShapesCBM(cache_dir=tmp_path, train_config=config)
    assert model.trained_now and model.weights_path.is_file()
    again = ShapesCBM(cache_dir=tmp_path, train_config=config)
    assert not again.trained_now and again.identity == model.identity
    samples = list(ShapesDataset(n=2).samples())
    x = model.preprocess([s.image for s in samples])
    assert model.module(x).shape == (2, 4) and model.concept_probs(x).shape == (2, len(CONCEPTS))
    for cls in CONCEPT_EXPLAINERS:
        out = cls().explain(model, x, torch.tensor([0, 1]), seed=0)
        assert len(out) == 2 and set(out[0]) == set(CONCEPTS), cls.name
        assert all(np.isfinite(v) for v in out[0].values())


def test_q5_q6_are_lower_is_better_and_unranked_q1_carries_its_validity() -> None:
    """DESIGN 5: more Q5/Q6 stars mean more change under perturbation; only Q1 ranks. Every
    PASTA result records the checkpoint's label and the held-out Q1 Spearman its card reports."""
    from xaibench.pasta.metrics import PASTA_METRICS

    directions = {m.name: (m.direction, m.ranking) for m in PASTA_METRICS}
    assert directions == {
        "pasta_q1": ("higher", True),
        "pasta_q2": ("higher", False),
        "pasta_q3": ("higher", False),
        "pasta_q4": ("higher", False),
        "pasta_q5": ("lower", False),
        "pasta_q6": ("lower", False),
    }
    params = PASTA_METRICS[0]().params
    assert params["label"] == "PASTA (proxy, technique-level labels)"
    assert params["heldout_q1_spearman"] == pytest.approx(-0.2143)  # proxy-v1.card.json's headline


def test_a_card_that_names_another_checkpoint_reports_no_validity(tmp_path: Path) -> None:
    import shutil

    from xaibench.pasta.checkpoint import load_checkpoint, packaged_dir

    shutil.copy(packaged_dir() / "proxy-v1.pt", tmp_path / "copy.pt")
    card = json.loads((packaged_dir() / "proxy-v1.card.json").read_text())
    (tmp_path / "copy.card.json").write_text(json.dumps(card))
    assert load_checkpoint(tmp_path / "copy.pt").heldout_q1_spearman() == pytest.approx(-0.2143)
    card["checkpoint_sha256"] = "0" * 64  # a stale card: not this checkpoint's numbers
    (tmp_path / "copy.card.json").write_text(json.dumps(card))
    assert load_checkpoint(tmp_path / "copy.pt").heldout_q1_spearman() is None
