"""Golden values: the default suite's leaderboard, for two seeds. Any change to a number, a rank,
an n/a count, a status or a flag fails here.

The golden file (``tests/golden/default-suite.json``, see ``_rows``) was written by
``xaibench run --suite default --explainer default --seed S``. It was first written before the
restructuring (issue 11) and rewritten for issue 13, which changed the verdicts on purpose
(paired ranking, validity-gated families, the sanity metric, all 9 photos, A = M >= 0.5).
Regenerate it only for a deliberate change of behaviour, and say so in the commit.

Values and interval bounds are compared to a relative 1e-5: the forward passes' float32 rounding
depends on the kernels (channels-last convolutions, issue 14, moved most values by about 1e-8
relative and one average drop, a ratio of nearby probabilities, by 2e-6), and that is not a
change of behaviour. Counts, ranks, statuses and flags are compared exactly.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from xaibench.cli import cli

GOLDEN = Path(__file__).parent / "golden" / "default-suite.json"
FIELDS = ("value", "ci_low", "ci_high", "n", "n_na", "rank", "status", "flags")
NUMBERS = ("value", "ci_low", "ci_high")
REL = 1e-5


def _same(golden: dict, got: dict) -> bool:
    """Exact for counts, ranks, statuses and flags; a relative 1e-5 for values and bounds."""
    for key in FIELDS:
        a, b = golden.get(key), got.get(key)
        if key in NUMBERS and isinstance(a, float) and isinstance(b, float):
            if not math.isclose(a, b, rel_tol=REL, abs_tol=1e-12):
                return False
        elif a != b:
            return False
    return True


def _rows(leaderboard: dict) -> dict[str, dict]:
    """``track/explainer/metric`` -> the compared fields of one leaderboard row."""
    return {f"{r['track']}/{r['explainer']}/{r['metric']}": {k: r.get(k) for k in FIELDS} for r in leaderboard["rows"]}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_default_suite_leaderboard_matches_the_golden_values(tmp_path: Path, seed: int) -> None:
    golden = json.loads(GOLDEN.read_text())[str(seed)]
    out = tmp_path / "lb"
    args = ["run", "--suite", "default", "--explainer", "default", "--seed", str(seed), "--quiet"]
    args += ["--workdir", str(tmp_path / "work"), "--submissions", str(tmp_path / "sub"), "--leaderboard-dir", str(out)]
    result = CliRunner().invoke(cli, args, env={**os.environ, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    got = _rows(json.loads((out / "leaderboard.json").read_text()))
    assert sorted(got) == sorted(golden), "the set of (track, explainer, metric) rows changed"
    changed = {k: (golden[k], got[k]) for k in golden if not _same(golden[k], got[k])}
    assert not changed, f"{len(changed)} of {len(golden)} rows changed, e.g. {next(iter(changed.items()))}"
