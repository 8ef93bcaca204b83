"""The field's faithfulness metrics (DESIGN 3b): hand-computed oracles on a toy linear model,
equality with Quantus 0.6 where Quantus follows the paper, and the tested deviations.

The toy model has one input channel (so Quantus's features are pixels: its issue 75, one colour
channel perturbed at a time, only shows with three channels, tested separately), logits
``[0, <w, x> + c]`` computed in float64 and rounded to float32 (both sides then take the same
float32 softmax of the same logits), and mean 0, std 1 (our normalised zero is Quantus's
``perturb_baseline=0.0``). Removing a set S of pixels therefore gives
p = sigmoid(z - sum_{j in S} w_j x_j): every metric has a closed form here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from xaibench import device_random
from xaibench.api import ForwardCounter, MetricInput, Model, Sample
from xaibench.metrics.faithfulness import field_formulas as ff
from xaibench.metrics.faithfulness.field import FIELD_FAITHFULNESS_METRICS
from xaibench.metrics.plugin import METRICS as BUILTIN
from xaibench.seeds import sample_rng

SIZE = 8
N = SIZE * SIZE
METRICS = {cls.name: cls for cls in FIELD_FAITHFULNESS_METRICS}
CHANGED_VERSIONS = {
    "sufficiency": "1.1.0",
    "infidelity": "1.1.0",
    "sensitivity_n": "1.1.0",
    "monotonicity_correlation": "1.1.0",
}


class Linear(torch.nn.Module):
    def __init__(self, w: np.ndarray, c: float) -> None:
        super().__init__()
        self.w = torch.from_numpy(w).double()
        self.c = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x.double() * self.w).sum(dim=(1, 2, 3)) + self.c
        return torch.stack([torch.zeros_like(z), z], dim=1).float()


class ToyModel(Model):
    name = "toy-linear"

    def __init__(self, module: torch.nn.Module, channels: int) -> None:
        self.module = module.eval()
        self.input_size = SIZE
        self.mean = (0.0,) * channels
        self.std = (1.0,) * channels


def setup(n=3, seed=0, channels=1):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(channels, SIZE, SIZE)) * 0.3
    x = rng.normal(size=(n, channels, SIZE, SIZE)).astype(np.float32)
    # Distinct map values (no ties), one map per sample.
    sal = np.stack([rng.permutation(N) for _ in range(n)]).reshape(n, SIZE, SIZE) / N - 0.3
    return Linear(w, 0.2).eval(), w, x, sal


def ours(module, x, sal, name, *, seed=0, **params):
    channels = x.shape[1]
    batch = MetricInput(
        saliency=np.asarray(sal, dtype=np.float64),
        concepts=None,
        samples=[Sample(id=f"s{i}", image=np.zeros((SIZE, SIZE, 3), np.float32)) for i in range(len(x))],
        targets=np.ones(len(x), dtype=np.int64),
        inputs=torch.from_numpy(x),
        model=ToyModel(module, channels),
        forward=ForwardCounter(module, batch_size=16),
        seed=seed,
    )
    return METRICS[name](**params).score(batch)


def device_uniform(seed, sample_id, purpose, shape):
    """The U(0, 1) values of a :mod:`xaibench.device_random` stream, drawn on the CPU."""
    key = device_random.stream_key(seed, sample_id, purpose)
    return device_random.uniform(key, 0, int(np.prod(shape)), "cpu").numpy().reshape(shape)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def contributions(w, x):
    """(B, N): w_j x_j per pixel (channels summed) and z per sample."""
    c = (w[None] * x.astype(np.float64)).sum(axis=1).reshape(len(x), -1)
    return c, c.sum(axis=1) + 0.2


# ----------------------------------------------------------------------------- registry


def test_registered_unranked_not_default_with_directions():
    names = {cls.name for cls in BUILTIN}
    expected = {
        "faithfulness_correlation": "higher",
        "faithfulness_estimate": "higher",
        "monotonicity": "higher",
        "monotonicity_correlation": "higher",
        "pixel_flipping": "lower",
        "region_perturbation": "higher",
        "selectivity": "lower",
        "infidelity": "lower",
        "sensitivity_n": "higher",
        "irof": "higher",
        "sufficiency": "higher",
    }
    for name, direction in expected.items():
        cls = METRICS[name]
        assert name in names
        assert (cls.family, cls.direction, cls.ranking, cls.default) == ("faithfulness", direction, False, False)
        # 1.1.0: sufficiency scores 0 without neighbours; infidelity, sensitivity-n and monotonicity
        # correlation draw their perturbations on the model's device (xaibench.device_random).
        assert cls.version == (CHANGED_VERSIONS.get(name, "1.0.0"))
        assert cls.licence == "Apache-2.0" and cls.unit
        doc = " ".join((cls.__doc__ or "").lower().split())
        assert f"{direction} is better" in doc and f"{direction} is better" in cls.description.lower()


# ----------------------------------------------------------------------------- formulas


def test_formulas_against_scipy():
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(4, 30)), rng.normal(size=(4, 30))
    b[2] = np.round(b[2])  # ties for the ranks
    pairs = list(zip(a, b, strict=True))
    np.testing.assert_allclose(ff.pearson_rows(a, b), [pearsonr(u, v)[0] for u, v in pairs], atol=1e-12)
    np.testing.assert_allclose(ff.spearman_rows(a, b), [spearmanr(u, v)[0] for u, v in pairs], atol=1e-12)
    assert np.isnan(ff.pearson_rows(np.ones((1, 5)), a[:1, :5])[0])
    assert ff.features_in_step(50176, 224) == 224 and ff.features_in_step(64, 10) == 7 and ff.step_count(64, 7) == 10
    np.testing.assert_array_equal(ff.step_sums(np.arange(5.0)[None], np.array([[4, 3, 2, 1, 0]]), 2), [[7, 3, 0]])
    np.testing.assert_array_equal(ff.non_decreasing(np.array([[0, 1, 1, 2], [0, 2, 1, 3]])), [1, 0])
    assert ff.unit_auc(np.array([[1.0, 0.0, 0.0]]))[0] == pytest.approx(0.25)


# ----------------------------------------------------------------------------- closed forms


def test_pixel_flipping_oracle_and_forward_count():
    module, w, x, sal = setup()
    out = ours(module, x, sal, "pixel_flipping", steps=16)  # 4 pixels per step
    c, z = contributions(w, x)
    order = np.argsort(-sal.reshape(3, -1), axis=1, kind="stable")
    removed = np.cumsum(np.take_along_axis(c, order, axis=1), axis=1)[:, 3::4]
    curves = sigmoid(z[:, None] - removed)
    np.testing.assert_allclose([cv["probability"] for cv in out.curves], curves, atol=1e-6)
    np.testing.assert_allclose(out.values, np.trapezoid(curves, dx=1, axis=1) / 15, atol=1e-6)
    assert out.forward_passes == 3 * 16


def test_faithfulness_estimate_oracle():
    module, w, x, sal = setup()
    out = ours(module, x, sal, "faithfulness_estimate", steps=16)
    c, z = contributions(w, x)
    order = np.argsort(-sal.reshape(3, -1), axis=1, kind="stable")
    groups = np.take_along_axis(c, order, axis=1).reshape(3, 16, 4).sum(axis=2)
    drops = sigmoid(z)[:, None] - sigmoid(z[:, None] - groups)
    sums = np.take_along_axis(sal.reshape(3, -1), order, axis=1).reshape(3, 16, 4).sum(axis=2)
    expected = [np.corrcoef(s, d)[0, 1] for s, d in zip(sums, drops, strict=True)]
    np.testing.assert_allclose(out.values, expected, atol=1e-6)
    assert out.forward_passes == 3 + 3 * 16  # p(x) once per sample, one image per step


def test_faithfulness_estimate_is_one_for_the_exact_map_in_probability_space():
    """A map equal to each pixel's own drop in probability gives correlation 1 with one pixel a step."""
    module, w, x, _ = setup(n=2)
    c, z = contributions(w, x)
    exact = (sigmoid(z)[:, None] - sigmoid(z[:, None] - c)).reshape(2, SIZE, SIZE)
    out = ours(module, x, exact, "faithfulness_estimate", steps=N)
    np.testing.assert_allclose(out.values, 1.0, atol=1e-6)
    reverse = ours(module, x, -exact, "faithfulness_estimate", steps=N)
    np.testing.assert_allclose(reverse.values, -1.0, atol=1e-6)


