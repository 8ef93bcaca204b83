"""The robustness family (DESIGN 3b): closed forms on a linear model, Quantus 0.6 on the same
perturbed inputs, class-changing perturbations dropped, and the family's place in the ranking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaibench.api import ForwardCounter, MetricInput, Model, Sample
from xaibench.families import BY_NAME, family_index
from xaibench.metrics.plugin import METRICS as BUILTIN
from xaibench.metrics.robustness import ROBUSTNESS_METRICS
from xaibench.metrics.robustness import formulas as fr
from xaibench.metrics.robustness.context import NOISE_TAG, perturbed_pass
from xaibench.seeds import sample_rng

S, C, K = 8, 3, 3
D = C * S * S
IDS = ["a", "b"]
METRICS = {cls.name: cls for cls in ROBUSTNESS_METRICS}


class Toy(Model):
    name = "toy-linear"

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module.eval()
        self.input_size = S


def linear_model(seed: int = 0) -> tuple[Toy, np.ndarray]:
    """Logits ``W x + b`` through ``Flatten -> Linear`` (the representation is x itself)."""
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(D, K)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(K, D, generator=g))
        lin.bias.copy_(torch.tensor([3.0, 0.0, -3.0]))  # class 0 by a wide margin on small inputs
    module = torch.nn.Sequential(torch.nn.Flatten(), lin)
    return Toy(module), lin.weight.detach().double().numpy().reshape(K, C, S, S)


class Gradient:
    """d logit_t / dx summed over channels (constant on a linear model)."""

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        x = torch.as_tensor(inputs, dtype=torch.float32).detach().clone().requires_grad_(True)
        out = model.module(x)
        out.gather(1, torch.as_tensor(targets).long()[:, None]).sum().backward()
        return x.grad.sum(dim=1).numpy()


class GradientXInput(Gradient):
    def explain(self, model, inputs, targets, *, seed=0, context=None):
        x = torch.as_tensor(inputs, dtype=torch.float32).detach().clone().requires_grad_(True)
        model.module(x).gather(1, torch.as_tensor(targets).long()[:, None]).sum().backward()
        return (x.grad * x).sum(dim=1).detach().numpy()


def inputs(seed: int = 1) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).uniform(-0.2, 0.2, (len(IDS), C, S, S)).astype(np.float32))


def make_batch(model, x, explainer, *, seed=0, targets=None) -> MetricInput:
    targets = np.zeros(len(x), np.int64) if targets is None else targets
    saliency = explainer.explain(model, x, torch.as_tensor(targets))
    return MetricInput(
        saliency=np.asarray(saliency, dtype=np.float64),
        concepts=None,
        samples=[Sample(id=i, image=np.zeros((S, S, 3), np.float32)) for i in IDS[: len(x)]],
        targets=targets,
        inputs=x,
        model=model,
        forward=ForwardCounter(model.module, batch_size=7),
        explainer=explainer,
        seed=seed,
    )


def score(name, batch, **params):
    return METRICS[name](**params).score(batch)


def our_noise(seed: int, n: int, radius: float) -> np.ndarray:
    """The stream :mod:`xaibench.metrics.robustness.context` draws, rebuilt here."""
    return np.stack([sample_rng(seed, sid, NOISE_TAG).uniform(-radius, radius, (n, C, S, S)) for sid in IDS]).astype(
        np.float32
    )


# ----------------------------------------------------------------------------- registration


def test_family_metadata_and_registration():
    assert [c.name for c in ROBUSTNESS_METRICS] == [
        "local_lipschitz_estimate",
        "max_sensitivity",
        "avg_sensitivity",
        "continuity",
        "relative_input_stability",
        "relative_output_stability",
        "relative_representation_stability",
    ]
    for cls in ROBUSTNESS_METRICS:
        assert cls in BUILTIN
        assert (cls.family, cls.direction, cls.ranking, cls.version[0] in "12") == ("robustness", "lower", True, True)
        assert "lower is better" in cls.description and "lower is better" in (cls.__doc__ or "").lower()
        assert cls.default == (cls.name in ("max_sensitivity", "avg_sensitivity", "local_lipschitz_estimate"))
    # shown beside the faithfulness family, before ground_truth (DESIGN 11) and perceptual
    assert "robustness" in BY_NAME and family_index("robustness") == family_index("faithfulness") + 1
    assert BY_NAME["robustness"].ranked_within and not BY_NAME["robustness"].counted_overall


# ----------------------------------------------------------------------------- oracles on a linear model


def test_gradient_of_a_linear_model_is_constant_so_every_ratio_is_zero():
    model, _ = linear_model()
    batch = make_batch(model, inputs(), Gradient())
    for name in METRICS:
        out = score(name, batch)
        assert out.values.tolist() == [0.0, 0.0], name
        assert all(r is None for r in out.reasons)


def test_gradient_x_input_closed_forms():
    """E(x) = sum_c W_c x_c, so E(x) - E(x + u) = -sum_c W_c u_c and h(x) - h(x + u) = -W u."""
    model, w = linear_model()
    x = inputs()
    n, radius, seed = 6, 0.05, 4
    batch = make_batch(model, x, GradientXInput(), seed=seed)
    u = our_noise(seed, n, radius).astype(np.float64)
    x64 = x.double().numpy()
    e = (w[0][None] * x64).sum(1)  # (B, S, S)
    de = (w[0][None, None] * u).sum(2).reshape(2, n, -1)  # E' - E
    du = u.reshape(2, n, -1)
    e_flat = e.reshape(2, 1, -1)
    dh = du @ w.reshape(K, -1).T  # h' - h
    rel_e = np.linalg.norm(de / e_flat, axis=-1)
    expected = {
        "local_lipschitz_estimate": (np.linalg.norm(de, axis=-1) / np.linalg.norm(du, axis=-1)).max(1),
        "continuity": (np.abs(de).sum(-1) / np.linalg.norm(du, axis=-1)).max(1),
        "max_sensitivity": (np.linalg.norm(de, axis=-1) / np.linalg.norm(e_flat, axis=-1)).max(1),
        "avg_sensitivity": (np.linalg.norm(de, axis=-1) / np.linalg.norm(e_flat, axis=-1)).mean(1),
        "relative_input_stability": (rel_e / np.linalg.norm(du / x64.reshape(2, 1, -1), axis=-1)).max(1),
        "relative_output_stability": (rel_e / np.linalg.norm(dh, axis=-1)).max(1),
        "relative_representation_stability": (rel_e / np.linalg.norm(du / x64.reshape(2, 1, -1), axis=-1)).max(1),
    }
    first = True
    for name, want in expected.items():
        out = score(name, batch, n=n, radius=radius)
        np.testing.assert_allclose(out.values, want, rtol=1e-4, err_msg=name)
        assert out.forward_passes == (2 * (n + 1) + 2 * n if first else 0), name  # one shared pass
        first = False
    # The Lipschitz constant of x -> E(x) (per pixel, sqrt(sum_c W_c^2)) bounds the estimate.
    lipschitz = np.sqrt((w[0] ** 2).sum(0)).max()
    assert np.all(score("local_lipschitz_estimate", batch, n=n, radius=radius).values <= lipschitz + 1e-9)


def test_pixel_lipschitz_constant_is_reached_by_a_one_pixel_model():
    """A model reading one pixel through one channel with weight w: E = w x there, so the estimate
    is exactly |w| (every perturbation moves only that pixel's map by w u and the input by >= u)."""
    w = 2.5
    lin = torch.nn.Linear(D, K)
    with torch.no_grad():
        lin.weight.zero_()
        lin.weight[0, 0] = w  # channel 0, pixel (0, 0)
        lin.bias.copy_(torch.tensor([10.0, 0.0, 0.0]))
    model = Toy(torch.nn.Sequential(torch.nn.Flatten(), lin))
    x = torch.zeros(2, C, S, S)
    x[:, 0] = 0.1
    batch = make_batch(model, x, GradientXInput())
    out = score("local_lipschitz_estimate", batch, n=4, radius=0.01)
    u = our_noise(0, 4, 0.01).astype(np.float64)
    want = (w * np.abs(u[:, :, 0, 0, 0]) / np.linalg.norm(u.reshape(2, 4, -1), axis=-1)).max(1)
    np.testing.assert_allclose(out.values, want, rtol=1e-5)
    assert np.all(out.values < w)


# ----------------------------------------------------------------------------- dropped perturbations


class TieBreak(torch.nn.Module):
    """Logits ``[-|sum(x - x0)|, 0]``: class 0 at x0 (a tie, argmax takes the first), class 1
    anywhere else, so every perturbation of x0 changes the predicted class."""

    def __init__(self, x0: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("x0", x0)
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x):
        s = (x - self.x0).flatten(1).sum(1, keepdim=True).abs()
        return torch.cat([-s, torch.zeros_like(s)], dim=1)


class Half(torch.nn.Module):
    """Logits ``[sum(x), 0]``: the sign of the perturbation's sum decides the class at x = 0+."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x):
        s = x.flatten(1).sum(1, keepdim=True)
        return torch.cat([s, torch.zeros_like(s)], dim=1)


class Ones:
    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return (torch.as_tensor(inputs).sum(1) + 1.0).detach().numpy()


def test_no_perturbation_keeps_the_class_is_na_with_a_reason():
    x = inputs()
    model = Toy(TieBreak(x[0:1].clone()))
    batch = make_batch(model, x[:1], Ones())
    batch.samples = batch.samples[:1]
    out = score("max_sensitivity", batch, n=3)
    assert np.isnan(out.values[0])
    assert out.reasons[0] == (
        "no perturbation kept the predicted class (3 of 3 changed it at radius 0.02 "
        "and at every halving down to 0.0025)"
    )
    # 3 forwards at each of the 4 radii plus the clean one; nothing explained
    assert out.forward_passes == 1 + 3 * 4


class Ball(torch.nn.Module):
    """Logits ``[t - |sum(x - x0)|, 0]``: class 0 while the perturbation's sum stays within ``t``."""

    def __init__(self, x0: torch.Tensor, t: float) -> None:
        super().__init__()
        self.register_buffer("x0", x0)
        self.t = t
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x):
        s = (x - self.x0).flatten(1).sum(1, keepdim=True).abs()
        return torch.cat([self.t - s, torch.zeros_like(s)], dim=1)


