"""The dataset worker process (child side of :mod:`xaibench.runner.isolation.dataset_worker`).

Started as ``python -m xaibench.runner.isolation.dataset_child SCRATCH PARENT_PID`` with pipes on stdin and
stdout; one process per dataset load. Before it imports torch, numpy or any plugin (this module
imports only the standard library, :mod:`xaibench.sandbox` and the start-up steps of
:mod:`xaibench.runner.isolation.metric_child`), it asks to be killed with its parent, becomes a subreaper,
keeps the runner's pipes on private descriptors (a plugin's ``print`` cannot forge a reply), makes
``SCRATCH`` its ``TMPDIR`` and enters the worker sandbox (writes only ``SCRATCH``, no TCP, no signal
outside itself; only where Landlock exists, and not with ``XAIBENCH_SANDBOX=0``).

Then it reads the ``load`` message (the distribution, the runner's ``sys.path``, the dataset's name,
parameters and sample limit), builds its own registry, imports the distribution for real
(:meth:`~xaibench.plugins.manager.Registry.materialise`), builds the dataset and answers, as
:mod:`xaibench.runner.isolation.wire` frames: a ``dataset`` header (revision, synthetic, label names, length),
one ``sample`` frame per sample (at most the limit), then ``end``; or ``failed`` with one line.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from xaibench.runner.isolation.metric_child import _die_with_parent, _private_pipes, _sandbox


def _one_line(what: str, exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{what} {type(exc).__name__}: {text}"[:300]


def serve(inbox: int, outbox: int) -> None:
    """Answer the one ``load`` message on ``inbox`` (see the module doc)."""
    from xaibench.plugins.manager import get_registry, remote_distribution
    from xaibench.runner.isolation import wire
    from xaibench.runner.isolation.frames import read_frame, sample_data, write_frame
    from xaibench.runner.isolation.workers import kill_orphans

    message = read_frame(inbox)
    sys.path[:] = [str(p) for p in message["path"]]  # the runner's: test folders added at run time too
    importlib.invalidate_caches()
    name, distribution = str(message["name"]), str(message["distribution"])
    limit = message["limit"]
    try:
        registry = get_registry()
        registry.materialise(distribution)
        cls = registry.entry("dataset", name).cls
        if remote_distribution(cls) is not None:
            errors = [s.error for s in registry.plugins.values() if s.distribution == distribution and s.error]
            raise RuntimeError(errors[0] if errors else "its plugin did not register it")
        dataset = registry.create("dataset", name, **dict(message["params"]))
    except BaseException as exc:  # noqa: BLE001 - said to the runner in one line
        write_frame(outbox, {"op": "failed", "reason": _one_line("could not be built:", exc)})
        return
    step = "len"
    try:
        size: Any = None
        try:
            size = len(dataset)
        except Exception:  # noqa: BLE001 - a dataset without a length
            size = None
        step = "revision"
        header = wire.encode(
            {
                "op": "dataset",
                "revision": str(dataset.revision),
                "synthetic": bool(dataset.synthetic),
                "label_names": [str(n) for n in (dataset.label_names or ())],
                "len": size,
            }
        )
        step = "samples"
        frames = []
        for i, sample in enumerate(dataset.samples(limit)):
            if limit is not None and i >= limit:
                break
            frames.append(wire.encode({"op": "sample", "sample": sample_data(sample)}))
    except BaseException as exc:  # noqa: BLE001 - said to the runner in one line
        write_frame(outbox, {"op": "failed", "reason": _one_line(f"{step} raised", exc)})
        return
    kill_orphans(())  # what the dataset started and left running (this process is a subreaper)
    write_frame(outbox, header)
    for frame in frames:
        write_frame(outbox, frame)
    write_frame(outbox, {"op": "end"})


def main(argv: list[str]) -> None:
    scratch, parent = argv[0], int(argv[1])
    _die_with_parent(parent)
    inbox, outbox = _private_pipes()
    _sandbox(scratch)
    serve(inbox, outbox)


if __name__ == "__main__":
    main(sys.argv[1:])