def test_monotonicity_oracle():
    """Inserting pixels into the zero image adds their contributions: the curve never decreases
    exactly when every step adds a non-negative sum (sigmoid is increasing)."""
    module, w, x, sal = setup(n=4)
    c, _z = contributions(w, x)
    for absolute in (True, False):
        key = np.abs(sal) if absolute else sal
        order = np.argsort(key.reshape(4, -1), axis=1, kind="stable")
        groups = np.take_along_axis(c, order, axis=1).reshape(4, 8, 8).sum(axis=2)
        expected = np.all(groups[:, 1:] >= 0, axis=1).astype(float)
        out = ours(module, x, sal, "monotonicity", steps=8, abs=absolute)
        np.testing.assert_array_equal(out.values, expected)
    # A positive-only model: every order is monotonic; a map of |contribution| too.
    positive = np.abs(x)
    module2 = Linear(np.abs(w), 0.2).eval()
    out = ours(module2, positive, sal, "monotonicity", steps=8)
    np.testing.assert_array_equal(out.values, 1.0)


def test_faithfulness_correlation_oracle_and_seeds():
    module, w, x, sal = setup()
    out = ours(module, x, sal, "faithfulness_correlation", nr_runs=20, subset_size=10, seed=3)
    c, z = contributions(w, x)
    expected = []
    for b in range(3):
        subsets = ff.random_subsets(sample_rng(3, f"s{b}", "faithfulness_correlation/subsets"), N, 10, 20)
        drops = sigmoid(z[b]) - sigmoid(z[b] - c[b][subsets].sum(axis=1))
        expected.append(np.corrcoef(sal.reshape(3, -1)[b][subsets].sum(axis=1), drops)[0, 1])
    np.testing.assert_allclose(out.values, expected, atol=1e-6)
    assert out.forward_passes == 3 + 3 * 20
    # Per-sample seeding: the first sample's value does not depend on the batch it is in.
    alone = ours(module, x[:1], sal[:1], "faithfulness_correlation", nr_runs=20, subset_size=10, seed=3)
    assert alone.values[0] == pytest.approx(out.values[0], abs=1e-12)
    other = ours(module, x, sal, "faithfulness_correlation", nr_runs=20, subset_size=10, seed=4)
    assert not np.allclose(other.values, out.values)