def test_a_sample_whose_perturbations_all_change_the_class_is_tried_with_the_noise_halved():
    x = inputs()[:1]
    n, radius = 8, 0.02
    u = our_noise(0, n, radius)[:1].astype(np.float64)
    sums = np.abs(u.reshape(n, -1).sum(-1))
    t = 0.3 * sums.min()  # every perturbation leaves the ball at r and r/2; some stay inside at r/4
    assert (sums / 4 < t).any() and not (sums / 2 < t).any()
    calls = []

    class Counting(Ones):
        def explain(self, model, inputs, targets, *, seed=0, context=None):
            if context is not None:
                calls.append(len(context.samples))
            return super().explain(model, inputs, targets)

    batch = make_batch(Toy(Ball(x.clone(), t)), x, Counting())
    batch.samples = batch.samples[:1]
    out = score("local_lipschitz_estimate", batch, n=n, radius=radius)
    kept = sums / 4 < t
    assert out.curves[0]["radius"] == radius / 4
    assert [r is not None for r in out.curves[0]["ratio"]] == kept.tolist()
    ratios = np.linalg.norm(u.sum(2).reshape(n, -1) / 4, axis=-1) / np.linalg.norm(u.reshape(n, -1) / 4, axis=-1)
    assert out.values[0] == pytest.approx(ratios[kept].max(), rel=1e-5)
    assert calls == [int(kept.sum())]  # only the perturbations that kept the class are explained
    assert out.forward_passes == 1 + n * 3 + int(kept.sum())


