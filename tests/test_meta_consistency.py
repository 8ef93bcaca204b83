"""Noise resilience and adversarial reactivity (IAC, IEC, MC; DESIGN 9, MetaQuantus): the formulas
against hand-computed values, the perturbed model and dataset, and one (track, metric) end to end
through the runner, with the ``metaquantus`` package's own aggregation run on the same scores,
explainers, draws and samples."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from xaibench.datasets.perturbed import InputNoiseDataset, add_input_noise
from xaibench.metaeval.consistency import (
    DISRUPTIVE,
    MINOR,
    consistency,
    iac,
    iec_adversary,
    iec_resilience,
    pick_level,
    wilcoxon_p,
)
from xaibench.models.perturbed import WeightNoiseModel, add_weight_noise

# ------------------------------------------------------------------ the formulas, by hand

Q_STAR = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])  # 2 explainers x 3 samples


def test_iec_resilience_counts_rank_positions_that_stay() -> None:
    same = Q_STAR[None].copy()
    assert iec_resilience(Q_STAR, same, np.ones((1, 3), bool)) == 1.0
    swapped = np.array([[[3.0, 2.0, 3.0], [1.0, 2.0, 1.0]]])  # sample 0 swaps order; samples 1 (tie), 2 stay
    # argsort over explainers per sample: before [[0,0,1],[1,1,0]], after [[1,0,1],[0,1,0]] -> 4 of 6 equal
    assert iec_resilience(Q_STAR, swapped, np.ones((1, 3), bool)) == pytest.approx(4 / 6)
    # only sample 2 concerned: both positions equal
    assert iec_resilience(Q_STAR, swapped, np.array([[False, False, True]])) == 1.0


def test_iec_adversary_follows_the_metric_direction() -> None:
    q_hat = np.array([[[0.0, 2.0, 4.0], [2.0, 2.0, 2.0]]])  # vs Q*: lower, equal, higher | lower, equal, higher
    keep = np.ones((1, 3), bool)
    assert iec_adversary(Q_STAR, q_hat, keep, "higher") == pytest.approx(2 / 6)  # worse = lower after
    assert iec_adversary(Q_STAR, q_hat, keep, "lower") == pytest.approx(2 / 6)  # worse = higher after
    assert iec_adversary(Q_STAR, q_hat, np.array([[True, False, False]]), "higher") == 1.0
    assert iec_adversary(Q_STAR, q_hat, np.array([[True, False, False]]), "lower") == 0.0
    assert math.isnan(iec_adversary(Q_STAR, q_hat, np.zeros((1, 3), bool), "lower"))  # no sample: n/a


def test_iac_is_the_wilcoxon_p_value_and_its_complement_for_disruption() -> None:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 20))
    q_hat = (q + rng.normal(scale=0.5, size=q.shape))[None]
    keep = np.ones((1, 20), bool)
    p = [wilcoxon_p(q[i], q_hat[0, i]) for i in range(2)]
    from scipy.stats import wilcoxon

    assert p[0] == pytest.approx(wilcoxon(q[0], q_hat[0, 0], zero_method="zsplit").pvalue)
    assert iac(q, q_hat, keep, adversary=False) == pytest.approx(np.mean(p))
    assert iac(q, q_hat, keep, adversary=True) == pytest.approx(1 - np.mean(p))
    assert wilcoxon_p(q[0], q[0]) == 1.0  # nothing moved: indistinguishable


def test_mc_is_the_mean_of_the_four_figures() -> None:
    q_hat = np.stack([Q_STAR] * 5)
    none_changed, all_changed = np.zeros((5, 3), bool), np.ones((5, 3), bool)
    c = consistency("model", "higher", Q_STAR, (0.01, q_hat, none_changed), (1.0, q_hat - 1.0, all_changed))
    # minor: nothing moved (IAC_NR = 1, IEC_NR = 1); disruptive: every score worse by 1 (IEC_AR = 1),
    # 3 samples shifted by the same amount: Wilcoxon's exact two-sided p for n = 3 is 0.25
    assert (c.iac_nr, c.iec_nr, c.iec_ar) == (1.0, 1.0, 1.0)
    assert c.iac_ar == pytest.approx(0.75)
    assert c.mc == pytest.approx((1 + 1 + 1 + 0.75) / 4)
    # an n/a (NaN) score under a draw leaves that sample out of that draw only
    with_na = q_hat - 1.0
    with_na[0, 1, 2] = np.nan
    c2 = consistency("model", "higher", Q_STAR, (0.01, q_hat, none_changed), (1.0, with_na, all_changed))
    assert c2.iec_ar == 1.0  # the other 2 samples of draw 0, and all 3 of the others, got worse


def test_pick_level_takes_the_largest_minor_and_the_smallest_disruptive_strength() -> None:
    sigmas, changed = [0.01, 0.02, 0.05, 0.1, 0.2], [0.0, 0.04, 0.06, 0.5, 0.7]
    assert pick_level(sigmas, changed, MINOR) == 0.02
    assert pick_level(sigmas, changed, DISRUPTIVE) == 0.2  # 0.5 is not more than 50 %
    assert pick_level([0.1], [0.3], DISRUPTIVE) is None


# ------------------------------------------------------------------ the perturbed components


def test_weight_noise_is_seeded_relative_and_leaves_the_base_alone() -> None:
    base = torch.nn.Linear(200, 100)
    before = base.weight.detach().clone()
    a, b = add_weight_noise(base, 0.1, 7), add_weight_noise(base, 0.1, 7)
    assert torch.equal(base.weight, before)
    assert torch.equal(a.weight, b.weight)
    assert not torch.equal(a.weight, add_weight_noise(base, 0.1, 8).weight)
    ratio = (a.weight.detach() / before).flatten()
    assert float(ratio.mean()) == pytest.approx(1.0, abs=0.01)
    assert float(ratio.std()) == pytest.approx(0.1, rel=0.05)
    assert torch.equal(add_weight_noise(base, 0.0, 3).weight, before)


def test_the_weight_noise_model_names_its_noise_and_refuses_a_model_it_cannot_reach() -> None:
    m = WeightNoiseModel(base="shapes-cnn", base_params={"variant": "shapes"}, sigma=0.05, draw=2)
    assert m.identity.endswith("+weight-noise(sigma=0.05,draw=2)")
    assert m.target_layers and m.input_size == 64
    with pytest.raises(ValueError, match="not a built-in model"):
        WeightNoiseModel(base="someones-plugin-model", sigma=0.05)


def test_input_noise_is_per_sample_clipped_and_fixes_the_targets() -> None:
    clean = InputNoiseDataset(base="shapes", sigma=0.0)
    noisy = InputNoiseDataset(base="shapes", sigma=0.1, draw=4, targets={"shapes-test-0001": 3})
    first = list(clean.samples(3))
    moved = list(noisy.samples(3))
    assert np.array_equal(first[0].image, np.asarray(next(iter(clean.inner.samples(1))).image, np.float32))
    assert moved[1].target == 3 and moved[0].target == first[0].target
    assert moved[0].image.min() >= 0.0 and moved[0].image.max() <= 1.0
    assert not np.array_equal(moved[0].image, first[0].image)
    # a sample's noise depends on its id and the draw only
    assert np.array_equal(moved[2].image, list(noisy.samples(3))[2].image)
    assert noisy.revision != clean.revision
    x = np.full((8, 8, 3), 0.5, np.float32)
    assert np.array_equal(add_input_noise(x, 0.2, 1), add_input_noise(x, 0.2, 1))


# ------------------------------------------------------------------ end to end, and metaquantus

TESTS = {
    ("model", "nr"): "Model Resilience Test",
    ("model", "ar"): "Model Adversary Test",
    ("input", "nr"): "Input Resilience Test",
    ("input", "ar"): "Input Adversary Test",
}


def _metaquantus():  # the package's module
    """The ``metaquantus`` package, installed by ``make install`` into ``<venv>/metaquantus`` (its
    wheel also ships a top-level ``tests`` package, so it never goes into site-packages)."""
    folder = Path(sys.prefix) / "metaquantus"
    if not (folder / "metaquantus").is_dir():
        pytest.skip(f"metaquantus is not installed in {folder} (make install puts it there)")
    if str(folder) not in sys.path:
        sys.path.append(str(folder))  # last: the repository's own `tests` package stays first
    import metaquantus

    return metaquantus


@pytest.fixture(scope="module")
def mc_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import xaibench

    out = tmp_path_factory.mktemp("mc")
    result = xaibench.meta(
        "gradient,gradcam,random,center",  # gradcam: constant maps (n/a) on some disrupted draws
        suite="default",
        tracks="shapes",
        metrics="mae,iou",
        limit=12,
        output_path=out,
        seed=0,
        progress=False,
        consistency="synthetic",
    )
    return {"out": out, "json": json.loads(result.json_path.read_text())}


def test_meta_reports_iac_iec_and_mc_for_both_kinds_of_perturbation(mc_run: dict) -> None:
    card = mc_run["json"]["tracks"]["shapes"]["metrics"]["mae"]
    mc = card["consistency"]
    assert set(mc["kinds"]) == {"model", "input"}
    for figures in mc["kinds"].values():
        assert figures["changed_minor"] < 0.05 < 0.5 < figures["changed_disruptive"]
        assert all(0.0 <= figures[f] <= 1.0 for f in ("iac_nr", "iac_ar", "iec_nr", "iec_ar", "mc"))
    assert mc["mc"] == pytest.approx(np.mean([k["mc"] for k in mc["kinds"].values()]), abs=1e-6)
    rows = (mc_run["out"] / "meta" / "meta.csv").read_text().splitlines()
    assert any(r.startswith("shapes,mae,consistency,mc,") for r in rows)
    page = (mc_run["out"] / "leaderboard" / "site" / "metrics.html").read_text()
    card = page[page.index('id="card-shapes-mae"') :].split("</tr>")[0]
    assert '<details class="mc"><summary>' in card and "IAC NR" in card and "IEC AR" in card


def test_mc_agrees_with_metaquantus_on_the_same_scores_draws_and_samples(mc_run: dict) -> None:
    """The perturbed runs' records (the 5 draws of each kind and level) and the run's submissions
    give Q* and Q^; metaquantus's MetaEvaluation aggregates them with its own code."""
    mq = _metaquantus()
    import xaibench.results as results
    from xaibench.metaeval.consistency_runs import plan_track
    from xaibench.plugins.manager import get_registry
    from xaibench.runner.run import resolve_tracks

    card = mc_run["json"]["tracks"]["shapes"]["metrics"]["mae"]
    ours = card["consistency"]
    registry = get_registry()
    (spec,) = resolve_tracks(registry, "default", ["shapes"])
    plan = plan_track(spec, registry, seed=0, limit=12)  # the same draws: seeded, deterministic
    explainers = sorted(ours["explainers"])
    frame = results.records(mc_run["out"] / ".xaibench")
    meta_frame = results.records(mc_run["out"] / ".xaibench" / "meta")

    def values(f, track: str) -> dict[str, dict[str, float]]:
        rows = f[(f["track"] == track) & (f["metric"] == "mae")]
        by = {x: rows[rows["explainer"] == x] for x in explainers}
        return {x: dict(zip(r["sample_id"], r["value"], strict=True)) for x, r in by.items()}

    star = values(frame, "shapes")
    ids = [s for s in plan.sample_ids if all(not math.isnan(star[x][s]) for x in explainers)]
    perturbed = {key: values(meta_frame, s.name) for key, s in plan.specs.items()}
    assert len(ids) == ours["samples"] >= 8
    assert any(math.isnan(v) for p in perturbed.values() for x in explainers for v in p[x].values())  # n/a seen
    keep = [plan.sample_ids.index(s) for s in ids]

    suite = {name: None for name in TESTS.values()}
    evaluation = mq.MetaEvaluation(
        test_suite=suite, xai_methods={x: {} for x in explainers}, iterations=1, nr_perturbations=5, write_to_file=False
    )
    evaluation.results_y_preds = np.zeros(len(ids))
    for (kind, short), name in TESTS.items():
        level = MINOR if short == "nr" else DISRUPTIVE
        changed = plan.changed[(kind, level)][:, keep]
        scores = {x: np.array([[perturbed[(kind, level, k)][x][s] for s in ids] for k in range(5)]) for x in explainers}
        # a sample some explainer has no score for (n/a) under a draw is not concerned by that draw
        scored = np.all([np.isfinite(scores[x]) for x in explainers], axis=0)
        evaluation.results_eval_scores[name] = {x: np.array([star[x][s] for s in ids]) for x in explainers}
        evaluation.results_eval_scores_perturbed[name] = {0: scores}
        evaluation.results_indices_perturbed[name] = {0: (~changed if short == "nr" else changed) & scored}
    evaluation.run_intra_analysis()
    evaluation.run_inter_analysis(score_direction="lower")  # mae: lower is better
    theirs = evaluation.run_meta_consistency_analysis()
    for kind, name in (("model", "Model"), ("input", "Input")):
        print(f"MC {kind}: xaibench {ours['kinds'][kind]['mc']:.4f}, metaquantus {theirs[name]['MC_mean']:.4f}")
        assert ours["kinds"][kind]["mc"] == pytest.approx(float(theirs[name]["MC_mean"]), abs=0.1)
        scores = theirs[name]["consistency_results"]
        assert ours["kinds"][kind]["iec_nr"] == pytest.approx(float(scores["IEC_{NR} mean"]), abs=1e-6)
        assert ours["kinds"][kind]["iec_ar"] == pytest.approx(float(scores["IEC_{AR} mean"]), abs=1e-6)
