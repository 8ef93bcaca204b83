"""``xaibench select``: per image, the explainer setting with the best objective.

The PASTA paper's sample-level search (appendix E: GradCAM's target layer chosen per image). On
the samples that every setting scored, each image gets the setting with the best value in the
metric's direction (a tie goes to the setting listed first); the result compares the mean of
these per-image bests with the best single setting (the one with the best mean on the same
samples). ``gain`` is signed so that positive is better: per-image best minus best single for a
higher-is-better metric, the reverse for a lower-is-better one; it is never negative. Its 95 %
interval is a seeded bootstrap of the paired per-image gains. The choice is made with the very
scores it is judged by, so the gain is an upper bound of what a selector could reach.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.applications.objective import ObjectiveStatus
from xaibench.applications.settings import SettingScores
from xaibench.errors import XaibenchError
from xaibench.files import write_csv_atomic, write_json_atomic
from xaibench.safe_names import file_name
from xaibench.seeds import derive_seed
from xaibench.stats import bootstrap_ci

SELECT_SCHEMA = "xaibench.select/1"


@dataclass(frozen=True)
class Choice:
    """One image: the chosen setting, its value, and every setting's value."""

    sample_id: str
    setting: str
    value: float
    values: dict[str, float]


@dataclass(frozen=True)
class SelectResult:
    track: str
    objective: str
    direction: str
    seed: int
    settings: list[str]
    choices: list[Choice]
    means: dict[str, float]  # setting -> mean on the samples every setting scored
    best_single: str
    best_single_mean: float
    selected_mean: float
    gain: float  # >= 0; positive = the per-image choice is better (see the module doc)
    gain_low: float
    gain_high: float
    skipped: int  # samples not scored by every setting (left out)
    objective_label: str | None = None  # the objective's label (a PASTA checkpoint's)
    objective_status: str = ""  # "" when the objective is ranked on the track, else "not ranked: ..."

    @property
    def counts(self) -> dict[str, int]:
        """How many images chose each setting (every setting listed, in order)."""
        counted = Counter(c.setting for c in self.choices)
        return {s: counted.get(s, 0) for s in self.settings}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SELECT_SCHEMA,
            "track": self.track,
            "objective": self.objective,
            "direction": self.direction,
            "objective_label": self.objective_label,
            "objective_status": self.objective_status,
            "seed": self.seed,
            "settings": self.settings,
            "n": len(self.choices),
            "skipped": self.skipped,
            "means": self.means,
            "best_single": {"setting": self.best_single, "mean": self.best_single_mean},
            "selected_mean": self.selected_mean,
            "gain": {"value": self.gain, "ci_low": self.gain_low, "ci_high": self.gain_high},
            "counts": self.counts,
            "choices": [
                {"sample_id": c.sample_id, "setting": c.setting, "value": c.value, "values": c.values}
                for c in self.choices
            ],
        }


def select(scores: SettingScores, *, seed: int = 0, status: ObjectiveStatus | None = None) -> SelectResult:
    """The per-image choices of ``scores`` and the gain over the best single setting."""
    labels = [s.label for s in scores.settings]
    if len(labels) < 2:
        raise XaibenchError("select needs at least two explainer settings to choose from")
    common = [s for s in scores.sample_ids if all(scores.values[label].get(s) is not None for label in labels)]
    skipped = len(scores.sample_ids) - len(common)
    if not common:
        raise XaibenchError(
            f"--objective {scores.objective}: no sample of track {scores.track} has a value for every setting"
        )
    sign = 1.0 if scores.direction == "higher" else -1.0
    choices = []
    for sample in common:
        values = {label: float(scores.values[label][sample]) for label in labels}  # type: ignore[arg-type]
        chosen = labels[0]
        for label in labels[1:]:
            if scores.better(values[label], values[chosen]):
                chosen = label
        choices.append(Choice(sample, chosen, values[chosen], values))
    means = {label: float(np.mean([c.values[label] for c in choices])) for label in labels}
    best_single = labels[0]
    for label in labels[1:]:
        if scores.better(means[label], means[best_single]):
            best_single = label
    selected = float(np.mean([c.value for c in choices]))
    gains = [sign * (c.value - c.values[best_single]) for c in choices]
    low, high = bootstrap_ci(gains, derive_seed(seed, "select", scores.track, scores.objective))
    return SelectResult(
        track=scores.track,
        objective=scores.objective,
        direction=scores.direction,
        seed=seed,
        settings=labels,
        choices=choices,
        means=means,
        best_single=best_single,
        best_single_mean=means[best_single],
        selected_mean=selected,
        gain=float(np.mean(gains)),
        gain_low=low,
        gain_high=high,
        skipped=skipped,
        objective_label=(status or ObjectiveStatus()).label,
        objective_status=(status or ObjectiveStatus()).status,
    )


def select_paths(folder: Path, result: SelectResult) -> tuple[Path, Path]:
    """``<folder>/select-<track>-<objective>.csv`` (the choices) and ``.json`` (everything)."""
    stem = f"select-{file_name(result.track)}-{file_name(result.objective)}"
    return folder / f"{stem}.csv", folder / f"{stem}.json"


def write_select(result: SelectResult, folder: Path) -> list[Path]:
    """Write the per-image choices as CSV (sample, chosen setting, its value, then one column per
    setting) and the whole result, with the gain, as JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = select_paths(folder, result)
    fields = ["sample_id", "setting", "value", *result.settings, "objective_label", "objective_status"]
    status = {"objective_label": result.objective_label or "", "objective_status": result.objective_status}
    rows = [
        {"sample_id": c.sample_id, "setting": c.setting, "value": c.value, **c.values, **status} for c in result.choices
    ]
    write_csv_atomic(csv_path, fields, rows)
    write_json_atomic(json_path, result.to_json())
    return [csv_path, json_path]
