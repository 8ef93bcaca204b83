"""Computing explanations for a track: cached, batched, guarded per sample.

Explanations computed in this process (the trusted in-process paths: ``--executor inprocess``,
an :class:`~xaibench.api.Explainer` object called here, PASTA training's generation) and those
computed in sandboxed workers are cached under different keys (:func:`sandboxed`): the former
may come from plugin code imported and run unconfined in this process, so a run whose explainers
run in sandboxed workers never reads them (and they never read that run's).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer, Sample
from xaibench.runner.cost import per_sample
from xaibench.runner.executors import (
    Executor,
    ExplainerHandle,
    ExplainerSpec,
    ExplainTask,
    InProcessExecutor,
    ModelSpec,
    blinded,
)
from xaibench.runner.guard import check_concepts, check_saliency
from xaibench.runner.storage.cache import ExplanationCache, digest, explanation_key
from xaibench.runner.track import TrackContext
from xaibench.seeds import derive_seed


@dataclass
class Explanations:
    """Per-sample explanations of one explainer on one track; ``failures`` holds n/a reasons."""

    values: dict[str, np.ndarray | dict[str, float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    computed: int = 0
    cached: int = 0
    seconds: float = 0.0
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    """Sample id -> what computing its explanation cost (:mod:`xaibench.runner.cost`), whether
    this run computed it or read it from the cache (where it was stored with the map)."""


def track_model_spec(track: TrackContext) -> ModelSpec | None:
    """How a worker rebuilds ``track``'s model (``None`` for a track without a model)."""
    if track.model is None or track.inputs is None:
        return None
    return ModelSpec(
        name=track.spec.model,
        params=dict(track.spec.model_params),
        identity=track.model.identity,
        device=str(track.device),
    )


def sandboxed(explainer: Explainer | ExplainerHandle, executor: Executor | None = None) -> bool:
    """Whether ``explainer``'s maps are computed in sandboxed worker processes: it is the
    :class:`ExplainerHandle` of an executor that is not the in-process one, and ``executor`` (the
    one given to :func:`explain_track`, if any) is not either. An :class:`~xaibench.api.Explainer`
    object was built in this process, and so was its plugin's code: not sandboxed."""
    if not isinstance(explainer, ExplainerHandle) or isinstance(explainer.executor, InProcessExecutor):
        return False
    return executor is None or not isinstance(executor, InProcessExecutor)


def _sample_key(
    track: TrackContext,
    explainer: Explainer | ExplainerHandle,
    model_identity: str,
    sample_id: str,
    seed: int,
    in_sandbox: bool,
) -> str:
    """The explanation-cache key of ``explainer``'s map of ``track``'s sample ``sample_id`` on the
    model ``model_identity`` with ``seed``; computed ``in_sandbox`` or not (keys of their own, see
    the module doc). Sandboxed maps are the ones keyed apart, so entries that sandboxed runs wrote
    before (when the zygote could import plugin code) are not read either."""
    key = explanation_key(
        explainer=explainer.name,
        version=explainer.version,
        params=explainer.params,
        model_identity=model_identity,
        sample_id=sample_id,
        sample_digest=track.digests[sample_id],
        seed=seed,
    )
    return digest({"computed": "in a sandboxed worker", "key": key}) if in_sandbox else key


def cached_costs(
    track: TrackContext,
    explainer: Explainer | ExplainerHandle,
    cache: ExplanationCache,
    seed: int,
    known: Collection[str] = (),
) -> dict[str, dict[str, float]]:
    """Sample id -> the cost stored with each cached explanation of ``explainer`` on ``track``
    (samples without one are left out; those in ``known`` are not read): what a resumed run,
    which explains nothing again, reports."""
    if track.model is None:
        return {}
    out = {}
    for sample in track.samples:
        if sample.id in known:
            continue
        cost = cache.cost(_sample_key(track, explainer, track.model.identity, sample.id, seed, sandboxed(explainer)))
        if cost is not None:
            out[sample.id] = cost
    return out


