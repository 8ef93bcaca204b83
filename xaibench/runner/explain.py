"""Computing explanations for a track: cached, batched, guarded per sample."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaibench.api import ExplainContext, Explainer
from xaibench.runner.cache import ExplanationCache, explanation_key
from xaibench.runner.guard import call_with_limit, check_concepts, check_saliency
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
) -> Explanations:
    """Explain every sample (or the ids in ``only``) of ``track``.

    A batch that raises is retried sample by sample so one bad sample cannot take
    the others down; each failure becomes an n/a reason for that sample.
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

    def run(indices: list[int]) -> list[Any]:
        batch_seed = derive_seed(seed, explainer.name, *(track.samples[i].id for i in indices))
        torch.manual_seed(batch_seed)
        np.random.seed(batch_seed % 2**32)
        inputs = all_inputs[indices]
        targets = torch.as_tensor(track.targets[indices])
        context = ExplainContext(samples=[track.samples[i] for i in indices])
        result = call_with_limit(lambda: explainer.explain(model, inputs, targets, seed=seed, context=context), timeout)
        if explainer.kind == "concept":
            result = list(result)
        elif isinstance(result, torch.Tensor):
            result = result.detach().cpu().numpy()
        if len(result) != len(indices):
            raise ValueError(f"explainer returned {len(result)} explanations for {len(indices)} inputs")
        return list(result)

    started = time.perf_counter()
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        try:
            results: list[tuple[int, Any, str | None]] = [(i, r, None) for i, r in zip(chunk, run(chunk), strict=True)]
        except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
            if len(chunk) == 1:
                results = [(chunk[0], None, _reason(exc))]
            else:
                results = []
                for i in chunk:
                    try:
                        results.append((i, run([i])[0], None))
                    except Exception as inner:  # noqa: BLE001 - isolate plugin and user code failures
                        results.append((i, None, _reason(inner)))
        for i, raw, error in results:
            sample_id = track.samples[i].id
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


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"explainer raised {type(exc).__name__}: {text}"[:300]
