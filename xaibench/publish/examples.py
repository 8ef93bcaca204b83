"""Example overlays for submissions: the first few explanations of each track, as people see them.

The runner hands over, per track and explainer, the explanations of the first
:data:`~xaibench.runner.config.EXAMPLES_PER_TRACK` samples (:class:`~xaibench.runner.examples.ExampleSet`);
``xaibench run`` then stores their canonical overlays (:func:`xaibench.pasta.render.render_overlay`)
as JPEG files next to the submissions::

    <submissions>/assets/<explainer>@<params digest>/<track>/<k>-<sample id>.jpg

and lists them in the submission (``tracks.<track>.examples``) by relative path (``jpeg``) and
sha256, so the site builder can check that a file is the one the run wrote. The overlays are
224-px photographs: JPEG (quality :data:`JPEG_QUALITY`, optimised Huffman tables, baseline) keeps
them at about a sixth of the PNG's size, deterministically (the same image gives the same bytes).
Older submissions list PNG files (``png``, ``<k>-<sample id>.png``); they are still read and shown.

The explainer's name and digest must be plain names (:func:`xaibench.safe_names.checked_name`: registration makes them
so); the track name and sample id are mapped to file names (:func:`xaibench.safe_names.file_name`:
themselves when plain, escaped with ``@XX`` otherwise), so every file lies under ``assets/`` and
two tracks or samples never share one. Concept explanations are shown as their canonical sentence
(:func:`xaibench.pasta.render.concept_sentence`), stored in the entry as ``sentence``, with no file.
Text explanations (DESIGN 12) are shown as their tokens highlighted
(:func:`xaibench.pasta.highlight.token_highlight`), stored in the entry as data, with no file:
``tokens`` (the sample's real tokens as text), ``values`` (one per token in [0, 1], 3 decimals; 1
the most relevant) and, where the sample has a ground truth, ``truth`` (the positions of the
tokens inside its mask).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from xaibench.files import write_bytes_atomic
from xaibench.pasta.highlight import MAX_EXAMPLES, highlight_id, token_highlight
from xaibench.pasta.render import concept_sentence, render_id, render_overlay
from xaibench.runner import ExampleSet
from xaibench.safe_names import checked_name, file_name

ASSETS_DIR = "assets"
JPEG_QUALITY = 85
"""The overlays' JPEG quality (with ``optimize=True``, baseline, 4:2:0 chroma as Pillow's default)."""


def example_folder(explainer_block: Mapping[str, Any], track: str) -> str:
    """Relative (to the submissions folder) folder of one explainer's examples on one track."""
    name = checked_name(explainer_block["name"], kind="explainer")
    digest = checked_name(explainer_block["params_digest"], kind=f"explainer {name}: params digest")
    return f"{ASSETS_DIR}/{name}@{digest}/{file_name(track, kind='track')}"


def example_file(position: int, sample_id: str) -> str:
    """The file name of the overlay of the example at ``position`` (``<k>-<sample id>.jpg``)."""
    return f"{int(position)}-{file_name(sample_id, kind='sample id')}.jpg"


def jpeg_bytes(image: np.ndarray) -> bytes:
    """Deterministic JPEG encoding of an ``H x W x 3`` uint8 image: quality :data:`JPEG_QUALITY`,
    optimised Huffman tables, baseline (not progressive), no metadata."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), mode="RGB").save(
        buf, format="JPEG", quality=JPEG_QUALITY, optimize=True, progressive=False
    )
    return buf.getvalue()


def render_examples(examples: ExampleSet, folder: Path) -> list[dict[str, Any]]:
    """Write the overlays of one explainer's examples on one track; return their submission entries.

    An example whose explanation failed gets an entry with ``na_reason`` and no file; concept
    weights become their canonical sentence, a text map its highlighted tokens (no file either;
    the first :data:`~xaibench.pasta.highlight.MAX_EXAMPLES` examples of a text track only).
    """
    rel_folder = example_folder(examples.explainer, examples.track)
    text = examples.modality == "text" and examples.kind == "saliency"
    entries: list[dict[str, Any]] = []
    for position, example in enumerate(examples.examples[:MAX_EXAMPLES] if text else examples.examples):
        entry: dict[str, Any] = {
            "sample_id": example.sample_id,
            "target": example.target,
            "target_name": example.target_name,
            "render": highlight_id() if text else render_id(examples.kind),
        }
        if example.explanation is None:
            entry["na_reason"] = example.na_reason or "no explanation"
        elif text:
            entry.update(token_entry(np.asarray(example.explanation), example.tokens or (), example.truth))
        elif examples.kind == "concept":
            entry["sentence"] = concept_sentence(example.explanation, target=example.target_name)
        else:
            data = jpeg_bytes(render_overlay(example.image, np.asarray(example.explanation)))
            rel = f"{rel_folder}/{example_file(position, example.sample_id)}"
            write_bytes_atomic(folder / rel, data)
            entry.update(jpeg=rel, sha256=hashlib.sha256(data).hexdigest())
        entries.append(entry)
    return entries


def token_entry(explanation: np.ndarray, tokens: Sequence[str], truth: np.ndarray | None) -> dict[str, Any]:
    """The entry fields of one text example: ``tokens``, ``values`` and, with a ground truth,
    ``truth`` (:func:`xaibench.pasta.highlight.token_highlight`)."""
    shown = token_highlight(explanation, tokens, truth)
    entry: dict[str, Any] = {"tokens": shown.tokens, "values": shown.values}
    if shown.truth is not None:
        entry["truth"] = shown.truth
    return entry


def write_examples(sets: Iterable[ExampleSet], folder: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Render every example set of a run; returns the entries by (track, explainer name)."""
    return {(s.track, s.explainer["name"]): render_examples(s, folder) for s in sets}
