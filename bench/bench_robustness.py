"""Time of each robustness metric (DESIGN 3b) against Quantus 0.6's on the same inputs.

8 photos, EfficientNet-Lite0, a gradient explainer (d p_target / dx, |.| summed over channels).
For each metric: the wall time of ``metric.score`` on a fresh batch (nothing memoised: the metric
builds the shared perturbation pass itself) and of the Quantus class on the same perturbed inputs
(its ``perturb_func`` returns our perturbations in order; ``nr_samples = n``), the explainer being
the same function on both sides, Quantus with ``return_nan_when_prediction_changes=True`` (it then
checks the predicted class as we do); ratio = Quantus / ours (target: at least 1). Quantus's
``Continuity`` translates the input (it takes no perturbation function), so its row compares
``nr_steps = n`` translations with our n perturbations: same number of explanations, other inputs.
The last row scores all seven metrics on one batch (they share one pass) against the sum of
Quantus's times. Also printed: each metric's time over the time of its own forward passes and
explanations alone.

Run: ``.venv/bin/python bench/bench_robustness.py [--images 8] [--n 10] [--metrics a,b] [--device cuda]``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
from _faithfulness_common import load_track, make_batch, quantus_seconds, timed

from xaibench.api import Explainer
from xaibench.metrics.robustness import ROBUSTNESS_METRICS
from xaibench.metrics.robustness.context import perturbed_pass
from xaibench.metrics.robustness.metrics import explain_chunk
from xaibench.runner.config import RunConfig

FORWARD_BATCH = RunConfig.forward_batch
"""Images per forward pass on our side: the runner's default ``--batch-size`` (on 2 CPU cores,
EfficientNet-Lite0 forwards cost about 1.8x more per image in batches of 64 than of 8)."""


class GradientExplainer(Explainer):
    name = "bench-gradient"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        device = next(model.module.parameters()).device
        x = torch.as_tensor(inputs, device=device).detach().clone().requires_grad_(True)
        probs = torch.softmax(model.module(x), dim=1)
        probs.gather(1, torch.as_tensor(targets, device=device).long().view(-1, 1)).sum().backward()
        return x.grad.abs().sum(dim=1).cpu().numpy()


QUANTUS = {
    "local_lipschitz_estimate": ("LocalLipschitzEstimate", {}),
    "max_sensitivity": ("MaxSensitivity", {}),
    "avg_sensitivity": ("AvgSensitivity", {}),
    "continuity": ("Continuity", {}),
    "relative_input_stability": ("RelativeInputStability", {}),
    "relative_output_stability": ("RelativeOutputStability", {}),
    "relative_representation_stability": ("RelativeRepresentationStability", {}),
}


def measure(
    model, inputs, targets, samples, *, n: int = 10, metrics: list[str] | None = None, device: str = "cpu"
) -> dict[str, Any]:
    """``{"pass_s", "forwards_s", "explain_s", "rows": [{"metric", "ours_s", "quantus_s",
    "quantus_over_ours" (target >= 1), "ours_over_own_work"}], "together": {"ours_s", "quantus_s",
    "quantus_over_ours"}}``; ``model`` is moved to ``device`` (Quantus runs there too)."""
    import quantus

    torch.set_grad_enabled(True)
    model.module.to(device)
    x = inputs.to(device)
    explainer = GradientExplainer()
    saliency = explainer.explain(model, x, targets).astype(np.float64)
    wanted = [c for c in ROBUSTNESS_METRICS if not metrics or c.name in metrics]

    def fresh():
        batch = make_batch(model, x, targets, saliency, samples, FORWARD_BATCH, device)
        batch.explainer = explainer
        return batch

    explainer.explain(model, x[:2], targets[:2])  # warm-up (first-call costs on neither side)
    wanted[0](n=2).score(fresh())  # and the batch shapes of ours (oneDNN builds its kernels per shape)
    # The perturbed inputs both sides see, and the cost of their forwards and explanations alone.
    probe = fresh()
    chunk = explain_chunk(probe)
    pass_s, (p, _) = timed(lambda: perturbed_pass(probe, n, 0.02, chunk), device)
    assert not isinstance(p, str)
    flat = torch.from_numpy(p.x_p.reshape(-1, *p.x_p.shape[2:])).to(device)
    every = torch.cat([x, flat])

    def forwards() -> None:
        with torch.inference_mode():
            for k in range(0, len(every), FORWARD_BATCH):
                model.module(every[k : k + FORWARD_BATCH])

    reps = np.repeat(targets, n)

    def explanations() -> None:
        for k in range(0, len(flat), chunk):
            explainer.explain(model, flat[k : k + chunk], reps[k : k + chunk])

    forwards_s, _ = timed(forwards, device)
    explain_s, _ = timed(explanations, device)
    alone = forwards_s + explain_s
    layer = [name for name, m in model.module.named_modules() if isinstance(m, torch.nn.Linear)][-1]

    def quantus_time(name: str) -> float:
        cls_name, extra = QUANTUS[name]
        step = iter(range(n))

        def perturb_func(arr, **kwargs):
            return p.x_p[:, next(step)].reshape(len(arr), -1)

        def explain_func(model, inputs, targets, **kwargs):  # Quantus passes these by keyword
            return explainer.explain(track_model, inputs, targets)[:, None]

        kwargs = {"abs": False, "normalise": False, "disable_warnings": True, **extra}
        # Quantus's check of the class, as ours; not for Continuity (Quantus 0.6 then writes np.NaN, gone in NumPy 2)
        kwargs["return_nan_when_prediction_changes"] = name != "continuity"
        if name == "continuity":
            kwargs["nr_steps"] = n
        else:
            kwargs.update(nr_samples=n, perturb_func=perturb_func)
        if name == "relative_representation_stability":
            kwargs["layer_names"] = [layer]
        metric = getattr(quantus, cls_name)(**kwargs)
        seconds = quantus_seconds(
            metric,
            model,
            inputs,
            targets,
            saliency,
            device,
            explain_func=explain_func,
            softmax=False,
            batch_size=len(inputs),
        )
        return seconds

    track_model = model
    rows = []
    for cls in wanted:
        ours, _ = timed(lambda cls=cls: cls(n=n).score(fresh()), device)
        theirs = quantus_time(cls.name)
        rows.append(
            {
                "metric": cls.name,
                "ours_s": ours,
                "quantus_s": theirs,
                "quantus_over_ours": theirs / ours,
                "ours_over_own_work": ours / alone,
            }
        )
    batch = fresh()
    together, _ = timed(lambda: [cls(n=n).score(batch) for cls in wanted], device)
    total_q = sum(r["quantus_s"] for r in rows)
    return {
        "pass_s": pass_s,
        "forwards_s": forwards_s,
        "explain_s": explain_s,
        "rows": rows,
        "together": {"ours_s": together, "quantus_s": total_q, "quantus_over_ours": total_q / together},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--metrics", default="")
    parser.add_argument("--device", default="cpu", help="where the model runs, both sides (e.g. cuda)")
    args = parser.parse_args()
    model, inputs, targets, _, samples = load_track(args.images)
    wanted = args.metrics.split(",") if args.metrics else None
    out = measure(model, inputs, targets, samples, n=args.n, metrics=wanted, device=args.device)
    threads, device = torch.get_num_threads(), args.device
    print(f"{len(inputs)} photos, EfficientNet-Lite0, gradient explainer, n = {args.n}, {threads} threads, {device}")
    print(
        f"shared pass {out['pass_s']:.2f} s; its forwards alone {out['forwards_s']:.2f} s, "
        f"explanations alone {out['explain_s']:.2f} s"
    )
    print(f"{'metric':36} {'ours s':>8} {'quantus s':>10} {'quantus/ours':>13} {'ours/own work':>14}")
    for r in out["rows"]:
        note = " (Quantus: translations)" if r["metric"] == "continuity" else ""
        print(
            f"{r['metric']:36} {r['ours_s']:8.2f} {r['quantus_s']:10.2f} {r['quantus_over_ours']:13.2f}"
            f" {r['ours_over_own_work']:14.2f}{note}"
        )
    t = out["together"]
    print(f"{'all, one shared pass':36} {t['ours_s']:8.2f} {t['quantus_s']:10.2f} {t['quantus_over_ours']:13.2f}")


if __name__ == "__main__":
    main()
