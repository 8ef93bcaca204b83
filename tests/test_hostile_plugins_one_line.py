"""Issue 25 item 6: what a purpose-written hostile plugin or input did to the command line.

Each case is one line naming the file, the plugin or the option (``error: ...`` and a non-zero
exit for bad input, stopping before any work; ``warning: ...`` for a plugin that is skipped while
the command goes on), never a traceback, and results already written stay as they were.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._distributions import write_distribution
from xaibench import files, hookimpl
from xaibench.api import Explainer
from xaibench.cli import main
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.runner.config import API, make_run_config
from xaibench.runner.storage.store import RecordStore

REPO = Path(__file__).resolve().parents[1]
SMALL = ("--track", "shapes", "--limit", "2", "--metric", "iou", "--quiet", "--device", "cpu")


def _cli(capfd: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    """Exit status, stdout and stderr (at the file-descriptor level) of ``xaibench ARGS``."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    out, err = capfd.readouterr()
    return int(info.value.code or 0), out, err


def _one_error(code: int, out: str, err: str, *names: str) -> str:
    """The one ``error:`` line of a failed command, checked to name each of ``names``."""
    assert code == 1, (out, err)
    assert "Traceback" not in out + err, err
    errors = [line for line in (out + err).splitlines() if line.startswith("error:")]
    assert len(errors) == 1, (out, err)
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


def _outputs(tmp_path: Path) -> list[str]:
    return [
        "--workdir",
        str(tmp_path / "w"),
        "--submissions",
        str(tmp_path / "s"),
        "--leaderboard-dir",
        str(tmp_path / "lb"),
    ]


def _records(workdir: Path, track: str = "shapes") -> list[dict[str, Any]]:
    path = workdir / "results" / f"{track}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------ 1. plugins that end the process


GOOD = """
    from xaibench import hookimpl
    from xaibench.api import Explainer

    class Fine(Explainer):
        name = "still-here"

        def explain(self, model, inputs, targets, *, seed=0, context=None):
            return inputs.abs().sum(1).numpy()

    @hookimpl
    def register_explainers(register):
        register(Fine)
"""
BAD_NAME = """
    from xaibench import hookimpl
    from xaibench.api import Explainer

    class One(Explainer):
        name = 1

    @hookimpl
    def register_explainers(register):
        register(One)
"""
HOOK_EXIT = """
    import sys
    from xaibench import hookimpl

    @hookimpl
    def register_explainers(register):
        sys.exit(7)
"""


def _xaibench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)]), "HF_HUB_OFFLINE": "1"}
    env.pop("XAIBENCH_LOAD_PLUGINS", None)
    env.pop("XAIBENCH_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "xaibench", *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture()
def hostile_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "xb-good", "xb_good", GOOD)
    write_distribution(site, "xb-exits", "xb_exits", "import sys\nsys.exit(7)\n")
    write_distribution(site, "xb-interrupts", "xb_interrupts", "raise KeyboardInterrupt\n")
    write_distribution(site, "xb-hook-exits", "xb_hook_exits", HOOK_EXIT)
    write_distribution(site, "xb-bad-name", "xb_bad_name", BAD_NAME)
    return site


def test_plugins_that_exit_or_interrupt_are_skipped_in_one_line_each_and_the_command_goes_on(
    hostile_site: Path,
) -> None:
    result = _xaibench(hostile_site, "list", "explainers", "--json")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"still-here", "gradient"} <= names and 1 not in names
    lines = sorted(result.stderr.splitlines())
    assert lines == [
        "warning: plugin xb-bad-name (entry point bad_name): register_explainers: bad_name: explainer One has "
        "the name 1; a name is a string of up to 64 letters, digits, '_', '.' and '-' that starts with a letter; "
        "the rest of that hook skipped",
        "warning: plugin xb-exits (entry point exits): import raised SystemExit(7); skipped",
        "warning: plugin xb-hook-exits (entry point hook_exits): register_explainers raised SystemExit(7); "
        "the rest of that hook skipped",
        "warning: plugin xb-interrupts (entry point interrupts): import raised KeyboardInterrupt(); skipped",
    ]


def test_a_real_ctrl_c_while_a_plugin_loads_still_interrupts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt the plugin raises itself is the plugin's failure; a SIGINT (the user's
    Ctrl-C) reaching the runner while a plugin is being described is not swallowed, and the probe
    describing it does not outlive the interrupt."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "probe.pid"
    write_distribution(
        site,
        "xb-slow",
        "xb_slow",
        f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", "xb-slow")
    monkeypatch.setenv("XAIBENCH_SANDBOX_WRITABLE", str(tmp_path))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))

    def interrupt_once_the_probe_imports_it() -> None:  # not after a fixed delay: the builtins' import time varies
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own Ctrl-C handler, as in a terminal: a test run started in the background (`nohup ... &`)
    # inherits SIGINT ignored, and then no signal would reach the runner at all
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.0, interrupt_once_the_probe_imports_it)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            manager.Registry()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists(), Path(f"/proc/{pid}/status").read_text()[:300]


