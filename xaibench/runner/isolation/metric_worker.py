"""Metrics of third-party distributions, scored in a worker process of their own (runner side).

A metric whose registered class is a stand-in for a distribution
(:func:`~xaibench.plugins.manager.remote_distribution` is not ``None``) carries its plugin's class
data and none of its code, so the runner cannot, and must not, call its ``score``. It is scored by
:class:`MetricWorkers` instead: one child process per distribution
(``python -m xaibench.runner.isolation.metric_child``, see that module), started on first use, reused for
every batch of the run and stopped at its end. The child enters the worker sandbox before it
imports anything but the standard library, builds its own registry, imports the distribution for
real (:meth:`~xaibench.plugins.manager.Registry.materialise`) and rebuilds the track's model from
its :class:`~xaibench.runner.executors.ModelSpec`. So a metric cannot change the model, the
classes or the functions the runner and the other metrics use.

**Messages are data.** Both ways a message is a length-prefixed frame (8 bytes, little-endian)
holding bytes of :mod:`xaibench.runner.isolation.wire` (JSON header and raw arrays, no pickle); the runner
reads at most :data:`~xaibench.runner.isolation.wire.MAX_REPLY_BYTES` per frame and checks every reply's
shape before it builds a :class:`~xaibench.api.MetricOutput` from it. A request carries the batch
as the metric sees it (maps or concept dicts, the samples with their ground truth, the explained
classes, the model inputs, the seed) and the model spec; the reply carries the values, n/a
reasons, curves, extras and the forward passes (images) the metric used.

**The explainer stays where it runs.** A metric that re-runs the explainer (``batch.explainer``)
gets a stand-in whose ``explain`` sends the inputs, classes, seed, sample ids and model identity
(with its :class:`~xaibench.randomisation.Randomisation` or :class:`~xaibench.randomisation.Shift`,
if any; a malformed one is the call's failure, one line) back to the runner, which calls
the run's explainer (an :class:`~xaibench.runner.executors.ExplainerHandle`: a worker of the
executor, through the explanation cache) and answers with the maps. Time spent there is not
counted against the metric's limit.

**Failures are n/a.** A child that exits, overruns its limit (the run's ``--timeout`` per batch,
:data:`DEFAULT_TIMEOUT` without one; its start gets at least :data:`START_SECONDS`), replies
something that is not a valid reply, or cannot be started gives n/a for that batch with one line
(``metric worker exited with status 0``); it is killed (its whole process group) and a fresh one
is started for the next batch. A metric whose distribution could not be imported in the child
gives n/a with the import's error for the rest of the run. What a child writes to its stdout or
stderr reaches the terminal only as escaped ``[metric worker]`` lines.

**What a metric returns is checked** (:func:`checked_output`, in the child and again here): a value
beyond ±:data:`MAX_VALUE` (infinity included), a ``forward_passes`` that is not a whole number
from 0 to :data:`MAX_FORWARD_PASSES`, or values that are not one number per sample make the
metric's whole batch n/a with one line saying what it returned; the run goes on. NaN stays the
n/a of its sample; reasons become one line of at most 300 characters; a curve holding a number
beyond ±:data:`MAX_VALUE` is dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Metric, MetricInput, MetricOutput
from xaibench.plugins.manager import one_line, remote_distribution
from xaibench.randomisation import Randomisation, Shift, randomised_model, shift_absorbed
from xaibench.runner.executors import ExplainerHandle
from xaibench.runner.explain import track_model_spec
from xaibench.runner.isolation import wire
from xaibench.runner.isolation.frames import WorkerFailed, read_frame, sample_data, write_frame
from xaibench.runner.isolation.processes import exit_reason, new_scratch, remove_scratch, start_child
from xaibench.runner.track import TrackContext

CHILD_MODULE = "xaibench.runner.isolation.metric_child"
DEFAULT_TIMEOUT = 1800.0  # seconds a batch may take when the run sets no --timeout
START_SECONDS = 120.0  # at least this long for a child to import, build its registry and start
EXIT_WAIT_SECONDS = 5.0  # for the exit status of a child that closed its pipe
OUTPUT_PREFIX = "[metric worker] "  # what starts each line a child writes, on the runner's stderr
MAX_VALUE = 1e100  # a metric value beyond this magnitude is refused (its batch n/a): no score is that large
MAX_FORWARD_PASSES = 10**12  # forward passes (images) one metric may report for one batch


def _model_spec_data(track: TrackContext) -> dict[str, Any] | None:
    spec = track_model_spec(track)
    if spec is None:
        return None
    return {"name": spec.name, "params": dict(spec.params), "identity": spec.identity, "device": spec.device}


def _explainer_data(explainer: Any) -> dict[str, Any] | None:
    if explainer is None:
        return None
    return {
        "name": str(getattr(explainer, "name", "")),
        "version": str(getattr(explainer, "version", "")),
        "kind": str(getattr(explainer, "kind", "saliency")),
        "params": dict(getattr(explainer, "params", {}) or {}),
    }


def request(metric: Metric, batch: MetricInput, kind: str, track: TrackContext) -> dict[str, Any]:
    """The ``score`` request of ``metric`` on ``batch`` (see the module doc)."""
    inputs = batch.inputs
    if isinstance(inputs, torch.Tensor):
        inputs = inputs.detach().to("cpu", torch.float32).numpy()
    forward = track.forward
    return {
        "op": "score",
        "metric": metric.name,
        "params": dict(metric.params),
        "kind": kind,
        "model": _model_spec_data(track),
        "forward_batch": forward.batch_size if forward is not None else 64,
        "saliency": None if batch.saliency is None else np.asarray(batch.saliency),
        "concepts": None if batch.concepts is None else [dict(c) for c in batch.concepts],
        "samples": [sample_data(s) for s in batch.samples],
        "targets": np.asarray(batch.targets, dtype=np.int64),
        "inputs": None if inputs is None else np.ascontiguousarray(inputs, dtype=np.float32),
        "seed": int(batch.seed),
        "explainer": _explainer_data(batch.explainer),
    }


def check_reply(reply: Any, n: int) -> MetricOutput:
    """The :class:`~xaibench.api.MetricOutput` of a child's ``done`` reply for ``n`` samples;
    :class:`~xaibench.runner.isolation.wire.WireError` for one that is not a valid reply."""
    if not (isinstance(reply, dict) and reply.get("op") == "done"):
        raise wire.WireError("not a reply to a score request")
    values = reply.get("values")
    if not (isinstance(values, np.ndarray) and values.shape == (n,) and values.dtype.kind in "fiub"):
        raise wire.WireError(f"values must be {n} numbers")
    reasons = reply.get("reasons")
    if not (isinstance(reasons, list) and all(r is None or isinstance(r, str) for r in reasons)):
        raise wire.WireError("reasons must be a list of strings or nulls")
    per_sample: dict[str, list[Any] | None] = {}
    for name in ("curves", "extras"):
        items = reply.get(name)
        if items is not None and not (
            isinstance(items, list) and len(items) == n and all(i is None or isinstance(i, dict) for i in items)
        ):
            raise wire.WireError(f"{name} must be {n} dicts or nulls")
        per_sample[name] = items
    passes = reply.get("forward_passes")
    if type(passes) is not int or passes < 0:
        raise wire.WireError("forward_passes must be a count")
    output = MetricOutput(
        values=values.astype(np.float64),
        reasons=[r[:300] if r else r for r in reasons[:n]] + [None] * max(0, n - len(reasons)),
        curves=per_sample["curves"],
        forward_passes=passes,
        extras=per_sample["extras"],
    )
    return checked_output(output, n)


# -------------------------------------------------------------------------------- what metrics return


class _Refused(Exception):
    """The metric's output on a batch is refused, for this reason (one line)."""


