"""The framing of the sandboxed workers' pipes (metric and dataset workers), and samples as data.

A message is a length-prefixed frame (8 bytes, little-endian) holding bytes of
:mod:`xaibench.runner.isolation.wire` (JSON header and raw arrays, no pickle); a reader checks the length
against its limit before it reads the bytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.runner.isolation import wire

FRAME = struct.Struct("<Q")  # the length of a frame's wire bytes


class WorkerFailed(RuntimeError):
    """A metric worker that exited, overran its limit or replied garbage (the message says which)."""


# ---------------------------------------------------------------------------------------- framing


def write_frame(fd: int, message: Any, deadline: float | None = None) -> None:
    """Send ``message`` (bytes of :func:`xaibench.runner.isolation.wire.encode`, or a value to encode) on
    ``fd``, length first. With a ``deadline`` (``time.monotonic()`` seconds) the fd must be
    non-blocking; past it, ``TimeoutError``; a closed pipe, :class:`WorkerFailed`."""
    data = message if isinstance(message, bytes) else wire.encode(message)
    view = memoryview(FRAME.pack(len(data)) + data)
    while view:
        if deadline is not None:
            _wait(fd, deadline, write=True)
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerFailed("pipe closed") from None
        view = view[sent:]


def read_frame(fd: int, deadline: float | None = None, *, limit: int = wire.MAX_REPLY_BYTES) -> Any:
    """The next message on ``fd``: its length is checked against ``limit`` before the bytes are
    read, then they are decoded (:func:`xaibench.runner.isolation.wire.decode`). :class:`WorkerFailed` at
    end of file or past ``deadline``; :class:`~xaibench.runner.isolation.wire.WireError` for bad bytes."""
    (size,) = FRAME.unpack(read_exact(fd, FRAME.size, deadline))
    if size > limit:
        raise wire.WireError(f"a reply of {size} bytes exceeds the limit of {limit}")
    return wire.decode(read_exact(fd, size, deadline))


def read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left:
        if deadline is not None:
            _wait(fd, deadline, write=False)
        try:
            chunk = os.read(fd, min(left, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise WorkerFailed("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _wait(fd: int, deadline: float, *, write: bool) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    ready = select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
    if not any(ready):
        raise TimeoutError


# ---------------------------------------------------------------------------------------- data


def sample_data(sample: Sample) -> dict[str, Any]:
    """``sample`` as plain data for a request (its ``meta`` entries that the wire format holds)."""
    gt = sample.ground_truth
    meta: dict[str, Any] = {}
    for key, value in sample.meta.items():
        with contextlib.suppress(Exception):  # an entry the format cannot hold stays behind
            wire.encode(value)
            meta[str(key)] = value
    return {
        "id": sample.id,
        "image": np.asarray(sample.image),
        "label": None if sample.label is None else int(sample.label),
        "target": None if sample.target is None else int(sample.target),
        "ground_truth": None
        if gt is None
        else {
            "mask": gt.mask,
            "levels": gt.levels,
            "boxes": gt.boxes,
            "notes": list(gt.notes),
            "regions": gt.regions,
            "contributions": gt.contributions,
        },
        "meta": meta,
    }


def sample_from_data(data: Mapping[str, Any]) -> Sample:
    """The :class:`~xaibench.api.Sample` of :func:`sample_data`'s output."""
    gt = data["ground_truth"]
    truth = None
    if gt is not None:
        truth = GroundTruth(
            mask=gt["mask"],
            levels=gt["levels"],
            boxes=gt["boxes"],
            notes=tuple(gt["notes"]),
            regions=gt.get("regions"),
            contributions=gt.get("contributions"),
        )
    return Sample(
        id=str(data["id"]),
        image=data["image"],
        label=data["label"],
        ground_truth=truth,
        target=data["target"],
        meta=dict(data["meta"]),
    )
