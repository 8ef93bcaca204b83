"""Built-in explainers, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Explainer, Register
from xaibench.explainers.baselines import CenterExplainer, OracleExplainer, RandomExplainer, SobelExplainer
from xaibench.explainers.concepts import ConceptLIME, ConceptLinear, ConceptRISE, ConceptSHAP
from xaibench.explainers.gradient import GradientExplainer
from xaibench.explainers.ladder import LadderExplainer
from xaibench.explainers.planted import PlantedExplainer
from xaibench.plugins.hookspecs import hookimpl

EXPLAINERS: list[type[Explainer]] = [
    RandomExplainer,
    CenterExplainer,
    SobelExplainer,
    OracleExplainer,
    LadderExplainer,
    PlantedExplainer,
    GradientExplainer,
    ConceptLinear,
    ConceptLIME,
    ConceptSHAP,
    ConceptRISE,
]


@hookimpl
def register_explainers(register: Register) -> None:
    for cls in EXPLAINERS:
        register(cls)
