"""Peak memory of each faithfulness metric (8 photos, EfficientNet-Lite0, batch size 64).

Each metric runs in a fresh child process that loads the model and the saved
inputs and maps (computed once by the parent), then scores. Printed per metric:
the growth of the peak resident set size (``resource.getrusage`` maxrss) during
``score``, and the peak of Python/numpy allocations traced by ``tracemalloc``
(torch's allocator is not traced). The first row forwards one batch of 64 images
alone, the floor every metric pays.

Run: ``.venv/bin/python bench/bench_faithfulness_memory.py [--images 8] [--metrics ...]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import torch


def child(path: str, name: str, batch_size: int) -> None:
    from _faithfulness_common import load_model, make_batch

    from xaibench.api import ForwardCounter, Sample
    from xaibench.metrics.plugin import METRICS

    model = load_model()
    data = np.load(path)
    inputs = torch.from_numpy(data["inputs"])
    samples = [Sample(id=str(i), image=np.zeros((1, 1, 3), np.float32)) for i in data["ids"]]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    if name == "forward-only":
        ForwardCounter(model.module, batch_size=batch_size)(inputs.repeat(-(-batch_size // len(inputs)), 1, 1, 1))
    else:
        metric = {cls.name: cls for cls in METRICS}[name]()
        metric.score(make_batch(model, inputs, data["targets"], data["saliency"], samples, batch_size))
    _, traced = tracemalloc.get_traced_memory()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    row = {"rss_growth_mb": (after - before) / 1024, "peak_rss_mb": after / 1024, "traced_mb": traced / 2**20}
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--metrics", default="deletion,insertion,road_necessity,road_faithfulness,road_faithfulness_black,average_drop"
    )
    parser.add_argument("--child", nargs=2, metavar=("NPZ", "METRIC"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.batch_size)
        return

    from _faithfulness_common import load_track

    _, inputs, targets, saliency, samples = load_track(args.images)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "track.npz")
        np.savez(path, inputs=inputs.numpy(), targets=targets, saliency=saliency, ids=[s.id for s in samples])
        print(f"{len(inputs)} photos, batch size {args.batch_size}")
        print(f"{'metric':26s} {'peak RSS growth MB':>18s} {'peak RSS MB':>12s} {'traced peak MB':>15s}")
        for name in ["forward-only", *args.metrics.split(",")]:
            cmd = [sys.executable, __file__, "--child", path, name, "--batch-size", str(args.batch_size)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            growth, peak, traced = row["rss_growth_mb"], row["peak_rss_mb"], row["traced_mb"]
            print(f"{name:26s} {growth:18.0f} {peak:12.0f} {traced:15.0f}", flush=True)


if __name__ == "__main__":
    main()
