"""Built-in models, registered through the same hook a third-party plugin implements."""

from __future__ import annotations

from xaibench.api import Model, Register
from xaibench.models.efficientnet_lite import EfficientNetLite0
from xaibench.models.shapes_cbm import ShapesCBM
from xaibench.models.shapes_cnn import ShapesCNN
from xaibench.models.timm_model import TimmModel
from xaibench.plugins.hookspecs import hookimpl

MODELS: list[type[Model]] = [ShapesCNN, ShapesCBM, EfficientNetLite0, TimmModel]


@hookimpl
def register_models(register: Register) -> None:
    for cls in MODELS:
        register(cls)
