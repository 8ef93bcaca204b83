"""Third-party explainers that misbehave cannot change another explainer's records or end the run.

Each explainer below is registered at run time, as a plugin would be, and attacks the run in
one way: it mutates the model or the samples it is given, changes torch's global state, leaves a
global forward hook behind, exits its process, raises in its constructor, hangs, or swallows the
timeout. Run in one invocation together with well-behaved explainers (``gradient``, and the
seeded ``random``), the well-behaved explainers' records are bit-identical to a run of them
alone, and every fault is in the records as an n/a reason. Explainers run in worker processes
(``--executor local``, the default), so the timeout is enforced from outside and kills for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from xaibench import hookimpl
from xaibench.api import Explainer
from xaibench.cli import cli
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.runner.isolation import scheduling, workers
from xaibench.runner.run import RunConfig, Runner, run
from xaibench.sandbox import WRITABLE_VARIABLE

TIMEOUT = 3.0
LIMIT = 6
METRICS = ["iou", "pointing_game", "max_sensitivity"]
WELL_BEHAVED = ["gradient", "random"]
PID_DIR = "XAIBENCH_TEST_PID_DIR"


@pytest.fixture()
def registry(registry: manager.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> manager.Registry:
    """The fresh process registry (tests/conftest.py) with the hostile plugin."""
    reg = registry
    monkeypatch.setenv(PID_DIR, str(tmp_path / "pids"))
    monkeypatch.setenv(WRITABLE_VARIABLE, str(tmp_path / "pids"))  # the notes below, from sandboxed workers
    (tmp_path / "pids").mkdir()
    reg.add_plugin(HostilePlugin(), name="hostile")
    return reg


def _note_pid(name: str) -> None:
    """Leave this process's pid where the test can check, after the run, that it was killed."""
    folder = os.environ.get(PID_DIR)
    if folder:
        Path(folder, f"{name}-{os.getpid()}").write_text(str(os.getpid()))


class _Hostile(Explainer):
    """Does its harm, then returns a valid map (a seeded random one), so that it is scored too."""

    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        _note_pid(self.name)
        self.harm(model, inputs, context)
        return np.random.default_rng(seed).random((inputs.shape[0], *inputs.shape[-2:])).astype(np.float32)

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        raise NotImplementedError


class HalvesWeights(_Hostile):
    name = "halves-weights"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        with torch.no_grad():
            for p in model.module.parameters():
                p.mul_(0.5)


class TrainMode(_Hostile):
    name = "train-mode"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        model.module.train()


class ZeroesSamples(_Hostile):
    name = "zeroes-samples"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        inputs.zero_()
        for sample in context.samples if context is not None else ():
            sample.image[...] = 0
            if sample.ground_truth is not None and sample.ground_truth.mask is not None:
                sample.ground_truth.mask[...] = 0


class Float64(_Hostile):
    name = "float64"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        torch.set_default_dtype(torch.float64)


class TwoThreads(_Hostile):
    name = "two-threads"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        torch.set_num_threads(2)


class NoGrad(_Hostile):
    name = "no-grad"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        torch.set_grad_enabled(False)


class GlobalHook(_Hostile):
    """A forward hook on every module of the process, left behind: it scales every output."""

    name = "global-hook"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: output * 0.5)


class SysExit(_Hostile):
    name = "sys-exit"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        sys.exit(3)


class OsExit(_Hostile):
    name = "os-exit"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        os._exit(0)


class KillsZygote(_Hostile):
    """Kills the process that forks the workers (and so, itself)."""

    name = "kills-zygote"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(10**6)


class _Payload:
    """Unpickling this runs a shell command: what a worker could send to attack the runner."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.marker}",))


class EvilReply(_Hostile):
    """Returns objects whose unpickling would run code in the runner's process."""

    name = "evil-reply"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        return [_Payload(str(Path(os.environ[PID_DIR]).parent / "pwned")) for _ in range(inputs.shape[0])]


class RaisesInInit(_Hostile):
    name = "raises-in-init"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        raise ValueError("cannot find my weights")


class SwallowsTimeout(_Hostile):
    """Catches everything, so an in-process timeout (an exception) could never stop it."""

    name = "swallows-timeout"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        _note_pid(self.name)
        while True:
            try:
                time.sleep(0.05)
            except BaseException:  # noqa: BLE001 - the point of this explainer
                continue


