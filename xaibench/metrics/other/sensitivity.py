"""Max-sensitivity moved to the robustness family (DESIGN 3b): :mod:`xaibench.metrics.robustness`.
This name stays for code that imports it from here."""

from xaibench.metrics.robustness.metrics import MaxSensitivity

__all__ = ["MaxSensitivity"]
