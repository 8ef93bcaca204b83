"""The planted-cue test's reference maps (DESIGN 9): the cue's region, or the object's.

``planted`` with ``region="cue"`` returns the mask of the sample's planted cue (the box in
``Sample.meta["cue_box"]``, as ``shapes-shortcut`` records its watermark), with
``region="object"`` the object's ground-truth mask; both resized to the input as ``oracle`` does.
A faithfulness metric that measures the model ranks the region the model relies on above the
other (``xaibench meta``). A reference, not a method: never ranked; a sample without a planted
cue or without a mask gets n/a.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

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
