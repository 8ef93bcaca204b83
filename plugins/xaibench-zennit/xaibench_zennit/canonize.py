"""Batch-norm canonization for LRP: fold each batch norm into the linear layer right before it.

LRP rules are defined for linear layers and activations; a batch norm is an affine map that
belongs to the layer it follows. zennit's ``SequentialMergeBatchNorm`` pairs a linear layer and
a batch norm that are consecutive *leaves* of the module tree, which misses convolutions that
have children of their own (EfficientNet's ``Conv2dStaticSamePadding`` holds its padding
module). :func:`batch_norm_pairs` pairs them in registration order the same way, skipping a
layer's own children, and :func:`batch_norm_canonizers` hands the pairs to zennit's
``NamedMergeBatchNorm``, which restores every parameter when the explanation is done.
Like zennit's canonizer, it assumes modules are registered in the order they run.
"""

from __future__ import annotations

from typing import Any

import torch


def batch_norm_pairs(module: torch.nn.Module) -> list[tuple[tuple[str], str]]:
    """``[((linear_name,), batch_norm_name), ...]`` for every batch norm registered right after a
    linear or convolution layer of ``module`` (the layer's own submodules, e.g. a padding module,
    do not separate them). Names are dotted paths into ``module``."""
    from zennit.types import BatchNorm, Linear

    pairs: list[tuple[tuple[str], str]] = []
    last: str | None = None
    for name, child in module.named_modules():
        if last is not None and name.startswith(last + "."):
            continue
        if isinstance(child, BatchNorm) and last is not None:
            pairs.append(((last,), name))
        last = name if isinstance(child, Linear) else None
    return pairs


def batch_norm_canonizers(module: torch.nn.Module) -> list[Any]:
    """zennit canonizers merging every batch norm of ``module`` into its preceding layer
    (empty when there is none); applied and undone by the composite's context."""
    from zennit.canonizers import NamedMergeBatchNorm

    pairs = batch_norm_pairs(module)
    return [NamedMergeBatchNorm(pairs)] if pairs else []