def explain_track(
    track: TrackContext,
    explainer: Explainer | ExplainerHandle,
    *,
    cache: ExplanationCache | None,
    seed: int,
    batch_size: int = 16,
    timeout: float | None = None,
    only: set[str] | None = None,
    on_progress: Callable[[int], None] | None = None,
    executor: Executor | None = None,
) -> Explanations:
    """Explain every sample (or the ids in ``only``) of ``track``.

    Batches run on ``executor`` (default: in this process, for trusted code); ``explainer`` is an
    :class:`~xaibench.api.Explainer` (in process) or the :class:`ExplainerHandle` of one that runs
    in the executor. Each failure becomes an n/a reason for its samples:

    - a handle whose constructor failed gives its reason to every sample, and nothing runs;
    - a batch that fails is retried sample by sample, once, so one bad sample cannot take the
      others down. The retries of all failed batches go to the executor together (in parallel
      with several workers), after the first pass;
    - a batch that failed by overrunning ``timeout`` costs at most the timeout once more: each of
      its ``k`` samples is retried with ``timeout / k`` seconds (a slow explainer must not cost
      the timeout ``k + 1`` times per batch), and a sample that overruns its share gets the
      reason "killed after <share> s (... shared by the k samples of a batch that timed out)".
    """
    model, all_inputs, size = track.model, track.inputs, track.input_size
    model_spec = track_model_spec(track)
    if model is None or all_inputs is None or size is None or model_spec is None:
        raise ValueError(f"track {track.spec.name!r} has no model to explain")
    out = Explanations()
    failed_to_build = explainer.error if isinstance(explainer, ExplainerHandle) else None
    in_sandbox = executor is not None and sandboxed(explainer, executor)  # no executor: this process
    keys = {s.id: _sample_key(track, explainer, model.identity, s.id, seed, in_sandbox) for s in track.samples}
    todo: list[int] = []
    for i, sample in enumerate(track.samples):
        if only is not None and sample.id not in only:
            continue
        hit = None
        if cache is not None and failed_to_build is None:  # every hit is validated (shape, kind, finite)
            hit = cache.get(keys[sample.id], shape=size, kind=explainer.kind)
        if hit is not None:
            out.values[sample.id] = hit
            out.cached += 1
            known = cache.cost(keys[sample.id]) if cache is not None else None
            if known is not None:
                out.costs[sample.id] = known
            if on_progress:
                on_progress(1)
        else:
            todo.append(i)
    if failed_to_build is not None:  # the constructor failed: nothing to run
        for i in todo:
            out.failures[track.samples[i].id] = failed_to_build
        if on_progress and todo:
            on_progress(len(todo))
        return out

    explainer_spec = ExplainerSpec(explainer.name, dict(explainer.params))
    if executor is None:
        executor = InProcessExecutor()
    if isinstance(executor, InProcessExecutor):  # this process: the track's own model (and explainer)
        executor.adopt(model=model, explainer=explainer if isinstance(explainer, Explainer) else None)

    reference = getattr(explainer, "reference_only", False) is True  # only a reference sees the answer

    def task(indices: list[int], limit: float | None) -> ExplainTask:
        return ExplainTask(
            model=model_spec,
            explainer=explainer_spec,
            inputs=all_inputs[indices].detach().cpu().numpy(),
            targets=np.asarray(track.targets[indices], dtype=np.int64),
            samples=_as_seen([track.samples[i] for i in indices], reference),
            seed=seed,
            batch_seed=derive_seed(seed, explainer.name, *(track.samples[i].id for i in indices)),
            timeout=limit,
        )

    def keep(results: list[tuple[int, Any, str | None]], cost: dict[str, float] | None = None) -> None:
        """Keep the checked outputs; ``cost``: each sample's share of its batch's cost."""
        for i, raw, error in results:
            sample_id = track.samples[i].id
            value = None
            if error is None:
                value, error = check_concepts(raw) if explainer.kind == "concept" else check_saliency(raw, size)
            if error is not None:
                out.failures[sample_id] = error
            else:
                assert value is not None
                out.values[sample_id] = value
                out.computed += 1
                if cost is not None:
                    out.costs[sample_id] = cost
                if cache is not None:
                    cache.put(keys[sample_id], value, cost)

    started = time.perf_counter()
    timeout = timeout or None
    chunks = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
    retry: list[tuple[int, float | None, str | None]] = []  # (row, timeout, note on a timeout)
    retried: list[list[int]] = []
    for chunk, outcome in zip(chunks, executor.run([task(c, timeout) for c in chunks]), strict=True):
        if outcome.error is None:
            assert outcome.outputs is not None
            keep(
                list(zip(chunk, outcome.outputs, [None] * len(chunk), strict=True)),
                per_sample(outcome.cost, len(chunk)),
            )
        elif len(chunk) == 1:
            keep([(chunk[0], None, outcome.error)])
        else:  # retried sample by sample, once, after the first pass
            retried.append(chunk)
            if outcome.timed_out and timeout is not None:
                share = timeout / len(chunk)
                note = f"{timeout:g} s shared by the {len(chunk)} samples of a batch that timed out"
                retry += [(i, share, note) for i in chunk]
            else:
                retry += [(i, timeout, None) for i in chunk]
            continue
        if on_progress:
            on_progress(len(chunk))
    if retry:
        singles = executor.run([task([i], limit) for i, limit, _ in retry])
        for (i, _, note), o in zip(retry, singles, strict=True):
            error = o.error
            if error is not None and o.timed_out and note is not None:
                error = f"{error} ({note})"
            keep([(i, None if error else o.outputs[0], error)], o.cost)  # type: ignore[index]
        if on_progress:
            on_progress(sum(len(c) for c in retried))
    out.seconds = time.perf_counter() - started
    return out


