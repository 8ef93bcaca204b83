"""Datasets of third-party distributions, loaded in a worker process (runner side).

A dataset whose registered class is a stand-in for a distribution
(:func:`~xaibench.plugins.manager.remote_distribution` is not ``None``) carries its plugin's class
data and its parameters, none of its code: the runner cannot, and must not, call its ``samples``.
:func:`open_dataset` loads it instead in a one-shot child process
(``python -m xaibench.runner.isolation.dataset_child``, see that module), which enters the worker sandbox
before it imports anything but the standard library, imports the distribution for real, builds the
dataset with the track's parameters and sends its revision, whether it is synthetic, its label
names, its length and its first ``limit`` samples back as :mod:`xaibench.runner.isolation.wire` data (no
pickle). The runner rebuilds :class:`~xaibench.api.Sample` objects from that data and holds them
in a :class:`LoadedDataset`, which the track uses as it would the plugin's own dataset.

**Limits.** Every frame's length is checked before it is read (at most
:data:`~xaibench.runner.isolation.wire.MAX_REPLY_BYTES`), all of them together against
:data:`MAX_TOTAL_BYTES`, the number of samples against the limit, and every sample's fields
against their types. The whole load has a deadline: the run's ``--timeout`` (at least
:data:`START_SECONDS`), :data:`DEFAULT_TIMEOUT` without one.

**Failures are one line.** A child that exits, raises, overruns its deadline or replies garbage
gives one :class:`~xaibench.errors.XaibenchError` naming the dataset and its distribution
(``dataset 'mine' of distribution xb-data: dataset worker exited with status 0``): the track fails
to load with that line and the run goes on with the others. The child is killed (its whole
process group) and its scratch folder removed in every case. What it writes to its stdout or
stderr reaches the terminal only as escaped ``[dataset worker]`` lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xaibench.api import Dataset, Sample
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry, remote_distribution
from xaibench.runner.isolation import wire
from xaibench.runner.isolation.frames import FRAME, WorkerFailed, read_exact, sample_from_data, write_frame
from xaibench.runner.isolation.processes import OutputForwarder, exit_reason, new_scratch, remove_scratch, start_child

CHILD_MODULE = "xaibench.runner.isolation.dataset_child"
DEFAULT_TIMEOUT = 1800.0  # seconds a load may take when the run sets no --timeout
START_SECONDS = 120.0  # at least this long: the child imports torch and the plugin first
EXIT_WAIT_SECONDS = 5.0
MAX_TOTAL_BYTES = 8 << 30  # all frames of one load together
OUTPUT_PREFIX = "[dataset worker] "


class LoadedDataset(Dataset):
    """A dataset loaded in a worker: its samples, revision, label names and length as data. Its
    ``samples(limit)`` gives the samples it holds (the first ``limit`` of the plugin's)."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        distribution: str,
        revision: str,
        synthetic: bool,
        label_names: Sequence[str],
        length: int | None,
        samples: Sequence[Sample],
        params: Mapping[str, Any],
    ) -> None:
        self.name = name  # type: ignore[misc]
        self.version = version  # type: ignore[misc]
        self.remote_distribution = distribution
        self._revision = revision
        self.synthetic = synthetic  # type: ignore[misc]
        self.label_names = tuple(label_names)
        self._length = length
        self._samples = list(samples)
        self.params = dict(params)

    @property
    def revision(self) -> str:
        return self._revision

    def __len__(self) -> int:
        return self._length if self._length is not None else len(self._samples)

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        return iter(self._samples if limit is None else self._samples[:limit])


def open_dataset(
    registry: Registry,
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int | None = None,
    timeout: float | None = None,
) -> Dataset:
    """Dataset ``name`` built with ``params``: the plugin's own object for a built-in (or a class
    registered in this process), a :class:`LoadedDataset` of its first ``limit`` samples, loaded
    in a worker, for a stand-in (see the module doc)."""
    params = dict(params or {})
    dataset = registry.create("dataset", name, **params)
    distribution = remote_distribution(dataset)
    if distribution is None:
        return dataset
    return load_remote(name, distribution, params, limit=limit, timeout=timeout, version=str(dataset.version))


def load_remote(
    name: str,
    distribution: str,
    params: Mapping[str, Any],
    *,
    limit: int | None = None,
    timeout: float | None = None,
    version: str = "",
) -> LoadedDataset:
    """Load dataset ``name`` of ``distribution`` in a worker; :class:`XaibenchError` in one line."""
    where = f"dataset {name!r} of distribution {distribution}"
    seconds = max(float(timeout), START_SECONDS) if timeout else DEFAULT_TIMEOUT
    child = _Child()
    try:
        return _load(child, name, distribution, dict(params), limit, time.monotonic() + seconds, version)
    except TimeoutError:
        raise XaibenchError(f"{where}: dataset worker timed out after {seconds:g} s") from None
    except WorkerFailed:
        raise XaibenchError(f"{where}: dataset {child.ended()}") from None
    except (wire.WireError, KeyError, TypeError, ValueError) as exc:
        raise XaibenchError(f"{where}: dataset worker replied garbage: {exc}"[:400]) from None
    except _Failed as exc:
        raise XaibenchError(f"{where}: {exc}"[:400]) from None
    except OSError as exc:
        raise XaibenchError(f"{where}: dataset worker could not be run: {exc}"[:400]) from None
    finally:
        child.kill()


