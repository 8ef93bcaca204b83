"""The model and encoder worker process (child side of :mod:`xaibench.runner.isolation.component_worker`).

Started as ``python -m xaibench.runner.isolation.component_child SCRATCH PARENT_PID`` with pipes on stdin and
stdout; one process per model or encoder. Before it imports torch, numpy or any plugin (this module
imports only the standard library and the start-up steps of :mod:`xaibench.runner.isolation.metric_child`),
it asks to be killed with its parent, becomes a subreaper, keeps the runner's pipes on private
descriptors (a plugin's ``print`` cannot forge a reply), makes ``SCRATCH`` its ``TMPDIR`` and enters
the worker sandbox (writes only ``SCRATCH``, no TCP, no signal outside itself; only where Landlock
exists, and not with ``XAIBENCH_SANDBOX=0``).

Then it reads the ``start`` message (the kind, name, distribution and parameters, the runner's
``sys.path`` and torch thread count), imports the distribution for real
(:meth:`~xaibench.plugins.manager.Registry.materialise`), builds the component and answers
``ready`` with its attributes (or ``failed`` with one line, and exits). It then answers requests
until its stdin closes (``done`` with the result, or ``failed`` with one line: a request that
raises does not end it), killing whatever processes the plugin left running after each:

- a model: ``forward`` (logits of a float32 batch, in ``torch.inference_mode``), ``preprocess``
  (the model's own, of a list of images), ``to`` (moves the module to a device);
- an encoder: ``encode_images``, ``encode_texts``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from xaibench.runner.isolation.metric_child import _die_with_parent, _private_pipes, _sandbox


def _one_line(what: str, exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{what} {type(exc).__name__}: {text}"[:300]


def _model_attributes(model: Any) -> dict[str, Any]:
    from xaibench.randomisation import parameter_paths

    weights = getattr(model, "weights_source", None)
    return {
        "identity": str(model.identity),
        "input_size": int(model.input_size),
        "mean": [float(v) for v in model.mean],
        "std": [float(v) for v in model.std],
        "label_names": [str(n) for n in (model.label_names or ())],
        "target_layers": [str(n) for n in (model.target_layers or ())],
        "synthetic": bool(model.synthetic),
        "weights_source": None if weights is None else str(weights),
        "parameter_paths": parameter_paths(model.module),
    }


def _encoder_attributes(encoder: Any) -> dict[str, Any]:
    reason = encoder.unavailable()
    return {"identity": str(encoder.identity), "unavailable": None if reason is None else str(reason)}


class _Component:
    """The built component and the requests it answers."""

    def __init__(self, kind: str, component: Any) -> None:
        import torch

        self.kind = kind
        self.component = component
        self.torch = torch
        self.device = torch.device("cpu")

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        torch = self.torch
        op = str(message.get("op"))
        if self.kind == "model" and op == "forward":
            x = torch.from_numpy(np.array(message["x"], dtype=np.float32, copy=True)).to(self.device)
            if message.get("channels_last") and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                y = self.component.module(x)
            return {"op": "done", "y": y.detach().float().cpu().numpy()}
        if self.kind == "model" and op == "preprocess":
            x = self.component.preprocess([np.asarray(image) for image in message["images"]])
            x = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
            return {"op": "done", "x": x.float().numpy()}
        if self.kind == "model" and op == "to":
            self.device = torch.device(str(message["device"]))
            self.component.module.to(self.device)
            return {"op": "done"}
        if self.kind == "encoder" and op == "encode_images":
            y = self.component.encode_images(np.asarray(message["images"]))
            return {"op": "done", "y": np.asarray(y, dtype=np.float32)}
        if self.kind == "encoder" and op == "encode_texts":
            y = self.component.encode_texts([str(t) for t in message["texts"]])
            return {"op": "done", "y": np.asarray(y, dtype=np.float32)}
        return {"op": "failed", "reason": f"unknown request {op[:40]!r} for a {self.kind}"}


def _build(message: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The component of the ``start`` message and its attributes."""
    from xaibench.allocator import tune_allocator
    from xaibench.plugins.manager import get_registry, remote_distribution
    from xaibench.torch_numerics import fix_torch_numerics

    tune_allocator()
    fix_torch_numerics(int(message["threads"]))
    kind, name, distribution = str(message["kind"]), str(message["name"]), str(message["distribution"])
    registry = get_registry()
    registry.materialise(distribution)
    cls = registry.entry(kind, name).cls
    if remote_distribution(cls) is not None:
        errors = [s.error for s in registry.plugins.values() if s.distribution == distribution and s.error]
        raise RuntimeError(errors[0] if errors else "its plugin did not register it")
    component = registry.create(kind, name, materialise=True, **dict(message["params"]))
    if kind == "model":
        component.module.eval()
        return _Component(kind, component), _model_attributes(component)
    return _Component(kind, component), _encoder_attributes(component)


def serve(inbox: int, outbox: int) -> None:
    """Answer the runner's messages on ``inbox``/``outbox`` until ``inbox`` closes (see the module doc)."""
    from xaibench.runner.isolation.frames import WorkerFailed, read_frame, write_frame
    from xaibench.runner.isolation.workers import kill_orphans

    start = read_frame(inbox)
    sys.path[:] = [str(p) for p in start["path"]]  # the runner's: test folders added at run time too
    importlib.invalidate_caches()
    try:
        component, attributes = _build(start)
    except BaseException as exc:  # noqa: BLE001 - said to the runner in one line
        write_frame(outbox, {"op": "failed", "reason": _one_line("could not be built:", exc)})
        return
    kill_orphans(())
    write_frame(outbox, {"op": "ready", "attributes": attributes})
    while True:
        try:
            message = read_frame(inbox)
        except WorkerFailed:  # the runner closed the pipe: it is done with this component
            return
        try:
            reply = component.answer(message)
        except Exception as exc:  # noqa: BLE001 - the request's failure, said in one line
            reply = {"op": "failed", "reason": _one_line(f"{message.get('op')!s:.40} raised", exc)}
        kill_orphans(())  # what the plugin started and left running (this process is a subreaper)
        write_frame(outbox, reply)


def main(argv: list[str]) -> None:
    scratch, parent = argv[0], int(argv[1])
    _die_with_parent(parent)
    inbox, outbox = _private_pipes()
    _sandbox(scratch)
    serve(inbox, outbox)


if __name__ == "__main__":
    main(sys.argv[1:])
