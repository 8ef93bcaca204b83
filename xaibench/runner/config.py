"""A run's configuration, built in one place for every front door.

``xaibench run`` (through :func:`xaibench.run`), ``xaibench tune`` and ``select``, and
``xaibench submission verify`` all build their :class:`RunConfig` with :func:`make_run_config`,
the only place that constructs one. :class:`RunOptions` is the one table of the machine options
every run takes (batch size, timeout, threads, progress, cache, executor, workers, Ray address,
device): their defaults, and how the command line offers each (``xaibench run``'s options are
made from it), so a caller builds one and passes it through. The checks of what a user may get wrong (counts, seed,
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from xaibench.api import TrackSpec
from xaibench.errors import XaibenchError

if TYPE_CHECKING:
    import torch

_Make = TypeVar("_Make", bound=Callable[..., Any])

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
    "RUN_DEFAULTS",
    "CommandLineOption",
    "ExecutorEntry",
    "RunConfig",
    "RunOptions",
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


@dataclass(frozen=True)
class CommandLineOption:
    """How the command line offers a run option (``xaibench run``, and the commands that share
    it): its flags, help line and metavar. A number is checked from ``minimum`` up; ``choices``:
    the values offered; ``negated``: a flag that turns the option off (``--no-cache``, ``--quiet``)."""

    flags: tuple[str, ...]
    help: str
    metavar: str | None = None
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    negated: bool = False

    @property
    def name(self) -> str:
        """The option's parameter name on the command line (``--no-cache``: ``no_cache``)."""
        return self.flags[0].lstrip("-").replace("-", "_")


def _option(default: Any, *flags: str, help: str, **how: Any) -> Any:
    """A :class:`RunOptions` field: its one default and its :class:`CommandLineOption`."""
    return field(default=default, metadata={"command_line": CommandLineOption(flags, help, **how)})


