"""Computing explanations for a track: cached, batched, guarded per sample."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.api import Explainer
from xaibench.runner.cache import ExplanationCache, explanation_key
from xaibench.runner.executors import (
    Executor,
    ExplainerHandle,
    ExplainerSpec,
    ExplainTask,
    InProcessExecutor,
    ModelSpec,
)
from xaibench.runner.guard import check_concepts, check_saliency
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


def track_model_spec(track: TrackContext) -> ModelSpec | None:
    """How a worker rebuilds ``track``'s model (``None`` for a track without a model)."""
    if track.model is None or track.inputs is None:
        return None
    return ModelSpec(
        name=track.spec.model,
        params=dict(track.spec.model_params),
        identity=track.model.identity,
        device=str(track.inputs.device),
    )


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
    keys = {
        s.id: explanation_key(
            explainer=explainer.name,
            version=explainer.version,
            params=explainer.params,
            model_identity=model.identity,
            sample_id=s.id,
            sample_digest=track.digests[s.id],
            seed=seed,
        )
        for s in track.samples
    }
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

    def task(indices: list[int], limit: float | None) -> ExplainTask:
        return ExplainTask(
            model=model_spec,
            explainer=explainer_spec,
            inputs=all_inputs[indices].detach().cpu().numpy(),
            targets=np.asarray(track.targets[indices], dtype=np.int64),
            samples=[track.samples[i] for i in indices],
            seed=seed,
            batch_seed=derive_seed(seed, explainer.name, *(track.samples[i].id for i in indices)),
            timeout=limit,
        )

    def keep(results: list[tuple[int, Any, str | None]]) -> None:
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
                if cache is not None:
                    cache.put(keys[sample_id], value)

    started = time.perf_counter()
    timeout = timeout or None
    chunks = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
    retry: list[tuple[int, float | None, str | None]] = []  # (row, timeout, note on a timeout)
    retried: list[list[int]] = []
    for chunk, outcome in zip(chunks, executor.run([task(c, timeout) for c in chunks]), strict=True):
        if outcome.error is None:
            assert outcome.outputs is not None
            keep(list(zip(chunk, outcome.outputs, [None] * len(chunk), strict=True)))
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
        results: list[tuple[int, Any, str | None]] = []
        for (i, _, note), o in zip(retry, singles, strict=True):
            error = o.error
            if error is not None and o.timed_out and note is not None:
                error = f"{error} ({note})"
            results.append((i, None if error else o.outputs[0], error))  # type: ignore[index]
        keep(results)
        if on_progress:
            on_progress(sum(len(c) for c in retried))
    out.seconds = time.perf_counter() - started
    return out
