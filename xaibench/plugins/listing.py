"""What ``xaibench list`` shows, as data: the installed plugins with their load status, and the
components of one kind with their attributes (``xaibench list KIND --json`` prints these rows)."""

from __future__ import annotations

from typing import Any

from xaibench.metric_cost import cost_data
from xaibench.plugins.manager import KIND_BASES, Registry, one_line


def plugin_rows(registry: Registry) -> list[dict[str, Any]]:
    """One row per plugin: its name, distribution, version, whether it loaded (and why not), the
    components it registered and where it came from."""
    return [
        {
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "ok": p.ok,
            "error": p.error,
            "components": p.components,
            "source": p.source,
        }
        for p in registry.plugins.values()
    ]


def component_rows(registry: Registry, kind: str) -> list[dict[str, Any]]:
    """One row per installed component of ``kind`` (``explainer``, ``metric``, ...): its info, and
    what its kind adds (a metric's family, direction, ranking and cost; an explainer's kind and
    default parameters; an encoder's modalities; a suite's tracks and status, or the one line of
    the error its constructor raised)."""
    assert kind in KIND_BASES
    rows = []
    for entry in registry.entries(kind):
        info, cls = entry.info, entry.cls
        row: dict[str, Any] = {
            "name": info.name,
            "version": info.version,
            "distribution": info.distribution,
            "distribution_version": info.distribution_version,
            "description": info.description,
            "licence": info.licence,
            "needs": list(info.needs),
            "modalities": list(info.modalities),
        }
        if kind == "metric":
            row.update(family=cls.family, direction=cls.direction, ranking=cls.ranking, cost=cost_data(cls.cost))
        if kind == "explainer":
            row.update(kind=cls.kind, default_params=dict(cls.default_params), reference_only=cls.reference_only)
        if kind == "encoder":
            row.update(default_params=dict(cls.default_params))
        if kind == "suite":
            try:
                suite = cls()
                row["tracks"] = [t.name for t in suite.tracks()]
                row["status"] = suite.status()
            except Exception as exc:  # noqa: BLE001 - isolate plugin and user code failures
                row["status"] = f"error: {one_line(str(exc))}"
        rows.append(row)
    return rows
