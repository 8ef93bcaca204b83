"""``xaibench tune``: the explainer setting of a parameter grid with the best mean objective.

Each setting's mean objective on the track comes with a seeded 95 % bootstrap interval
(:func:`xaibench.stats.bootstrap_ci`) and a paired difference to the best setting on the samples
both scored (with its own interval: a difference whose interval holds 0 is not a clear win).
The best setting is the one with the best mean in the metric's direction; a tie goes to the
setting listed first. The PASTA paper's appendix E tunes LIME's kernel width this way.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xaibench.applications.objective import ObjectiveStatus
from xaibench.applications.settings import Setting, SettingScores, run_settings
from xaibench.errors import XaibenchError
from xaibench.files import write_csv_atomic, write_json_atomic
from xaibench.safe_names import file_name
from xaibench.seeds import derive_seed
from xaibench.stats import bootstrap_ci

if TYPE_CHECKING:
    from xaibench.plugins.manager import Registry
    from xaibench.runner import RunConfig

TUNE_SCHEMA = "xaibench.tune/1"
CSV_FIELDS = (
    "setting",
    "params",
    "mean",
    "ci_low",
    "ci_high",
    "n",
    "n_na",
    "delta",
    "delta_low",
    "delta_high",
    "best",
    "objective_label",
    "objective_status",
)


@dataclass(frozen=True)
class TuneRow:
    """One setting: its mean objective with the 95 % interval, counts, and the paired difference
    ``delta`` = this setting's mean minus the best's, on the samples both scored (0 for the best)."""

    setting: str
    params: dict[str, Any]
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_na: int
    delta: float | None
    delta_low: float | None
    delta_high: float | None
    best: bool


@dataclass(frozen=True)
class TuneResult:
    """The whole search: one row per setting in grid order, and the best setting."""

    explainer: str
    track: str
    objective: str
    direction: str
    seed: int
    rows: list[TuneRow]
    best: Setting
    best_params: dict[str, Any]  # the best setting's full resolved parameters
    objective_label: str | None = None  # the objective's label (a PASTA checkpoint's)
    objective_status: str = ""  # "" when the objective is ranked on the track, else "not ranked: ..."

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": TUNE_SCHEMA,
            "explainer": self.explainer,
            "track": self.track,
            "objective": self.objective,
            "direction": self.direction,
            "objective_label": self.objective_label,
            "objective_status": self.objective_status,
            "seed": self.seed,
            "best": {"setting": self.best.label, "params": dict(self.best.params), "resolved": self.best_params},
            "rows": [asdict(r) for r in self.rows],
        }


def _mean_ci(values: list[float], seed: int) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    low, high = bootstrap_ci(values, seed)
    return float(np.mean(values)), low, high


def tune(scores: SettingScores, *, seed: int = 0, status: ObjectiveStatus | None = None) -> TuneResult:
    """The table of every setting of ``scores`` and the best one (see the module doc)."""
    means: dict[str, float] = {}
    cells: dict[str, tuple[float | None, float | None, float | None]] = {}
    for setting in scores.settings:
        per = scores.values[setting.label]
        values = [float(v) for v in per.values() if v is not None]
        cells[setting.label] = _mean_ci(
            values, derive_seed(seed, "tune", scores.track, scores.objective, setting.label)
        )
        mean = cells[setting.label][0]
        if mean is not None and not math.isnan(mean):
            means[setting.label] = mean
    best_label = None
    for setting in scores.settings:  # grid order: a tie keeps the first
        mean = means.get(setting.label)
        if mean is not None and (best_label is None or scores.better(mean, means[best_label])):
            best_label = setting.label
    assert best_label is not None  # score_settings guarantees at least one value
    best = next(s for s in scores.settings if s.label == best_label)
    best_values = scores.values[best_label]
    rows = []
    for setting in scores.settings:
        per = scores.values[setting.label]
        shared = [s for s in scores.sample_ids if per.get(s) is not None and best_values.get(s) is not None]
        diffs = [float(per[s]) - float(best_values[s]) for s in shared]  # type: ignore[arg-type]
        delta = _mean_ci(diffs, derive_seed(seed, "tune-delta", scores.track, scores.objective, setting.label))
        mean, low, high = cells[setting.label]
        rows.append(
            TuneRow(
                setting=setting.label,
                params=dict(setting.params),
                mean=mean,
                ci_low=low,
                ci_high=high,
                n=sum(v is not None for v in per.values()),
                n_na=sum(v is None for v in per.values()),
                delta=delta[0],
                delta_low=delta[1],
                delta_high=delta[2],
                best=setting.label == best_label,
            )
        )
    return TuneResult(
        explainer=best.explainer,
        track=scores.track,
        objective=scores.objective,
        direction=scores.direction,
        seed=seed,
        rows=rows,
        best=best,
        best_params=dict(scores.params[best_label]),
        objective_label=(status or ObjectiveStatus()).label,
        objective_status=(status or ObjectiveStatus()).status,
    )


def tune_paths(folder: Path, result: TuneResult) -> tuple[Path, Path]:
    """``<folder>/tune-<explainer>-<track>-<objective>.csv`` and ``.json``."""
    stem = f"tune-{file_name(result.explainer)}-{file_name(result.track)}-{file_name(result.objective)}"
    return folder / f"{stem}.csv", folder / f"{stem}.json"


def write_tune(result: TuneResult, folder: Path) -> list[Path]:
    """Write the table as CSV (one row per setting; ``params`` as JSON) and the whole result as JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = tune_paths(folder, result)
    rows = []
    for row in result.rows:
        data = asdict(row)
        data["params"] = json.dumps(data["params"], sort_keys=True)
        data["objective_label"] = result.objective_label or ""
        data["objective_status"] = result.objective_status
        rows.append(data)
    write_csv_atomic(csv_path, CSV_FIELDS, rows)
    write_json_atomic(json_path, result.to_json())
    return [csv_path, json_path]


def submit_best(
    result: TuneResult,
    status: ObjectiveStatus,
    config: RunConfig,
    registry: Registry,
    submissions: Path,
    *,
    allow_unranked: bool = False,
) -> list[Path]:
    """``xaibench tune --submit``: run the best setting of ``result`` on every track of the search's
    suite (``config``, the search's configuration, without its track and metric), marked
    ``tuned_on_benchmark``, and write its submission to ``submissions``; returns the files
    written. An objective not ranked on the track (``status``) is refused, with one line, unless
    ``allow_unranked``."""
    from xaibench.publish.submission import write_run

    if not status.ranked and not allow_unranked:
        raise XaibenchError(
            f"--submit: --objective {result.objective} is {status.status} on track {result.track}; "
            "pass --allow-unranked-objective to submit its best setting anyway"
        )
    run_config = dataclasses.replace(config, tracks=None, metrics=None)
    run_result = run_settings([result.best], run_config, registry, tuned=True, keep_names=True)
    return write_run(run_result, registry, submissions)
