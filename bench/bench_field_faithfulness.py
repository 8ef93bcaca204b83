"""The field's faithfulness metrics (DESIGN 3b, issue 27): time of each native metric against
Quantus 0.6 on the same inputs, and against its own forward passes.

Inputs: EfficientNet-Lite0 on the photos (``_faithfulness_common.load_track``: predicted targets,
input-gradient maps). For every metric: ours (seconds and forward passes), the same number of
plain batched forwards through a ForwardCounter, Quantus on the same images, maps and step or
run counts (Quantus's map is the pixel map broadcast over the channels, so its features are
channel values: issue 75; its step size is chosen so that both forward as many images), and the
ratios ``Quantus / ours`` (target >= 3) and ``ours / forwards`` (target <= 1.3), all measured
in one run (ours and the forwards: best of ``--repeat`` runs, the machine being shared;
Quantus: one run). Parameters are smaller than the metrics' defaults to keep the run within minutes
(printed); ``--scale`` multiplies the step and run counts.

Run: ``PYTHONPATH=. python bench/bench_field_faithfulness.py [--images 8] [--scale 1] [--skip-quantus] [--device cuda]``
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import numpy as np
import torch
from _faithfulness_common import forward_only_time, load_track, make_batch, quantus_seconds, timed

from xaibench.allocator import tune_allocator
from xaibench.metrics.faithfulness.field import FIELD_FAITHFULNESS_METRICS

METRICS = {cls.name: cls for cls in FIELD_FAITHFULNESS_METRICS}


def channel_mask_replacement(arr, mask, **kwargs):
    """Quantus's ``baseline_replacement_by_mask`` with its (B, 1, H, W) mask broadcast over the
    channels: stock Quantus 0.6 IROF asserts equal shapes and fails on three-channel images."""
    from quantus.functions.perturb_func import baseline_replacement_by_mask

    return baseline_replacement_by_mask(arr, np.broadcast_to(mask, arr.shape), **kwargs)


def divisor_near(n: int, target: float) -> int:
    """The divisor of ``n`` nearest to ``target`` (at least 1)."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: (abs(d - target), d))


