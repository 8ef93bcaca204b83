"""The PASTA paper's per-technique tables, read in place from the shared data folder.

The folder ``pasta-paper/`` (see its ``README.md``) holds two CSV files transcribed from the
paper (Kazmierczak et al.):

- ``human_ratings_by_technique.csv``: per (technique, backbone), the mean over images of the mode
  of 5 human ratings (1..5 stars), grouped as ``fidelity_q1``, ``complexity_q2_q3``,
  ``objectivity_q4``, ``robustness_q5_q6`` (Q1..Q4 higher is better; Q5/Q6 measure how much the
  explanation changed under perturbation, lower is better);
- ``metrics_by_technique.csv``: per (technique, backbone), the paper's automatic metrics, mean
  and std over images: ROAD faithfulness (higher is better), MaxSensitivity under Gaussian noise
  (higher is worse) and Sparseness (Gini index, higher is sparser).

Where the folder is (:func:`find_paper_dir`): ``XAIBENCH_DATA_PASTA_PAPER`` (the folder itself),
else ``pasta-paper`` (or ``pasta-paper-*``) inside a directory of ``XAIBENCH_DATA_DIR``, the same
variable ``xaibench run --data-dir DIR`` sets for the real datasets. Bad files raise
:class:`~xaibench.errors.XaibenchError` with one line naming the file, line and column.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from xaibench.errors import XaibenchError

__all__ = [
    "HUMAN_COLUMNS",
    "METRICS_FILE",
    "PAPER_DIR_ENV",
    "PAPER_FOLDER",
    "PAPER_METRICS",
    "RATINGS_FILE",
    "PaperMetric",
    "PaperTables",
    "TechniqueRow",
    "find_paper_dir",
    "load_paper_tables",
]

PAPER_FOLDER = "pasta-paper"
PAPER_DIR_ENV = "XAIBENCH_DATA_PASTA_PAPER"
DATA_DIR_ENV = "XAIBENCH_DATA_DIR"
RATINGS_FILE = "human_ratings_by_technique.csv"
METRICS_FILE = "metrics_by_technique.csv"
README_FILE = "README.md"

HUMAN_COLUMNS: dict[str, tuple[str, str]] = {
    "fidelity_q1": ("fidelity (Q1)", "higher"),
    "complexity_q2_q3": ("complexity (Q2, Q3)", "higher"),
    "objectivity_q4": ("objectivity (Q4)", "higher"),
    "robustness_q5_q6": ("robustness (Q5, Q6)", "lower"),
}
"""Ratings column -> (label, direction): Q5/Q6 rate how much the explanation changed, lower is better."""


@dataclass(frozen=True)
class PaperMetric:
    """One automatic metric of the paper's table and the xaibench metric that measures the same thing."""

    column: str  # the CSV column prefix: ``<column>_mean`` and ``<column>_std``
    label: str
    metric: str  # the xaibench metric id
    direction: str  # "higher" or "lower" is better


PAPER_METRICS: tuple[PaperMetric, ...] = (
    PaperMetric("faithfulness_road", "faithfulness (ROAD)", "road_faithfulness", "higher"),
    PaperMetric("robustness_gaussian", "MaxSensitivity (Gaussian noise)", "max_sensitivity", "lower"),
    PaperMetric("sparseness", "Sparseness (Gini)", "sparseness", "higher"),
)

_TABLE1 = re.compile(
    r"ROAD faithfulness and human Q1 scores:\s*Pearson\s*(-?\d+(?:\.\d+)?),\s*Spearman\s*(-?\d+(?:\.\d+)?)", re.I
)


@dataclass(frozen=True)
class TechniqueRow:
    """One (technique, backbone) of the paper: its human ratings and/or its automatic metrics."""

    technique: str
    backbone: str
    explanation_type: str = ""  # "saliency" or "concepts" ("" when only the metrics table has the row)
    human: dict[str, float] = field(default_factory=dict)  # HUMAN_COLUMNS key -> mean rating (1..5)
    metrics: dict[str, tuple[float, float]] = field(default_factory=dict)  # PaperMetric.column -> (mean, std)
    note: str = ""  # the transcription note, if any


@dataclass(frozen=True)
class PaperTables:
    """Both tables joined on (technique, backbone), in the ratings table's order (metrics-only rows last)."""

    rows: list[TechniqueRow]
    digests: dict[str, str]  # file name -> first 12 hex digits of its sha256
    table1: dict[str, float] = field(default_factory=dict)
    """The paper's ROAD faithfulness vs human Q1 correlation as the README records it: ``pearson``, ``spearman``."""

    def joined(self) -> list[TechniqueRow]:
        """The rows that have both the human ratings and every automatic metric."""
        need = {m.column for m in PAPER_METRICS}
        return [r for r in self.rows if r.human and need <= set(r.metrics)]


