"""Computing explanations for a track: cached, batched, guarded per sample."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaibench.api import Explainer
from xaibench.runner.cache import ExplanationCache, explanation_key
from xaibench.runner.executors import Executor, ExplainerSpec, ExplainTask, InProcessExecutor, ModelSpec
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


def explain_track(
    track: TrackContext,
    explainer: Explainer,
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

    Batches run on ``executor`` (default: in this process, for trusted code). A batch that
    fails is retried sample by sample, once, so one bad sample cannot take the others down;
    each failure becomes an n/a reason for that sample.
    """
    model, all_inputs, size = track.model, track.inputs, track.input_size
    if model is None or all_inputs is None or size is None:
        raise ValueError(f"track {track.spec.name!r} has no model to explain")
    out = Explanations()
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
        hit = cache.get(keys[sample.id]) if cache is not None else None
        if hit is not None:
            out.values[sample.id] = hit
            out.cached += 1
            if on_progress:
                on_progress(1)
        else:
            todo.append(i)

    model_spec = ModelSpec(
        name=track.spec.model,
        params=dict(track.spec.model_params),
        identity=model.identity,
        device=str(all_inputs.device),
    )
    explainer_spec = ExplainerSpec(explainer.name, dict(explainer.params))
    if executor is None:
        executor = InProcessExecutor()
    if isinstance(executor, InProcessExecutor):  # this process: the track's own model and explainer
        executor.adopt(model=model, explainer=explainer)

    def task(indices: list[int]) -> ExplainTask:
        return ExplainTask(
            model=model_spec,
            explainer=explainer_spec,
            inputs=all_inputs[indices].detach().cpu().numpy(),
            targets=np.asarray(track.targets[indices], dtype=np.int64),
            samples=[track.samples[i] for i in indices],
            seed=seed,
            batch_seed=derive_seed(seed, explainer.name, *(track.samples[i].id for i in indices)),
            timeout=timeout,
        )

    started = time.perf_counter()
    chunks = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
    for chunk, outcome in zip(chunks, executor.run([task(c) for c in chunks]), strict=True):
        if outcome.error is None:
            assert outcome.outputs is not None
            results: list[tuple[int, Any, str | None]] = list(
                zip(chunk, outcome.outputs, [None] * len(chunk), strict=True)
            )
        elif len(chunk) == 1:
            results = [(chunk[0], None, outcome.error)]
        else:  # retried sample by sample, once
            singles = executor.run([task([i]) for i in chunk])
            results = [
                (i, None if o.error else o.outputs[0], o.error)  # type: ignore[index]
                for i, o in zip(chunk, singles, strict=True)
            ]
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
        if on_progress:
            on_progress(len(chunk))
    out.seconds = time.perf_counter() - started
    return out