def test_monotonicity_correlation_oracle():
    module, w, x, sal = setup(n=2)
    out = ours(module, x, sal, "monotonicity_correlation", steps=16, nr_samples=5, seed=1)
    c, z = contributions(w, x)
    w64 = w.reshape(-1)
    expected = []
    for b in range(2):
        u = device_uniform(1, f"s{b}", "monotonicity_correlation/uniform", (5, 1, N))
        u = u[:, 0].astype(np.float64)
        order = np.argsort(np.abs(sal[b]).reshape(-1), kind="stable").reshape(16, 4)
        var = []
        for g in order:
            zs = z[b] - c[b][g].sum() + (u[:, g] * w64[g]).sum(axis=1)
            var.append(np.mean((sigmoid(zs) - sigmoid(z[b])) ** 2) / sigmoid(z[b]) ** 2)
        sums = np.abs(sal[b]).reshape(-1)[order].sum(axis=1)
        from scipy.stats import spearmanr

        expected.append(spearmanr(sums, var)[0])
    np.testing.assert_allclose(out.values, expected, atol=1e-6)
    assert out.forward_passes == 2 + 2 * 16 * 5


def test_not_applicable_with_reasons():
    module, _w, x, sal = setup(n=2)
    sal = sal.copy()
    sal[0] = 1.0  # constant map: the correlations are undefined
    sal[1, 0, 0] = np.nan
    params = {
        "faithfulness_estimate": {"steps": 8},
        "faithfulness_correlation": {"subset_size": 4, "nr_runs": 5},
        "monotonicity_correlation": {"steps": 8, "nr_samples": 2},
    }
    for name, kwargs in params.items():
        out = ours(module, x, sal, name, **kwargs)
        assert np.isnan(out.values).all()
        assert "undefined" in out.reasons[0] and "NaN" in out.reasons[1]
    out = ours(module, x, sal, "faithfulness_correlation", subset_size=N + 1)
    assert "exceeds" in out.reasons[0]
    out = ours(module, x, sal, "pixel_flipping", steps=1)
    assert "one step" in out.reasons[0]