def find_paper_dir() -> Path | None:
    """The ``pasta-paper`` folder from the environment (module docstring), or ``None`` when not set up.

    An explicit ``XAIBENCH_DATA_PASTA_PAPER`` that is not a folder is an error, never skipped.
    """
    explicit = os.environ.get(PAPER_DIR_ENV, "").strip()
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_dir():
            raise XaibenchError(f"{PAPER_DIR_ENV}={explicit}: no such folder")
        return path
    for root in (Path(p).expanduser() for p in os.environ.get(DATA_DIR_ENV, "").split(os.pathsep) if p.strip()):
        candidates = [root / PAPER_FOLDER, *sorted(root.glob(PAPER_FOLDER + "-*"))]
        for candidate in candidates:
            if (candidate / RATINGS_FILE).is_file():
                return candidate
    return None


def load_paper_tables(folder: Path) -> PaperTables:
    """Read ``folder``'s two tables (and the Table 1 figure from its README, when there)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise XaibenchError(f"{folder}: no such folder (expected the PASTA paper tables, {RATINGS_FILE})")
    ratings = _read(folder / RATINGS_FILE, ("technique", "backbone", "explanation_type", *HUMAN_COLUMNS))
    metric_columns = [f"{m.column}_{s}" for m in PAPER_METRICS for s in ("mean", "std")]
    metrics_path = folder / METRICS_FILE
    metrics = _read(metrics_path, ("technique", "backbone", *metric_columns)) if metrics_path.is_file() else []
    by_key: dict[tuple[str, str], TechniqueRow] = {}
    for line, raw in ratings:
        key = (raw["technique"], raw["backbone"])
        if key in by_key:
            raise XaibenchError(f"{folder / RATINGS_FILE}:{line}: {key[0]} ({key[1]}) appears twice")
        human = {c: _number(folder / RATINGS_FILE, line, c, raw[c], 1.0, 5.0) for c in HUMAN_COLUMNS}
        by_key[key] = TechniqueRow(
            key[0], key[1], raw["explanation_type"], human, {}, raw.get("transcription_note", "")
        )
    seen: set[tuple[str, str]] = set()
    for line, raw in metrics:
        key = (raw["technique"], raw["backbone"])
        if key in seen:
            raise XaibenchError(f"{metrics_path}:{line}: {key[0]} ({key[1]}) appears twice")
        seen.add(key)
        values = {
            m.column: (
                _number(metrics_path, line, f"{m.column}_mean", raw[f"{m.column}_mean"]),
                _number(metrics_path, line, f"{m.column}_std", raw[f"{m.column}_std"]),
            )
            for m in PAPER_METRICS
        }
        old = by_key.get(key, TechniqueRow(key[0], key[1]))
        by_key[key] = TechniqueRow(old.technique, old.backbone, old.explanation_type, old.human, values, old.note)
    digests = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12]
        for p in (folder / RATINGS_FILE, metrics_path)
        if p.is_file()
    }
    return PaperTables(rows=list(by_key.values()), digests=digests, table1=_table1(folder / README_FILE))


def _read(path: Path, need: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise XaibenchError(f"{path}: not found")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in need if c not in (reader.fieldnames or [])]
            if missing:
                raise XaibenchError(f"{path}: missing column(s) {', '.join(missing)}")
            rows = [(n, {k: (v or "").strip() for k, v in raw.items() if k}) for n, raw in enumerate(reader, start=2)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise XaibenchError(f"{path}: not a readable CSV file ({exc})") from None
    if not rows:
        raise XaibenchError(f"{path}: no rows")
    for n, raw in rows:
        if not raw.get("technique") or not raw.get("backbone"):
            raise XaibenchError(f"{path}:{n}: technique and backbone must not be empty")
    return rows


def _number(
    path: Path, line: int, column: str, text: str, low: float | None = None, high: float | None = None
) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value):
        raise XaibenchError(f"{path}:{line}: {column} is not a number: {text!r}")
    if low is not None and high is not None and not low <= value <= high:
        raise XaibenchError(f"{path}:{line}: {column} = {text} is outside {low:g}..{high:g}")
    return value


def _table1(readme: Path) -> dict[str, float]:
    if not readme.is_file():
        return {}
    match = _TABLE1.search(readme.read_text(encoding="utf-8", errors="replace"))
    return {"pearson": float(match.group(1)), "spearman": float(match.group(2))} if match else {}
