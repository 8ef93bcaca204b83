"""Faithfulness family (DESIGN 3 and 4): closed forms, determinism, edge cases, economy.

The analytic toy model returns the logits ``[0, a * s + c]`` where ``s`` is the sum
of the normalised input over a known region and all channels, so
p(target = 1) = sigmoid(a * s + c) and every curve has a closed form.
Reference agreement (Quantus, pytorch-grad-cam) is in test_faithfulness_references.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import spsolve

from xaibench.api import ForwardCounter, MetricInput, Model, Sample
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness import imputation
from xaibench.metrics.faithfulness.imputation import NEIGHBOUR_WEIGHTS, linear_imputation, noisy_linear_imputation
from xaibench.metrics.faithfulness.perturbation import pixel_count, saliency_order
from xaibench.metrics.other import formulas as fo
from xaibench.metrics.plugin import METRICS as BUILTIN_METRICS

# DESIGN 3 and 4's metrics (the field's others, DESIGN 3b, have tests of their own)
ROAD_IDS = tuple(
    f"road_{kind}{suffix}"
    for suffix in ("", "_black", "_uniform", "_gaussian")
    for kind in ("sufficiency", "necessity", "faithfulness")
)
SECTION_3_AND_4 = ("deletion", "insertion", "average_drop", "max_sensitivity", "sparseness", *ROAD_IDS)
FAITHFULNESS_METRICS = [cls for cls in BUILTIN_METRICS if cls.name in SECTION_3_AND_4]
METRICS = {cls.name: cls for cls in FAITHFULNESS_METRICS}


# ----------------------------------------------------------------------------- toy model


class RegionLogistic(torch.nn.Module):
    """Logits ``[0, a * sum(x[:, :, region]) + c]``: p(1) = sigmoid(a * s + c)."""

    def __init__(self, region: np.ndarray, a: float, c: float) -> None:
        super().__init__()
        self.register_buffer("region", torch.from_numpy(region.astype(np.float64)))
        self.a, self.c = a, c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = (x.double() * self.region).sum(dim=(1, 2, 3))
        z = self.a * s + self.c
        return torch.stack([torch.zeros_like(z), z], dim=1)


class ToyModel(Model):
    name = "toy-region-logistic"

    def __init__(self, module: torch.nn.Module, size: int, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)) -> None:
        self.module = module.eval()
        self.input_size = size
        self.mean = mean
        self.std = std


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def make_batch(model, inputs, saliency, *, targets=None, ids=None, seed=0, batch_size=64, explainer=None):
    n = len(inputs)
    ids = ids or [f"s{i}" for i in range(n)]
    size = inputs.shape[-1]
    return MetricInput(
        saliency=np.asarray(saliency, dtype=np.float64),
        concepts=None,
        samples=[Sample(id=i, image=np.zeros((size, size, 3), np.float32)) for i in ids],
        targets=np.ones(n, dtype=np.int64) if targets is None else np.asarray(targets),
        inputs=torch.as_tensor(inputs, dtype=torch.float32),
        model=model,
        forward=ForwardCounter(model.module, batch_size=batch_size),
        explainer=explainer,
        seed=seed,
    )


def run(name, batch, **params):
    return METRICS[name](**params).score(batch)


# A 10 x 10 image (n = 100: i % of the pixels is exactly i pixels), region = rows 0-2 (30 px).
SIZE = 10
N_PIX = SIZE * SIZE
REGION = np.zeros((3, SIZE, SIZE), bool)
REGION[:, :3, :] = True
V = np.array([0.5, -0.2, 1.0])  # constant normalised value per channel
A_SLOPE, C_BIAS = 0.05, -0.3
PERM = np.random.default_rng(7).permutation(N_PIX)  # most salient first


def toy(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):
    return ToyModel(RegionLogistic(REGION, A_SLOPE, C_BIAS), SIZE, mean, std)


def constant_image():
    return np.broadcast_to(V[:, None, None], (3, SIZE, SIZE)).astype(np.float32)[None]


def perm_saliency(perm=PERM):
    sal = np.empty(N_PIX)
    sal[perm] = np.arange(N_PIX, 0, -1)  # perm[0] is the most salient
    return sal.reshape(1, SIZE, SIZE)


def region_pixels_among(perm, k):
    """How many of the first k pixels of perm lie in the region (rows 0-2)."""
    return sum(1 for p in perm[:k] if p < 30)


# ----------------------------------------------------------------------------- closed forms


def test_deletion_closed_form():
    batch = make_batch(toy(), constant_image(), perm_saliency())
    out = run("deletion", batch, steps=10)
    vsum = V.sum()
    probs = [sigmoid(A_SLOPE * vsum * (30 - region_pixels_among(PERM, 10 * s)) + C_BIAS) for s in range(11)]
    expected = sum(0.1 * (probs[s] + probs[s + 1]) / 2 for s in range(10))
    assert out.values[0] == pytest.approx(expected, abs=1e-6)
    assert out.curves[0]["fraction"] == pytest.approx([s / 10 for s in range(11)])
    assert out.curves[0]["probability"] == pytest.approx(probs, abs=1e-7)


def test_deletion_ties_break_by_pixel_index():
    """A map with region = 1 and elsewhere 0: ties go in raster order, so the region
    (rows 0-2, the lowest indices) is removed first: 10 pixels per step of 10 %."""
    sal = np.zeros((1, SIZE, SIZE))
    sal[0, :3] = 1.0
    out = run("deletion", make_batch(toy(), constant_image(), sal), steps=10)
    vsum = V.sum()
    probs = [sigmoid(A_SLOPE * vsum * max(0, 30 - 10 * s) + C_BIAS) for s in range(11)]
    assert out.curves[0]["probability"] == pytest.approx(probs, abs=1e-7)
    assert out.values[0] == pytest.approx(0.1 * (sum(probs) - (probs[0] + probs[-1]) / 2), abs=1e-6)


def _gaussian_matrix(n: int, sigma: float, truncate: float = 4.0) -> np.ndarray:
    """1-D Gaussian blur as a matrix with half-sample symmetric ('reflect') borders."""
    radius = int(truncate * sigma + 0.5)
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    mat = np.zeros((n, n))
    period = 2 * n
    for i in range(n):
        for t, w in zip(range(-radius, radius + 1), taps, strict=True):
            j = (i + t) % period
            j = j if j < n else period - 1 - j
            mat[i, j] += w
    return mat


def test_insertion_closed_form_given_blur():
    """Start = blur(x) (oracle: an explicit Gaussian matrix with reflected borders),
    then the first k pixels in descending saliency come from x."""
    rng = np.random.default_rng(3)
    image = rng.normal(size=(1, 3, SIZE, SIZE)).astype(np.float32)
    sigma = 1.5
    out = run("insertion", make_batch(toy(), image, perm_saliency()), steps=10, blur_sigma=sigma)
    g = _gaussian_matrix(SIZE, sigma)
    blur = np.einsum("ij,cjk,lk->cil", g, image[0].astype(np.float64), g)
    rank = np.empty(N_PIX, int)
    rank[PERM] = np.arange(N_PIX)
    rank = rank.reshape(SIZE, SIZE)
    probs = []
    for s in range(11):
        mixed = np.where(rank[None] < 10 * s, image[0], blur)
        probs.append(sigmoid(A_SLOPE * mixed[REGION].sum() + C_BIAS))
    expected = sum(0.1 * (probs[s] + probs[s + 1]) / 2 for s in range(10))
    assert out.values[0] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("kind", ["sufficiency", "necessity", "faithfulness"])
def test_road_black_closed_form(kind):
    """Black = pixel 0 = -mean/std per channel in normalised space. d_i from the
    closed form sigmoid, then prefix means over odd i < t and the max over t."""
    mean, std = (0.5, 0.4, 0.3), (0.25, 0.5, 1.0)
    black = -np.array(mean) / np.array(std)
    batch = make_batch(toy(mean, std), constant_image(), perm_saliency())
    out = run(f"road_{kind}_black", batch)

    def p_after(perm, i):
        r = region_pixels_among(perm, i)
        return sigmoid(A_SLOPE * (V.sum() * (30 - r) + black.sum() * r) + C_BIAS)

    p0 = sigmoid(A_SLOPE * V.sum() * 30 + C_BIAS)

    def score(perm, transform):
        best = -1.0
        for t in range(10, 101, 10):
            ds = [abs(p0 - p_after(perm, i)) for i in range(1, t, 2)]
            best = max(best, transform(sum(ds) / len(ds)))
        return best

    suff = score(PERM[::-1], lambda m: math.exp(-m))  # ascending order = least salient first
    nec = score(PERM, lambda m: 1 - math.exp(-m))
    expected = {"sufficiency": suff, "necessity": nec, "faithfulness": 2 * suff * nec / (suff + nec)}[kind]
    assert out.values[0] == pytest.approx(expected, abs=1e-6)


def test_average_drop_closed_form():
    """E = 0.5 on the region, 1 at one pixel outside: x * E halves the region sum."""
    sal = np.zeros((1, SIZE, SIZE))
    sal[0, :3] = 0.5
    sal[0, 9, 9] = 1.0
    out = run("average_drop", make_batch(toy(), constant_image(), sal))
    p0 = sigmoid(A_SLOPE * V.sum() * 30 + C_BIAS)
    p1 = sigmoid(A_SLOPE * V.sum() * 15 + C_BIAS)
    # 1e-6 in probability (ForwardCounter's softmax is float32) is 1e-4 in percent.
    assert out.values[0] == pytest.approx(max(0.0, p0 - p1) / p0 * 100, abs=1e-4)
    assert out.extras[0] == {"degenerate": False}
    assert out.forward_passes == 2


def test_average_drop_constant_map_is_degenerate_mean_image():
    out = run("average_drop", make_batch(toy(), constant_image(), np.full((1, SIZE, SIZE), 3.0)))
    p0 = sigmoid(A_SLOPE * V.sum() * 30 + C_BIAS)
    p1 = sigmoid(C_BIAS)  # x * 0 = the mean image
    assert out.values[0] == pytest.approx(max(0.0, p0 - p1) / p0 * 100, abs=1e-4)
    assert out.extras[0] == {"degenerate": True}


def test_sparseness_closed_forms():
    n = 64
    k = 5
    one_hot = np.zeros((1, 8, 8))
    one_hot.flat[:k] = -2.0  # |E|: the sign does not matter
    ramp = np.arange(1, n + 1, dtype=float).reshape(1, 8, 8)
    batch = make_batch(toy(), np.zeros((2, 3, 8, 8)), np.concatenate([one_hot, ramp]))
    out = run("sparseness", batch)
    assert out.values[0] == pytest.approx(1 - k / n, abs=1e-12)
    assert out.values[1] == pytest.approx((n - 1) / (3 * n), abs=1e-12)
    assert fo.gini(np.ones(10)) == 0.0


def test_sparseness_all_zero_map_is_na():
    out = run("sparseness", make_batch(toy(), np.zeros((1, 3, 8, 8)), np.zeros((1, 8, 8))))
    assert np.isnan(out.values[0])
    assert "all-zero" in out.reasons[0]


def test_road_prefix_means_and_scores():
    percents = fm.road_percents((10, 20))
    assert percents.tolist() == list(range(1, 20, 2))
    d = np.arange(10, dtype=float)  # d_i for i = 1, 3, ..., 19
    means = fm.road_prefix_means(percents, d, (10, 20))
    assert means.tolist() == [np.mean(d[:5]), np.mean(d)]
    assert fm.road_sufficiency(means) == pytest.approx(math.exp(-2.0))
    assert fm.road_necessity(means) == pytest.approx(1 - math.exp(-4.5))
    assert float(fm.harmonic_mean(0.0, 0.0)) == 0.0
    assert float(fm.harmonic_mean(0.5, 0.25)) == pytest.approx(1 / 3)


def test_trapezoid_and_counts():
    assert fm.trapezoid_auc(np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.5, 0.0])) == pytest.approx(0.5)
    assert pixel_count(np.arange(5), 2, 3).tolist() == [0, 1, 3, 4, 6]  # floor(k * 3 / 2)
    assert pixel_count(1, 100, 50176).item() == 501  # Quantus: int(50176 * 1 / 100)


# ----------------------------------------------------------------------------- imputation


def _reference_system(removed: np.ndarray, image: np.ndarray):
    """Loop-built system of DESIGN 3 (a test oracle: clarity over speed)."""
    h, w = removed.shape
    idx = {p: k for k, p in enumerate(zip(*np.nonzero(removed), strict=True))}
    a = sp.lil_matrix((len(idx), len(idx)))
    b = np.zeros((len(idx), image.shape[0]))
    for (r, c), k in idx.items():
        for dr, dc, wt in NEIGHBOUR_WEIGHTS:
            rr, cc = r + dr, c + dc
            if not (0 <= rr < h and 0 <= cc < w):
                continue
            a[k, k] += wt
            if removed[rr, cc]:
                a[k, idx[(rr, cc)]] -= wt
            else:
                b[k] += wt * image[:, rr, cc]
    return a.tocsc(), b, idx


@pytest.fixture(params=["banded", "superlu"])
def solver(request, monkeypatch):
    """Each exact solver of the imputation: banded Cholesky (images up to BANDED_MAX_SIDE a side)
    and SuperLU (larger ones), forced on the small images of these tests."""
    monkeypatch.setattr(imputation, "BANDED_MAX_SIDE", 10**6 if request.param == "banded" else 0)
    return request.param


@pytest.mark.parametrize("shape", [(17, 23), (23, 17)])  # wider than tall: the banded solver transposes
@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.95, 0.999])
def test_imputation_matches_spsolve(fraction, shape, solver):
    rng = np.random.default_rng(int(fraction * 1000))
    image = rng.normal(size=(3, *shape))
    removed = rng.random(shape) < fraction
    removed[0, 0] = False  # keep one known pixel
    ours = linear_imputation(image, removed[None])[0]
    a, b, idx = _reference_system(removed, image)
    ref = image.copy()
    sol = spsolve(a, b).reshape(len(idx), -1)
    for (r, c), k in idx.items():
        ref[:, r, c] = sol[k]
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    np.testing.assert_array_equal(ours[:, ~removed], image[:, ~removed].astype(np.float32))


def test_imputation_is_neighbour_mean_and_batches_agree(solver):
    rng = np.random.default_rng(1)
    image = rng.normal(size=(3, 20, 20))
    removed = rng.random((6, 20, 20)) < np.linspace(0.1, 0.9, 6)[:, None, None]
    removed[2] = False  # an image with nothing to impute among the others
    together = linear_imputation(image, removed, max_unknowns=10**9)
    alone = np.stack([linear_imputation(image, removed[i : i + 1])[0] for i in range(6)])
    chunked = linear_imputation(image, removed, max_unknowns=50)
    # each image's system is solved on its own terms: chunking changes no bit
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together, chunked)
    np.testing.assert_array_equal(together[2], image.astype(np.float32))
    # Each removed pixel is the weighted mean of its in-image neighbours (renormalised weights).
    u = together.astype(np.float64)
    padded = np.pad(u, ((0, 0), (0, 0), (1, 1), (1, 1)))
    inside = np.pad(np.ones((20, 20)), 1)
    num = sum(wt * padded[:, :, 1 + dr : 21 + dr, 1 + dc : 21 + dc] for dr, dc, wt in NEIGHBOUR_WEIGHTS)
    den = sum(wt * inside[1 + dr : 21 + dr, 1 + dc : 21 + dc] for dr, dc, wt in NEIGHBOUR_WEIGHTS)
    resid = np.abs(u - num / den)[np.broadcast_to(removed[:, None], u.shape)]
    assert resid.max() < 1e-5


def test_the_two_exact_solvers_agree_on_a_road_curve(monkeypatch):
    """Banded Cholesky and SuperLU on a 50-step ROAD curve of a 64 px image (the shapes tracks'
    size, where the banded solver runs): the same images to float32 rounding."""
    rng = np.random.default_rng(5)
    image = rng.normal(size=(3, 64, 64))
    rank = np.argsort(np.argsort(rng.random(64 * 64)))
    masks = np.stack([(rank < pixel_count(np.array([p]), 100, 64 * 64)[0]).reshape(64, 64) for p in range(1, 100, 2)])
    monkeypatch.setattr(imputation, "BANDED_MAX_SIDE", 64)
    banded = linear_imputation(image, masks)
    monkeypatch.setattr(imputation, "BANDED_MAX_SIDE", 63)
    superlu = linear_imputation(image, masks)
    np.testing.assert_allclose(banded, superlu, rtol=0, atol=1e-6)


def test_imputation_all_removed_is_zero_and_noise_is_added():
    image = np.ones((3, 5, 5))
    removed = np.ones((1, 5, 5), bool)
    assert np.all(linear_imputation(image, removed) == 0)
    removed = np.zeros((1, 5, 5), bool)
    removed[0, 2, 2] = True
    field = np.random.default_rng(0).normal(size=(1, 3, 5, 5))
    noisy = noisy_linear_imputation(image, removed, field, noise_std=0.01)
    np.testing.assert_allclose(noisy[0, :, 2, 2], 1 + 0.01 * field[0, :, 2, 2], atol=1e-6)
    assert np.all(noisy[0, :, removed[0] == 0] == 1)


# ----------------------------------------------------------------------------- orders, edge cases


def test_orders_break_ties_by_index_both_ways():
    sal = np.array([[[0.5, 0.2, 0.5, -1.0]]])
    assert saliency_order(sal, "descending")[0].tolist() == [0, 2, 1, 3]
    assert saliency_order(sal, "ascending")[0].tolist() == [3, 1, 0, 2]
    with pytest.raises(ValueError, match="NaN"):
        saliency_order(np.array([[[np.nan, 1.0]]]), "descending")


def test_constant_and_zero_maps_use_raster_order():
    """Constant and all-zero maps order pixels by index in both directions: deletion
    equals that of a strictly decreasing ramp, and the ascending (sufficiency) and
    descending (necessity) ROAD curves are the same curve."""
    image = np.random.default_rng(2).normal(size=(1, 3, SIZE, SIZE)).astype(np.float32)
    ramp = -np.arange(N_PIX, dtype=float).reshape(1, SIZE, SIZE)
    results = []
    for sal in (np.full((1, SIZE, SIZE), 4.2), np.zeros((1, SIZE, SIZE)), ramp):
        batch = make_batch(toy(), image, sal)
        results.append([run(m, batch).values[0] for m in ("deletion", "road_faithfulness_black", "road_faithfulness")])
        if sal is not ramp:
            curves = run("road_faithfulness", batch).curves[0]
            assert curves["sufficiency"]["probability"] == curves["necessity"]["probability"]
    assert results[0] == results[1]
    assert results[0][0] == pytest.approx(results[2][0], abs=1e-12)


def test_nan_map_is_na_per_sample():
    image = np.zeros((2, 3, SIZE, SIZE), np.float32)
    sal = np.random.default_rng(0).random((2, SIZE, SIZE))
    sal[1, 3, 3] = np.nan
    for name in ("deletion", "insertion", "road_necessity", "average_drop", "sparseness"):
        out = run(name, make_batch(toy(), image, sal))
        assert np.isfinite(out.values[0]) and out.reasons[0] is None, name
        assert np.isnan(out.values[1]) and "NaN" in out.reasons[1], name


def test_not_applicable_without_model_or_map():
    batch = make_batch(toy(), constant_image(), perm_saliency())
    batch.model = None
    assert "model" in run("deletion", batch).reasons[0]
    batch = make_batch(toy(), constant_image(), perm_saliency())
    batch.saliency = None
    assert "saliency" in run("road_faithfulness", batch).reasons[0]
    assert "explainer" in run("max_sensitivity", make_batch(toy(), constant_image(), perm_saliency())).reasons[0]


# ----------------------------------------------------------------------------- determinism, economy


def _random_batch(seed=0, ids=None, n=3, size=20):
    rng = np.random.default_rng(11)
    region = np.zeros((3, size, size), bool)
    region[:, 4:12, 6:16] = True
    model = ToyModel(RegionLogistic(region, 0.02, 0.1), size)
    images = rng.normal(size=(n, 3, size, size)).astype(np.float32)
    sal = rng.random((n, size, size))
    return model, images, sal, make_batch(model, images, sal, seed=seed, ids=ids, batch_size=16)


@pytest.mark.parametrize("name", ["road_faithfulness", "road_faithfulness_uniform", "road_faithfulness_gaussian"])
def test_seeded_determinism_and_batch_independence(name):
    _, images, sal, batch = _random_batch(seed=5)
    first = run(name, batch).values
    _, _, _, again = _random_batch(seed=5)
    np.testing.assert_array_equal(first, run(name, again).values)
    model, _, _, _ = _random_batch()
    alone = run(name, make_batch(model, images[1:2], sal[1:2], seed=5, ids=["s1"])).values
    assert alone[0] == first[1]  # a sample's value does not depend on its batch
    _, _, _, other = _random_batch(seed=6)
    assert not np.array_equal(first, run(name, other).values)


def test_forward_pass_counts_and_sharing():
    _, _, _, batch = _random_batch(n=3)
    steps = 50
    deletion = run("deletion", batch)
    assert deletion.forward_passes == 3 + 3 * (steps - 1) + 1  # clean + inner steps + one shared all-baseline
    insertion = run("insertion", batch)
    assert insertion.forward_passes == 3 * steps  # blurred start + inner steps; x itself is shared
    suff = run("road_sufficiency", batch)
    nec = run("road_necessity", batch)
    faith = run("road_faithfulness", batch)
    assert suff.forward_passes == nec.forward_passes == 3 * 50  # odd i = 1..99
    assert faith.forward_passes == 0  # both curves reused from batch.memo
    np.testing.assert_allclose(
        faith.values, 2 * suff.values * nec.values / (suff.values + nec.values), rtol=0, atol=1e-15
    )
    # Alone, road_faithfulness needs both curves and p(x).
    _, _, _, fresh = _random_batch(n=3)
    assert run("road_faithfulness", fresh).forward_passes == 3 + 2 * 3 * 50
    # Batches are full: images / batch_size calls, rounded up, per scorer flush.
    assert fresh.forward.images == 3 + 300
    assert fresh.forward.calls <= 1 + math.ceil(300 / 16)


def test_curves_are_kept_for_plots():
    _, _, _, batch = _random_batch(n=2)
    out = run("road_faithfulness", batch)
    curve = out.curves[0]
    assert curve["percent"] == list(range(1, 100, 2))
    assert len(curve["sufficiency"]["probability"]) == 50
    assert curve["necessity"]["order"] == "descending"
    assert max(curve["necessity"]["value_at_threshold"]) == pytest.approx(curve["necessity"]["value"])
    out = run("deletion", batch, steps=5)
    assert len(out.curves[1]["probability"]) == 6


# ----------------------------------------------------------------------------- max-sensitivity


class ChannelSumExplainer:
    """E(x) = sum over channels of x (deterministic, linear)."""

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return inputs.sum(dim=1).numpy()


class ConstantExplainer:
    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return np.ones((inputs.shape[0], inputs.shape[2], inputs.shape[3]))


def test_max_sensitivity_bounds_and_zero():
    model, images, _, _ = _random_batch(n=2)
    sal = images.sum(axis=1).astype(np.float64)
    batch = make_batch(model, images, sal, explainer=ChannelSumExplainer(), seed=3)
    out = run("max_sensitivity", batch)
    # ||sum_c u_c|| <= 3 r sqrt(H W) for |u| <= r.
    bound = 3 * 0.02 * np.sqrt(20 * 20) / np.linalg.norm(sal.reshape(2, -1), axis=1)
    assert np.all(out.values > 0) and np.all(out.values <= bound)
    assert out.values.tolist() == run("max_sensitivity", batch).values.tolist()
    assert len(out.curves[0]["ratio"]) == 10
    ones = make_batch(model, images, np.ones((2, 20, 20)), explainer=ConstantExplainer())
    assert run("max_sensitivity", ones).values.tolist() == [0.0, 0.0]
    zero = make_batch(model, images, np.zeros((2, 20, 20)), explainer=ConstantExplainer())
    assert "all-zero" in run("max_sensitivity", zero).reasons[0]


def test_metric_metadata():
    names = [cls.name for cls in FAITHFULNESS_METRICS]
    expected = ["deletion", "insertion"]
    for suffix in ("", "_black", "_uniform", "_gaussian"):
        expected += [f"road_sufficiency{suffix}", f"road_necessity{suffix}", f"road_faithfulness{suffix}"]
    expected += ["average_drop", "max_sensitivity", "sparseness"]
    assert sorted(names) == sorted(expected)
    ranking = sorted(c.name for c in FAITHFULNESS_METRICS if c.ranking)
    assert ranking == ["deletion", "insertion", "max_sensitivity", "road_faithfulness"]  # max-sensitivity: robustness
    for cls in FAITHFULNESS_METRICS:
        family = {"max_sensitivity": "robustness", "sparseness": "other"}.get(cls.name, "faithfulness")
        assert cls.family == family
        assert cls.direction in ("higher", "lower") and cls.direction in cls.description.lower().replace(
            "sparser", "higher"
        )
    assert METRICS["deletion"].direction == "lower" and METRICS["average_drop"].direction == "lower"
    with pytest.raises(ValueError, match="thresholds"):
        METRICS["road_necessity"](thresholds=(0, 50))


def test_deletion_and_insertion_with_every_map_non_finite_are_n_a_without_an_error():
    """The pixel ranks are sorted on the device for the valid maps only; with none valid there is
    nothing to sort and every sample is n/a with the map's reason."""
    from xaibench.metrics.faithfulness.curves import Deletion, Insertion

    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    model = ToyModel(module, 8)
    inputs = torch.zeros(2, 3, 8, 8)
    for cls in (Deletion, Insertion):
        out = cls(steps=4).score(make_batch(model, inputs, np.full((2, 8, 8), np.nan)))
        assert np.isnan(out.values).all()
        assert out.reasons == ["saliency map contains NaN or infinite values"] * 2
