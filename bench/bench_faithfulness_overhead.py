"""Overhead of each faithfulness metric over its own forward passes (goal: at most 1.5).

For every metric, on the 8 real photos with EfficientNet-Lite0: the wall time of
``metric.score`` on a fresh batch (nothing memoised), divided by the wall time of
the same number of images forwarded alone through a ForwardCounter with the same
batch size, both measured in this run. ``road_*`` rows also show the time spent
inside the noisy linear imputation as a share of the wall time (it runs in a worker
thread, overlapping the forwards, so it is not simply additive). ``road trio`` scores sufficiency,
necessity and faithfulness on one batch (the third reuses the first two).
``max_sensitivity`` re-runs a gradient explainer, so its "forward passes" are
explanations (forward + backward each) and its ratio is against forwards only.

Run: ``.venv/bin/python bench/bench_faithfulness_overhead.py [--images 8] [--smooth]
[--batch-size 64] [--metrics deletion,road_faithfulness] [--repeat 1]``. With ``--repeat``
each metric run is followed at once by its forwards-only run, that many times, and
the pair with the median ratio is printed (a shared machine's load drifts).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _faithfulness_common import forward_only_time, load_track, make_batch, timed

from xaibench.allocator import tune_allocator
from xaibench.api import Explainer
from xaibench.metrics.faithfulness import perturbation, road
from xaibench.metrics.plugin import METRICS


class GradientExplainer(Explainer):
    name = "bench-gradient"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        x = inputs.clone().requires_grad_(True)
        probs = torch.softmax(model.module(x), dim=1)
        probs.gather(1, torch.as_tensor(targets).view(-1, 1)).sum().backward()
        return x.grad.abs().sum(dim=1).numpy()


class ImputationClock:
    """Wraps the imputation used by the ``road`` perturbation to add up its time."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._inner = perturbation.noisy_linear_imputation
        perturbation.noisy_linear_imputation = self

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16, help="images per forward pass (the run's default)")
    parser.add_argument("--imputation-threads", type=int, default=perturbation.CPU_IMPUTATION_THREADS)
    parser.add_argument("--smooth", action="store_true", help="blurred gradient maps (CAM-like) instead of raw")
    parser.add_argument("--metrics", default="", help="comma-separated metric ids (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="median of this many back-to-back pairs")
    args = parser.parse_args()
    tune_allocator()  # as xaibench run does
    perturbation.CPU_IMPUTATION_THREADS = args.imputation_threads
    road.CPU_IMPUTATION_THREADS = args.imputation_threads

    model, inputs, targets, saliency, samples = load_track(args.images, smooth=args.smooth)
    metrics = {cls.name: cls for cls in METRICS}
    chosen = [m for m in args.metrics.split(",") if m] or list(metrics)
    clock = ImputationClock()
    forward_only_time(model, inputs, min(8, len(inputs)), args.batch_size)  # warm-up

    print(f"EfficientNet-Lite0, {len(inputs)} photos, maps: {'smoothed ' if args.smooth else ''}input gradients,")
    print(f"batch size {args.batch_size}, torch threads {torch.get_num_threads()}")
    print(f"{'metric':28s} {'forwards':>8s} {'metric s':>9s} {'fwd-only s':>10s} {'ratio':>6s} {'imput. %':>8s}")

    def measure(label: str, names: list[str]) -> None:
        """Run ``names`` on a fresh batch, then the same number of forwards alone, ``--repeat``
        times back to back; print the pair with the median ratio (pairs share the machine's load)."""
        pairs = []
        for _ in range(args.repeat):
            batch = make_batch(model, inputs, targets, saliency, samples, args.batch_size)
            if "max_sensitivity" in names:
                batch.explainer = GradientExplainer()
            clock.seconds = 0.0
            seconds, forwards, out = 0.0, 0, None
            for name in names:
                metric = metrics[name]()
                took, out = timed(lambda batch=batch, metric=metric: metric.score(batch))
                seconds += took
                forwards += out.forward_passes
            base = forward_only_time(model, inputs, forwards, args.batch_size)
            ratio = seconds / base if base > 0 else float("nan")
            pairs.append((ratio, seconds, base, forwards, clock.seconds, out))
        pairs.sort(key=lambda p: (np.isnan(p[0]), p[0]))
        ratio, seconds, base, forwards, imputation, out = pairs[(len(pairs) - 1) // 2]
        if np.isnan(out.values).all():
            print(f"{label:28s} n/a: {out.reasons[0]}")
        elif forwards == 0:
            print(f"{label:28s} {0:8d} {seconds:9.2f} {'-':>10s} {'-':>6s}")
        else:
            share = f"{100 * imputation / seconds:7.1f}%" if imputation else ""
            print(f"{label:28s} {forwards:8d} {seconds:9.2f} {base:10.2f} {ratio:6.2f} {share:>8s}", flush=True)

    for name in chosen:
        measure(name, [name])
    for suffix in ("", "_black") if not args.metrics else ():
        measure(f"road trio{suffix}", [f"road_{kind}{suffix}" for kind in ("sufficiency", "necessity", "faithfulness")])


if __name__ == "__main__":
    main()
