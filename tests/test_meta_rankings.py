"""DESIGN 9: rank stability and agreement, against scipy and hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from xaibench.metaeval.assess import assess
from xaibench.metaeval.files import CSV_FIELDS, write_meta
from xaibench.metaeval.rankings import BOOTSTRAP, agreement, kendall_tau_b, rank_stability, signed
from xaibench.publish.leaderboard import Entry


def test_kendall_tau_b_equals_scipys_with_and_without_ties() -> None:
    rng = np.random.default_rng(0)
    x = np.array([0.1, 0.5, 0.5, 0.9, 0.3, 0.3])
    rows = np.vstack([rng.integers(0, 3, 6).astype(float) for _ in range(20)] + [x, -x, rng.random(6)])
    ours = kendall_tau_b(x, rows)
    for row, tau in zip(rows, ours, strict=True):
        expected = kendalltau(x, row).statistic
        assert (np.isnan(tau) and np.isnan(expected)) or tau == pytest.approx(expected, abs=1e-12)
    assert kendall_tau_b(x, x) == pytest.approx(1.0) and kendall_tau_b(x, -x) == pytest.approx(-1.0)
    assert np.isnan(kendall_tau_b(x, np.ones(6)))  # one side all ties


def test_a_ranking_no_resample_can_change_is_perfectly_stable() -> None:
    """Three explainers 10 apart with noise below 1: every resample keeps the order."""
    rng = np.random.default_rng(1)
    values = np.array([0.0, 10.0, 20.0])[:, None] + rng.random((3, 40))
    s = rank_stability(values, np.random.default_rng(2))
    assert (s.mean_tau, s.p05_tau, s.p_top, s.n_for_tau, s.n, s.explainers) == (1.0, 1.0, 1.0, 8, 40, 3)
    assert not s.unstable and s.reason is None


def test_explainers_that_differ_only_by_noise_are_flagged_unstable() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=(5, 30))  # no explainer better than another
    s = rank_stability(values, np.random.default_rng(4))
    assert s.p05_tau < 0.5 and s.unstable
    assert s.n_for_tau is None  # no size below n reaches tau 0.9: "> n"
    assert 0.0 < s.p_top < 1.0
    again = rank_stability(values, np.random.default_rng(4))
    assert again == s  # seeded


def test_the_top_stays_first_counts_resamples_whose_best_is_the_full_samples_best() -> None:
    """Explainer 0 is best only through sample 0: whether it stays first depends on how often a
    resample draws that sample; the fraction is recomputed here from the same draws."""
    values = np.array([[3.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    s = rank_stability(values, np.random.default_rng(5))
    index = np.random.default_rng(5).integers(0, 4, size=(BOOTSTRAP, 4))
    means = values[:, index].mean(axis=2)
    assert s.p_top == pytest.approx(np.mean(means[0] >= means[1]))


def test_degenerate_inputs_have_a_reason() -> None:
    assert rank_stability(np.ones((1, 10)), np.random.default_rng(0)).reason == "fewer than two explainers to rank"
    assert rank_stability(np.ones((3, 10)), np.random.default_rng(0)).reason == "every explainer has the same mean"
    assert "too few paired samples" in str(rank_stability(np.ones((3, 1)), np.random.default_rng(0)).reason)


def test_agreement_of_a_metric_with_its_mirror_is_minus_one_and_with_itself_one() -> None:
    rng = np.random.default_rng(6)
    values = np.array([0.0, 1.0, 2.0, 3.0])[:, None] + 0.1 * rng.random((4, 25))
    same = agreement(values, values, np.random.default_rng(7))
    assert (same.tau, same.low, same.high, same.n) == (1.0, 1.0, 1.0, 25)
    mirror = agreement(values, signed(values, "lower"), np.random.default_rng(7))
    assert (mirror.tau, mirror.low, mirror.high) == (-1.0, -1.0, -1.0)


def _entries(track: str, metric: str, family: str, direction: str, table: dict[str, list[float]]) -> list[Entry]:
    return [
        Entry(
            track=track,
            explainer=name,
            metric=metric,
            family=family,
            direction=direction,
            ranking=True,
            value=float(np.mean([x for x in v if x is not None])) if any(x is not None for x in v) else None,
            ci_low=None,
            ci_high=None,
            n=len(v),
            n_na=0,
            samples={f"s{i}": x for i, x in enumerate(v)},
        )
        for name, v in table.items()
    ]


def test_an_explainer_with_no_value_on_a_metric_is_left_out_of_its_stability() -> None:
    """The record: attention rollout is n/a on every CNN sample; left in, no sample would be
    paired across the explainers and the card would say "too few paired samples (n = 0)"."""
    rng = np.random.default_rng(3)
    values: dict[str, list[float | None]] = {
        name: list(base + 0.01 * rng.random(12)) for name, base in (("a", 0.9), ("b", 0.5), ("c", 0.1))
    }
    values["rollout"] = [None] * 12
    card = assess(_entries("t", "iou", "alignment", "higher", values), seed=0)["t"].cards["iou"]
    assert card.stability.explainers == 3 and card.stability.n == 12 and card.stability.p05_tau == 1.0


def test_assess_orients_directions_leaves_out_reference_explainers_and_writes_tidy_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    good = {name: list(base + 0.01 * rng.random(12)) for name, base in (("a", 0.9), ("b", 0.5), ("c", 0.1))}
    good["oracle"] = [1.0] * 12
    errors = {name: [1 - x for x in v] for name, v in good.items()}  # the same order, lower is better
    errors["oracle"] = [5.0] * 12  # a reference explainer that would reverse nothing if it were left in
    entries = _entries("t", "iou", "alignment", "higher", good) + _entries("t", "mae", "alignment", "lower", errors)
    result = assess(entries, seed=0, reference={"oracle"})
    cards = result["t"].cards
    assert cards["iou"].agreement["mae"].tau == 1.0  # the directions are taken into account
    assert cards["iou"].stability.explainers == 3 and cards["iou"].verdict == "untested"
    assert result["t"].within == {"alignment": 1.0}
    json_path, csv_path = write_meta(tmp_path, result, seed=0, submissions={"a.json": "00"})
    data = json.loads(json_path.read_text())
    assert data["schema"] == "xaibench.meta/1" and data["provenance"]["submissions"] == {"a.json": "00"}
    card = data["tracks"]["t"]["metrics"]["mae"]
    assert card["direction"] == "lower" and card["stability"]["mean_tau"] == 1.0
    assert card["agreement"]["iou"]["tau"] == 1.0
    lines = csv_path.read_text().splitlines()
    assert lines[0] == ",".join(CSV_FIELDS)
    assert "t,iou,agreement,tau:mae,1.0,1.0,1.0,untested" in lines
