"""The plugin author kit: the helpers of ``xaibench.kit``, scaffold_plugin, the shipped pytest
fixtures, the tiny track and contract checks (with the runner's own output checks), and discovery
of a pip-installed plugin distribution through its entry point."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from xaibench import api, imaging, kit, params
from xaibench.api import ExplainContext, Explainer, Sample
from xaibench.errors import XaibenchError
from xaibench.plugins import hookspecs, manager
from xaibench.runner import guard
from xaibench.scaffold import plugin_names, scaffold_plugin
from xaibench.seeds import derive_seed
from xaibench.testing import tiny as tiny_module
from xaibench.testing.contract import assert_explainer_contract, assert_seeded_per_sample, model_state
from xaibench.testing.tiny import TinyCNN, TinyDataset, assert_saliency, tiny_track

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- scaffold


def test_plugin_names() -> None:
    assert plugin_names("my-method") == {
        "name": "my-method",
        "dist": "xaibench-my-method",
        "module": "xaibench_my_method",
        "cls": "MyMethodExplainer",
    }
    assert plugin_names("xaibench-foo")["name"] == "foo"


@pytest.mark.parametrize("bad", ["", "My Method", "1abc", "a--b", "a_b", "-x", "x-", "café"])
def test_scaffold_rejects_bad_names(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not valid"):
        scaffold_plugin(bad, tmp_path)
    assert not any(tmp_path.iterdir())


def test_scaffold_never_overwrites(tmp_path: Path) -> None:
    root = scaffold_plugin("dup", tmp_path)
    (root / "pyproject.toml").write_text("mine")
    with pytest.raises(FileExistsError, match="xaibench-dup"):
        scaffold_plugin("dup", tmp_path)
    assert (root / "pyproject.toml").read_text() == "mine"


def test_scaffold_writes_a_lint_clean_distribution(tmp_path: Path) -> None:
    root = scaffold_plugin("my-method", tmp_path)
    assert root == tmp_path / "xaibench-my-method"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "pyproject.toml",
        "tests/test_xaibench_my_method.py",
        "xaibench_my_method/__init__.py",
    ]
    import tomllib

    config = tomllib.loads((root / "pyproject.toml").read_text())
    assert config["project"]["name"] == "xaibench-my-method"
    assert config["project"]["entry-points"]["xaibench"] == {"my-method": "xaibench_my_method"}
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed next to the interpreter")
    # lint as the plugin's own project would: xaibench third-party, the plugin first-party
    isort = 'lint.isort.known-third-party = ["xaibench"]', 'lint.isort.known-first-party = ["xaibench_my_method"]'
    result = subprocess.run(
        [str(ruff), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), "--config", isort[0],
         "--config", isort[1], str(root)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    formatted = subprocess.run(
        [str(ruff), "format", "--check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(root)],
        capture_output=True,
        text=True,
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_scaffolded_explainer_registers_and_runs(tmp_path: Path, monkeypatch, register_plugin, tiny_track) -> None:
    root = scaffold_plugin("my-method", tmp_path)
    monkeypatch.syspath_prepend(str(root))
    import xaibench_my_method as plugin

    try:
        status = register_plugin(plugin, name="my-method")
        assert status.components == ["explainer:my-method"]
        explainer = manager.get_registry().create("explainer", "my-method")
        maps = tiny_track.run(explainer)
        assert all(p.grad is None for p in tiny_track.model.module.parameters()), "the template leaked .grad"
        # gradient x input summed over channels, recomputed here with plain autograd
        x = tiny_track.inputs.clone().requires_grad_(True)
        logits = tiny_track.model.module(x)
        picked = logits[torch.arange(len(tiny_track.targets)), torch.as_tensor(tiny_track.targets)].sum()
        (grad,) = torch.autograd.grad(picked, x)
        expected = (grad * x).sum(dim=1).abs().detach().numpy()
        np.testing.assert_allclose(maps, expected, rtol=1e-5, atol=1e-7)
    finally:
        sys.modules.pop("xaibench_my_method", None)


# ----------------------------------------------------------------------------- fixtures


def test_fixtures_install_and_restore_the_registry(pytester: pytest.Pytester) -> None:
    """Run an inner session: during a test get_registry() is the fixture's registry with
    the plugin; afterwards the previous registry is back and the plugin gone."""
    pytester.makepyfile(
        textwrap.dedent(
            """
            from xaibench import hookimpl
            from xaibench.api import Explainer
            from xaibench.plugins import manager

            SENTINEL = object()


            class Dummy(Explainer):
                name = "dummy-kit"

            class DummyPlugin:
                @hookimpl
                def register_explainers(self, register):
                    register(Dummy)


            def test_a_inside(register_plugin, xaibench_registry):
                status = register_plugin(DummyPlugin(), name="dummy")
                assert status.ok and status.components == ["explainer:dummy-kit"]
                assert manager.get_registry() is xaibench_registry
                assert manager.get_registry().names("explainer").count("dummy-kit") == 1
                assert "dummy" in xaibench_registry.plugins

            def test_b_restored():
                assert manager._REGISTRY is None or "dummy" not in manager._REGISTRY.plugins

            def test_c_broken_plugin_fails_the_test(register_plugin):
                class Broken:
                    @hookimpl
                    def register_explainers(self, register):
                        raise RuntimeError("boom")
                register_plugin(Broken(), name="broken")

            def test_d_unchecked(register_plugin):
                class Broken:
                    @hookimpl
                    def register_explainers(self, register):
                        raise RuntimeError("boom")
                status = register_plugin(Broken(), name="broken", check=False)
                assert not status.ok and "boom" in status.error
            """
        )
    )
    before = manager._REGISTRY
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_c_broken_plugin_fails_the_test*", "*plugin 'broken' did not load*boom*"])
    assert manager._REGISTRY is before


def test_xaibench_registry_is_hermetic(xaibench_registry) -> None:
    assert manager.get_registry() is xaibench_registry
    sources = {status.source for status in xaibench_registry.plugins.values()}
    assert sources == {"built-in"}, "entry-point plugins must not leak into the fixture registry"


def test_registry_fixtures(builtin_registry, installed_registry, xaibench_registry) -> None:
    assert {status.source for status in builtin_registry.plugins.values()} == {"built-in"}
    assert builtin_registry is not xaibench_registry and manager.get_registry() is xaibench_registry
    assert sorted(installed_registry.plugins) == sorted(manager.Registry().plugins), "not what `xaibench run` builds"
    assert set(builtin_registry.names("explainer")) <= set(installed_registry.names("explainer"))
    assert builtin_registry.create("model", "shapes-cnn", variant="shapes").input_size == 64


def test_default_explainers_and_suite_metrics(default_explainers, suite_metrics, installed_registry) -> None:
    from xaibench.runner.run import DEFAULT_EXPLAINERS

    installed = installed_registry.names("explainer")
    assert default_explainers == [n for n in DEFAULT_EXPLAINERS if n in installed] and "gradient" in default_explainers
    tracks = suite_metrics("default")
    specs = installed_registry.create("suite", "default").tracks()
    assert list(tracks) == [t.name for t in specs]
    for spec in specs:
        assert tracks[spec.name], spec.name
        for metric in tracks[spec.name]:  # a metric that is not run by default appears only where named
            assert installed_registry.entry("metric", metric).cls.default or metric in (spec.metrics or ())


def test_xaibench_cli_runs_the_command_line_on_the_test_registry(register_plugin, xaibench_cli) -> None:
    class Shown(Explainer):
        name = "shown-by-the-cli"

    class Plugin:
        @hookspecs.hookimpl
        def register_explainers(self, register):
            register(Shown)

    register_plugin(Plugin(), name="cli-probe")
    result = xaibench_cli("list", "explainers", "--json")
    assert result.exit_code == 0, result.output
    assert "shown-by-the-cli" in [row["name"] for row in json.loads(result.output)]
    assert xaibench_cli("list", "nothing").exit_code == 2  # a usage error is a result, not an exception


# ----------------------------------------------------------------------------- tiny track


def test_tiny_track_is_deterministic_and_consistent() -> None:
    a, b = tiny_track(), tiny_track()
    assert torch.equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert a.model.identity == b.model.identity != TinyCNN(seed=1).identity
    assert a.inputs.shape == (4, 3, 32, 32)
    ds = TinyDataset(n=3)
    assert len(ds) == 3 and ds.revision == TinyDataset(n=3).revision != TinyDataset(n=3, seed=1).revision
    for sample in ds.samples():
        mask = sample.ground_truth.mask
        # the mask is exactly the coloured square: its pixels are bright, the rest is dark noise
        assert mask.any() and sample.image[mask].min() >= 0.2 and sample.image[~mask].max() < 0.15
    assert a.model.module.get_submodule(a.model.target_layers[0]).out_channels == 16


def test_tiny_track_run_checks_the_contract(tiny_track) -> None:
    class WrongShape(Explainer):
        name = "wrong-shape"

        def explain(self, model, inputs, targets, *, seed=0, context=None):
            return np.zeros((len(targets), 8, 8), dtype=np.float32)

    class NotFinite(Explainer):
        name = "nan"

        def explain(self, model, inputs, targets, *, seed=0, context=None):
            return np.full(tuple(inputs.shape[:1]) + tuple(inputs.shape[2:]), np.nan, dtype=np.float32)

    with pytest.raises(AssertionError, match="expected \\(4, 32, 32\\)"):
        tiny_track.run(WrongShape())
    with pytest.raises(AssertionError, match="NaN"):
        tiny_track.run(NotFinite())
    with pytest.raises(AssertionError, match=r"numpy\.ndarray"):
        assert_saliency([[0.0]], tiny_track.inputs)

    class Constant(Explainer):
        name = "constant"

        def explain(self, model, inputs, targets, *, seed=0, context=None):
            return np.ones((len(targets), *inputs.shape[-2:]), dtype=np.float32)

    with pytest.raises(AssertionError, match="constant: map 0: explainer returned a constant map"):
        tiny_track.run(Constant())


def test_the_runner_and_the_testing_kit_share_the_output_checks() -> None:
    assert guard.check_saliency is kit.check_saliency and guard.check_concepts is kit.check_concepts
    assert tiny_module.check_saliency is kit.check_saliency


def test_select_keeps_some_samples(tiny_track) -> None:
    part = tiny_track.select([2, 0])
    assert [s.id for s in part.samples] == [tiny_track.samples[2].id, tiny_track.samples[0].id]
    assert torch.equal(part.inputs[0], tiny_track.inputs[2])
    assert part.targets.tolist() == tiny_track.targets[[2, 0]].tolist()
    assert len(tiny_track.select(slice(1, 3)).samples) == 2


# ----------------------------------------------------------------------------- contract checks


class _Leaky(Explainer):
    """Gradient magnitude through backward(): leaves .grad on the parameters."""

    name = "leaky"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        x = inputs.clone().requires_grad_(True)
        model.module(x)[torch.arange(len(targets)), torch.as_tensor(targets)].sum().backward()
        return x.grad.abs().amax(dim=1).numpy()


class _GlobalNoise(Explainer):
    """Draws from torch's global generator: moves it and is not reproducible."""

    name = "global-noise"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return torch.rand(len(targets), *inputs.shape[-2:]).numpy()


