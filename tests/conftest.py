"""Fixtures shared by this repository's tests (the shipped ones live in ``xaibench.testing.fixtures``)."""

from __future__ import annotations

import os
import random
import sys

import pytest

from xaibench.plugins import manager

RECORD_VERIFY_SEED = int(os.environ.get("XAIBENCH_RECORD_SEED") or random.SystemRandom().randrange(2**31))
"""The fresh seed that draws the committed record's re-run samples (tests/test_record_board.py);
``XAIBENCH_RECORD_SEED`` draws the same ones again."""


def pytest_report_header() -> str:
    """The record's verify seed, first in CI's log (its verdicts stay in the log, not in files)."""
    return f"record verify seed: {RECORD_VERIFY_SEED} (XAIBENCH_RECORD_SEED={RECORD_VERIFY_SEED} draws it again)"


@pytest.fixture()
def record_verify_seed() -> int:
    """:data:`RECORD_VERIFY_SEED`."""
    return RECORD_VERIFY_SEED


@pytest.fixture()
def registry(monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """A fresh process registry (built-ins and installed entry points), restored afterwards."""
    reg = manager.Registry()
    monkeypatch.setattr(manager, "_REGISTRY", reg)
    return reg


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """A test that failed while Ray runs in this process reports the end of Ray's own logs (the
    raylet's and the control store's): a CI log then shows why Ray did not start an actor,
    which no test output says otherwise."""
    outcome = yield
    report = outcome.get_result()
    ray = sys.modules.get("ray")
    if not report.failed or ray is None or not ray.is_initialized():
        return
    from xaibench.runner.isolation.ray_executor import ray_logs

    logs = ray_logs(ray)
    if logs is None:
        return
    for name in ("raylet.out", "gcs_server.out", "raylet.err"):
        path = logs / name
        if path.is_file():
            lines = path.read_text(errors="replace").splitlines()[-40:]
            report.sections.append((f"Ray's {name} (last 40 lines)", "\n".join(lines)))
