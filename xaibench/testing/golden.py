"""Leaderboards compared across machines: the golden test's and the CPU-kernel bench's comparator.

DESIGN 6: the same seed gives the same ranks on any x86-64 CPU and values within a tolerance
measured across CPU kernels. Two leaderboards of the same run made with different kernels
(``ATEN_CPU_CAPABILITY=default``, ``avx2`` or the machine's best) are compared so:

- values and interval bounds within a relative tolerance measured per row: each golden row
  records ``rtol``, :data:`MARGIN` times the largest relative difference of its value and bounds
  between runs under ``ATEN_CPU_CAPABILITY=default``, ``avx2`` and the machine's best, and at
  least :data:`FLOOR_RTOL` (plus :data:`KERNEL_ATOL` absolute, for values at 0). Most rows move
  by less than 1e-5; maps made by gradients through ReLU kinks move most (a pre-activation that
  rounds to the other side of 0 changes the path), so one tolerance for all would either fail
  there or hide changes everywhere else;
- counts, statuses and flags exactly;
- ranks exactly, except where a paired interval's endpoint lies within the two rows'
  tolerances of 0 (:func:`fragile_ranks`): such a tie or win is decided by float rounding, so the
  explainers of that pair may change rank on that metric, and on its family's and the overall
  rank of the track.

:func:`run_default_suite` runs ``xaibench run --suite default --explainer default`` in a
subprocess under a given ``ATEN_CPU_CAPABILITY`` (the variable is read when torch starts).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xaibench.publish.leaderboard import entries_from_submissions, paired_table
from xaibench.publish.submission import load_submissions

__all__ = [
    "FIELDS",
    "FLOOR_RTOL",
    "KERNEL_ATOL",
    "MARGIN",
    "NUMBERS",
    "Difference",
    "compare_rows",
    "fragile_ranks",
    "leaderboard_rows",
    "measure_golden",
    "model_identities",
    "relative_difference",
    "row_spreads",
    "run_default_suite",
]

FIELDS = ("value", "ci_low", "ci_high", "n", "n_na", "rank", "status", "flags")
NUMBERS = ("value", "ci_low", "ci_high")

FLOOR_RTOL = 1e-3
"""The least relative tolerance of a row: a row that did not move between kernels here may move on
another CPU, whose BLAS and convolution libraries pick their own code paths (measured here: 598 of
606 rows moved by less than 1e-4, pasta scores by up to 2.3e-4)."""
MARGIN = 3.0
"""A row's tolerance is this many times the largest difference measured for it across kernels."""
KERNEL_ATOL = 1e-9
"""Absolute floor for values at or near 0, where a relative difference means nothing."""


def relative_difference(a: float, b: float) -> float:
    """``|a - b| / max(|a|, |b|)``; 0 when both are 0 (dimensionless, lower is closer)."""
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def close(a: Any, b: Any, rtol: float = FLOOR_RTOL, atol: float = KERNEL_ATOL) -> bool:
    """Numbers within ``rtol`` relative or ``atol`` absolute; anything else equal."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return bool(a == b)


def row_spreads(runs: list[Mapping[str, Mapping[str, Any]]]) -> dict[str, float]:
    """Row key -> the largest relative difference of its value and bounds between any two runs."""
    spreads: dict[str, float] = {}
    for key in runs[0]:
        worst = 0.0
        for name in NUMBERS:
            values = [r[key].get(name) for r in runs if key in r]
            numbers = [v for v in values if isinstance(v, float)]
            if len(numbers) > 1:
                worst = max(worst, max(relative_difference(x, y) for x in numbers for y in numbers))
        spreads[key] = worst
    return spreads


def leaderboard_rows(leaderboard: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``track/explainer/metric`` -> the compared fields of one leaderboard row."""
    return {f"{r['track']}/{r['explainer']}/{r['metric']}": {k: r.get(k) for k in FIELDS} for r in leaderboard["rows"]}


def model_identities(leaderboard: Mapping[str, Any]) -> dict[str, str]:
    """Track -> the identity of the model its records were made with."""
    return {name: str(t["model"]["identity"]) for name, t in sorted(leaderboard.get("tracks", {}).items())}


