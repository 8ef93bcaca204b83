"""Issue 27 (DESIGN 3b): ``input_invariance`` re-runs the explainer on a shifted model wherever the
explainer runs. The shifted copy carries its :class:`~xaibench.randomisation.Shift`; an executor's
worker rebuilds the same copy from it (``ModelSpec.shift``), and a metric scored in its own
worker (a third-party distribution) asks the runner with ``"shift": [base, shift]``, validated
there. Small runs: ``shapes``, 4 samples, CPU.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests._distributions import write_distribution
from xaibench import hookimpl
from xaibench.api import Metric
from xaibench.metrics.other.axiomatic import InputInvariance
from xaibench.plugins import manager
from xaibench.randomisation import Shift, randomised_model, shift_absorbed
from xaibench.runner.executors import ModelSpec, WorkerState
from xaibench.runner.isolation.metric_worker import answer_explain, decode_shift
from xaibench.runner.run import RunConfig, run

EXPLAINERS = ["gradient", "input-x-gradient"]
DIST = "xb-remote-invariance"
MODULE = "xb_remote_invariance"
CODE = """
    from xaibench import hookimpl
    from xaibench.metrics.other.axiomatic import InputInvariance


    class RemoteInvariance(InputInvariance):  # scored in a metric worker: explains through the runner
        name = "remote-invariance"


    @hookimpl
    def register_metrics(register):
        register(RemoteInvariance)
