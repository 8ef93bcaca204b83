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

The runner itself never builds or calls a third-party explainer. It holds an
:class:`ExplainerHandle` per explainer: the class data it needs for records (name, version,
kind, flags, read from the registered class without running its code) and the parameters the
explainer's constructor accepted, which :func:`explainer_handles` asks an executor to find out
(``describe``: the constructor runs where the explainer will run). The handle's ``explain`` has
the :class:`~xaibench.api.Explainer` signature and forwards the call to the executor, so metrics
that re-run the explainer (``max_sensitivity``; ``model_randomisation``, on randomised copies of
the model that the worker builds from ``ModelSpec.randomisation``; ``input_invariance``, on the
shifted copy built from ``ModelSpec.shift``) do so in a worker too.

:class:`InProcessExecutor` runs tasks in the calling process under a ``SIGALRM`` timeout. It is
for trusted code (tests of the runner itself, PASTA training-data generation); ``xaibench run``
uses worker processes: :class:`xaibench.runner.isolation.workers.LocalExecutor`, or Ray
(:class:`xaibench.runner.isolation.ray_executor.RayExecutor`), both the one scheduler of
:mod:`xaibench.runner.isolation.scheduling` on a transport of their own, chosen by
:func:`xaibench.runner.isolation.workers.make_executor` (in that module, not this one: this module is the
base that every executor imports, so choosing between them here would be an import circle).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Model, Sample
from xaibench.errors import XaibenchError
from xaibench.params import check_params, resolve_params
from xaibench.randomisation import Randomisation, Shift, randomised_model, shift_absorbed
from xaibench.runner.cost import measure
from xaibench.runner.guard import ExplainerTimeout, call_with_limit
from xaibench.runner.isolation import wire
from xaibench.seeds import derive_seed


@dataclass(frozen=True)
class ModelSpec:
    """How a worker rebuilds the track's model: registry name and parameters, the identity the
    rebuilt model must have, and the device to put it on. ``randomisation`` (the sanity metric
    ``model_randomisation``): the worker explains a copy of that model re-initialised as it says
    (its ``base`` is ``identity``), built from the pristine model and kept for later tasks.
    ``shift`` (the metric ``input_invariance``): likewise a copy whose input layer absorbs the
    constant input shift (:func:`xaibench.randomisation.shift_absorbed`); at most one of the two."""

    name: str
    params: Mapping[str, Any]
    identity: str
    device: str = "cpu"
    randomisation: Randomisation | None = None
    shift: Shift | None = None

    @property
    def key(self) -> str:
        """The identity of the model the worker explains (the randomised or shifted copy's)."""
        if self.randomisation is not None:
            return self.randomisation.identity
        return self.identity if self.shift is None else self.shift.identity


@dataclass(frozen=True)
class ExplainerSpec:
    """How a worker builds the explainer: registry name and (validated) parameters."""

    name: str
    params: Mapping[str, Any]


@dataclass
class ExplainTask:
    """One batch to explain. ``inputs`` are the normalised ``(B, 3, S, S)`` float32 model inputs,
    ``targets`` the ``(B,)`` explained classes; ``seed`` is the run seed passed to ``explain`` and
    ``batch_seed`` seeds torch's and numpy's global generators before the call. ``samples`` is
    ``None`` for a call without a context (a metric re-running the explainer); ``timeout`` is the
    seconds the explainer call may take (``None`` or 0: no limit)."""

    model: ModelSpec
    explainer: ExplainerSpec
    inputs: np.ndarray
    targets: np.ndarray
    samples: list[Sample] | None
    seed: int
    batch_seed: int
    timeout: float | None = None


def blinded(samples: Sequence[Sample]) -> list[Sample]:
    """The samples as a method's explainer sees them: id, image and the class to explain. Ground
    truth, label and meta (a planted cue's box) are left out: only explainers that declare
    themselves references (``reference_only``, never ranked) read the answer (issue 42)."""
    return [Sample(id=s.id, image=s.image, target=s.target) for s in samples]