def fragile_ranks(submissions: Path, tolerances: Mapping[str, float], atol: float = KERNEL_ATOL) -> set[str]:
    """Row keys whose rank float rounding may decide.

    For each paired comparison of a ranking metric whose interval endpoint lies within the two
    rows' tolerances of 0 (``tolerances``: row key -> relative tolerance, :data:`FLOOR_RTOL` where
    missing, each scaled by the larger absolute per-sample value of its row), the two explainers'
    rows on that metric, on its family's rank and on the track's overall rank (the comparisons of
    :func:`~xaibench.publish.leaderboard.paired_table`, as ranked). A comparison whose
    differences are all exactly 0 is a tie that rounding cannot undo, not a fragile one."""
    entries = [e for e in entries_from_submissions(load_submissions(submissions)) if e.ranking]
    by_cell: dict[tuple[str, str], list[Any]] = {}
    for e in entries:
        by_cell.setdefault((e.track, e.metric), []).append(e)
    fragile: set[str] = set()
    for (track, metric), group in by_cell.items():
        group.sort(key=lambda e: e.explainer)
        table = paired_table([e for e in group if e.samples is not None])
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if a.samples is None or b.samples is None:
                    continue
                c = table.comparison(a.explainer, b.explainer)
                if c.low is None or c.high is None or (c.low == 0.0 and c.high == 0.0):
                    continue
                margin = atol
                for e in (a, b):
                    scale = max((abs(v) for v in (e.samples or {}).values() if v is not None), default=0.0)
                    margin += tolerances.get(f"{track}/{e.explainer}/{metric}", FLOOR_RTOL) * scale
                if min(abs(c.low), abs(c.high)) <= margin:
                    for x in (a.explainer, b.explainer):
                        fragile.update(
                            {f"{track}/{x}/{metric}", f"{track}/{x}/rank:{a.family}", f"{track}/{x}/rank:overall"}
                        )
    return fragile


@dataclass(frozen=True)
class Difference:
    """One row that differs beyond what kernels explain."""

    key: str
    field: str
    expected: Any
    got: Any


def compare_rows(
    expected: Mapping[str, Mapping[str, Any]],
    got: Mapping[str, Mapping[str, Any]],
    *,
    fragile: set[str] = frozenset(),  # type: ignore[assignment]
    atol: float = KERNEL_ATOL,
) -> list[Difference]:
    """The differences of two leaderboards' rows (same keys expected) beyond each expected row's
    ``rtol`` (:data:`FLOOR_RTOL` where it has none); ranks of ``fragile`` rows are not compared,
    nor the mean ranks of their family and overall rows."""
    out: list[Difference] = []
    for key in sorted(set(expected) | set(got)):
        if key not in expected or key not in got:
            out.append(Difference(key, "row", expected.get(key), got.get(key)))
            continue
        rtol = float(expected[key].get("rtol", FLOOR_RTOL))
        for name in FIELDS:
            a, b = expected[key].get(name), got[key].get(name)
            if key in fragile and (name == "rank" or (name == "value" and "/rank:" in key)):
                continue
            if name in NUMBERS:
                if not close(a, b, rtol, atol):
                    out.append(Difference(key, name, a, b))
            elif a != b:
                out.append(Difference(key, name, a, b))
    return out


