"""Ad-hoc tracks: one dataset x one model named on the command line (``xaibench run --model
timm:resnet18 --dataset folder:PATH``), in a suite file, or from the Python API.

A component is written ``NAME`` or ``NAME:ARG``. ``NAME`` is a registered model or dataset
plugin; ``ARG`` is its *main argument*, the first parameter of the plugin's constructor
(``timm``: ``arch``; ``folder``: ``root``; ``hf``: ``path``; the real datasets: ``root``).
Only the first ``:`` splits, so ``ARG`` may hold more (``hf:C:/data``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal, cast

from xaibench.api import TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.catalogue import main_parameter
from xaibench.plugins.manager import get_registry

__all__ = ["ADHOC_METRICS", "adhoc_track", "component_params", "main_parameter", "split_component", "track_name"]

TARGETS = ("predicted", "label")
ADHOC_METRICS = ("default",)
"""The metric selectors of an ad-hoc track (and of a suite-file track without ``metrics``): the quick
``default`` set, not every metric (59 with the bundled plugins; ROAD alone took 470 s of a 585 s
run of 3 explainers on 8 images with ResNet-18 on 2 cores)."""
# File suffixes left out of a track name made from a path (``data.parquet`` -> ``data``).
_DATA_SUFFIXES = (".parquet", ".arrow", ".csv", ".json", ".jsonl", ".pth", ".pt", ".bin", ".safetensors")


def split_component(text: str, kind: str) -> tuple[str, str | None]:
    """``"NAME:ARG"`` -> ``("NAME", "ARG")``; ``"NAME"`` -> ``("NAME", None)``. ``kind`` (``model``
    or ``dataset``) names the option in the error for an empty name or argument."""
    name, sep, arg = str(text).partition(":")
    name = name.strip()
    if not name:
        raise XaibenchError(f"{kind} {text!r}: expected NAME or NAME:ARG (e.g. timm:resnet18, folder:PATH)")
    if sep and not arg.strip():
        raise XaibenchError(f"{kind} {text!r}: nothing after ':'; give NAME:ARG or just NAME")
    return name, (arg.strip() if sep else None)


def component_params(kind: str, text: str, params: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The plugin name and constructor parameters ``text`` (``NAME[:ARG]``) and ``params`` mean.

    ``kind`` is ``model`` or ``dataset``. An unknown plugin raises :class:`XaibenchError`
    suggesting close names; so does an ``ARG`` for a plugin without a main parameter, or an
    ``ARG`` whose parameter ``params`` gives as well."""
    name, arg = split_component(text, kind)
    entry = get_registry().entry(kind, name)
    out = dict(params or {})
    if arg is not None:
        main = main_parameter(entry.cls)
        if main is None:
            raise XaibenchError(
                f"{kind} {text!r}: {kind} {name!r} takes no main argument; pass its parameters by name "
                f"(--{kind}-param KEY=VALUE)"
            )
        if main in out:
            raise XaibenchError(f"{kind} {text!r}: parameter {main!r} given twice, as ':{arg}' and by name")
        out[main] = arg
    return name, out


def _label(name: str, arg: str | None) -> str:
    if arg is None:
        return name
    last = PurePath(arg.replace("\\", "/").rstrip("/")).name or arg
    for suffix in _DATA_SUFFIXES:
        if last.lower().endswith(suffix) and len(last) > len(suffix):
            return last[: -len(suffix)]
    return last


def track_name(model: str, dataset: str) -> str:
    """The default name of the track of ``model`` on ``dataset`` (both ``NAME[:ARG]``):
    ``<model arg or name>-on-<last path part of the dataset arg, or its name>``, e.g.
    ``resnet18-on-cats`` for ``timm:resnet18`` on ``folder:/data/cats``. It depends on the
    text only (not on the files), so the same command gives the same name; characters other
    than letters, digits and ``_.+-`` become ``-`` (the name is part of file names)."""
    name = f"{_label(*split_component(model, 'model'))}-on-{_label(*split_component(dataset, 'dataset'))}"
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9_.+-]", "-", name)).strip("-.") or "adhoc"


def adhoc_track(
    model: str,
    dataset: str,
    *,
    model_params: Mapping[str, Any] | None = None,
    dataset_params: Mapping[str, Any] | None = None,
    target: str = "predicted",
    name: str | None = None,
) -> TrackSpec:
    """One track of the model ``model`` on the dataset ``dataset``, both ``NAME[:ARG]`` (see
    the module doc), with extra constructor parameters. ``target``: ``predicted`` (explain the
    model's prediction, unless the dataset maps a sample onto a model class) or ``label``.
    ``name`` defaults to :func:`track_name`. The plugin names are checked here; the parameters
    when the track is loaded. The track's metrics are :data:`ADHOC_METRICS`: the ``default``
    selection (xaibench/suites/metric_selection.py), which ``--metric`` overrides."""
    if target not in TARGETS:
        raise XaibenchError(f"target {target!r}: expected one of {', '.join(TARGETS)}")
    model_name, model_kwargs = component_params("model", model, model_params)
    dataset_name, dataset_kwargs = component_params("dataset", dataset, dataset_params)
    if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_+][A-Za-z0-9_.+-]*", name)):
        raise XaibenchError(f"track name {name!r}: use letters, digits and _.+- (it is part of file names)")
    return TrackSpec(
        name=name or track_name(model, dataset),
        dataset=dataset_name,
        model=model_name,
        dataset_params=dataset_kwargs,
        model_params=model_kwargs,
        target=cast(Literal["predicted", "label"], target),
        metrics=ADHOC_METRICS,
        description=f"{model} on {dataset}",
    )