def test_class_changing_perturbations_are_dropped():
    model = Toy(Half())
    x = torch.full((2, C, S, S), 1e-7)
    batch = make_batch(model, x, Ones())
    n, radius = 12, 0.02
    out = score("local_lipschitz_estimate", batch, n=n, radius=radius)
    u = our_noise(0, n, radius).astype(np.float64)
    kept = (x.double().numpy()[:, None] + u).reshape(2, n, -1).sum(-1) > 0
    assert 0 < kept.sum() < kept.size  # some kept, some dropped
    ratios = np.linalg.norm(u.sum(2).reshape(2, n, -1), axis=-1) / np.linalg.norm(u.reshape(2, n, -1), axis=-1)
    np.testing.assert_allclose(out.values, np.where(kept, ratios, -np.inf).max(1), rtol=1e-4)
    for b in range(2):
        assert [r is None for r in out.curves[b]["ratio"]] == (~kept[b]).tolist()
    # A perturbation that changes the class would have given a larger ratio somewhere: dropping matters.
    assert not np.allclose(ratios.max(1), out.values)


def test_all_zero_map_and_missing_explainer():
    model, _ = linear_model()
    batch = make_batch(model, inputs(), Gradient())
    batch.saliency = np.zeros_like(batch.saliency)
    assert "all-zero" in score("max_sensitivity", batch).reasons[0]
    batch.explainer = None
    assert "explainer" in score("continuity", batch).reasons[0]
    model = Toy(torch.nn.Sequential(torch.nn.Conv2d(C, K, S), torch.nn.Flatten()))  # no linear layer
    out = score("relative_representation_stability", make_batch(model, inputs(), Gradient()))
    assert "representation" in out.reasons[0]


