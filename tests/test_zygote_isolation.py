"""No plugin code runs in the zygote (the unsandboxed process that forks the explainer workers).

A hostile distribution below ships a model and an explainer; importing its module patches the
built-in ``gradient`` (its maps become noise) in whatever process imports it. Its model's forward
pass with gradients kills its worker (``os._exit``) on a batch, so every later task of that model
goes to a fresh worker: the path on which the zygote used to build the model for the fresh
worker, importing the plugin unsandboxed, so that every worker it forked afterwards had the
patched ``gradient``. Two workers make the zygote fork a fresh worker for the built-in track
after that. The built-in ``gradient``'s records on the built-in ``shapes`` track must be those of
a clean run; the zygote itself refuses (and checks) what is not xaibench's own code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._distributions import records_by_key, write_distribution
from xaibench.plugins import manager
from xaibench.runner import evaluate
from xaibench.runner.executors import ExplainerHandle, ExplainerSpec, ExplainTask, InProcessExecutor, ModelSpec
from xaibench.runner.explain import explain_track, sandboxed
from xaibench.runner.isolation import trusted, workers
from xaibench.runner.run import RunConfig, resolve_tracks, run
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.track import load_track
from xaibench.suites.adhoc import adhoc_track

HOSTILE = """
import hashlib
import os

import numpy as np
import torch
from torch import nn

import xaibench.explainers.gradient as gradient
from xaibench import hookimpl
from xaibench.api import Explainer, Model

_explain = gradient.GradientExplainer.explain


def _noise(self, model, inputs, targets, *, seed=0, context=None):
    if getattr(model, "hostile", False):  # its own model: the real gradient (which crashes it, below)
        return _explain(self, model, inputs, targets, seed=seed, context=context)
    return np.random.default_rng(7).random((inputs.shape[0], *inputs.shape[-2:])).astype(np.float32)


gradient.GradientExplainer.explain = _noise  # the built-in gradient, in every process importing this


class Net(nn.Module):
    def __init__(self, seed):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(16, 3)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)

    def forward(self, x):
        if x.requires_grad and x.shape[0] > 1:  # an explainer's batch: its worker dies
            os._exit(3)
        return self.head(self.body(x))


class Hostile(Model):
    name = "hostile"
    version = "1.0"
    synthetic = True
    input_size = 48
    target_layers = ("body.0",)
    hostile = True

    def __init__(self, seed=0):
        self.module = Net(int(seed)).eval()
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in self.module.parameters()))
        self._identity = f"hostile@{digest.hexdigest()[:12]}"
        self.label_names = ("x", "y", "z")
        self.weights_source = "random"

    @property
    def identity(self):
        return self._identity


class Patcher(Explainer):
    name = "patcher"
    version = "1.0"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        return np.random.default_rng(seed).random((inputs.shape[0], *inputs.shape[-2:])).astype(np.float32)


@hookimpl
def register_models(register):
    register(Hostile)


@hookimpl
def register_explainers(register):
    register(Patcher)
"""

METRICS = ["iou", "deletion"]


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """A fresh process registry with the hostile distribution installed (as stand-ins)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate, "score_batch", evaluate.score_batch)
    monkeypatch.setattr(manager, "remote_builders", {})  # installed by the run, for this test only
    monkeypatch.delitem(sys.modules, "xb_hostile", raising=False)
    write_distribution(site, "xb-hostile", "xb_hostile", textwrap.dedent(HOSTILE))
    reg = manager.Registry()
    monkeypatch.setattr(manager, "_REGISTRY", reg)
    assert manager.remote_distribution(reg.entry("model", "hostile").cls) == "xb-hostile"
    return reg


def _config(workdir: Path, explainers: list[str], tracks: list[Any], workers: int) -> RunConfig:
    return RunConfig(
        explainers=explainers,
        suite_tracks=tracks,
        metrics=METRICS,
        limit=8,
        seed=0,
        workdir=workdir,
        progress=False,
        examples=0,
        device="cpu",
        explain_batch=4,
        workers=workers,
    )


def _gradient(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in records.items() if r["explainer"]["name"] == "gradient"}


def test_a_plugin_model_met_by_fresh_workers_leaves_the_builtin_gradient_on_shapes_unchanged(
    tmp_path: Path, registry: manager.Registry
) -> None:
    shapes = resolve_tracks(registry, "default", ["shapes"])
    hostile = adhoc_track("hostile", "shapes", name="hostile-track")
    run(_config(tmp_path / "hostile", ["gradient", "patcher"], [hostile, *shapes], workers=2), registry)
    assert "xb_hostile" not in sys.modules  # nor in the runner
    run(_config(tmp_path / "clean", ["gradient"], list(shapes), workers=1), registry)

    clean = _gradient(records_by_key(tmp_path / "clean", "shapes"))
    after = _gradient(records_by_key(tmp_path / "hostile", "shapes"))
    assert len(clean) == 16 and after == clean
    means = {m: np.mean([r["value"] for r in clean.values() if r["metric"] == m]) for m in METRICS}
    assert means["iou"] == pytest.approx(0.152, abs=0.0015)
    assert means["deletion"] == pytest.approx(0.282, abs=0.0015)
    # the hostile track ran: its batches killed their workers, the samples then ran one by one
    mine = _gradient(records_by_key(tmp_path / "hostile", "hostile-track"))
    assert len(mine) == 16 and all(r["na_reason"] is None for r in mine.values())


