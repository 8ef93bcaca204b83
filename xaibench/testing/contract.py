"""Checks of the explainer and model contracts for plugin tests.

The runner trusts an explainer to leave the model as it came, to be deterministic given the
seed, and to give each image a map that does not depend on the rest of its batch. These checks
make that testable in one line each::

    from xaibench.testing.contract import assert_explainer_contract, assert_seeded_per_sample

    def test_contract(tiny_track):
        assert_explainer_contract(MyExplainer, tiny_track)

The explainer checks run on any :class:`~xaibench.testing.tiny.TinyTrack`.

The runner keys every cache entry by a model's ``identity`` and rebuilds the model in worker
processes, where it must have the same identity. :func:`assert_model_contract` checks that a
model is exact: built twice (under different global torch seeds) it has one identity and
bit-identical state dicts, it is in eval mode, and a fresh Python process that builds it gets
the same identity and weights. ``make`` must then be picklable (a ``functools.partial`` of the
model class, or a module-level function)::

    def test_model_contract():
        assert_model_contract(functools.partial(MyModel, weights="w.pth"))

Each raises ``AssertionError`` naming the component and what it broke.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Model
from xaibench.testing.tiny import TinyTrack, assert_saliency


def model_state(module: torch.nn.Module) -> list[tuple[Any, ...]]:
    """Everything an explainer could leak onto a model: its modules (type, train/eval mode and
    forward/backward hook counts) and its parameters (``requires_grad``, whether ``.grad`` is set)."""
    modules = [
        (
            name,
            type(m).__name__,
            m.training,
            len(m._forward_hooks),
            len(m._forward_pre_hooks),
            len(m._backward_hooks),
            len(m._backward_pre_hooks),
        )
        for name, m in module.named_modules()
    ]
    params = [(name, p.requires_grad, p.grad is None) for name, p in module.named_parameters()]
    return modules + params


def assert_explainer_contract(make: Callable[[], Explainer], track: TinyTrack, *, seed: int = 3) -> np.ndarray:
    """Explain ``track`` with ``make()`` and check: valid maps (:func:`assert_saliency`); the model
    left exactly as it came (:func:`model_state`); torch's and numpy's global generators untouched;
    the same maps again from a fresh instance with the same seed. Returns the maps."""
    first_explainer = make()
    name = first_explainer.name
    before = model_state(track.model.module)
    torch_rng, numpy_rng = torch.get_rng_state(), np.random.get_state()
    first = track.run(first_explainer, seed=seed)
    assert model_state(track.model.module) == before, f"{name} changed the model (hooks, grad flags, .grad or mode)"
    assert torch.equal(torch.get_rng_state(), torch_rng), f"{name} moved torch's global generator"
    assert np.array_equal(np.random.get_state()[1], numpy_rng[1]), f"{name} moved numpy's global generator"
    again = track.run(make(), seed=seed)
    assert np.array_equal(again, first), f"{name}: a fresh instance with the same seed gave other maps"
    return first


def assert_seeded_per_sample(explainer: Explainer, track: TinyTrack, *, index: int = -1, rtol: float = 1e-5) -> None:
    """For randomised explainers: another seed gives other maps, and sample ``index`` explained
    alone gets the map it gets within the whole batch (per-sample seeds, e.g.
    :func:`xaibench.kit.sample_seeds`), up to float rounding (``rtol`` of the map's largest magnitude)."""
    together = track.run(explainer, seed=0)
    assert not np.array_equal(track.run(explainer, seed=1), together), f"{explainer.name} ignores the seed"
    position = index % len(track.samples)
    alone = explainer.explain(
        track.model,
        track.inputs[position : position + 1].clone(),
        track.targets[position : position + 1].copy(),
        seed=0,
        context=ExplainContext(track.samples[position : position + 1]),
    )
    alone = assert_saliency(alone, track.inputs[position : position + 1], name=explainer.name)
    expected = together[position]
    np.testing.assert_allclose(
        alone[0],
        expected,
        rtol=rtol,
        atol=1e-6 * float(np.abs(expected).max()),
        err_msg=f"{explainer.name}: sample {position} alone differs from its map within the batch",
    )


_FRESH_BUILD = """
import pickle, sys
from xaibench.testing.contract import weights_digest
model = pickle.loads(sys.stdin.buffer.read())()
print("xaibench-model", model.identity, weights_digest(model.module))
"""


def weights_digest(module: torch.nn.Module) -> str:
    """Hex SHA-256 over a module's state dict (sorted names, dtypes, shapes and raw bytes): the
    digest timm model identities are made of (:func:`xaibench.models.timm_model.state_dict_digest`)."""
    from xaibench.models.timm_model import state_dict_digest

    return state_dict_digest(module)


def _build(make: Callable[[], Model], global_seed: int) -> Model:
    """``make()`` with torch's global generator at ``global_seed`` (restored afterwards): an
    initialisation that is not seeded by the model itself then differs between two builds."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        return make()


def assert_model_contract(make: Callable[[], Model], *, fresh_process: bool = True, timeout: float = 600.0) -> Model:
    """Check that ``make()`` builds one exact model: the same ``identity`` and bit-identical state
    dicts (names, dtypes, values) when built twice under different global torch seeds; every module
    in eval mode; and, with ``fresh_process``, the same identity and weights when a fresh Python
    process (``sys.executable``, this process's ``sys.path``) unpickles ``make`` and calls it
    (``timeout`` in seconds). Returns the first model."""
    first = _build(make, 1)
    name = type(first).__name__
    identity = first.identity
    assert isinstance(identity, str) and identity, f"{name}: identity must be a non-empty string, got {identity!r}"
    training = [n or "(root)" for n, m in first.module.named_modules() if m.training]
    assert not training, f"{name}: modules in training mode after construction: {', '.join(training[:3])}"
    second = _build(make, 2)
    assert second.identity == identity, (
        f"{name}: built twice, identities {identity} and {second.identity} (an unseeded initialisation?)"
    )
    a, b = first.module.state_dict(), second.module.state_dict()
    assert list(a) == list(b), f"{name}: built twice, the state dicts have other keys"
    for key in a:
        same = a[key].dtype == b[key].dtype and a[key].shape == b[key].shape and torch.equal(a[key], b[key])
        assert same, f"{name}: built twice, {key} differs (an unseeded initialisation?)"
    if fresh_process:
        try:
            payload = pickle.dumps(make)
        except Exception as exc:
            raise AssertionError(
                f"{name}: make cannot be pickled for the fresh-process check ({type(exc).__name__}: {exc}); "
                f"pass functools.partial(ModelClass, ...) or a module-level function, or fresh_process=False"
            ) from exc
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        done = subprocess.run(
            [sys.executable, "-c", _FRESH_BUILD], input=payload, capture_output=True, env=env, timeout=timeout
        )
        lines = [line.split() for line in done.stdout.decode(errors="replace").splitlines()]
        found = next((line[1:] for line in lines if line[:1] == ["xaibench-model"] and len(line) == 3), None)
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        assert done.returncode == 0 and found is not None, f"{name}: a fresh process could not build it: {tail[0]}"
        assert found == [identity, weights_digest(first.module)], (
            f"{name}: a fresh process built identity {found[0]} (weights {found[1][:12]}), "
            f"this one {identity} (weights {weights_digest(first.module)[:12]})"
        )
    return first
