"""Models and encoders of third-party distributions, reached through a worker process (runner side).

A model or an encoder whose registered class is a stand-in for a distribution
(:func:`~xaibench.plugins.manager.remote_distribution` is not ``None``) carries its plugin's class
data and none of its code. The runner still needs what it computes: a model's identity and
preprocessing, and its forward passes (the faithfulness metrics' perturbed images, the explained
classes); an encoder's embeddings (the PASTA score). :func:`install` puts two builders into
:data:`xaibench.plugins.manager.remote_builders`, so that ``registry.create("model", NAME)`` in the
runner returns a :class:`RemoteModel` (and ``"encoder"`` a :class:`RemoteEncoder`): a proxy whose
work runs in a :class:`ComponentWorker`, a child process (``python -m
xaibench.runner.isolation.component_child``) that enters the worker sandbox before it imports anything but
the standard library, imports the distribution for real, builds the component with its parameters
and answers requests as :mod:`xaibench.runner.isolation.wire` data (no pickle):

- ``start``: the component's attributes (a model's identity, input size, normalisation, label
  names, target layers, the paths of the modules that own parameters; an encoder's identity,
  modalities and ``unavailable()``);
- ``forward`` (a float32 batch, and whether it is channels-last), ``preprocess`` (images),
  ``to`` (a device), ``encode_images``, ``encode_texts``: arrays back, their dtype and shape
  checked before they are used.

Explainer and metric workers do not use the proxy: they build the real model from its
:class:`~xaibench.runner.executors.ModelSpec` and check its identity against the one this worker
reported. The proxy has no parameters and no gradients; a deep copy of it is itself (nothing of
the model lives in this process to copy or to change).

**Failures are one line.** A worker that cannot build the component, exits, overruns its
deadline (the run's ``--timeout`` when it is longer than :data:`START_SECONDS`, else that) or
replies garbage raises :class:`~xaibench.errors.XaibenchError` naming the component and its
distribution (``model 'tiny' of distribution xb-model: model worker exited with status 0``): a
track whose model fails to load fails with that line and the run goes on; a forward pass that fails
during a metric is that metric's n/a reason. The worker is killed (its process group) and its
scratch folder removed when it fails, when the proxy is collected, and when this process exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from xaibench.api import Encoder, Model
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.plugins.manager import remote_distribution
from xaibench.runner.isolation import wire
from xaibench.runner.isolation.frames import WorkerFailed, read_frame, write_frame
from xaibench.runner.isolation.processes import exit_reason, new_scratch, remove_scratch, start_child

CHILD_MODULE = "xaibench.runner.isolation.component_child"
START_SECONDS = 120.0  # at least this long to start: the child imports torch and the plugin first
REQUEST_SECONDS = 1800.0  # one request (a batch forward, a chunk of embeddings)
EXIT_WAIT_SECONDS = 5.0
CHUNK = 64  # images per preprocess or embedding request
MAX_NAMES = 100_000  # label names and parameter paths a model may report
_settings: dict[str, float | None] = {"timeout": None}


def install(*, timeout: float | None = None) -> None:
    """Reach plugin models and encoders through their workers in this process (see the module
    doc); ``timeout`` (the run's ``--timeout``, seconds) lengthens the start deadline."""
    _settings["timeout"] = timeout
    manager.remote_builders["model"] = remote_model
    manager.remote_builders["encoder"] = remote_encoder


class _Failed(Exception):
    """The child's own one-line reason (internal)."""


class ComponentWorker:
    """One worker process holding one built component of ``kind`` (``model`` or ``encoder``)."""

    def __init__(self, kind: str, name: str, distribution: str, params: dict[str, Any]) -> None:
        self.kind, self.name, self.distribution, self.params = kind, name, distribution, dict(params)
        self.where = f"{kind} {name!r} of distribution {distribution}"
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None
        self.output: Any = None
        self.dead: str | None = None  # why it is gone, once it is
        self.lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None

    def start(self) -> dict[str, Any]:
        """Start the child, build the component there and return its attributes."""
        timeout = _settings["timeout"]
        seconds = max(float(timeout), START_SECONDS) if timeout else START_SECONDS
        message = {
            "op": "start",
            "kind": self.kind,
            "name": self.name,
            "distribution": self.distribution,
            "path": list(sys.path),
            "params": self.params,
            "threads": torch.get_num_threads(),
        }
        try:
            encoded = wire.encode(message)
        except Exception as exc:  # noqa: BLE001 - parameters the format cannot hold
            raise XaibenchError(f"{self.where}: its parameters cannot be sent to its worker: {exc}"[:400]) from None
        try:
            self.scratch = new_scratch(f"{self.kind}-worker")
            child = start_child(CHILD_MODULE, self.scratch, prefix=f"[{self.kind} worker] ", single_blas_thread=True)
        except OSError as exc:
            remove_scratch(self.scratch)
            raise XaibenchError(f"{self.where}: {self.kind} worker could not be run: {exc}"[:400]) from None
        self.process, self.output = child.process, child.output
        self.to_child, self.from_child = child.to_child, child.from_child
        # killed when the proxy is collected, or at this process's exit (finalize's atexit)
        self._finalizer = weakref.finalize(self, _kill, self.process, self.output, self.scratch)
        return self._exchange(encoded, seconds, "ready")

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the reply (``XaibenchError`` in one line otherwise)."""
        if self.dead is not None:
            raise XaibenchError(f"{self.where}: {self.dead}")
        return self._exchange(wire.encode(message), REQUEST_SECONDS, "done")

    def _exchange(self, data: bytes, seconds: float, expected: str) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        with self.lock:
            try:
                write_frame(self.to_child, data, deadline)
                reply = read_frame(self.from_child, deadline)
                if not isinstance(reply, dict):
                    raise wire.WireError("not a reply")
                if reply.get("op") == "failed":
                    raise _Failed(str(reply.get("reason"))[:300])
                if reply.get("op") != expected:
                    raise wire.WireError(f"a reply of kind {str(reply.get('op'))[:40]!r}")
                return reply
            except _Failed as exc:
                if expected == "ready":  # it could not build the component: nothing left to ask
                    self._end(str(exc))
                raise XaibenchError(f"{self.where}: {exc}") from None
            except TimeoutError:
                self._end(f"{self.kind} worker timed out after {seconds:g} s")
            except WorkerFailed:
                self._end(self._ended())
            except (wire.WireError, KeyError, TypeError, ValueError) as exc:
                self._end(f"{self.kind} worker replied garbage: {exc}"[:300])
            except OSError as exc:
                self._end(f"{self.kind} worker could not be reached: {exc}"[:300])
        raise XaibenchError(f"{self.where}: {self.dead}")

    def _ended(self) -> str:
        assert self.process is not None
        try:
            code = self.process.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            return f"{self.kind} worker closed its pipe"
        return f"{self.kind} {exit_reason(code)}"

    def _end(self, reason: str) -> None:
        self.dead = reason
        self.close()

    def close(self) -> None:
        """Kill the child's process group and remove its scratch folder (safe to call twice)."""
        if self.dead is None:
            self.dead = f"{self.kind} worker was closed"
        if self._finalizer is not None:
            self._finalizer()


def _kill(process: subprocess.Popen[bytes], output: Any, scratch: str | None) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.wait(EXIT_WAIT_SECONDS)
    for pipe in (process.stdin, process.stdout):
        with contextlib.suppress(Exception):
            if pipe is not None:
                pipe.close()
    if output is not None:
        output.join(1.0)
    remove_scratch(scratch)


# ----------------------------------------------------------------------------------- checking


def _array(worker: ComponentWorker, reply: dict[str, Any], key: str, ndim: int, rows: int | None = None) -> np.ndarray:
    """``reply[key]`` as a float32 array of ``ndim`` dimensions (``rows`` first); otherwise
    :class:`XaibenchError` naming the worker's component."""
    value = reply.get(key)
    if not (isinstance(value, np.ndarray) and value.ndim == ndim and value.dtype.kind in "fiu"):
        raise XaibenchError(f"{worker.where}: its worker sent {key} that is not a {ndim}-d array of numbers")
    if rows is not None and value.shape[0] != rows:
        raise XaibenchError(f"{worker.where}: its worker sent {key} with {value.shape[0]} rows for {rows} inputs")
    return value.astype(np.float32, copy=False)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not (isinstance(value, list) and len(value) <= MAX_NAMES and all(isinstance(v, str) for v in value)):
        raise wire.WireError(f"{what} must be a list of strings")
    return tuple(value)


def _triple(value: Any, what: str) -> tuple[float, float, float]:
    if not (isinstance(value, list) and len(value) == 3 and all(type(v) in (int, float) for v in value)):
        raise wire.WireError(f"{what} must be three numbers")
    return (float(value[0]), float(value[1]), float(value[2]))


# ----------------------------------------------------------------------------------- models


class RemoteModule:
    """The forward pass of a model that lives in a :class:`ComponentWorker`: called with a
    ``(B, 3, S, S)`` tensor, it returns the ``(B, classes)`` logits (float32) on the tensor's
    device. It has no parameters or hooks here; ``remote_parameter_paths`` are the paths of the
    real module's parameter-owning modules (:func:`xaibench.randomisation.parameter_paths`)."""

    def __init__(self, worker: ComponentWorker, parameter_paths: Sequence[str]) -> None:
        self.worker = worker
        self.remote_parameter_paths = tuple(parameter_paths)
        self.device = torch.device("cpu")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x)
        channels_last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
        batch = x.detach().to("cpu", torch.float32).contiguous().numpy()
        reply = self.worker.ask({"op": "forward", "x": batch, "channels_last": channels_last})
        logits = _array(self.worker, reply, "y", 2, rows=int(x.shape[0]))
        return torch.from_numpy(np.array(logits, copy=True)).to(x.device)

    def to(self, device: torch.device | str) -> RemoteModule:
        """Move the real module to ``device`` in its worker (where its forward passes run)."""
        self.worker.ask({"op": "to", "device": str(device)})
        self.device = torch.device(device)
        return self

    def eval(self) -> RemoteModule:
        return self  # the worker's module is in eval mode and stays so

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteModule:
        return self  # nothing of the model is here to copy; the worker's copy cannot be changed from here


