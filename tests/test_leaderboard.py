"""Family and overall ranks from paired per-metric ranks, statistics, and safe rendering.

Paired comparisons, validity gates, sanity flags and duplicates: tests/test_paired_ranking.py;
hostile strings: tests/test_leaderboard_escaping.py."""

from __future__ import annotations

import numpy as np
from rich.console import Console

from xaibench.publish.board import Leaderboard
from xaibench.publish.leaderboard import Entry, leaderboard_rows, rank_by_mean, rank_metric
from xaibench.publish.writers import print_leaderboard, to_markdown
from xaibench.stats import bootstrap_ci, summarise

IDS = [f"s{k}" for k in range(10)]


def _e(explainer: str, metric: str, value: float | None, direction: str = "higher", family: str = "alignment",
       ranking: bool = True, n: int = 10) -> Entry:  # fmt: skip
    """An entry whose ``n`` samples all have ``value`` (so any difference is a strict win)."""
    samples: dict[str, float | None] = {s: value for s in IDS[:n]}
    return Entry("t", explainer, metric, family, direction, ranking, value, value, value, n, 0, samples)


def test_rank_metric_is_direction_aware_and_gives_na_no_rank() -> None:
    higher = [_e("a", "m", 0.9), _e("b", "m", 0.85), _e("c", "m", 0.5), _e("d", "m", None)]
    assert rank_metric(higher) == {"a": (1, ""), "b": (2, ""), "c": (3, ""), "d": (None, "too few samples (n = 0)")}
    lower = [_e(x.explainer, "m", x.value, direction="lower") for x in higher[:3]]
    assert {x: r for x, (r, _) in rank_metric(lower).items()} == {"c": 1, "b": 2, "a": 3}
    exact = [_e("a", "m", 0.5), _e("b", "m", 0.5), _e("c", "m", 0.4)]
    assert {x: r for x, (r, _) in rank_metric(exact).items()} == {"a": 1, "b": 1, "c": 3}


def test_rank_by_mean_ties_equal_scores() -> None:
    assert rank_by_mean({"x": 1.5, "y": 1.5, "z": 3.0}) == {"x": 1, "y": 1, "z": 3}


def test_family_and_overall_rows_average_ranks_not_values() -> None:
    entries = [
        _e("a", "iou", 0.9), _e("b", "iou", 0.1),
        _e("a", "pointing_game", 0.2), _e("b", "pointing_game", 0.8),
        _e("a", "deletion", 0.1, direction="lower", family="faithfulness"),
        _e("b", "deletion", 0.3, direction="lower", family="faithfulness"),
        _e("a", "iou_t50", 0.0, ranking=False), _e("b", "iou_t50", 1.0, ranking=False),
        _e("a", "sparseness", 0.9, family="other", ranking=False),
        _e("b", "sparseness", 0.1, family="other", ranking=False),
    ]  # fmt: skip
    rows = {(r["explainer"], r["metric"]): r for r in leaderboard_rows(entries)}
    assert rows[("a", "rank:alignment")]["value"] == 1.5 and rows[("b", "rank:alignment")]["value"] == 1.5
    assert rows[("a", "rank:alignment")]["rank"] == rows[("b", "rank:alignment")]["rank"] == 1
    assert rows[("a", "rank:faithfulness")]["value"] == 1.0 and rows[("b", "rank:faithfulness")]["value"] == 2.0
    assert rows[("a", "rank:overall")]["value"] == 1.25 and rows[("b", "rank:overall")]["value"] == 1.75
    assert (rows[("a", "rank:overall")]["rank"], rows[("b", "rank:overall")]["rank"]) == (1, 2)
    assert rows[("b", "iou_t50")]["rank"] is None and rows[("b", "iou_t50")]["status"] == ""  # shown, not ranked
    assert rows[("a", "sparseness")]["rank"] is None and rows[("a", "sparseness")]["status"] == ""
    assert not any(m == "rank:other" for _, m in rows)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = list(np.random.default_rng(3).random(40))
    low, high = bootstrap_ci(values, seed=1)
    assert (low, high) == bootstrap_ci(values, seed=1)
    assert low < float(np.mean(values)) < high
    assert bootstrap_ci([0.25], seed=0) == (0.25, 0.25)
    records = [{"value": 1.0, "sample_id": "a"}, {"value": None, "na_reason": "empty mask", "sample_id": "b"}]
    s = summarise(records, seed=0, track="x")
    assert (s["mean"], s["n"], s["n_na"], s["na_reasons"]) == (1.0, 1, 1, {"empty mask": 1})
    assert s["samples"] == {"a": 1.0, "b": None}
    assert (s["ci_low"], s["ci_high"]) == (1.0, 1.0)  # one value: every resample that draws it gives it


def test_submitted_strings_are_inert_in_markdown_and_the_terminal() -> None:
    name = "<script>alert(1)</script>[/bold]|x"
    rows = leaderboard_rows([_e(name, "iou", 0.5), _e("b", "iou", 0.1)])
    board = Leaderboard(rows=rows, ranking_metrics={"t": {"iou"}})
    md = to_markdown(board)
    assert "<script>" not in md and "&lt;script&gt;" in md and "\\|x" in md
    console = Console(record=True, width=200)
    print_leaderboard(board, console)  # rich markup in a name must not crash or style the table
    assert "[/bold]|x" in console.export_text()


def test_per_sample_values_are_read_as_finite_floats_or_none() -> None:
    """A submission's samples of string ids and numbers or null are held as one float64 array
    (a board of 50 explainers holds 30 million of them: no Python object per value), read as a
    mapping equal to the dict; anything else is converted one value at a time: non-finite numbers
    and non-numbers become n/a, integers floats."""
    from pathlib import Path

    from xaibench.publish.leaderboard import entries_from_submissions
    from xaibench.publish.sample_values import SampleValues

    def board(samples: dict) -> dict:
        block = {"family": "alignment", "direction": "higher", "ranking": True, "mean": 0.5, "n": 3, "n_na": 1}
        return {"explainer": {"name": "x"}, "tracks": {"t": {"metrics": {"iou": {**block, "samples": samples}}}}}

    plain = {"a": 0.25, "b": None, "c": 1.0}
    (e,) = entries_from_submissions([(Path("x.json"), board(plain))])
    assert isinstance(e.samples, SampleValues) and e.samples == plain and dict(e.samples) == plain
    assert e.samples.array.tolist()[::2] == [0.25, 1.0] and e.samples["b"] is None and "c" in e.samples
    odd = {"a": float("nan"), "b": 2, "c": True, "d": "0.5", "e": float("inf"), "f": 0.5}
    (e,) = entries_from_submissions([(Path("x.json"), board(odd))])
    assert e.samples == {"a": None, "b": 2.0, "c": None, "d": None, "e": None, "f": 0.5}
    assert e.samples is not odd and isinstance(e.samples["b"], float)
