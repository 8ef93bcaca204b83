"""The probe's scratch folder (its TMPDIR inside the sandbox) is made and removed by the catalogue:
a run leaves no ``xaibench-probe-*`` folder behind in the temporary folder."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from xaibench.plugins import catalogue


def _points_of_an_installed_plugin() -> tuple[str, list[catalogue.EntryPoint]]:
    by_dist = catalogue.entry_points(None, set())
    if not by_dist:
        pytest.skip("no xaibench plugin distribution is installed (make install installs plugins/*)")
    name = sorted(by_dist)[0]
    return name, by_dist[name]


def test_a_probe_leaves_no_scratch_folder_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the probe's own temporary folder too
    dist, points = _points_of_an_installed_plugin()
    described = catalogue._probe_all({dist: points})
    assert "failure" not in described[dist], described[dist]
    assert described[dist]["plugins"], "the probe described no plugin"
    assert not list(tmp_path.glob("xaibench-probe-*")), sorted(p.name for p in tmp_path.iterdir())
