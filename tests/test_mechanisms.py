"""The mechanism tracks (DESIGN 11): each kind's built-in decision proved on the real torch model.

Every proof runs the ``mechanism`` model on generated ``mechanisms`` samples and states its figure
(the largest logit change, the agreement with the float64 reference, ...) in the assertion message.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import xaibench
from xaibench.api import ExplainContext
from xaibench.datasets.mechanisms import (
    CANCELLATION_B,
    F_MIN,
    INTERACTION_C,
    KINDS,
    LUMINANCE_STEP,
    MARK_REACH,
    MIN_LUMINANCE_STEP,
    SATURATION_W,
    SIZE,
    TEXTURE_ROOTS,
    W1,
    W2,
    Z_STEP,
    MechanismConfig,
    MechanismsDataset,
    Rendered,
    detector,
    draw_scene,
    mechanism_f,
    render,
)
from xaibench.explainers.baselines import CenterExplainer, SobelExplainer
from xaibench.explainers.gradient import GradientExplainer
from xaibench.imaging import to_model_input
from xaibench.metrics.ground_truth.formulas import is_constant
from xaibench.models.mechanism import MechanismModel
from xaibench.plugins import manager
from xaibench.suites.mechanisms import MECHANISM_METRICS, MECHANISM_TRACKS, MechanismsSuite, mechanism_track

N = 64
ONE_MARK = ("confined", "distractor", "saturation")
"""Kinds whose regions are A* and the rest."""


def _rendered(kind: str, n: int = N, **params: Any) -> list[Rendered]:
    ds = MechanismsDataset(mechanism=kind, n=n, **params)
    return [ds.rendered(i) for i in range(n)]


def _inputs(model: MechanismModel, images: list[np.ndarray]) -> torch.Tensor:
    return model.preprocess(images)


def _logit(model: MechanismModel, x: torch.Tensor, classes: np.ndarray) -> np.ndarray:
    """The logit of ``classes`` (one per image), float64."""
    with torch.no_grad():
        out = model.module(x)
    return out.gather(1, torch.as_tensor(classes).view(-1, 1))[:, 0].double().numpy()


def _labels(rendered: list[Rendered]) -> np.ndarray:
    return np.array([r.label for r in rendered])


def _masks(rendered: list[Rendered]) -> torch.Tensor:
    """``(B, 1, S, S)`` bool: A* of each sample."""
    return torch.as_tensor(np.stack([r.ground_truth.mask for r in rendered]))[:, None]


def _f(model: MechanismModel, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model.module.decision(x).double().numpy()


# ----------------------------------------------------------------------------- generator and model


@pytest.mark.parametrize("kind", KINDS)
def test_to_model_input_is_the_identity_at_64_px_and_normalisation_is_exact(kind: str) -> None:
    rendered = _rendered(kind, n=8)
    images = [r.image for r in rendered]
    x = to_model_input(images, SIZE, (0.5,) * 3, (0.25,) * 3)
    expected = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2) * 4.0 - 2.0
    assert torch.equal(x, expected), float((x - expected).abs().max())
    z = x.double().numpy()
    assert np.array_equal(z, np.round(z / Z_STEP) * Z_STEP), "normalised values off the 1/64 grid"
    assert z.min() >= -2.0 and z.max() <= 2.0
    for r in rendered:
        assert r.image.dtype == np.float32 and r.image.shape == (SIZE, SIZE, 3)
        assert r.image.min() >= 0.0 and r.image.max() <= 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_model_equals_the_numpy_reference_labels_and_is_confident(kind: str) -> None:
    rendered = _rendered(kind)
    model = MechanismModel(mechanism=kind)
    x = _inputs(model, [r.image for r in rendered])
    with torch.no_grad():
        logits = model.module(x)
    f_model = (logits[:, 1] - logits[:, 0]).double().numpy()
    f_ref = np.array([r.f for r in rendered])
    assert np.array_equal(f_ref, mechanism_f(kind, x.permute(0, 2, 3, 1).double().numpy()))
    gap = float(np.abs(f_model - f_ref).max())
    assert gap <= 1e-4, f"{kind}: max |f_model - f_numpy| = {gap:.3g}"
    labels = _labels(rendered)
    assert np.array_equal(logits.argmax(1).numpy(), labels), f"{kind}: labels differ from predictions"
    assert np.abs(f_ref).min() >= F_MIN
    top1 = float(torch.softmax(logits, 1).max(1).values.mean())
    assert top1 > 0.9, f"{kind}: mean top-1 {top1:.3f}"
    np.testing.assert_allclose(logits.sum(1).numpy(), 0.0, atol=1e-6)  # logits are [-f/2, f/2]


@pytest.mark.parametrize("kind", KINDS)
def test_positions_vary_per_sample(kind: str) -> None:
    mean = np.mean([r.ground_truth.mask for r in _rendered(kind)], axis=0)
    assert mean.max() < 0.5, f"{kind}: a pixel is in A* on {mean.max():.3f} of {N} samples"


@pytest.mark.parametrize("kind", KINDS)
def test_generation_is_deterministic_and_sample_i_is_its_own(kind: str) -> None:
    a, b = _rendered(kind, n=6), _rendered(kind, n=6)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.image, y.image) and np.array_equal(x.ground_truth.mask, y.ground_truth.mask)
        assert x.label == y.label and x.f == y.f
    larger = MechanismsDataset(mechanism=kind, n=20)
    assert np.array_equal(larger.rendered(5).image, a[5].image)
    other = MechanismsDataset(mechanism=kind, n=6, seed=1)
    assert not np.array_equal(other.rendered(0).image, a[0].image)
    assert other.revision != MechanismsDataset(mechanism=kind, n=6).revision != larger.revision
    ids = [s.id for s in MechanismsDataset(mechanism=kind, n=3).samples()]
    assert ids == [f"mechanism-{kind}-{i:04d}" for i in range(3)]
    assert [s.id for s in other.samples(limit=1)] == [f"mechanism-{kind}-s1-0000"]


def test_ground_truth_fields() -> None:
    for kind in KINDS:
        gt = MechanismsDataset(mechanism=kind, n=1).sample(0).ground_truth
        assert gt.mask.dtype == bool and gt.mask.shape == (SIZE, SIZE) and gt.mask.any()
        assert np.array_equal(gt.levels, gt.mask.astype(np.float32))
        assert gt.regions.dtype == np.int32 and gt.regions.shape == (SIZE, SIZE) and gt.regions.min() >= 1
        assert gt.contributions.dtype == np.float64 and gt.contributions.shape == (int(gt.regions.max()),)
        if kind in ONE_MARK:
            assert np.array_equal(gt.regions, np.where(gt.mask, 1, 2))
            assert gt.contributions[0] > 0 and gt.contributions[1] == 0.0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        MechanismsDataset(mechanism="nope")
    with pytest.raises(ValueError, match="only meaningful"):
        MechanismsDataset(mechanism="confined", terms="linear")
    with pytest.raises(ValueError, match="size must be 64"):
        MechanismsDataset(mechanism="confined", size=128)
    with pytest.raises(ValueError, match="unknown kind"):
        MechanismModel(mechanism="nope")


def test_identity_names_the_kind_and_changes_with_it() -> None:
    ids = {kind: MechanismModel(mechanism=kind).identity for kind in KINDS}
    assert all(v.startswith(f"mechanism/{k}@") for k, v in ids.items())
    digests = {kind: identity.split("@")[1] for kind, identity in ids.items()}
    assert digests["confined"] == digests["distractor"]  # the same function, named by its kind
    assert len(set(digests.values())) == len(KINDS) - 1 and len(set(ids.values())) == len(KINDS)
    assert MechanismModel(mechanism="saturation").identity == ids["saturation"]
    assert not MechanismModel(mechanism="confined").module.training


# ----------------------------------------------------------------------------- luminance


def _mark_boxes(r: Rendered) -> list[list[int]]:
    """Each mark's ``[x0, y0, x1, y1]`` from the sample's meta, in the order of ``meta["luminance"]``."""
    if "mark" in r.meta:
        return [r.meta["mark"]]
    return [m["box"] if isinstance(m, dict) else m for m in r.meta["marks"]]


def _ring(box: list[int]) -> np.ndarray:
    """``(S, S)`` bool: the 1 px ring around ``box`` (cut at the image's border)."""
    x0, y0, x1, y1 = box
    ring = np.zeros((SIZE, SIZE), dtype=bool)
    ring[max(y0 - 1, 0) : y1 + 1, max(x0 - 1, 0) : x1 + 1] = True
    ring[y0:y1, x0:x1] = False
    return ring


@pytest.mark.parametrize("kind", KINDS)
def test_marks_differ_from_their_surround_in_luminance_alone(kind: str) -> None:
    """The lift adds an achromatic offset on the marks and nothing else: the detector's responses,
    ``f``, the label, A* and the background are the draw's (:func:`draw_scene`), and every mark's
    mean luminance differs from its surround's by 0.08-0.26 in pixel units."""
    config = MechanismConfig(kind=kind)
    steps, signs = [], []
    for i in range(32):
        r = render(config, i)
        scene, f = draw_scene(config, i)
        z = 4.0 * r.image.astype(np.float64) - 2.0
        assert r.f == f and r.label == int(f > 0) and np.array_equal(r.ground_truth.mask, scene.mask)
        assert np.array_equal(r.background, (0.5 + scene.background / 4.0).astype(np.float32))
        u, u_drawn = detector(z), detector(scene.z)
        assert np.array_equal(u[0], u_drawn[0]) and np.array_equal(u[1], u_drawn[1])
        lift = z - scene.z
        assert np.array_equal(lift, np.repeat(lift[..., :1], 3, axis=-1)), "the lift is not achromatic"
        assert not lift[~r.ground_truth.mask].any(), "the lift touched a pixel outside A*"
        lum, around = r.image.mean(-1).astype(np.float64), r.background.mean(-1).astype(np.float64)
        boxes = _mark_boxes(r)
        assert len(boxes) == len(r.meta["luminance"])
        for box, drawn in zip(boxes, r.meta["luminance"], strict=True):
            x0, y0, x1, y1 = box
            step = lum[y0:y1, x0:x1].mean() - around[_ring(box)].mean()
            steps.append(abs(step))
            signs.append(np.sign(step))
            assert abs(drawn["offset"] - drawn["surround"]) >= MIN_LUMINANCE_STEP
            assert drawn["surround"] == pytest.approx(around[_ring(box)].mean() * 4.0 - 2.0, abs=1e-12)
    low, high = min(steps), max(steps)
    assert low >= 0.08 and high <= LUMINANCE_STEP[1] / 4.0 + 0.01, f"{kind}: steps {low:.3f}-{high:.3f} (pixel units)"
    if kind != "saturation":  # its red channel is near 2 on the 0.5 blocks: no room above, always darker
        assert {-1.0, 1.0} <= set(signs), f"{kind}: the marks are all {'brighter' if signs[0] > 0 else 'darker'}"


@pytest.mark.parametrize("kind", KINDS)
def test_sobel_sees_every_mark(kind: str) -> None:
    """``sobel`` (the edge magnitude of the grey image) is never constant, and on every kind but
    ``distractor`` it puts more mass in A* than A*'s area share (random's expectation); on
    ``distractor`` the checkerboard draws it (most of its mass and its argmax on the board), the
    mark beside it keeping a little more than random. Measured on these 32 samples: mass in A* /
    area share = 1.54 confined, 4.42 additive, 1.63 interaction, 1.58 cancellation, 1.26
    distractor, 13.6 saturation."""
    rendered = _rendered(kind, n=32)
    model = MechanismModel(mechanism=kind)
    x = _inputs(model, [r.image for r in rendered])
    edges = SobelExplainer().explain(model, x, torch.as_tensor(_labels(rendered)), context=ExplainContext(samples=[]))
    assert not is_constant(edges).any(), f"{kind}: sobel is constant on {int(is_constant(edges).sum())} samples"
    masks = np.stack([r.ground_truth.mask for r in rendered])
    mass = (edges * masks).sum((1, 2)) / edges.sum((1, 2))
    ratio = float(mass.mean() / masks.mean())
    if kind == "distractor":
        # drawn to the board: most of its mass there, its argmax there on every sample, and only
        # a little above random on the mark (the mark lies beside the board)
        boards = np.zeros_like(masks)
        for k, r in enumerate(rendered):
            x0, y0, x1, y1 = r.meta["distractor"]
            boards[k, y0:y1, x0:x1] = True
        on_board = (edges * boards).sum((1, 2)) / edges.sum((1, 2))
        peak = edges.reshape(len(edges), -1).argmax(1)
        assert on_board.mean() > 0.5 and boards.reshape(len(edges), -1)[np.arange(len(edges)), peak].all(), on_board
        assert 1.0 < ratio < 1.5, f"distractor: sobel's mass in A* / A*'s area share = {ratio:.2f}"
    else:
        assert ratio > 1.25, f"{kind}: sobel's mass in A* / A*'s area share = {ratio:.2f} (random: 1)"


# ----------------------------------------------------------------------------- exactness outside A*


def _perturbed_outside(kind: str, rendered: list[Rendered], model: MechanismModel) -> dict[str, torch.Tensor]:
    """Each sample with every pixel outside A* replaced: by the baseline, by achromatic Gaussian
    noise (sd 0.2 in z, on the 1/256 grid), by the next sample's background."""
    x = _inputs(model, [r.image for r in rendered])
    inside = _masks(rendered)
    rng = np.random.default_rng(0)
    grey = np.round(rng.normal(0.0, 0.2, (x.shape[0], 1, SIZE, SIZE)) * 256) / 256
    others = _inputs(model, [rendered[(i + 1) % len(rendered)].background for i in range(len(rendered))])
    return {
        "baseline": torch.where(inside, x, torch.zeros_like(x)),
        "grey noise": torch.where(inside, x, x + torch.from_numpy(grey).float()),
        "background swap": torch.where(inside, x, others),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outside_the_evidence_changes_the_logit(kind: str) -> None:
    rendered = _rendered(kind)
    model = MechanismModel(mechanism=kind)
    labels = _labels(rendered)
    clean = _logit(model, _inputs(model, [r.image for r in rendered]), labels)
    for name, x in _perturbed_outside(kind, rendered, model).items():
        delta = float(np.abs(_logit(model, x, labels) - clean).max())
        assert delta == 0.0, f"{kind}, {name} outside A*: max |delta logit| = {delta:.3g}"
    # while the evidence itself moves it (cancellation's marks cancel: its + mark alone)
    evidence = (
        _masks(rendered)
        if kind != "cancellation"
        else torch.from_numpy(np.stack([_regions(r) == 1 for r in rendered]))[:, None]
    )
    x = _inputs(model, [r.image for r in rendered])
    moved = float(np.abs(_logit(model, torch.where(evidence, torch.zeros_like(x), x), labels) - clean).min())
    assert moved >= 1.0, f"{kind}: deleting the evidence moved the logit by only {moved:.3g}"


@pytest.mark.parametrize("kind", ["confined", "distractor", "interaction"])
def test_thresholds_leave_a_margin_for_coloured_noise(kind: str) -> None:
    """Chromatic noise outside A* (sd 0.1 per channel, within ±0.24: |u1|, |u2| < 1 = t) changes nothing."""
    rendered = _rendered(kind)
    model = MechanismModel(mechanism=kind)
    labels = _labels(rendered)
    x = _inputs(model, [r.image for r in rendered])
    noise = np.clip(np.random.default_rng(1).normal(0.0, 0.1, x.shape), -0.24, 0.24)
    noisy = torch.where(_masks(rendered), x, x + torch.from_numpy(noise).float())
    delta = float(np.abs(_logit(model, noisy, labels) - _logit(model, x, labels)).max())
    assert delta == 0.0, f"{kind}: coloured noise outside A* moved the logit by {delta:.3g}"
    assert float(noise[..., :8, :8].std()) > 0.09  # the noise is there


# ----------------------------------------------------------------------------- exact contributions


def _regions(r: Rendered) -> np.ndarray:
    return r.ground_truth.regions


@pytest.mark.parametrize("kind", KINDS)
def test_contributions_are_complete(kind: str) -> None:
    rendered = _rendered(kind)
    model = MechanismModel(mechanism=kind)
    labels = _labels(rendered)
    x = _inputs(model, [r.image for r in rendered])
    gain = _logit(model, x, labels) - _logit(model, torch.zeros_like(x), labels)
    total = np.array([r.ground_truth.contributions.sum() for r in rendered])
    gap = float(np.abs(total - gain).max())
    assert gap <= 1e-4, f"{kind}: max |sum contributions - (logit(x) - logit(0))| = {gap:.3g}"


def _delete_regions(x: torch.Tensor, regions: np.ndarray) -> torch.Tensor:
    """``(K, 3, S, S)``: ``x`` (one image) with region ``k + 1`` set to the baseline, for each k."""
    count = int(regions.max())
    keep = torch.from_numpy(regions[None] != np.arange(1, count + 1)[:, None, None])[:, None]
    return torch.where(keep, x[None], torch.zeros_like(x)[None])


def _integrated_gradients(model: MechanismModel, x: torch.Tensor, targets: np.ndarray, steps: int) -> np.ndarray:
    """Integrated gradients from ``z = 0`` (midpoint rule) of images ``(B, 3, S, S)``, summed over
    channels: ``(B, S, S)``, float64."""
    alphas = (torch.arange(steps, dtype=torch.float32) + 0.5) / steps
    path = (alphas.view(-1, 1, 1, 1, 1) * x[None]).flatten(0, 1).requires_grad_(True)
    picked = model.module(path).gather(1, torch.as_tensor(np.tile(targets, steps)).view(-1, 1)).sum()
    (grad,) = torch.autograd.grad(picked, path)
    return (x * grad.view(steps, *x.shape).mean(0)).sum(1).double().numpy()


def _gradient_x_input(model: MechanismModel, x: torch.Tensor, target: int) -> torch.Tensor:
    z = x[None].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model.module(z)[0, target], z)
    return (x * grad[0]).sum(0).detach()


@pytest.mark.parametrize("terms", ["mixed", "linear"])
def test_additive_each_region_is_worth_its_deletion_and_ig_recovers_it(terms: str) -> None:
    rendered = _rendered("additive", n=32, terms=terms)
    model = MechanismModel(mechanism="additive")
    x = _inputs(model, [r.image for r in rendered])
    integrated = _integrated_gradients(model, x, _labels(rendered), 4)
    worst_delete = worst_ig = worst_gxi_linear = 0.0
    quadratic_ratio = []
    for j, r in enumerate(rendered):
        truth = r.ground_truth.contributions
        regions = _regions(r)
        assert int(regions.max()) == 16 and np.count_nonzero(truth) == 8
        assert np.array_equal(
            r.ground_truth.mask, np.isin(regions, np.flatnonzero(truth) + 1) & (x[j].abs().sum(0) > 0).numpy()
        )
        deleted = _delete_regions(x[j], regions)
        drop = _logit(model, x[j : j + 1], np.array([r.label]))[0] - _logit(model, deleted, np.full(16, r.label))
        worst_delete = max(worst_delete, float(np.abs(drop - truth).max()))
        ig = np.bincount(regions.ravel(), integrated[j].ravel())[1:]
        worst_ig = max(worst_ig, float(np.abs(ig - truth).max()))
        gxi = np.bincount(regions.ravel(), _gradient_x_input(model, x[j], r.label).double().numpy().ravel())[1:]
        for mark in r.meta["marks"]:
            k = mark["region"] - 1
            if mark["axis"] == 1:
                worst_gxi_linear = max(worst_gxi_linear, abs(gxi[k] - truth[k]))
            else:
                quadratic_ratio.append(gxi[k] / truth[k])
    assert worst_delete <= 1e-4, f"{terms}: max |deletion drop - contribution| = {worst_delete:.3g}"
    assert worst_ig <= 1e-4, f"{terms}: max |IG per region - contribution| = {worst_ig:.3g} (4 midpoint steps)"
    assert worst_gxi_linear <= 1e-4, f"{terms}: gradient x input off a linear term by {worst_gxi_linear:.3g}"
    if terms == "linear":
        assert not quadratic_ratio
    else:
        assert len(quadratic_ratio) > 50
        np.testing.assert_allclose(quadratic_ratio, 2.0, rtol=1e-4, err_msg="gradient x input doubles u2|u2|")


def _shapley(model: MechanismModel, x: torch.Tensor, regions: np.ndarray, target: int) -> np.ndarray:
    """Exact Shapley values of the regions on the target logit (regions absent = baseline), brute force."""
    players = int(regions.max())
    coalitions = list(itertools.product([False, True], repeat=players))
    present = torch.from_numpy(
        np.array([np.isin(regions, [k + 1 for k in range(players) if c[k]]) for c in coalitions])
    )
    values = _logit(
        model, torch.where(present[:, None], x[None], torch.zeros_like(x)[None]), np.full(len(coalitions), target)
    )
    value = dict(zip(coalitions, values, strict=True))
    out = np.zeros(players)
    for k in range(players):
        for c in coalitions:
            if not c[k]:
                with_k = tuple(True if i == k else v for i, v in enumerate(c))
                size = sum(c)
                weight = math.factorial(size) * math.factorial(players - size - 1) / math.factorial(players)
                out[k] += weight * (value[with_k] - value[c])
    return out


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "additive"])
def test_contributions_are_the_exact_shapley_values(kind: str) -> None:
    """Brute force over the 2 or 3 regions (``additive``'s 16 cells: its deletion test, above)."""
    rendered = _rendered(kind, n=32)
    model = MechanismModel(mechanism=kind)
    x = _inputs(model, [r.image for r in rendered])
    worst = 0.0
    for j, r in enumerate(rendered):
        shapley = _shapley(model, x[j], _regions(r), r.label)
        worst = max(worst, float(np.abs(shapley - r.ground_truth.contributions).max()))
    assert worst <= 1e-4, f"{kind}: max |brute-force Shapley - contributions| = {worst:.3g}"


