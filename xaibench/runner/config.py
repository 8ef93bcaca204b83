"""A run's configuration, built in one place for every front door.

``xaibench run`` (through :func:`xaibench.run`), ``xaibench tune`` and ``select``, and
``xaibench submission verify`` all build their :class:`RunConfig` with :func:`make_run_config`,
the only place that constructs one. The checks of what a user may get wrong (counts, seed,
timeout, executor, device, the suite or ad-hoc track) live here too, with messages that name
each argument the way the caller spells it (:class:`Spelling`: ``--limit`` on the command line,
``limit=`` in Python). :func:`run_outputs` places a run's workdir, submissions and leaderboard
(``--output-path``/``output_path=`` and the finer options). :func:`data_dir` sets
``XAIBENCH_DATA_DIR`` for one run and restores it, so no command leaves the process environment
changed.

The device and the executor are decided here once. :func:`check_device` is the one check of a
``--device``/``device=`` value (every front door and the runner call it), :func:`resolve_device`
the one place it becomes a device of this machine (the runner calls it, once per run), and
:data:`DEFAULT_DEVICE` the one default. :data:`EXECUTOR_TABLE` is the one table of executors
(name, the run options each takes, its constructor): a new backend is one entry plus its module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xaibench.api import TrackSpec
from xaibench.errors import XaibenchError

if TYPE_CHECKING:
    import torch

EXAMPLES_PER_TRACK = 4
"""Example explanations per track and explainer kept for the submissions (``--examples``). Here,
not in :mod:`xaibench.runner.examples`, so that reading a configuration (and publishing, which
imports it) does not import the executors and torch."""

__all__ = [
    "ADHOC_SUITE",
    "API",
    "CLI",
    "CLI_EXECUTORS",
    "DEFAULT_DEVICE",
    "DEFAULT_EXECUTOR",
    "DEVICE_CHOICES",
    "DEVICE_PATTERN",
    "EXECUTORS",
    "EXECUTOR_TABLE",
    "IN_PROCESS_EXECUTORS",
    "ExecutorEntry",
    "RunConfig",
    "RunOutputs",
    "Spelling",
    "check_device",
    "data_dir",
    "executor_entry",
    "executor_options",
    "make_run_config",
    "parameter_mapping",
    "resolve_device",
    "run_outputs",
    "suite_tracks",
]


@dataclass(frozen=True)
class ExecutorEntry:
    """One executor: where explainer code runs. ``constructor`` is ``"module:Class"``, imported
    only when the executor is made (reading the table imports no torch); the class takes the
    registry, then the keywords of ``options`` (:class:`RunConfig` field -> keyword). Internal:
    there is no hook for third-party executors (executors run where results are decided)."""

    name: str
    constructor: str
    options: Mapping[str, str]
    command_line: bool = True
    """Offered by ``xaibench run --executor`` (else from Python only)."""
    in_process: bool = False
    """Runs plugin code in the runner's own process, unsandboxed: trusted code only. Such a run
    says so in its record keys and submissions, and ``submission verify`` refuses it."""


EXECUTOR_TABLE: tuple[ExecutorEntry, ...] = (
    ExecutorEntry(
        "local", "xaibench.runner.isolation.workers:LocalExecutor", {"workers": "workers", "threads": "threads"}
    ),
    ExecutorEntry(
        "ray",
        "xaibench.runner.isolation.ray_executor:RayExecutor",
        {"workers": "workers", "threads": "threads", "ray_address": "address"},
    ),
    ExecutorEntry(
        "inprocess",
        "xaibench.runner.executors:InProcessExecutor",
        {"threads": "threads"},
        command_line=False,
        in_process=True,
    ),
)
"""Every executor: ``local`` worker processes, ``ray`` actors, or ``inprocess`` (trusted code)."""
EXECUTORS = tuple(e.name for e in EXECUTOR_TABLE)
CLI_EXECUTORS = tuple(e.name for e in EXECUTOR_TABLE if e.command_line)
"""The executors the command line offers (``inprocess`` is for trusted code, from Python only)."""
IN_PROCESS_EXECUTORS = tuple(e.name for e in EXECUTOR_TABLE if e.in_process)
"""The executors that run plugin code in the runner's process (a tuple: ``in`` compares with ``==``,
so a value read from a file, whatever its type, is safe to test)."""
DEFAULT_EXECUTOR = "local"
"""The executor of every front door when none is given (``RunConfig``, :func:`make_run_config`,
``xaibench.run``, ``--executor``)."""

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
DEVICE_CHOICES = "auto, cpu, cuda, cuda:N or mps"
DEFAULT_DEVICE = "auto"
"""The device of every front door when none is given (``RunConfig``, :func:`make_run_config`,
``xaibench.run``, ``--device``): the first CUDA GPU torch sees, else MPS, else the CPU."""
ADHOC_SUITE = "adhoc"
"""The suite name recorded for a run of one ad-hoc track (a model on a dataset)."""
WORKDIR_NAME = ".xaibench"
"""The workdir's folder in an output path (``--output-path DIR``: ``DIR/.xaibench``)."""
SUBMISSIONS_NAME = "submissions"
LEADERBOARD_NAME = "leaderboard"
RUNS_CACHE = "runs"
"""The workdir of a Python run without an output path: ``<cache>/runs`` (explanations reused across calls)."""