class CachedExplainer:
    """An explainer (or handle) whose calls on the track's own samples are served from, and stored
    in, the explanation cache: what a metric re-running the explainer on another model
    (``model_randomisation``: randomised copies, each with its own identity) computed once is
    reused by the next run (DESIGN 6). Every other attribute is the wrapped explainer's.

    A call is cached only when it passes a context whose samples are the track's, with exactly
    their model inputs and explained classes (so the key's sample id and content digest describe
    the input); each sample is keyed like :func:`explain_track`'s entries, with the model's
    identity and the ``seed`` of the call. Only the samples that miss are explained (in one call),
    and only maps that pass the runner's checks are stored. Any other call goes straight through.
    """

    def __init__(self, explainer: Explainer | ExplainerHandle, track: TrackContext, cache: ExplanationCache) -> None:
        self.explainer = explainer
        self.track = track
        self.cache = cache
        self.index = track.sample_index()
        self.in_sandbox = sandboxed(explainer)

    def __getattr__(self, name: str) -> Any:
        if name == "explainer":  # not set yet (e.g. while copying): no recursion
            raise AttributeError(name)
        return getattr(self.explainer, name)

    def _keys(self, model: Any, inputs: Any, targets: Any, seed: int, context: Any) -> list[str] | None:
        track, explainer = self.track, self.explainer
        samples = getattr(context, "samples", None)
        if (
            explainer.kind != "saliency"
            or track.inputs is None
            or not samples
            or getattr(explainer, "error", None) is not None
            or any(getattr(s, "id", None) not in self.index for s in samples)
        ):
            return None
        rows = [self.index[s.id] for s in samples]
        if any(s is not track.samples[r] for s, r in zip(samples, rows, strict=True)):
            return None  # other sample objects under the track's ids
        given = torch.as_tensor(inputs).detach().to("cpu", torch.float32)
        labels = np.asarray(targets.detach().cpu().numpy() if isinstance(targets, torch.Tensor) else targets)
        expected = track.inputs[rows]
        if given.shape != expected.shape or labels.shape != (len(rows),):
            return None
        if not torch.equal(given, expected.detach().to("cpu", torch.float32)):
            return None
        if not np.array_equal(labels.astype(np.int64), np.asarray(track.targets[rows], dtype=np.int64)):
            return None
        return [_sample_key(track, explainer, str(model.identity), s.id, seed, self.in_sandbox) for s in samples]

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        """The wrapped explainer's ``explain``, through the cache when the call allows it (see the
        class doc); returns float32 ``(B, H, W)`` maps when it went through the cache."""
        keys = self._keys(model, inputs, targets, seed, context)
        if keys is None:
            return self.explainer.explain(model, inputs, targets, seed=seed, context=context)
        size = self.track.input_size
        maps: list[Any] = [self.cache.get(key, shape=size, kind="saliency") for key in keys]
        missing = [i for i, m in enumerate(maps) if m is None]
        if missing:
            sub = ExplainContext(samples=[context.samples[i] for i in missing])
            out = self.explainer.explain(
                model, inputs[missing], torch.as_tensor(targets)[missing], seed=seed, context=sub
            )
            out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else out
            if isinstance(out, list) and out and isinstance(out[0], dict):
                return out  # concept explanations from a saliency explainer: the caller decides
            raw = np.asarray(out)
            if raw.ndim != 3 or raw.shape[0] != len(missing) or raw.shape[1:] != size:
                if len(missing) == len(keys):
                    return raw  # maps the runner would refuse: nothing cached, the caller decides
                raise ValueError(f"explainer returned maps of shape {raw.shape} for {len(missing)} inputs")
            for j, i in enumerate(missing):
                value, error = check_saliency(raw[j], size)
                if error is None:
                    assert value is not None
                    self.cache.put(keys[i], value)
                    maps[i] = value
                else:
                    maps[i] = raw[j].astype(np.float32)
        return np.stack(maps)


def _as_seen(samples: list[Sample], reference: bool) -> list[Sample]:
    """The samples a task carries to the worker: whole for a reference explainer, else without
    ground truth, label and meta (:func:`~xaibench.runner.executors.blinded`), so the answer never
    reaches a method's process at all."""
    return samples if reference else blinded(samples)
