"""Size and checking time of one submission at the field's scale (issue 28).

Builds, with the writer ``xaibench run`` uses (:func:`xaibench.publish.submission.build_submission`),
the submission of one explainer on ``--tracks`` tracks x ``--metrics`` metrics x ``--samples``
samples (default 20 x 30 x 1,000): per-sample values drawn at random in [0, 1] with 2 % n/a, each
metric summarised as the runner does (:func:`xaibench.stats.summarise`: mean, seeded bootstrap
interval) with its histogram. It prints

- the file's size in MB (goal: at most 10 MB), and the size of the same data in the
  ``xaibench.submission/1`` layout (a sample id -> value map per metric) for comparison;
- the time of ``xaibench submission validate`` on it (schema, every summary recomputed from the
  per-sample values, the seeded bootstrap included);
- the time of the file-side part of ``xaibench submission verify``: load, list every recorded
  value (:func:`xaibench.publish.verify.recorded_values`) and draw the records to re-run (the
  re-run itself costs what re-running those records costs, whatever the file's size);
- the time to read it into leaderboard entries (:func:`entries_from_submissions`).

Run: ``.venv/bin/python bench/bench_submission_size.py [--tracks 20 --metrics 30 --samples 1000]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.files import write_json_atomic
from xaibench.publish.leaderboard import entries_from_submissions
from xaibench.publish.submission import build_submission, read_submission
from xaibench.publish.validation import validate_file
from xaibench.publish.verify import choose, recorded_values
from xaibench.runner.distributions import histogram
from xaibench.stats import summarise
from xaibench.testing.scale import as_v1

SEED = 0
EXPLAINER = "bench-explainer"


def run_summary(tracks: int, metrics: int, samples: int) -> dict[str, Any]:
    """A run summary of one explainer, shaped as the runner writes it."""
    rng = np.random.default_rng(SEED)
    block = {"name": EXPLAINER, "version": "1.0.0", "kind": "saliency", "params": {}, "params_digest": "0" * 12}
    out: dict[str, Any] = {}
    for t in range(tracks):
        track = f"track-{t:02d}"
        ids = [f"{track}-{k:05d}" for k in range(samples)]
        summaries = {}
        for m in range(metrics):
            metric = f"metric-{m:02d}"
            values = rng.random(samples)
            na = rng.random(samples) < 0.02
            records = [
                {"sample_id": i, "value": None, "na_reason": "empty mask"} if skip else {"sample_id": i, "value": v}
                for i, v, skip in zip(ids, values.tolist(), na.tolist(), strict=True)
            ]
            s = summarise(records, seed=SEED, track=track)
            hist = histogram([v for v, skip in zip(values.tolist(), na.tolist(), strict=True) if not skip])
            summaries[metric] = {
                "id": metric,
                "version": "1.0.0",
                "family": "faithfulness",
                "direction": "higher",
                "params": {},
                "ranking": True,
                **{k: v for k, v in s.items() if k != "samples"},
                **({"histogram": hist} if hist else {}),
                "samples": s["samples"],
            }
        out[track] = {
            "provenance": {
                "track": track,
                "synthetic": True,
                "dataset": {"name": "shapes", "revision": "bench", "params": {}},
                "model": {"name": "shapes-cnn", "identity": "shapes-cnn@bench", "params": {}},
                "target": "predicted",
                "n_samples": samples,
            },
            "explainers": {
                EXPLAINER: {
                    "explainer": block,
                    "explain_seconds": 1.0,
                    "explained": {"computed": samples, "cached": 0, "failed": 0},
                    "metrics": summaries,
                }
            },
        }
    run = {"xaibench": "bench", "seed": SEED, "suite": "bench", "limit": samples, "started": "now", "plugins": []}
    return {"schema": "xaibench.summary/1", "run": run, "tracks": out}


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracks", type=int, default=20)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    summary, made_s = timed(lambda: run_summary(args.tracks, args.metrics, args.samples))
    with tempfile.TemporaryDirectory(prefix="xaibench-bench-") as tmp:
        path = Path(tmp) / f"{EXPLAINER}.json"
        data, write_s = timed(lambda: build_submission(summary, EXPLAINER, None))  # type: ignore[arg-type]
        _, dump_s = timed(lambda: write_json_atomic(path, data))
        size = path.stat().st_size
        old = Path(tmp) / "v1" / path.name
        old.parent.mkdir()
        write_json_atomic(old, as_v1(data))
        issues, validate_s = timed(lambda: validate_file(path))
        assert issues == [], issues[:3]
        issues_v1, validate_v1_s = timed(lambda: validate_file(old))
        assert issues_v1 == [], issues_v1[:3]
        sub, load_s = timed(lambda: read_submission(path))
        records, list_s = timed(lambda: recorded_values(path, sub.data))
        chosen, choose_s = timed(lambda: choose(records, 16, seed=0))
        entries, entries_s = timed(lambda: entries_from_submissions([sub]))
        entries_v1 = entries_from_submissions([read_submission(old)])
        old_size = old.stat().st_size
    n = args.tracks * args.metrics * args.samples
    print(f"submission of {args.tracks} tracks x {args.metrics} metrics x {args.samples} samples ({n:,} values)")
    print(f"  summary made in {made_s:.1f} s; submission built in {write_s:.2f} s, written in {dump_s:.2f} s")
    print(f"  size: {size / 1e6:.2f} MB (xaibench.submission/2; goal <= 10 MB)")
    print(f"  the same data as xaibench.submission/1: {old_size / 1e6:.2f} MB")
    print(f"  validate: {validate_s:.2f} s (/1 layout: {validate_v1_s:.2f} s)")
    print(
        f"  verify, file side: load {load_s:.2f} s, list {len(records):,} records {list_s:.2f} s, "
        f"draw {len(chosen)} {choose_s:.3f} s"
    )
    same = [(e.track, e.metric, e.samples) for e in entries] == [(e.track, e.metric, e.samples) for e in entries_v1]
    print(f"  leaderboard entries: {len(entries)} in {entries_s:.2f} s; equal to the /1 layout's: {same}")


if __name__ == "__main__":
    main()