def test_three_channels_perturbs_whole_pixels():
    """With three channels, step k replaces all channels of its pixels (Quantus issue 75)."""
    module, w, x, sal = setup(n=2, channels=3)
    out = ours(module, x, sal, "pixel_flipping", steps=N)
    c, z = contributions(w, x)
    order = np.argsort(-sal.reshape(2, -1), axis=1, kind="stable")
    curves = sigmoid(z[:, None] - np.cumsum(np.take_along_axis(c, order, axis=1), axis=1))
    np.testing.assert_allclose([cv["probability"] for cv in out.curves], curves, atol=1e-6)


def test_sensitivity_n_oracle():
    module, w, x, sal = setup()
    out = ours(module, x, sal, "sensitivity_n", sizes=4, nr_runs=6, n_max_percentage=0.5, seed=2)
    c, z = contributions(w, x)
    sizes = [8, 16, 24, 32]  # floor(64 * 0.5 * i / 4)
    for b in range(3):
        rs = []
        for n in sizes:
            key = device_random.stream_key(2, f"s{b}", f"sensitivity_n/subsets/{n}")
            subsets = np.stack([np.flatnonzero(m) for m in device_random.subset_masks(key, range(6), N, n, "cpu")])
            drops = sigmoid(z[b]) - sigmoid(z[b] - c[b][subsets].sum(axis=1))
            rs.append(np.corrcoef(sal.reshape(3, -1)[b][subsets].sum(axis=1), drops)[0, 1])
        assert out.curves[b]["n"] == sizes
        np.testing.assert_allclose(out.curves[b]["correlation"], rs, atol=1e-6)
        assert out.values[b] == pytest.approx(np.mean(rs), abs=1e-6)
    assert out.forward_passes == 3 + 3 * 4 * 6


def test_infidelity_oracle_and_exact_map():
    module, w, x, sal = setup()
    out = ours(module, x, sal, "infidelity", n_perturb_samples=12, noise=0.3, optimal_scale=False, seed=1)
    _, z = contributions(w, x)
    expected = []
    for b in range(3):
        key = device_random.stream_key(1, f"s{b}", "infidelity/gaussian")
        noise = device_random.normal(key, 0, 12 * N, "cpu").numpy().reshape(12, 1, SIZE, SIZE)
        noise = (noise * np.float32(0.3)).astype(np.float64)
        dz = (noise * w[None]).sum(axis=(1, 2, 3))
        drops = sigmoid(z[b]) - sigmoid(z[b] - dz)
        proj = noise.reshape(12, -1) @ sal[b].reshape(-1)
        expected.append(np.mean((proj - drops) ** 2))
    np.testing.assert_allclose(out.values, expected, rtol=1e-5, atol=1e-9)
    assert out.forward_passes == 3 + 3 * 12
    # The map that is the model's gradient (up to scale) has near-zero infidelity once scaled;
    # any other map is worse, and scaling the map changes nothing with the optimal scale.
    gradient = np.repeat(w[:, :, :][None, 0], 3, axis=0)
    exact = ours(module, x, gradient, "infidelity", noise=0.01)
    other = ours(module, x, sal, "infidelity", noise=0.01)
    scaled = ours(module, x, 7.0 * sal, "infidelity", noise=0.01)
    assert np.all(exact.values < 1e-3 * other.values)
    np.testing.assert_allclose(scaled.values, other.values, rtol=1e-9)


# ----------------------------------------------------------------------------- Quantus 0.6

quantus = pytest.importorskip("quantus")


def run_quantus(metric, module, x, sal):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(
            metric(
                model=module,
                x_batch=x,
                y_batch=np.ones(len(x), dtype=int),
                a_batch=sal[:, None].astype(np.float32),
                device="cpu",
                softmax=True,
                channel_first=True,
            ),
            dtype=np.float64,
        )


def test_pixel_flipping_equals_quantus():
    module, _w, x, sal = setup()
    q = quantus.PixelFlipping(features_in_step=4, perturb_baseline=0.0, disable_warnings=True)
    curves = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "pixel_flipping", steps=16)
    np.testing.assert_allclose([cv["probability"] for cv in out.curves], curves, atol=1e-6)
    # Quantus's calculate_auc is np.trapz(curve, dx=1) (np.trapz is gone in numpy 2).
    np.testing.assert_allclose(out.values * 15, np.trapezoid(curves, dx=1, axis=1), atol=1e-6)


