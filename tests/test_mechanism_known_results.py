"""Known results on the mechanism tracks (DESIGN 11), reproduced through the runner: the exact
reference at every ground-truth optimum, ``random`` last among methods, the distractor drawing
``sobel`` and ``center`` away, integrated gradients exact on the additive track (and gradient x
input where the terms are linear), and the saturation case integrated gradients was made for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import xaibench
from xaibench.metrics.ground_truth.formulas import WORST
from xaibench.suites.mechanisms import MECHANISM_TRACKS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

METHODS = ["random", "center", "sobel", "gradient", "integrated-gradients", "input-x-gradient", "occlusion"]
GT = ("gt_mass_inside", "gt_pointing", "gt_rank_correlation", "gt_sign_agreement")
OPTIMUM = {"gt_mass_inside": 1.0, "gt_pointing": 1.0, "gt_rank_correlation": 1.0, "gt_sign_agreement": 1.0}
N = 24


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every mechanism track, the methods above and the ``oracle``, scored on the known answer."""
    out = tmp_path_factory.mktemp("mechanisms")
    return xaibench.run(
        [*METHODS, "oracle"],
        suite="mechanisms",
        metrics="family:ground_truth",
        limit=N,
        output_path=out,
        site=False,
        progress=False,
    )


def _rows(res: Any) -> pd.DataFrame:
    return pd.DataFrame([dict(r) for r in res.board.rows])


def _values(res: Any, track: str, metric: str) -> pd.DataFrame:
    """Per-sample values: one column per explainer, one row per sample."""
    df = res.records
    df = df[(df["track"] == track) & (df["metric"] == metric)]
    return df.pivot(index="sample_id", columns="explainer", values="value")


def paired_interval(a: np.ndarray, b: np.ndarray, seed: int = 0, n_boot: int = 2000) -> tuple[float, float]:
    """Percentile 95 % interval of mean(a - b) over a paired bootstrap of the samples."""
    d = np.asarray(a, float) - np.asarray(b, float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def test_the_exact_reference_scores_each_ground_truth_optimum(suite_run: Any) -> None:
    df = suite_run.records
    oracle = df[(df["explainer"] == "oracle") & df["metric"].isin(GT)]
    assert set(oracle["track"]) == {t.name for t in MECHANISM_TRACKS}
    for (track, metric), group in oracle.groupby(["track", "metric"]):
        defined = group["value"].dropna()
        if metric != "gt_sign_agreement":  # n/a only where the contributions have one sign
            assert len(defined) == N, (track, metric, group["na_reason"].unique())
        assert (defined == OPTIMUM[metric]).all(), (track, metric, defined.describe())
    rows = _rows(suite_run)
    overall = rows[(rows["explainer"] == "oracle") & (rows["metric"] == "rank:overall")]
    assert overall["rank"].isna().all()  # drawn as a reference, never ranked


def test_random_ranks_last_among_methods_on_every_mechanism_track(suite_run: Any) -> None:
    rows = _rows(suite_run)
    overall = rows[rows["metric"] == "rank:overall"].set_index(["track", "explainer"])["rank"]
    for track in (t.name for t in MECHANISM_TRACKS):
        ranks = {x: overall[(track, x)] for x in METHODS}
        assert all(r is not None and not pd.isna(r) for r in ranks.values()), (track, ranks)
        worst = max(ranks.values())
        assert ranks["random"] == worst, (track, ranks)  # a tie for last counts as last


def test_the_distractor_draws_sobel_and_center_into_the_bottom_half(suite_run: Any) -> None:
    rows = _rows(suite_run)
    overall = rows[(rows["metric"] == "rank:overall") & (rows["track"] == "mechanism-distractor")]
    ranks = overall.set_index("explainer")["rank"]
    order = sorted(METHODS, key=lambda x: ranks[x])
    bottom = set(order[len(order) // 2 :])
    assert {"sobel", "center"} <= bottom, dict(ranks[METHODS])


def test_on_saturation_gradient_is_no_better_than_random_where_ig_and_occlusion_are(suite_run: Any) -> None:
    mass = _values(suite_run, "mechanism-saturation", "gt_mass_inside")
    low, _ = paired_interval(mass["gradient"], mass["random"])
    assert low <= 0.0, (mass["gradient"].mean(), mass["random"].mean())
    for better in ("integrated-gradients", "occlusion"):
        low, _ = paired_interval(mass[better], mass["random"])
        assert low > 0.0, (better, mass[better].mean(), mass["random"].mean())


def test_integrated_gradients_recovers_the_exact_additive_attributions(suite_run: Any) -> None:
    rho = _values(suite_run, "mechanism-additive", "gt_rank_correlation")
    assert rho["integrated-gradients"].mean() >= 0.99, rho["integrated-gradients"].describe()
    assert rho["input-x-gradient"].mean() < rho["integrated-gradients"].mean()  # the quadratic terms doubled


def test_input_x_gradient_is_exact_where_the_terms_are_linear(tmp_path: Path) -> None:
    res = xaibench.run(
        ["input-x-gradient", "integrated-gradients"],
        model="mechanism",
        model_params={"mechanism": "additive"},
        dataset="mechanisms",
        dataset_params={"mechanism": "additive", "terms": "linear", "n": 16},
        metrics="family:ground_truth",
        output_path=tmp_path,
        site=False,
        progress=False,
    )
    df = res.records
    rho = df[df["metric"] == "gt_rank_correlation"].groupby("explainer")["value"].mean()
    assert rho["input-x-gradient"] >= 0.99 and rho["integrated-gradients"] >= 0.99, rho.to_dict()


def test_a_constant_map_scores_the_worst_value_and_other_metrics_keep_it_n_a(tmp_path: Path) -> None:
    """DESIGN 11: through the runner's scoring (``xaibench score``), a constant map scores each
    ground-truth metric's worst value, where deletion keeps it n/a; an exact map scores the optimum."""
    from xaibench.datasets.mechanisms import MechanismsDataset
    from xaibench.explainers.baselines import exact_attribution
    from xaibench.plugins.manager import Registry
    from xaibench.runner.score import score_folder

    samples = list(MechanismsDataset(mechanism="confined").samples(limit=4))
    for k, s in enumerate(samples):
        exact = exact_attribution(s.ground_truth)
        np.save(tmp_path / f"{s.id}.npy", np.full_like(exact, 0.5) if k < 2 else exact)
    scored = score_folder(Registry(), "mechanisms", tmp_path, "mechanism", ["family:ground_truth", "deletion"])
    metrics = scored["metrics"]
    ids = [s.id for s in samples]
    for metric in ("gt_mass_inside", "gt_pointing", "gt_rank_correlation"):
        values = [metrics[metric]["per_sample"][i] for i in ids]
        assert values[:2] == [WORST[metric]] * 2 and values[2:] == [OPTIMUM[metric]] * 2, (metric, values)
    assert [metrics["deletion"]["per_sample"][i] for i in ids][:2] == [None, None]
