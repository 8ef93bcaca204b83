"""Installed-looking distributions for the plugin-isolation tests, written by the tests.

:func:`write_distribution` puts a one-module distribution in a folder (a ``site``): the module,
and a ``.dist-info`` whose ``entry_points.txt`` declares it in the group ``xaibench``. With the
folder on ``sys.path`` (``monkeypatch.syspath_prepend``, or ``PYTHONPATH`` for a subprocess),
``importlib.metadata`` finds it as pip would have installed it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_distribution(site: Path, name: str, module: str, code: str) -> None:
    """Distribution ``name`` 1.0 in ``site``: module ``module`` with ``code`` (dedented), one entry
    point named as the module without its ``xb_`` prefix."""
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[xaibench]\n{module.removeprefix('xb_')} = {module}\n")