def run_default_suite(
    out: Path, seed: int, capability: str | None = None, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``xaibench run --suite default --explainer default --seed SEED`` in a subprocess, with
    ``ATEN_CPU_CAPABILITY`` set to ``capability`` (``None``: unset, the machine's best). Writes
    ``out/work``, ``out/sub`` and ``out/lb``; returns the leaderboard (``leaderboard.json``)."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["COLUMNS"] = "200"
    args = ["run", "--suite", "default", "--explainer", "default", "--seed", str(seed), "--quiet"]
    args += ["--workdir", str(out / "work"), "--submissions", str(out / "sub"), "--leaderboard-dir", str(out / "lb")]
    code = "import sys; from xaibench.cli import main; sys.argv[0] = 'xaibench'; main()"
    done = subprocess.run([sys.executable, "-c", code, *args, *extra], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"xaibench run (ATEN_CPU_CAPABILITY={capability}) failed:\n{done.stdout}\n{done.stderr}")
    return json.loads((out / "lb" / "leaderboard.json").read_text(encoding="utf-8"))


CAPABILITIES: tuple[str | None, ...] = ("default", "avx2", None)
"""The kernels a golden row's tolerance is measured across (None: unset, the machine's best)."""


def measure_golden(
    out: Path, seeds: tuple[int, ...] = (0, 1), capabilities: tuple[str | None, ...] = CAPABILITIES
) -> dict[str, Any]:
    """Run the default suite for each seed under each capability (subprocesses, in ``out``) and
    return the golden data: ``{"models": {track: identity}, "tolerance": {...}, "<seed>": {row key:
    fields + rtol}}``; each seed's rows are the last capability's (the machine's best)."""
    golden: dict[str, Any] = {}
    largest = (0.0, "")
    for seed in seeds:
        runs = []
        for capability in capabilities:
            board = run_default_suite(out / f"{seed}-{capability or 'best'}", seed, capability)
            identities = model_identities(board)
            if golden.setdefault("models", identities) != identities:
                raise RuntimeError(f"ATEN_CPU_CAPABILITY={capability} ran other models: {identities}")
            runs.append(leaderboard_rows(board))
        spreads = row_spreads(runs)
        rows = {}
        for key, fields in runs[-1].items():
            rows[key] = {**fields, "rtol": max(FLOOR_RTOL, MARGIN * spreads[key])}
            largest = max(largest, (spreads[key], f"seed {seed} {key}"))
        golden[str(seed)] = rows
    golden["tolerance"] = {
        "capabilities": [c or "best" for c in capabilities],
        "margin": MARGIN,
        "floor": FLOOR_RTOL,
        "largest_spread": largest[0],
        "largest_spread_row": largest[1],
    }
    return golden


def write_golden(path: Path, seeds: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    """Measure the golden data (:func:`measure_golden`) and write the golden file. Regenerate it
    only for a deliberate change of behaviour, and say so in the commit."""
    import tempfile

    from xaibench.files import write_text_atomic

    with tempfile.TemporaryDirectory() as tmp:
        golden = measure_golden(Path(tmp), seeds)
    write_text_atomic(path, json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return golden


RANK_FIELDS = ("rank", "status", "flags")
"""What a change of the ranking rule alone may change in a row (and a ``rank:`` row's value, a mean rank)."""
INTERVAL_FIELDS = ("ci_low", "ci_high")
"""What a change of the interval rule alone may change in a row (``--intervals``)."""


def rerank_golden(
    path: Path, boards: Mapping[str, Mapping[str, Any]], fields: tuple[str, ...] = RANK_FIELDS
) -> dict[str, list[Difference]]:
    """Take a deliberate change of the ranking rule into the golden file at ``path``: for each seed
    (``boards``: seed -> a leaderboard of that seed's default-suite run, the machine's best
    kernels), the ranks, statuses and flags of its rows, and the values of its ``rank:`` rows,
    where they differ. The other fields must match within each row's ``rtol`` (else
    ``RuntimeError``: that is not a ranking change), and the tolerances measured across kernels
    are kept. Returns seed -> the changed fields (expected: the former value). Cheaper than
    :func:`write_golden` (one run per seed, not one per seed and kernel). ``fields``:
    :data:`INTERVAL_FIELDS` takes a change of the interval rule instead (the interval bounds only)."""
    from xaibench.files import write_text_atomic

    golden = json.loads(path.read_text(encoding="utf-8"))
    changed: dict[str, list[Difference]] = {}
    for seed, board in boards.items():
        rows, got = golden[seed], leaderboard_rows(board)
        diffs = compare_rows(rows, got)
        ranks = fields == RANK_FIELDS
        other = [d for d in diffs if not (d.field in fields or (ranks and d.field == "value" and "/rank:" in d.key))]
        if other:
            raise RuntimeError(f"seed {seed}: {len(other)} changes beyond {', '.join(fields)}, e.g. {other[:3]}")
        for d in diffs:
            rows[d.key][d.field] = d.got
        if fields == INTERVAL_FIELDS:  # every bound takes the new rule's value, not only those beyond rtol:
            for key, row in rows.items():  # a bound left within rtol of its old value would add that
                for name in fields:  # difference to the kernels' on other machines
                    if key in got and name in got[key]:
                        row[name] = got[key][name]
        changed[seed] = diffs
    write_text_atomic(path, json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return changed


def _rerank_main(
    path: Path, seeds: tuple[int, ...] = (0, 1), fields: tuple[str, ...] = RANK_FIELDS
) -> None:  # pragma: no cover - deliberate
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        boards = {str(seed): run_default_suite(Path(tmp) / str(seed), seed) for seed in seeds}
    for seed, diffs in rerank_golden(path, boards, fields).items():
        for d in diffs:
            print(f"seed {seed} {d.key} {d.field}: {d.expected} -> {d.got}")


if __name__ == "__main__":  # pragma: no cover - regenerating the golden file is deliberate
    # python -m xaibench.testing.golden [FILE]: measure everything again (six runs);
    # python -m xaibench.testing.golden --ranks [FILE]: a ranking rule changed (one run per seed)
    # python -m xaibench.testing.golden --intervals [FILE]: the interval rule changed (likewise)
    args = sys.argv[1:]
    ranks, intervals = "--ranks" in args, "--intervals" in args
    args = [a for a in args if a not in ("--ranks", "--intervals")]
    target = Path(args[0]) if args else Path("tests/golden/default-suite.json")
    if ranks or intervals:
        _rerank_main(target, fields=INTERVAL_FIELDS if intervals else RANK_FIELDS)
    else:
        write_golden(target)
