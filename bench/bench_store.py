"""The records store at scale: write N synthetic records through :class:`RecordStore` (the
runner's path: journal lines fsynced a batch at a time, compacted into Parquet part files), then,
each in a fresh process, time opening every track's store (what a resumed run does before it
scores: the key sets) and ``xaibench.results.records()`` (all records as a DataFrame), with
their peak RSS, and print the bytes on disk.

Records look like the runner's: sha256 keys, the provenance of the (track, explainer, metric)
(explainer block, model, dataset, runtime, metric block), a value, costs, the target, and a
11-point curve on one metric in four (``--curve-every``). Usage::

    python bench/bench_store.py [--records 400000] [--tracks 10] [--explainers 10] [--metrics 40] [--curve-every 4]

Samples per (track, explainer, metric) = records / (tracks x explainers x metrics).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xaibench.runner.storage.store import RecordStore, record_files


def _record(
    track: str, explainer: str, metric: str, m: int, sample: int, rng: random.Random, curve_every: int = 4
) -> dict[str, Any]:
    key = hashlib.sha256(f"{track}/{explainer}/{metric}/{sample}".encode()).hexdigest()
    value = None if rng.random() < 0.02 else round(rng.random(), 6)
    record: dict[str, Any] = {
        "key": key,
        "key_version": 2,
        "metric": metric,
        "sample_id": f"{track}-test-{sample:04d}",
        "value": value,
        "na_reason": None if value is not None else "empty saliency map",
        "wall_time_s": round(rng.random() / 100, 6),
        "forward_passes": 16 if m % 4 == 0 else 0,
        "schema": "xaibench.record/1",
        "track": track,
        "explainer": {
            "name": explainer,
            "version": "1.0.0",
            "kind": "saliency",
            "params": {},
            "params_digest": "44136fa355b3",
            "distribution": "xaibench",
            "distribution_version": "0.1.0",
            "reference_only": False,
            "tuned_on_benchmark": False,
        },
        "model": f"{track}-cnn/{track}@e533b868cc42",
        "dataset": {"name": track, "revision": "56e21e6babc99bd9"},
        "seed": 0,
        "xaibench": "0.1.0",
        "platform": "Linux-6.18.44-x86_64-with-glibc2.36",
        "device": "cpu",
        "torch": "2.14.1+cu130",
        "torch_threads": 1,
        "batch_size": 16,
        "metric_info": {
            "id": metric,
            "version": "1.0.0",
            "family": "faithfulness",
            "direction": "higher",
            "params": {},
        },
        "target": {"class": sample % 10, "source": "predicted"},
    }
    if curve_every and m % curve_every == 0:
        record["curve"] = {
            "fraction": [i / 10 for i in range(11)],
            "probability": [round(rng.random(), 6) for _ in range(11)],
        }
    return record


def write(workdir: Path, tracks: int, explainers: int, metrics: int, samples: int, curve_every: int = 4) -> float:
    rng = random.Random(0)
    start = time.perf_counter()
    for t in range(tracks):
        track = f"track{t:02d}"
        store = RecordStore(workdir / "results" / f"{track}.jsonl")
        for e in range(explainers):
            for m in range(metrics):  # one append per (explainer, metric): the runner appends a batch at a time
                metric = f"metric{m:02d}"
                name = f"explainer{e:02d}"
                store.append([_record(track, name, metric, m, s, rng, curve_every) for s in range(samples)])
    return time.perf_counter() - start


_OPEN = """
import sys, time, resource
from pathlib import Path
from xaibench.runner.storage.store import RecordStore, journals
t = time.perf_counter()
n = sum(len(RecordStore(j)) for j in journals(Path(sys.argv[1]) / "results"))
print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
_LOAD = """
import sys, time, resource
from xaibench.results import records
t = time.perf_counter()
frame = records(sys.argv[1])
print(len(frame), time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _child(code: str, workdir: Path) -> tuple[int, float, float]:
    out = subprocess.run([sys.executable, "-c", code, str(workdir)], check=True, capture_output=True, text=True)
    n, seconds, rss = out.stdout.split()
    return int(n), float(seconds), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--tracks", type=int, default=10)
    parser.add_argument("--explainers", type=int, default=10)
    parser.add_argument("--metrics", type=int, default=40)
    parser.add_argument("--curve-every", type=int, default=4, help="a curve on one metric in N (0: none)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the store here (default: a temp folder)")
    args = parser.parse_args()
    samples = max(1, args.records // (args.tracks * args.explainers * args.metrics))
    total = samples * args.tracks * args.explainers * args.metrics
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        workdir = args.workdir or Path(tmp)
        seconds = write(workdir, args.tracks, args.explainers, args.metrics, samples, args.curve_every)
        files = record_files(workdir / "results")
        size = sum(p.stat().st_size for p in files)
        tags = sum(p.stat().st_size for p in (workdir / "results").glob("*.tag"))
        journal = sum(p.stat().st_size for p in files if p.suffix == ".jsonl")
        n_open, open_s, open_rss = _child(_OPEN, workdir)
        n_load, load_s, load_rss = _child(_LOAD, workdir)
        result = {
            "records": total,
            "shape": f"{args.tracks} tracks x {args.explainers} explainers x {args.metrics} metrics x {samples} samples",  # noqa: E501
            "write_s": round(seconds, 2),
            "bytes_on_disk": size + tags,
            "journal_bytes": journal,
            "part_files": sum(p.suffix == ".parquet" for p in files),
            "open_stores_s": round(open_s, 2),
            "open_stores_peak_rss_mb": round(open_rss),
            "records_frame_s": round(load_s, 2),
            "records_frame_peak_rss_mb": round(load_rss),
            "frame_rows": n_load,
        }
        assert n_open == n_load == total, (n_open, n_load, total)
        print(json.dumps(result, indent=1))
        print(f"self peak RSS while writing: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