@dataclass(frozen=True)
class RunOptions:
    """The machine options every run takes, with their one set of defaults: how a run computes,
    not what (the explainers, tracks, metrics, seed and limit are :func:`make_run_config`'s own
    arguments). Every front door builds one and passes it through: ``xaibench.run``'s keyword
    arguments, the command line's options (made from this table: each field's
    :class:`CommandLineOption`), the meta-evaluation's and ``submission verify``'s re-runs.
    Checked by :func:`make_run_config` (one line naming the option as the caller spells it).

    A new run option is a field here (with its command-line flags and help), its
    :class:`RunConfig` field filled in :func:`make_run_config`, and a parameter of
    :func:`xaibench.run`."""

    batch_size: int = _option(16, "--batch-size", help="Images per model forward pass.", minimum=1)
    timeout: float | None = _option(
        300.0, "--timeout", help="Seconds allowed per explainer call (0: none; at most a year).", minimum=0
    )
    threads: int = _option(1, "--threads", help="torch intra-op threads.", minimum=1)
    progress: bool = _option(True, "--quiet", "-q", help="No progress bars.", negated=True)
    cache: bool = _option(True, "--no-cache", help="Do not read or write the explanation cache.", negated=True)
    executor: str = _option(
        DEFAULT_EXECUTOR,
        "--executor",
        help="Where explainer code runs: worker processes on this machine, or Ray (pip install 'xaibench[ray]').",
        choices=CLI_EXECUTORS,
    )
    workers: int = _option(1, "--workers", help="Explainer worker processes.", minimum=1)
    ray_address: str | None = _option(
        None, "--ray-address", help="Join this Ray cluster (default: start a local one).", metavar="ADDR"
    )
    device: str = _option(
        DEFAULT_DEVICE,
        "--device",
        help="Device for models, explainers and metric forward passes (auto: a GPU when torch sees one).",
        metavar="auto|cpu|cuda|cuda:N|mps",
    )

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RunOptions:
        """The run options among ``values`` (e.g. the keyword arguments of ``xaibench.meta``; other
        keys are left out), the others at their defaults."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


RUN_DEFAULTS = RunOptions()
"""The default of every run option (``RUN_DEFAULTS.batch_size``): the one set every front door uses."""


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
    forward_batch: int = RUN_DEFAULTS.batch_size
    explain_batch: int = RUN_DEFAULTS.batch_size
    metric_batch: int = RUN_DEFAULTS.batch_size
    timeout: float | None = RUN_DEFAULTS.timeout
    threads: int = RUN_DEFAULTS.threads
    progress: bool = RUN_DEFAULTS.progress
    use_cache: bool = RUN_DEFAULTS.cache
    examples: int = EXAMPLES_PER_TRACK  # example explanations per track and explainer, for the submissions
    executor: str = RUN_DEFAULTS.executor  # where explainer code runs: an EXECUTOR_TABLE name
    workers: int = RUN_DEFAULTS.workers  # worker processes (local) or Ray workers
    ray_address: str | None = RUN_DEFAULTS.ray_address  # join this Ray cluster; None starts a local Ray instance
    device: str = RUN_DEFAULTS.device  # "auto", "cpu", "cuda", "cuda:N" or "mps" (resolved by the runner)
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


_VALUED = [f for f in fields(RunOptions) if not f.metadata["command_line"].negated]
"""The run options that take a value (``--quiet`` and ``--no-cache`` are flags): spelled in messages."""
API = Spelling(
    {
        **{k: f"{k}=" for k in ("suite", "model", "dataset", "limit", "seed")},
        **{f.name: f"{f.name}=" for f in _VALUED},
        **{k: f"{k}=" for k in ("data_dir", "submissions", "leaderboard_dir")},
        **{k: f"{k}=" for k in ("output_path", "workdir")},
        **{k: k for k in ("model_params", "dataset_params", "target", "track_name")},
        "publish": "publish=False",
        "params": "params",
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
        **{f.name: f.metadata["command_line"].flags[0] for f in _VALUED},
        "data_dir": "--data-dir",
        "submissions": "--submissions",
        "leaderboard_dir": "--leaderboard-dir",
        "output_path": "--output-path",
        "workdir": "--workdir",
        "publish": "--no-publish",
        "params": "--param",
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


def _with_option_keywords(make: _Make) -> _Make:
    """``make``'s signature shows each :class:`RunOptions` field as a keyword argument with its
    default (``device="auto"``), in place of ``**option_values``: what ``help()`` and editors show."""
    import inspect

    signature = inspect.signature(make)
    params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keywords = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in fields(RunOptions)
    ]
    make.__signature__ = signature.replace(parameters=[*params, *keywords])  # type: ignore[attr-defined]
    return make


@_with_option_keywords
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
    options: RunOptions = RUN_DEFAULTS,
    examples: int = EXAMPLES_PER_TRACK,
    samples: Mapping[str, Sequence[str]] | None = None,
    spelling: Spelling = API,
    **option_values: Any,
) -> RunConfig:
    """The one place a :class:`RunConfig` is made: checks every argument (one line naming it, as
    ``spelling`` spells it) and fills the fields. ``options``: the machine options
    (:class:`RunOptions`); each of its fields may be given as a keyword instead (``device="cpu"``),
    which replaces that field of ``options`` (an unknown keyword is a ``TypeError``).
    ``timeout`` 0 or ``None``: no limit."""
    o = replace(options, **option_values) if option_values else options
    _positive(limit, "limit", spelling, allow_none=True)
    for value, argument in ((o.batch_size, "batch_size"), (o.threads, "threads"), (o.workers, "workers")):
        _positive(value, argument, spelling)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise XaibenchError(f"{spelling.value('seed', seed)}: expected an integer")
    _check_timeout(o.timeout, spelling)
    if o.executor not in EXECUTORS:
        raise XaibenchError(f"{spelling.value('executor', o.executor)}: expected one of {', '.join(EXECUTORS)}")
    device = check_device(o.device, spelling)
    return RunConfig(
        explainers=list(explainers),
        suite=suite,
        tracks=list(tracks) if tracks else None,
        metrics=list(metrics) if metrics else None,
        explainer_params={k: dict(v) for k, v in (explainer_params or {}).items()},
        seed=seed,
        limit=limit,
        workdir=Path(workdir),
        forward_batch=o.batch_size,
        timeout=o.timeout or None,
        progress=o.progress,
        use_cache=o.cache,
        examples=examples,
        threads=o.threads,
        executor=o.executor,
        workers=o.workers,
        ray_address=o.ray_address,
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