def test_faithfulness_estimate_equals_quantus():
    module, _w, x, sal = setup()
    q = quantus.FaithfulnessEstimate(features_in_step=4, perturb_baseline=0.0, disable_warnings=True)
    np.testing.assert_allclose(
        ours(module, x, sal, "faithfulness_estimate", steps=16).values, run_quantus(q, module, x, sal), atol=1e-6
    )


def test_faithfulness_correlation_equals_quantus_on_the_same_subsets(monkeypatch):
    module, _w, x, sal = setup()
    runs, size = 15, 9
    subsets = [
        ff.random_subsets(sample_rng(2, f"s{b}", "faithfulness_correlation/subsets"), N, size, runs) for b in range(3)
    ]
    calls = iter([subsets[b][r] for r in range(runs) for b in range(3)])  # Quantus: per run, per sample
    monkeypatch.setattr(np.random, "choice", lambda *a, **k: next(calls))
    q = quantus.FaithfulnessCorrelation(
        nr_runs=runs, subset_size=size, perturb_baseline=0.0, return_aggregate=False, disable_warnings=True
    )
    expected = run_quantus(q, module, x, sal)
    monkeypatch.undo()
    out = ours(module, x, sal, "faithfulness_correlation", nr_runs=runs, subset_size=size, seed=2)
    np.testing.assert_allclose(out.values, expected, atol=1e-6)


def test_monotonicity_correlation_equals_quantus_on_the_same_noise(monkeypatch):
    """One pixel a step (Quantus's features_in_step=1): Quantus draws one uniform value per sample
    for each (step, draw) and fills the step with it; we feed it our per-pixel noise."""
    module, _w, x, sal = setup(n=2)
    draws = 3
    mine = ours(module, x, sal, "monotonicity_correlation", steps=N, nr_samples=draws, seed=5).values
    u = [device_uniform(5, f"s{b}", "monotonicity_correlation/uniform", (draws, 1, N)) for b in (0, 1)]
    orders = [np.argsort(np.abs(sal[b]).reshape(-1), kind="stable") for b in (0, 1)]
    values = iter([np.array([u[b][s, 0, orders[b][k]] for b in (0, 1)]) for k in range(N) for s in range(draws)])
    monkeypatch.setattr(np.random, "uniform", lambda *a, **k: next(values))
    q = quantus.MonotonicityCorrelation(nr_samples=draws, features_in_step=1, disable_warnings=True)
    expected = run_quantus(q, module, x, sal)
    monkeypatch.undo()
    assert next(values, None) is None  # Quantus drew exactly our noise, value for value
    np.testing.assert_allclose(mine, expected, atol=1e-6)


def test_quantus_monotonicity_never_inserts_a_pixel():
    """Deviation (docs/metrics.md): Quantus 0.6 Monotonicity replaces the baseline image's pixels by
    the baseline again, so its curve is flat and every map scores True; ours inserts x's pixels
    (Arya et al. 2019) and matches the closed form, which here says not monotonic."""
    module, _w, x, sal = setup(n=4)
    q = quantus.Monotonicity(features_in_step=8, perturb_baseline=0.0, disable_warnings=True)
    theirs = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "monotonicity", steps=8)
    assert np.all(theirs == 1.0)
    assert np.any(out.values == 0.0)


def test_quantus_pixel_flipping_flips_one_channel_at_a_time():
    """Deviation (Quantus issue 75): with a map broadcast over three channels Quantus's features are
    channel values, so its curve has 3 points per pixel; ours flips whole pixels, and equals every
    third point of Quantus's curve (where all channels of the first pixels are flipped)."""
    module, _w, x, sal = setup(n=2, channels=3)
    q = quantus.PixelFlipping(features_in_step=1, perturb_baseline=0.0, disable_warnings=True)
    theirs = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "pixel_flipping", steps=N)
    mine = np.array([cv["probability"] for cv in out.curves])
    assert theirs.shape == (2, 3 * N) and mine.shape == (2, N)
    np.testing.assert_allclose(mine, theirs[:, 2::3], atol=1e-6)
    assert np.abs(theirs[:, 0::3] - mine).max() > 1e-3  # the intermediate points differ


# ----------------------------------------------------------------------------- patches


