"""Pointing game: xaibench vs Quantus 0.6 on one batch of 64 saliency maps at 224 x 224.

Prints both times (best of several repeats, one process, same inputs) and the ratio;
the goal is xaibench >= 20x faster. Two xaibench timings are reported:

- ``pure``: :func:`xaibench.metrics.alignment.formulas.pointing_game` on the normalised maps (the
  same arrays Quantus gets, Quantus with its own normalisation and abs disabled);
- ``metric``: the registered ``pointing_game`` metric from raw maps and ``Sample`` ground
  truth, including normalisation (positive part, min-max), on a fresh ``MetricInput``.

For context the script also times Quantus's ``evaluate_batch`` alone: its kernel is
vectorised too; most of ``PointingGame.__call__`` is spent in input checks
(``quantus.helpers.asserts.assert_attributions``), which every user call pays.

Run: ``.venv/bin/python bench/bench_pointing_game.py``
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from xaibench.api import GroundTruth, MetricInput, Sample
from xaibench.metrics.alignment.formulas import pointing_game
from xaibench.metrics.alignment.metrics import PointingGameMetric
from xaibench.metrics.normalise import normalise_saliency

N, SIZE, REPEATS = 64, 224, 5


def best_of(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import quantus

    rng = np.random.default_rng(0)
    raw = rng.normal(size=(N, SIZE, SIZE)).astype(np.float32)
    masks = np.zeros((N, SIZE, SIZE), bool)
    for i in range(N):
        y, x = rng.integers(0, SIZE - 80, size=2)
        masks[i, y : y + rng.integers(20, 80), x : x + rng.integers(20, 80)] = True
    E = normalise_saliency(raw).maps

    metric = quantus.PointingGame(normalise=False, abs=False, disable_warnings=True)
    a_batch, s_batch = E[:, None], masks[:, None].astype(np.float32)
    x_batch, y_batch = np.zeros_like(a_batch), np.zeros(N, int)

    def run_quantus():
        return metric(model=None, x_batch=x_batch, y_batch=y_batch, a_batch=a_batch, s_batch=s_batch)

    def run_quantus_core():  # its vectorised kernel alone, without the input checks of __call__
        return metric.evaluate_batch(a_batch=a_batch, s_batch=s_batch)

    def run_pure():
        return pointing_game(E, masks)

    samples = [
        Sample(id=str(i), image=np.zeros((SIZE, SIZE, 3), np.float32), ground_truth=GroundTruth(mask=masks[i]))
        for i in range(N)
    ]
    pg_metric = PointingGameMetric()

    def run_metric():
        batch = MetricInput(saliency=raw, concepts=None, samples=samples, targets=np.zeros(N, int))
        return pg_metric.score(batch)

    # the same answers where both are defined and Quantus is right (no tolerance, no ties, no empty mask)
    q = np.asarray(run_quantus(), dtype=float)
    ours0 = pointing_game(E, masks, tolerance=0.0).values
    assert np.array_equal(q, ours0), "Quantus and xaibench (tolerance 0) disagree"

    t_q = best_of(run_quantus)
    t_core = best_of(run_quantus_core)
    t_pure = best_of(run_pure)
    t_metric = best_of(run_metric)
    print(f"pointing game, {N} maps {SIZE}x{SIZE}, best of {REPEATS}, 1 torch thread")
    print(f"  quantus.PointingGame     {t_q * 1e3:9.2f} ms")
    print(f"  xaibench pointing_game   {t_pure * 1e3:9.2f} ms   ratio {t_q / t_pure:8.1f}x")
    print(f"  xaibench metric (+norm)  {t_metric * 1e3:9.2f} ms   ratio {t_q / t_metric:8.1f}x")
    print(f"  goal >= 20x: {'met' if t_q / t_metric >= 20 else 'NOT met'}")
    print(
        f"  note: Quantus evaluate_batch alone (no input checks) takes {t_core * 1e3:.2f} ms; "
        f"its __call__ spends the rest in helpers.asserts.assert_attributions"
    )


if __name__ == "__main__":
    main()
