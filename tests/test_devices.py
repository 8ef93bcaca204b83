"""``--device``: resolution, the device in record keys and provenance, CPU numbers unchanged, and
(where one exists) the same run on a GPU (issue 12, DESIGN 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from xaibench import hookimpl
from xaibench.api import Explainer, ForwardCounter
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.runner.isolation.workers import worker_sandbox
from xaibench.runner.run import RunConfig, environment, resolve_device, run

CUDA = torch.cuda.is_available()
MPS = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device")
METRICS = ["iou", "pointing_game", "deletion"]


def _config(workdir: Path, explainers: list[str], **kw: Any) -> RunConfig:
    defaults: dict[str, Any] = {
        "explainers": explainers,
        "tracks": ["shapes"],
        "metrics": METRICS,
        "limit": 6,
        "workdir": workdir,
        "progress": False,
        "timeout": 60.0,
        "examples": 0,
    }
    defaults.update(kw)
    return RunConfig(**defaults)


def _records(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines()]


def _by_sample(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    return {(r["explainer"]["name"], r["metric"], r["sample_id"]): (r["value"], r["na_reason"]) for r in records}


# ----------------------------------------------------------------------------- resolution


def test_auto_picks_a_gpu_when_torch_sees_one_else_the_cpu() -> None:
    expected = "cuda" if CUDA else "mps" if MPS else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "tpu", "cuda:x", "cpu:1", "meta", ""])
def test_unknown_device_is_one_line_naming_the_option(name: str) -> None:
    with pytest.raises(XaibenchError) as err:
        resolve_device(name)
    message = str(err.value)
    assert message.startswith(f"--device {name}: unknown device") and "\n" not in message


def test_every_door_reads_a_device_as_the_runner_does() -> None:
    """One check (:func:`xaibench.runner.config.check_device`): what ``resolve_device`` accepts,
    case and spaces aside, a configuration accepts and stores as the device kind."""
    from xaibench.runner.config import API, CLI, check_device, make_run_config

    assert make_run_config(["random"], device=" CUDA:1 ").device == "cuda:1"
    assert make_run_config(["random"]).device == "auto"
    for spelling, line in ((CLI, "--device cpu:1: unknown device; use "), (API, "device='cpu:1': expected ")):
        with pytest.raises(XaibenchError) as err:
            check_device("cpu:1", spelling)
        assert str(err.value) == line + "auto, cpu, cuda, cuda:N or mps"


def test_the_track_carries_the_runs_device(registry: manager.Registry) -> None:
    """Past ``load_track`` the device is the track's ``device`` (resolved once by the runner),
    not read back from its tensors: a worker rebuilds the model where the track says."""
    import dataclasses

    from xaibench.runner.explain import track_model_spec
    from xaibench.runner.track import load_track

    spec = next(t for t in registry.create("suite", "default").tracks() if t.name == "shapes")
    track = load_track(spec, registry, limit=2, device=torch.device("cpu"))
    assert track.device == torch.device("cpu") and track.inputs is not None
    moved = dataclasses.replace(track, device=torch.device("meta"))  # the tensors stay on the CPU
    model_spec = track_model_spec(moved)
    assert model_spec is not None and model_spec.device == "meta" and moved.inputs.device.type == "cpu"


@pytest.mark.skipif(CUDA, reason="a CUDA device is available here")
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_a_gpu_is_one_line_naming_the_option(name: str) -> None:
    with pytest.raises(XaibenchError, match=rf"^--device {name}: torch .* sees no CUDA device here; use --device cpu"):
        resolve_device(name)


@pytest.mark.skipif(MPS, reason="an MPS device is available here")
def test_mps_without_one_is_one_line() -> None:
    with pytest.raises(XaibenchError, match=r"^--device mps: torch sees no MPS device here"):
        resolve_device("mps")


@needs_cuda
def test_cuda_index_past_the_last_gpu_is_one_line() -> None:
    n = torch.cuda.device_count()
    assert resolve_device(f"cuda:{n - 1}") == torch.device("cuda", n - 1)
    with pytest.raises(XaibenchError, match=f"no CUDA device {n}; this machine has {n}"):
        resolve_device(f"cuda:{n}")


@pytest.mark.skipif(CUDA, reason="a CUDA device is available here")
def test_cli_device_cuda_without_a_gpu_exits_with_one_line(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "xaibench.cli", "run", "-e", "random", "--track", "shapes", "--limit", "2"]
    args += ["--quiet", "--device", "cuda", "--workdir", str(tmp_path / "w"), "--submissions", str(tmp_path / "s")]
    args += ["--leaderboard-dir", str(tmp_path / "lb")]
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: --device cuda: torch ") and "sees no CUDA device" in line
    assert not (tmp_path / "w" / "results").exists()


# ----------------------------------------------------------------------------- keys and provenance


def test_device_torch_and_threads_are_in_environment_records_and_keys(
    tmp_path: Path, registry: manager.Registry
) -> None:
    one = run(_config(tmp_path / "w", ["random"], device="cpu", limit=4), registry).summary
    env = one["run"]
    assert (env["device"], env["device_type"], env["device_name"]) == ("cpu", "cpu", "cpu")
    assert env["torch"] == torch.__version__ and env["torch_threads"] == 1
    first = _records(tmp_path / "w")
    assert {(r["device"], r["torch"], r["torch_threads"]) for r in first} == {("cpu", torch.__version__, 1)}
    # Two threads may change numbers, so nothing computed with one is reused: new keys, new records,
    # and the explanation cache is not served either.
    two = run(_config(tmp_path / "w", ["random"], device="cpu", limit=4, threads=2), registry).summary
    assert two["tracks"]["shapes"]["explainers"]["random"]["explained"]["cached"] == 0
    both = _records(tmp_path / "w")
    assert len(both) == 2 * len(first)
    assert {r["key"] for r in both[len(first) :]}.isdisjoint(r["key"] for r in first)
    assert {r["torch_threads"] for r in both[len(first) :]} == {2}


def test_device_cpu_changes_no_value(tmp_path: Path, registry: manager.Registry) -> None:
    """``--device cpu`` gives the values of the CLI's default (``auto``, the CPU on a machine
    without a GPU) and of a run that never names a device: the same records, keys included."""
    if CUDA or MPS:
        pytest.skip("a GPU is visible here: auto picks it")
    explainers = ["random", "gradient", "sobel"]
    runs = {}
    for name, kw in {"cpu": {"device": "cpu"}, "auto": {"device": "auto"}, "unset": {}}.items():
        run(_config(tmp_path / name, explainers, **kw), registry)
        runs[name] = _records(tmp_path / name)
    assert len(runs["cpu"]) == 3 * len(METRICS) * 6
    for other in ("auto", "unset"):
        assert {r["key"]: (r["value"], r["na_reason"]) for r in runs[other]} == {
            r["key"]: (r["value"], r["na_reason"]) for r in runs["cpu"]
        }


def test_forward_counter_returns_probabilities_on_the_callers_device() -> None:
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    x = torch.randn(5, 3, 2, 2)
    plain = ForwardCounter(module, batch_size=2)(x)
    on_cpu = ForwardCounter(module, batch_size=2, device=torch.device("cpu"))
    assert torch.equal(on_cpu(x), plain) and on_cpu.images == 5 and on_cpu.calls == 3
    if CUDA:
        counter = ForwardCounter(module.to("cuda"), batch_size=2, device=torch.device("cuda", 0))
        out = counter(x)
        assert out.device.type == "cpu" and torch.allclose(out, plain, atol=1e-5)
        assert counter(x.cuda()).device.type == "cuda"


# ----------------------------------------------------------------------------- explainers see the device


class DeviceProbe(Explainer):
    """Fails (an n/a reason naming the devices) unless its inputs and the model are on ``expect``."""

    name = "device-probe"
    version = "1.0.0"
    licence = "test"
    default_params: ClassVar[dict[str, Any]] = {"expect": "cpu"}

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        where = (str(inputs.device), str(next(model.module.parameters()).device))
        if where != (self.params["expect"], self.params["expect"]):
            raise RuntimeError(f"inputs on {where[0]}, model on {where[1]}, expected {self.params['expect']}")
        return inputs.detach().abs().sum(dim=1).cpu().numpy()


class ProbePlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(DeviceProbe)


DEVICES = [
    "cpu",
    pytest.param("cuda", marks=needs_cuda),
    pytest.param("mps", marks=pytest.mark.skipif(not MPS, reason="no MPS device")),
]


@pytest.mark.parametrize("executor", ["local", "inprocess"])
@pytest.mark.parametrize("device", DEVICES)
def test_explainers_get_inputs_on_the_models_device(
    tmp_path: Path, registry: manager.Registry, device: str, executor: str
) -> None:
    registry.add_plugin(ProbePlugin(), name="probe")
    resolved = str(resolve_device(device))
    params = {"device-probe": {"expect": resolved}}
    config = _config(tmp_path / "w", ["device-probe"], device=device, limit=4, executor=executor)
    config.explainer_params = params
    summary = run(config, registry).summary
    assert summary["run"]["device"] == resolved
    metrics = summary["tracks"]["shapes"]["explainers"]["device-probe"]["metrics"]
    for metric in METRICS:  # every map was made on the device; deletion's forward passes ran there
        assert (metrics[metric]["n"], metrics[metric]["n_na"]) == (4, 0), metrics[metric]
    assert {r["device"] for r in _records(tmp_path / "w")} == {resolved}
    # and the probe does fail where the devices differ (the check above can fail)
    config = _config(tmp_path / "x", ["device-probe"], device=device, limit=2, executor=executor)
    config.explainer_params = {"device-probe": {"expect": "meta"}}
    wrong = run(config, registry).summary["tracks"]["shapes"]["explainers"]["device-probe"]["metrics"]["iou"]
    assert wrong["n_na"] == 2 and "expected meta" in next(iter(wrong["na_reasons"]))


# ----------------------------------------------------------------------------- on a GPU


@needs_cuda
def test_run_on_cuda_matches_the_cpu_closely_under_its_own_keys(tmp_path: Path, registry: manager.Registry) -> None:
    explainers = ["random", "center", "oracle", "gradient"]
    run(_config(tmp_path / "cpu", explainers, device="cpu"), registry)
    gpu_summary = run(_config(tmp_path / "gpu", explainers, device="cuda"), registry).summary
    cpu, gpu = _records(tmp_path / "cpu"), _records(tmp_path / "gpu")
    assert gpu_summary["run"]["device_name"] == torch.cuda.get_device_name(0)
    # the workers ran under the sandbox where this machine has one (issue 25: CUDA's devices allowed)
    assert gpu_summary["run"]["sandbox"] == worker_sandbox()
    assert {r["device"] for r in gpu} == {"cuda:0"}
    assert {r["key"] for r in cpu}.isdisjoint(r["key"] for r in gpu)
    cpu_values, gpu_values = _by_sample(cpu), _by_sample(gpu)
    assert cpu_values.keys() == gpu_values.keys()
    for key, (value, reason) in gpu_values.items():
        assert reason is None, (key, reason)
        assert np.isclose(value, cpu_values[key][0], atol=1e-3), (key, value, cpu_values[key])
    # the same seed on the same GPU gives the same numbers
    run(_config(tmp_path / "gpu2", explainers, device="cuda"), registry)
    assert _by_sample(_records(tmp_path / "gpu2")) == gpu_values


@needs_cuda
def test_cache_entries_of_the_cpu_are_not_served_on_cuda(tmp_path: Path, registry: manager.Registry) -> None:
    run(_config(tmp_path / "w", ["gradient"], device="cpu", limit=4), registry)
    again = run(_config(tmp_path / "w", ["gradient"], device="cuda", limit=4), registry).summary
    assert again["tracks"]["shapes"]["explainers"]["gradient"]["explained"]["cached"] == 0
    assert environment(torch.device("cuda", 0))["device_type"] == "cuda"