def test_explainer_runs_on_all_perturbations_in_chunks_and_values_do_not_depend_on_the_batch():
    calls = []

    class Counting(GradientXInput):
        def explain(self, model, inputs, targets, *, seed=0, context=None):
            if context is not None:  # the metric's calls (not make_batch's clean map)
                calls.append([s.id for s in context.samples])
            return super().explain(model, inputs, targets)

    model, _ = linear_model()
    x = inputs()
    both = score("max_sensitivity", make_batch(model, x, Counting()))
    # the 2 x 10 perturbed inputs, sample-major, in calls of the batch's size (2)
    assert calls == [["a", "a"]] * 5 + [["b", "b"]] * 5
    alone = MetricInput(**{**make_batch(model, x[1:], Counting()).__dict__})
    alone.samples = [Sample(id="b", image=np.zeros((S, S, 3), np.float32))]
    assert score("max_sensitivity", alone).values[0] == pytest.approx(both.values[1], rel=1e-9)


# ----------------------------------------------------------------------------- Quantus 0.6 on the same inputs


def _quantus_inputs(name: str, n: int = 5, radius: float = 0.05):
    model, _ = linear_model(seed=3)
    x = inputs(seed=5)
    batch = make_batch(model, x, GradientXInput())
    ours = score(name, batch, n=n, radius=radius)
    p, _ = perturbed_pass(batch, n, radius, 32)
    assert not isinstance(p, str) and p.kept.all()
    step = iter(range(n))

    def perturb_func(arr, **kwargs):
        return p.x_p[:, next(step)].reshape(len(arr), -1)

    def explain_func(model, inputs, targets, **kwargs):
        return GradientXInput().explain(None if model is None else Toy(model), inputs, targets)[:, None]

    common = dict(
        model=model.module,
        x_batch=x.numpy(),
        y_batch=np.zeros(len(x), np.int64),
        a_batch=batch.saliency[:, None].astype(np.float32),
        explain_func=explain_func,
        channel_first=True,
        softmax=False,
        device="cpu",
    )
    return ours, perturb_func, common


QUANTUS = {
    "max_sensitivity": ("MaxSensitivity", {}),
    "avg_sensitivity": ("AvgSensitivity", {}),
    "local_lipschitz_estimate": ("LocalLipschitzEstimate", {}),
    "relative_input_stability": ("RelativeInputStability", {}),
    "relative_output_stability": ("RelativeOutputStability", {}),
    "relative_representation_stability": ("RelativeRepresentationStability", {"layer_names": ["0"]}),
}