@dataclass
class RunConfig:
    """What ``xaibench run`` does; every field is an option of the CLI. Built by :func:`make_run_config`."""

    explainers: Sequence[str]
    suite: str = "default"
    tracks: Sequence[str] | None = None
    metrics: Sequence[str] | None = None
    explainer_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0
    limit: int | None = None
    workdir: Path = Path(".xaibench")
    forward_batch: int = 16
    explain_batch: int = 16
    metric_batch: int = 16
    timeout: float | None = 300.0
    threads: int = 1
    progress: bool = True
    use_cache: bool = True
    examples: int = EXAMPLES_PER_TRACK  # example explanations per track and explainer, for the submissions
    executor: str = DEFAULT_EXECUTOR  # where explainer code runs: an EXECUTOR_TABLE name
    workers: int = 1  # worker processes (local) or Ray workers
    ray_address: str | None = None  # join this Ray cluster; None starts a local Ray instance
    device: str = DEFAULT_DEVICE  # "auto", "cpu", "cuda", "cuda:N" or "mps" (resolved by the runner)
    # Track name -> the only sample ids to run there, taken from the track's first `limit` samples
    # (`xaibench submission verify`); a track not named here, or None, runs all its samples.
    samples: Mapping[str, Sequence[str]] | None = None
    suite_tracks: Sequence[TrackSpec] | None = None  # when given, these tracks are run instead of the suite's


@dataclass(frozen=True)
class Spelling:
    """How a front door names its arguments in messages: argument -> its spelling."""

    names: Mapping[str, str]

    def __call__(self, argument: str) -> str:
        return self.names.get(argument, argument)

    def value(self, argument: str, value: Any) -> str:
        """``limit=0`` (Python) or ``--limit 0`` (command line)."""
        name = self(argument)
        return f"{name}{value!r}" if name.endswith("=") else f"{name} {value}"


API = Spelling(
    {
        **{k: f"{k}=" for k in ("suite", "model", "dataset", "limit", "seed", "timeout", "device", "executor")},
        **{k: f"{k}=" for k in ("batch_size", "threads", "workers", "data_dir", "submissions", "leaderboard_dir")},
        **{k: f"{k}=" for k in ("output_path", "workdir")},
        **{k: k for k in ("model_params", "dataset_params", "target", "track_name")},
        "publish": "publish=False",
    }
)
CLI = Spelling(
    {
        "suite": "--suite",
        "model": "--model",
        "dataset": "--dataset",
        "model_params": "--model-param",
        "dataset_params": "--dataset-param",
        "target": "--target",
        "track_name": "--track-name",
        "limit": "--limit",
        "seed": "--seed",
        "timeout": "--timeout",
        "device": "--device",
        "executor": "--executor",
        "batch_size": "--batch-size",
        "threads": "--threads",
        "workers": "--workers",
        "data_dir": "--data-dir",
        "submissions": "--submissions",
        "leaderboard_dir": "--leaderboard-dir",
        "output_path": "--output-path",
        "workdir": "--workdir",
        "publish": "--no-publish",
    }
)


