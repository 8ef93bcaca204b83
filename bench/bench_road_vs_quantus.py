"""Our ROAD MoRF curve vs Quantus 0.6 ROAD on the same images and percentages.

EfficientNet-Lite0, the 8 real photos, percentages 1, 3, ..., 99 (Quantus' default
50), noisy linear imputation sigma 0.01, batch size 16 for ours (the run's default;
Quantus forwards one batch of all images per percentage). The allocator is tuned as
``xaibench run`` tunes it, for both. Stock Quantus raises IndexError on
3-channel attributions, so it runs through a subclass that ranks pixels on the
channel-summed map (as the test suite does). Both compute the same 400 perturbed
images (8 x 50) and the same 400 forward passes; the speed-up comes from the
imputation. Prints both wall times, their ratio, the time of the 400 forwards
alone (a floor for both), the best speed-up the forwards allow (Quantus over the forwards
alone) and the share of it reached, and the largest difference between the two MoRF curves
(the noise draws differ; with ``--noise 0`` both solve the same systems and agree
to float32 rounding).

Run: ``.venv/bin/python bench/bench_road_vs_quantus.py [--images 8] [--smooth] [--noise 0.01] [--skip-quantus]``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import quantus
import torch
from _faithfulness_common import forward_only_time, load_track, make_batch, timed

from xaibench.allocator import tune_allocator
from xaibench.metrics.faithfulness.road import RoadNecessity

PERCENTS = list(range(1, 100, 2))


class ChannelSummedROAD(quantus.ROAD):
    """Quantus 0.6 ROAD ranking the H*W pixels on the channel-summed map."""

    def evaluate_batch(self, model, x_batch, y_batch, a_batch, **kwargs):
        maps = a_batch.reshape(len(a_batch), -1, *x_batch.shape[-2:]).sum(axis=1).reshape(len(a_batch), -1)
        ranking = np.argsort(-maps, axis=1)
        hits = []
        for p in self.percentages:
            k = int(maps.shape[1] * p / 100)
            pairs = zip(x_batch, ranking, strict=True)
            perturbed = np.stack([self.perturb_func(arr=x, indices=r[:k]) for x, r in pairs])
            pred = model.predict(model.shape_input(perturbed, x_batch.shape, channel_first=True, batched=True))
            hits.append(y_batch == np.argmax(pred, axis=-1))
        return [np.stack(hits, axis=1).astype(int)]


class Recorder(torch.nn.Module):
    """Passes through to the model and keeps the softmax of every call."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.inner = module
        self.records: list[np.ndarray] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        self.records.append(torch.softmax(out.float(), dim=1).detach().cpu().numpy())
        return out


def quantus_road(
    model: Any,
    inputs: torch.Tensor,
    targets: np.ndarray,
    saliency: np.ndarray,
    percents: Sequence[float],
    *,
    noise: float,
    device: str = "cpu",
    timer: Callable[[Callable[[], Any]], tuple[float, Any]] = timed,
) -> tuple[float, Recorder]:
    """Quantus's ROAD (channel-summed) on the same inputs and maps, timed by ``timer``: its
    seconds and the :class:`Recorder` holding the probabilities of its forward passes. Shared
    with ``bench/gpu/road.py``."""
    recorder = Recorder(model.module).eval()
    metric = ChannelSummedROAD(
        noise=noise, percentages=list(percents), normalise=False, disable_warnings=True, display_progressbar=False
    )
    np.random.seed(0)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        seconds, _ = timer(
            lambda: metric(
                model=recorder,
                x_batch=inputs.numpy(),
                y_batch=targets,
                a_batch=saliency[:, None].astype(np.float32),
                device=device,
                batch_size=len(inputs),
            )
        )
    return seconds, recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--smooth", action="store_true")
    parser.add_argument("--skip-quantus", action="store_true", help="time ours and the forwards only")
    parser.add_argument("--noise", type=float, default=0.01, help="imputation noise sigma for both (0: exact check)")
    parser.add_argument("--batch-size", type=int, default=16, help="images per forward pass for ours")
    args = parser.parse_args()
    tune_allocator()

    model, inputs, targets, saliency, samples = load_track(args.images, smooth=args.smooth)
    necessity = RoadNecessity
    forward_only_time(model, inputs, len(inputs), args.batch_size)  # warm-up

    batch = make_batch(model, inputs, targets, saliency, samples, args.batch_size)
    ours_s, out = timed(lambda: necessity(road_noise=args.noise).score(batch))
    ours_curves = np.array([c["necessity"]["probability"] for c in out.curves])
    floor_s = forward_only_time(model, inputs, len(inputs) * len(PERCENTS), args.batch_size)
    threads = torch.get_num_threads()
    print(f"{len(inputs)} photos x {len(PERCENTS)} percentages, EfficientNet-Lite0, torch threads {threads}")
    print(f"ours (road_necessity, MoRF curve): {ours_s:8.2f} s  ({out.forward_passes} forward passes)")
    print(f"the {len(inputs) * len(PERCENTS)} forwards alone:        {floor_s:8.2f} s")
    if args.skip_quantus:
        return

    quantus_s, recorder = quantus_road(model, inputs, targets, saliency, PERCENTS, noise=args.noise)
    calls = recorder.records[-len(PERCENTS) :]
    quantus_curves = np.stack([probs[np.arange(len(targets)), targets] for probs in calls], axis=1)
    print(f"Quantus ROAD (channel-summed):     {quantus_s:8.2f} s")
    print(f"speed-up (Quantus / ours):         {quantus_s / ours_s:8.2f} x")
    bound = quantus_s / floor_s
    print(f"bound (Quantus / forwards alone):  {bound:8.2f} x")
    reached = quantus_s / ours_s / bound
    print(f"share of the bound reached:        {reached:8.2f}  (ours / forwards alone: {ours_s / floor_s:.2f} x)")
    why = "independent noise draws" if args.noise else "no noise: same systems"
    print(f"max |curve difference| ({why}): {np.abs(ours_curves - quantus_curves).max():.2e}")


if __name__ == "__main__":
    main()
