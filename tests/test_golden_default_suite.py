"""Golden values: the default suite's leaderboard, for two seeds and across CPU kernels.

The golden file (``tests/golden/default-suite.json``) holds, per seed, every leaderboard row of
``xaibench run --suite default --explainer default --seed S`` and, under ``models``, the identity
of each track's model: the shipped reference weights (``xaibench/data/models/``), so every machine
runs the same models (DESIGN 6). It is written by ``python -m xaibench.testing.golden``; regenerate
it only for a deliberate change of behaviour, and say so in the commit. A change of the ranking
rule alone takes ``python -m xaibench.testing.golden --ranks`` (one run per seed; the ranks,
statuses, flags and mean ranks change, the tolerances measured across kernels stay).

Each run is compared with :func:`xaibench.testing.golden.compare_rows`: values and interval
bounds within each row's ``rtol``, measured across CPU kernels when the file was written (three
times the row's largest relative difference between ``ATEN_CPU_CAPABILITY=default``, ``avx2`` and
the machine's best, at least 1e-3; ``bench/bench_cpu_kernels.py`` prints the measurement),
counts, statuses and flags exactly, ranks exactly except where a paired interval's endpoint lies
within the rows' tolerances of 0. The runs go through a subprocess so
that ``ATEN_CPU_CAPABILITY`` (read when torch starts) takes effect: seed 0 also runs with
``default`` (no vector kernels) and ``avx2``, so ranks identical to the golden file's are ranks
identical across kernels.

The robustness family (DESIGN 3b) was added to the default suite additively: the golden rows of
both seeds are the former rows, unchanged (their digests are recorded below, taken from the file
before the change), plus the robustness rows (its metrics' rows and ``rank:robustness``) on the
two shapes tracks; :func:`test_golden_rows_are_the_former_rows_plus_robustness_rows` checks it
without running anything.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from xaibench.metrics.robustness import ROBUSTNESS_METRICS
from xaibench.testing.golden import compare_rows, fragile_ranks, leaderboard_rows, model_identities, run_default_suite

GOLDEN = Path(__file__).parent / "golden" / "default-suite.json"
BEFORE_ROBUSTNESS = {
    "0": "0acda4752ea9ed678333b66488c93d27fafbce2d84d8b7a0fbacc43e6e2a30c6",
    "1": "4895d92b43ec52ae49831934e0657f3dab4567348bd54eeb42610fc1392e65ff",
    "models": "76a19fcacd0adbd549dddef2c4ec10d0c7f9d643e4c0e064843715d70aeb7eeb",
}
"""sha256 of ``json.dumps(rows, sort_keys=True)`` of each seed's rows (and of ``models``) in the golden
file before the robustness family joined the default suite (606 rows per seed)."""
ROBUSTNESS_ROWS = {cls.name for cls in ROBUSTNESS_METRICS} | {"rank:robustness"}
SHARED_RESAMPLE = {
    "0": {
        "shapes-shortcut/gradient/mass_accuracy": {"rank": 6},
        "shapes-shortcut/gradient/rank:alignment": {"value": 4.5, "rank": 6},
        "shapes-shortcut/gradient/rank:overall": {"value": 2.75},
    },
    "1": {
        "shapes-shortcut/gradient/mass_accuracy": {"rank": 6},
        "shapes-shortcut/gradient/rank:alignment": {"value": 4.25},
        "shapes-shortcut/gradient/rank:overall": {"value": 2.625, "rank": 3},
        "shapes-shortcut/random/rank:alignment": {"rank": 5},
    },
}
"""The fields the shared paired resample (issue 28) changed, with their former values: on
shapes-shortcut's ``mass_accuracy``, gradcam's win over gradient (paired interval 0.0018 to
0.075 before) became a tie (-0.0005 to 0.075), in both seeds; the rest follows from it."""


RANKS_BEFORE = json.loads((GOLDEN.parent / "ranks-before-issue41.json").read_text(encoding="utf-8"))
"""Seed -> row -> the fields the record's ranking rules (issue 41, DESIGN 10) changed, with their
former values: references (``oracle``) take no rank and leave the comparisons, and on
``shapes-shortcut``, whose model relies on the planted cue, alignment leaves the overall rank.
Only ranks, statuses and the mean ranks of ``rank:`` rows moved; no metric value."""

INTERVALS_BEFORE = json.loads((GOLDEN.parent / "intervals-before-issue28.json").read_text(encoding="utf-8"))
"""Seed -> row -> (ci_low, ci_high) in the golden file before the shared-resample interval rule
(issue 28, docs/metrics.md "Intervals at scale") moved every interval bound: the rows' other
fields are unchanged, which the digests below check with these bounds put back."""


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def test_golden_rows_are_the_former_rows_plus_robustness_rows() -> None:
    """Every former row (metric, family and overall ranks) is unchanged but for the fields the
    shared paired resample changed (:data:`SHARED_RESAMPLE`) and the interval bounds the shared
    interval rule moved (:data:`INTERVALS_BEFORE`); the only rows added are the
    robustness family's, on the shapes tracks, with a ``rank:robustness`` row per explainer."""
    golden = json.loads(GOLDEN.read_text())
    assert _digest(golden["models"]) == BEFORE_ROBUSTNESS["models"]
    for seed in ("0", "1"):
        rows = golden[seed]
        for key, fields in RANKS_BEFORE[seed].items():  # the record's ranking rules, undone
            assert set(fields) <= {"rank", "status", "value"} and (fields.keys() != {"value"} or "/rank:" in key), key
            assert "/rank:" in key or "value" not in fields, key  # no metric value moved
            assert all(rows[key][f] != v for f, v in fields.items()), key  # changed on purpose
            rows[key] = {**rows[key], **fields}
        for key, fields in SHARED_RESAMPLE[seed].items():
            assert all(rows[key][f] != v for f, v in fields.items()), key  # changed on purpose
            rows[key] = {**rows[key], **fields}
        before = INTERVALS_BEFORE[seed]
        assert sorted(before) == sorted(k for k, r in rows.items() if r["ci_low"] is not None)
        moved = [k for k, (low, high) in before.items() if (rows[k]["ci_low"], rows[k]["ci_high"]) != (low, high)]
        assert len(moved) > len(before) // 2  # changed on purpose: the interval rule of issue 28
        for key, (low, high) in before.items():
            rows[key] = {**rows[key], "ci_low": low, "ci_high": high}
        former = {k: v for k, v in rows.items() if k.rsplit("/", 1)[1] not in ROBUSTNESS_ROWS}
        assert len(former) == 606 and _digest(former) == BEFORE_ROBUSTNESS[seed]
        added = sorted(set(rows) - set(former))
        assert {k.split("/")[0] for k in added} == {"shapes", "shapes-shortcut"}
        explainers = {k.split("/")[1] for k in former if k.startswith("shapes/")}
        for track in ("shapes", "shapes-shortcut"):
            ranked = {k.split("/")[1]: rows[k]["rank"] for k in added if k.startswith(f"{track}/") and "rank:" in k}
            assert set(ranked) == explainers and all(r is not None for r in ranked.values())


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "capability"), [(0, None), (1, None), (0, "default"), (0, "avx2")], ids=["0", "1", "0-default", "0-avx2"]
)
def test_default_suite_leaderboard_matches_the_golden_values(tmp_path: Path, seed: int, capability: str | None) -> None:
    if capability == "avx2" and "avx2" not in _cpu_flags():
        pytest.skip("this CPU has no AVX2")
    golden = json.loads(GOLDEN.read_text())
    board = run_default_suite(tmp_path, seed, capability)
    assert model_identities(board) == golden["models"], "the run did not use the shipped reference weights"
    got = leaderboard_rows(board)
    assert sorted(got) == sorted(golden[str(seed)]), "the set of (track, explainer, metric) rows changed"
    tolerances = {key: row["rtol"] for key, row in golden[str(seed)].items()}
    changed = compare_rows(golden[str(seed)], got, fragile=fragile_ranks(tmp_path / "sub", tolerances))
    assert not changed, f"{len(changed)} of {len(got)} rows changed, e.g. {changed[:3]}"