class RemoteModel(Model):
    """A plugin's model, built in its worker: its attributes as data, its forward passes and its
    preprocessing requests to that worker (see the module doc)."""

    def __init__(self, stand_in: Model, worker: ComponentWorker, attributes: dict[str, Any]) -> None:
        cls = type(stand_in)
        self.name = cls.name  # type: ignore[misc]
        self.version = cls.version  # type: ignore[misc]
        self.synthetic = bool(attributes["synthetic"])  # type: ignore[misc]
        self.remote_distribution = worker.distribution
        self.params = dict(worker.params)
        identity = attributes["identity"]
        size = attributes["input_size"]
        if not (isinstance(identity, str) and identity):
            raise wire.WireError("identity must be a non-empty string")
        if not (type(size) is int and 0 < size <= 8192):
            raise wire.WireError("input_size must be a positive int")
        weights = attributes.get("weights_source")
        self._identity = identity
        self.input_size = size
        self.mean = _triple(attributes["mean"], "mean")
        self.std = _triple(attributes["std"], "std")
        self.label_names = _strings(attributes["label_names"], "label_names")
        self.target_layers = _strings(attributes["target_layers"], "target_layers")
        self.weights_source = weights if isinstance(weights, str) else None
        self.worker = worker
        self.module = RemoteModule(worker, _strings(attributes["parameter_paths"], "parameter_paths"))

    @property
    def identity(self) -> str:
        return self._identity

    def preprocess(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        """The plugin's own preprocessing, run in the worker, ``CHUNK`` images a request."""
        parts = []
        for start in range(0, len(images), CHUNK):
            chunk = [np.asarray(image) for image in images[start : start + CHUNK]]
            reply = self.worker.ask({"op": "preprocess", "images": chunk})
            parts.append(_array(self.worker, reply, "x", 4, rows=len(chunk)))
        if not parts:
            return torch.empty((0, 3, self.input_size, self.input_size))
        return torch.from_numpy(np.concatenate(parts))

    def close(self) -> None:
        """Stop the worker (it also stops when this proxy is collected, or the process exits)."""
        self.worker.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteModel:
        return self


def remote_model(stand_in: Model) -> RemoteModel:
    """The proxy of a stand-in model (its class data and parameters): built in a new worker."""
    cls = type(stand_in)
    distribution = remote_distribution(cls)
    assert distribution is not None
    worker = ComponentWorker("model", cls.name, distribution, dict(getattr(stand_in, "params", {})))
    reply = worker.start()
    try:
        return RemoteModel(stand_in, worker, reply["attributes"])
    except (wire.WireError, KeyError, TypeError) as exc:
        worker.close()
        raise XaibenchError(f"{worker.where}: model worker replied garbage: {exc}"[:400]) from None


# ----------------------------------------------------------------------------------- encoders


class RemoteEncoder(Encoder):
    """A plugin's encoder, built in its worker on first use (construction stays cheap): its
    identity and ``unavailable()`` as data, its embeddings requests to that worker."""

    def __init__(self, stand_in: Encoder) -> None:
        cls = type(stand_in)
        self.name = cls.name  # type: ignore[misc]
        self.version = cls.version  # type: ignore[misc]
        self.modalities = tuple(cls.modalities)  # type: ignore[misc]
        self.params = dict(stand_in.params)
        distribution = remote_distribution(cls)
        assert distribution is not None
        self.remote_distribution = distribution
        self.worker = ComponentWorker("encoder", cls.name, distribution, self.params)
        self._attributes: dict[str, Any] | None = None
        self._failure: str | None = None

    def _started(self) -> dict[str, Any]:
        if self._attributes is None:
            if self._failure is not None:
                raise XaibenchError(self._failure)
            try:
                attributes = self.worker.start()["attributes"]
                if not (isinstance(attributes.get("identity"), str) and attributes["identity"]):
                    raise wire.WireError("identity must be a non-empty string")
                if not (attributes.get("unavailable") is None or isinstance(attributes["unavailable"], str)):
                    raise wire.WireError("unavailable must be a string or null")
            except (wire.WireError, KeyError, TypeError, AttributeError) as exc:
                self.worker.close()
                self._failure = f"{self.worker.where}: encoder worker replied garbage: {exc}"[:400]
                raise XaibenchError(self._failure) from None
            except XaibenchError as exc:
                self._failure = str(exc)
                raise
            self._attributes = attributes
        return self._attributes

    @property
    def identity(self) -> str:
        return str(self._started()["identity"])

    def unavailable(self) -> str | None:
        try:
            reason = self._started()["unavailable"]
        except XaibenchError as exc:
            return str(exc)
        return None if reason is None else str(reason)

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        self._started()
        parts = []
        for start in range(0, len(images), CHUNK):
            reply = self.worker.ask({"op": "encode_images", "images": np.asarray(images[start : start + CHUNK])})
            parts.append(_array(self.worker, reply, "y", 2))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        self._started()
        texts = [str(t) for t in texts]
        parts = []
        for start in range(0, len(texts), CHUNK):
            reply = self.worker.ask({"op": "encode_texts", "texts": texts[start : start + CHUNK]})
            parts.append(_array(self.worker, reply, "y", 2))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def close(self) -> None:
        self.worker.close()


def remote_encoder(stand_in: Encoder) -> RemoteEncoder:
    """The proxy of a stand-in encoder; its worker starts on first use."""
    return RemoteEncoder(stand_in)
