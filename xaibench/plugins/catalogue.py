"""Plugins known from their metadata: what each distribution registers, described in a sandboxed
subprocess, cached, and held in the runner as stand-in classes with none of the plugin's code.

The runner never imports a third-party plugin (issue 25). For each distribution with entry
points in the group ``xaibench``, :func:`describe` runs ``python -m xaibench.plugins.probe``: a
fresh process, a subreaper that runs no plugin code, whose child enters the worker sandbox
(:mod:`xaibench.sandbox`) before anything else, imports that distribution's plugins alone,
registers them in a registry of its own and writes, as JSON, every component they registered with
its class attributes as data (name, version, family, direction, parameters, ...; a suite's tracks
and status), and one line per plugin that failed. A plugin that exits, raises, loops or kills its
process at import takes only its own probe down: the runner reports it in one line and goes on;
one that starts a daemon at import does not hold the runner's pipe (only the probe does, which
kills what its child left behind once the description is in). The probes of several
distributions run at once.

A description is cached under ``<cache>/plugins/`` (``$XAIBENCH_CACHE``, else
``~/.cache/xaibench``), keyed by a :func:`fingerprint` of the distribution (name, version, entry
points, the size and time of every file of its modules, the folders of ``sys.path``, xaibench's
version and the interpreter), written atomically and tagged with the cache folder's integrity key
(:mod:`xaibench.integrity`): a changed plugin is described again, a forged entry is ignored.

:func:`stand_in` turns a described component into a class: a subclass of its kind's base class
with the plugin's attributes and a ``remote_distribution`` naming the distribution; its behaviour
(``explain``, ``score``, a dataset's ``samples``, a model's ``module``, an encoder's ``encode_images``)
raises :class:`StandInError` in the runner and runs only in a worker that imports the distribution
for real (:meth:`xaibench.plugins.manager.Registry.materialise`). The runner reaches a model or an
encoder through a proxy whose calls run in such a worker (:data:`xaibench.plugins.manager.remote_builders`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import util as import_util
from pathlib import Path
from typing import Any

from xaibench import files, integrity
from xaibench.api import Component, Dataset, Encoder, Explainer, Metric, MetricCost, Model, Suite, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.params import Param
from xaibench.version import __version__

FORMAT = 7  # 2: datasets described as data (stand-ins), with their main parameter; 3: models and encoders too;
# 4: a metric's value_range; 5: a metric's scores_constant_maps; 6: a metric's cost; 7: every component's modalities
TIMEOUT_VARIABLE = "XAIBENCH_PLUGIN_TIMEOUT"  # seconds a distribution's probe may take (default 120)
DEFAULT_TIMEOUT = 120.0
MAX_DESCRIPTION_BYTES = 8 << 20
PATH_VARIABLE = "XAIBENCH_PROBE_PATH"  # the runner's sys.path, as JSON, for the probe
SCRATCH_VARIABLE = "XAIBENCH_PROBE_SCRATCH"  # the probe's scratch folder, made and removed here
TERM_SECONDS = 5.0  # how long a probe told to end (SIGTERM) has to kill what is below it and exit

# The class attributes a stand-in carries, by kind (those of ``xaibench.api``'s base classes that
# the runner reads; all of them are data).
COMMON = ("name", "version", "description", "licence", "needs", "modalities")
PARAMETRISED = ("default_params", "param_specs", "component_kind")
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "explainer": COMMON + PARAMETRISED + ("kind", "reference_only", "tuned_on_benchmark"),
    "metric": COMMON
    + PARAMETRISED
    + (
        "family",
        "direction",
        "ranking",
        "default",
        "unit",
        "explanation_kinds",
        "value_range",
        "cost",
        "scores_constant_maps",
    ),
    "suite": COMMON,
    "dataset": (*COMMON, "synthetic", "source"),
    "model": (*COMMON, "synthetic"),
    "encoder": COMMON + PARAMETRISED,
}
COST_FIELDS = ("forward_passes", "explanations", "shared")
"""The fields of a :class:`~xaibench.api.MetricCost`, as a stand-in carries them."""
# Every kind runs only where its distribution is imported for real. A dataset's samples are
# loaded in a worker and reach the runner as data (xaibench.runner.isolation.dataset_worker); a model or an
# encoder is built in a worker of its own that answers forward passes and embeddings as data
# (xaibench.runner.isolation.component_worker).
STAND_IN_KINDS = frozenset(ATTRIBUTES)


class StandInError(XaibenchError):
    """A stand-in's behaviour was called where its plugin is not imported (the runner)."""


