"""Installed-looking distributions for the plugin-isolation tests, written by the tests.

:func:`write_distribution` puts a one-module distribution in a folder (a ``site``): the module,
and a ``.dist-info`` whose ``entry_points.txt`` declares it in the group ``xaibench``. With the
folder on ``sys.path`` (``monkeypatch.syspath_prepend``, or ``PYTHONPATH`` for a subprocess),
``importlib.metadata`` finds it as pip would have installed it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any


def write_distribution(site: Path, name: str, module: str, code: str) -> None:
    """Distribution ``name`` 1.0 in ``site``: module ``module`` with ``code`` (dedented), one entry
    point named as the module without its ``xb_`` prefix."""
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[xaibench]\n{module.removeprefix('xb_')} = {module}\n")


def records_by_key(workdir: Path, track: str) -> dict[str, dict[str, Any]]:
    """The records of ``track`` in ``workdir`` by key, without what varies between equal runs (wall
    times; the integrity tag, keyed per workdir by design)."""
    out = {}
    for line in (workdir / "results" / f"{track}.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["key"]] = {k: v for k, v in record.items() if k not in ("wall_time_s", "integrity")}
    return out


def without_distribution(value: Any) -> Any:
    """``value`` without the fields that name where a component came from (a distribution)."""
    if isinstance(value, dict):
        return {k: without_distribution(v) for k, v in value.items() if "distribution" not in k and k != "plugin"}
    if isinstance(value, list):
        return [without_distribution(v) for v in value]
    return value
