"""Text examples as highlighted tokens (DESIGN 12): what the explainer page draws of an example
entry holding ``tokens`` and ``values`` (:mod:`xaibench.pasta.highlight`).

The site's Content-Security-Policy allows no inline ``style`` attribute, so a token's value is
shown by one of :data:`BINS` CSS classes, ``hl-0`` (value below 0.1: no colour) to ``hl-9``
(0.9 and above: the strongest), whose background opacity grows with the bin (``site.css``); a
token inside the ground-truth mask also gets the class ``gt`` (underlined). The text itself is
left to the template, which escapes it (Jinja2's autoescape).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

from xaibench.pasta.highlight import HIGHLIGHT_NAME

BINS = 10
"""Highlight classes: value v in [0, 1] -> ``hl-<min(BINS - 1, floor(BINS * v))>``."""


class TokenView(TypedDict):
    text: str
    value: float
    """The token's value in [0, 1] (1: the sample's most relevant token)."""
    css: str
    """Its classes: ``tok hl-<bin>``, plus ``gt`` inside the ground truth."""


class LegendBin(TypedDict):
    css: str
    label: str
    """The bin's range of values, ``0.0-0.1`` ... ``0.9-1.0``."""


def highlight_bin(value: float) -> int:
    """The bin (0 to :data:`BINS` - 1) of a value in [0, 1]; a value out of range or not finite is
    clipped into it (NaN: 0)."""
    v = float(value)
    if not math.isfinite(v):
        v = 1.0 if v > 0 else 0.0
    return min(BINS - 1, max(0, math.floor(BINS * v)))


def token_views(example: Mapping[str, Any]) -> list[TokenView] | None:
    """The tokens of a text example entry as the page draws them; ``None`` for any other entry
    (an overlay, a sentence, n/a) or one whose tokens and values do not pair up."""
    tokens, values = example.get("tokens"), example.get("values")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        return None
    truth = example.get("truth")
    inside = {t for t in truth if isinstance(t, int)} if isinstance(truth, list) else set()
    out: list[TokenView] = []
    for k, (text, value) in enumerate(zip(tokens, values, strict=True)):
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
        css = f"tok hl-{highlight_bin(number)}" + (" gt" if k in inside else "")
        out.append({"text": str(text), "value": number, "css": css})
    return out


def is_text_example(example: Mapping[str, Any]) -> bool:
    """Whether an example entry is a text one: it holds tokens, or (n/a) names the token highlight."""
    return "tokens" in example or str(example.get("render", "")).startswith(f"{HIGHLIGHT_NAME}/")


def legend() -> list[LegendBin]:
    """The legend's swatches, one per bin, lowest first."""
    return [{"css": f"tok hl-{b}", "label": f"{b / BINS:.1f}-{(b + 1) / BINS:.1f}"} for b in range(BINS)]
