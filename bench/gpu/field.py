"""``field``: the field's metrics of DESIGN 3b (issue 27) against Quantus 0.6 on the device: the
eleven faithfulness metrics whose cost is forward passes (``bench/bench_field_faithfulness.py``)
and the seven robustness metrics whose cost is re-running the explainer (``bench/bench_robustness.py``),
8 photos, EfficientNet-Lite0, both sides on the same device, inputs and step counts.

Goals, per metric: a forward-pass metric at least 3x faster than Quantus and at most 1.3x the time
of its own forward passes alone, and (CUDA only) at most :data:`MAX_HOST_COPIES` device-to-host
copies in one call (``torch.profiler``); a robustness metric at least as fast as Quantus. Where
their time goes: the ``field-profile`` step.

Dry run: 2 photos, a tenth of the step counts, one repeat, three faithfulness and two robustness
metrics (:data:`DRY_FAITHFULNESS`, :data:`DRY_ROBUSTNESS`), on the CPU (the goals are not expected
to hold there).
"""

from __future__ import annotations

from typing import Any

from .common import Config, dtoh_copies, goal

MAX_HOST_COPIES = 4
"""Device-to-host copies one faithfulness metric may make on a batch: the clean probabilities,
the scores (one copy after the last forward), and at most two of per-sample sums or orders; a copy
per forward batch would make the host wait for every forward before queueing the next."""

DRY_FAITHFULNESS = ["faithfulness_correlation", "pixel_flipping", "infidelity"]
DRY_ROBUSTNESS = ["max_sensitivity", "relative_input_stability"]
"""The dry run's metrics: one of each kind of perturbation (random subsets, ordered steps, noise;
the shared perturbation pass and a stability ratio), to check the plumbing in seconds."""


def run(cfg: Config) -> dict[str, Any]:
    import quantus  # noqa: F401  (fail early, before the minutes of the rest)
    from _faithfulness_common import load_track
    from bench_field_faithfulness import measure as measure_faithfulness
    from bench_robustness import measure as measure_robustness

    n_images = 2 if cfg.dry else 8
    model, inputs, targets, saliency, samples = load_track(n_images)
    rows = measure_faithfulness(
        model,
        inputs,
        targets,
        saliency,
        samples,
        device=cfg.device,
        repeat=1 if cfg.dry else 2,
        scale=0.1 if cfg.dry else 1.0,
        only=DRY_FAITHFULNESS if cfg.dry else None,
    )
    figures: dict[str, float] = {}
    goals: dict[str, dict[str, Any]] = {}
    for r in rows:
        name = r["metric"]
        figures[f"{name} ours s"] = r["ours_s"]
        figures[f"{name} Quantus/ours"] = r["quantus_over_ours"]
        figures[f"{name} ours/forwards"] = r["ours_over_forwards"]
        goals[f"{name} Quantus/ours"] = goal(r["quantus_over_ours"], ">=", 3)
        goals[f"{name} ours/forwards"] = goal(r["ours_over_forwards"], "<=", 1.3)
    if cfg.cuda:
        copies = host_copies(model, inputs, targets, saliency, samples, cfg.device)
        for name, count in copies.items():
            figures[f"{name} host copies"] = count
            goals[f"{name} host copies"] = goal(count, "<=", MAX_HOST_COPIES)
    model, inputs, targets, _, samples = load_track(n_images)  # a fresh model: nothing left from above
    robust = measure_robustness(
        model,
        inputs,
        targets,
        samples,
        n=4 if cfg.dry else 10,
        device=cfg.device,
        metrics=DRY_ROBUSTNESS if cfg.dry else None,
    )
    for r in robust["rows"]:
        name = r["metric"]
        figures[f"{name} ours s"] = r["ours_s"]
        figures[f"{name} Quantus/ours"] = r["quantus_over_ours"]
        figures[f"{name} ours/own work"] = r["ours_over_own_work"]
        goals[f"{name} Quantus/ours"] = goal(r["quantus_over_ours"], ">=", 1)
    figures["robustness all, one pass, Quantus/ours"] = robust["together"]["quantus_over_ours"]
    return {"figures": figures, "goals": goals, "faithfulness": rows, "robustness": robust}


def host_copies(model: Any, inputs: Any, targets: Any, saliency: Any, samples: Any, device: str) -> dict[str, int]:
    """Per faithfulness metric, the device-to-host copies of one call on the bench's batch (after
    the timed calls above: warm)."""
    from _faithfulness_common import make_batch
    from bench_field_faithfulness import METRICS, plans

    x = inputs.to(device)
    counts = {}
    for name, params, _ in plans(int(x.shape[-1] * x.shape[-2]), 1.0):
        batch = make_batch(model, x, targets, saliency, samples, 16, device)
        counts[name] = dtoh_copies(lambda name=name, params=params, batch=batch: METRICS[name](**params).score(batch))
    return counts