def plans(n_pixels: int, scale: float) -> list[tuple[str, dict[str, Any], tuple[str, dict[str, Any], int]]]:
    """(metric id, our parameters, (Quantus class, its parameters, its ``__call__`` batch size))."""
    # Quantus asserts that features_in_step divides H*W while its features are the 3*H*W channel
    # values: with m dividing H*W, Quantus's features_in_step = H*W / m gives 3m steps, as ours.
    m = divisor_near(n_pixels, 16 * scale)
    steps, fis = 3 * m, n_pixels // m
    runs = max(2, int(50 * scale))
    mc_m, mc_draws = divisor_near(n_pixels, 4 * scale), 4
    mc_steps, mc_fis = 3 * mc_m, n_pixels // mc_m
    return [
        (
            "faithfulness_correlation",
            {"nr_runs": runs, "subset_size": 224},
            ("FaithfulnessCorrelation", dict(nr_runs=runs, subset_size=3 * 224, perturb_baseline=0.0), 64),
        ),
        (
            "faithfulness_estimate",
            {"steps": steps},
            ("FaithfulnessEstimate", dict(features_in_step=fis, perturb_baseline=0.0), 64),
        ),
        (
            "monotonicity",
            {"steps": steps},
            ("Monotonicity", dict(features_in_step=fis, perturb_baseline=0.0), 64),
        ),
        (
            "monotonicity_correlation",
            {"steps": mc_steps, "nr_samples": mc_draws},
            ("MonotonicityCorrelation", dict(features_in_step=mc_fis, nr_samples=mc_draws), 64),
        ),
        (
            "pixel_flipping",
            {"steps": steps},
            ("PixelFlipping", dict(features_in_step=fis, perturb_baseline=0.0), 64),
        ),
        (
            "region_perturbation",
            {"patch_size": 16, "regions_evaluation": steps, "baseline": "zeros"},
            ("RegionPerturbation", dict(patch_size=16, regions_evaluation=steps, perturb_baseline=0.0), 64),
        ),
        (
            "selectivity",
            {"patch_size": 32},
            ("Selectivity", dict(patch_size=32, perturb_baseline=0.0), 64),
        ),
        (
            # SLIC at scikit-image's defaults on both sides (Quantus cannot change them): ~100 segments.
            "irof",
            {},
            ("IROF", dict(perturb_baseline=0.0, return_aggregate=False, perturb_func=channel_mask_replacement), 64),
        ),
        (
            "sufficiency",
            {},
            ("Sufficiency", dict(threshold=0.6), 64),
        ),
        (
            # Different computations (docs/metrics.md), the same number of forwards: Quantus removes
            # the (224 / 56)^2 = 16 squares one after another, ours draws 16 Gaussian perturbations.
            "infidelity",
            {"n_perturb_samples": n_pixels // 56**2},
            ("Infidelity", dict(perturb_patch_sizes=[56], n_perturb_samples=1, perturb_baseline=0.0), 64),
        ),
        (
            # Quantus: 3m cumulative steps (one correlation per step across the batch); ours: 3 sizes of
            # m random subsets, 3m images per sample.
            "sensitivity_n",
            {"sizes": 3, "nr_runs": m},
            ("SensitivityN", dict(features_in_step=fis, perturb_baseline=0.0, return_aggregate=False), 64),
        ),
    ]


def run_quantus(spec, model, inputs, targets, saliency, device: str = "cpu") -> float:
    import quantus

    cls, params, batch_size = spec
    metric = getattr(quantus, cls)(**params, disable_warnings=True, display_progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds = quantus_seconds(metric, model, inputs, targets, saliency, device, softmax=True, batch_size=batch_size)
    return seconds


def measure(
    model,
    inputs,
    targets,
    saliency,
    samples,
    *,
    device: str = "cpu",
    batch_size: int = 16,
    repeat: int = 2,
    scale: float = 1.0,
    quantus: bool = True,
    only: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per metric: ``metric``, ``params``, ``forwards``, ``ours_s``, ``forwards_s``,
    ``ours_over_forwards`` (target <= 1.3) and, with ``quantus``, ``quantus_s`` and
    ``quantus_over_ours`` (target >= 3). ``model`` and ``inputs`` are moved to ``device``."""
    if not hasattr(np, "trapz"):  # Quantus 0.6's AUC helper calls np.trapz, which numpy 2 removed
        np.trapz = np.trapezoid
    model.module.to(device)
    x = inputs.to(device)
    forward_only_time(model, x, len(x), batch_size, device)  # warm-up
    rows = []
    for name, params, factory in plans(int(x.shape[-1] * x.shape[-2]), scale):
        if only and name not in only:
            continue
        best = []
        for _ in range(max(1, repeat)):  # a fresh batch each time: nothing memoised
            batch = make_batch(model, x, targets, saliency, samples, batch_size, device)
            best.append(
                timed(lambda name=name, params=params, batch=batch: METRICS[name](**params).score(batch), device)
            )
        ours_s, out = min(best, key=lambda r: r[0])
        floor_s = min(
            forward_only_time(model, x, out.forward_passes, batch_size, device) for _ in range(max(1, repeat))
        )
        row = {
            "metric": name,
            "params": params,
            "forwards": int(out.forward_passes),
            "ours_s": ours_s,
            "forwards_s": floor_s,
            "ours_over_forwards": ours_s / floor_s,
        }
        if quantus:
            row["quantus_s"] = run_quantus(factory, model, inputs, targets, saliency, device)
            row["quantus_over_ours"] = row["quantus_s"] / ours_s
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply step and run counts")
    parser.add_argument("--batch-size", type=int, default=16, help="images per forward pass for ours")
    parser.add_argument("--skip-quantus", action="store_true")
    parser.add_argument("--repeat", type=int, default=2, help="ours and the forwards: best of this many runs")
    parser.add_argument("--only", nargs="*", default=None, help="metric ids to time (default: all)")
    parser.add_argument("--device", default="cpu", help="where the model runs, both sides (e.g. cuda)")
    args = parser.parse_args()
    tune_allocator()

    model, inputs, targets, saliency, samples = load_track(args.images)
    print(
        f"{len(inputs)} photos, EfficientNet-Lite0 at {inputs.shape[-1]} px, torch threads {torch.get_num_threads()}, "
        f"our batch size {args.batch_size}, device {args.device}"
    )
    header = f"{'metric':26s} {'params':36s} {'fwd':>6s} {'ours s':>8s} {'fwd s':>8s} {'ours/fwd':>8s}"
    print(header + ("" if args.skip_quantus else f" {'Quantus s':>9s} {'Q/ours':>7s}"), flush=True)
    rows = measure(
        model,
        inputs,
        targets,
        saliency,
        samples,
        device=args.device,
        batch_size=args.batch_size,
        repeat=args.repeat,
        scale=args.scale,
        quantus=not args.skip_quantus,
        only=args.only,
    )
    for r in rows:
        text = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        line = f"{r['metric']:26s} {text:36s} {r['forwards']:6d} {r['ours_s']:8.2f} {r['forwards_s']:8.2f}"
        line += f" {r['ours_over_forwards']:8.2f}"
        if "quantus_s" in r:
            line += f" {r['quantus_s']:9.2f} {r['quantus_over_ours']:7.2f}"
        print(line)


if __name__ == "__main__":
    main()
