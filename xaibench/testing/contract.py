"""Checks of the explainer contract for plugin tests, on any :class:`~xaibench.testing.tiny.TinyTrack`.

The runner trusts an explainer to leave the model as it came, to be deterministic given the
seed, and to give each image a map that does not depend on the rest of its batch. These checks
make that testable in one line each::

    from xaibench.testing.contract import assert_explainer_contract, assert_seeded_per_sample

    def test_contract(tiny_track):
        assert_explainer_contract(MyExplainer, tiny_track)

Each raises ``AssertionError`` naming the explainer and what it broke.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer
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