def checked_output(output: Any, n: int) -> MetricOutput:
    """``output`` (what a metric's ``score`` returned for a batch of ``n`` samples) checked, as a
    :class:`~xaibench.api.MetricOutput` the runner can record; n/a for the whole batch, with one
    line saying what the metric returned, when it is not one (see the module doc). Checking an
    output twice changes nothing."""
    try:
        return _checked(output, n)
    except _Refused as exc:
        return MetricOutput.not_applicable(n, str(exc))


def _checked(output: Any, n: int) -> MetricOutput:
    if not isinstance(output, MetricOutput):
        raise _Refused(f"metric returned {_kind(output)}, not a MetricOutput")
    try:
        given = output.values
        if hasattr(given, "detach"):  # a tensor, maybe on a device
            given = given.detach().cpu()
        values = np.array(given, dtype=np.float64)
    except Exception:  # noqa: BLE001 - whatever the metric put there
        raise _Refused(f"metric returned values that are not numbers ({_kind(output.values)})") from None
    if values.shape != (n,):
        raise _Refused(f"metric returned {values.size} values for {n} samples")
    absurd = np.flatnonzero(np.abs(np.nan_to_num(values, nan=0.0)) > MAX_VALUE)
    if absurd.size:
        raise _Refused(f"metric returned the value {values[absurd[0]]:.3g}, beyond ±{MAX_VALUE:.0e}; the batch is n/a")
    passes = _count(output.forward_passes)
    return MetricOutput(
        values=values,
        reasons=_reasons(output.reasons, n),
        curves=_curves(output.curves, n),
        forward_passes=passes,
        extras=_per_sample(output.extras, n),
    )