class _Failed(Exception):
    """The child's own one-line reason (internal)."""


def _load(
    child: _Child,
    name: str,
    distribution: str,
    params: dict[str, Any],
    limit: int | None,
    deadline: float,
    version: str,
) -> LoadedDataset:
    try:
        message = wire.encode(
            {
                "op": "load",
                "distribution": distribution,
                "path": list(sys.path),
                "name": name,
                "params": params,
                "limit": limit,
            }
        )
    except Exception as exc:  # noqa: BLE001 - parameters the format cannot hold
        raise _Failed(f"its parameters cannot be sent to its worker: {exc}") from None
    child.start()
    write_frame(child.to_child, message, deadline)
    total = 0

    def frame() -> Any:
        nonlocal total
        (size,) = FRAME.unpack(read_exact(child.from_child, FRAME.size, deadline))
        if size > min(wire.MAX_REPLY_BYTES, MAX_TOTAL_BYTES - total):
            raise wire.WireError(f"a frame of {size} bytes exceeds the limit ({total} bytes read)")
        total += size
        return wire.decode(read_exact(child.from_child, size, deadline))

    header = frame()
    if isinstance(header, dict) and header.get("op") == "failed":
        raise _Failed(str(header.get("reason"))[:300])
    if not (isinstance(header, dict) and header.get("op") == "dataset"):
        raise wire.WireError("not a dataset header")
    revision, length, labels = header["revision"], header["len"], header["label_names"]
    if not isinstance(revision, str) or not (length is None or (type(length) is int and length >= 0)):
        raise wire.WireError("revision must be a string and len a count")
    if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise wire.WireError("label_names must be strings")
    samples: list[Sample] = []
    while True:
        reply = frame()
        if not isinstance(reply, dict):
            raise wire.WireError("not a frame of samples")
        if reply.get("op") == "end":
            break
        if reply.get("op") == "failed":
            raise _Failed(str(reply.get("reason"))[:300])
        if reply.get("op") != "sample":
            raise wire.WireError("not a sample")
        if limit is not None and len(samples) >= limit:
            raise wire.WireError(f"more than the {limit} samples asked for")
        samples.append(check_sample(reply["sample"]))
    return LoadedDataset(
        name=name,
        version=version,
        distribution=distribution,
        revision=revision,
        synthetic=bool(header["synthetic"]),
        label_names=labels,
        length=length,
        samples=samples,
        params=params,
    )


def check_sample(data: Any) -> Sample:
    """The :class:`~xaibench.api.Sample` of one sample frame; :class:`~xaibench.runner.isolation.wire.WireError`
    for one whose fields are not of their types."""
    if not isinstance(data, dict):
        raise wire.WireError("a sample must be a dict")
    image = data.get("image")
    if not (isinstance(image, np.ndarray) and image.ndim in (2, 3) and image.dtype.kind in "fiub"):
        raise wire.WireError("a sample's image must be a 2-d or 3-d array of numbers")
    if not isinstance(data.get("id"), str):
        raise wire.WireError("a sample's id must be a string")
    for key in ("label", "target"):
        if not (data.get(key) is None or type(data.get(key)) is int):
            raise wire.WireError(f"a sample's {key} must be an int or null")
    if not isinstance(data.get("meta"), dict):
        raise wire.WireError("a sample's meta must be a dict")
    gt = data.get("ground_truth")
    if gt is not None:
        if not isinstance(gt, dict):
            raise wire.WireError("a sample's ground truth must be a dict")
        for key in ("mask", "levels", "regions", "contributions"):
            if not (gt.get(key) is None or isinstance(gt.get(key), np.ndarray)):
                raise wire.WireError(f"a ground truth's {key} must be an array or null")
        if not isinstance(gt.get("notes"), list | tuple):
            raise wire.WireError("a ground truth's notes must be a list")
    return sample_from_data(data)


class _Child:
    """One dataset worker: the process, its pipes, scratch folder and output forwarder."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None
        self.output: OutputForwarder | None = None

    def start(self) -> None:
        self.scratch = new_scratch("dataset-worker")
        child = start_child(CHILD_MODULE, self.scratch, prefix=OUTPUT_PREFIX, single_blas_thread=True)
        self.process, self.output = child.process, child.output
        self.to_child, self.from_child = child.to_child, child.from_child

    def ended(self) -> str:
        """Why the child is gone: its exit status (waited for briefly), as one line."""
        if self.process is None:
            return "worker could not start"
        try:
            code = self.process.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            return "worker closed its pipe"
        return exit_reason(code)

    def kill(self) -> None:
        """SIGKILL the child's process group, reap it, remove its scratch folder."""
        if self.process is not None:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.process.wait(EXIT_WAIT_SECONDS)
            for pipe in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(Exception):
                    if pipe is not None:
                        pipe.close()
        if self.output is not None:
            self.output.join(1.0)
        remove_scratch(self.scratch)
