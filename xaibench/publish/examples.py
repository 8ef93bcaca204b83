"""Example overlays for submissions: the first few explanations of each track, as people see them.

``run`` stores, per track and explainer, the canonical overlay (:func:`xaibench.pasta.render.render_overlay`)
of the first :data:`EXAMPLES_PER_TRACK` samples as PNG files next to the submissions::

    <submissions>/assets/<explainer>@<params digest>/<track>/<k>-<sample id>.png

and lists them in the submission (``tracks.<track>.examples``) by relative path and sha256, so
the site builder can check that a file is the one the run wrote. Names are sanitised to
``[A-Za-z0-9_.@+-]``. Concept explanations are shown as their canonical sentence
(:func:`xaibench.pasta.render.concept_sentence`), stored in the entry as ``sentence``, with no file.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from xaibench.api import Explainer
from xaibench.files import write_bytes_atomic
from xaibench.pasta.render import concept_sentence, render_id, render_overlay
from xaibench.runner.cache import ExplanationCache
from xaibench.runner.track import TrackContext

EXAMPLES_PER_TRACK = 4
ASSETS_DIR = "assets"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_name(text: str, limit: int = 80) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_.+-]`` replaced by ``_`` (no leading dot)."""
    out = _UNSAFE.sub("_", str(text))[:limit]
    return "_" + out[1:] if out.startswith(".") else out or "_"


def example_folder(explainer_block: Mapping[str, Any], track: str) -> str:
    """Relative (to the submissions folder) folder of one explainer's examples on one track."""
    owner = f"{safe_name(explainer_block['name'])}@{safe_name(explainer_block['params_digest'])}"
    return f"{ASSETS_DIR}/{owner}/{safe_name(track)}"


def png_bytes(image: np.ndarray) -> bytes:
    """Deterministic PNG encoding of an ``H x W x 3`` uint8 image."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), mode="RGB").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def save_examples(
    track: TrackContext,
    explainer: Explainer,
    explainer_block: Mapping[str, Any],
    have: Mapping[str, Any],
    folder: Path,
    *,
    cache: ExplanationCache | None,
    seed: int,
    timeout: float | None,
    k: int = EXAMPLES_PER_TRACK,
    failed: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Render and write the overlays of the first ``k`` samples; return their submission entries.

    ``have`` holds explanations already computed this run (sample id -> map) and ``failed``
    the reasons of those that failed this run (not retried); the others are read from the
    explanation cache or, without one, computed again (``k`` samples only). A sample whose
    explanation failed gets an entry with ``na_reason`` and no file.
    """
    if k <= 0 or explainer.kind not in ("saliency", "concept"):
        return []
    from xaibench.runner.explain import explain_track

    chosen = track.samples[:k]
    maps: dict[str, Any] = {s.id: have[s.id] for s in chosen if s.id in have}
    failures: dict[str, str] = dict(failed or {})
    missing = {s.id for s in chosen if s.id not in maps and s.id not in failures}
    if missing:
        more = explain_track(track, explainer, cache=cache, seed=seed, batch_size=k, timeout=timeout, only=missing)
        maps.update(more.values)
        failures.update(more.failures)
    index = track.sample_index()
    labels = list(getattr(track.model, "label_names", ()) or ())
    rel_folder = example_folder(explainer_block, track.spec.name)
    entries: list[dict[str, Any]] = []
    for position, sample in enumerate(chosen):
        target = int(track.targets[index[sample.id]])
        name = labels[target] if 0 <= target < len(labels) else None
        entry: dict[str, Any] = {
            "sample_id": sample.id,
            "target": target,
            "target_name": name,
            "render": render_id(explainer.kind),
        }
        if sample.id not in maps:
            entry["na_reason"] = failures.get(sample.id, "no explanation")
            entries.append(entry)
            continue
        if explainer.kind == "concept":
            entry["sentence"] = concept_sentence(maps[sample.id], target=name)
            entries.append(entry)
            continue
        data = png_bytes(render_overlay(sample.image, np.asarray(maps[sample.id])))
        rel = f"{rel_folder}/{position}-{safe_name(sample.id)}.png"
        write_bytes_atomic(folder / rel, data)
        entry.update(png=rel, sha256=hashlib.sha256(data).hexdigest())
        entries.append(entry)
    return entries
