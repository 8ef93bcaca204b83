"""PASTA training that generalises by default (issue 16, part 1): the synthetic release, disjoint
validation/test splits, the ridge head, and the default settings' held-out Spearman."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench import hookimpl
from xaibench.pasta.checkpoint import load_checkpoint, save_checkpoint
from xaibench.pasta.network import TrainSettings, fit_ridge
from xaibench.pasta.training.data import load_release
from xaibench.pasta.training.evaluation import make_splits, spearman, validation_splits
from xaibench.testing.pasta_release import STANDARD, RandomConvFeatures, ReleaseConfig, write_synthetic_release


@pytest.fixture(scope="module")
def standard_release(tmp_path_factory: pytest.TempPathFactory):
    return write_synthetic_release(tmp_path_factory.mktemp("release"), STANDARD)


def test_synthetic_release_follows_its_ground_truth(standard_release, tmp_path: Path) -> None:
    rel = standard_release
    entries = load_release(rel.root)
    assert len(entries) == 144 == 24 * 6 and all(e.n_votes == 5 for e in entries)
    assert {e.xai for e in entries} == set(STANDARD.techniques) and len({e.image_id for e in entries}) == 24
    # load_release computes the same labels (mode of the votes) as the generator says it wrote
    np.testing.assert_array_equal(np.array([e.labels for e in entries]), rel.labels)
    # the votes follow the latent judgement closely but not perfectly (rater noise)
    assert 0.8 <= rel.oracle_spearman["Q1"] < 0.99
    assert spearman(rel.properties[:, 0], rel.labels[:, 0]) > 0.5  # concentration drives Q1
    truth = json.loads((rel.root / "synthetic_truth.json").read_text())
    assert truth["oracle_spearman"] == rel.oracle_spearman and len(truth["items"]) == 144
    # deterministic; another seed gives other votes
    again = write_synthetic_release(tmp_path / "again", STANDARD)
    np.testing.assert_array_equal(again.labels, rel.labels)
    other = write_synthetic_release(tmp_path / "other", ReleaseConfig(n_images=4, seed=1))
    assert other.labels.shape == (24, 6)
    with pytest.raises(ValueError, match="unknown technique"):
        ReleaseConfig(techniques=("precise", "nope"))


def test_validation_and_test_splits_are_disjoint_in_images_and_techniques(standard_release) -> None:
    images = np.asarray(standard_release.images, dtype=object)
    techniques = np.asarray(standard_release.techniques, dtype=object)
    n_checked = 0
    for protocol in ("loto", "kfold"):
        for outer in make_splits(images, techniques, protocol, k=3, image_folds=3, seed=0):
            test_i, test_t = set(images[outer.test]), set(techniques[outer.test])
            pool = outer.train
            assert not test_i & set(images[pool]) and not test_t & set(techniques[pool])
            inner = validation_splits(list(images[pool]), list(techniques[pool]), seed=0)
            assert len(inner) == 4
            covered = np.concatenate([s.test for s in inner])
            assert sorted(covered) == list(range(len(pool)))  # every pool item validated exactly once
            for split in inner:
                fit, val = pool[split.train], pool[split.test]
                assert not set(images[fit]) & set(images[val])
                assert not set(techniques[fit]) & set(techniques[val])
                # validation items are never test items, and share neither images nor techniques with them
                assert not set(images[val]) & test_i and not set(techniques[val]) & test_t
                n_checked += 1
    assert n_checked == (18 + 9) * 4


def test_ridge_head_is_bounded_and_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 30)).astype(np.float32)
    signal = x[:, 0] - 0.5 * x[:, 1]
    labels = np.clip(3 + signal[:, None] * np.ones((1, 6)), 1, 5)
    labels[:5, 2] = np.nan
    net = fit_ridge(x, labels, alpha=1.0)
    pred = net.scores(x)
    assert pred.min() >= 1 and pred.max() <= 5
    assert spearman(pred[:, 0], labels[:, 0]) > 0.95
    far = net.scores(x * 100)  # far outside the training range: still within [1, 5]
    assert far.min() >= 1 and far.max() <= 5
    path = tmp_path / "r.pt"
    save_checkpoint(path, {"branches": {"saliency": {}}}, {"saliency": net})
    back = load_checkpoint(path).networks["saliency"]
    assert back.head == "linear"
    np.testing.assert_allclose(back.scores(x), pred, atol=1e-5)
    # settings recorded before heads existed were an MLP's; the default is model selection
    assert TrainSettings.from_dict({"hidden": 64}).head == "mlp" and TrainSettings().head == "auto"
    with pytest.raises(ValueError, match="head must be one of"):
        TrainSettings(head="forest")


@pytest.fixture
def random_conv(register_plugin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    module = types.ModuleType("xaibench_pasta_random_conv")

    @hookimpl
    def register_encoders(register: Any) -> None:
        register(RandomConvFeatures)

    module.register_encoders = register_encoders  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    register_plugin(module, name="pasta-random-conv")


@pytest.mark.slow
def test_default_settings_generalise_on_the_standard_release(standard_release, random_conv, tmp_path: Path) -> None:
    from xaibench.pasta.training.train import EvalConfig, train_from_release

    out = tmp_path / "synth.pt"
    card = train_from_release(
        standard_release.root,
        out,
        image_encoder=("random-conv-features", {}),
        text_encoder=None,
        settings=TrainSettings(),  # the defaults
        ev=EvalConfig(protocols=("loto",), image_folds=3),
        workdir=tmp_path / "work",
        command="test",
        render_size=64,
    )
    branch = card["branches"]["saliency"]
    q1 = branch["evaluation"]["loto"]["questions"]["Q1"]
    assert q1["n"] == 144
    assert q1["spearman"] >= 0.6, q1
    assert q1["spearman"] <= standard_release.oracle_spearman["Q1"] + 0.05  # no scorer beats the raters' noise
    chosen = branch["model_selection"]["chosen"]
    assert chosen["head"] in ("ridge", "mlp") and len(branch["model_selection"]["candidates"]) >= 5
    assert "configuration of the shipped network" in out.with_suffix(".card.md").read_text()
    ckpt = load_checkpoint(out)
    assert ckpt.meta["branches"]["saliency"]["model_selection"] == chosen
    assert ckpt.networks["saliency"].head == ("linear" if chosen["head"] == "ridge" else "mlp")
