"""Built-in suites, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Register, Suite
from xaibench.plugins.hookspecs import hookimpl
from xaibench.suites.embedded import DefaultSuite, FullSuite
from xaibench.suites.mechanisms import MechanismsSuite
from xaibench.suites.real import RealSuite
from xaibench.suites.record import RecordSuite
from xaibench.suites.text import TextSuite

SUITES: list[type[Suite]] = [DefaultSuite, FullSuite, RealSuite, RecordSuite, MechanismsSuite, TextSuite]


@hookimpl
def register_suites(register: Register) -> None:
    for cls in SUITES:
        register(cls)
