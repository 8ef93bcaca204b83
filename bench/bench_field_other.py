"""Complexity, axiomatic and the newer sanity metrics (DESIGN 3b) against Quantus 0.6 on the same inputs.

EfficientNet-Lite0, the 8 real photos, xaibench's ``gradient`` explainer (|d logit / d x|, max
over channels) for the maps and for every metric that re-runs the explainer; Quantus gets the
same maps and, where it re-runs an explainer, the same one (``smooth_mprt``: Quantus's
``SmoothMPRT`` explains through ``quantus.explain``, here captum's Saliency, the same gradient).
For each metric: our wall time, Quantus's, their ratio (Quantus / ours), our forward passes and,
for the metrics whose cost is forward passes, the time of those forwards alone and ours over it.

Parameters: ``non_sensitivity`` ours with 16 px patches (196 features, every channel together: 196
forwards per image); Quantus 0.6 ``NonSensitivity`` runs only with ``features_in_step = 1`` (a
larger step raises a broadcasting ValueError), one forward per value, 3 x 224 x 224 = 150528 per
image: its time is not measured but estimated from the forward floor (marked ``~``), a lower
bound; ``smooth_mprt`` n = 10
on both sides, Quantus scoring only the fully randomised model (``skip_layers``,
``return_last_correlation``); ``efficient_mprt`` Quantus with ``skip_layers`` (only the last,
fully randomised model explained). Targets: forward-pass metrics >= 3x faster than Quantus
and <= 1.3x their own forwards; explainer re-running ones at least as fast as Quantus.

Run: ``.venv/bin/python bench/bench_field_other.py [--images 8] [--metric ID ...] [--repeat 1] [--skip-quantus]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import quantus
import torch
from _faithfulness_common import forward_only_time, load_track, make_batch, timed

from xaibench.allocator import tune_allocator
from xaibench.api import BatchMemo, ForwardCounter, Metric, MetricInput
from xaibench.explainers.gradient import GradientExplainer
from xaibench.metrics.other.axiomatic import Completeness, NonSensitivity
from xaibench.metrics.other.complexity import Complexity, EffectiveComplexity
from xaibench.metrics.sanity.mprt import EfficientMPRT, SmoothMPRT
from xaibench.metrics.sanity.random_logit import RandomLogit

FORWARD_METRICS = ("complexity", "effective_complexity", "completeness", "non_sensitivity")
RERUN_METRICS = ("random_logit", "smooth_mprt", "efficient_mprt")


def quantus_explain() -> Callable[..., np.ndarray]:
    """Quantus's ``explain_func``: xaibench's gradient explainer on whatever module Quantus passes."""
    explainer = GradientExplainer()

    def explain(model: torch.nn.Module, inputs: np.ndarray, targets: np.ndarray, **_: Any) -> np.ndarray:
        holder = type("Holder", (), {})()
        holder.module = model
        x = torch.as_tensor(np.asarray(inputs), dtype=torch.float32)
        return explainer.explain(holder, x, torch.as_tensor(np.asarray(targets)))[:, None]

    return explain


def ours_and_quantus() -> dict[str, tuple[Metric, Callable[[], Any]]]:
    """Metric id -> (our metric, a maker of Quantus's with the parameters of the module doc)."""
    return {
        "complexity": (Complexity(), lambda: quantus.Complexity(disable_warnings=True)),
        "effective_complexity": (EffectiveComplexity(), lambda: quantus.EffectiveComplexity(disable_warnings=True)),
        "completeness": (Completeness(), lambda: quantus.Completeness(perturb_baseline=0.0, disable_warnings=True)),
        "non_sensitivity": (
            NonSensitivity(),
            lambda: quantus.NonSensitivity(perturb_baseline=0.0, features_in_step=1, disable_warnings=True),
        ),
        "random_logit": (RandomLogit(), lambda: quantus.RandomLogit(num_classes=1000, disable_warnings=True)),
        "smooth_mprt": (
            SmoothMPRT(n=10),
            lambda: quantus.SmoothMPRT(
                nr_samples=10, skip_layers=True, return_last_correlation=True, disable_warnings=True
            ),
        ),
        "efficient_mprt": (EfficientMPRT(), lambda: quantus.EfficientMPRT(skip_layers=True, disable_warnings=True)),
    }


def fresh(batch: MetricInput) -> MetricInput:
    """The batch with a new memo and forward counter (a repeated timing reuses nothing)."""
    counter = ForwardCounter(batch.forward.fn, batch.forward.batch_size)
    return dataclasses.replace(batch, memo=BatchMemo(), forward=counter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--metric", action="append", help="only these metric ids (repeatable)")
    parser.add_argument("--skip-quantus", action="store_true")
    parser.add_argument("--batch-size", type=int, default=16, help="images per forward pass for ours")
    parser.add_argument("--repeat", type=int, default=1, help="time each side this many times, keep the fastest")
    args = parser.parse_args()
    tune_allocator()
    model, inputs, targets, _, samples = load_track(args.images)
    explainer = GradientExplainer()
    saliency = explainer.explain(model, inputs, torch.as_tensor(targets)).astype(np.float64)
    forward_only_time(model, inputs, len(inputs), args.batch_size)  # warm-up
    table = ours_and_quantus()
    wanted = args.metric or list(table)
    print(f"{len(inputs)} photos, EfficientNet-Lite0, gradient maps, torch threads {torch.get_num_threads()}")
    print(f"{'metric':22} {'ours s':>8} {'Quantus s':>10} {'Q / ours':>9}", end=" ")
    print(f"{'forwards':>9} {'fwd s':>8} {'ours/fwd':>9}")
    for name in wanted:
        metric, make_quantus = table[name]
        batch = make_batch(model, inputs, targets, saliency, samples, args.batch_size)
        batch.explainer = explainer
        runs = [timed(lambda metric=metric, batch=batch: metric.score(fresh(batch))) for _ in range(args.repeat)]
        ours_s, out = min(runs, key=lambda run: run[0])
        fwd = out.forward_passes
        if name in FORWARD_METRICS and fwd:
            floor_s = min(forward_only_time(model, inputs, fwd, args.batch_size) for _ in range(args.repeat))
            floor = f"{floor_s:8.2f} {ours_s / floor_s:8.2f}x"
        else:
            floor = f"{'-':>8} {'-':>9}"
        quantus_text = f"{'-':>10} {'-':>9}"
        if name == "non_sensitivity" and not args.skip_quantus:
            # Quantus 0.6 runs only with features_in_step = 1 (larger steps raise a broadcasting
            # ValueError): one forward per value, C H W per image. Its forwards alone, estimated:
            per_image = forward_only_time(model, inputs, len(inputs), args.batch_size) / len(inputs)
            values = int(np.prod(inputs.shape[1:]))
            quantus_s = per_image * values * len(inputs)
            quantus_text = f"{quantus_s:9.0f}~ {quantus_s / ours_s:8.0f}x"
        elif not args.skip_quantus:
            q = make_quantus()
            kwargs: dict[str, Any] = {}
            if name in RERUN_METRICS:
                kwargs["explain_func"] = quantus_explain()
            if name == "smooth_mprt":
                kwargs = {"explain_func": quantus.explain, "explain_func_kwargs": {"method": "Saliency"}}
            np.random.seed(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                quantus_s = min(
                    timed(
                        lambda q=q, kwargs=kwargs: q(
                            model=model.module,
                            x_batch=inputs.numpy(),
                            y_batch=targets,
                            a_batch=saliency[:, None].astype(np.float32),
                            batch_size=len(inputs),
                            **kwargs,
                        )
                    )[0]
                    for _ in range(args.repeat)
                )
            quantus_text = f"{quantus_s:10.2f} {quantus_s / ours_s:8.2f}x"
        print(f"{name:22} {ours_s:8.2f} {quantus_text} {fwd:9d} {floor}", flush=True)


if __name__ == "__main__":
    main()