class _BatchNoise(Explainer):
    """Seeded per batch, not per sample: a sample's map depends on its batch."""

    name = "batch-noise"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return np.random.default_rng([seed, len(targets)]).random((len(targets), *inputs.shape[-2:]))


class _SampleNoise(Explainer):
    name = "sample-noise"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        rngs = kit.sample_rngs(seed, self.name, len(targets), context)
        return np.stack([rng.random(tuple(inputs.shape[-2:])) for rng in rngs])


def test_contract_checks_catch_what_they_promise(tiny_track) -> None:
    try:
        with pytest.raises(AssertionError, match="leaky changed the model"):
            assert_explainer_contract(_Leaky, tiny_track)
    finally:
        tiny_track.model.module.zero_grad(set_to_none=True)
    with pytest.raises(AssertionError, match="global-noise moved torch's global generator"):
        assert_explainer_contract(_GlobalNoise, tiny_track)
    with pytest.raises(AssertionError, match="batch-noise: sample 3 alone differs"):
        assert_seeded_per_sample(_BatchNoise(), tiny_track)
    assert_explainer_contract(_SampleNoise, tiny_track)
    assert_seeded_per_sample(_SampleNoise(), tiny_track)
    assert model_state(tiny_track.model.module) == model_state(TinyCNN().module)