@pytest.mark.parametrize("name", sorted(QUANTUS))
def test_equal_to_quantus_on_the_same_perturbed_inputs(name):
    quantus = pytest.importorskip("quantus")
    ours, perturb_func, common = _quantus_inputs(name)
    cls_name, extra = QUANTUS[name]
    metric = getattr(quantus, cls_name)(
        nr_samples=5, perturb_func=perturb_func, abs=False, normalise=False, disable_warnings=True, **extra
    )
    theirs = np.asarray(metric(**common), dtype=np.float64)
    np.testing.assert_allclose(ours.values, theirs, rtol=1e-6, atol=0)


def test_continuity_formula_equals_quantus_on_its_translations_and_differs_in_the_perturbations():
    """Montavon et al. 2018: max ||E(x) - E(x')||_1 / ||x - x'||_2. Quantus 0.6's batched
    ``Continuity`` computes the same ratio, but over horizontal translations of the input with black
    fill (up to the full width; Quantus issue 357 on its departures from the paper), not over small
    perturbations that keep the predicted class. On Quantus's own translated inputs our formula
    equals its value; with the family's perturbations (ours) the value differs."""
    quantus = pytest.importorskip("quantus")
    from quantus.functions.perturb_func import batched_translation

    size, steps = 28, 4
    x = torch.from_numpy(np.random.default_rng(5).uniform(0.1, 0.9, (2, C, size, size)).astype(np.float32))
    lin = torch.nn.Linear(C * size * size, K)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(K, C * size * size, generator=torch.Generator().manual_seed(0)))
        lin.bias.copy_(torch.tensor([500.0, 0.0, 0.0]))
    model = Toy(torch.nn.Sequential(torch.nn.Flatten(), lin))
    model.input_size = size
    batch = make_batch(model, x, GradientXInput())
    batch.samples = [Sample(id=i, image=np.zeros((size, size, 3), np.float32)) for i in IDS]

    def explain_func(model, inputs, targets, **kwargs):
        return GradientXInput().explain(Toy(model), inputs, targets)[:, None]

    theirs = quantus.Continuity(nr_steps=steps, abs=False, normalise=False, disable_warnings=True)(
        model=model.module,
        x_batch=x.numpy(),
        y_batch=np.zeros(2, np.int64),
        a_batch=batch.saliency[:, None].astype(np.float32),
        explain_func=explain_func,
        channel_first=True,
        softmax=False,
        device="cpu",
    )
    dx = (2 * size + 1) // steps
    x_p = np.stack(
        [batched_translation(x.numpy(), "black", -size + dx * (k + 1), direction="x") for k in range(steps)], axis=1
    )
    gxi = GradientXInput()
    e_p = np.stack([gxi.explain(model, torch.from_numpy(x_p[:, k]), torch.zeros(2)) for k in range(steps)], 1)
    ratios = fr.lipschitz_ratio(batch.saliency, e_p, x.numpy(), x_p, order=1)
    assert np.isnan(ratios[:, 1]).all()  # Quantus's second step translates by 0: x' = x, 0 / 0 (Quantus: 0)
    formula = np.nanmax(ratios, axis=1)
    np.testing.assert_allclose(np.asarray(theirs, dtype=np.float64), formula, rtol=1e-5)
    ours = score("continuity", batch).values
    assert np.all(ours > 0) and not np.allclose(ours, formula, rtol=1e-3)
    gradient = make_batch(model, x, Gradient())  # a constant map: continuity 0 on any perturbation
    gradient.samples = batch.samples
    assert score("continuity", gradient).values.tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------- formulas