def test_interaction_needs_both_marks_and_splits_the_credit_evenly() -> None:
    rendered = _rendered("interaction", n=32)
    model = MechanismModel(mechanism="interaction")
    x = _inputs(model, [r.image for r in rendered])
    assert set(_labels(rendered)) == {1}
    for j, r in enumerate(rendered):
        deleted = _delete_regions(x[j], _regions(r))[:2]  # each mark in turn
        f_alone = _f(model, deleted)
        assert np.array_equal(f_alone, [-INTERACTION_C, -INTERACTION_C]), f"{r.meta}: f with one mark = {f_alone}"
        with torch.no_grad():
            assert model.module(deleted).argmax(1).tolist() == [0, 0]
        truth = r.ground_truth.contributions
        assert truth[0] == truth[1] > 0 and truth[2] == 0.0


def test_cancellation_is_the_bias_alone_and_each_mark_is_worth_plus_or_minus_a() -> None:
    rendered = _rendered("cancellation", n=32)
    model = MechanismModel(mechanism="cancellation")
    x = _inputs(model, [r.image for r in rendered])
    f = _f(model, x)
    assert np.array_equal(f, np.full(len(rendered), CANCELLATION_B)), f"f - b up to {np.abs(f - CANCELLATION_B).max()}"
    for j, r in enumerate(rendered):
        truth = r.ground_truth.contributions
        assert truth[0] == -truth[1] > 0 and truth[2] == 0.0
        deleted = _delete_regions(x[j], _regions(r))[:2]
        with torch.no_grad():
            classes = model.module(deleted).argmax(1).tolist()
        assert classes == [0, 1], f"{r.meta}: deleting the + mark must flip the class, the - mark must not"


