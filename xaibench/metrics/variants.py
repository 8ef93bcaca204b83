"""Metric variants as data: one class per metric kind, one table row per variant.

A metric kind (the binary alignment scores, ROAD, ...) is one class that holds the computation;
its variants (binarisation, human level, perturbation) differ only in class data: the id, the
description, the parameters, the ranking flag. :func:`variant` turns one row of a kind's table
into a subclass that sets those attributes and nothing else, so the registry, the runner and
third-party code keep seeing one class per metric id with its identity as class data. Each
generated class carries the name the hand-written class had (``IouT50Metric``), and
:func:`former_names` lets the kind's module answer imports by that name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from xaibench.api import Metric

M = TypeVar("M", bound=Metric)


def class_name(metric_id: str, suffix: str = "") -> str:
    """The class name of a variant: its id in CamelCase plus ``suffix`` (``iou_t50`` -> ``IouT50Metric``)."""
    return "".join(part.capitalize() for part in metric_id.split("_")) + suffix


def variant(kind: type[M], metric_id: str, *, suffix: str = "", **attributes: Any) -> type[M]:
    """A subclass of ``kind`` named after ``metric_id`` that sets ``name = metric_id`` and the given
    class ``attributes`` (description, default_params, ranking, ...) and defines no behaviour.

    The class lives in ``kind``'s module (``__module__``), so serialisation and messages name it
    as they named the hand-written class; that module answers for it through :func:`former_names`.
    """
    name = class_name(metric_id, suffix)
    namespace = {"__module__": kind.__module__, "__qualname__": name, "__doc__": attributes.get("description")}
    cls = type(name, (kind,), {**namespace, "name": metric_id, **attributes})
    return cls  # type: ignore[return-value]


def former_names(module: str, classes: Iterable[type[Metric]]) -> Callable[[str], type[Metric]]:
    """A module ``__getattr__`` (PEP 562) that returns each generated class under its class name,
    so ``from <module> import RoadNecessity`` (and unpickling such a class) keeps working."""
    by_name = {cls.__name__: cls for cls in classes}

    def lookup(name: str) -> type[Metric]:
        try:
            return by_name[name]
        except KeyError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None

    return lookup
