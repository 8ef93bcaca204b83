"""Peak memory of each faithfulness metric, and how it grows with the batch size and the steps.

8 real photos, EfficientNet-Lite0. Each (metric, batch size, steps) runs in a fresh child
process that loads the model and the saved inputs and maps (computed once by the parent),
then scores. Printed per row: the peak resident set size during ``score`` over the resident
size just before it (Linux: the peak is reset through ``/proc/self/clear_refs`` and read as
``VmHWM``), and the peak of Python/numpy allocations traced by ``tracemalloc`` (torch's
allocator is not traced). ``forward-only`` forwards one batch
alone, the floor every metric pays at that batch size.

The perturbed images of a curve are built one forward batch at a time
(:class:`xaibench.metrics.faithfulness.context.BatchedScorer`), so peak memory should grow with
the batch size and not with the steps: the last lines print, per metric, the growth at the
largest steps over the smallest (same batch size) and at the largest batch size over the
smallest (same steps). ``road_*`` metrics have 50 fixed percentages (their ``steps`` column is
"-"); their systems' size, not their number, sets the solver's memory.

Run: ``.venv/bin/python bench/bench_faithfulness_memory.py [--images 8] [--batch-sizes 8,32]
[--steps 25,100] [--metrics ...]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import torch

CURVE_METRICS = ("deletion", "insertion")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field} (this benchmark needs Linux)")


def child(path: str, name: str, batch_size: int, steps: int) -> None:
    from _faithfulness_common import load_model, make_batch

    from xaibench.allocator import tune_allocator
    from xaibench.api import ForwardCounter, Sample
    from xaibench.metrics.plugin import METRICS

    tune_allocator()  # as xaibench run does
    model = load_model()
    data = np.load(path)
    inputs = torch.from_numpy(data["inputs"])
    samples = [Sample(id=str(i), image=np.zeros((1, 1, 3), np.float32)) for i in data["ids"]]
    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current size
    tracemalloc.start()
    if name == "forward-only":
        ForwardCounter(model.module, batch_size=batch_size)(inputs.repeat(-(-batch_size // len(inputs)), 1, 1, 1))
    else:
        params = {"steps": steps} if name in CURVE_METRICS else {}
        metric = {cls.name: cls for cls in METRICS}[name](**params)
        metric.score(make_batch(model, inputs, data["targets"], data["saliency"], samples, batch_size))
    _, traced = tracemalloc.get_traced_memory()
    after = _status_kb("VmHWM")
    row = {"rss_growth_mb": (after - before) / 1024, "peak_rss_mb": after / 1024, "traced_mb": traced / 2**20}
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch-sizes", default="8,32", help="comma-separated images per forward pass")
    parser.add_argument("--steps", default="25,100", help="comma-separated steps of deletion and insertion")
    parser.add_argument("--metrics", default="deletion,insertion,road_necessity,road_faithfulness,average_drop")
    parser.add_argument("--child", nargs=4, metavar=("NPZ", "METRIC", "BATCH", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))
        return

    from _faithfulness_common import load_track

    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    steps_list = [int(s) for s in args.steps.split(",")]
    _, inputs, targets, saliency, samples = load_track(args.images)
    growth: dict[tuple[str, int, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "track.npz")
        np.savez(path, inputs=inputs.numpy(), targets=targets, saliency=saliency, ids=[s.id for s in samples])
        print(f"{len(inputs)} photos, EfficientNet-Lite0, torch threads {torch.get_num_threads()}")
        head = f"{'metric':22s} {'batch':>5s} {'steps':>5s} {'peak RSS growth MB':>18s} {'peak RSS MB':>11s}"
        print(f"{head} {'traced peak MB':>14s}")
        for name in ["forward-only", *args.metrics.split(",")]:
            for batch_size in batch_sizes:
                for steps in steps_list if name in CURVE_METRICS else [0]:
                    cmd = [sys.executable, __file__, "--child", path, name, str(batch_size), str(steps)]
                    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    row = json.loads(res.stdout.strip().splitlines()[-1])
                    growth[(name, batch_size, steps)] = row["rss_growth_mb"]
                    shown = str(steps) if steps else "-"
                    print(
                        f"{name:22s} {batch_size:5d} {shown:>5s} {row['rss_growth_mb']:18.0f} "
                        f"{row['peak_rss_mb']:11.0f} {row['traced_mb']:14.0f}",
                        flush=True,
                    )
    lo_b, hi_b = min(batch_sizes), max(batch_sizes)
    print(f"\ngrowth ratios (peak RSS growth; batch {hi_b} / {lo_b}, steps {max(steps_list)} / {min(steps_list)}):")
    for name in ["forward-only", *args.metrics.split(",")]:
        steps = max(steps_list) if name in CURVE_METRICS else 0
        by_batch = growth[(name, hi_b, steps)] / max(growth[(name, lo_b, steps)], 1.0)
        line = f"  {name:22s} x batch size: {by_batch:5.2f}"
        if name in CURVE_METRICS:
            by_steps = growth[(name, lo_b, max(steps_list))] / max(growth[(name, lo_b, min(steps_list))], 1.0)
            line += f"   x steps: {by_steps:5.2f}"
        print(line)


if __name__ == "__main__":
    main()
