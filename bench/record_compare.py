"""Compare two folders of submissions of one suite value by value (a regenerated record against the
committed one): per explainer, the tracks and metrics each holds, the samples whose value differs
(n/a on one side only, or apart by more than the tolerance) and the largest difference.

    .venv/bin/python bench/record_compare.py record/record-v1/submissions OTHER/submissions [--rtol 1e-6]

Creation times, costs and the environment are not compared (they differ by design). Where both
folders have a ``meta/validity.json`` beside them (the validity tests, recomputed by a
regeneration), those are compared too, every verdict, figure and interval. Exit status 1 when a
value differs or a track or metric is on one side only, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from xaibench.publish.submission_files import metric_values


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def compare(a: Path, b: Path, rtol: float) -> tuple[list[str], int]:
    """Lines describing every difference between submission files ``a`` and ``b``, and the number
    of values compared."""
    da, db = _load(a), _load(b)
    lines: list[str] = []
    compared = 0
    if da["explainer"].get("version") != db["explainer"].get("version"):
        lines.append(f"explainer version {da['explainer'].get('version')} vs {db['explainer'].get('version')}")
    for track in sorted(set(da["tracks"]) | set(db["tracks"])):
        ta, tb = da["tracks"].get(track), db["tracks"].get(track)
        if ta is None or tb is None:
            lines.append(f"{track}: only in {'the second' if ta is None else 'the first'}")
            continue
        for metric in sorted(set(ta.get("metrics", {})) | set(tb.get("metrics", {}))):
            ma, mb = ta.get("metrics", {}).get(metric), tb.get("metrics", {}).get(metric)
            if ma is None or mb is None:
                lines.append(f"{track}/{metric}: only in {'the second' if ma is None else 'the first'}")
                continue
            va, vb = metric_values(ta, ma), metric_values(tb, mb)
            if va is None or vb is None:
                if (va is None) != (vb is None):
                    lines.append(f"{track}/{metric}: per-sample values on one side only")
                continue
            ids_a, xa = va
            ids_b, xb = vb
            if list(ids_a) != list(ids_b):
                lines.append(f"{track}/{metric}: other sample ids")
                continue
            xa, xb = np.asarray(xa, dtype=np.float64), np.asarray(xb, dtype=np.float64)
            compared += len(xa)
            na = np.isnan(xa) != np.isnan(xb)
            both = ~np.isnan(xa) & ~np.isnan(xb)
            diff = np.zeros_like(xa)
            diff[both] = np.abs(xa[both] - xb[both])
            apart = both & (diff > np.maximum(1e-12, rtol * np.abs(xa)))
            if na.any() or apart.any():
                # the largest difference among the values apart (an n/a mismatch when none is)
                worst = int(np.argmax(np.where(apart, diff, -1.0))) if apart.any() else int(np.argmax(na))
                lines.append(
                    f"{track}/{metric}: {int(na.sum())} n/a on one side, {int(apart.sum())} apart; largest "
                    f"{diff[worst]:.3g} at {ids_a[worst]} ({float(xa[worst])!r} vs {float(xb[worst])!r})"
                )
    return lines, compared


def compare_json(a: object, b: object, rtol: float, where: str = "") -> tuple[list[str], int]:
    """Lines naming every place where the JSON values ``a`` and ``b`` differ (numbers apart by more
    than ``rtol`` relative, anything else unequal), and the number of numbers compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        lines: list[str] = [
            f"{where}/{k}: only in {'the first' if k in a else 'the second'}" for k in a.keys() ^ b.keys()
        ]
        count = 0
        for key in sorted(a.keys() & b.keys()):
            more, n = compare_json(a[key], b[key], rtol, f"{where}/{key}")
            lines += more
            count += n
        return lines, count
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        lines, count = [], 0
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            more, n = compare_json(x, y, rtol, f"{where}[{i}]")
            lines += more
            count += n
        return lines, count
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        same = a == b or abs(a - b) <= max(1e-12, rtol * abs(a))
        return ([] if same else [f"{where}: {a!r} vs {b!r}"]), 1
    return ([] if a == b else [f"{where}: {a!r} vs {b!r}"]), 0


def _report(name: str, lines: list[str], compared: int) -> bool:
    """Print ``name``'s verdict and its differences; True when it differs."""
    print(f"{name}: {'the same' if not lines else 'differs'} ({compared} values)")
    for line in lines:
        print(f"  {line}")
    return bool(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance of a match")
    args = parser.parse_args()
    names = sorted({p.stem for p in args.first.glob("*.json")} | {p.stem for p in args.second.glob("*.json")})
    failed = False
    total = 0
    for name in names:
        a, b = args.first / f"{name}.json", args.second / f"{name}.json"
        if not (a.is_file() and b.is_file()):
            print(f"{name}: only in {args.first if a.is_file() else args.second}")
            continue
        lines, compared = compare(a, b, args.rtol)
        total += compared
        failed |= _report(name, lines, compared)
    validity = [folder.parent / "meta" / "validity.json" for folder in (args.first, args.second)]
    if all(v.is_file() for v in validity):
        lines, compared = compare_json(_load(validity[0]), _load(validity[1]), args.rtol)
        total += compared
        failed |= _report("validity.json", lines, compared)
    print(f"{total} values compared; {'all the same' if not failed else 'differences above'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
