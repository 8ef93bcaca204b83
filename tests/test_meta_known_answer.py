"""DESIGN 11's known-answer test: on a mechanism track, Kendall tau-b between the explainers'
ranking by a proxy faithfulness metric and by the ground-truth family's mean rank, with a paired
bootstrap interval and a verdict. Hand-computed oracles, SciPy, the seed, the files, the metrics
page, and one run end to end through ``xaibench.meta``."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

import xaibench
from xaibench import hookimpl
from xaibench.api import Metric, MetricInput, MetricOutput
from xaibench.metaeval.assess import assess
from xaibench.metaeval.files import known_answer_json, write_meta
from xaibench.metaeval.known_answer import (
    BOOTSTRAP,
    KnownAnswer,
    average_ranks,
    known_answer,
    mean_rank,
    tau_b_rows,
)
from xaibench.metaeval.rankings import kendall_tau_b
from xaibench.plugins import manager
from xaibench.publish.leaderboard import Entry
from xaibench.results import meta as read_meta_csv
from xaibench.seeds import derive_seed
from xaibench.site.views.meta import known_answer_table

TRACK = "mechanism-additive"


def _entry(explainer: str, metric: str, family: str, direction: str, values: Any, ranking: bool = True) -> Entry:
    listed = [None if v is None else float(v) for v in values]
    present = [v for v in listed if v is not None]
    return Entry(
        track=TRACK,
        explainer=explainer,
        metric=metric,
        family=family,
        direction=direction,
        ranking=ranking,
        value=float(np.mean(present)) if present else None,
        ci_low=None,
        ci_high=None,
        n=len(listed),
        n_na=len(listed) - len(present),
        samples={f"s{i:02d}": v for i, v in enumerate(listed)},
    )


def _table(
    truth: dict[str, dict[str, Any]], proxy: dict[str, Any], direction: str = "higher", metric: str = "deletion"
) -> list[Entry]:
    """Entries of one mechanism track: ground-truth metrics (higher is better) and one proxy."""
    out = [_entry(x, m, "ground_truth", "higher", v) for m, by in truth.items() for x, v in by.items()]
    return out + [_entry(x, metric, "faithfulness", direction, v) for x, v in proxy.items()]


def _constant(means: dict[str, float], n: int = 8) -> dict[str, list[float]]:
    return {x: [m] * n for x, m in means.items()}


# The hand-computed table: two ground-truth metrics rank a, b, c, d as 1, 2, 3, 4 and 4, 1, 2, 3:
# mean ranks 2.5, 1.5, 2.5, 3.5 (b best; a and c tied; d worst). The proxy is lower-is-better with
# means 0.3, 0.1, 0.2, 0.4, signed -0.3, -0.1, -0.2, -0.4. Of the six pairs, (a, c) is tied on the
# known answer; the other five are concordant: tau-b = 5 / sqrt(6 * 5).
HAND_TRUTH = {
    "gt_mass_inside": _constant({"a": 0.9, "b": 0.7, "c": 0.5, "d": 0.1}),
    "gt_pointing": _constant({"a": 0.2, "b": 0.8, "c": 0.6, "d": 0.4}),
}
HAND_PROXY = _constant({"a": 0.3, "b": 0.1, "c": 0.2, "d": 0.4})
HAND_TAU = 5 / math.sqrt(30)


def test_tau_b_by_hand_with_ties_and_as_scipy_computes_it() -> None:
    # pairs of (1, 2, 2, 3) and (2, 1, 3, 3): -1, +1, +1, 0 (tie in x), +1, 0 (tie in y): S = 2;
    # 6 pairs, one tied on each side: tau-b = 2 / sqrt(5 * 5)
    x, y = np.array([1.0, 2.0, 2.0, 3.0]), np.array([2.0, 1.0, 3.0, 3.0])
    assert tau_b_rows(x[None], y[None])[0] == pytest.approx(0.4, abs=1e-15)
    assert kendalltau(x, y, variant="b").statistic == pytest.approx(0.4, abs=1e-15)
    assert math.isnan(tau_b_rows(x[None], np.full((1, 4), 2.0))[0])  # one side ties every pair
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, size=(50, 6)).astype(float), rng.integers(0, 4, size=(50, 6)).astype(float)
    rows = tau_b_rows(a, b)
    for k in range(50):
        expected = kendalltau(a[k], b[k], variant="b").statistic
        assert (math.isnan(rows[k]) and math.isnan(expected)) or rows[k] == pytest.approx(expected, abs=1e-12)
        assert rows[k] == pytest.approx(kendall_tau_b(a[k], b[k]), abs=1e-15, nan_ok=True)


def test_ranks_and_the_ground_truth_mean_rank_by_hand() -> None:
    assert average_ranks(np.array([0.9, 0.5, 0.5, 0.1])).tolist() == [1.0, 2.5, 2.5, 4.0]
    ranked = average_ranks(np.array([0.9, np.nan, 0.1]))  # n/a: not ranked, takes no rank
    assert ranked[0] == 1.0 and math.isnan(ranked[1]) and ranked[2] == 2.0
    x = np.random.default_rng(1).integers(0, 3, size=7).astype(float)
    assert average_ranks(x).tolist() == rankdata(-x, method="average").tolist()
    both = np.array([[0.9, 0.7, 0.5, 0.1], [0.2, 0.8, 0.6, 0.4]])
    assert mean_rank(both).tolist() == [2.5, 1.5, 2.5, 3.5]
    # d has no value on the second metric: ranked 4th on the first only; a, b, c are 3rd, 1st, 2nd there
    holes = np.array([[0.9, 0.7, 0.5, 0.1], [0.2, 0.8, 0.6, np.nan]])
    assert mean_rank(holes).tolist() == [2.0, 1.5, 2.5, 4.0]


def test_the_hand_computed_table_and_the_proxys_direction() -> None:
    (got,) = known_answer(_table(HAND_TRUTH, HAND_PROXY, "lower"), seed=0)
    assert (got.track, got.metric, got.direction) == (TRACK, "deletion", "lower")
    assert got.tau == pytest.approx(HAND_TAU, abs=1e-12)
    assert got.low == pytest.approx(HAND_TAU, abs=1e-12) and got.high == pytest.approx(HAND_TAU, abs=1e-12)
    assert got.verdict == "agrees" and got.reason is None
    assert got.explainers == ("a", "b", "c", "d") and got.samples == 8
    assert got.truth == ("gt_mass_inside", "gt_pointing")
    means = {x: v[0] for x, v in HAND_PROXY.items()}
    composite = mean_rank(np.array([[HAND_TRUTH[m][x][0] for x in "abcd"] for m in got.truth]))
    scipy_tau = kendalltau([-means[x] for x in "abcd"], -composite, variant="b").statistic
    assert got.tau == pytest.approx(scipy_tau, abs=1e-12)
    # the same numbers read as higher-is-better: every untied pair turns discordant
    (flipped,) = known_answer(_table(HAND_TRUTH, HAND_PROXY, "higher"), seed=0)
    assert flipped.tau == pytest.approx(-HAND_TAU, abs=1e-12) and flipped.verdict == "disagrees"


def _quality_table(proxy_sign: float, *, noise: float = 0.05, n: int = 32, seed: int = 0) -> list[Entry]:
    """Five explainers of quality 0, 0.2, ..., 0.8 on two ground-truth metrics; the proxy follows
    the quality times ``proxy_sign`` (0: pure noise, the same distribution for everyone)."""
    rng = np.random.default_rng(seed)
    quality = {x: 0.2 * k for k, x in enumerate(["e0", "e1", "e2", "e3", "e4"])}
    truth = {m: {x: q + noise * rng.standard_normal(n) for x, q in quality.items()} for m in ("gt_a", "gt_b")}
    scale = noise if proxy_sign else 1.0
    proxy = {x: proxy_sign * q + scale * rng.standard_normal(n) for x, q in quality.items()}
    return _table(truth, proxy)


def test_a_proxy_in_the_known_order_agrees_reversed_disagrees_and_noise_is_undecided() -> None:
    (same,) = known_answer(_quality_table(1.0), seed=0)
    assert same.tau == 1.0 and same.low == 1.0 and same.verdict == "agrees"
    (reversed_,) = known_answer(_quality_table(-1.0), seed=0)
    assert reversed_.tau == -1.0 and reversed_.high == -1.0 and reversed_.verdict == "disagrees"
    (noise,) = known_answer(_quality_table(0.0), seed=0)
    assert noise.verdict == "undecided" and noise.low < 0 < noise.high
    assert noise.samples == 32 and len(noise.explainers) == 5


def test_references_are_left_out() -> None:
    entries = _table(HAND_TRUTH, HAND_PROXY, "lower")
    # the oracle is best on the known answer and worst on the proxy: counted, it would lower tau
    oracle = _table({m: _constant({"oracle": 1.0}) for m in HAND_TRUTH}, _constant({"oracle": 9.0}), "lower")
    (counted,) = known_answer(entries + oracle, seed=0)
    assert "oracle" in counted.explainers and counted.tau < HAND_TAU
    (left_out,) = known_answer(entries + oracle, seed=0, reference={"oracle"})
    (alone,) = known_answer(entries, seed=0)
    assert left_out == alone and "oracle" not in left_out.explainers


def test_untested_cases_say_why() -> None:
    (two,) = known_answer(_table({"gt": _constant({"a": 1, "b": 0})}, _constant({"a": 1, "b": 0})), seed=0)
    assert two.verdict == "untested" and "fewer than 3 explainers" in str(two.reason) and math.isnan(two.tau)
    three = {"a": 1.0, "b": 0.5, "c": 0.0}
    (seven,) = known_answer(_table({"gt": _constant(three, 7)}, _constant(three, 7)), seed=0)
    assert seven.verdict == "untested" and "fewer than 8 samples" in str(seven.reason) and seven.samples == 7
    # ten samples, but c's proxy is n/a on three of them: seven shared
    holes: dict[str, list[float | None]] = {x: list(v) for x, v in _constant(three, 10).items()}
    holes["c"] = [None, None, None, *holes["c"][3:]]
    (paired,) = known_answer(_table({"gt": _constant(three, 10)}, holes), seed=0)
    assert paired.verdict == "untested" and paired.samples == 7
    (flat,) = known_answer(_table({"gt": _constant(three)}, _constant({x: 0.5 for x in three})), seed=0)
    assert flat.verdict == "untested" and "same mean" in str(flat.reason)
    # an explainer without a value on the known answer is left out, as is a metric only one explainer has
    four = {"gt": {**_constant(three), "d": [None] * 8}, "gt_sign_agreement": _constant({"a": 1.0})}
    (some,) = known_answer(_table(four, _constant({**three, "d": 2.0})), seed=0)
    assert some.explainers == ("a", "b", "c") and some.truth == ("gt",) and some.verdict == "agrees"
    # no ranking metric of the ground_truth family: not a mechanism track, no test
    proxy = [_entry(x, "deletion", "faithfulness", "lower", v) for x, v in _constant(three).items()]
    shown_only = [_entry(x, "gt", "ground_truth", "higher", v, ranking=False) for x, v in _constant(three).items()]
    assert known_answer(proxy, seed=0) == [] and known_answer(proxy + shown_only, seed=0) == []


def test_the_interval_is_the_seeded_paired_bootstrap_and_deterministic() -> None:
    entries = _quality_table(0.0, seed=3)
    (got,) = known_answer(entries, seed=7)
    shuffled = list(entries)
    random.Random(0).shuffle(shuffled)
    assert known_answer(shuffled, seed=7) == [got]
    (other,) = known_answer(entries, seed=8)
    assert (other.tau, other.explainers) == (got.tau, got.explainers) and (other.low, other.high) != (got.low, got.high)
    # the oracle: one index array from derive_seed(seed, "meta", track, metric, "known-answer"),
    # shared by the proxy and both ground-truth metrics; ranks and tau by SciPy, resample by resample
    values = {(e.metric, e.explainer): np.array([e.samples[s] for s in sorted(e.samples)]) for e in entries}  # type: ignore[index]
    names = sorted({x for _, x in values})
    n = len(values[("deletion", names[0])])
    index = np.random.default_rng(derive_seed(7, "meta", TRACK, "deletion", "known-answer")).integers(
        0, n, size=(BOOTSTRAP, n)
    )
    taus = []
    for row in index:
        proxy = [values[("deletion", x)][row].mean() for x in names]
        ranks = [rankdata([-values[(m, x)][row].mean() for x in names]) for m in ("gt_a", "gt_b")]
        taus.append(kendalltau(proxy, -np.mean(ranks, axis=0), variant="b").statistic)
    low, high = np.percentile(taus, [2.5, 97.5])
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    full = kendalltau(
        [values[("deletion", x)].mean() for x in names],
        -np.mean([rankdata([-values[(m, x)].mean() for x in names]) for m in ("gt_a", "gt_b")], axis=0),
        variant="b",
    ).statistic
    assert got.tau == pytest.approx(full, abs=1e-12)


def test_meta_json_meta_csv_and_the_metrics_page_carry_the_table(tmp_path: Path) -> None:
    entries = _table(HAND_TRUTH, HAND_PROXY, "lower")
    tracks = assess(entries, seed=0)
    found = known_answer(entries, seed=0)
    write_meta(tmp_path / "with", tracks, seed=0, submissions={"a.json": "0" * 64}, created="T", known_answer=found)
    data = json.loads((tmp_path / "with" / "meta.json").read_text())
    block = data["tracks"][TRACK]["known_answer"]["deletion"]
    assert block["test"] == "known-answer" and block["verdict"] == "agrees" and block["direction"] == "lower"
    assert block["tau"] == pytest.approx(HAND_TAU) and block["ci_low"] == pytest.approx(HAND_TAU)
    assert block["explainers"] == ["a", "b", "c", "d"] and block["samples"] == 8 and block["reason"] is None
    assert block["ground_truth"] == ["gt_mass_inside", "gt_pointing"]
    assert data["tracks"][TRACK]["metrics"]["deletion"]["verdict"] == "untested"  # not a validity test
    with open(tmp_path / "with" / "meta.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["test"] == "known-answer"]
    assert [(r["metric"], r["figure"], r["verdict"]) for r in rows] == [
        ("deletion", "tau", "agrees"),
        ("deletion", "explainers", "agrees"),
        ("deletion", "samples", "agrees"),
    ]
    frame = read_meta_csv(tmp_path / "with")
    shown = frame[frame["test"] == "known-answer"].set_index("figure")
    assert shown.loc["tau", "value"] == pytest.approx(HAND_TAU) and shown.loc["samples", "value"] == 8.0
    assert shown.loc["explainers", "value"] == 4.0
    # without it, the files hold no known-answer block
    write_meta(tmp_path / "later", tracks, seed=0, submissions={"a.json": "0" * 64}, created="T")
    assert "known_answer" not in json.loads((tmp_path / "later" / "meta.json").read_text())["tracks"][TRACK]

    untested = KnownAnswer("mechanism-and", "insertion", "higher", "untested", *[math.nan] * 3, (), 0, (), "why")
    data["tracks"]["mechanism-and"] = {"known_answer": {"insertion": known_answer_json(untested)}}
    table = known_answer_table(SimpleNamespace(meta=data))  # type: ignore[arg-type]
    assert table is not None and table["tracks"] == [TRACK, "mechanism-and"]
    assert [r["metric"] for r in table["rows"]] == ["deletion", "insertion"]
    cell, empty = table["rows"][0]["cells"]
    assert cell["text"] == "0.91 [0.91, 0.91]" and cell["verdict"] == "agrees" and "8 samples" in cell["title"]
    assert empty == {"text": "", "verdict": "", "title": ""}
    assert table["rows"][1]["cells"][1] == {"text": "", "verdict": "untested", "title": "why"}
    assert known_answer_table(SimpleNamespace(meta={"tracks": {}})) is None  # type: ignore[arg-type]


class GtMass(Metric):
    """A stand-in for the ground_truth family on ``shapes``: the share of |E| inside the mask."""

    name = "gt_mass_stand_in"
    version = "1.0.0"
    family = "ground_truth"
    direction = "higher"
    ranking = True
    licence = "test"

    def score(self, batch: MetricInput) -> MetricOutput:
        assert batch.saliency is not None
        values = []
        for sample, saliency in zip(batch.samples, batch.saliency, strict=True):
            mask = sample.ground_truth.binary() if sample.ground_truth is not None else None
            assert mask is not None
            h, w = saliency.shape
            inside = mask[(np.arange(h) * mask.shape[0] // h)[:, None], (np.arange(w) * mask.shape[1] // w)[None, :]]
            total = float(np.abs(saliency).sum())
            values.append(float(np.abs(saliency)[inside].sum()) / total if total else 0.0)
        return MetricOutput(values=np.array(values), reasons=[None] * len(values))


class Plugin:
    @hookimpl
    def register_metrics(self, register: Any) -> None:
        register(GtMass)


def test_meta_reports_the_known_answer_of_a_mechanism_track_end_to_end(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    registry.add_plugin(Plugin(), name="ground-truth-stand-in")
    out = tmp_path / "out"
    result = xaibench.meta(
        ["random", "center", "gradient", "oracle"],
        suite="default",
        tracks="shapes",
        metrics=["deletion", "gt_mass_stand_in"],
        limit=10,
        output_path=out,
        consistency="none",
        protocol=False,
        progress=False,
    )
    (got,) = result.known_answer
    assert (got.track, got.metric) == ("shapes", "deletion")
    assert got.explainers == ("center", "gradient", "random") and got.samples == 10  # the oracle left out
    assert got.verdict in ("agrees", "disagrees", "undecided") and got.low <= got.tau <= got.high
    assert result.tracks["shapes"].cards["deletion"].validity.verdict == "untested"  # no gate from it
    data = json.loads(result.json_path.read_text())
    assert data["tracks"]["shapes"]["known_answer"]["deletion"]["tau"] == pytest.approx(got.tau)
    assert [r for r in result.csv_path.read_text().splitlines() if ",known-answer,tau," in r]
    page = (out / "leaderboard" / "site" / "metrics.html").read_text()
    assert 'id="known-answer"' in page and f"<em>{got.verdict}</em>" in page
    # the same submissions assessed again as a folder: the same test
    again = xaibench.meta(submissions=out / "submissions", out=tmp_path / "again")
    assert again.known_answer == [got]


def test_a_ground_truth_metric_an_explainer_has_only_now_and_then_is_not_counted_for_it() -> None:
    """Measured on the record's mechanism-additive track at 256 samples: Grad-CAM++ maps are
    constant (all zero) on about half of the samples, where sign agreement scores its worst value
    and deletion is n/a; elsewhere the map is unsigned, sign agreement n/a and deletion defined.
    Paired on every metric each explainer had, no sample was left and the test was untested."""
    three = {"a": 1.0, "b": 0.5, "c": 0.0}
    proxy: dict[str, list[float | None]] = {x: [v] * 16 for x, v in three.items()}
    sign: dict[str, list[float | None]] = {x: [v] * 16 for x, v in three.items()}
    proxy["d"] = [None] * 8 + [0.2] * 8  # n/a on the samples where d's map is constant ...
    sign["d"] = [0.0] * 8 + [None] * 8  # ... where alone it has sign agreement (its worst value)
    truth = {"gt_mass_inside": _constant({**three, "d": 0.25}, 16), "gt_sign_agreement": sign}
    (got,) = known_answer(_table(truth, proxy), seed=0)
    assert got.verdict == "agrees" and got.samples == 8 and got.explainers == ("a", "b", "c", "d")
    # d is ranked on gt_mass_inside alone (4th of 4), as a, b, c on both: the proxy's order exactly
    assert got.tau == pytest.approx(1.0, abs=1e-12)
    # with 15 of 16 values, d still has the metric (one failed sample): that sample leaves the pairing
    sign["d"] = [0.1] * 15 + [None]
    proxy["d"] = [0.2] * 16
    (one_gap,) = known_answer(_table(truth, proxy), seed=0)
    assert one_gap.samples == 15 and "gt_sign_agreement" in one_gap.truth