# ----------------------------------------------------------------------------- saturation and distractor


def test_saturation_zero_gradient_on_the_evidence_and_a_texture_that_adds_nothing() -> None:
    rendered = _rendered("saturation", n=32)
    model = MechanismModel(mechanism="saturation")
    x = _inputs(model, [r.image for r in rendered]).requires_grad_(True)
    seen: list[torch.Tensor] = []
    hook = model.module.detect.register_forward_hook(lambda module, args, out: seen.append(out) or out.retain_grad())
    logits = model.module(x)
    hook.remove()
    logits[:, 1].sum().backward()
    (u,) = seen
    # d logit / d u1 is exactly 0 on every pixel: beyond the clamp on the evidence, below t elsewhere
    du1 = u.grad[:, 0]
    assert float(du1.abs().max()) == 0.0
    grad = x.grad.detach()
    inside = _masks(rendered)[:, 0]
    along_w1 = (grad * torch.tensor(W1, dtype=torch.float32).view(1, 3, 1, 1)).sum(1)
    assert float(along_w1[inside].abs().max()) == 0.0, "the gradient has an evidence-axis part on A*"
    assert bool((grad.abs().sum(1) > 0).all()), "the texture must give a gradient on every pixel"
    # the texture sits at q's roots: u2 takes only those values, and the vanilla gradient is no better than random
    assert set(torch.unique(u[:, 1]).tolist()) <= set(TEXTURE_ROOTS)
    saliency = GradientExplainer().explain(model, x.detach(), torch.ones(len(rendered), dtype=torch.long))
    share = np.array([s[m].sum() / s.sum() for s, m in zip(saliency, inside.numpy(), strict=True)])
    area = inside.float().mean((1, 2)).numpy()
    ratio = float(share.mean() / area.mean())
    assert 0.6 < ratio < 1.6, f"gradient mass on A* / A*'s area share = {ratio:.2f} (random: 1)"
    # occlusion and integrated gradients find the mark
    clean = x.detach()
    occluded = torch.where(_masks(rendered), torch.zeros_like(clean), clean)
    drop = _f(model, clean) - _f(model, occluded)
    np.testing.assert_allclose(drop, SATURATION_W * area * SIZE * SIZE, atol=1e-4)
    with torch.no_grad():
        assert model.module(occluded).argmax(1).eq(0).all(), "deleting the mark flips the class"
    ig = np.abs(_integrated_gradients(model, clean, np.ones(len(rendered), dtype=np.int64), 16))
    ig_share = (ig * inside.numpy()).sum((1, 2)) / ig.sum((1, 2))
    assert ig_share.min() > 0.95, f"integrated gradients' mass on A* (16 steps): min {ig_share.min():.6f}"