# ----------------------------------------------------------------------------- xaibench.kit


def test_kit_reexports_what_a_plugin_needs() -> None:
    assert kit.Explainer is api.Explainer and kit.Model is api.Model and kit.ExplainContext is api.ExplainContext
    assert kit.Param is params.Param and kit.hookimpl is hookspecs.hookimpl and kit.derive_seed is derive_seed
    assert kit.Register is api.Register
    for name in ("Dataset", "Sample", "GroundTruth", "Metric", "MetricInput", "MetricOutput", "Suite", "TrackSpec"):
        assert getattr(kit, name) is getattr(api, name), name
    assert kit.Encoder is api.Encoder
    assert kit.resize_bilinear is imaging.resize_bilinear and kit.from_model_input is imaging.from_model_input
    assert all(hasattr(kit, name) for name in kit.__all__)


class _Probe(kit.AttributionExplainer):
    """Records what ``attribute`` gets and what the model's parameters look like meanwhile."""

    name = "probe"

    def attribute(self, model, batch):
        self.seen = (batch, [p.requires_grad for p in model.module.parameters()])
        batch.x.requires_grad_(True)  # the explainer's own copy
        return batch.x.detach().double().sum(dim=1) + torch.arange(batch.x.shape[-1])  # (B, S, S), not constant


