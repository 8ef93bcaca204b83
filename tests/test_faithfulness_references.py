"""ROAD and noisy linear imputation against the reference implementations.

- Quantus 0.6 ``ROAD`` (MoRF only, returns the accuracy per percentage): stock,
  it raises IndexError on 3-channel attributions (it ranks C*H*W positions but
  imputes H*W pixels), so it is run through a subclass that ranks pixels on the
  channel-summed map. A model that records its softmax outputs gives Quantus'
  probability at every percentage: the whole MoRF curve is compared to ours.
- pytorch-grad-cam 1.5.7 ``ROADMostRelevantFirst`` / ``ROADLeastRelevantFirst``
  return p(x'_i) - p(x) for one percentile; ``percentile = 100 - i`` removes the
  i % most (least) relevant pixels. From them we compute necessity (sufficiency)
  with the DESIGN 3 formula and compare with ours.

Images are 20 x 20 (n = 400): for integer percentages every tool then perturbs
exactly i % of the pixels (Quantus and we floor i n / 100; grad-cam's strict
percentile threshold keeps ``m (100 - i)`` pixels when n = 100 m), and the maps
have no ties.

Tolerances: without noise (``road_noise = 0``; Quantus ``noise=0``; grad-cam's
imputer ``noise = 0``) all three solve the same linear systems, so probabilities
agree to 1e-5 (float32 images and softmax). With the default noise sigma = 0.01
each tool draws its own Gaussian noise (grad-cam from torch's global generator,
which we seed; Quantus from numpy's, which we seed; ours from the seeded
per-sample generator), so the draws differ: for the linear toy model the logit
difference is sum_j w_j sigma (z_j - z'_j), of standard deviation at most
sqrt(2) sigma ||w||, and the probability moves by at most a quarter of that. The
noisy comparisons use 5 of those standard deviations.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from xaibench.api import ForwardCounter, MetricInput, Model, Sample
from xaibench.metrics.faithfulness.imputation import linear_imputation
from xaibench.metrics.plugin import METRICS as BUILTIN_METRICS

quantus = pytest.importorskip("quantus")
road = pytest.importorskip("pytorch_grad_cam.metrics.road")
model_targets = pytest.importorskip("pytorch_grad_cam.utils.model_targets")

METRICS = {cls.name: cls for cls in BUILTIN_METRICS}
SIZE = 20
PERCENTS = list(range(1, 100, 2))
SIGMA = 0.01


class RecordingLinear(torch.nn.Module):
    """Logits ``[0, <w, x> + c]``; records p(class 1) of every forward call."""

    def __init__(self, w: np.ndarray, c: float) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.from_numpy(w).float(), requires_grad=False)
        self.c = c
        self.records: list[np.ndarray] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x * self.w).sum(dim=(1, 2, 3)) + self.c
        out = torch.stack([torch.zeros_like(z), z], dim=1)
        self.records.append(torch.softmax(out.float(), dim=1)[:, 1].detach().numpy().astype(np.float64))
        return out


class LinearModel(Model):
    name = "toy-linear"

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module.eval()
        self.input_size = SIZE


class ChannelSummedROAD(quantus.ROAD):
    """Quantus 0.6 ROAD with pixels ranked on the channel-summed map (H*W pixels,
    descending, as Quantus orders them), so 3-channel inputs work. Everything else
    (top-k count ``int(n * p / 100)``, ``noisy_linear_imputation``, the model
    wrapper, accuracy per percentage) is Quantus' own."""

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


def setup(n=3, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(3, SIZE, SIZE)) / SIZE
    module = RecordingLinear(w, 0.3).eval()
    x = rng.normal(size=(n, 3, SIZE, SIZE)).astype(np.float32)
    # Distinct values k / n (no ties, exact in float32, 1 - value keeps the order).
    sal = (np.stack([rng.permutation(SIZE * SIZE) for _ in range(n)]) / (SIZE * SIZE)).astype(np.float32)
    return module, x, sal.reshape(n, SIZE, SIZE), float(np.linalg.norm(w))


def ours(module, x, sal, name, *, seed=0, **params):
    model = LinearModel(module)
    batch = MetricInput(
        saliency=sal.astype(np.float64),
        concepts=None,
        samples=[Sample(id=f"s{i}", image=np.zeros((SIZE, SIZE, 3), np.float32)) for i in range(len(x))],
        targets=np.ones(len(x), dtype=np.int64),
        inputs=torch.from_numpy(x),
        model=model,
        forward=ForwardCounter(module, batch_size=64),
        seed=seed,
    )
    return METRICS[name](**params).score(batch)


def noisy_tolerance(w_norm: float) -> float:
    return 5 * 0.25 * math.sqrt(2) * SIGMA * w_norm