def patch_setup(n=3):
    module, w, x, _ = setup(n=n)
    sal = np.random.default_rng(7).normal(size=(n, SIZE, SIZE))  # continuous: distinct patch sums
    return module, w, x, sal


def patch_curves(w, x, sal, patch):
    """Closed form: p after removing patches 1..k (most relevant first), and the clean p."""
    c, z = contributions(w, x)
    ids = (np.arange(SIZE)[:, None] // patch * (SIZE // patch) + np.arange(SIZE)[None, :] // patch).reshape(-1)
    curves = []
    for b in range(len(x)):
        sums = np.bincount(ids, weights=sal[b].reshape(-1))
        removed = np.cumsum([c[b][ids == p].sum() for p in np.argsort(-sums)])
        curves.append(sigmoid(z[b] - removed))
    return np.array(curves), sigmoid(z)


def test_region_perturbation_oracle():
    module, w, x, sal = patch_setup()
    out = ours(module, x, sal, "region_perturbation", patch_size=2, regions_evaluation=10, baseline="zeros")
    curves, p0 = patch_curves(w, x, sal, 2)
    drops = p0[:, None] - curves[:, :10]
    np.testing.assert_allclose([cv["drop"] for cv in out.curves], drops, atol=1e-6)
    np.testing.assert_allclose(out.values, drops.sum(axis=1) / 11, atol=1e-6)
    assert out.forward_passes == 3 + 3 * 10
    noisy = ours(module, x, sal, "region_perturbation", patch_size=2, regions_evaluation=10)
    assert np.isfinite(noisy.values).all() and not np.allclose(noisy.values, out.values)
    again = ours(module, x, sal, "region_perturbation", patch_size=2, regions_evaluation=10)
    np.testing.assert_array_equal(noisy.values, again.values)  # seeded


def test_selectivity_oracle():
    module, w, x, sal = patch_setup()
    out = ours(module, x, sal, "selectivity", patch_size=2)
    curves, _ = patch_curves(w, x, sal, 2)
    np.testing.assert_allclose([cv["probability"] for cv in out.curves], curves, atol=1e-6)
    np.testing.assert_allclose(out.values, np.trapezoid(curves, dx=1, axis=1) / 15, atol=1e-6)
    assert out.forward_passes == 3 * 16
    assert "one patch" in ours(module, x, sal, "selectivity", patch_size=SIZE).reasons[0]


def test_region_perturbation_equals_quantus():
    module, _w, x, sal = patch_setup()
    q = quantus.RegionPerturbation(patch_size=2, regions_evaluation=10, perturb_baseline=0.0, disable_warnings=True)
    drops = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "region_perturbation", patch_size=2, regions_evaluation=10, baseline="zeros")
    np.testing.assert_allclose([cv["drop"] for cv in out.curves], drops, atol=1e-6)


def test_selectivity_equals_quantus():
    module, _w, x, sal = patch_setup()
    q = quantus.Selectivity(patch_size=2, perturb_baseline=0.0, disable_warnings=True)
    curves = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "selectivity", patch_size=2)
    np.testing.assert_allclose([cv["probability"] for cv in out.curves], curves, atol=1e-6)
    np.testing.assert_allclose(out.values * 15, np.trapezoid(curves, dx=1, axis=1), atol=1e-6)


def test_quantus_infidelity_is_deterministic_patch_deletion():
    """Deviation (docs/metrics.md): Quantus 0.6 Infidelity removes squares cumulatively with a fixed
    baseline, so its ``n_perturb_samples`` repeats one value; ours is Yeh et al.'s expectation over
    random perturbations and changes with the seed."""
    module, _w, x, sal = setup()
    one, three = (
        run_quantus(
            quantus.Infidelity(perturb_baseline=0.0, n_perturb_samples=k, disable_warnings=True), module, x, sal
        )
        for k in (1, 3)
    )
    np.testing.assert_allclose(one, three, rtol=1e-6)  # one value, up to Quantus's float32 averaging
    a = ours(module, x, sal, "infidelity", n_perturb_samples=5, seed=0).values
    b = ours(module, x, sal, "infidelity", n_perturb_samples=5, seed=1).values
    assert not np.allclose(a, b)


