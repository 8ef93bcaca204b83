"""The sanity family's metrics of DESIGN 3b (random logit, smooth and efficient MPRT), in display
order; registered by :mod:`xaibench.metrics.plugin` after ``model_randomisation``."""

from __future__ import annotations

from xaibench.api import Metric
from xaibench.metrics.sanity.mprt import EfficientMPRT, SmoothMPRT
from xaibench.metrics.sanity.random_logit import RandomLogit

FIELD_SANITY_METRICS: list[type[Metric]] = [RandomLogit, SmoothMPRT, EfficientMPRT]
"""Random logit, smooth MPRT and efficient MPRT (reported and flagged, never ranked)."""