def test_formulas_by_hand():
    e = np.array([[1.0, 2.0]])
    e_p = np.array([[[1.0, 4.0], [2.0, 2.0]]])
    x = np.array([[1.0, 1.0]])
    x_p = np.array([[[1.0, 2.0], [3.0, 1.0]]])
    np.testing.assert_allclose(fr.relative_sensitivity(e, e_p), [[2 / np.sqrt(5), 1 / np.sqrt(5)]])
    np.testing.assert_allclose(fr.lipschitz_ratio(e, e_p, x, x_p), [[2.0, 0.5]])
    np.testing.assert_allclose(fr.lipschitz_ratio(e, e_p, x, x_p, order=1), [[2.0, 0.5]])
    # RIS: ||(e - e')/e|| = [1, 1]; ||(x - x')/x|| = [1, 2].
    np.testing.assert_allclose(fr.relative_input_stability(e, e_p, x, x_p), [[1.0, 0.5]])
    # eps floor: an unchanged input gives the explanation's change over 1e-6.
    np.testing.assert_allclose(fr.relative_stability(np.array([[1e-3]]), np.array([[0.0]])), [[1e3]])
    kept = np.array([[True, False]])
    assert fr.aggregate(np.array([[1.0, 5.0]]), kept, "max").tolist() == [1.0]
    assert np.isnan(fr.aggregate(np.array([[1.0, 5.0]]), ~kept & kept, "mean")[0])


# ----------------------------------------------------------------------------- ranking


def test_robustness_is_ranked_within_its_family_and_stays_out_of_the_overall_rank():
    from rich.console import Console

    from xaibench.publish.board import Leaderboard
    from xaibench.publish.leaderboard import Entry, leaderboard_rows
    from xaibench.publish.writers import print_leaderboard

    ids = [f"s{k}" for k in range(10)]

    def entry(x, metric, value, family, direction):
        samples = {s: value + 0.01 * k for k, s in enumerate(ids)}
        return Entry("t", x, metric, family, direction, True, value, value, value, 10, 0, samples)

    base = [entry("a", "deletion", 0.1, "faithfulness", "lower"), entry("b", "deletion", 0.3, "faithfulness", "lower")]
    robust = [  # b is the more robust explainer: it must win the robustness rank only
        entry("a", "max_sensitivity", 0.9, "robustness", "lower"),
        entry("b", "max_sensitivity", 0.2, "robustness", "lower"),
        entry("a", "local_lipschitz_estimate", 5.0, "robustness", "lower"),
        entry("b", "local_lipschitz_estimate", 1.0, "robustness", "lower"),
    ]
    before = {(r["explainer"], r["metric"]): r for r in leaderboard_rows(base)}
    after = {(r["explainer"], r["metric"]): r for r in leaderboard_rows(base + robust)}
    assert {k: v for k, v in after.items() if k in before} == before  # every row unchanged, overall included
    added = {k: v for k, v in after.items() if k not in before}
    assert {v["family"] for v in added.values()} == {"robustness"}
    assert {k: v["rank"] for k, v in added.items() if k[1] == "rank:robustness"} == {
        ("a", "rank:robustness"): 2,
        ("b", "rank:robustness"): 1,
    }
    assert after[("a", "rank:overall")]["rank"] == 1  # deletion alone decides the overall rank
    board = Leaderboard(rows=list(leaderboard_rows(base + robust)))
    board.ranking_metrics = {"t": {"deletion", "max_sensitivity", "local_lipschitz_estimate"}}
    console = Console(record=True, width=200)
    print_leaderboard(board, console=console)
    text = console.export_text()
    assert "robustness" in text and "max_sensitivity" in text


def test_suites_run_the_family(registry):
    from xaibench.suites.embedded import DefaultSuite, FullSuite
    from xaibench.suites.metric_selection import resolve_metrics

    def robustness(track):
        return sorted(m.name for m in resolve_metrics(registry, track, None) if m.family == "robustness")

    default = {t.name: robustness(t) for t in DefaultSuite().tracks()}
    cheap = ["avg_sensitivity", "local_lipschitz_estimate", "max_sensitivity"]
    assert default == {"shapes": cheap, "shapes-shortcut": cheap, "photos": []}
    full = {t.name: robustness(t) for t in FullSuite().tracks()}
    assert all(names == sorted(METRICS) for names in full.values())