@dataclass(frozen=True)
class EntryPoint:
    """One entry point of the group ``xaibench``, as metadata (nothing imported)."""

    name: str
    value: str
    distribution: str
    version: str


# --------------------------------------------------------------------------- values as data


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data, tuples and :class:`~xaibench.params.Param` tagged; ``TypeError``
    for anything else (a class attribute that is not data)."""
    if depth > 16:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"__float__": repr(value)}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a mapping with keys that are not strings")
        return {"__map__": {k: encode(v, depth + 1) for k, v in value.items()}}
    if isinstance(value, MetricCost):
        return {"__cost__": {f: encode(getattr(value, f), depth + 1) for f in COST_FIELDS}}
    if isinstance(value, Param):
        if value.kind not in (bool, int, float, str):
            raise TypeError(f"a Param of kind {value.kind!r}")
        fields = {"kind": value.kind.__name__, "low": value.low, "high": value.high}
        return {"__param__": {**fields, "choices": list(value.choices), "optional": value.optional}}
    raise TypeError(f"a {type(value).__name__}")


_KINDS = {"bool": bool, "int": int, "float": float, "str": str}


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tuple__" in value:
        return tuple(decode(v) for v in value["__tuple__"])
    if "__map__" in value:
        return {str(k): decode(v) for k, v in value["__map__"].items()}
    if "__float__" in value:
        return float(value["__float__"])
    if "__cost__" in value:
        return MetricCost(**{f: decode(v) for f, v in value["__cost__"].items() if f in COST_FIELDS})
    if "__param__" in value:
        p = value["__param__"]
        return Param(_KINDS[p["kind"]], p["low"], p["high"], tuple(p["choices"]), bool(p["optional"]))
    raise ValueError(f"unknown tagged value {sorted(value)}")


def component_data(kind: str, cls: type[Component]) -> dict[str, Any]:
    """The attributes of ``cls`` a stand-in carries, encoded (a suite's tracks and status too:
    they are computed here, where its plugin is imported)."""
    data = {name: encode(getattr(cls, name)) for name in ATTRIBUTES[kind]}
    if kind == "suite":
        suite = cls()
        data["tracks"] = encode([_track_data(t) for t in suite.tracks()])  # type: ignore[attr-defined]
        data["status"] = str(suite.status())  # type: ignore[attr-defined]
    if kind in ("dataset", "model"):
        data["main_parameter"] = main_parameter(cls)
        data["parameters"] = _parameters(cls)
    return data


def _parameters(cls: type) -> list[list[Any]] | None:
    """The constructor's parameters as data (name, kind, whether it has a default), ``None``
    when it has no signature to read."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    return [[p.name, int(p.kind), p.default is not p.empty] for p in signature.parameters.values()]


_KIND = type(inspect.Parameter.KEYWORD_ONLY)


def _signature(data: Any) -> inspect.Signature | None:
    """The inverse of :func:`_parameters` (defaults are not data: ``None`` stands for one)."""
    if not isinstance(data, list):
        return None
    try:
        return inspect.Signature(
            [
                inspect.Parameter(str(name), _KIND(int(kind)), default=None if has else inspect.Parameter.empty)
                for name, kind, has in data
            ]
        )
    except (TypeError, ValueError):
        return None


def main_parameter(cls: type) -> str | None:
    """The first parameter of ``cls``'s constructor that can be given by name (``None`` when it
    takes only ``**params``): the parameter an ad-hoc track's ``NAME:ARG`` sets. A stand-in
    carries it as data (``remote_main_parameter``), computed where its plugin is imported."""
    if isinstance(getattr(cls, "remote_distribution", None), str):
        value = getattr(cls, "remote_main_parameter", None)
        return value if isinstance(value, str) else None
    try:
        signature = inspect.signature(cls.__init__)  # type: ignore[misc]
    except (TypeError, ValueError):
        return None
    for param in list(signature.parameters.values())[1:]:
        if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            return param.name
    return None


