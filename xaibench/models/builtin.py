"""The built-in models that load weights of their own (``weight-noise`` wraps one of them)."""

from __future__ import annotations

from xaibench.api import Model
from xaibench.models.efficientnet_lite import EfficientNetLite0
from xaibench.models.imdb_cnn import ImdbCNN
from xaibench.models.mechanism import MechanismModel
from xaibench.models.minilm_imdb import MiniLMImdb
from xaibench.models.planted_tokens import PlantedTokensModel
from xaibench.models.shapes_cbm import ShapesCBM
from xaibench.models.shapes_cnn import ShapesCNN
from xaibench.models.shapes_vit import ShapesViT
from xaibench.models.timm_model import TimmModel

MODELS: list[type[Model]] = [
    ShapesCNN,
    ShapesCBM,
    ShapesViT,
    MechanismModel,
    PlantedTokensModel,
    ImdbCNN,
    MiniLMImdb,
    EfficientNetLite0,
    TimmModel,
]


def base_model_class(name: str) -> type[Model]:
    """The built-in model class registered as ``name``; ``ValueError`` naming the known ones."""
    for cls in MODELS:
        if cls.name == name:
            return cls
    known = ", ".join(c.name for c in MODELS)
    raise ValueError(f"{name!r} is not a built-in model (perturbation wraps only built-in models: {known})")