class Hangs(_Hostile):
    name = "hangs"

    def harm(self, model: Any, inputs: Any, context: Any) -> None:
        _note_pid(self.name)
        time.sleep(10**6)


class HangsInInit(_Hostile):
    name = "hangs-in-init"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        time.sleep(10**6)


class StrictParams(_Hostile):
    """Checks its parameters in the ``validate_params`` hook: a bad value is bad input."""

    name = "strict-params"
    default_params = {"k": 1}  # noqa: RUF012 - class data, as plugins write it

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["k"] < 0:
            raise ValueError(f"explainer {self.name!r}: parameter 'k' must be at least 0")
        return params


HOSTILE = [
    HalvesWeights,
    TrainMode,
    ZeroesSamples,
    Float64,
    TwoThreads,
    NoGrad,
    GlobalHook,
    SysExit,
    OsExit,
    KillsZygote,
    EvilReply,
    RaisesInInit,
    SwallowsTimeout,
    Hangs,
]


class HostilePlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        for cls in [*HOSTILE, StrictParams, HangsInInit]:
            register(cls)


def _config(workdir: Path, explainers: list[str], **kw: Any) -> RunConfig:
    values: dict[str, Any] = {
        "explainers": explainers,
        "tracks": ["shapes"],
        "metrics": METRICS,
        "limit": LIMIT,
        "workdir": workdir,
        "progress": False,
        "timeout": TIMEOUT,
        "examples": 0,
    }
    values.update(kw)
    return RunConfig(**values)


