"""Where explainer code runs: executors take explanation tasks and return raw explanations.

A task is one batch of one (track, explainer): a picklable description of the model
(:class:`ModelSpec`: registry name, parameters and identity, rebuilt on the worker side and
checked against the identity), of the explainer (:class:`ExplainerSpec`), and of the batch
(inputs, targets, samples, seeds). The outcome is the explainer's raw output per sample, or the
reason the whole call failed. Checking outputs, caching and records stay with the runner: one
process writes results, whatever the executor.

:class:`WorkerState` is what a worker holds across tasks and how it runs one. It is the same
code in every executor, so every executor gives the same maps for the same task:

- the model is rebuilt once per worker from its spec and kept as a pristine copy; every call
  gets a fresh deep copy of it (eval mode, original weights, no hooks left by an earlier call);
- every call gets fresh inputs, targets and samples (copies: the explainer may mutate them);
- torch's global state is reset before every call: default dtype float32, the run's intra-op
  thread count, grad mode on, and the batch seed in torch's and numpy's global generators.

:class:`InProcessExecutor` runs tasks in the calling process under a ``SIGALRM`` timeout. It is
for trusted code (tests of the runner itself, PASTA training-data generation); ``xaibench run``
uses worker processes (see :func:`make_executor`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Model, Sample
from xaibench.runner.guard import call_with_limit


@dataclass(frozen=True)
class ModelSpec:
    """How a worker rebuilds the track's model: registry name and parameters, the identity the
    rebuilt model must have, and the device to put it on."""

    name: str
    params: Mapping[str, Any]
    identity: str
    device: str = "cpu"


@dataclass(frozen=True)
class ExplainerSpec:
    """How a worker builds the explainer: registry name and (validated) parameters."""

    name: str
    params: Mapping[str, Any]


@dataclass
class ExplainTask:
    """One batch to explain. ``inputs`` are the normalised ``(B, 3, S, S)`` float32 model inputs,
    ``targets`` the ``(B,)`` explained classes; ``seed`` is the run seed passed to ``explain`` and
    ``batch_seed`` seeds torch's and numpy's global generators before the call."""

    model: ModelSpec
    explainer: ExplainerSpec
    inputs: np.ndarray
    targets: np.ndarray
    samples: list[Sample]
    seed: int
    batch_seed: int
    timeout: float | None = None


@dataclass
class ExplainOutcome:
    """The raw output of one task (one entry per sample), or ``error``: why the call failed."""

    outputs: list[Any] | None = None
    error: str | None = None


def spec_key(spec: ExplainerSpec) -> str:
    """A stable key of an explainer spec (name and parameters)."""
    return repr((spec.name, sorted((str(k), repr(v)) for k, v in spec.params.items())))


def failure_reason(exc: BaseException) -> str:
    """One line for an exception raised by explainer code."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"explainer raised {type(exc).__name__}: {text}"[:300]


