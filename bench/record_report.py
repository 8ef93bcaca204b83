"""What the leaderboard of record says about itself (issue 41's note): per track, each ranking
metric's rank stability (``p05_tau`` and the ``unstable`` flag from ``meta.json``), the share of
explainer pairs its paired 95 % intervals separate, the metrics the meta gate leaves unranked
(and why), and what explaining cost per explainer (seconds summed over tracks, and its share).

    .venv/bin/python bench/record_report.py [record/record-v1]

Reads the committed files only (submissions, ``meta/meta.json``, ``leaderboard/leaderboard.json``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from xaibench.publish.leaderboard import entries_from_submissions, resolve_duplicates
from xaibench.publish.submission import read_submissions
from xaibench.stats import paired_signs, resample_counts


def separated_share(values: dict[str, dict[str, float | None]]) -> tuple[float, int]:
    """The share of explainer pairs whose paired 95 % interval of the mean difference excludes 0,
    and the number of pairs (those with at least two shared samples)."""
    names = sorted(values)
    ids = sorted({s for v in values.values() for s in v})
    if len(names) < 2 or not ids:
        return float("nan"), 0
    arr = np.full((len(names), len(ids)), np.nan)
    for i, n in enumerate(names):
        for j, s in enumerate(ids):
            v = values[n].get(s)
            arr[i, j] = np.nan if v is None else v
    mask = ~np.isnan(arr)
    shared, above, below = paired_signs(np.nan_to_num(arr), mask, resample_counts(len(ids), 0))
    pairs = np.triu(shared >= 2, k=1)
    n_pairs = int(pairs.sum())
    return (float(((above | below) & pairs).sum()) / n_pairs if n_pairs else float("nan")), n_pairs


def main(root: Path) -> None:
    subs = resolve_duplicates(read_submissions(root / "submissions", keep_bytes=False))
    references = {s.key for s in subs if s.data.get("explainer", {}).get("reference_only")}
    entries = [e for e in entries_from_submissions(subs) if e.explainer not in references]
    meta = json.loads((root / "meta" / "meta.json").read_text())["tracks"]
    board = json.loads((root / "leaderboard" / "leaderboard.json").read_text())
    by = defaultdict(dict)
    for e in entries:
        if e.ranking and e.samples is not None:
            by[(e.track, e.metric)][e.explainer] = dict(e.samples)
    print(f"# {root}: {len(subs)} submissions ({len(references)} references)\n")
    print("| track | metric | p05_tau | unstable | pairs separated at 95 % | verdict |")
    print("|---|---|---|---|---|---|")
    for (track, metric), values in sorted(by.items()):
        card = meta.get(track, {}).get("metrics", {}).get(metric, {})
        stab = card.get("stability") or {}
        share, n_pairs = separated_share(values)
        p05 = stab.get("p05_tau")
        print(
            f"| {track} | {metric} | {'n/a' if p05 is None else f'{p05:.2f}'} | "
            f"{'yes' if 'unstable' in card.get('flags', []) else 'no'} | "
            f"{share:.0%} of {n_pairs} | {card.get('verdict', '?')} |"
        )
    print("\n## Metrics not ranked, per track, and why (the meta gate, the perceptual checkpoint, too few values)\n")
    gated: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in board.get("rows", []):
        status = str(r.get("status") or "")
        if status.startswith("not ranked") and not str(r["metric"]).startswith("rank:"):
            gated[r["track"]][str(status).removeprefix("not ranked: ")].add(r["metric"])
    for track, reasons in sorted(gated.items()):
        print(f"- {track}: " + "; ".join(f"{', '.join(sorted(ms))} ({why})" for why, ms in sorted(reasons.items())))
    print("\n## Explaining cost per explainer (seconds summed over tracks)\n")
    seconds = {
        s.key: sum(float(t.get("explain_seconds") or 0.0) for t in s.data.get("tracks", {}).values()) for s in subs
    }
    total = sum(seconds.values()) or 1.0
    for name, sec in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"- {name}: {sec:.0f} s ({sec / total:.1%})")
    print(f"\ntotal {total:.0f} s ({total / 3600:.2f} h)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "record/record-v1"))
