"""The planted-cue test's reference maps (DESIGN 9): the cue's region, or the object's.

``planted`` with ``region="cue"`` returns the mask of the sample's planted cue (the box in
``Sample.meta["cue_box"]``, as ``shapes-shortcut`` records its watermark), with
``region="object"`` the object's ground-truth mask; both resized to the input as ``oracle`` does.
A faithfulness metric that measures the model ranks the region the model relies on above the
other (``xaibench meta``). A reference, not a method: never ranked; a sample without a planted
cue or without a mask gets n/a.

The model's reliance on the cue (:func:`reliance`: its accuracy with the cue painted over against
with the object painted over; :func:`relies_on`) lives here beside the masks: every run measures
it on a track whose samples carry a cue (the track's ``provenance["cue_reliance"]``), and where
the model relies on the cue the board reports alignment to the object as a diagnosis, out of the
overall rank (DESIGN 10); ``xaibench meta``'s planted-cue test uses the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from scipy.ndimage import binary_dilation

from xaibench.api import Explainer, Model, Sample
from xaibench.imaging import resize_bilinear
from xaibench.kit import Param


def cue_mask(sample: Sample) -> np.ndarray:
    """The planted cue's mask at the image's size (``ValueError`` when the sample has none)."""
    box = sample.meta.get("cue_box")
    if not (isinstance(box, (list, tuple)) and len(box) == 4):
        raise ValueError(f"sample {sample.id!r} has no planted cue (meta 'cue_box')")
    x0, y0, x1, y1 = (int(v) for v in box)
    mask = np.zeros(sample.image.shape[:2], dtype=bool)
    mask[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = True
    return mask


def object_mask(sample: Sample) -> np.ndarray:
    """The object's ground-truth mask (``ValueError`` when the sample has none)."""
    truth = sample.ground_truth.binary() if sample.ground_truth is not None else None
    if truth is None:
        raise ValueError(f"sample {sample.id!r} has no ground-truth mask")
    return np.asarray(truth, dtype=bool)


RING = 3  # pixels around a region whose median colour paints it over


def paint_over(image: np.ndarray, region: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``image`` with ``region`` filled by the per-channel median of the ring of :data:`RING`
    pixels around it that lies outside ``region`` and ``other`` (same dtype as ``image``)."""
    ring = binary_dilation(region, iterations=RING) & ~region & ~other
    if not ring.any():
        ring = ~region & ~other
    out = np.array(image, copy=True)
    fill = np.median(out[ring].astype(np.float64), axis=0)
    out[region] = fill.astype(out.dtype)
    return out


def reliance(samples: Sequence[Sample], predict: Any, clean: Sequence[int] | None = None) -> dict[str, float]:
    """Accuracy of ``predict`` (a list of images -> predicted classes) on ``samples`` with labels
    and a planted cue: clean, cue painted over, object painted over (fractions in [0, 1]).
    ``clean``: the predicted classes of all ``samples`` as they are, where the caller has them
    (a track's clean forward pass), so they are not predicted again."""
    rows = [
        i for i, s in enumerate(samples) if s.label is not None and "cue_box" in s.meta and s.ground_truth is not None
    ]
    kept = [samples[i] for i in rows]
    if not kept:
        return {}
    labels = np.array([s.label for s in kept])
    cues = [cue_mask(s) for s in kept]
    objects = [object_mask(s) for s in kept]
    as_is = predict([s.image for s in kept]) if clean is None else [clean[i] for i in rows]
    no_cue = [paint_over(s.image, c, o) for s, c, o in zip(kept, cues, objects, strict=True)]
    no_object = [paint_over(s.image, o, c) for s, c, o in zip(kept, cues, objects, strict=True)]
    return {
        "n": len(kept),
        "accuracy": float(np.mean(np.asarray(as_is) == labels)),
        "accuracy_without_cue": float(np.mean(np.asarray(predict(no_cue)) == labels)),
        "accuracy_without_object": float(np.mean(np.asarray(predict(no_object)) == labels)),
    }


def relies_on(figures: Mapping[str, float]) -> str | None:
    """``"cue"`` or ``"object"``: the region whose painting over costs more accuracy (``None`` on a tie)."""
    if not figures:
        return None
    without_cue, without_object = figures["accuracy_without_cue"], figures["accuracy_without_object"]
    if without_cue < without_object:
        return "cue"
    if without_object < without_cue:
        return "object"
    return None


class PlantedExplainer(Explainer):
    """The planted cue's mask (``region="cue"``) or the object's (``"object"``); a reference for
    meta-evaluation, not a method (see the module doc)."""

    name = "planted"
    version = "1.0.0"
    description = "The planted cue's region or the object's, as a map; reference for xaibench meta, not a method."
    licence = "Apache-2.0"
    needs = ("ground_truth",)
    reference_only = True
    default_params: ClassVar[dict[str, Any]] = {"region": "cue"}
    param_specs: ClassVar[dict[str, Param]] = {"region": Param(str, choices=("cue", "object"))}

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context=None) -> np.ndarray:
        if context is None:
            raise ValueError("planted needs the samples")
        size = tuple(inputs.shape[-2:])
        pick = cue_mask if self.params["region"] == "cue" else object_mask
        maps = [resize_bilinear(pick(s).astype(np.float32), size, antialias=False) for s in context.samples]
        return np.stack(maps).astype(np.float32)