def run_quantus(module, x, sal, noise):
    module.records.clear()
    metric = ChannelSummedROAD(noise=noise, percentages=PERCENTS, disable_warnings=True, display_progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accuracy = metric(model=module, x_batch=x, y_batch=np.ones(len(x), int), a_batch=sal[:, None], device="cpu")
    return np.stack(module.records[-len(PERCENTS) :], axis=1), accuracy


def test_stock_quantus_road_fails_on_three_channel_maps():
    """The anchor (ANCHORS.md): why the comparison needs the channel-summed subclass."""
    module, x, sal, _ = setup(n=1)
    a3 = np.repeat(sal[:, None], 3, axis=1)
    with pytest.raises(IndexError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantus.ROAD(noise=0.0, percentages=[50], disable_warnings=True)(
            model=module, x_batch=x, y_batch=np.ones(1, int), a_batch=a3, device="cpu"
        )


def test_morf_curve_matches_quantus_without_noise():
    module, x, sal, _ = setup()
    q_probs, q_accuracy = run_quantus(module, x, sal, noise=0.0)
    out = ours(module, x, sal, "road_necessity", road_noise=0.0)
    our_probs = np.array([c["necessity"]["probability"] for c in out.curves])
    np.testing.assert_allclose(our_probs, q_probs, atol=1e-5)
    # Quantus' own output: the accuracy (argmax == target) per percentage, over the batch.
    assert list(q_accuracy) == PERCENTS
    np.testing.assert_allclose([q_accuracy[p] for p in PERCENTS], (our_probs > 0.5).mean(axis=0))


def test_morf_curve_matches_quantus_with_seeded_noise():
    module, x, sal, w_norm = setup()
    np.random.seed(0)
    q_probs, _ = run_quantus(module, x, sal, noise=SIGMA)
    out = ours(module, x, sal, "road_necessity", seed=0)
    our_probs = np.array([c["necessity"]["probability"] for c in out.curves])
    assert np.abs(our_probs - q_probs).max() <= noisy_tolerance(w_norm)
    assert np.abs(our_probs - q_probs).max() > 0  # the noise is really there, and independent


def gradcam_differences(module, x, sal, kind: str, noise: float) -> np.ndarray:
    """(B, len(PERCENTS)) p(x'_i) - p(x) from grad-cam, perturbing i % of the pixels."""
    cls = road.ROADMostRelevantFirst if kind == "necessity" else road.ROADLeastRelevantFirst
    targets = [model_targets.ClassifierOutputSoftmaxTarget(1)] * len(x)
    columns = []
    for i in PERCENTS:
        metric = cls(percentile=100 - i)
        metric.perturbation.imputer.noise = noise
        columns.append(metric(torch.from_numpy(x), sal, targets, module))
    return np.stack(columns, axis=1).astype(np.float64)


def road_score_from(diffs: np.ndarray, kind: str) -> np.ndarray:
    """DESIGN 3 by hand: for each t in 10..100, mean |d_i| over odd i < t; max over t."""
    scores = []
    for row in np.abs(diffs):
        best = -1.0
        for t in range(10, 101, 10):
            m = float(np.mean([row[PERCENTS.index(i)] for i in PERCENTS if i < t]))
            best = max(best, math.exp(-m) if kind == "sufficiency" else 1 - math.exp(-m))
        scores.append(best)
    return np.array(scores)


@pytest.mark.parametrize("kind", ["necessity", "sufficiency"])
def test_road_matches_gradcam_without_noise(kind):
    module, x, sal, _ = setup()
    diffs = gradcam_differences(module, x, sal, kind, noise=0.0)
    out = ours(module, x, sal, f"road_{kind}", road_noise=0.0)
    our_diffs = np.array([np.array(c[kind]["probability"]) - c["p_clean"] for c in out.curves])
    np.testing.assert_allclose(our_diffs, diffs, atol=1e-5)
    np.testing.assert_allclose(out.values, road_score_from(diffs, kind), atol=1e-5)


@pytest.mark.parametrize("kind", ["necessity", "sufficiency"])
def test_road_matches_gradcam_with_seeded_noise(kind):
    module, x, sal, w_norm = setup()
    torch.manual_seed(0)
    diffs = gradcam_differences(module, x, sal, kind, noise=SIGMA)
    out = ours(module, x, sal, f"road_{kind}", seed=0)
    # |mean |d| - mean |d'|| <= max |d - d'|, and exp / 1 - exp are 1-Lipschitz on [0, inf).
    tol = noisy_tolerance(w_norm)
    np.testing.assert_allclose(out.values, road_score_from(diffs, kind), atol=tol)


def test_imputation_matches_gradcam_imputer():
    rng = np.random.default_rng(4)
    image = rng.normal(size=(3, 15, 19)).astype(np.float32)
    removed = rng.random((4, 15, 19)) < np.array([0.1, 0.4, 0.7, 0.97])[:, None, None]
    mine = linear_imputation(image, removed)
    imputer = road.NoisyLinearImputer(noise=0.0)
    for k in range(4):
        ref = imputer(torch.from_numpy(image), torch.from_numpy((~removed[k]).astype(np.float32))).numpy()
        np.testing.assert_allclose(mine[k], ref, atol=1e-5)
