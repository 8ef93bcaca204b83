"""The canonical render of a text explanation (DESIGN 5, 12): its tokens, each with one value.

A text explanation is a ``(1, L)`` map, one value per token; people see it as the sample's tokens
highlighted by that value. Render ``xaibench-token-highlight`` version 1, step by step:

1. The map's first ``n`` values are kept, ``n`` the sample's real tokens (padding dropped), at most
   :data:`MAX_TOKENS`; the tokens' text is kept with them, each cut to :data:`MAX_TOKEN_CHARS`
   characters (a longer one ends in ``…``).
2. Positive part, then min-max scaling to [0, 1] over those ``n`` values (as the image overlay,
   :func:`xaibench.pasta.render.render_overlay`: negative evidence is dropped; a constant map
   becomes all zeros).
3. Each value rounded to :data:`DECIMALS` decimals: 1 is the sample's most relevant token, 0 its
   least.

The values are data in the submission entry (no file); the site draws them
(:mod:`xaibench.site.views.explainers`). A change of output bumps :data:`HIGHLIGHT_VERSION`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DECIMALS",
    "HIGHLIGHT_NAME",
    "HIGHLIGHT_VERSION",
    "MAX_EXAMPLES",
    "MAX_TOKENS",
    "MAX_TOKEN_CHARS",
    "TokenHighlight",
    "highlight_id",
    "token_highlight",
]

HIGHLIGHT_NAME = "xaibench-token-highlight"
HIGHLIGHT_VERSION = "1"
DECIMALS = 3
MAX_TOKENS = 1024
"""The most tokens one example keeps (the first ones): a bound on a submission's size."""
MAX_TOKEN_CHARS = 64
"""The most characters of one token's text kept (a longer one is cut and ends in ``…``)."""
MAX_EXAMPLES = 64
"""The most text examples one track of a submission keeps (the first ones): with :data:`MAX_TOKENS`
a bound on a submission's size."""


def highlight_id() -> str:
    """``name/version`` of the token highlight (an example entry's ``render``)."""
    return f"{HIGHLIGHT_NAME}/{HIGHLIGHT_VERSION}"


@dataclass(frozen=True)
class TokenHighlight:
    """One text example as rendered: ``tokens`` (text) and one ``values`` entry per token in
    [0, 1] (1: the most relevant token), ``truth`` the positions (0-based, increasing) of the
    tokens inside the ground-truth mask, ``None`` without a ground truth."""

    tokens: list[str]
    values: list[float]
    truth: list[int] | None


def _cut(token: str) -> str:
    text = str(token)
    return text if len(text) <= MAX_TOKEN_CHARS else text[: MAX_TOKEN_CHARS - 1] + "…"


def token_highlight(
    explanation: np.ndarray, tokens: Sequence[str], truth_mask: np.ndarray | None = None
) -> TokenHighlight:
    """The version-1 highlight (see the module doc) of ``explanation`` (``(1, L)`` or ``(L,)``, any
    real scale) over ``tokens`` (the sample's real tokens, ``n <= L``); ``truth_mask`` (``(1, L)``
    or ``(L,)``, truthy inside) marks the ground-truth tokens."""
    values = np.asarray(explanation, dtype=np.float64).reshape(-1)
    n = min(len(tokens), MAX_TOKENS)
    if n > len(values):
        raise ValueError(f"token_highlight: {len(tokens)} tokens but a map of {len(values)} values")
    kept = values[:n]
    if not np.all(np.isfinite(kept)):
        raise ValueError("token_highlight: the map has NaN or inf values")
    positive = np.maximum(kept, 0.0)
    lo, hi = (float(positive.min()), float(positive.max())) if n else (0.0, 0.0)
    flat = hi - lo <= 1e-12 * max(1.0, abs(hi))
    scaled = np.zeros(n) if flat else (positive - lo) / (hi - lo)
    marked: list[int] | None = None
    if truth_mask is not None:
        inside = np.asarray(truth_mask).reshape(-1)[:n].astype(bool)
        marked = [int(k) for k in np.flatnonzero(inside)]
    return TokenHighlight(
        tokens=[_cut(t) for t in tokens[:n]],
        values=[round(float(v), DECIMALS) for v in scaled],
        truth=marked,
    )