"""


def _values(workdir: Path, metric: str) -> dict[tuple[str, str], float | None]:
    out: dict[tuple[str, str], float | None] = {}
    for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["metric"] == metric:
            assert record["na_reason"] is None, record["na_reason"]
            out[(record["explainer"]["name"], record["sample_id"])] = record["value"]
    return out


def _run(registry: manager.Registry, workdir: Path, metrics: list[str], executor: str = "local") -> None:
    config = RunConfig(
        explainers=EXPLAINERS,
        tracks=["shapes"],
        metrics=metrics,
        limit=4,
        workdir=workdir,
        device="cpu",
        progress=False,
        examples=0,
        executor=executor,
    )
    run(config, registry)


class _StandIns:
    def __init__(self, cls: type[Metric]) -> None:
        self.cls = cls

    @hookimpl
    def register_metrics(self, register: Any) -> None:
        register(self.cls)


@pytest.fixture()
def remote(tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """The runner's registry with a stand-in for ``remote-invariance`` (class data only): its
    metric runs in a metric worker, which imports the distribution for real."""
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, DIST, MODULE, CODE)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("XAIBENCH_DISABLE_PLUGINS", raising=False)
    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", DIST)
    keys = ("version", "family", "direction", "ranking", "default", "unit", "explanation_kinds", "needs")
    data: dict[str, Any] = {key: getattr(InputInvariance, key) for key in keys}
    data.update(default_params=dict(InputInvariance.default_params), param_specs=dict(InputInvariance.param_specs))
    data.update(name="remote-invariance", remote_distribution=DIST)
    stand_in = type("StandIn_remote_invariance", (Metric,), data)
    registry.add_plugin(_StandIns(stand_in), name="invariance-stand-in", distribution=(DIST, "1.0"))
    assert registry.plugins["invariance-stand-in"].ok
    return registry


def test_input_invariance_in_worker_processes_and_in_a_metric_worker(tmp_path: Path, remote: manager.Registry) -> None:
    _run(remote, tmp_path / "local", ["input_invariance", "remote-invariance"])
    _run(remote, tmp_path / "inprocess", ["input_invariance"], executor="inprocess")
    local = _values(tmp_path / "local", "input_invariance")
    assert len(local) == 2 * 4 and all(v is not None for v in local.values())
    gradient = [v for (e, _), v in local.items() if e == "gradient"]
    times_input = [v for (e, _), v in local.items() if e == "input-x-gradient"]
    assert max(gradient) < 1e-4, gradient  # the gradient is input invariant
    assert min(times_input) > 1e-2, times_input  # gradient x input is not
    # the same values whichever process explains: the runner's executor, or this process
    inprocess = _values(tmp_path / "inprocess", "input_invariance")
    assert inprocess.keys() == local.keys()
    for key, value in local.items():
        assert abs(inprocess[key] - value) <= 1e-6, key
    # and from a metric scored in its own worker, which asks the runner for the shifted model
    remote_values = _values(tmp_path / "local", "remote-invariance")
    assert remote_values.keys() == local.keys()
    for key, value in local.items():
        assert abs(remote_values[key] - value) <= 1e-6, key
    assert MODULE not in sys.modules  # the runner never imported the metric's plugin


class _Recorder:
    """An in-process explainer that records the model it was given."""

    kind = "saliency"

    def __init__(self) -> None:
        self.models: list[Any] = []

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        self.models.append(model)
        return np.zeros((len(inputs), 2, 2), dtype=np.float32)


class _Toy:
    """A model object: a torch module and an identity."""

    def __init__(self) -> None:
        self.module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
        self.identity = "toy@0"


def _track() -> Any:
    model = _Toy()
    return types.SimpleNamespace(model=model, inputs=torch.zeros(1, 1, 2, 2), device=torch.device("cpu"))


def _message(shift: Any) -> dict[str, Any]:
    return {
        "op": "explain",
        "model": "toy@0~shifted(-1)",
        "randomisation": None,
        "shift": shift,
        "inputs": np.zeros((1, 1, 2, 2), dtype=np.float32),
        "targets": np.zeros(1, dtype=np.int64),
        "seed": 0,
        "samples": None,
    }


@pytest.mark.parametrize(
    ("shift", "said"),
    [
        ("junk", "shift must be [base, shift]"),
        (["toy@0"], "shift must be [base, shift]"),
        (["toy@0", float("nan")], "a finite number"),
        (["toy@0", float("inf")], "a finite number"),
        (["toy@0", True], "a finite number"),
        (["toy@0", "-1"], "a finite number"),
        ([3, -1.0], "a finite number"),
        (["other@0", -1.0], "unknown model"),
    ],
)
def test_a_malformed_shift_request_is_refused_in_one_line(shift: Any, said: str) -> None:
    explainer = _Recorder()
    answer = answer_explain(_message(shift), explainer, _track())
    assert set(answer) == {"op", "error"} and said in answer["error"] and "\n" not in answer["error"]
    assert explainer.models == []  # the explainer never ran
    both = {**_message(["toy@0", -1.0]), "randomisation": ["toy@0", 1, 1, 0]}
    assert "both randomised and shifted" in answer_explain(both, explainer, _track())["error"]


def test_a_valid_shift_request_explains_the_shifted_copy() -> None:
    explainer, track = _Recorder(), _track()
    answer = answer_explain(_message(["toy@0", -1]), explainer, track)  # an int shift is a number too
    assert "error" not in answer and answer["maps"].shape == (1, 2, 2)
    (model,) = explainer.models
    assert model.identity == "toy@0~shifted(-1)" and model.shift == Shift("toy@0", -1.0)
    x = torch.randn(3, 1, 2, 2)
    torch.testing.assert_close(model.module(x - 1.0), track.model.module(x), atol=1e-5, rtol=1e-5)
    assert decode_shift(("m", 0.25)) == Shift("m", 0.25)


def test_shift_identity_and_worker_state_rebuild() -> None:
    assert Shift("m", -1.0).identity == "m~shifted(-1)"
    assert Shift("m", 0.1234567).identity == "m~shifted(0.1234567)"  # :g would round it: written in full
    spec = ModelSpec("toy", {}, "toy@0")
    assert spec.key == "toy@0"
    shifted = ModelSpec("toy", {}, "toy@0", shift=Shift("toy@0", 2.0))
    assert shifted.key == "toy@0~shifted(2)"
    state = WorkerState(registry=None)
    state.models["toy@0"] = _track().model  # what the zygote built
    built = state.model(shifted)
    assert built.identity == "toy@0~shifted(2)" and built.shift == Shift("toy@0", 2.0)
    assert state.models["toy@0~shifted(2)"] is built  # kept under its own identity
    x = torch.randn(2, 1, 2, 2)
    torch.testing.assert_close(built.module(x + 2.0), state.models["toy@0"].module(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="shift of other@0 asked for model toy@0"):
        state.model(ModelSpec("toy", {}, "toy@0", shift=Shift("other@0", 1.0)))
    again = shift_absorbed(_track().model, 2.0)
    assert again.shift == built.shift and again.identity == built.identity
    randomised = randomised_model(_track().model, upto=1, blocks=1)
    assert getattr(randomised, "shift", None) is None  # what a handle and a metric worker ask it
    assert "module" not in vars(randomised)  # ... without building the randomised copy
