"""The metric selector language, in one place: ``--metric``, ``xaibench.run(metrics=...)``, a suite
file's ``metrics`` and :attr:`TrackSpec.metrics` all speak it (docs/suites.md, *Choosing metrics*).

A selector is one of:

- a metric id (``iou``, ``deletion``, ``quantus_complexity``): that metric, ``default = False`` or not;
- ``family:NAME`` (``family:alignment``): every metric of the family with ``default = True``;
- ``all``: every metric with ``default = True`` (59 with the bundled plugins: slow on a large model);
- ``native``: every built-in metric (of the ``xaibench`` distribution), ``default = False`` ones
  too (the field's metrics of DESIGN 3b; the ``full`` suite runs ``all`` and ``native``);
- ``default``: :data:`DEFAULT_METRICS`, the quick set that ad-hoc and suite-file tracks run when
  they name no metrics: the alignment ranking metrics (only on a track whose samples mostly have
  ground truth, see :func:`track_has_masks`), the faithfulness ranking metrics of the default
  suite's ``photos`` track with its parameters (10-step deletion and insertion curves), and
  ``model_randomisation``.

:func:`check_selectors` validates selectors before any work (one-line :class:`XaibenchError`);
:func:`resolve_metrics` turns a track's selectors into metric instances once the track is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xaibench.api import Metric, Sample, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry
from xaibench.suites.embedded import PHOTOS_METRIC_PARAMS, PHOTOS_METRICS

__all__ = [
    "ALL",
    "DEFAULT",
    "DEFAULT_METRICS",
    "FAMILY",
    "NATIVE",
    "DefaultMetrics",
    "check_selectors",
    "resolve_metrics",
    "select_metrics",
    "track_has_masks",
]

ALL = "all"
NATIVE = "native"
DEFAULT = "default"
FAMILY = "family:"
GROUND_TRUTH_NEEDS = frozenset({"mask", "levels"})
"""A metric that ``needs`` one of these reads the samples' ground truth (alignment)."""


@dataclass(frozen=True)
class DefaultMetrics:
    """What the ``default`` selector means: of the metrics ``candidates`` select, the ranking
    metrics of ``ranking_families``, plus the ids ``always``; ``params`` are the parameters of
    those it selects (a track's own ``metric_params`` win). Metrics that read ground truth are
    left out on a track without masks."""

    candidates: tuple[str, ...]
    ranking_families: tuple[str, ...]
    always: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]]


DEFAULT_METRICS = DefaultMetrics(
    candidates=("family:alignment", *PHOTOS_METRICS),
    ranking_families=("alignment", "faithfulness"),
    always=("model_randomisation",),
    params=PHOTOS_METRIC_PARAMS,
)
"""The ``default`` selection, built from the default suite's ``photos`` constants so the two cannot
drift: with the bundled plugins ``iou``, ``mae``, ``mass_accuracy``, ``pointing_game`` (masks
only), ``deletion`` and ``insertion`` (``steps = 10``) and ``model_randomisation``."""


def families(registry: Registry) -> list[str]:
    """The metric families of the installed metrics, sorted."""
    return sorted({str(e.cls.family) for e in registry.entries("metric")})


def check_selectors(registry: Registry, selectors: Sequence[str]) -> None:
    """Raise :class:`XaibenchError` (one line) for the first selector that means nothing here: an
    unknown metric id (suggesting close ids) or an unknown family (listing the families)."""
    for item in selectors:
        if not isinstance(item, str) or not item.strip():
            raise XaibenchError(f"metric selector {item!r}: expected a metric id, family:NAME, all, native or default")
        if item in (ALL, NATIVE, DEFAULT):
            continue
        if item.startswith(FAMILY):
            known = families(registry)
            if item[len(FAMILY) :] not in known:
                raise XaibenchError(f"{item!r}: no such metric family; families: {', '.join(known)}")
            continue
        registry.entry("metric", item)


def track_has_masks(samples: Sequence[Sample]) -> bool:
    """Whether at least half of ``samples`` carry ground truth (a mask or a multi-level map): the
    condition for ``default`` to select the alignment metrics, which are n/a without it."""
    with_truth = sum(1 for s in samples if s.ground_truth is not None and s.ground_truth.binary() is not None)
    return bool(samples) and 2 * with_truth >= len(samples)


def _default_names(registry: Registry, masks: bool, modality: str) -> dict[str, Mapping[str, Any]]:
    spec = DEFAULT_METRICS
    classes = {e.info.name: e for e in registry.entries("metric")}
    out: dict[str, Mapping[str, Any]] = {}
    candidates = [n for n in _expand(registry, spec.candidates, modality) if classes[n].cls.ranking]
    candidates = [n for n in candidates if classes[n].cls.family in spec.ranking_families]
    for name in [*candidates, *(n for n in spec.always if n in classes)]:
        if not masks and GROUND_TRUTH_NEEDS & set(classes[name].info.needs):
            continue
        if modality not in classes[name].info.modalities:
            continue
        out[name] = spec.params.get(name, {})
    return out


def _expand(registry: Registry, selectors: Sequence[str], modality: str = "image") -> list[str]:
    """Metric ids of ``family:``, ``all``, ``native`` and plain-id selectors, in order, without
    repeats. A selector of many metrics picks those that support ``modality`` (DESIGN 12); a metric
    named by its id is kept whatever it supports (its records then say why they are n/a)."""
    entries = [e for e in registry.entries("metric") if modality in e.info.modalities]
    by_default = [e for e in entries if e.cls.default]
    names: list[str] = []
    for item in selectors:
        if item == ALL:
            names += [e.info.name for e in by_default]
        elif item == NATIVE:
            names += [e.info.name for e in entries if e.info.distribution == "xaibench"]
        elif item.startswith(FAMILY):
            family = item[len(FAMILY) :]
            names += [e.info.name for e in by_default if e.cls.family == family]
        elif item != DEFAULT:
            names.append(item)
    return list(dict.fromkeys(names))


def select_metrics(
    registry: Registry, selectors: Sequence[str], *, masks: bool = True, modality: str = "image"
) -> dict[str, Mapping[str, Any]]:
    """Metric id -> parameters the selection brings (only ``default`` brings any), in selector
    order without repeats. ``masks``: whether the track has ground truth (:func:`track_has_masks`);
    without, ``default`` leaves out the metrics that read it (named ones stay, and report n/a).
    ``modality``: the track's; selectors of many metrics pick those that support it (:func:`_expand`)."""
    check_selectors(registry, selectors)
    out: dict[str, Mapping[str, Any]] = {}
    for item in selectors:
        if item == DEFAULT:
            chosen = _default_names(registry, masks, modality)
        else:
            chosen = {name: {} for name in _expand(registry, [item], modality)}
        for name, params in chosen.items():
            out.setdefault(name, params)
    return out


def resolve_metrics(
    registry: Registry, track: TrackSpec, wanted: Sequence[str] | None, *, masks: bool = True, modality: str = "image"
) -> list[Metric]:
    """The metrics a run scores on ``track``: those ``wanted`` selects (``--metric``), else those of
    the track's own selectors (:attr:`TrackSpec.metrics`), else ``all``; each with the track's
    ``metric_params`` for it, else the parameters ``default`` brings, else its own defaults.
    ``masks`` and ``modality`` as for :func:`select_metrics` (``True`` and ``"image"`` when the
    samples are not known)."""
    selectors = list(wanted) if wanted else list(track.metrics or [ALL])
    chosen = select_metrics(registry, selectors, masks=masks, modality=modality)
    own = track.metric_params
    return [registry.create("metric", name, **dict(own.get(name, params))) for name, params in chosen.items()]