def test_attribution_explainer_does_the_explain_opening_once(tiny_track) -> None:
    module = tiny_track.model.module
    before = model_state(module)
    probe, context = _Probe(), tiny_track.context
    assert all(p.requires_grad for p in module.parameters())
    maps = probe.explain(tiny_track.model, tiny_track.inputs, tiny_track.targets, seed=5, context=context)
    batch, grads = probe.seen
    assert not any(grads), "the parameters must be frozen during attribute"
    assert model_state(module) == before and not tiny_track.inputs.requires_grad, "the model or the inputs changed"
    assert batch.x is not tiny_track.inputs and torch.equal(batch.x.detach(), tiny_track.inputs)
    assert batch.x.dtype == torch.float32 and batch.x.device == tiny_track.inputs.device
    assert batch.targets.dtype == torch.int64 and batch.targets.device == batch.x.device
    assert batch.targets.tolist() == tiny_track.targets.tolist()
    assert batch.seed == 5 and batch.context is context
    assert batch.seeds == kit.sample_seeds(5, "probe", 4, context)
    assert batch.seeds == [derive_seed(5, "probe", s.id) for s in tiny_track.samples]
    assert maps.dtype == np.float32 and maps.shape == (4, 32, 32)  # checked and cast by as_maps
    np.testing.assert_array_equal(maps, (tiny_track.inputs.double().sum(dim=1) + torch.arange(32)).float().numpy())


def test_attribution_explainer_checks_the_maps_and_restores_the_model_on_error(tiny_track) -> None:
    class WrongShape(kit.AttributionExplainer):
        name = "wrong-shape"

        def attribute(self, model, batch):
            return np.zeros((len(batch.seeds), 8, 8))

    class Raises(kit.AttributionExplainer):
        name = "raises"

        def attribute(self, model, batch):
            raise RuntimeError("library failed")

    module = tiny_track.model.module
    before = model_state(module)
    with pytest.raises(RuntimeError, match=r"explainer 'wrong-shape': got maps of shape \(4, 8, 8\)"):
        WrongShape().explain(tiny_track.model, tiny_track.inputs, tiny_track.targets)
    with pytest.raises(RuntimeError, match="library failed"):
        Raises().explain(tiny_track.model, tiny_track.inputs, tiny_track.targets)
    assert model_state(module) == before
    with pytest.raises(ValueError, match="got 3 targets for 4 inputs"):
        WrongShape().explain(tiny_track.model, tiny_track.inputs, [0, 1, 2])
    with pytest.raises(NotImplementedError):
        kit.AttributionExplainer().explain(tiny_track.model, tiny_track.inputs, tiny_track.targets)