@dataclass
class ExplainOutcome:
    """The raw output of one task (one entry per sample), or ``error``: why the call failed.
    ``timed_out`` tells that it failed by overrunning ``task.timeout`` (the retry policy of
    :func:`xaibench.runner.explain.explain_track` depends on it)."""

    outputs: list[Any] | None = None
    error: str | None = None
    timed_out: bool = False
    cost: dict[str, float] | None = None
    """What the call cost (:mod:`xaibench.runner.cost`): wall seconds and peak memory, for the batch."""


def spec_key(spec: ExplainerSpec) -> str:
    """A stable key of an explainer spec (name and parameters)."""
    return repr((spec.name, sorted((str(k), repr(v)) for k, v in spec.params.items())))


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""


def failure_reason(exc: BaseException) -> str:
    """One line for an exception raised by explainer code."""
    return f"explainer raised {type(exc).__name__}: {_first_line(exc)}"[:300]


def _unwrap(exc: BaseException) -> BaseException:
    """The plugin's own exception: ``Registry.create`` wraps ``TypeError``/``ValueError`` in a
    :class:`XaibenchError` raised ``from`` it."""
    return exc.__cause__ if isinstance(exc, XaibenchError) and exc.__cause__ is not None else exc


def constructor_reason(exc: BaseException) -> str:
    """The n/a reason of every record of an explainer whose constructor raised ``exc``."""
    exc = _unwrap(exc)
    return f"explainer constructor raised {type(exc).__name__}: {_first_line(exc)}"[:300]


def is_parameter_error(exc: BaseException, cls: type) -> bool:
    """Whether ``exc``, raised while constructing ``cls``, is a parameter check: a ``ValueError`` or
    ``TypeError`` raised inside the framework's checks (``resolve_params``/``check_params``) or
    inside the class's own ``validate_params`` hook. Those are bad input (the run stops with one
    line); anything else raised by the constructor is the plugin's failure (an n/a reason)."""
    exc = _unwrap(exc)
    if not isinstance(exc, (TypeError, ValueError)):
        return False
    codes = {resolve_params.__code__, check_params.__code__}
    for klass in getattr(cls, "__mro__", ()):
        hook = klass.__dict__.get("validate_params")
        if hook is not None and hasattr(hook, "__code__"):
            codes.add(hook.__code__)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