def test_a_plugin_calling_os_exit_at_import_does_not_end_the_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "xb-os-exit", "xb_os_exit", "import os\nos._exit(0)\n")
    result = _xaibench(site, "list", "explainers", "--json")
    assert "gradient" in {row["name"] for row in json.loads(result.stdout or "[]")}
    assert "xb-os-exit" in result.stderr


# ------------------------------------------------------------------ 2. component names


@pytest.mark.parametrize("name", [1, "1", "two words", "family:iou", "x" * 65, "\x1b[2J"])
def test_a_component_name_that_is_not_a_plain_word_is_refused_naming_the_plugin(name: object) -> None:
    class Odd(Explainer):
        pass

    Odd.name = name  # type: ignore[assignment]

    class Plugin:
        @hookimpl
        def register_explainers(self, register: Any) -> None:
            register(Odd)

    registry = manager.Registry(load_entry_points=False)
    status = registry.add_plugin(Plugin(), name="odd-plugin", distribution=("xb-odd", "0.1"))
    assert not status.ok and status.components == []
    assert (status.error or "").startswith("register_explainers: RegistrationError: odd-plugin: explainer Odd has")
    assert "\x1b" not in (status.error or "") and "\n" not in (status.error or "")
    assert name not in registry.names("explainer") and "gradient" in registry.names("explainer")


# ------------------------------------------------------------------ 3. suite files that break the parser


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("tracks = " + "{ a = " * 3000 + "1" + " }" * 3000 + "\n", "nested too deeply"),
        ('name = "a"\n[[tracks]]\nmodel = x\n', "invalid TOML at line 3, column 9: Invalid value"),
        ("x = " + "1" * 5000 + "\n", "invalid TOML (Exceeds the limit (4300 digits)"),
    ],
)
def test_a_suite_file_that_breaks_the_toml_parser_is_one_line_naming_the_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "evil.toml"
    path.write_text(text)
    line = _one_error(*_cli(capfd, "run", "--suite", path, "-e", "random", *_outputs(tmp_path)))
    assert line.startswith(f"error: {path}: {message}"), line
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------ 4. timeouts


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400", "1e10"])
def test_a_timeout_that_is_not_a_number_of_seconds_stops_before_any_work(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], value: str
) -> None:
    code, out, err = _cli(capfd, "run", "-e", "random", *SMALL, "--timeout", value, *_outputs(tmp_path))
    if value == "-inf":  # refused by the option's range (a usage error, status 2)
        assert code == 2 and "Traceback" not in out + err and "'--timeout'" in err
    else:
        line = _one_error(code, out, err, "--timeout")
        assert line.startswith("error: --timeout ") and "0 for no limit" in line and "None" not in line
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e10, -1, "300", True])
def test_the_api_timeout_is_checked_the_same_way(value: object) -> None:
    with pytest.raises(XaibenchError, match=r"^timeout=.*: expected seconds from 0 to 31536000 \(a year\); 0 or None"):
        make_run_config(["random"], timeout=value, spelling=API)  # type: ignore[arg-type]
    assert make_run_config(["random"], timeout=0).timeout is None
    assert make_run_config(["random"], timeout=None).timeout is None


# ------------------------------------------------------------------ 5. a suite file's model and dataset parameters