def _track_data(track: TrackSpec) -> dict[str, Any]:
    if not isinstance(track, TrackSpec):
        raise TypeError(f"a track that is a {type(track).__name__}, not a TrackSpec")
    return {name: getattr(track, name) for name in TrackSpec.__dataclass_fields__}


# --------------------------------------------------------------------------- stand-ins


def stand_in(kind: str, data: Mapping[str, Any], distribution: str, plugin: str) -> type[Component]:
    """A class standing in for a component described as ``data`` (see the module doc)."""
    attrs = {name: decode(data[name]) for name in ATTRIBUTES[kind] if name in data}
    where = f"{kind} {attrs.get('name')!r} of distribution {distribution}"

    def elsewhere(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise StandInError(f"{where} runs only in a worker process, where its plugin is imported")

    namespace: dict[str, Any] = {
        **attrs,
        "__module__": f"{__name__}.stand_ins",
        "__doc__": str(attrs.get("description") or ""),
        "remote_distribution": distribution,
        "remote_plugin": plugin,
    }
    base: type[Component]
    if kind == "explainer":
        base = Explainer
        namespace["explain"] = elsewhere
    elif kind == "metric":
        base = Metric
        namespace["score"] = elsewhere
    elif kind == "suite":
        base = Suite
        tracks = [TrackSpec(**t) for t in decode(data.get("tracks", []))]
        status = str(data.get("status", "ok"))
        namespace["tracks"] = lambda self: list(tracks)
        namespace["status"] = lambda self: status
    elif kind == "dataset":
        base = Dataset
        main = data.get("main_parameter")
        namespace["remote_main_parameter"] = main if isinstance(main, str) else None
        signature = _signature(data.get("parameters"))
        if signature is not None:
            namespace["__signature__"] = signature  # suite files are checked against it
        namespace["__init__"] = _dataset_init
        namespace["samples"] = elsewhere
        namespace["__len__"] = elsewhere
        namespace["revision"] = property(elsewhere)
    elif kind == "model":
        base = Model
        main = data.get("main_parameter")
        namespace["remote_main_parameter"] = main if isinstance(main, str) else None
        signature = _signature(data.get("parameters"))
        if signature is not None:
            namespace["__signature__"] = signature  # suite files are checked against it
        namespace["__init__"] = _dataset_init
        namespace["identity"] = property(elsewhere)
        namespace["module"] = property(elsewhere)
        namespace["preprocess"] = elsewhere
    elif kind == "encoder":
        base = Encoder
        namespace["identity"] = property(elsewhere)
        namespace["unavailable"] = elsewhere
        namespace["encode_images"] = elsewhere
        namespace["encode_texts"] = elsewhere
    else:
        raise ValueError(f"no stand-in for a {kind}")
    return type(f"StandIn_{attrs.get('name')}", (base,), namespace)


def _dataset_init(self: Any, **params: Any) -> None:
    """A stand-in dataset (or model) keeps its parameters: the runner sends them to the worker that
    builds the real one (:mod:`xaibench.runner.isolation.dataset_worker`). Names the plugin's constructor does not
    take, or required ones missing, raise ``TypeError`` here, as they would there."""
    signature = getattr(type(self), "__signature__", None)
    if isinstance(signature, inspect.Signature):
        signature.bind(**params)
    self.params = dict(params)


# --------------------------------------------------------------------------- the catalogue


def entry_points(allow: set[str] | None, block: set[str]) -> dict[str, list[EntryPoint]]:
    """The group's entry points by distribution (allow and block lists applied, sorted)."""
    from importlib import metadata

    out: dict[str, list[EntryPoint]] = {}
    for ep in sorted(metadata.entry_points(group="xaibench"), key=lambda e: e.name):
        if (allow is not None and ep.name not in allow) or ep.name in block:
            continue
        dist, version = (ep.dist.name, ep.dist.version) if ep.dist else (f"unknown-{ep.name}", "unknown")
        out.setdefault(dist, []).append(EntryPoint(ep.name, ep.value, dist, version))
    return out


def fingerprint(points: Sequence[EntryPoint]) -> str:
    """What a distribution's description depends on (see the module doc), as a digest."""
    h = hashlib.sha256()
    parts: list[Any] = [FORMAT, __version__, sys.executable, sys.version]
    parts += [(p.name, p.value, p.distribution, p.version) for p in points]
    for folder in sys.path:
        parts.append((folder, _stat(Path(folder or "."))))
    for top in sorted({p.value.split(":")[0].split(".")[0].strip() for p in points}):
        parts += [(str(path), _stat(path)) for path in _module_files(top)]
    h.update(json.dumps(parts, default=str).encode())
    return h.hexdigest()[:32]


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _module_files(top: str) -> list[Path]:
    """The files of top-level module ``top`` (found without importing it)."""
    try:
        spec = import_util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    found = [Path(spec.origin)] if spec.origin and os.path.exists(spec.origin) else []
    for root in spec.submodule_search_locations or ():
        found += sorted(p for p in Path(root).rglob("*") if p.suffix in (".py", ".pth", ".so", ".json", ".toml"))
    return found[:5000]


def cache_folder() -> Path:
    """Where descriptions are cached: ``$XAIBENCH_CACHE/plugins`` (else ``~/.cache/xaibench/plugins``)."""
    return Path(os.environ.get("XAIBENCH_CACHE") or Path.home() / ".cache" / "xaibench") / "plugins"


_MEMO: dict[str, dict[str, Any]] = {}


def describe(by_distribution: Mapping[str, Sequence[EntryPoint]]) -> dict[str, dict[str, Any]]:
    """The description of each distribution (see the module doc): from this process's memo, the
    cache, or a probe (the missing ones run at once). A probe that fails gives a description with
    ``failure`` set to one line."""
    out: dict[str, dict[str, Any]] = {}
    missing: dict[str, tuple[str, Sequence[EntryPoint]]] = {}
    folder = cache_folder()
    for dist, points in by_distribution.items():
        given = _GIVEN.get(_points_key(points))
        if given is not None:
            out[dist] = _DESCRIBED[_points_key(points)] = given
            continue
        key = fingerprint(points)
        found = _MEMO.get(key) or _read_cached(folder, key)
        if found is not None:
            _MEMO[key] = out[dist] = _DESCRIBED[_points_key(points)] = found
        else:
            missing[dist] = (key, points)
    if missing:
        fresh = _probe_all({d: p for d, (_, p) in missing.items()})
        for dist, (key, points) in missing.items():
            out[dist] = _MEMO[key] = _DESCRIBED[_points_key(points)] = fresh[dist]
            if not fresh[dist].get("timed_out"):
                _write_cached(folder, key, fresh[dist])
    return out


# Descriptions by their distribution's entry points: those this process used (what it hands over),
# and those handed over to it by the process that started it (used as they are, without a probe).
_DESCRIBED: dict[str, dict[str, Any]] = {}
_GIVEN: dict[str, dict[str, Any]] = {}


def _points_key(points: Sequence[EntryPoint]) -> str:
    return json.dumps([[p.name, p.value, p.distribution, p.version] for p in points])


def handed_over() -> dict[str, dict[str, Any]]:
    """The descriptions this process used, as JSON-able data, for a process it starts on another
    machine or with another ``sys.path`` (a Ray actor's child, :mod:`xaibench.runner.isolation.ray_child`):
    :func:`adopt` there uses them instead of probing every distribution again."""
    return dict(_DESCRIBED)


def adopt(descriptions: Mapping[str, Any]) -> None:
    """Use ``descriptions`` (from :func:`handed_over` of the process that started this one: a
    trusted source) for the distributions whose entry points they name."""
    for key, description in descriptions.items():
        if isinstance(key, str) and isinstance(description, dict):
            _GIVEN[key] = description


def _read_cached(folder: Path, key: str) -> dict[str, Any] | None:
    try:
        blob = json.loads((folder / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(blob, dict) or not isinstance(blob.get("description"), dict):
        return None
    body = json.dumps(blob["description"], sort_keys=True).encode()
    if not integrity.verify(integrity.secret(folder.parent), blob.get("tag"), body):
        return None
    return blob["description"]


def _write_cached(folder: Path, key: str, description: dict[str, Any]) -> None:
    try:
        secret = integrity.secret(folder.parent, create=True)
        assert secret is not None
        body = json.dumps(description, sort_keys=True).encode()
        folder.mkdir(parents=True, exist_ok=True)
        blob = {"description": description, "tag": integrity.sign(secret, body)}
        files.write_json_atomic(folder / f"{key}.json", blob)
    except OSError:
        pass  # a read-only cache: the description is made again next time


def probe_timeout() -> float:
    raw = os.environ.get(TIMEOUT_VARIABLE, "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_TIMEOUT
    except ValueError:
        raise XaibenchError(f"{TIMEOUT_VARIABLE}={raw!r} is not a number of seconds") from None
    if not (value > 0 and value < float("inf")):
        raise XaibenchError(f"{TIMEOUT_VARIABLE}={raw!r} must be a positive number of seconds")
    return value


@dataclass
class _Probe:
    distribution: str
    process: subprocess.Popen[bytes]
    reader: int
    data: bytearray
    scratch: str
    open: bool = True


def _probe_all(by_distribution: Mapping[str, Sequence[EntryPoint]]) -> dict[str, dict[str, Any]]:
    """Run one probe per distribution, all at once, and collect their descriptions."""
    timeout = probe_timeout()
    env = dict(os.environ)
    env[PATH_VARIABLE] = json.dumps(sys.path)
    # numpy's BLAS would start threads at import, and the sandbox needs a single thread
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    probes: list[_Probe] = []
    selector = selectors.DefaultSelector()
    try:
        for dist, points in by_distribution.items():
            reader, writer = os.pipe()
            command = [sys.executable, "-m", "xaibench.plugins.probe", str(writer), dist, *[p.name for p in points]]
            scratch = tempfile.mkdtemp(prefix="xaibench-probe-")
            try:
                process = _start(command, writer, {**env, SCRATCH_VARIABLE: scratch})
                probes.append(_Probe(dist, process, reader, bytearray(), scratch))
            except BaseException:
                os.close(reader)
                files.remove_tree(scratch)
                raise
            finally:
                os.close(writer)
            selector.register(reader, selectors.EVENT_READ, probes[-1])
        deadline = time.monotonic() + timeout
        while any(p.open for p in probes) and time.monotonic() < deadline:
            for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                probe = key.data
                chunk = os.read(probe.reader, 1 << 16)
                if chunk and len(probe.data) + len(chunk) <= MAX_DESCRIPTION_BYTES:
                    probe.data += chunk
                    continue
                probe.open = False
                selector.unregister(probe.reader)
        return {p.distribution: _finish(p, by_distribution[p.distribution], timeout) for p in probes}
    finally:
        selector.close()
        for probe in probes:
            _kill(probe.process)
            os.close(probe.reader)
            files.remove_tree(probe.scratch)


def _start(command: list[str], writer: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(writer,),
        env=env,
        start_new_session=True,
    )


def _kill(process: subprocess.Popen[bytes]) -> None:
    """End a probe: ``SIGTERM`` first (the probe, a subreaper that runs no plugin code, kills
    and reaps every process below it, daemons that left its process group included, and exits),
    then ``SIGKILL`` to its process group when it has not ended within :data:`TERM_SECONDS`."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=TERM_SECONDS)
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


def _finish(probe: _Probe, points: Sequence[EntryPoint], timeout: float) -> dict[str, Any]:
    base = {"format": FORMAT, "distribution": probe.distribution, "version": points[0].version}
    if probe.open:
        _kill(probe.process)
        return {**base, "timed_out": True, "failure": f"import did not finish in {timeout:g} s"}
    try:
        description = json.loads(bytes(probe.data).decode())
        if not isinstance(description, dict) or description.get("format") != FORMAT:
            raise ValueError("not a description")
    except (ValueError, UnicodeDecodeError):
        code = probe.process.wait()
        why = f"status {code}" if code >= 0 else f"signal {_signal_name(-code)}"
        said = "nothing" if not probe.data else "no description"
        return {**base, "failure": f"import ended its process ({why}) with {said} said"}
    return {**description, **base}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def failure_lines(description: Mapping[str, Any], points: Iterable[EntryPoint]) -> list[str]:
    """The one-line reports of a description whose probe failed, one per entry point."""
    failure = description.get("failure")
    if not failure:
        return []
    return [f"plugin {p.distribution} (entry point {p.name}): {failure}; skipped" for p in points]
