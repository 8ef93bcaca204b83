"""The methodology page's metrics: each installed metric from the registry (family, direction,
version, description), plus the metrics only the submissions name, with the parameters and
versions the submissions used."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import TypedDict

from xaibench.families import BY_NAME, DEFAULT_FAMILY
from xaibench.plugins.manager import Registry
from xaibench.publish.shapes import MetricSummary
from xaibench.site.submitted import Submitted


class MetricDoc(TypedDict):
    id: str
    family: str
    direction: str
    ranking: bool
    version: str
    unit: str
    description: str
    source: str
    """The distribution that provides the metric, or "submissions" when it is not installed."""
    installed: bool
    params_seen: list[str]
    versions_seen: list[str]
    in_submissions: bool


class FamilyDoc(TypedDict):
    name: str
    metrics: list[MetricDoc]


def methodology(registry: Registry, subs: Sequence[Submitted]) -> list[FamilyDoc]:
    """The metrics by family (in the display order of :data:`xaibench.families.POLICIES`; unknown
    families last)."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    submitted: dict[str, MetricSummary] = {}
    for sub in subs:
        for track in sub.data["tracks"].values():
            for metric_id, m in (track.get("metrics", {}) if isinstance(track, dict) else {}).items():
                if not isinstance(m, dict):
                    continue
                seen[metric_id]["params"].add(json.dumps(m.get("params", {}), sort_keys=True))
                seen[metric_id]["versions"].add(str(m.get("version", "?")))
                submitted.setdefault(metric_id, m)
    metrics: dict[str, MetricDoc] = {}
    for entry in registry.entries("metric"):
        cls, info = entry.cls, entry.info
        metrics[info.name] = {
            "id": info.name,
            "family": cls.family,
            "direction": cls.direction,
            "ranking": cls.ranking,
            "version": info.version,
            "unit": getattr(cls, "unit", ""),
            "description": info.description,
            "source": f"{info.distribution} {info.distribution_version}",
            "installed": True,
            "params_seen": [],
            "versions_seen": [],
            "in_submissions": False,
        }
    for metric_id, m in submitted.items():
        metrics.setdefault(
            metric_id,
            {
                "id": metric_id,
                "family": m.get("family", DEFAULT_FAMILY),
                "direction": m.get("direction", "?"),
                "ranking": m.get("ranking") is True,
                "version": m.get("version", "?"),
                "unit": "",
                "description": "not installed where this site was built; as declared by the submissions",
                "source": "submissions",
                "installed": False,
                "params_seen": [],
                "versions_seen": [],
                "in_submissions": False,
            },
        )
    for metric_id, doc in metrics.items():
        used = seen.get(metric_id, {})
        doc["params_seen"] = sorted(used.get("params", set()))
        doc["versions_seen"] = sorted(used.get("versions", set()))
        doc["in_submissions"] = bool(used)
    families: list[FamilyDoc] = []
    for fam in BY_NAME:
        items = sorted((m for m in metrics.values() if m["family"] == fam), key=lambda m: (not m["ranking"], m["id"]))
        if items:
            families.append({"name": fam, "metrics": items})
    rest = sorted((m for m in metrics.values() if m["family"] not in BY_NAME), key=lambda m: m["id"])
    if rest:
        families.append({"name": "unknown family", "metrics": rest})
    return families
