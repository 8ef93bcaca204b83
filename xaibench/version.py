"""The version of xaibench (recorded in every result's provenance)."""

__version__ = "0.1.0"
