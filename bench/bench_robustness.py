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

Run: ``.venv/bin/python bench/bench_robustness.py [--images 8] [--n 10] [--metrics a,b]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _faithfulness_common import load_track, make_batch

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
        x = torch.as_tensor(inputs).detach().clone().requires_grad_(True)
        probs = torch.softmax(model.module(x), dim=1)
        probs.gather(1, torch.as_tensor(targets).long().view(-1, 1)).sum().backward()
        return x.grad.abs().sum(dim=1).numpy()


QUANTUS = {
    "local_lipschitz_estimate": ("LocalLipschitzEstimate", {}),
    "max_sensitivity": ("MaxSensitivity", {}),
    "avg_sensitivity": ("AvgSensitivity", {}),
    "continuity": ("Continuity", {}),
    "relative_input_stability": ("RelativeInputStability", {}),
    "relative_output_stability": ("RelativeOutputStability", {}),
    "relative_representation_stability": ("RelativeRepresentationStability", {}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--metrics", default="")
    args = parser.parse_args()
    import quantus

    torch.set_grad_enabled(True)
    model, inputs, targets, _, samples = load_track(args.images)
    explainer = GradientExplainer()
    saliency = explainer.explain(model, inputs, targets).astype(np.float64)
    n = args.n
    wanted = [c for c in ROBUSTNESS_METRICS if not args.metrics or c.name in args.metrics.split(",")]

    def fresh():
        batch = make_batch(model, inputs, targets, saliency, samples, FORWARD_BATCH)
        batch.explainer = explainer
        return batch

    explainer.explain(model, inputs[:2], targets[:2])  # warm-up (first-call costs on neither side)
    wanted[0](n=2).score(fresh())  # and the batch shapes of ours (oneDNN builds its kernels per shape)
    # The perturbed inputs both sides see, and the cost of their forwards and explanations alone.
    probe = fresh()
    start = time.perf_counter()
    chunk = explain_chunk(probe)
    p, _ = perturbed_pass(probe, n, 0.02, chunk)
    pass_s = time.perf_counter() - start
    assert not isinstance(p, str)
    flat = torch.from_numpy(p.x_p.reshape(-1, *p.x_p.shape[2:]))
    start = time.perf_counter()
    with torch.inference_mode():
        for k in range(0, len(flat) + len(inputs), FORWARD_BATCH):
            model.module(torch.cat([inputs, flat])[k : k + FORWARD_BATCH])
    forwards_s = time.perf_counter() - start
    start = time.perf_counter()
    reps = np.repeat(targets, n)
    for k in range(0, len(flat), chunk):
        explainer.explain(model, flat[k : k + chunk], reps[k : k + chunk])
    explain_s = time.perf_counter() - start
    alone = forwards_s + explain_s
    layer = [name for name, m in model.module.named_modules() if isinstance(m, torch.nn.Linear)][-1]
    track_model = model

    def quantus_time(name: str) -> float:
        cls_name, extra = QUANTUS[name]
        step = iter(range(n))

        def perturb_func(arr, **kwargs):
            return p.x_p[:, next(step)].reshape(len(arr), -1)

        def explain_func(model, inputs, targets, **kwargs):  # Quantus passes these by keyword
            return explainer.explain(track_model, torch.as_tensor(inputs), targets)[:, None]

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
        start = time.perf_counter()
        metric(
            model=model.module,
            x_batch=inputs.numpy(),
            y_batch=np.asarray(targets),
            a_batch=saliency[:, None].astype(np.float32),
            explain_func=explain_func,
            channel_first=True,
            softmax=False,
            device="cpu",
            batch_size=len(inputs),
        )
        return time.perf_counter() - start

    threads = torch.get_num_threads()
    print(f"{len(inputs)} photos, EfficientNet-Lite0, gradient explainer, n = {n}, torch threads {threads}")
    print(f"shared pass {pass_s:.2f} s; its forwards alone {forwards_s:.2f} s, explanations alone {explain_s:.2f} s")
    print(f"{'metric':36} {'ours s':>8} {'quantus s':>10} {'quantus/ours':>13} {'ours/own work':>14}")
    total_q = 0.0
    for cls in wanted:
        start = time.perf_counter()
        cls(n=n).score(fresh())
        ours = time.perf_counter() - start
        theirs = quantus_time(cls.name)
        total_q += theirs
        note = " (Quantus: translations)" if cls.name == "continuity" else ""
        print(f"{cls.name:36} {ours:8.2f} {theirs:10.2f} {theirs / ours:13.2f} {ours / alone:14.2f}{note}")
    batch = fresh()
    start = time.perf_counter()
    for cls in wanted:
        cls(n=n).score(batch)
    together = time.perf_counter() - start
    print(f"{'all, one shared pass':36} {together:8.2f} {total_q:10.2f} {total_q / together:13.2f}")


if __name__ == "__main__":
    main()