def test_as_inputs_and_as_targets() -> None:
    inputs = torch.zeros(2, 3, 4, 4, dtype=torch.float64)
    x = kit.as_inputs(inputs)
    assert x.dtype == torch.float32 and x.shape == (2, 3, 4, 4)
    x += 1
    assert inputs.abs().sum() == 0, "as_inputs must copy"
    assert kit.as_inputs(torch.zeros(1, 5, 1, 7)).shape == (1, 5, 1, 7)  # a token sequence (TextModel)
    for bad in (torch.zeros(3, 4, 4), torch.zeros(1, 1, 3, 4, 5)):
        with pytest.raises(ValueError, match=r"inputs must be a \(B, C, H, W\) tensor"):
            kit.as_inputs(bad)
    for targets in ([1, 2], np.array([[1], [2]]), torch.tensor([1, 2])):
        t = kit.as_targets(targets, 2)
        assert t.dtype == torch.int64 and t.tolist() == [1, 2]
    with pytest.raises(ValueError, match="got 3 targets for 2 inputs"):
        kit.as_targets([0, 1, 2], 2)


def test_as_maps_and_baseline_input() -> None:
    x = torch.zeros(2, 3, 4, 4)
    maps = kit.as_maps(torch.ones(2, 4, 4, dtype=torch.float64), x, "probe")
    assert maps.dtype == np.float32 and maps.shape == (2, 4, 4)
    with pytest.raises(RuntimeError, match=r"explainer 'probe': got maps of shape \(2, 4\)"):
        kit.as_maps(np.zeros((2, 4)), x, "probe")
    model = TinyCNN()
    assert torch.equal(kit.baseline_input("zero", x + 1, model), x)
    black = kit.baseline_input("black", x, model)
    assert black.shape == x.shape and torch.allclose(black, torch.full_like(x, -1.0))  # (0 - 0.5) / 0.5
    with pytest.raises(ValueError, match="unknown baseline 'white'; known: zero, black"):
        kit.baseline_input("white", x, model)


def test_forward_batch_and_chunks() -> None:
    assert kit.forward_batch(224) == 4 and kit.forward_batch(32) == 64 and kit.forward_batch(1000) == 1
    parts = list(kit.chunks(10, 4))
    assert parts == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert list(kit.chunks(0, 4)) == [] and list(kit.chunks(3, 0)) == [slice(0, 1), slice(1, 2), slice(2, 3)]


def test_isolated_grads_restores_the_parameters_even_on_error() -> None:
    module = TinyCNN().module
    weight = next(module.parameters())
    weight.grad = torch.ones_like(weight)
    frozen = module.get_submodule("classifier").weight
    frozen.requires_grad_(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="inside"), kit.isolated_grads(module):
            assert not any(p.requires_grad for p in module.parameters())
            warnings.warn("Setting backward hooks on ReLU activations.", UserWarning, stacklevel=1)
            raise RuntimeError("inside")
    assert not caught, "the benign hook warning should be silenced"
    assert weight.requires_grad and torch.equal(weight.grad, torch.ones_like(weight))
    assert not frozen.requires_grad and frozen.grad is None


def test_input_gradients_match_autograd_and_leave_the_model_alone(tiny_track) -> None:
    module = tiny_track.model.module
    before = model_state(module)
    grads = kit.input_gradients(tiny_track.model, tiny_track.inputs, tiny_track.targets)
    assert model_state(module) == before and not tiny_track.inputs.requires_grad
    x = tiny_track.inputs.clone().requires_grad_(True)
    picked = module(x)[torch.arange(len(tiny_track.targets)), torch.as_tensor(tiny_track.targets)].sum()
    (expected,) = torch.autograd.grad(picked, x)
    torch.testing.assert_close(grads, expected)


def test_seeds_are_per_sample_and_global_generators_are_restored() -> None:
    samples = [Sample(id=f"s{i}", image=np.zeros((2, 2, 3), dtype=np.float32)) for i in range(3)]
    seeds = kit.sample_seeds(5, "probe", 3, ExplainContext(samples))
    assert seeds == [derive_seed(5, "probe", f"s{i}") for i in range(3)]
    assert kit.sample_seeds(5, "probe", 1, ExplainContext(samples[1:2])) == seeds[1:2]
    assert kit.sample_ids(2, None) == ["0", "1"] and kit.sample_ids(2, ExplainContext(samples)) == ["0", "1"]
    draws = [rng.random() for rng in kit.sample_rngs(5, "probe", 3, ExplainContext(samples))]
    assert draws == [np.random.default_rng(s).random() for s in seeds]

    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    with kit.seeded(7):
        first = (torch.rand(2), np.random.rand(2))
    with kit.seeded(7):
        second = (torch.rand(2), np.random.rand(2))
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])