def _count(given: Any) -> int:
    """``forward_passes`` as an ``int`` from 0 to :data:`MAX_FORWARD_PASSES` (``None``: 0)."""
    value: int | None = None
    try:
        whole = isinstance(given, numbers.Integral) and not isinstance(given, (bool, np.bool_))
        integral = isinstance(given, (float, np.floating)) and math.isfinite(given) and float(given).is_integer()
        if given is None:
            value = 0
        elif whole or integral:
            value = int(given)
    except Exception:  # noqa: BLE001 - a hostile number type
        value = None
    if value is None or not 0 <= value <= MAX_FORWARD_PASSES:
        raise _Refused(
            f"metric returned forward_passes = {_shown(given)}; a count is a whole number from 0 to "
            f"{MAX_FORWARD_PASSES:.0e}"
        )
    return value


def _reasons(given: Any, n: int) -> list[str | None]:
    """One reason or ``None`` per sample, each one line of at most 300 characters."""
    try:
        items = [] if given is None or isinstance(given, (str, bytes)) else list(given)[:n]
        reasons = [None if r is None else one_line(str(r), 300) for r in items]
    except Exception:  # noqa: BLE001 - a reason whose __str__ raises
        raise _Refused("metric returned reasons that are not text") from None
    return reasons + [None] * (n - len(reasons))


def _curves(given: Any, n: int) -> list[dict[str, Any] | None] | None:
    """The per-sample curves, one that holds a number beyond ±:data:`MAX_VALUE` dropped."""
    items = _per_sample(given, n)
    return None if items is None else [c if isinstance(c, dict) and _sane_curve(c) else None for c in items]


def _per_sample(given: Any, n: int) -> list[Any] | None:
    """``given`` as a list when it is a list or tuple of ``n`` items, else ``None``."""
    return list(given) if isinstance(given, (list, tuple)) and len(given) == n else None


def _sane_curve(curve: dict[str, Any]) -> bool:
    for series in curve.values():
        if isinstance(series, (list, tuple, np.ndarray)):
            try:
                array = np.asarray(series, dtype=np.float64)
            except Exception:  # noqa: BLE001 - not numbers: not a curve the runner reads
                continue
            if np.any(np.abs(np.nan_to_num(array, nan=0.0)) > MAX_VALUE):
                return False
    return True


def _kind(value: Any) -> str:
    return one_line(type(value).__name__, 80)


def _shown(value: Any) -> str:
    """``value`` short: at most 40 characters of its ``repr`` (whatever its ``__repr__`` does)."""
    try:
        big = isinstance(value, int) and abs(value) >= 10**30
        text = f"about 10^{int(abs(value).bit_length() * math.log10(2))}" if big else repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return one_line(text, 40)


@dataclasses.dataclass(frozen=True)
class _ModelRef:
    """The model a metric's explainer call names: its identity, and its randomisation or shift if
    any (all an executor's handle reads of it: its worker rebuilds the model)."""

    identity: str
    randomisation: Randomisation | None = None
    shift: Shift | None = None


