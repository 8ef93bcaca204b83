"""The metric worker's serving loop (child side of :mod:`xaibench.runner.isolation.metric_worker`).

Imported by :mod:`xaibench.runner.isolation.metric_child` only once the child is in its sandbox. It reads
the ``start`` message (the distribution, the runner's ``sys.path`` and torch thread count), builds
its own registry, imports the distribution for real
(:meth:`~xaibench.plugins.manager.Registry.materialise`) and answers ``ready`` (or ``failed`` with
the reason), then serves ``score`` requests until its stdin closes, killing whatever processes a
metric left running after each. Each request gets a fresh deep
copy of the track's model (rebuilt once from its :class:`~xaibench.runner.executors.ModelSpec` and
checked against its identity), its own :class:`~xaibench.api.ForwardCounter` with the runner's
forward batch size (images per forward pass), torch's globals reset, and the runner's isolated
:func:`~xaibench.runner.evaluate.score_batch`: a metric that raises gives n/a with the reason, as
in the runner. What the metric returns is checked before it is sent
(:func:`~xaibench.runner.isolation.metric_worker.checked_output`: an absurd value or count is the batch's
n/a, one line). A metric that re-runs the explainer gets :class:`RemoteExplainer`.
"""

from __future__ import annotations

import copy
import importlib
import sys
from typing import Any

import numpy as np
import torch

from xaibench.allocator import tune_allocator
from xaibench.api import ForwardCounter, MetricInput
from xaibench.plugins.manager import get_registry, one_line, remote_distribution
from xaibench.randomisation import Shift
from xaibench.runner.evaluate import score_batch
from xaibench.runner.executors import ExplainerFailed, ModelSpec, WorkerState, plain_reply
from xaibench.runner.isolation import wire
from xaibench.runner.isolation.frames import WorkerFailed, read_frame, sample_from_data, write_frame
from xaibench.runner.isolation.metric_worker import MAX_FORWARD_PASSES, checked_output
from xaibench.runner.isolation.workers import kill_orphans
from xaibench.torch_numerics import fix_torch_numerics


def serve(inbox: int, outbox: int) -> None:
    """Answer the runner's messages on ``inbox``/``outbox`` until ``inbox`` closes."""
    start = read_frame(inbox)
    sys.path[:] = [str(p) for p in start["path"]]  # the runner's: test folders added at run time too
    importlib.invalidate_caches()
    server = _Server(start["distribution"], int(start["threads"]))
    write_frame(outbox, server.start())
    while True:
        try:
            message = read_frame(inbox)
        except WorkerFailed:  # the runner closed the pipe: the run is over
            return
        write_frame(outbox, server.score(message, inbox, outbox))
        kill_orphans(())  # what the metric started and left running (this process is a subreaper)