def test_distractor_is_the_highest_contrast_thing_and_never_moves_the_logit() -> None:
    rendered = _rendered("distractor", n=32)
    model = MechanismModel(mechanism="distractor")
    x = _inputs(model, [r.image for r in rendered])
    labels = _labels(rendered)
    boards = np.zeros((len(rendered), SIZE, SIZE), dtype=bool)
    for j, r in enumerate(rendered):
        x0, y0, x1, y1 = r.meta["distractor"]
        boards[j, y0:y1, x0:x1] = True
        mx0, my0, mx1, my1 = r.meta["mark"]  # beside the board, clear of it, within MARK_REACH of the centre
        assert mx1 + 2 <= x0 or x1 + 2 <= mx0 or my1 + 2 <= y0 or y1 + 2 <= my0
        assert np.hypot((mx0 + mx1) / 2 - SIZE / 2, (my0 + my1) / 2 - SIZE / 2) <= MARK_REACH * SIZE
    board = torch.from_numpy(boards)[:, None]
    clean = _logit(model, x, labels)
    for name, value in {"baseline": torch.zeros_like(x), "inverted": -x, "white": torch.full_like(x, 1.75)}.items():
        delta = float(np.abs(_logit(model, torch.where(board, value, x), labels) - clean).max())
        assert delta == 0.0, f"distractor {name}: max |delta logit| = {delta:.3g}"
    targets = torch.as_tensor(labels)
    context = ExplainContext(samples=[])
    edges = SobelExplainer().explain(model, x, targets, context=context)
    centre = CenterExplainer().explain(model, x, targets, context=context)
    masks = np.stack([r.ground_truth.mask for r in rendered])
    for name, maps in {"sobel": edges, "center": centre}.items():
        flat = maps.reshape(len(rendered), -1).argmax(1)
        on_board = boards.reshape(len(rendered), -1)[np.arange(len(rendered)), flat]
        assert on_board.all(), f"{name}: argmax on the distractor in {on_board.mean():.2f} of samples"
        on_mark = masks.reshape(len(rendered), -1)[np.arange(len(rendered)), flat]
        assert not on_mark.any()
    board_edges = (edges * boards).sum((1, 2)) / boards.sum((1, 2))
    mark_edges = (edges * masks).sum((1, 2)) / masks.sum((1, 2))
    assert (board_edges > mark_edges).all(), f"edge density board/mark min {np.min(board_edges / mark_edges):.2f}"