def _records(workdir: Path, track: str = "shapes") -> dict[str, dict[str, Any]]:
    """Every record of ``track`` by key, without its timing and its integrity tag (keyed per
    workdir): the only fields that may differ between runs."""
    out = {}
    for line in (workdir / "results" / f"{track}.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["key"]] = {k: v for k, v in record.items() if k not in ("wall_time_s", "integrity")}
    return out


def _by_sample(found: dict[str, dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The records by (explainer, metric, sample), without their key: an in-process run's keys
    differ on purpose (its records are never reused by a sandboxed run, issue 42)."""
    return {
        (r["explainer"]["name"], r["metric"], r["sample_id"]): {k: v for k, v in r.items() if k != "key"}
        for r in found.values()
    }


def _children() -> list[int]:
    """Processes whose parent is this one (Linux), zombies included."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks processes through /proc (Linux)")
def test_hostile_explainers_cannot_touch_other_records_and_every_fault_has_its_reason(
    tmp_path: Path, registry: manager.Registry
) -> None:
    alone = tmp_path / "alone"
    run(_config(alone, WELL_BEHAVED), registry)
    together = tmp_path / "together"
    names = [cls.name for cls in HOSTILE]
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    summary = run(_config(together, [*names, *WELL_BEHAVED]), registry).summary

    # The runner's own process is untouched: no explainer code ran in it, scoring included.
    assert (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled()) == (dtype, threads, True)
    assert not torch.nn.modules.module._global_forward_hooks

    # The well-behaved explainers' records are bit-identical to a run of them alone.
    mine = _records(alone)
    theirs = {k: v for k, v in _records(together).items() if v["explainer"]["name"] in WELL_BEHAVED}
    assert len(mine) == len(WELL_BEHAVED) * len(METRICS) * LIMIT
    assert theirs == mine

    # Every fault is reported in the records, with its reason.
    records = _records(together)
    reasons: dict[str, set[str]] = {}
    for record in records.values():
        if record["na_reason"] is not None and record["metric"] != "max_sensitivity":
            reasons.setdefault(record["explainer"]["name"], set()).add(record["na_reason"])
    assert reasons["sys-exit"] == {"worker exited with status 3"}
    assert reasons["os-exit"] == {"worker exited with status 0"}
    killed = {"worker exited (status unknown)", "worker killed by signal SIGKILL"}
    denied = {"explainer raised PermissionError: [Errno 1] Operation not permitted"}  # the sandbox's signal scope
    assert reasons["kills-zygote"] <= (denied if workers.worker_sandbox().startswith("landlock") else killed)
    unsendable = "explainer output cannot be sent: WireError: a reply may not contain an object of type _Payload"
    assert reasons["evil-reply"] == {unsendable}
    assert not (tmp_path / "pwned").exists()
    assert reasons["raises-in-init"] == {"explainer constructor raised ValueError: cannot find my weights"}
    share = f"killed after {TIMEOUT / LIMIT:g} s ({TIMEOUT:g} s shared by the {LIMIT} samples of a batch"
    share += " that timed out)"
    assert reasons["swallows-timeout"] == {share}
    assert reasons["hangs"] == {share}
    explained = {name: block["explained"] for name, block in summary["tracks"]["shapes"]["explainers"].items()}
    for name in ("sys-exit", "os-exit", "kills-zygote", "evil-reply", "raises-in-init", "swallows-timeout", "hangs"):
        assert explained[name]["failed"] == LIMIT, name
    # Harm done only to their own copies: those explainers ran, were scored, and hurt nobody else.
    for name in ("halves-weights", "train-mode", "zeroes-samples", "float64", "two-threads", "no-grad", "global-hook"):
        assert explained[name] == {"computed": LIMIT, "cached": 0, "failed": 0}, name
        assert name not in reasons, (name, reasons.get(name))

    # Killed for real: the processes that hung or swallowed the timeout are gone, and no worker
    # (or zombie) is left behind.
    pids = [int(p.read_text()) for p in (tmp_path / "pids").iterdir() if p.name.startswith(("hangs", "swallows"))]
    assert len(pids) >= 2 and not [pid for pid in pids if _alive(pid)]
    assert _children() == []


def test_cli_run_with_hostile_explainers_finishes_and_says_why_most_values_are_missing(
    tmp_path: Path, registry: manager.Registry
) -> None:
    """Four hostile explainers of five: the run finishes, publishes gradient, and, since more than
    half of the track's values are n/a (issue 24's run health), ends with one error line naming
    their reasons and status 1: neither a crash nor a silent success."""
    args = ["run", "-e", "os-exit,sys-exit,raises-in-init,hangs,gradient", "--track", "shapes", "--limit", "4"]
    args += ["--metric", "iou", "--timeout", "2", "--quiet", "--device", "cpu", "--workdir", str(tmp_path / "w")]
    args += ["--submissions", str(tmp_path / "s"), "--leaderboard-dir", str(tmp_path / "lb")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: track shapes: 16 of 20 values (80 %)"), result.output
    assert "worker exited with status 3 (4)" in errors[0]  # one line, however wide the terminal
    assert (tmp_path / "s" / "gradient.json").is_file() and (tmp_path / "lb" / "leaderboard.csv").is_file()
    summary = json.loads((tmp_path / "w" / "summary.json").read_text())
    explained = summary["tracks"]["shapes"]["explainers"]
    assert explained["gradient"]["explained"]["computed"] == 4
    assert all(explained[n]["explained"]["failed"] == 4 for n in ("os-exit", "sys-exit", "raises-in-init", "hangs"))


def test_bad_parameters_still_stop_the_run_before_any_work(tmp_path: Path, registry: manager.Registry) -> None:
    """Bad input is one line before any work; only the plugin's own constructor code is an n/a."""
    cases = [
        ({"center": {"sigma": "wide"}}, "explainer 'center': parameter 'sigma' must be a number"),
        ({"center": {"radius": 2}}, r"explainer 'center': unknown parameter\(s\) \['radius'\]"),
        ({"strict-params": {"k": -1}}, "explainer 'strict-params': parameter 'k' must be at least 0"),
    ]
    for params, message in cases:
        with pytest.raises(XaibenchError, match=message):
            Runner(_config(tmp_path / "w", list(params), explainer_params=params), registry)
    assert not (tmp_path / "w").exists()
    assert _children() == [] or not sys.platform.startswith("linux")


def test_a_constructor_that_hangs_is_killed_and_the_run_goes_on(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduling, "SETUP_SECONDS", 0.0)  # constructors get the explainer timeout (3 s)
    config = _config(tmp_path / "w", ["hangs-in-init", "gradient"], metrics=["iou"], limit=4)
    summary = run(config, registry).summary
    explained = summary["tracks"]["shapes"]["explainers"]
    assert explained["hangs-in-init"]["metrics"]["iou"]["na_reasons"] == {
        f"explainer constructor: killed after {TIMEOUT:g} s": 4
    }
    assert explained["gradient"]["explained"]["computed"] == 4


def test_every_worker_count_and_the_in_process_path_give_identical_records(
    tmp_path: Path, registry: manager.Registry
) -> None:
    explainers = ["gradient", "random", "sobel"]
    runs = {
        "inprocess": _config(tmp_path / "a", explainers, executor="inprocess", explain_batch=2),
        "local-1": _config(tmp_path / "b", explainers, explain_batch=2),
        "local-2": _config(tmp_path / "c", explainers, workers=2, explain_batch=2),
    }
    records = {}
    for label, config in runs.items():
        run(config, registry)
        records[label] = _records(config.workdir)
    assert len(records["inprocess"]) == len(explainers) * len(METRICS) * LIMIT

    assert _by_sample(records["local-1"]) == _by_sample(records["inprocess"])
    assert _by_sample(records["local-2"]) == _by_sample(records["inprocess"])
    assert not set(records["local-1"]) & set(records["inprocess"])  # the keys never meet


def test_workers_serve_one_explainer_across_tracks(tmp_path: Path, registry: manager.Registry) -> None:
    """One worker, three explainers, two tracks: each explainer's worker is kept warm for the next
    track (the same process serves it), and never serves another explainer (the global hook and
    thread count it left behind stay in its own process)."""
    tracks = ["shapes", "shapes-shortcut"]
    run(_config(tmp_path / "alone", ["gradient"], tracks=tracks), registry)
    run(_config(tmp_path / "mixed", ["global-hook", "gradient", "two-threads"], tracks=tracks), registry)
    for track in tracks:
        assert _records(tmp_path / "alone", track) == {
            k: v for k, v in _records(tmp_path / "mixed", track).items() if v["explainer"]["name"] == "gradient"
        }
    served = {}
    for note in (tmp_path / "pids").iterdir():
        name, pid = note.name.rsplit("-", 1)
        served.setdefault(name, set()).add(int(pid))
    assert len(served["global-hook"]) == 1 and len(served["two-threads"]) == 1  # warm across both tracks
    assert not served["global-hook"] & served["two-threads"]


def test_spawned_workers_give_the_same_records(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where fork is not used (macOS, Windows), workers are spawned: same records."""
    config = _config(tmp_path / "spawn", ["gradient"], metrics=["iou"], limit=4)
    monkeypatch.setattr(workers, "default_start_method", lambda: "spawn")
    run(config, registry)
    monkeypatch.undo()
    reference = _config(tmp_path / "inprocess", ["gradient"], metrics=["iou"], limit=4, executor="inprocess")
    run(reference, registry)
    assert len(_records(config.workdir)) == 4
    assert _by_sample(_records(config.workdir)) == _by_sample(_records(reference.workdir))


SCRIPT = """
import sys, time
from xaibench.api import Explainer
from xaibench.cli import main
from xaibench.plugins.manager import get_registry

class Hangs(Explainer):
    name = "hangs"
    version = "1.0.0"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        import os
        from pathlib import Path
        Path(sys.argv[1], str(os.getpid())).write_text("")
        time.sleep(10**6)

class Plugin:
    from xaibench import hookimpl

    @hookimpl
    def register_explainers(self, register):
        register(Hangs)

get_registry().add_plugin(Plugin(), name="hangs")
main(["run", "-e", "hangs", "--track", "shapes", "--limit", "2", "--metric", "iou", "--quiet", "--device", "cpu",
      "--workdir", sys.argv[2] + "/w", "--submissions", sys.argv[2] + "/s", "--leaderboard-dir", sys.argv[2] + "/l"])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks processes through /proc (Linux)")
def test_interrupting_the_run_stops_it_and_kills_its_workers(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", WRITABLE_VARIABLE: str(pids)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pids), str(tmp_path)],
        env=env,
        stderr=subprocess.PIPE,
        # Ctrl-C as in a terminal: a test run started in the background (`nohup ... &`) passes SIGINT on ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not list(pids.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        worker = int(next(pids.iterdir()).name)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)