def decode_shift(given: Any) -> Shift:
    """A child's ``shift`` request, ``[base, shift]``, as a :class:`Shift`; ``ValueError`` with one
    line when it is not a string and a finite number."""
    if not isinstance(given, (list, tuple)) or len(given) != 2:
        raise ValueError("shift must be [base, shift]")
    base, shift = given
    if not isinstance(base, str) or type(shift) not in (int, float) or not math.isfinite(shift):
        raise ValueError("shift must be [base, shift], a model identity and a finite number")
    return Shift(base, float(shift))


def answer_explain(message: Mapping[str, Any], explainer: Any, track: TrackContext) -> dict[str, Any]:
    """Run ``explainer`` (the run's: an executor's handle, maybe through the cache) as a child's
    ``explain`` message asks, on the track's model or a randomised copy of it; the maps, or
    ``{"error": reason}``."""
    try:
        if explainer is None or track.model is None or track.inputs is None:
            raise RuntimeError("no explainer is available to this metric")
        given = message.get("randomisation")
        shifted = message.get("shift")
        model: Any = track.model
        if given is not None and shifted is not None:
            raise ValueError("explainer asked for a model both randomised and shifted")
        if shifted is not None:
            s = decode_shift(shifted)
            if s.base != track.model.identity:
                raise RuntimeError(f"explainer asked for a copy of unknown model {s.base[:80]!r}")
            inner = getattr(explainer, "explainer", explainer)  # a cached handle's handle
            if isinstance(inner, ExplainerHandle):  # its worker builds the copy: only the description here
                model = _ModelRef(s.identity, shift=s)
            else:
                model = shift_absorbed(track.model, s.shift)
        elif given is not None:
            r = Randomisation(str(given[0]), int(given[1]), int(given[2]), int(given[3]))
            if r.base != track.model.identity:
                raise RuntimeError(f"explainer asked for a copy of unknown model {r.base[:80]!r}")
            model = randomised_model(track.model, upto=r.upto, blocks=r.blocks, seed=r.seed)
        elif message.get("model") != track.model.identity:
            raise RuntimeError("explainer asked for an unknown model")
        inputs = np.asarray(message["inputs"], dtype=np.float32)
        targets = torch.as_tensor(np.asarray(message["targets"], dtype=np.int64))
        context = None
        if message.get("samples") is not None:
            index = track.sample_index()
            ids = [str(i) for i in message["samples"]]
            if any(i not in index for i in ids):
                raise RuntimeError("explainer asked for samples that are not the track's")
            context = ExplainContext(samples=[track.samples[index[i]] for i in ids])
        out = explainer.explain(
            model, torch.from_numpy(inputs).to(track.device), targets, seed=int(message["seed"]), context=context
        )
        if isinstance(out, torch.Tensor):
            out = out.detach().cpu().numpy()
        return {"op": "explained", "maps": out if isinstance(out, list) else np.asarray(out)}
    except Exception as exc:  # noqa: BLE001 - the metric gets the failure, the run goes on
        text = str(exc).splitlines()[0] if str(exc) else ""
        return {"op": "explained", "error": f"{type(exc).__name__}: {text}"[:300]}


# ---------------------------------------------------------------------------------------- children


class _Child:
    """One running metric worker: the process, its pipes, scratch folder and output forwarder."""

    def __init__(self, distribution: str, threads: int) -> None:
        self.scratch = new_scratch("metric-worker")
        child = start_child(CHILD_MODULE, self.scratch, prefix=OUTPUT_PREFIX)
        self.process, self.output = child.process, child.output
        self.to_child, self.from_child = child.to_child, child.from_child
        self.distribution = distribution
        self.threads = threads

    def start(self, deadline: float) -> str | None:
        """Send the start message and wait for ``ready``; the child's own reason when it could
        not import the distribution, else ``None``."""
        write_frame(
            self.to_child,
            {"op": "start", "distribution": self.distribution, "path": list(sys.path), "threads": self.threads},
            deadline,
        )
        reply = read_frame(self.from_child, deadline)
        if isinstance(reply, dict) and reply.get("op") == "ready":
            return None
        if isinstance(reply, dict) and reply.get("op") == "failed" and isinstance(reply.get("reason"), str):
            return reply["reason"][:300]
        raise wire.WireError("not a reply to the start message")

    def ended(self) -> str:
        """Why the child is gone: its exit status (waited for briefly), as one line."""
        try:
            code = self.process.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            return "metric worker closed its pipe"
        return "metric " + exit_reason(code)

    def kill(self) -> None:
        """SIGKILL the child's process group, reap it, remove its scratch folder."""
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.wait(EXIT_WAIT_SECONDS)
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(Exception):
                if pipe is not None:
                    pipe.close()
        self.output.join(1.0)
        remove_scratch(self.scratch)


