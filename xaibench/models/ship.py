"""Make the shipped reference weights: ``python -m xaibench.models.ship`` (a maintainer's command).

Trains every model that ships as weights (``shapes-cnn`` on both variants, ``shapes-cbm``,
``shapes-vit``) on this machine with its default training configuration, measures its held-out
accuracy (:func:`held_out_accuracy`) and rewrites ``xaibench/data/models/``
(:mod:`xaibench.models.shipped`). ``python -m xaibench.models.ship --only shapes-vit`` trains and
rewrites only the named models (the manifest keeps every other entry and file as it is), e.g. to
ship a newly added model without changing the others' weights.
Shipping new weights changes the default suite's numbers: regenerate the golden file after it and
say so in the commit. The tests use :func:`held_out_accuracy` to show that retraining reaches the
shipped models' accuracy.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaibench.datasets.shapes import ShapesConfig, generate_arrays
from xaibench.models.shapes_cbm import ShapesCBM, generate_concept_data
from xaibench.models.shapes_cbm import normalise as cbm_normalise
from xaibench.models.shapes_cnn import VARIANTS, ShapesCNN, normalise
from xaibench.models.shapes_vit import ShapesViT
from xaibench.models.shapes_vit import normalise as vit_normalise
from xaibench.models.shipped import write_shipped

__all__ = ["HELD_OUT_N", "HELD_OUT_SEED", "HELD_OUT_SPLIT", "SHIPPED_KEYS", "held_out_accuracy", "ship_all"]

SHIPPED_KEYS: tuple[str, ...] = (*(f"shapes-cnn/{v}" for v in VARIANTS), "shapes-cbm", "shapes-vit")
"""The manifest keys of every model that ships as weights, in the order :func:`ship_all` trains them."""
ShippedModel = ShapesCNN | ShapesCBM | ShapesViT

HELD_OUT_SPLIT, HELD_OUT_N, HELD_OUT_SEED = "test", 400, 7
"""The held-out images every accuracy is measured on (the test split, another seed than the suites')."""


def _argmax_accuracy(logits: torch.Tensor, labels: np.ndarray) -> float:
    return round(float((logits.argmax(1).numpy() == labels).mean()), 4)


def held_out_accuracy(model: ShippedModel) -> dict[str, float]:
    """Top-1 accuracy on :data:`HELD_OUT_N` images of the test split (higher is better, a fraction in [0, 1]).

    ``shapes-cnn``: ``accuracy`` on its own variant, and for ``shapes-shortcut`` also
    ``accuracy_without_cue`` on clean ``shapes`` images (the shortcut's reliance on the cue).
    ``shapes-cbm``: class ``accuracy`` and ``concept_accuracy`` (each of 15 concepts thresholded at
    0.5, averaged). ``shapes-vit``: ``accuracy`` on ``shapes``.
    """
    with torch.no_grad():
        if isinstance(model, ShapesCBM):
            config = ShapesConfig(split=HELD_OUT_SPLIT, seed=HELD_OUT_SEED, size=model.input_size)
            images, concepts, labels = generate_concept_data(config, HELD_OUT_N)
            x = cbm_normalise(images)
            probs = torch.sigmoid(model.module.concept_logits(x)).numpy()
            concept_acc = round(float(((probs > 0.5) == (concepts > 0.5)).mean()), 4)
            return {"accuracy": _argmax_accuracy(model.module(x), labels), "concept_accuracy": concept_acc}
        if isinstance(model, ShapesViT):
            config = ShapesConfig(split=HELD_OUT_SPLIT, seed=HELD_OUT_SEED, size=model.input_size)
            images, labels = generate_arrays(config, HELD_OUT_N)
            return {"accuracy": _argmax_accuracy(model.module(vit_normalise(images)), labels)}
        out: dict[str, float] = {}
        for variant, name in ((model.variant, "accuracy"), ("shapes", "accuracy_without_cue")):
            if name == "accuracy_without_cue" and model.variant == "shapes":
                continue
            config = ShapesConfig(variant=variant, split=HELD_OUT_SPLIT, seed=HELD_OUT_SEED, size=model.input_size)
            images, labels = generate_arrays(config, HELD_OUT_N)
            out[name] = _argmax_accuracy(model.module(normalise(images)), labels)
        return out


def ship_all(
    log: Callable[[str], None] = print,
    folder: Path | None = None,
    cache_dir: Path | None = None,
    only: Collection[str] | None = None,
) -> dict[str, Any]:
    """Train every shipped model here and rewrite the shipped files.

    Trains in a temporary cache, or in ``cache_dir`` (weights already trained there with the
    default configuration on this machine are reused). ``only``: the keys of :data:`SHIPPED_KEYS`
    to train and rewrite (default: all); the other models' files and manifest entries stay as they are.
    """
    keys = SHIPPED_KEYS if only is None else tuple(only)
    unknown = sorted(set(keys) - set(SHIPPED_KEYS))
    if unknown:
        raise ValueError(f"not shipped models: {', '.join(unknown)}; known: {', '.join(SHIPPED_KEYS)}")
    command = "python -m xaibench.models.ship"
    entries: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = str(cache_dir or tmp)
        models: dict[str, Callable[[], ShippedModel]] = {
            **{f"shapes-cnn/{v}": (lambda v=v: ShapesCNN(v, cache_dir=cache, weights="train")) for v in VARIANTS},
            "shapes-cbm": lambda: ShapesCBM(cache_dir=cache, weights="train"),
            "shapes-vit": lambda: ShapesViT(cache_dir=cache, weights="train"),
        }
        for key, build in models.items():
            if key not in keys:
                continue
            model = build()
            entries[key] = write_shipped(
                key,
                model.module.state_dict(),
                train_key=model.cache_key,
                accuracy=held_out_accuracy(model),
                command=command,
                folder=folder,
            )
            log(f"{key}: {entries[key]['weights_sha256'][:12]} {entries[key]['accuracy']}")
    return entries


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    parser = argparse.ArgumentParser(prog="python -m xaibench.models.ship", description=__doc__.split("\n")[0])
    parser.add_argument("cache_dir", nargs="?", type=Path, help="train in (and reuse weights from) this cache")
    parser.add_argument("--only", action="append", choices=SHIPPED_KEYS, help="ship only this model (repeatable)")
    args = parser.parse_args()
    ship_all(cache_dir=args.cache_dir, only=args.only)