def test_quantus_sensitivity_n_scores_the_batch_not_the_sample():
    """Deviation (docs/metrics.md): Quantus 0.6 SensitivityN removes pixels cumulatively in the map's
    order and correlates across the batch's samples: one value per step n (0.8 * H*W of them), none
    per sample; ours gives one value per sample from random subsets (Ancona et al. 2018)."""
    module, _w, x, sal = setup()
    theirs = run_quantus(
        quantus.SensitivityN(perturb_baseline=0.0, return_aggregate=False, disable_warnings=True), module, x, sal
    )
    assert theirs.shape == (int(0.8 * N),)
    assert ours(module, x, sal, "sensitivity_n", sizes=3, nr_runs=5).values.shape == (3,)


# ----------------------------------------------------------------------------- IROF


def irof_setup():
    module, w, x, _ = setup()
    x = np.random.default_rng(3).random(size=x.shape).astype(np.float32)  # pixel values in [0, 1]
    sal = np.random.default_rng(8).normal(size=(3, SIZE, SIZE))
    return module, w, x, sal


def test_irof_oracle():
    from xaibench.metrics.faithfulness.regions import superpixels

    module, w, x, sal = irof_setup()
    out = ours(module, x, sal, "irof", n_segments=12)
    c, z = contributions(w, x)
    total = 0
    for b in range(3):
        seg = superpixels(np.moveaxis(x[b], 0, -1).astype(np.float64), 12, 10.0).reshape(-1)
        labels = np.unique(seg)
        means = np.array([sal[b].reshape(-1)[seg == s].mean() for s in labels])
        removed = np.cumsum([c[b][seg == labels[i]].sum() for i in np.argsort(-means, kind="stable")])
        ratios = sigmoid(z[b] - removed) / sigmoid(z[b])
        expected = (len(ratios) - np.trapezoid(ratios, dx=1)) / len(ratios)
        assert out.curves[b]["segments"] == len(labels) >= 2
        np.testing.assert_allclose(out.curves[b]["relative_probability"], ratios, atol=1e-6)
        assert out.values[b] == pytest.approx(expected, abs=1e-6)
        total += len(labels)
    assert out.forward_passes == 3 + total


def test_irof_equals_quantus(monkeypatch):
    """Quantus's AOC is L - trapz(curve); ours divides it by L. Quantus 0.6 calls np.trapz, which numpy 2
    removed: the test lends it np.trapezoid (the same rule)."""
    module, _w, x, sal = irof_setup()
    monkeypatch.setattr(np, "trapz", np.trapezoid, raising=False)
    q = quantus.IROF(perturb_baseline=0.0, return_aggregate=False, disable_warnings=True)
    theirs = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "irof")  # scikit-image's SLIC defaults, as Quantus
    segments = np.array([cv["segments"] for cv in out.curves])
    np.testing.assert_allclose(out.values * segments, theirs, atol=1e-5)


def test_stock_quantus_irof_fails_on_three_channel_images(monkeypatch):
    """Deviation (docs/metrics.md): Quantus 0.6 IROF builds a (B, 1, H, W) segment mask and its
    ``baseline_replacement_by_mask`` asserts it has the image's (B, 3, H, W) shape; ours removes a
    segment in all channels."""
    module, _w, x, sal = setup(n=2, channels=3)
    monkeypatch.setattr(np, "trapz", np.trapezoid, raising=False)
    with pytest.raises(AssertionError, match="mask shape"):
        run_quantus(quantus.IROF(perturb_baseline=0.0, disable_warnings=True), module, x, sal)
    assert np.isfinite(ours(module, x, sal, "irof", n_segments=12).values).all()


# ----------------------------------------------------------------------------- sufficiency


