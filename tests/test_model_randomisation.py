"""Sanity family (DESIGN 4b): cascading model-parameter randomisation and ``model_randomisation``.

Oracles: the re-initialised weights are rebuilt by hand from the documented seeds (torch's own
constructors under the derived seed; N(0, std) from a seeded generator); Spearman on hand-made
maps (3 / sqrt(10) for a small case with ties, and scipy's ``spearmanr`` on random rows). On
real tracks: a model-free explainer keeps its map when the model is randomised (1.0, flagged),
a gradient does not (< 0.5).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
import torch
from click.testing import CliRunner
from torch import nn

from xaibench.api import ExplainContext, Explainer, ForwardCounter, MetricInput, Model, Sample, TrackSpec
from xaibench.cli import cli
from xaibench.metrics.sanity.formulas import spearman_rows
from xaibench.metrics.sanity.randomisation import ModelRandomisation, randomisation_seed
from xaibench.plugins.manager import get_registry
from xaibench.randomisation import Randomisation, parameter_blocks, parameter_modules, randomise, randomised_model
from xaibench.runner.distributions import mean_curve
from xaibench.runner.evaluate import score_track
from xaibench.runner.executors import ExplainerFailed, InProcessExecutor, ModelSpec, explainer_handles
from xaibench.runner.explain import CachedExplainer, explain_track
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.track import build_track, load_track
from xaibench.seeds import derive_seed
from xaibench.testing.tiny import TinyCNN, TinyDataset

# ----------------------------------------------------------------------------- a small network


class Scale(nn.Module):
    """A module that owns a parameter but has no ``reset_parameters``."""

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.linspace(0.5, 2.0, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gain.view(1, -1, 1, 1)


class Net(nn.Module):
    """Registration order: conv1, bn1, (relu), conv2, scale, (pool), fc; output = fc."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(123)
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
            self.scale = Scale()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 3)
        with torch.no_grad():  # trained-looking batch-norm statistics
            self.bn1.running_mean.fill_(0.3)
            self.bn1.running_var.fill_(2.0)
            self.bn1.weight.fill_(1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.scale(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(self.pool(x).flatten(1))


class NetModel(Model):
    name = "test-net"

    def __init__(self) -> None:
        self.module = Net().eval()
        self.input_size = 8

    @property
    def identity(self) -> str:
        return "test-net@0"


def state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def changed(before: dict[str, torch.Tensor], module: nn.Module) -> set[str]:
    """The modules (path prefixes) of the parameters and buffers that differ from ``before``."""
    return {k.rsplit(".", 1)[0] for k, v in module.state_dict().items() if not torch.equal(v, before[k])}


# ----------------------------------------------------------------------------- blocks and weights


def test_blocks_are_parameter_owners_output_first_in_near_equal_groups() -> None:
    net = Net()
    assert [name for name, _ in parameter_modules(net)] == ["fc", "scale", "conv2", "bn1", "conv1"]
    assert parameter_blocks(net, 2) == [["fc", "scale", "conv2"], ["bn1", "conv1"]]
    assert parameter_blocks(net, 3) == [["fc", "scale"], ["conv2", "bn1"], ["conv1"]]
    assert parameter_blocks(net, 5) == [["fc"], ["scale"], ["conv2"], ["bn1"], ["conv1"]]
    assert parameter_blocks(net, 9) == parameter_blocks(net, 5)  # fewer modules than blocks
    assert parameter_blocks(nn.ReLU(), 5) == []
    with pytest.raises(ValueError, match="blocks"):
        parameter_blocks(net, 0)


@pytest.mark.parametrize(
    ("upto", "expected"),
    [
        (0, set()),
        (1, {"fc"}),
        (2, {"fc", "scale"}),
        (3, {"fc", "scale", "conv2"}),
        (5, {"fc", "scale", "conv2", "bn1", "conv1"}),
    ],
)
def test_randomise_changes_exactly_the_first_blocks_from_the_output(upto: int, expected: set[str]) -> None:
    net = Net()
    before = state(net)
    assert randomise(net, upto=upto, blocks=5, seed=7) == ["fc", "scale", "conv2", "bn1", "conv1"][:upto]
    assert changed(before, net) == expected


def test_randomise_is_seeded_bit_identical_and_leaves_global_generators_alone() -> None:
    a, b, c = Net(), Net(), Net()
    rng_before = torch.get_rng_state()
    randomise(a, upto=5, seed=11)
    randomise(b, upto=5, seed=11)
    randomise(c, upto=5, seed=12)
    assert torch.equal(torch.get_rng_state(), rng_before)
    sa, sb, sc = state(a), state(b), state(c)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)  # bit-identical, not merely close
    assert not torch.equal(sa["fc.weight"], sc["fc.weight"])


def test_reinitialised_weights_match_the_documented_recipe() -> None:
    net = Net()
    gain = net.scale.gain.detach().double().numpy().copy()
    randomise(net, upto=5, seed=5)
    # reset_parameters under the CPU generator seeded by derive_seed(seed, path): what torch's
    # own constructor draws under that seed
    torch.manual_seed(derive_seed(5, "fc"))
    assert torch.equal(net.fc.weight, nn.Linear(4, 3).weight)
    torch.manual_seed(derive_seed(5, "conv1"))
    fresh = nn.Conv2d(3, 4, 3, padding=1)
    assert torch.equal(net.conv1.weight, fresh.weight) and torch.equal(net.conv1.bias, fresh.bias)
    # batch norm: weight 1, bias 0 and its running statistics reset (buffers copied back too)
    assert torch.equal(net.bn1.weight, torch.ones(4)) and torch.equal(net.bn1.bias, torch.zeros(4))
    assert torch.equal(net.bn1.running_mean, torch.zeros(4)) and torch.equal(net.bn1.running_var, torch.ones(4))
    # no reset_parameters: N(0, std of the original) from a generator seeded by (seed, path, name)
    std = float(np.std(gain))
    assert std == pytest.approx(math.sqrt(np.mean((gain - gain.mean()) ** 2)))
    drawn = torch.randn(
        4, generator=torch.Generator().manual_seed(derive_seed(5, "scale", "gain")), dtype=torch.float64
    )
    assert torch.equal(net.scale.gain, (drawn * std).float())


def test_randomise_rejects_blocks_beyond_the_model() -> None:
    with pytest.raises(ValueError, match=r"upto must be in \[0, 5\]"):
        randomise(Net(), upto=6, blocks=5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_same_weights_on_cuda_and_cpu() -> None:
    cpu, gpu = Net(), Net().cuda()
    randomise(cpu, upto=5, seed=3)
    randomise(gpu, upto=5, seed=3)
    assert all(torch.equal(v, gpu.state_dict()[k].cpu()) for k, v in cpu.state_dict().items())


def test_randomised_model_is_a_lazy_copy_with_its_own_identity() -> None:
    model = NetModel()
    before = state(model.module)
    copy2 = randomised_model(model, upto=2, blocks=5, seed=9)
    assert copy2.identity == "test-net@0~randomised(2/5,seed=9)"
    assert copy2.randomisation == Randomisation(base="test-net@0", upto=2, blocks=5, seed=9)
    assert "module" not in vars(copy2)  # nothing copied until a model attribute is read
    assert isinstance(copy2, NetModel) and copy2.input_size == 8
    assert copy2.module is not model.module
    assert changed(before, copy2.module) == {"fc", "scale"}
    assert changed(before, model.module) == set()  # the original is untouched
    again = randomised_model(model, upto=2, blocks=5, seed=9)
    assert all(torch.equal(v, again.module.state_dict()[k]) for k, v in copy2.module.state_dict().items())
    assert copy.deepcopy(copy2).identity == copy2.identity
    # blocks are capped at the model's 5 parameter owners; the identity names the blocks used
    assert randomised_model(model, upto=5, blocks=8, seed=9).identity == "test-net@0~randomised(5/5,seed=9)"
    with pytest.raises(ValueError, match="already a randomised copy"):
        randomised_model(copy2, upto=1)


# ----------------------------------------------------------------------------- Spearman


def test_spearman_oracles() -> None:
    a = np.arange(12, dtype=float).reshape(1, 3, 4)
    assert spearman_rows(a, a)[0] == pytest.approx(1.0, abs=1e-12)
    assert spearman_rows(a, -a)[0] == pytest.approx(-1.0, abs=1e-12)
    assert spearman_rows(a, a**3 + 5)[0] == pytest.approx(1.0, abs=1e-12)  # ranks only
    # ties get average ranks: x ranks (1, 2.5, 2.5, 4), y ranks (1, 3, 2, 4) -> 4.5 / sqrt(4.5 * 5)
    x, y = np.array([[1.0, 2.0, 2.0, 3.0]]), np.array([[10.0, 30.0, 20.0, 40.0]])
    assert spearman_rows(x, y)[0] == pytest.approx(3 / math.sqrt(10), abs=1e-12)
    constant = np.ones((1, 4))
    assert np.isnan(spearman_rows(constant, y)[0]) and np.isnan(spearman_rows(y, constant)[0])
    rng = np.random.default_rng(0)
    p, q = rng.integers(0, 5, (6, 40)).astype(float), rng.random((6, 40))
    expected = [scipy.stats.spearmanr(p[i], q[i]).statistic for i in range(6)]
    assert np.allclose(spearman_rows(p, q), expected, atol=1e-12)


def test_mean_curve_reads_value_curves() -> None:
    curves = [{"fraction": [0.5, 1.0], "value": [0.8, 0.2]}, {"fraction": [0.5, 1.0], "value": [0.6, 0.0]}]
    out = mean_curve(curves)
    assert out is not None and out["mean"] == [0.7, 0.1] and out["n"] == 2


# ----------------------------------------------------------------------------- the metric


class WeightMap(Explainer):
    """A map that depends on the model: the input's first channel times the fc weights' sum."""

    name = "weight-map"
    version = "1.0.0"

    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = []

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        self.models.append(model.identity)
        w = model.module.fc.weight.detach().sum(dim=0)  # (4,)
        h = inputs.shape[-1]
        ramp = torch.arange(h * h, dtype=torch.float32).view(h, h)
        return torch.stack([ramp * float(w[t % 4]) + (ramp % 3) * float(w[(t + 1) % 4]) for t in targets]).numpy()


class Fixed(Explainer):
    """A model-free map (a ramp) and, on demand, NaN or constant maps on randomised models."""

    name = "fixed"
    version = "1.0.0"

    def __init__(self, on_randomised: str = "ramp") -> None:
        super().__init__()
        self.on_randomised = on_randomised

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        h = inputs.shape[-1]
        maps = np.stack([np.arange(h * h, dtype=np.float32).reshape(h, h)] * len(inputs))
        if "~randomised" in model.identity and self.on_randomised == "nan":
            maps[0, 0, 0] = np.nan
        if "~randomised" in model.identity and self.on_randomised == "constant":
            maps[:] = 1.0
        return maps


def net_batch(explainer: Explainer | None, saliency: np.ndarray | None = None, n: int = 2) -> MetricInput:
    model = NetModel()
    inputs = torch.linspace(-1, 1, n * 3 * 8 * 8).view(n, 3, 8, 8)
    if saliency is None:
        saliency = np.stack([np.arange(64, dtype=np.float32).reshape(8, 8)] * n)
    return MetricInput(
        saliency=saliency,
        concepts=None,
        samples=[Sample(id=f"s{i}", image=np.zeros((8, 8, 3), np.float32)) for i in range(n)],
        targets=np.arange(n, dtype=np.int64),
        inputs=inputs,
        model=model,
        forward=ForwardCounter(model.module),
        explainer=explainer,
        seed=42,
    )


def test_metric_reruns_the_explainer_on_each_randomised_model() -> None:
    explainer = WeightMap()
    batch = net_batch(explainer)
    seed = randomisation_seed(42)
    reference = explainer.explain(batch.model, batch.inputs, batch.targets)
    batch.saliency = reference
    out = ModelRandomisation(blocks=3).score(batch)
    base = "test-net@0"
    # the reference re-run on the model itself, then k = 1..3
    assert explainer.models[1:] == [base] + [f"{base}~randomised({k}/3,seed={seed})" for k in (1, 2, 3)]
    # oracle: the same explainer on hand-randomised copies, correlated with the scored map
    expected = []
    for k in (1, 2, 3):
        net = copy.deepcopy(batch.model.module)
        randomise(net, upto=k, blocks=3, seed=seed)
        holder = NetModel()
        holder.module = net
        maps = WeightMap().explain(holder, batch.inputs, batch.targets)
        expected.append(spearman_rows(np.abs(reference), np.abs(maps)))
    expected = np.stack(expected, axis=1)
    assert np.allclose(out.values, expected[:, -1], atol=1e-12)
    assert out.curves is not None
    for b in range(2):
        assert out.curves[b]["fraction"] == [1 / 3, 2 / 3, 1.0]
        assert np.allclose(out.curves[b]["value"], expected[b], atol=1e-12)
    assert out.forward_passes == 2 * (3 + 1)


def test_model_free_explainer_scores_one() -> None:
    out = ModelRandomisation().score(net_batch(Fixed()))
    assert out.values.tolist() == [1.0, 1.0]
    assert out.curves[0] == {"fraction": [0.2, 0.4, 0.6, 0.8, 1.0], "value": [1.0] * 5}
    assert out.forward_passes == 2 * (5 + 1)


class SeededNoise(Explainer):
    """Noise that depends on the call's seed and the sample, never on the model (like ``random``)."""

    name = "seeded-noise-test"
    version = "1.0.0"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        ids = [s.id for s in context.samples]
        return np.stack([np.random.default_rng([seed, int(i[1:])]).random(inputs.shape[-2:]) for i in ids])


def test_an_explainer_that_draws_its_own_noise_is_found_insensitive() -> None:
    """The scored map came from another seed than the metric's re-runs: the metric compares the
    randomised re-runs with its own re-run on the model, so model-free noise scores 1."""
    batch = net_batch(SeededNoise(), saliency=np.random.default_rng(7).random((2, 8, 8)).astype(np.float32))
    out = ModelRandomisation(blocks=3).score(batch)
    assert out.values.tolist() == [1.0, 1.0]


def test_metric_na_reasons() -> None:
    metric = ModelRandomisation()
    out = metric.score(net_batch(None))
    assert out.reasons == ["needs the explainer to re-run it on randomised models"] * 2
    concepts = net_batch(Fixed())
    concepts.saliency, concepts.concepts = None, [{"a": 1.0}, {"b": 2.0}]
    assert metric.score(concepts).reasons == ["concept explanations have no pixel ranking"] * 2
    flat = np.stack([np.full((8, 8), 3.0, np.float32), np.arange(64, dtype=np.float32).reshape(8, 8)])
    out = metric.score(net_batch(Fixed(), saliency=flat))
    assert out.reasons[0] == "constant map: Spearman undefined" and out.values[1] == 1.0
    signed = np.stack([np.array([[-1.0, 1.0], [1.0, -1.0]], np.float32).repeat(4, 0).repeat(4, 1)] * 2)
    assert metric.score(net_batch(Fixed(), saliency=signed)).reasons[0] == "constant map: Spearman undefined"
    out = metric.score(net_batch(Fixed("constant")))
    assert out.reasons == ["constant map: Spearman undefined"] * 2 and np.isnan(out.values).all()
    out = metric.score(net_batch(Fixed("nan")))
    assert out.reasons[0] == "the explainer returned NaN or infinite values on the randomised model"
    assert out.values[1] == 1.0
    with pytest.raises(ValueError, match="blocks"):
        ModelRandomisation(blocks=0)


# ----------------------------------------------------------------------------- forwarding and caching


def tiny_context(n: int = 3) -> Any:
    dataset = TinyDataset(n=n)
    spec = TrackSpec(name="tiny", dataset="tiny", model="tiny-cnn")
    return build_track(spec, dataset, TinyCNN(), list(dataset.samples()))


def test_handle_forwards_the_randomisation_to_its_worker() -> None:
    track = tiny_context()
    registry = get_registry()
    executor = InProcessExecutor(registry)
    executor.adopt(model=track.model)
    handle = explainer_handles(executor, registry, {"gradient": {}})["gradient"]
    handle = handle.bind(ModelSpec("tiny-cnn", {}, track.model.identity))
    randomised = randomised_model(track.model, upto=2, blocks=3, seed=4)
    got = handle.explain(randomised, track.inputs, torch.as_tensor(track.targets), seed=1)
    # the worker built the copy from its pristine model and keeps it under the copy's identity
    assert randomised.identity in executor.state.models
    assert "module" not in vars(randomised)  # the runner's copy was never built
    direct = registry.create("explainer", "gradient").explain(
        randomised_model(track.model, upto=2, blocks=3, seed=4), track.inputs, torch.as_tensor(track.targets), seed=1
    )
    assert np.array_equal(got, direct)
    assert not np.array_equal(got, handle.explain(track.model, track.inputs, torch.as_tensor(track.targets), seed=1))
    other = randomised_model(NetModel(), upto=1)
    with pytest.raises(ExplainerFailed, match="not bound"):
        handle.explain(other, track.inputs, track.targets)


class Counting(Explainer):
    name = "counting"
    version = "1.0.0"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        self.calls.append([s.id for s in context.samples] if context is not None else [])
        w = float(model.module.classifier.weight.detach().sum())
        return (inputs.mean(dim=1) * w).detach().numpy()


def test_cached_explainer_serves_randomised_maps_from_the_cache(tmp_path: Path) -> None:
    track = tiny_context()
    inner = Counting()
    cache = ExplanationCache(tmp_path)
    cached = CachedExplainer(inner, track, cache)
    assert cached.name == "counting" and cached.kind == "saliency"
    model = randomised_model(track.model, upto=1, blocks=3, seed=0)
    ids = [s.id for s in track.samples]
    context = ExplainContext(samples=list(track.samples))
    targets = torch.as_tensor(track.targets)
    first = cached.explain(model, track.inputs, targets, seed=3, context=context)
    assert inner.calls == [ids] and len(list(tmp_path.rglob("*.npy"))) == 3
    again = cached.explain(model, track.inputs, targets, seed=3, context=context)
    assert inner.calls == [ids] and np.array_equal(first, again)  # served from the cache
    cached.explain(model, track.inputs, targets, seed=4, context=context)  # another seed: another key
    other = randomised_model(track.model, upto=2, blocks=3, seed=0)  # another identity: another key
    cached.explain(other, track.inputs, targets, seed=3, context=context)
    assert inner.calls == [ids, ids, ids]
    next(iter(sorted(tmp_path.rglob("*.npy")))).unlink()  # one entry lost: only that sample reruns
    cached.explain(model, track.inputs, targets, seed=3, context=context)
    assert len(inner.calls) == 4 and len(inner.calls[-1]) == 1
    # not the track's inputs (perturbed), or no context: straight through, nothing cached
    cached.explain(model, track.inputs + 0.01, targets, seed=3, context=context)
    cached.explain(model, track.inputs, targets, seed=3)
    assert inner.calls[-2:] == [ids, []] and len(list(tmp_path.rglob("*.npy"))) == 3 * 3


# ----------------------------------------------------------------------------- real tracks


TRACKS = {  # the datasets in their own order (the first `limit` samples), whatever the suites say
    "shapes": TrackSpec(name="shapes", dataset="shapes", model="shapes-cnn", model_params={"variant": "shapes"}),
    "photos": TrackSpec(name="photos", dataset="photos", model="efficientnet-lite0"),
}


def _means(track_name: str, limit: int, explainers: list[str]) -> dict[str, float]:
    registry = get_registry()
    track = load_track(TRACKS[track_name], registry, limit=limit)
    metric = registry.create("metric", "model_randomisation")
    means = {}
    for name in explainers:
        explainer = registry.create("explainer", name, materialise=True)  # explained here, in process
        explained = explain_track(track, explainer, cache=None, seed=0)
        values = [
            s.value
            for scores in score_track(track, [metric], explained.values, {}, explainer=explainer, seed=0)
            for s in scores
            if s.value is not None
        ]
        assert len(values) >= max(1, limit - 1), (name, values)
        means[name] = float(np.mean(values))
    return means


def test_shapes_model_free_explainers_are_insensitive_and_gradient_is_not() -> None:
    means = _means("shapes", 4, ["sobel", "center", "gradient"])
    assert means["sobel"] == pytest.approx(1.0, abs=1e-12) and means["center"] == pytest.approx(1.0, abs=1e-12)
    assert means["gradient"] < 0.5


def test_photos_done_when() -> None:
    explainers = ["sobel", "center", "gradient"]
    if "gradcam" in {e.info.name for e in get_registry().entries("explainer")}:
        explainers.append("gradcam")
    means = _means("photos", 3, explainers)
    assert means["sobel"] > 0.5 and means["center"] > 0.5, means
    assert means["gradient"] < 0.5, means
    assert "gradcam" not in means or means["gradcam"] < 0.5, means


def test_run_through_local_workers_records_curves_flags_and_caches(tmp_path: Path) -> None:
    args = ["run", "-e", "sobel", "-e", "gradient", "--track", "shapes", "--metric", "model_randomisation"]
    args += ["--limit", "4", "--quiet", "--workdir", str(tmp_path / "w"), "--executor", "local"]
    args += ["--submissions", str(tmp_path / "s"), "--leaderboard-dir", str(tmp_path / "l")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    results = tmp_path / "w" / "results" / "shapes.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()]
    by = {(r["explainer"]["name"], r["sample_id"]): r for r in records}
    assert len(by) == 8 and {r["metric_info"]["family"] for r in records} == {"sanity"}
    for (name, _), r in by.items():
        assert r["curve"]["fraction"] == [0.2, 0.4, 0.6, 0.8, 1.0]
        assert r["curve"]["value"][-1] == pytest.approx(r["value"], abs=1e-6)  # curves are rounded
        assert r["forward_passes"] == 6.0  # the reference re-run and 5 randomised models
        assert (r["value"] == 1.0) if name == "sobel" else (r["value"] < 0.5)
    # the worker-run values are the in-process ones
    assert np.mean([r["value"] for (n, _), r in by.items() if n == "gradient"]) == pytest.approx(
        _means("shapes", 4, ["gradient"])["gradient"], abs=1e-12
    )
    summary = json.loads((tmp_path / "w" / "summary.json").read_text())
    block = summary["tracks"]["shapes"]["explainers"]["gradient"]["metrics"]["model_randomisation"]
    assert block["ranking"] is False and block["curve"]["fraction"] == [0.2, 0.4, 0.6, 0.8, 1.0]
    board = json.loads((tmp_path / "l" / "leaderboard.json").read_text())
    assert "insensitive to the model" in board["explainers"]["sobel"]["flags"]["shapes"]
    assert "insensitive to the model" not in board["explainers"]["gradient"]["flags"].get("shapes", [])
    # the re-runs are cached (2 explainers x 4 samples x (the run's map, the metric's reference
    # re-run under the metric seed, 5 randomised models)) and reused
    cache = tmp_path / "w" / "cache"
    assert len(list(cache.rglob("*.npy"))) == 2 * 4 * 7
    stamps = {p: p.stat().st_mtime_ns for p in cache.rglob("*.npy")}
    results.unlink()
    assert CliRunner().invoke(cli, args, catch_exceptions=False).exit_code == 0
    again = {
        (r["explainer"]["name"], r["sample_id"]): r["value"] for r in map(json.loads, results.read_text().splitlines())
    }
    assert again == {k: r["value"] for k, r in by.items()}
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*.npy")} == stamps  # nothing recomputed