def _kill_all(children: dict[str, _Child]) -> None:
    for child in list(children.values()):
        child.kill()
    children.clear()


class MetricWorkers:
    """The runner's client of the metric workers (see the module doc): one child per
    distribution, started lazily, reused across batches, tracks and explainers.

    ``timeout`` is the seconds one batch may take (``None`` or 0: :data:`DEFAULT_TIMEOUT`);
    ``threads`` the torch intra-op threads of the children (the run's ``--threads``). Close it at
    the end of the run (also done when it is garbage-collected and at interpreter exit)."""

    def __init__(self, *, timeout: float | None = None, threads: int = 1) -> None:
        self.timeout = float(timeout) if timeout else DEFAULT_TIMEOUT
        self.threads = max(1, int(threads))
        self.children: dict[str, _Child] = {}
        self.broken: dict[str, str] = {}  # distribution -> why it could not be imported in a child
        self.lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _kill_all, self.children)

    def score(self, metric: Metric, batch: MetricInput, kind: str, track: TrackContext) -> MetricOutput:
        """``metric`` (a stand-in) scored on ``batch`` in its distribution's worker; n/a for the
        whole batch, with one line, when the worker fails (see the module doc)."""
        n = len(batch.samples)
        if kind not in metric.explanation_kinds:
            return MetricOutput.not_applicable(n, f"{metric.name} does not apply to {kind} explanations")
        distribution = remote_distribution(metric)
        assert distribution is not None
        if distribution in self.broken:
            return MetricOutput.not_applicable(n, self.broken[distribution])
        with self.lock:
            try:
                return self._score(distribution, metric, batch, kind, track)
            except _NotApplicable as exc:
                return MetricOutput.not_applicable(n, str(exc))

    def _score(self, distribution: str, metric: Metric, batch: MetricInput, kind: str, track: TrackContext) -> Any:
        n = len(batch.samples)
        try:
            message = wire.encode(request(metric, batch, kind, track))
        except Exception as exc:  # noqa: BLE001 - a batch the format cannot hold
            raise _NotApplicable(f"metric input cannot be sent to its worker: {exc}"[:300]) from None
        child = self.children.get(distribution)
        try:
            if child is None:
                child = self.children[distribution] = _Child(distribution, self.threads)
                reason = child.start(time.monotonic() + max(self.timeout, START_SECONDS))
                if reason is not None:
                    self.broken[distribution] = reason
                    self._drop(distribution)
                    raise _NotApplicable(reason)
            deadline = time.monotonic() + self.timeout
            write_frame(child.to_child, message, deadline)
            while True:
                reply = read_frame(child.from_child, deadline)
                if isinstance(reply, dict) and reply.get("op") == "explain":
                    paused = time.monotonic()
                    answer = answer_explain(reply, batch.explainer, track)
                    deadline += time.monotonic() - paused  # the explainer's time is not the metric's
                    write_frame(child.to_child, answer, deadline)
                    continue
                return check_reply(reply, n)
        except _NotApplicable:
            raise
        except TimeoutError:
            self._drop(distribution)
            raise _NotApplicable(f"metric worker timed out after {self.timeout:g} s") from None
        except WorkerFailed:
            reason = child.ended() if child is not None else "metric worker could not start"
            self._drop(distribution)
            raise _NotApplicable(reason) from None
        except wire.WireError as exc:
            self._drop(distribution)
            raise _NotApplicable(f"metric worker replied garbage: {exc}"[:300]) from None
        except OSError as exc:
            self._drop(distribution)
            raise _NotApplicable(f"metric worker could not be run: {exc}"[:300]) from None

    def _drop(self, distribution: str) -> None:
        child = self.children.pop(distribution, None)
        if child is not None:
            child.kill()

    def close(self) -> None:
        """Stop every child (kill its process group); safe to call twice."""
        _kill_all(self.children)


class _NotApplicable(Exception):
    """The batch is n/a with this reason (internal)."""
