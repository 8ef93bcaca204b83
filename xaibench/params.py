"""Declarative parameter checks for component authors: list a :class:`Param` per parameter.

Values are coerced to one canonical type (so ``"16"`` from a command line and ``16``
give the same cache key) and checked against a range or a set of choices; a bad
value raises ``ValueError`` naming the explainer, the parameter and the rule.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is ``bool``, ``int``, ``float`` or ``str``; ``low``/``high``
    bound numbers (inclusive), ``choices`` bound strings, ``optional`` allows ``None``."""

    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False

    def rule(self) -> str:
        if self.kind is bool:
            text = "a boolean"
        elif self.kind is str:
            text = f"one of {', '.join(repr(c) for c in self.choices)}"
        else:
            noun = "an integer" if self.kind is int else "a number"
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            text = f"{noun} in [{lo}, {hi}]"
        return text + (" or null" if self.optional else "")

    def coerce(self, value: Any) -> Any:
        """The canonical value, or raise ``ValueError`` (message without context)."""
        if value is None:
            if self.optional:
                return None
            raise ValueError
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            raise ValueError
        if self.kind is str:
            if isinstance(value, str) and value in self.choices:
                return value
            raise ValueError
        if isinstance(value, bool):
            raise ValueError
        number = float(value) if isinstance(value, str) else value
        if not isinstance(number, numbers.Real) or not math.isfinite(number):
            raise ValueError
        if self.kind is int:
            if float(number) != int(number):
                raise ValueError
            number = int(number)
        else:
            number = float(number)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            raise ValueError
        return number


def check_params(
    owner: str, specs: Mapping[str, Param], params: Mapping[str, Any], *, kind: str = "explainer"
) -> dict[str, Any]:
    """Coerce and check every parameter that has a spec; raise one clear error per bad value.

    ``owner`` is the component's name and ``kind`` its kind (``explainer``, ``metric``, ...):
    both appear in the message.
    """
    out = dict(params)
    for key, spec in specs.items():
        if key not in out:
            continue
        try:
            out[key] = spec.coerce(out[key])
        except (TypeError, ValueError):
            raise ValueError(f"{kind} {owner!r}: parameter {key!r} must be {spec.rule()}, got {out[key]!r}") from None
    return out


def resolve_params(
    kind: str,
    owner: str,
    defaults: Mapping[str, Any],
    specs: Mapping[str, Param],
    given: Mapping[str, Any],
) -> dict[str, Any]:
    """The parameters of one component: ``given`` over ``defaults``, names checked, values coerced.

    Every parametrised component (explainer, metric, encoder) is checked here, once, by its base
    class: an unknown name raises ``ValueError`` listing the known ones; a value that breaks its
    :class:`Param` raises ``ValueError`` naming the rule.
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise ValueError(f"{kind} {owner!r}: unknown parameter(s) {unknown}; known: {known}")
    return check_params(owner, specs, {**defaults, **given}, kind=kind)


def parse_value(raw: str) -> Any:
    """A ``KEY=VALUE`` option's value: ``raw`` parsed as JSON when it is JSON, else the string
    itself. Hostile JSON raises ``ValueError`` saying what is wrong (an integer over Python's
    4,300-digit conversion limit, nesting deeper than the stack)."""
    import json
    import sys

    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
    except RecursionError:
        raise ValueError("is JSON nested too deeply") from None
    except ValueError:
        raise ValueError(f"holds a number of over {sys.get_int_max_str_digits()} digits") from None
