"""The board trusts only what it can check (one test per route an adversary used):

- a file's own ``verification`` block never shows as verified; only the board builder's own
  result for that exact content does;
- a metric ranks only among at least two methods (references left out): one file cannot make
  itself "#1 of 1" with a metric only it reports;
- each metric declares its value range (``Metric.value_range``, validated in one place) and
  values outside it are refused; a claimed mean is checked against the exact mean of the values,
  with a tolerance of the mean's own size (not the largest value's, which +-1e100 inflated);
- a ``created`` date in the future is refused, and two files for one explainer and parameters
  are an error naming both whatever their dates (a date no longer supersedes);
- explainer names are compared after NFKC normalisation and confusable folding: a look-alike of
  an installed explainer's name, or of another file's, is refused.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from xaibench.errors import XaibenchError
from xaibench.publish.board import build_board, build_leaderboard
from xaibench.publish.validation import validate_text
from xaibench.publish.writers import to_markdown

GRADCAM_CYRILLIC = "grad\u0441am"  # gradсam: U+0441 CYRILLIC SMALL LETTER ES for the c


def samples(values: list[float | None]) -> dict[str, float | None]:
    return {f"s{k:02d}": v for k, v in enumerate(values)}


def block(values: dict[str, float | None], *, mean: float | None = None, family: str = "alignment") -> dict[str, Any]:
    """A metric block whose counts follow from ``values``; ``mean`` (default: theirs) with a point interval."""
    kept = [v for v in values.values() if v is not None]
    mean = (math.fsum(kept) / len(kept) if kept else None) if mean is None else mean
    return {
        "id": "m",
        "version": "1.0.0",
        "family": family,
        "direction": "higher",
        "params": {},
        "ranking": True,
        "mean": mean,
        "ci_low": mean,
        "ci_high": mean,
        "n": len(kept),
        "n_na": len(values) - len(kept),
        "na_reasons": {"empty mask": len(values) - len(kept)} if len(kept) < len(values) else {},
        "samples": values,
    }


def sub(
    name: str,
    metrics: dict[str, dict[str, Any]],
    *,
    created: str = "2026-01-01T00:00:00+00:00",
    reference: bool = False,
) -> dict[str, Any]:
    """A valid ``xaibench.submission/1`` file of explainer ``name`` on track ``t``."""
    first = next(iter(metrics.values()))
    return {
        "schema": "xaibench.submission/1",
        "explainer": {"name": name, "version": "1.0.0", "params": {}, "reference_only": reference},
        "disclosure": {"tuned_on_benchmark": False, "reference_only": reference, "notes": ""},
        "created": created,
        "tracks": {
            "t": {
                "provenance": {
                    "dataset": {"name": "d", "revision": "r"},
                    "model": {"name": "m", "identity": "m@1"},
                    "n_samples": first["n"] + first["n_na"],
                },
                "metrics": metrics,
            }
        },
    }


def issues(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(i.pointer, i.message) for i in validate_text(json.dumps(data, indent=2), "x.json")]


def write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, indent=2))
    return path


GOOD = samples([0.8, 0.7, 0.9, 0.85, 0.75, 0.8, 0.9, 0.7, 0.8, 0.85])
POOR = samples([v - 0.5 for v in GOOD.values() if v is not None])
VERIFIED = {
    "verified_at": "2026-01-02T03:04:05+00:00",
    "checked": 5,
    "matched": 5,
    "tolerance": 1e-6,
    "passed": True,
    "xaibench": "0.1.0",
}


# ----------------------------------------------------------------------------- verification


def test_a_files_own_verification_block_never_shows_as_verified_only_the_builders_result_does() -> None:
    claimed = {**sub("gradient", {"iou": block(GOOD)}), "verification": dict(VERIFIED)}
    other = sub("random", {"iou": block(POOR)})
    board = build_board([(Path("gradient.json"), claimed), (Path("random.json"), other)])
    info = board.explainers["gradient"]
    assert info["verification"] is None  # the file's own word: not shown as verified
    assert "(verified)" not in to_markdown(board)

    from xaibench.publish.board import CLAIMED_FAILED, CLAIMED_VERIFIED, content_digest

    assert info["verification_claim"] == CLAIMED_VERIFIED == "claims verified (not checked here)"
    assert info["claimed_verification"] == VERIFIED
    failed = {**claimed, "verification": {**VERIFIED, "passed": False, "matched": 3}}
    assert build_board([(Path("gradient.json"), failed)]).explainers["gradient"]["verification_claim"] == CLAIMED_FAILED
    assert "verification_claim" not in board.explainers["random"]  # no block, no claim

    # the board builder's own result for this exact content (its digest ignores the block itself)
    mine = {**VERIFIED, "verified_at": "2026-02-01T00:00:00+00:00"}
    assert content_digest(claimed) == content_digest({k: v for k, v in claimed.items() if k != "verification"})
    trusted = build_board(
        [(Path("gradient.json"), claimed), (Path("random.json"), other)], verified={content_digest(claimed): mine}
    )
    assert trusted.explainers["gradient"]["verification"] == mine
    assert trusted.explainers["gradient"]["verification_claim"] is None
    assert "gradient (verified)" in to_markdown(trusted)
    # ... and for that content only: one value changed after the run is not verified
    edited = copy.deepcopy(claimed)
    edited["tracks"]["t"]["metrics"]["iou"]["samples"]["s00"] = 0.81
    again = build_board([(Path("gradient.json"), edited)], verified={content_digest(claimed): mine})
    assert again.explainers["gradient"]["verification"] is None


# ----------------------------------------------------------------------------- at least two methods


def test_a_metric_only_one_method_reports_ranks_nobody() -> None:
    mine = sub("gradient", {"iou": block(GOOD), "my_metric": block(GOOD)})
    other = sub("random", {"iou": block(POOR)})
    board = build_board([(Path("gradient.json"), mine), (Path("random.json"), other)])
    rows = {(r["explainer"], r["metric"]): r for r in board.rows}
    assert rows[("gradient", "my_metric")]["rank"] is None  # not "#1 of 1"

    from xaibench.publish.leaderboard import TOO_FEW_METHODS

    assert rows[("gradient", "my_metric")]["status"] == TOO_FEW_METHODS
    assert TOO_FEW_METHODS == "not ranked: fewer than 2 methods have values for this metric here"
    # the metric both report still ranks them, and the family and overall ranks come from it
    assert (rows[("gradient", "iou")]["rank"], rows[("random", "iou")]["rank"]) == (1, 2)
    assert (rows[("gradient", "rank:overall")]["rank"], rows[("random", "rank:overall")]["rank"]) == (1, 2)
    # a reference beside one method is no second method: nobody ranked
    alone = sub("gradient", {"iou": block(POOR)})
    oracle = sub("oracle", {"iou": block(GOOD)}, reference=True)
    rows = {
        (r["explainer"], r["metric"]): r for r in build_board([(Path("g.json"), alone), (Path("o.json"), oracle)]).rows
    }
    assert rows[("g", "iou")]["rank"] is None and rows[("g", "iou")]["status"] == TOO_FEW_METHODS
    assert rows[("g", "rank:overall")]["rank"] is None


# ----------------------------------------------------------------------------- value ranges and the mean


def test_values_outside_the_metrics_declared_range_are_refused() -> None:
    huge = samples([1e100, -1e100, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95])
    found = issues(sub("gradient", {"iou": block(huge, mean=0.95)}))
    assert found, "values of +-1e100 with a claimed mean of 0.95 validated"
    assert any(
        p == "/tracks/t/metrics/iou/samples/s00"
        and "per-sample value 1e+100 of 's00' is outside [0, 1], the value range of metric 'iou'" in m
        and "(2 values are)" in m
        for p, m in found
    ), found
    # a mean that is right for the values does not save them
    exact = issues(sub("gradient", {"iou": block(huge)}))
    assert [p for p, _ in exact] == ["/tracks/t/metrics/iou/samples/s00"], exact
    # a value just outside [0, 1] (beyond float rounding) is refused, one at the bound is not
    assert issues(sub("gradient", {"iou": block(samples([1.0, 0.0] * 5))})) == []
    assert issues(sub("gradient", {"iou": block(samples([1.0 + 1e-15, 0.0] * 5))})) == []
    over = issues(sub("gradient", {"iou": block(samples([1.5, 0.9] * 5))}))
    assert {p for p, _ in over} == {f"/tracks/t/metrics/iou/{k}" for k in ("mean", "ci_low", "ci_high", "samples/s00")}
    # a metric not installed here has no range to check
    assert issues(sub("gradient", {"not_installed_metric": block(samples([150.0, -3.0] * 5))})) == []

    from xaibench.publish.validation import range_notes

    assert range_notes(sub("gradient", {"iou": block(GOOD), "not_installed_metric": block(GOOD)})) == [
        "metric 'not_installed_metric': not installed here or declares no value range; its values' range is not checked"
    ]


def test_a_claimed_mean_is_checked_against_the_exact_mean_with_the_means_own_tolerance() -> None:
    huge = samples([1e100, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, -1e100, 0.95])
    found = issues(sub("gradient", {"not_installed_metric": block(huge, mean=0.95)}))
    assert ("/tracks/t/metrics/not_installed_metric/mean") in [p for p, _ in found], found
    assert any("mean 0.95 but its 10 per-sample values average 0.76" in m for _, m in found), found
    assert issues(sub("gradient", {"not_installed_metric": block(huge)})) == []  # 0.76: the exact mean
    # a mean written by numpy of ordinary values passes, at any size
    for scale in (1.0, 1e-6, 1e6):
        values = samples([scale * v for v in (0.1, 0.2, 0.3, 0.7, 0.11, 0.13, 0.17, 0.19, 0.23, 0.29)])
        import numpy as np

        numpy_mean = float(np.mean([v for v in values.values() if v is not None]))
        assert issues(sub("gradient", {"not_installed_metric": block(values, mean=numpy_mean)})) == [], scale


# ----------------------------------------------------------------------------- dates and duplicates


def test_a_created_date_in_the_future_is_refused() -> None:
    found = issues(sub("gradient", {"iou": block(GOOD)}, created="2099-01-01T00:00:00+00:00"))
    assert [p for p, _ in found] == ["/created"], found
    assert "created 2099-01-01T00:00:00+00:00 is in the future" in found[0][1]
    import datetime as dt

    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=12)).isoformat()
    assert issues(sub("gradient", {"iou": block(GOOD)}, created=soon)) == []  # clock skew of less than a day


def test_two_files_for_one_explainer_and_parameters_are_an_error_naming_both(tmp_path: Path) -> None:
    folder = tmp_path / "submissions"
    write(folder, "gradient.json", sub("gradient", {"iou": block(GOOD)}))
    write(folder, "gradient-2099.json", sub("gradient", {"iou": block(POOR)}, created="2099-01-01T00:00:00+00:00"))
    write(folder, "random.json", sub("random", {"iou": block(POOR)}))
    with pytest.raises(XaibenchError) as info:
        build_leaderboard(folder)
    message = str(info.value)
    assert "\n" not in message
    assert "two submissions for explainer 'gradient' with the same parameters" in message
    assert f"{folder / 'gradient-2099.json'} and {folder / 'gradient.json'}" in message


# ----------------------------------------------------------------------------- names


def test_a_lookalike_of_an_installed_explainers_name_is_refused() -> None:
    found = issues(sub(GRADCAM_CYRILLIC, {"iou": block(GOOD)}))
    assert found == [
        (
            "/explainer/name",
            "explainer name 'grad\\u0441am' looks like the installed explainer 'gradcam' but is not it "
            "(U+0441 CYRILLIC SMALL LETTER ES); use the explainer's own name",
        )
    ]
    for name in ("\uff47\uff52\uff41\uff44\uff43\uff41\uff4d", "grad\u200bcam", "GradCAM", "gr\u0430dient"):
        assert [p for p, _ in issues(sub(name, {"iou": block(GOOD)}))] == ["/explainer/name"], ascii(name)
    assert issues(sub("gradcam", {"iou": block(GOOD)})) == []
    assert issues(sub("my-own-method", {"iou": block(GOOD)})) == []


def test_lookalike_names_on_one_board_are_an_error_naming_both() -> None:
    a = sub("mymethod", {"iou": block(GOOD)})
    b = sub("mym\u0435thod", {"iou": block(POOR)})  # U+0435 CYRILLIC SMALL LETTER IE
    with pytest.raises(XaibenchError) as info:
        build_board([(Path("s/mymethod.json"), a), (Path("s/mymethod2.json"), b)])
    message = str(info.value)
    assert "\n" not in message
    assert "explainer names 'mymethod' (s/mymethod.json) and 'mym\\u0435thod' (s/mymethod2.json) look alike" in message

    from xaibench.publish.identity import fold

    assert (
        fold("mym\u0435thod")
        == fold("MyMethod")
        == fold("\uff4d\uff59\uff4d\uff45\uff54\uff48\uff4f\uff44")
        == "mymethod"
    )
    assert fold("my-method") != fold("mymethod")


# ----------------------------------------------------------------------------- the metadata


def test_a_metrics_value_range_is_metadata_checked_in_one_place() -> None:
    from xaibench.api import Metric, metric_value_range, outside_range, value_range_problem
    from xaibench.plugins.manager import get_registry

    assert Metric.value_range == (-math.inf, math.inf)
    assert value_range_problem((0.0, 1.0)) is None and value_range_problem((-math.inf, 1)) is None
    for bad in ((1.0, 0.0), (0.0, math.nan), (True, 2), ("0", "1"), (0.0,), 1.0):
        assert value_range_problem(bad) is not None, bad
    assert outside_range(1.5, (0.0, 1.0)) and not outside_range(1.0 + 1e-12, (0.0, 1.0))
    assert outside_range(math.nan, (-math.inf, math.inf))
    registry = get_registry()
    builtin = [e.cls for e in registry.entries("metric") if e.info.distribution == "xaibench"]
    assert builtin and all(metric_value_range(cls) is not None for cls in builtin)
    ranges = {cls.name: metric_value_range(cls) for cls in builtin}
    assert ranges["iou"] == ranges["deletion"] == ranges["insertion"] == ranges["pointing_game"] == (0.0, 1.0)
    assert ranges["model_randomisation"] == ranges["faithfulness_correlation"] == (-1.0, 1.0)
    assert ranges["average_drop"] == (0.0, 100.0) and ranges["max_sensitivity"] == (0.0, math.inf)