@dataclass
class WorkerState:
    """Models and explainers one worker keeps across tasks, and the reset before every call.

    ``registry`` builds components by name (the worker's own plugin registry); ``models`` may be
    seeded with already-built models by identity (the in-process executor adopts the runner's).
    """

    registry: Any
    threads: int = 1
    models: dict[str, Model] = field(default_factory=dict)
    explainers: dict[str, Explainer] = field(default_factory=dict)

    def model(self, spec: ModelSpec) -> Model:
        """The pristine model of ``spec`` (built and checked on first use)."""
        model = self.models.get(spec.identity)
        if model is None:
            model = self.registry.create("model", spec.name, **dict(spec.params))
            if model.identity != spec.identity:
                raise RuntimeError(
                    f"model {spec.name!r} rebuilt in a worker has identity {model.identity}, expected {spec.identity}"
                )
            model.module.to(spec.device)
            self.models[spec.identity] = model
        return model

    def explainer(self, spec: ExplainerSpec) -> Explainer:
        key = spec_key(spec)
        explainer = self.explainers.get(key)
        if explainer is None:
            explainer = self.registry.create("explainer", spec.name, **dict(spec.params))
            self.explainers[key] = explainer
        return explainer

    def reset_globals(self, batch_seed: int) -> None:
        """torch's and numpy's global state as every call expects it."""
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(max(1, self.threads))
        torch.set_grad_enabled(True)
        torch.manual_seed(batch_seed)
        np.random.seed(batch_seed % 2**32)

    def run(self, task: ExplainTask, *, in_process_timeout: bool = False) -> ExplainOutcome:
        """Run one task and return its outputs or the reason it failed (never raises for explainer
        errors). With ``in_process_timeout`` the call runs under a ``SIGALRM`` limit of
        ``task.timeout`` (worker processes are timed and killed from outside instead)."""
        try:
            explainer = self.explainer(task.explainer)
            pristine = self.model(task.model)
        except Exception as exc:  # noqa: BLE001 - a constructor that raises is an n/a reason
            return ExplainOutcome(error=failure_reason(exc))
        model = copy.deepcopy(pristine)
        model.module.eval()
        device = task.model.device
        inputs = torch.from_numpy(np.array(task.inputs, dtype=np.float32, copy=True)).to(device)
        targets = torch.as_tensor(np.array(task.targets, dtype=np.int64, copy=True))
        context = ExplainContext(samples=copy.deepcopy(list(task.samples)))
        self.reset_globals(task.batch_seed)

        def call() -> Any:
            return explainer.explain(model, inputs, targets, seed=task.seed, context=context)

        try:
            result = call_with_limit(call, task.timeout if in_process_timeout else None)
            outputs = to_outputs(result, explainer.kind, len(task.samples))
        except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
            return ExplainOutcome(error=failure_reason(exc))
        return ExplainOutcome(outputs=outputs)


def to_outputs(result: Any, kind: str, n: int) -> list[Any]:
    """An explainer's result as one entry per sample: numpy maps on the CPU, or concept dicts."""
    if kind == "concept":
        outputs = list(result)
    elif isinstance(result, torch.Tensor):
        outputs = list(result.detach().cpu().numpy())
    else:
        outputs = list(result)
    if len(outputs) != n:
        raise ValueError(f"explainer returned {len(outputs)} explanations for {n} inputs")
    return outputs


class Executor(Protocol):
    """Runs explanation tasks. ``run`` yields one outcome per task, in the order of ``tasks``."""

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Runs tasks in this process (trusted code only; see the module doc)."""

    def __init__(self, registry: Any = None, *, threads: int | None = None) -> None:
        self.state = WorkerState(registry=registry, threads=threads or torch.get_num_threads())

    def adopt(self, model: Model | None = None, explainer: Explainer | None = None) -> None:
        """Use already-built components for tasks that name them (no rebuild, no registry)."""
        if model is not None:
            self.state.models.setdefault(model.identity, model)
        if explainer is not None:
            spec = ExplainerSpec(explainer.name, dict(explainer.params))
            self.state.explainers.setdefault(spec_key(spec), explainer)

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]:
        for task in tasks:
            yield self.state.run(task, in_process_timeout=True)

    def close(self) -> None:
        self.state.models.clear()
        self.state.explainers.clear()


EXECUTORS = ("local", "ray", "inprocess")


def make_executor(
    kind: str, registry: Any, *, workers: int = 1, threads: int = 1, ray_address: str | None = None
) -> Executor:
    """The executor ``kind``: ``local`` (worker processes on this machine), ``ray`` or
    ``inprocess`` (this process; trusted code only)."""
    if kind not in EXECUTORS:
        raise ValueError(f"unknown executor {kind!r}; known: {', '.join(EXECUTORS)}")
    # TODO(issue 12): local worker processes and Ray; until then every kind runs in process.
    return InProcessExecutor(registry, threads=threads)