# The longest timeout: a year. Longer ones overflow the clocks they are given to (select, setitimer).
MAX_TIMEOUT = 365 * 24 * 3600


def _check_timeout(timeout: Any, spelling: Spelling) -> None:
    """A timeout is seconds from 0 (no limit) to :data:`MAX_TIMEOUT`; ``None`` is no limit too.
    ``inf`` and ``nan`` are refused (use 0 for no limit)."""
    if timeout is None:
        return
    if not isinstance(timeout, bool) and isinstance(timeout, int | float) and 0 <= timeout <= MAX_TIMEOUT:
        return
    none = "" if spelling("timeout").startswith("-") else " or None"
    raise XaibenchError(
        f"{spelling.value('timeout', timeout)}: expected seconds from 0 to {MAX_TIMEOUT} (a year); 0{none} for no limit"
    )


def _positive(value: Any, argument: str, spelling: Spelling, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise XaibenchError(f"{spelling.value(argument, value)}: expected a positive integer")


def parameter_mapping(value: Any, argument: str) -> dict[str, Any]:
    """``value`` as a dict of parameters by name (``None``: empty); one line naming ``argument`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise XaibenchError(f"{argument}={value!r}: expected a dict of parameters by name")
    return dict(value)


def suite_tracks(
    suite: str | Path | None,
    model: str | None,
    dataset: str | None,
    *,
    model_params: Mapping[str, Any] | None = None,
    dataset_params: Mapping[str, Any] | None = None,
    target: str | None = None,
    track_name: str | None = None,
    spelling: Spelling = API,
) -> tuple[str, list[TrackSpec] | None]:
    """The suite name to record and the tracks to run instead of a suite plugin's (``None``: the
    plugin's): one ad-hoc track from ``model`` and ``dataset``, or a suite file's tracks.
    ``suite=None`` means the default suite. A wrong combination raises :class:`XaibenchError`
    naming the arguments as ``spelling`` spells them."""
    from xaibench.suites.adhoc import adhoc_track
    from xaibench.suites.suite_file import is_suite_file, load_suite_file

    s = spelling
    adhoc_options = ("model_params", "dataset_params", "target", "track_name")
    given = [o for o, v in zip(adhoc_options, (model_params, dataset_params, target, track_name), strict=True) if v]
    if model is None and dataset is None:
        if given:
            listed = ", ".join(s(o) for o in adhoc_options[:-1]) + f" and {s(adhoc_options[-1])}"
            raise XaibenchError(
                f"{s(given[0])} needs {s('model')} and {s('dataset')} ({listed} need {s('model')} and "
                f"{s('dataset')}: they set the ad-hoc track)"
            )
        name = "default" if suite is None else str(suite)
        if isinstance(suite, Path) or is_suite_file(name):
            loaded = load_suite_file(name)
            return loaded.name, list(loaded.tracks)
        return name, None
    if model is None or dataset is None:
        have, missing = ("model", "dataset") if dataset is None else ("dataset", "model")
        raise XaibenchError(
            f"{s(missing)} is missing: {s(have)} needs {s(missing)} too, an ad-hoc track is one model on one "
            f"dataset (e.g. {s('dataset')} folder:PATH)"
        )
    if suite is not None:
        raise XaibenchError(
            f"{s('suite')} with {s('model')}/{s('dataset')}: give one or the other "
            f"(either {s('suite')} or {s('model')} with {s('dataset')})"
        )
    track = adhoc_track(
        model,
        dataset,
        model_params=parameter_mapping(model_params, "model_params"),
        dataset_params=parameter_mapping(dataset_params, "dataset_params"),
        target=target or "predicted",
        name=track_name,
    )
    return ADHOC_SUITE, [track]


@dataclass(frozen=True)
class RunOutputs:
    """Where a run writes: its workdir (records, cache, summary), and where publishing writes
    (``None``: not published; the leaderboard is built from the submissions)."""

    workdir: Path
    submissions: Path | None
    leaderboard_dir: Path | None


def _folder(value: Any, argument: str, spelling: Spelling) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise XaibenchError(f"{spelling.value(argument, value)}: expected a folder path")
    return Path(value).expanduser()


def run_outputs(
    output_path: str | Path | None,
    *,
    workdir: str | Path | None = None,
    submissions: str | Path | None = None,
    leaderboard_dir: str | Path | None = None,
    publish: bool = True,
    spelling: Spelling = API,
) -> RunOutputs:
    """Where a run writes. ``None`` means not given. With ``output_path`` DIR: the workdir is
    ``DIR/.xaibench``, the submissions ``DIR/submissions``, the leaderboard ``DIR/leaderboard``,
    each unless given (the command line passes its current folder as DIR when ``--output-path``
    is not given). Without one (Python): the workdir is ``<cache>/runs`` (``$XAIBENCH_CACHE``, else
    ``~/.cache/xaibench``) and only what is given is published, so nothing is written in the
    current folder. ``publish=False``: nothing is published; giving a publishing folder with it
    is a contradiction."""
    if not isinstance(publish, bool):
        raise XaibenchError(f"publish={publish!r}: expected True or False")
    root = _folder(output_path, "output_path", spelling)
    work, subs, board = (
        _folder(v, a, spelling)
        for v, a in ((workdir, "workdir"), (submissions, "submissions"), (leaderboard_dir, "leaderboard_dir"))
    )
    if root is not None and root.exists() and not root.is_dir():
        raise XaibenchError(f"{spelling.value('output_path', str(root))}: is a file, not a folder; pass a folder")
    if not publish:
        given = next((a for a, v in (("submissions", subs), ("leaderboard_dir", board)) if v is not None), None)
        if given is not None:
            raise XaibenchError(
                f"{spelling('publish')} with {spelling(given)}: give one or the other "
                f"({spelling('publish')} writes no submissions or leaderboard)"
            )
    if root is not None:
        work = work if work is not None else root / WORKDIR_NAME
        if publish:
            subs = subs if subs is not None else root / SUBMISSIONS_NAME
            board = board if board is not None else root / LEADERBOARD_NAME
    if work is None:
        from xaibench.models.trained import default_cache_dir

        work = default_cache_dir() / RUNS_CACHE
    if board is not None and subs is None:
        raise XaibenchError(
            f"{spelling('leaderboard_dir').rstrip('=')} needs {spelling('submissions').rstrip('=')}: the leaderboard "
            "is built from the submission files"
        )
    return RunOutputs(workdir=work, submissions=subs, leaderboard_dir=board)


def check_device(device: Any, spelling: Spelling = API) -> str:
    """The device kind ``device`` names (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``; case and
    surrounding spaces aside), the one check of a device every front door and the runner make;
    else one line naming the argument as ``spelling`` spells it (``--device tpu: unknown device;
    use ...`` on the command line and in the runner, ``device='tpu': expected ...`` in Python).
    Whether this machine has the device is :func:`resolve_device`'s to say."""
    kind = device.strip().lower() if isinstance(device, str) else None
    if kind is None or not DEVICE_PATTERN.fullmatch(kind):
        wording = "unknown device; use" if spelling("device").startswith("-") else "expected"
        raise XaibenchError(f"{spelling.value('device', device)}: {wording} {DEVICE_CHOICES}")
    return kind


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(name: str) -> torch.device:
    """The device ``--device name`` means here (checked by :func:`check_device` first): ``auto``
    is the first CUDA GPU when torch sees one, else Apple's MPS when available, else the CPU. A
    device that is not available here raises :class:`XaibenchError` (one line naming
    ``--device``: the runner speaks the command line's spelling). The runner calls it once per
    run and carries the device from there (tracks, workers, metrics); it may initialise CUDA."""
    import torch

    kind = check_device(name, CLI)
    if kind == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("mps") if _mps_available() else torch.device("cpu")
    device = torch.device(kind)
    if device.type == "cpu":
        return device
    if device.type == "mps":
        if not _mps_available():
            raise XaibenchError(f"--device {name}: torch sees no MPS device here; use --device cpu or auto")
        return device
    if not torch.cuda.is_available():
        raise XaibenchError(
            f"--device {name}: torch {torch.__version__} sees no CUDA device here; use --device cpu or auto"
        )
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= count:
        raise XaibenchError(f"--device {name}: there is no CUDA device {index}; this machine has {count}")
    return torch.device("cuda", index)


def executor_entry(name: str) -> ExecutorEntry:
    """The :data:`EXECUTOR_TABLE` entry of executor ``name``; ``ValueError`` for an unknown one."""
    for entry in EXECUTOR_TABLE:
        if entry.name == name:
            return entry
    raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")


def executor_options(config: RunConfig) -> dict[str, Any]:
    """The run options ``config``'s executor takes, by :class:`RunConfig` field (e.g. ``workers``,
    ``threads``, ``ray_address``), as :func:`xaibench.runner.isolation.workers.make_executor` takes them."""
    return {option: getattr(config, option) for option in executor_entry(config.executor).options}


def make_run_config(
    explainers: Sequence[str],
    *,
    suite: str = "default",
    suite_tracks: Sequence[TrackSpec] | None = None,
    tracks: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    explainer_params: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
    limit: int | None = None,
    workdir: Path = Path(".xaibench"),
    batch_size: int = 16,
    timeout: float | None = 300.0,
    threads: int = 1,
    progress: bool = True,
    cache: bool = True,
    examples: int = EXAMPLES_PER_TRACK,
    executor: str = DEFAULT_EXECUTOR,
    workers: int = 1,
    ray_address: str | None = None,
    device: str = DEFAULT_DEVICE,
    samples: Mapping[str, Sequence[str]] | None = None,
    spelling: Spelling = API,
) -> RunConfig:
    """The one place a :class:`RunConfig` is made: checks every argument (one line naming it, as
    ``spelling`` spells it) and fills the fields. ``timeout`` 0 or ``None``: no limit."""
    _positive(limit, "limit", spelling, allow_none=True)
    for value, argument in ((batch_size, "batch_size"), (threads, "threads"), (workers, "workers")):
        _positive(value, argument, spelling)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise XaibenchError(f"{spelling.value('seed', seed)}: expected an integer")
    _check_timeout(timeout, spelling)
    if executor not in EXECUTORS:
        raise XaibenchError(f"{spelling.value('executor', executor)}: expected one of {', '.join(EXECUTORS)}")
    device = check_device(device, spelling)
    return RunConfig(
        explainers=list(explainers),
        suite=suite,
        tracks=list(tracks) if tracks else None,
        metrics=list(metrics) if metrics else None,
        explainer_params={k: dict(v) for k, v in (explainer_params or {}).items()},
        seed=seed,
        limit=limit,
        workdir=Path(workdir),
        forward_batch=batch_size,
        timeout=timeout or None,
        progress=progress,
        use_cache=cache,
        examples=examples,
        threads=threads,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        device=device,
        samples=samples,
        suite_tracks=list(suite_tracks) if suite_tracks is not None else None,
    )


@contextmanager
def data_dir(path: str | Path | None, spelling: Spelling = API) -> Iterator[None]:
    """``XAIBENCH_DATA_DIR`` set to ``path`` (the root of the real datasets) for the block, and
    restored afterwards, whatever happens; nothing when ``path`` is ``None``."""
    if path is None:
        yield
        return
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise XaibenchError(f"{spelling.value('data_dir', str(folder))}: no such folder")
    before = os.environ.get("XAIBENCH_DATA_DIR")
    os.environ["XAIBENCH_DATA_DIR"] = str(folder.resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XAIBENCH_DATA_DIR", None)
        else:
            os.environ["XAIBENCH_DATA_DIR"] = before
