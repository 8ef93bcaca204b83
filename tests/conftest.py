"""Fixtures shared by this repository's tests (the shipped ones live in ``xaibench.testing.fixtures``)."""

from __future__ import annotations

import pytest

from xaibench.plugins import manager


@pytest.fixture()
def registry(monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """A fresh process registry (built-ins and installed entry points), restored afterwards."""
    reg = manager.Registry()
    monkeypatch.setattr(manager, "_REGISTRY", reg)
    return reg