def test_a_parameter_name_the_plugin_does_not_take_names_the_file_and_the_track(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.toml"
    track = '[[tracks]]\nname = "{0}"\nmodel = "shapes-cnn"\ndataset = "shapes"\nlimit = 2\n'
    path.write_text(track.format("fine") + track.format("typo") + "model_params = { widht = 3 }\n")
    line = _one_error(*_cli(capfd, "run", "--suite", path, "-e", "random", *_outputs(tmp_path)))
    assert line.startswith(
        f"error: {path}: tracks[2].model_params: model 'shapes-cnn': got an unexpected keyword argument 'widht'; "
        "its parameters: "
    ), line
    assert not (tmp_path / "w").exists()


def test_a_parameter_value_the_plugin_rejects_names_the_file_and_the_other_track_runs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.toml"
    track = '[[tracks]]\nname = "{0}"\nmodel = "shapes-cnn"\ndataset = "shapes"\nlimit = 2\nmetrics = ["iou"]\n'
    path.write_text(track.format("fine") + track.format("many") + 'dataset_params = { n = "many" }\n')
    code, out, err = _cli(capfd, "run", "--suite", path, "-e", "random", "-q", "--device", "cpu", *_outputs(tmp_path))
    assert code == 1 and "Traceback" not in out + err
    failed = [line for line in out.splitlines() if "failed" in line]
    assert failed == [f"track many of {path} failed: dataset 'shapes': invalid literal for int() with base 10: 'many'"]
    assert len(_records(tmp_path / "w", "fine")) == 2  # the other track: one explainer x one metric x 2 samples


# ------------------------------------------------------------------ 6. a full disk


class _FullDisk:
    """``os`` as :mod:`xaibench.files` sees it, except that the temporary file of ``target`` is
    ``/dev/full``: every write to it fails with ENOSPC, from the kernel."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        if Path(path).name.startswith(f".{self.target}."):
            os.close(os.open(path, flags, mode))  # the temporary file exists, as it would
            return os.open("/dev/full", os.O_WRONLY)
        return os.open(path, flags, mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_while_writing_names_the_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.json"
    files.write_json_atomic(target, {"old": True})
    monkeypatch.setattr(files, "os", _FullDisk("summary.json"))
    with pytest.raises(OSError) as info:
        files.write_json_atomic(target, {"new": True})
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(target))
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary file left


def test_a_full_disk_while_appending_records_keeps_the_records_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl"
    RecordStore(path).append([{"key": "a", "value": 1}])
    before = path.read_bytes()

    def half_then_full(fd: int, data: bytes) -> None:  # the disk fills up half-way through the batch
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("xaibench.runner.storage.store._write_all", half_then_full)
    with pytest.raises(OSError) as info:
        RecordStore(path).append([{"key": "b", "value": 2}, {"key": "c", "value": 3}])
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == before
    monkeypatch.undo()
    store = RecordStore(path)
    assert set(store.records) == {"a"} and store.torn_lines == 0


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_at_a_submission_is_one_line_and_keeps_what_was_written(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["run", "-e", "random,sobel", *SMALL, *_outputs(tmp_path)]
    assert _cli(capfd, *args)[0] == 0
    submission = tmp_path / "s" / "sobel.json"
    records, written = _records(tmp_path / "w"), submission.read_bytes()
    listed = sorted(p.name for p in submission.parent.iterdir())
    monkeypatch.setattr(files, "os", _FullDisk("sobel.json"))
    assert _one_error(*_cli(capfd, *args)) == f"error: {submission}: {os.strerror(errno.ENOSPC)}"
    assert submission.read_bytes() == written  # the submission of the first run, whole
    assert sorted(p.name for p in submission.parent.iterdir()) == listed  # no temporary file left
    assert _records(tmp_path / "w") == records
    assert sorted(r["explainer"]["name"] for r in records) == ["random", "random", "sobel", "sobel"]


# ------------------------------------------------------------------ 7. what a worker prints


class Shouts(Explainer):
    """Writes a terminal escape code and a line that looks like xaibench's own error, through
    Python and straight to the file descriptors, then returns a valid map."""

    name = "shouts"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        print("\x1b[2J error: fake from print")
        print("\x1b]0;title\x07 error: fake on stderr", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os.write(1, b"\x1b[31m error: fake from fd 1\n")
        os.write(2, b"\x9b2J no newline at the end")  # (the worker's output ends with the run)
        return np.random.default_rng(seed).random((inputs.shape[0], *inputs.shape[-2:])).astype(np.float32)


class ShoutsPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(Shouts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers forked from the zygote (Linux)")
def test_what_a_worker_prints_reaches_the_terminal_escaped_and_prefixed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], registry: manager.Registry
) -> None:
    registry.add_plugin(ShoutsPlugin(), name="shouts")
    code, out, err = _cli(capfd, "run", "-e", "shouts,random", *SMALL, *_outputs(tmp_path))
    assert code == 0, (out, err)
    assert "\x1b" not in out + err and "\x9b" not in out + err and "\x07" not in out + err
    assert not [line for line in (out + err).splitlines() if line.startswith("error:")]
    worker = [line for line in err.splitlines() if line.startswith("[worker] ")]
    assert sorted(worker) == [  # one call (the batch of 2 samples); b"\x9b" is not UTF-8: replaced
        "[worker] \\x1b[2J error: fake from print",
        "[worker] \\x1b[31m error: fake from fd 1",
        "[worker] \\x1b]0;title\\x07 error: fake on stderr",
        "[worker] \ufffd2J no newline at the end",
    ]
    records = _records(tmp_path / "w")
    assert sorted(r["explainer"]["name"] for r in records) == ["random", "random", "shouts", "shouts"]
    assert all(r["na_reason"] is None for r in records)