def test_resolve_target_layers() -> None:
    model = TinyCNN()
    assert kit.resolve_target_layers(model, "probe") == [model.module.get_submodule("features.2")]
    model.target_layers = ()
    with pytest.raises(ValueError, match=r"explainer 'probe' needs a target layer.*declares no target_layers"):
        kit.resolve_target_layers(model, "probe")
    model.target_layers = ("features.9",)
    with pytest.raises(ValueError, match=r"'features\.9'.*is not a submodule"):
        kit.resolve_target_layers(model, "probe")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("text", "non-numeric map"),
        (np.zeros((3, 4)), r"explainer returned shape \(3, 4\), expected \(4, 4\)"),
        (np.full((4, 4), np.inf), "NaN or inf"),
        (np.ones((4, 4)), "constant map"),
    ],
)
def test_check_saliency_reasons(value, reason: str) -> None:
    out, why = kit.check_saliency(value, (4, 4))
    assert out is None and why is not None
    assert re.search(reason, why), why


def test_check_saliency_and_check_concepts_accept_good_values() -> None:
    out, why = kit.check_saliency(np.arange(16.0).reshape(1, 4, 4), (4, 4))
    assert why is None and out.dtype == np.float32 and out.shape == (4, 4)
    assert kit.check_concepts({"a": 1, "b": np.float64(0.5)}) == ({"a": 1.0, "b": 0.5}, None)
    assert kit.check_concepts({}) == (None, "explainer returned no concept weights")
    assert kit.check_concepts({"a": "x"}) == (None, "explainer returned non-numeric concept weights")
    assert kit.check_concepts({"a": float("nan")}) == (None, "explainer returned NaN or inf concept weights")


# ----------------------------------------------------------------------------- pip install


def _pip_install(project: Path, target: Path) -> None:
    build = target.parent / "src"
    shutil.copytree(project, build)  # pip builds in place: keep the scaffold pristine
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), str(build)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_pip_installed_plugin_is_discovered_through_its_entry_point(tmp_path: Path) -> None:
    project = scaffold_plugin("kit-probe", tmp_path / "scaffold")
    target = tmp_path / "site"
    _pip_install(project, target)
    assert (target / "xaibench_kit_probe").is_dir()
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    env.pop("XAIBENCH_LOAD_PLUGINS", None)
    env.pop("XAIBENCH_DISABLE_PLUGINS", None)
    probe = textwrap.dedent(
        """
        from xaibench.plugins.manager import Registry
        registry = Registry()
        info = registry.info("explainer", "kit-probe")
        status = registry.plugins["kit-probe"]
        print(info.distribution, info.distribution_version, info.plugin, status.ok, status.source)
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["xaibench-kit-probe", "0.1.0", "kit-probe", "True", "xaibench_kit_probe"]

    # without the install location on the path, the plugin is simply absent
    env["PYTHONPATH"] = ""
    absent = subprocess.run(
        [sys.executable, "-c", "from xaibench.plugins.manager import Registry; "
         "print('kit-probe' in Registry().names('explainer'))"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert absent.stdout.strip() == "False", absent.stderr

    # the scaffold's own tests pass against the installed copy, with the fixtures that
    # xaibench's pytest11 entry point loads (nothing imports them explicitly)
    env["PYTHONPATH"] = str(target)
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "5 passed" in tests.stdout


# ----------------------------------------------------------------------------- parameter specs


def test_builtin_explainers_declare_their_parameter_rules(xaibench_registry) -> None:
    assert xaibench_registry.create("explainer", "center", sigma="0.5").params == {"sigma": 0.5}
    for bad in (0, -1, 11, "wide"):
        with pytest.raises(XaibenchError, match="explainer 'center': parameter 'sigma' must be a number in"):
            xaibench_registry.create("explainer", "center", sigma=bad)
    assert xaibench_registry.create("explainer", "concept-rise", p="0.25").params["p"] == 0.25
    for bad in (0, 1, 1.5):
        with pytest.raises(XaibenchError, match="explainer 'concept-rise': parameter 'p' must be a number in"):
            xaibench_registry.create("explainer", "concept-rise", p=bad)
