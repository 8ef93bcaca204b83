"""The planted-cue test: does a faithfulness metric follow what the model relies on? (DESIGN 9)

On a track whose samples carry a planted cue (``shapes-shortcut``: a class-coloured watermark in a
class-dependent corner, ``Sample.meta["cue_box"]``):

1. **Reliance** (:func:`~xaibench.explainers.planted.reliance`, also measured by every run of such
   a track: ``provenance["cue_reliance"]``): the model's accuracy on the clean images, with the cue painted
   over, and with the object painted over. Painting over fills the region with the per-channel
   median of a ring of pixels around it (3 px wide, outside both regions): the background the
   region hides, as far as the image tells.
2. **Verdict** (:func:`planted_validity`): the built-in reference explainer ``planted`` gives the
   cue's mask and the object's mask as maps; the runner scores both with the track's faithfulness
   metrics. Where the model relies on the cue more than on the object (painting the cue over
   costs more accuracy), a metric is **valid** when the paired 95 % interval of (cue - object),
   signed so that higher is better, lies above 0 (it ranks ``cue`` above ``object``),
   **invalid** when it lies below 0, and untested on a tie (the interval contains 0). The
   reverse reliance reverses the test; equal reliance leaves it untested.

Intervals are seeded by ``derive_seed(seed, "meta", track, metric, "planted")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from xaibench.explainers.planted import relies_on
from xaibench.metaeval.assess import Validity
from xaibench.metaeval.rankings import signed
from xaibench.seeds import derive_seed
from xaibench.stats import bootstrap_ci

TEST = "planted-cue"
FIGURE = "cue - object"


def planted_validity(
    cue: Mapping[str, float | None],
    obj: Mapping[str, float | None],
    direction: str,
    figures: Mapping[str, float],
    *,
    seed: int,
    track: str,
    metric: str,
) -> Validity:
    """The planted-cue verdict on one (track, metric) from its per-sample values on the ``cue``
    and ``object`` maps and the model's reliance ``figures`` (see the module doc)."""
    ids = sorted(s for s, v in cue.items() if v is not None and obj.get(s) is not None)
    details: dict[str, Any] = {"reliance": dict(figures), "relies_on": relies_on(figures), "n": len(ids)}
    if len(ids) < 2:
        return Validity(details={**details, "reason": f"too few samples scored on both maps (n = {len(ids)})"})
    difference = signed(np.array([float(cue[s]) - float(obj[s]) for s in ids]), direction)  # type: ignore[arg-type]
    low, high = bootstrap_ci(difference.tolist(), derive_seed(seed, "meta", track, metric, "planted"))
    expected = details["relies_on"]
    if expected is None or low <= 0 <= high:
        verdict = "untested"
    else:
        ranks_cue_first = low > 0
        verdict = "valid" if ranks_cue_first == (expected == "cue") else "invalid"
    return Validity(verdict, TEST, FIGURE, float(difference.mean()), float(low), float(high), details)
