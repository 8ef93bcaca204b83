"""``road``: ROAD (``road_necessity``, noisy linear imputation, the torch solver on the device) on 8
photos with 50 steps (thresholds up to 100: percentages 1, 3, ..., 99), EfficientNet-Lite0.

Figures: its wall time; the time of the same number of forward passes of the model alone, in the
same batches (goal: ROAD at most 1.3x that); Quantus 0.6's ROAD on the same device, same images and
percentages (goal: ours at least 20x faster). The set-up is ``bench/bench_road_vs_quantus.py``'s.
Dry run: 2 photos, 5 steps (thresholds up to 10), on the CPU, still with the torch solver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .common import Config, goal, timed

BATCH = 16


def run(cfg: Config) -> dict[str, Any]:
    import quantus  # noqa: F401  (fail early, before the minutes of the rest)
    from _faithfulness_common import load_track
    from bench_road_vs_quantus import quantus_road

    from xaibench.api import ForwardCounter, MetricInput
    from xaibench.metrics.faithfulness.formulas import road_percents
    from xaibench.metrics.faithfulness.road import RoadNecessity

    n_images, thresholds = (2, (10,)) if cfg.dry else (8, (100,))
    percents = [int(p) for p in road_percents(thresholds)]
    model, inputs, targets, saliency, samples = load_track(n_images)
    model.module.to(cfg.device)
    x = inputs.to(cfg.device)

    def ours() -> Any:
        metric = RoadNecessity(road_noise=0.01, thresholds=list(thresholds))
        metric.imputation = "torch"
        counter = ForwardCounter(model.module, batch_size=BATCH, device=cfg.device)
        batch = MetricInput(
            saliency=saliency, concepts=None, samples=samples, targets=targets, inputs=x, model=model, forward=counter
        )
        return metric.score(batch)

    images = x.repeat(len(percents), 1, 1, 1)  # the same number of images as ROAD forwards

    def forwards() -> Any:
        return ForwardCounter(model.module, batch_size=BATCH, device=cfg.device)(images)

    timed(ours, cfg.device)  # warm-up: kernels, the solver's set-up
    ours_s, out = timed(ours, cfg.device, repeat=1 if cfg.dry else 2)
    forwards_s, _ = timed(forwards, cfg.device, repeat=2)
    quantus_s, _ = quantus_road(
        model,
        inputs,
        targets,
        saliency,
        percents,
        noise=0.01,
        device=cfg.device,
        timer=lambda fn: timed(fn, cfg.device),
    )
    values = np.asarray(out.values, dtype=np.float64)
    return {
        "setup": f"{n_images} photos x {len(percents)} steps, EfficientNet-Lite0, batch {BATCH}, torch imputation",
        "figures": {
            "road_s": ours_s,
            "forwards_alone_s": forwards_s,
            "quantus_road_s": quantus_s,
            "road_over_forwards": ours_s / forwards_s,
            "quantus_over_road": quantus_s / ours_s,
            "forward_passes": float(out.forward_passes),
            "finite_values": float(np.isfinite(values).all()),
        },
        "goals": {
            "road_over_forwards": goal(ours_s / forwards_s, "<=", 1.3),
            "speedup_over_quantus": goal(quantus_s / ours_s, ">=", 20),
        },
    }