# What describing an explainer gives (plain tuples: they cross process boundaries):
# ("ok", params) the constructor accepted, with its validated parameters;
# ("invalid", message) bad parameters (the run stops before any work);
# ("failed", reason) the constructor failed (n/a reason for every record of the explainer).
Description = tuple[str, Any]


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
    placed: set[str] = field(default_factory=set)  # identities of the models moved to their device

    def model(self, spec: ModelSpec) -> Model:
        """The pristine model of ``spec`` (built and checked on first use, or given in ``models``:
        a worker inherits the models its zygote built on the CPU), on ``spec.device``. With a
        ``randomisation``: a randomised deep copy of the pristine model, kept under its own
        identity (:func:`xaibench.randomisation.randomise` draws every weight on the CPU: the same
        weights on every device). With a ``shift``: the shifted deep copy of the pristine model
        (:func:`xaibench.randomisation.shift_absorbed`), also kept under its own identity."""
        key = spec.key
        model = self.models.get(key)
        if model is None:
            if spec.randomisation is not None:
                model = self._randomised(spec)
            elif spec.shift is not None:
                model = self._shifted(spec)
            else:
                model = self.registry.create("model", spec.name, materialise=True, **dict(spec.params))
                if model.identity != spec.identity:
                    raise RuntimeError(
                        f"model {spec.name!r} rebuilt in a worker has identity {model.identity}, "
                        f"expected {spec.identity}"
                    )
            self.models[key] = model
        if key not in self.placed:
            model.module.to(spec.device)
            self.placed.add(key)
        return model

    def _randomised(self, spec: ModelSpec) -> Model:
        r = spec.randomisation
        assert r is not None
        if r.base != spec.identity:
            raise RuntimeError(f"randomisation of {r.base} asked for model {spec.identity}")
        pristine = self.model(dataclasses.replace(spec, randomisation=None))
        model = randomised_model(pristine, upto=r.upto, blocks=r.blocks, seed=r.seed)
        if model.identity != r.identity:
            raise RuntimeError(f"randomised model has identity {model.identity}, expected {r.identity}")
        model.module.eval()  # builds the copy now (its weights are drawn on the CPU, see randomise)
        return model

    def _shifted(self, spec: ModelSpec) -> Model:
        s = spec.shift
        assert s is not None
        if s.base != spec.identity:
            raise RuntimeError(f"shift of {s.base} asked for model {spec.identity}")
        if spec.randomisation is not None:
            raise RuntimeError("a model cannot be both randomised and shifted")
        pristine = self.model(dataclasses.replace(spec, shift=None))
        model = shift_absorbed(pristine, s.shift)
        if model.identity != s.identity:
            raise RuntimeError(f"shifted model has identity {model.identity}, expected {s.identity}")
        model.module.eval()
        return model

    def explainer(self, spec: ExplainerSpec) -> Explainer:
        key = spec_key(spec)
        explainer = self.explainers.get(key)
        if explainer is None:
            explainer = self.registry.create("explainer", spec.name, materialise=True, **dict(spec.params))
            self.explainers[key] = explainer
        return explainer

    def is_reference(self, name: str) -> bool:
        """Whether explainer ``name`` declares itself a reference (``reference_only``): the only
        explainers that see the samples' ground truth."""
        try:
            return getattr(self.registry.entry("explainer", name).cls, "reference_only", False) is True
        except Exception:  # noqa: BLE001 - unknown here: not a reference
            return False

    def describe(self, spec: ExplainerSpec) -> Description:
        """Construct the explainer of ``spec`` (kept for later tasks) and say how it went."""
        try:
            explainer = self.explainer(spec)
        except Exception as exc:  # noqa: BLE001 - a constructor that raises is an n/a reason
            cls = self.registry.entry("explainer", spec.name).cls
            if is_parameter_error(exc, cls):
                return ("invalid", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return ("failed", constructor_reason(exc))
        params = dict(explainer.params)
        # Tasks name the validated parameters: the instance serves them too, without a second build.
        self.explainers.setdefault(spec_key(ExplainerSpec(spec.name, params)), explainer)
        return ("ok", params)

    def reset_globals(self, batch_seed: int) -> None:
        """torch's and numpy's global state as every call expects it."""
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(max(1, self.threads))
        torch.set_grad_enabled(True)
        torch.manual_seed(batch_seed)
        np.random.seed(batch_seed % 2**32)

    def run(
        self, task: ExplainTask, *, in_process_timeout: bool = False, ready: Callable[[], None] | None = None
    ) -> ExplainOutcome:
        """Run one task and return its outputs or the reason it failed (never raises for explainer
        errors). With ``in_process_timeout`` the call runs under a ``SIGALRM`` limit of
        ``task.timeout`` (worker processes are timed and killed from outside instead). ``ready`` is
        called once the model and explainer are built, just before the explainer call (a worker
        process tells its parent, which starts the call's clock then)."""
        try:
            explainer = self.explainer(task.explainer)
        except Exception as exc:  # noqa: BLE001 - a constructor that raises is an n/a reason
            return ExplainOutcome(error=constructor_reason(exc))
        try:
            pristine = self.model(task.model)
        except Exception as exc:  # noqa: BLE001 - reported, never raised
            return ExplainOutcome(error=f"model could not be rebuilt: {type(exc).__name__}: {_first_line(exc)}"[:300])
        model = copy.deepcopy(pristine)
        model.module.eval()
        device = task.model.device
        inputs = torch.from_numpy(np.array(task.inputs, dtype=np.float32, copy=True)).to(device)
        targets = torch.as_tensor(np.array(task.targets, dtype=np.int64, copy=True))
        samples = task.samples
        if samples is not None and not self.is_reference(task.explainer.name):
            samples = blinded(samples)  # whatever the task carried: this worker's registry decides
        context = None if samples is None else ExplainContext(samples=copy.deepcopy(list(samples)))
        if ready is not None:
            ready()
        self.reset_globals(task.batch_seed)

        def call() -> Any:
            return explainer.explain(model, inputs, targets, seed=task.seed, context=context)

        limit = task.timeout if in_process_timeout else None
        try:
            result, cost = measure(lambda: call_with_limit(call, limit), device)
            outputs = to_outputs(result, explainer.kind, len(task.inputs))
        except ExplainerTimeout:
            return ExplainOutcome(error=f"timed out after {limit:g} s", timed_out=True)
        except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
            return ExplainOutcome(error=failure_reason(exc))
        return ExplainOutcome(outputs=outputs, cost=cost)


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
    """Runs explanation tasks. ``run`` yields one outcome per task, in the order of ``tasks``.

    An executor may also offer ``describe(spec, timeout) -> Description`` (see
    :meth:`WorkerState.describe`): construct the explainer where it will run and report. Without
    it, :func:`explainer_handles` constructs explainers in the calling process."""

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Runs tasks in this process (trusted code only; see the module doc)."""

    def __init__(self, registry: Any = None, *, threads: int | None = None) -> None:
        self.state = WorkerState(registry=registry, threads=threads or torch.get_num_threads())

    def adopt(self, model: Model | None = None, explainer: Explainer | None = None) -> None:
        """Use already-built components for tasks that name them (no rebuild, no registry). A
        plugin model's proxy (:class:`~xaibench.runner.isolation.component_worker.RemoteModel`) is not
        adopted: tasks build the real one here (this executor imports the plugins it runs)."""
        if model is not None and getattr(model, "remote_distribution", None) is None:
            self.state.models.setdefault(model.identity, model)
        if explainer is not None:
            spec = ExplainerSpec(explainer.name, dict(explainer.params))
            self.state.explainers.setdefault(spec_key(spec), explainer)

    def describe(self, spec: ExplainerSpec, timeout: float | None = None) -> Description:
        return self.state.describe(spec)

    def run(self, tasks: Sequence[ExplainTask]) -> Iterator[ExplainOutcome]:
        for task in tasks:
            yield self.state.run(task, in_process_timeout=True)

    def close(self) -> None:
        self.state.models.clear()
        self.state.explainers.clear()


class ExplainerFailed(RuntimeError):
    """A call forwarded by an :class:`ExplainerHandle` failed in its worker (the message says why)."""


@dataclass(frozen=True)
class ExplainerHandle:
    """The runner's view of an explainer that runs in an executor (see the module doc).

    ``error`` is set when the constructor failed: every record of the explainer is n/a with it.
    ``model`` is the track's model spec once :meth:`bind` has given one; ``explain`` needs it.
    """

    name: str
    version: str
    kind: str
    params: Mapping[str, Any]
    reference_only: bool
    tuned_on_benchmark: bool
    executor: Any = field(repr=False, compare=False)
    timeout: float | None = None
    error: str | None = None
    model: ModelSpec | None = None
    modalities: tuple[str, ...] = ("image",)

    @property
    def spec(self) -> ExplainerSpec:
        return ExplainerSpec(self.name, dict(self.params))

    def bind(self, model: ModelSpec | None) -> ExplainerHandle:
        """This handle, forwarding calls for ``model`` (the track's model spec)."""
        return dataclasses.replace(self, model=model)

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        """Run the explainer in the executor on ``inputs`` (the :class:`~xaibench.api.Explainer`
        signature; ``model`` must be the bound track's model, or a copy of it made by
        :func:`xaibench.randomisation.randomised_model` or
        :func:`~xaibench.randomisation.shift_absorbed`, which the worker rebuilds from its
        ``randomisation`` or ``shift``). Returns a ``(B, H, W)`` array, or a list of concept dicts;
        raises :class:`ExplainerFailed` with the worker's reason."""
        if self.error is not None:
            raise ExplainerFailed(self.error)
        spec = self.model
        randomisation = getattr(model, "randomisation", None)
        if spec is not None and isinstance(randomisation, Randomisation) and randomisation.base == spec.identity:
            spec = dataclasses.replace(spec, randomisation=randomisation)
        if spec is not None and spec.randomisation is None:
            shift = getattr(model, "shift", None)
            if isinstance(shift, Shift) and shift.base == spec.identity:
                spec = dataclasses.replace(spec, shift=shift)
        if spec is None or getattr(model, "identity", None) != spec.key:
            raise ExplainerFailed(f"explainer {self.name!r} is not bound to this model")
        array = inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else np.asarray(inputs)
        array = np.ascontiguousarray(array, dtype=np.float32)
        labels = targets.detach().cpu().numpy() if isinstance(targets, torch.Tensor) else np.asarray(targets)
        digest = hashlib.sha256(array.tobytes()).hexdigest()[:16]
        task = ExplainTask(
            model=spec,
            explainer=self.spec,
            inputs=array,
            targets=np.asarray(labels, dtype=np.int64),
            samples=None
            if context is None
            else list(context.samples)
            if self.reference_only
            else blinded(context.samples),
            seed=seed,
            batch_seed=derive_seed(seed, self.name, "call", digest),
            timeout=self.timeout,
        )
        (outcome,) = list(self.executor.run([task]))
        if outcome.error is not None:
            raise ExplainerFailed(outcome.error)
        assert outcome.outputs is not None
        return list(outcome.outputs) if self.kind == "concept" else np.stack(outcome.outputs)


def explainer_handles(
    executor: Any, registry: Any, params: Mapping[str, Mapping[str, Any]], *, timeout: float | None = None
) -> dict[str, ExplainerHandle]:
    """One handle per explainer name in ``params`` (name -> the parameters given).

    Bad input fails here, with one line, before any work: an unknown name (the registry's
    error), an unknown parameter or a value that breaks its spec (checked in this process by
    the framework's ``resolve_params``), and a ``ValueError``/``TypeError`` from the explainer's
    ``validate_params`` hook (reported by the describing worker). Any other failure of the
    constructor (its own ``__init__`` code raising, exiting, hanging) becomes the handle's
    ``error``: the run goes on and every record of that explainer is n/a with the reason.

    The constructor runs where ``executor.describe`` runs it (a worker process for the local
    executor); an executor without ``describe`` gets it run in this process.
    """
    given: dict[str, tuple[type, dict[str, Any], dict[str, Any]]] = {}
    for name, values in params.items():
        cls = registry.entry("explainer", name).cls
        try:
            resolved = resolve_params("explainer", name, cls.default_params, cls.param_specs, dict(values))
        except (TypeError, ValueError) as exc:
            raise XaibenchError(str(exc)) from None
        given[name] = (cls, dict(values), resolved)
    describe = getattr(executor, "describe", None)
    if describe is None:
        describe = InProcessExecutor(registry).describe
    handles: dict[str, ExplainerHandle] = {}
    for name, (cls, values, resolved) in given.items():
        status, detail = describe(ExplainerSpec(name, values), timeout)
        if status == "invalid":
            raise XaibenchError(str(detail))
        error = None if status == "ok" else str(detail)
        if status == "ok" and not (isinstance(detail, dict) and all(isinstance(k, str) for k in detail)):
            error = "explainer constructor left parameters that are not a dict of names"
        handles[name] = ExplainerHandle(
            name=name,
            version=str(cls.version),
            kind=str(cls.kind),
            params=dict(detail) if error is None else resolved,
            reference_only=bool(cls.reference_only),
            tuned_on_benchmark=bool(cls.tuned_on_benchmark),
            modalities=tuple(cls.modalities),
            executor=executor,
            timeout=timeout,
            error=error,
        )
    return handles


def plain_reply(value: Any, depth: int = 0) -> Any:
    """A worker's answer as :func:`xaibench.runner.isolation.wire.encode` takes it: tensors as numpy arrays,
    containers rebuilt as dicts and lists (nesting deeper than 5 is left as it is)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if depth > 4:
        return value
    if isinstance(value, dict):
        return {k: plain_reply(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_reply(v, depth + 1) for v in value]
    return value


def encode_reply(message: tuple[Any, ...]) -> bytes:
    """A worker's reply (``("ready",)``, ``("done", outputs, error, timed_out)``, ``("described",
    description)``) as bytes of :mod:`xaibench.runner.isolation.wire`. One that cannot be encoded (an output
    or parameter the format does not hold) becomes its job's failure: ``"explainer output cannot
    be sent: <why>"`` (``"explainer parameters ..."`` for a description)."""
    try:
        return wire.encode(message)
    except Exception as exc:  # noqa: BLE001 - whatever plugin objects raise while being read
        what = "parameters" if message[0] == "described" else "output"
        reason = f"explainer {what} cannot be sent: {type(exc).__name__}: {_first_line(exc)}"[:300]
        fallback = ("described", ("failed", reason)) if what == "parameters" else ("done", None, reason, False)
        return wire.encode(fallback)