# ----------------------------------------------------------------------------- suite and runner


def test_the_suite_declares_one_track_per_kind(registry: manager.Registry) -> None:
    assert [t.name for t in MECHANISM_TRACKS] == [f"mechanism-{k}" for k in KINDS]
    for kind, track in zip(KINDS, MECHANISM_TRACKS, strict=True):
        assert (track.dataset, track.model, track.target, track.synthetic) == (
            "mechanisms",
            "mechanism",
            "predicted",
            True,
        )
        assert dict(track.dataset_params) == {"mechanism": kind} and dict(track.model_params) == {"mechanism": kind}
        assert track.metrics == MECHANISM_METRICS and kind in track.description
    assert dict(mechanism_track("additive", n=256).dataset_params) == {"mechanism": "additive", "n": 256}
    assert MechanismsSuite().tracks() == list(MECHANISM_TRACKS)
    assert isinstance(registry.create("suite", "mechanisms"), MechanismsSuite)
    assert isinstance(registry.create("dataset", "mechanisms", mechanism="saturation", n=4), MechanismsDataset)
    assert registry.create("model", "mechanism", mechanism="saturation").identity.startswith("mechanism/saturation@")


def test_the_suite_runs_through_the_runner(tmp_path: Path, registry: manager.Registry) -> None:
    metrics = ["deletion", "family:ground_truth"]
    res = xaibench.run(
        ["gradient", "random"],
        suite="mechanisms",
        metrics=metrics,
        limit=4,
        progress=False,
        publish=False,
        site=False,
        workdir=tmp_path / "work",
    )
    assert res.failed == {} and sorted(res.tracks) == sorted(t.name for t in MECHANISM_TRACKS)
    for name in res.tracks:
        track = res.summary["tracks"][name]
        check = track["provenance"]["model_check"]
        assert not check["at_chance"] and check["mean_top1"] > 0.9, (name, check)
        for metric in ("deletion", "gt_mass_inside", "gt_pointing", "gt_rank_correlation"):
            scored = track["explainers"]["random"]["metrics"][metric]
            assert scored["n"] == 4 and scored["n_na"] == 0, (name, metric, scored)
        scored = track["explainers"]["gradient"]["metrics"]["deletion"]
        assert scored["n"] == 4 and scored["n_na"] == 0, (name, scored)  # no kind is linear everywhere


def test_render_is_a_pure_function_of_the_config() -> None:
    config = MechanismConfig(kind="additive", terms="linear", seed=3)
    a, b = render(config, 7), render(config, 7)
    assert np.array_equal(a.image, b.image) and np.array_equal(
        a.ground_truth.contributions, b.ground_truth.contributions
    )
    assert config.digest != MechanismConfig(kind="additive", seed=3).digest
    assert all(m["axis"] == 1 for m in a.meta["marks"])
    z = 4.0 * a.image.astype(np.float64) - 2.0
    assert np.array_equal(z @ W2, np.zeros((SIZE, SIZE)))  # linear terms only: no axis-2 colour anywhere
