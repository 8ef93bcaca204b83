"""What scoring one sample costs, as a metric states it (``Metric.cost``), from its parameters.

A metric states its cost as data, so that a stand-in carries it (the runner never runs a plugin's
code, :mod:`xaibench.plugins.catalogue`): a :class:`MetricCost`, or a tuple of them when parts of
its work are shared with other metrics separately. Each count is a number or an *expression* over
the metric's parameters and ``pixels`` (``H * W`` of the model input): numbers, parameter names,
``+ - * / // **`` (a constant exponent up to :data:`MAX_EXPONENT`), parentheses, ``len(x)``,
``min(...)`` and ``max(...)``; e.g. ``"steps + 1"``, ``"max(thresholds) // 2"``,
``"pixels // patch_size ** 2 + 1"``. Nothing else parses, so an expression runs no code.

:func:`cost_problem` is the one check of a stated cost (registration refuses a metric whose cost
does not parse or names a parameter it does not have); :func:`evaluate_cost` gives the counts for
the parameters a metric was built with. ``runner/estimate.py`` turns them into a time estimate.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PIXELS = "pixels"
"""The name an expression reads the model input's pixel count (``H * W``) by."""
MAX_EXPONENT = 8
"""The largest exponent an expression may raise to (a constant): ``patch_size ** 2``, not a hang."""
FUNCTIONS: Mapping[str, Callable[..., Any]] = {"len": len, "min": min, "max": max}
_OPERATORS: Mapping[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: lambda a, b: a**b,
}


@dataclass(frozen=True)
class MetricCost:
    """What one sample costs a metric (or one part of its work), each count a number or an
    expression over its parameters and ``pixels`` (see the module doc).

    ``forward_passes``: model forward passes (images) per sample, the clean image included when
    the metric forwards it. ``explanations``: images per sample the metric has the explainer
    explain again (on randomised or shifted models, on perturbed inputs). ``shared``: the name
    of a pass that every metric of a batch stating the same name, with the same parameters,
    reads from one computation (as the robustness family's perturbed pass): counted once."""

    forward_passes: float | str = 0.0
    explanations: float | str = 0.0
    shared: str | None = None


@dataclass(frozen=True)
class PartCost:
    """One evaluated part of a metric's cost: counts per sample and, for a shared pass, the key
    that metrics of one batch compute it once for (``None``: the metric's own)."""

    forward_passes: float
    explanations: float
    shared: tuple[str, str] | None = None


def cost_parts(value: object) -> tuple[MetricCost, ...] | None:
    """``value`` (a ``Metric.cost``) as a tuple of parts; ``None`` when it states no cost."""
    if value is None:
        return None
    if isinstance(value, MetricCost):
        return (value,)
    if isinstance(value, tuple | list) and value and all(isinstance(p, MetricCost) for p in value):
        return tuple(value)
    raise TypeError(f"cost must be a MetricCost or a tuple of them, got {value!r}")


def cost_data(value: object) -> list[dict[str, Any]] | None:
    """``value`` (a ``Metric.cost``) as JSON data, one object per part (``xaibench list metrics
    --json``); ``None`` when it states no cost (or an invalid one)."""
    try:
        parts = cost_parts(value)
    except TypeError:
        return None
    if parts is None:
        return None
    return [{"forward_passes": p.forward_passes, "explanations": p.explanations, "shared": p.shared} for p in parts]


def cost_problem(value: object, params: Iterable[str]) -> str | None:
    """Why ``value`` is not a valid ``Metric.cost`` of a metric with the parameters ``params``,
    else ``None`` (``None`` itself is valid: no cost stated). Registration calls it."""
    try:
        parts = cost_parts(value)
    except TypeError as exc:
        return str(exc)
    names = {*params, PIXELS}
    for part in parts or ():
        if part.shared is not None and (not isinstance(part.shared, str) or not part.shared):
            return f"cost shared must be a non-empty name, got {part.shared!r}"
        for field in ("forward_passes", "explanations"):
            count = getattr(part, field)
            if isinstance(count, bool) or not isinstance(count, int | float | str):
                return f"cost {field} must be a number or an expression, got {count!r}"
            if not isinstance(count, str):
                if not (math.isfinite(count) and count >= 0):
                    return f"cost {field} must be finite and >= 0, got {count!r}"
                continue
            try:
                unknown = sorted(_names(_parse(count)) - names)
            except ValueError as exc:
                return f"cost {field} {count!r}: {exc}"
            if unknown:
                return f"cost {field} {count!r} reads {unknown[0]!r}, which is not a parameter (nor {PIXELS!r})"
    return None


def evaluate_cost(value: object, params: Mapping[str, Any], pixels: int) -> tuple[PartCost, ...] | None:
    """The parts of ``value`` (a ``Metric.cost``) for a metric built with ``params`` on inputs of
    ``pixels`` pixels; ``None`` when it states no cost. ``ValueError`` (one line) when a count
    cannot be computed from these values or is not a finite number >= 0."""
    parts = cost_parts(value)
    if parts is None:
        return None
    names = {PIXELS: pixels, **params}
    out = []
    for part in parts:
        counts = [_count(getattr(part, f), names, f) for f in ("forward_passes", "explanations")]
        key = None if part.shared is None else (part.shared, repr(sorted(params.items())))
        out.append(PartCost(counts[0], counts[1], key))
    return tuple(out)


def _count(count: float | str, names: Mapping[str, Any], field: str) -> float:
    value = _evaluate(_parse(count).body, names) if isinstance(count, str) else count
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"cost {field} {count!r} is {value!r}, not a number >= 0")
    return float(value)


def _parse(text: str) -> ast.Expression:
    """``text`` parsed as an expression of the cost grammar (module doc); ``ValueError`` else."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError("is not an expression") from None
    for node in ast.walk(tree):
        allowed = isinstance(node, ast.Expression | ast.Name | ast.Load | ast.BinOp | ast.UnaryOp | ast.Constant)
        allowed = allowed or type(node) in _OPERATORS or isinstance(node, ast.USub | ast.UAdd)
        if isinstance(node, ast.Call):
            allowed = isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int | float)):
            allowed = False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exponent = node.right
            if not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, int | float)):
                raise ValueError("an exponent must be a number")
            if not 0 <= exponent.value <= MAX_EXPONENT:
                raise ValueError(f"an exponent must be from 0 to {MAX_EXPONENT}")
        if not allowed:
            what = "numbers, parameters, + - * / // **, len, min, max"
            raise ValueError(f"{type(node).__name__} is not allowed ({what})")
    return tree


def _names(tree: ast.Expression) -> set[str]:
    """The parameter names ``tree`` reads (function names aside)."""
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in functions}


def _evaluate(node: ast.expr, names: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"{node.id!r} has no value")
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        operand = _number(_evaluate(node.operand, names))
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _number(_evaluate(node.left, names)), _number(_evaluate(node.right, names))
        try:
            return _OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("divides by zero") from None
        except OverflowError:
            raise ValueError("overflows") from None
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    args = [_evaluate(a, names) for a in node.args]
    if node.func.id == "len":
        if len(args) != 1 or not isinstance(args[0], Sequence) or isinstance(args[0], str):
            raise ValueError("len() takes one list")
        return len(args[0])
    values = args[0] if len(args) == 1 and isinstance(args[0], Sequence) and not isinstance(args[0], str) else args
    if not values:
        raise ValueError(f"{node.func.id}() of nothing")
    return FUNCTIONS[node.func.id]([_number(v) for v in values])


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    return value
