"""The default leaderboard across CPU kernels: the tolerance of DESIGN 6, measured.

Runs ``xaibench run --suite default --explainer default --seed S`` once per
``ATEN_CPU_CAPABILITY`` (``default``: no vector kernels; ``avx2``; unset: the machine's best,
``avx512`` on AVX-512 machines), each in a fresh workdir and a subprocess, with the shipped model
weights, and compares every pair of leaderboards row by row. Prints:

- the model identities each run's records carry (the shipped weights': the same in every run);
- the largest relative difference of values and interval bounds (values of magnitude at least
  1e-6; below that the largest absolute difference), and the row where it occurs;
- rows whose count, status or flags differ, and ranks that differ (with whether a paired
  interval endpoint within the tolerance explains it);
- how many rows move by more than 1e-7 ... 1e-2, and the golden rule's tolerances: each row
  ``MARGIN`` (3) times its largest difference, at least ``FLOOR_RTOL`` (1e-3).

    .venv/bin/python bench/bench_cpu_kernels.py [--seed 0] [--capability default --capability avx2 ...]

About 2 to 4 minutes per capability on 2 cores (``default`` is the slowest).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from xaibench.testing.golden import (
    FLOOR_RTOL,
    MARGIN,
    NUMBERS,
    compare_rows,
    fragile_ranks,
    leaderboard_rows,
    model_identities,
    relative_difference,
    row_spreads,
    run_default_suite,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--capability", action="append", help="repeatable; 'best' = unset (default: all three)")
    parser.add_argument("--keep", type=Path, help="keep each run's workdir, submissions and leaderboard here")
    parser.add_argument("--top", type=int, default=10, help="print this many of the largest relative differences")
    args = parser.parse_args()
    capabilities = args.capability or ["default", "avx2", "best"]
    runs = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = args.keep or Path(tmp_dir)
        for cap in capabilities:
            t0 = time.perf_counter()
            out = Path(tmp) / cap
            board = run_default_suite(out, args.seed, None if cap == "best" else cap)
            runs[cap] = (leaderboard_rows(board), model_identities(board), out / "sub")
            print(f"{cap:>8}: {time.perf_counter() - t0:6.1f} s  models {runs[cap][1]}")
        worst_abs = (0.0, "")
        relative: list[tuple[float, str]] = []
        spreads = row_spreads([runs[c][0] for c in capabilities])
        tolerances = {key: max(FLOOR_RTOL, MARGIN * spread) for key, spread in spreads.items()}
        for a, b in itertools.combinations(capabilities, 2):
            rows_a, ids_a, sub_a = runs[a]
            rows_b, ids_b, sub_b = runs[b]
            fragile_a, fragile_b = fragile_ranks(sub_a, tolerances), fragile_ranks(sub_b, tolerances)
            print(f"\n{a} vs {b}: model identities {'equal' if ids_a == ids_b else 'DIFFER'}")
            for key in sorted(set(rows_a) & set(rows_b)):
                for name in NUMBERS:
                    x, y = rows_a[key].get(name), rows_b[key].get(name)
                    if not (isinstance(x, float) and isinstance(y, float)):
                        continue
                    if max(abs(x), abs(y)) >= 1e-6:
                        relative.append((relative_difference(x, y), f"{key} {name}: {x!r} vs {y!r} ({a} vs {b})"))
                    elif abs(x - y) > worst_abs[0]:
                        worst_abs = (abs(x - y), f"{key} {name}: {x!r} vs {y!r} ({a} vs {b})")
            exact = compare_rows(rows_a, rows_b, rtol=1.0, atol=float("inf"))
            print(f"  rows whose count, status, flags or rank differ: {len(exact)}")
            for d in exact:
                why = "fragile pair (explained)" if d.key in fragile_a | fragile_b else "NOT explained"
                print(f"    {d.key} {d.field}: {d.expected!r} vs {d.got!r} [{why}]")
            print(f"  rows with a rank within the tolerance of a tie: {len(fragile_a | fragile_b)}")
        relative.sort(reverse=True)
        worst_rel = relative[0] if relative else (0.0, "")
        print(f"\nthe {args.top} largest relative differences (|value| >= 1e-6):")
        for rel, where in relative[: args.top]:
            print(f"  {rel:.3g}  {where}")
        values = [r for r, where in relative if " value:" in where]
        print(f"largest relative difference of a mean (value): {max(values, default=0.0):.3g}")
        print(f"largest relative difference (|value| >= 1e-6): {worst_rel[0]:.3g}  {worst_rel[1]}")
        print(f"largest absolute difference (|value| < 1e-6): {worst_abs[0]:.3g}  {worst_abs[1]}")
        print(f"rows (of {len(spreads)}) whose value or bounds moved by more than:")
        for limit in (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2):
            print(f"  {limit:g}: {sum(1 for v in spreads.values() if v > limit)}")
        above = sum(1 for v in spreads.values() if MARGIN * v > FLOOR_RTOL)
        print(f"golden rule: rtol = max({FLOOR_RTOL:g}, {MARGIN:g} x spread); {above} rows above the floor")


if __name__ == "__main__":
    main()