def test_sufficiency_oracle():
    """Three classes, four samples: maps 0 and 1 nearly equal, 2 and 3 far from them and each other."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(4)
    base = rng.random((SIZE, SIZE)) + 0.5
    sal = np.stack([base, base * 1.01 + 0.001 * rng.random((SIZE, SIZE)), rng.random((SIZE, SIZE)), -base])
    module, w, x, _ = setup(n=4)
    out = ours(module, x, sal, "sufficiency", threshold=0.6, abs=False)
    _, z = contributions(w, x)
    predicted = (z > 0).astype(int)  # logits [0, z]
    maps = sal.reshape(4, -1) / np.abs(sal.reshape(4, -1)).max(axis=1, keepdims=True)
    d = cdist(maps, maps, "seuclidean")
    near = (d / d.max() <= 0.6) & ~np.eye(4, dtype=bool)
    for b in range(4):
        expected = (predicted[near[b]] == predicted[b]).mean() if near[b].any() else 0.0
        assert out.values[b] == pytest.approx(expected) and out.reasons[b] is None
        assert out.curves[b]["neighbours"] == near[b].sum()
    assert near[0, 1] and not near[0, 3]  # the test has both cases
    assert out.values[3] == 0.0 and out.curves[3]["neighbours"] == 0
    assert out.forward_passes == 4


def sufficiency_maps():
    rng = np.random.default_rng(9)
    sal = rng.random((6, SIZE, SIZE)) * 0.9
    sal[:3] = sal[0] + 0.05 * rng.random((3, SIZE, SIZE))  # three close maps, three far ones
    sal[np.arange(6), np.arange(6), 0] = 1.0  # max |value| 1 in every map, at different pixels
    return sal


def test_sufficiency_equals_quantus():
    """Maps with max |value| 1 each (Quantus divides the batch by its global max, we each map by its
    own) and no pixel constant across the batch; samples without neighbours are 0 in both."""
    module, _w, x, _ = setup(n=6)
    sal = sufficiency_maps()
    q = quantus.Sufficiency(threshold=0.6, disable_warnings=True)
    theirs = run_quantus(q, module, x, sal)
    out = ours(module, x, sal, "sufficiency")
    np.testing.assert_allclose(out.values, theirs, atol=1e-12)
    assert [c["neighbours"] for c in out.curves[3:]] == [0, 0, 0]
    assert theirs[:3].max() > 0  # the comparison is not 0 against 0


def test_quantus_sufficiency_is_zero_when_a_pixel_is_constant_across_the_batch():
    """Deviation (docs/metrics.md): a pixel with the same value in every map (an all-zero border, a
    clipped CAM) has variance 0; scipy's seuclidean then gives NaN distances, and Quantus 0.6 scores
    every sample 0. Ours leaves such pixels out (they do not separate any two maps)."""
    module, _w, x, _ = setup(n=6)
    sal = sufficiency_maps()
    before = ours(module, x, sal, "sufficiency").values
    sal[:, SIZE - 1, :] = 0.0  # a constant row
    theirs = run_quantus(quantus.Sufficiency(threshold=0.6, disable_warnings=True), module, x, sal)
    after = ours(module, x, sal, "sufficiency").values
    assert np.all(theirs == 0.0)
    assert np.nanmax(after) > 0 and np.array_equal(before == 0, after == 0)


@pytest.mark.parametrize("order", ["descending", "ascending"])
@pytest.mark.parametrize("absolute", [False, True])
def test_pixel_ranks_sorted_on_the_device_are_saliency_order_s_ranks(order, absolute):
    """The step-wise metrics rank pixels with one stable sort on the model's device; with ties,
    signed zeros and absolute values it gives saliency_order's positions (ties by pixel index)."""
    from xaibench.metrics.faithfulness.context import faithfulness_batch
    from xaibench.metrics.faithfulness.field_base import orders_from_ranks, pixel_ranks
    from xaibench.metrics.faithfulness.perturbation import saliency_order

    module, _w, x, _ = setup(n=3)
    rng = np.random.default_rng(4)
    sal = rng.integers(-3, 4, size=(3, SIZE, SIZE)).astype(np.float64)  # many ties
    sal[0, 0, :4] = [0.0, -0.0, 0.0, -0.0]
    batch = MetricInput(
        saliency=sal,
        concepts=None,
        samples=[Sample(id=f"s{i}", image=np.zeros((SIZE, SIZE, 3), np.float32)) for i in range(3)],
        targets=np.ones(3, dtype=np.int64),
        inputs=torch.from_numpy(x),
        model=ToyModel(module, 1),
        forward=ForwardCounter(module, batch_size=16),
        seed=0,
    )
    ctx = faithfulness_batch(batch)
    ranks = pixel_ranks(ctx, [2, 0], absolute, order)
    expected = saliency_order(np.abs(sal[[2, 0]]) if absolute else sal[[2, 0]], order)
    np.testing.assert_array_equal(orders_from_ranks(ranks), expected)
    for row, order_row in zip(ranks.numpy(), expected, strict=True):
        np.testing.assert_array_equal(row[order_row], np.arange(N))
