"""Built-in models, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Model, Register
from xaibench.models.builtin import MODELS as BASE_MODELS
from xaibench.models.perturbed import WeightNoiseModel
from xaibench.plugins.hookspecs import hookimpl

MODELS: list[type[Model]] = [*BASE_MODELS, WeightNoiseModel]


@hookimpl
def register_models(register: Register) -> None:
    for cls in MODELS:
        register(cls)