class _Server:
    """What the child holds: its registry, the metrics and models built so far."""

    def __init__(self, distribution: str, threads: int) -> None:
        tune_allocator()
        self.distribution = distribution
        self.threads = threads
        self.metrics: dict[str, Any] = {}
        self.registry: Any = None
        self.state: Any = None

    def start(self) -> dict[str, Any]:

        fix_torch_numerics(self.threads)
        try:
            self.registry = get_registry()
            self.registry.materialise(self.distribution)
        except Exception as exc:  # noqa: BLE001 - said to the runner, which gives n/a
            return {"op": "failed", "reason": f"metric plugin {self.distribution} could not be loaded: {exc}"[:300]}
        self.state = WorkerState(registry=self.registry, threads=self.threads)
        return {"op": "ready"}

    def _metric(self, name: str, params: dict[str, Any]) -> Any:
        key = repr((name, sorted((k, repr(v)) for k, v in params.items())))
        if key not in self.metrics:
            self.metrics[key] = self.registry.create("metric", name, **params)
        return self.metrics[key]

    def _not_loaded(self, name: str, exc: Exception) -> str:
        """Why metric ``name`` could not be built: its plugin's load error when it has one."""
        for status in self.registry.plugins.values():
            if status.distribution == self.distribution and status.error:
                return f"metric plugin {self.distribution} failed to load: {status.error}"[:300]
        return f"metric {name!r} could not be built in its worker: {exc}"[:300]

    def score(self, message: dict[str, Any], inbox: int, outbox: int) -> bytes:
        """The reply to a ``score`` request (wire bytes): the metric's output on the batch, or n/a
        for every sample with the reason the metric or the model could not be built."""

        n = len(message["samples"])

        def na(reason: str) -> dict[str, Any]:
            return {"op": "done", "values": np.full(n, np.nan), "reasons": [reason] * n, "forward_passes": 0}

        try:
            metric = self._metric(str(message["metric"]), dict(message["params"]))
        except Exception as exc:  # noqa: BLE001 - n/a with the reason
            return wire.encode(na(self._not_loaded(str(message["metric"]), exc)))
        model = forward = inputs = None
        spec_data = message["model"]
        if spec_data is not None:
            spec = ModelSpec(spec_data["name"], dict(spec_data["params"]), spec_data["identity"], spec_data["device"])
            try:
                cls = self.registry.entry("model", spec.name).cls
                if (model_dist := remote_distribution(cls)) is not None:
                    self.registry.materialise(model_dist)
                model = copy.deepcopy(self.state.model(spec))  # a fresh copy per batch
            except Exception as exc:  # noqa: BLE001 - n/a with the reason
                return wire.encode(
                    na(f"model could not be rebuilt in the metric worker: {type(exc).__name__}: {exc}"[:300])
                )
            model.module.eval()
            forward = ForwardCounter(model.module, batch_size=int(message["forward_batch"]), device=spec.device)
            if message["inputs"] is not None:
                inputs = torch.from_numpy(message["inputs"]).to(spec.device)
        explainer = None
        if message["explainer"] is not None:
            explainer = RemoteExplainer(message["explainer"], inbox, outbox)
        batch = MetricInput(
            saliency=message["saliency"],
            concepts=message["concepts"],
            samples=[sample_from_data(s) for s in message["samples"]],
            targets=message["targets"],
            inputs=inputs,
            model=model,
            forward=forward,
            explainer=explainer,
            seed=int(message["seed"]),
        )
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(self.threads)
        torch.set_grad_enabled(True)
        torch.manual_seed(batch.seed)
        np.random.seed(batch.seed % 2**32)
        try:  # what the metric returned, checked here (the runner checks the reply again)
            output = checked_output(score_batch(metric, batch, str(message["kind"])), n)
        except Exception as exc:  # noqa: BLE001 - whatever the metric's output raised while being read
            return wire.encode(na(one_line(f"metric output cannot be read: {type(exc).__name__}: {exc}")))
        passes = output.forward_passes or (forward.images if forward is not None else 0)
        if passes > MAX_FORWARD_PASSES:  # the counter's own, after a metric that ran that many
            return wire.encode(na(f"metric used {passes} forward passes, over {MAX_FORWARD_PASSES:.0e}"))
        reply = {
            "op": "done",
            "values": np.asarray(output.values, dtype=np.float64),
            "reasons": [None if r is None else str(r) for r in output.reasons],
            "curves": plain_reply(output.curves),
            "extras": plain_reply(output.extras),
            "forward_passes": int(passes),
        }
        try:
            return wire.encode(reply)
        except Exception as exc:  # noqa: BLE001 - an output the format cannot hold
            return wire.encode(na(f"metric output cannot be sent: {type(exc).__name__}: {exc}"[:300]))


class RemoteExplainer:
    """The run's explainer as a metric in this child sees it: class data, and an ``explain`` that
    asks the runner (which runs it in its executor) and waits for the maps."""

    def __init__(self, info: dict[str, Any], inbox: int, outbox: int) -> None:
        self.name = str(info["name"])
        self.version = str(info["version"])
        self.kind = str(info["kind"])
        self.params = dict(info["params"])
        self._pipes = (inbox, outbox)

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        """The :class:`~xaibench.api.Explainer` signature: ``(B, H, W)`` maps or concept dicts from
        the runner, or :class:`~xaibench.runner.executors.ExplainerFailed` with its reason."""
        r = getattr(model, "randomisation", None)
        shift = getattr(model, "shift", None)  # a copy made by xaibench.randomisation.shift_absorbed
        array = inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else np.asarray(inputs)
        labels = targets.detach().cpu().numpy() if isinstance(targets, torch.Tensor) else np.asarray(targets)
        samples = getattr(context, "samples", None)
        inbox, outbox = self._pipes
        write_frame(
            outbox,
            {
                "op": "explain",
                "model": str(getattr(model, "identity", "")),
                "randomisation": None if r is None else [r.base, r.upto, r.blocks, r.seed],
                "shift": [shift.base, shift.shift] if isinstance(shift, Shift) else None,
                "inputs": np.ascontiguousarray(array, dtype=np.float32),
                "targets": np.asarray(labels, dtype=np.int64),
                "seed": int(seed),
                "samples": None if samples is None else [str(s.id) for s in samples],
            },
        )
        answer = read_frame(inbox)
        if "error" in answer:
            raise ExplainerFailed(answer["error"])
        return answer["maps"]