def _shapes_task(registry: manager.Registry) -> ExplainTask:
    """A ``gradient`` task on two samples of the built-in shapes model."""
    model = registry.create("model", "shapes-cnn", variant="shapes")
    rng = np.random.default_rng(0)
    size = model.input_size
    return ExplainTask(
        model=ModelSpec("shapes-cnn", {"variant": "shapes"}, model.identity),
        explainer=ExplainerSpec("gradient", {}),
        inputs=rng.standard_normal((2, 3, size, size)).astype(np.float32),
        targets=np.array([0, 1]),
        samples=None,
        seed=0,
        batch_seed=1,
    )


def _hostile_spec(registry: manager.Registry) -> ModelSpec:
    return ModelSpec("hostile", {}, "hostile@unknown")


def _explain(registry: manager.Registry, task: ExplainTask, hostile: ModelSpec | None) -> np.ndarray:
    executor = workers.LocalExecutor(registry, workers=1)
    try:
        transport = executor.transport
        assert isinstance(transport, workers.LocalTransport) and isinstance(transport.spawner, workers._Zygote)
        if hostile is not None:
            assert transport.spawner.preload(hostile) is False  # not built there
        (outcome,) = list(executor.run([task]))
        assert outcome.error is None, outcome.error
        return np.stack(outcome.outputs)  # type: ignore[arg-type]
    finally:
        executor.close()


def test_the_zygote_builds_only_xaibenchs_own_models(registry: manager.Registry) -> None:
    assert trusted.builtin_model(registry, "shapes-cnn")
    assert not trusted.builtin_model(registry, "hostile") and not trusted.builtin_model(registry, "nope")
    assert trusted.model_origin(registry, "shapes-cnn") is None
    assert trusted.model_origin(registry, "hostile") == "distribution xb-hostile (plugin hostile)"
    task = _shapes_task(registry)
    clean = _explain(registry, task, None)
    assert np.array_equal(_explain(registry, task, _hostile_spec(registry)), clean)


def test_the_zygote_refuses_plugin_imports_even_when_asked_to_build_a_plugin_model(
    registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both checks of the zygote itself: past the built-in check (forced here), the import of the
    plugin fails there; past that too (turned off here), the module it left ends the zygote, and
    the next worker comes from a fresh one."""
    task = _shapes_task(registry)
    clean = _explain(registry, task, None)
    monkeypatch.setattr(workers, "builtin_model", lambda registry, name: True)  # both sides, as forked
    assert np.array_equal(_explain(registry, task, _hostile_spec(registry)), clean)
    monkeypatch.setattr(workers, "trusted_imports_only", lambda: contextlib.nullcontext([]))
    assert np.array_equal(_explain(registry, task, _hostile_spec(registry)), clean)
    assert "xb_hostile" not in sys.modules


class _Elsewhere:
    """Stands for a sandboxed executor (runs the tasks here, but is not the in-process one)."""

    def __init__(self, registry: manager.Registry) -> None:
        self.inner = InProcessExecutor(registry)

    def run(self, tasks: Any) -> Any:
        return self.inner.run(tasks)

    def close(self) -> None:
        self.inner.close()


def test_in_process_explanations_are_cached_apart_from_sandboxed_ones(
    tmp_path: Path, registry: manager.Registry
) -> None:
    """The trusted in-process path (an explainer object, ``--executor inprocess``, PASTA training's
    generation) and sandboxed runs share a cache folder but never each other's entries."""
    (spec,) = resolve_tracks(registry, "default", ["shapes"])
    track = load_track(spec, registry, limit=2)
    cache = ExplanationCache(tmp_path / "explanations", scope={"device": "cpu"})
    gradient = registry.create("explainer", "gradient")
    assert explain_track(track, gradient, cache=cache, seed=0).computed == 2  # in this process
    elsewhere = _Elsewhere(registry)
    handle = ExplainerHandle(
        name="gradient",
        version=gradient.version,
        kind=gradient.kind,
        params=dict(gradient.params),
        reference_only=False,
        tuned_on_benchmark=False,
        executor=elsewhere,
    )
    assert sandboxed(handle, elsewhere) and not sandboxed(gradient)
    assert not sandboxed(handle, InProcessExecutor(registry))
    sandbox = explain_track(track, handle, cache=cache, seed=0, executor=elsewhere)
    assert (sandbox.computed, sandbox.cached) == (2, 0)  # the in-process maps are not read
    assert explain_track(track, handle, cache=cache, seed=0, executor=elsewhere).cached == 2
    inprocess = dataclasses.replace(handle, executor=InProcessExecutor(registry))
    assert explain_track(track, inprocess, cache=cache, seed=0, executor=inprocess.executor).cached == 2
    assert explain_track(track, gradient, cache=cache, seed=0).cached == 2


def test_an_in_process_submission_says_so_and_verify_refuses_it(tmp_path: Path) -> None:
    """The trusted in-process path's output is marked in its submission and never verified (issue 42)."""
    import json

    import xaibench
    from xaibench.errors import XaibenchError
    from xaibench.plugins.manager import get_registry
    from xaibench.publish.verify import verify_submission

    xaibench.run(
        "gradient", suite="default", tracks="shapes", metrics="iou", limit=2, executor="inprocess",
        output_path=tmp_path, site=False, progress=False,
    )  # fmt: skip
    path = tmp_path / "submissions" / "gradient.json"
    assert json.loads(path.read_text(encoding="utf-8"))["environment"]["executor"] == "inprocess"
    with pytest.raises(XaibenchError, match="computed with --executor inprocess"):
        verify_submission(path, get_registry(), samples=1, seed=0)
