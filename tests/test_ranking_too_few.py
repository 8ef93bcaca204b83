"""Issue 24, item 3: an explainer with too few values (a constant map on one of 8 images) gets
"too few samples (n = 7)" while the others stay ranked among themselves, per metric, per family
and overall; a sample that every explainer lacks leaves every pair at 7 and nobody ranked (DESIGN 7)."""

from __future__ import annotations

from xaibench.publish.leaderboard import Entry, rank_metric, rank_track


def _entry(explainer: str, values: list[float | None], metric: str, family: str, direction: str) -> Entry:
    kept = [v for v in values if v is not None]
    return Entry(
        track="cats",
        explainer=explainer,
        metric=metric,
        family=family,
        direction=direction,
        ranking=True,
        value=sum(kept) / len(kept),
        ci_low=None,
        ci_high=None,
        n=len(kept),
        n_na=len(values) - len(kept),
        samples={f"s{i}": v for i, v in enumerate(values)},
    )


# good beats poor on every sample by 0.5 (whatever the bootstrap draws); flat misses s3
GOOD = [0.9, 0.8, 0.85, 0.95, 0.9, 0.7, 0.8, 0.9]
POOR = [v - 0.5 for v in GOOD]
FLAT = [0.6, 0.6, 0.6, None, 0.6, 0.6, 0.6, 0.6]


def _three(metric: str, family: str, direction: str = "higher") -> list[Entry]:
    good, poor = (GOOD, POOR) if direction == "higher" else (POOR, GOOD)
    names = (("gradient", good), ("random", poor), ("flat", FLAT))
    return [_entry(name, values, metric, family, direction) for name, values in names]


def test_the_others_stay_ranked_in_the_metric() -> None:
    assert rank_metric(_three("iou", "alignment")) == {
        "flat": (None, "too few samples (n = 7)"),
        "gradient": (1, ""),
        "random": (2, ""),
    }


def test_the_others_stay_ranked_in_their_families_and_overall() -> None:
    entries = _three("iou", "alignment") + _three("deletion", "faithfulness", "lower")
    rows = {(r["explainer"], r["metric"]): (r["rank"], r["status"]) for r in rank_track("cats", entries).rows}
    for metric in ("iou", "deletion", "rank:alignment", "rank:faithfulness", "rank:overall"):
        assert rows[("gradient", metric)] == (1, "") and rows[("random", metric)] == (2, ""), metric
    assert rows[("flat", "deletion")] == (None, "too few samples (n = 7)")
    assert rows[("flat", "rank:overall")] == (None, "not ranked: too few samples (n = 7)")


def test_a_sample_nobody_has_leaves_nobody_ranked() -> None:
    entries = _three("iou", "alignment")
    for e in entries:
        assert e.samples is not None
        e.samples["s3"] = None
    assert {x: rank for x, (rank, _) in rank_metric(entries).items()} == {
        "flat": None,
        "gradient": None,
        "random": None,
    }
