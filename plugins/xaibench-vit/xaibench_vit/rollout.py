"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Each layer's attention ``A_l`` (``(N, N)`` after fusing the heads, rows = queries) is mixed with
the identity for the residual connection and its rows renormalised,
``Â_l = (1 - r) A_l + r I`` (``r = 0.5`` in the paper), and the layers are multiplied from the
first to the last: ``R = Â_L ... Â_2 Â_1``. The map is the class token's row of ``R`` over the
patch tokens (the mean row over all tokens for a model without prefix tokens), folded into the
patch grid and resized bilinearly to the input: ``(B, S, S)`` float32 in [0, 1], higher = more
attention flows from that patch to the class token. Class-agnostic (the target is ignored),
deterministic, one forward pass per batch.

Attention comes from timm's own attention modules (any module with ``fused_attn`` and an
``attn_drop`` module, as ``timm.layers.Attention``): fused attention is switched off for the
forward pass and the softmax probabilities are read at ``attn_drop`` (the identity in eval
mode), then every module is put back as it was.

Text (DESIGN 12). On a text model (``modalities = ("text",)``, input ``(B, D + 1, 1, L)``) the
capability is the network's ``attentions(x)`` method (:func:`exposes_attentions`; ``minilm-imdb``
has one): it returns each layer's ``(B, H, N, N)`` attention probabilities, first layer first,
rows queries, position 0 a prefix token (``[CLS]``, never an explained token) and position
``i`` the input's column ``i - 1``, ``N - 1 <= L`` (trailing columns may be dropped). The same
rollout is read at the prefix token's row, its own column dropped: one value per input token,
padded with zeros to ``(B, 1, L)``, and 0 wherever the presence channel is not positive (padding,
a deleted token). A text model without the method gets a one-line error naming it (its records
are n/a with that reason). The image path is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from xaibench.kit import AttributionExplainer, ExplainBatch, Model, Param, as_inputs, model_modality

HEAD_FUSIONS: tuple[str, ...] = ("mean", "max", "min")


def attention_modules(module: torch.nn.Module) -> list[torch.nn.Module]:
    """timm attention modules of ``module`` in registration order (modules with ``fused_attn``
    and an ``attn_drop`` submodule)."""
    return [
        m
        for m in module.modules()
        if hasattr(m, "fused_attn") and isinstance(getattr(m, "attn_drop", None), torch.nn.Module)
    ]


def capture_attentions(model: Model, x: torch.Tensor, explainer: str) -> list[torch.Tensor]:
    """The attention probabilities ``(B, H, N, N)`` of every attention layer, in execution order,
    for one forward pass of ``x``; ``ValueError`` naming the model when it has no timm attention."""
    layers = attention_modules(model.module)
    if not layers:
        raise ValueError(
            f"explainer {explainer!r} needs a vision transformer with timm attention modules; model "
            f"{model.name!r} ({type(model.module).__name__}) has none"
        )
    captured: list[torch.Tensor] = []
    saved = [(m, m.fused_attn) for m in layers]
    handles = [m.attn_drop.register_forward_hook(lambda _m, _i, out: captured.append(out.detach())) for m in layers]
    try:
        for m in layers:
            m.fused_attn = False
        with torch.no_grad():
            model.module(x)
    finally:
        for handle in handles:
            handle.remove()
        for m, fused in saved:
            m.fused_attn = fused
    return captured


def rollout(attentions: Sequence[torch.Tensor], head_fusion: str = "mean", residual: float = 0.5) -> torch.Tensor:
    """``(B, N, N)`` rollout ``Â_L ... Â_1`` of ``(B, H, N, N)`` attentions (first layer first),
    ``Â_l`` = the heads fused by ``head_fusion``, mixed with ``residual`` x identity, rows
    renormalised to sum to 1."""
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(f"head_fusion must be one of {', '.join(HEAD_FUSIONS)}, got {head_fusion!r}")
    first = attentions[0]
    n = int(first.shape[-1])
    eye = torch.eye(n, dtype=torch.float64, device=first.device)
    result = eye.expand(int(first.shape[0]), n, n)
    for attention in attentions:
        a = attention.double()
        fused = a.mean(dim=1) if head_fusion == "mean" else a.amax(dim=1) if head_fusion == "max" else a.amin(dim=1)
        mixed = (1.0 - residual) * fused + residual * eye
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        result = mixed @ result
    return result


def token_grid(flow: torch.Tensor, prefix_tokens: int) -> torch.Tensor:
    """``(B, h, w)``: the class token's row of a ``(B, N, N)`` rollout over the patch tokens (the
    mean row when there is no prefix token), folded into the square patch grid."""
    row = flow[:, 0, prefix_tokens:] if prefix_tokens else flow.mean(dim=1)
    side = math.isqrt(int(row.shape[-1]))
    if side * side != int(row.shape[-1]):
        raise ValueError(f"{int(row.shape[-1])} patch tokens do not form a square grid")
    return row.reshape(-1, side, side)


def exposes_attentions(model: Model) -> bool:
    """Whether ``model``'s network has an ``attentions(x)`` method (module doc, *Text*): the
    capability attention rollout needs on a text model."""
    return callable(getattr(getattr(model, "module", None), "attentions", None))


def token_attentions(model: Model, x: torch.Tensor, explainer: str) -> list[torch.Tensor]:
    """The ``(B, H, N, N)`` attention probabilities of a text model's layers for ``x`` (first layer
    first), from its network's ``attentions(x)``; ``ValueError`` naming the model, in one line,
    when it has no such method or it returns no layer."""
    if not exposes_attentions(model):
        raise ValueError(
            f"explainer {explainer!r} needs a text model whose network exposes its attention probabilities "
            f"(an attentions(x) method); model {model.name!r} ({type(model.module).__name__}) has none"
        )
    with torch.no_grad():
        layers = [a.detach() for a in model.module.attentions(x)]
    if not layers:
        raise ValueError(f"explainer {explainer!r}: model {model.name!r} returned no attention layer")
    return layers


def token_row(flow: torch.Tensor, presence: torch.Tensor) -> torch.Tensor:
    """``(B, L)``: the prefix token's row of a ``(B, N, N)`` rollout over the ``N - 1`` input
    tokens (its own column dropped), zero beyond them and wherever ``presence`` ``(B, L)`` is not
    positive."""
    row = flow[:, 0, 1:]
    n, length = int(row.shape[-1]), int(presence.shape[-1])
    if n > length:
        raise ValueError(f"the attention has {n} token columns after the prefix, more than the input's {length}")
    out = row.new_zeros(int(row.shape[0]), length)
    out[:, :n] = row
    return out * (presence.to(out.device) > 0)


class AttentionRollout(AttributionExplainer):
    """Attention rollout (Abnar & Zuidema 2020) for timm vision transformers and text models that
    expose their attention probabilities (module doc); class-agnostic."""

    name = "attention-rollout"
    version = "1.0.0"
    description = (
        "Attention rollout (Abnar & Zuidema 2020) for timm ViTs and text transformers exposing attention; "
        "class-agnostic."
    )
    licence = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("attention",)
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")  # on text: one value per token (module doc)
    default_params: ClassVar[dict[str, Any]] = {"head_fusion": "mean", "residual": 0.5}
    param_specs: ClassVar[dict[str, Param]] = {
        "head_fusion": Param(str, choices=HEAD_FUSIONS),
        "residual": Param(float, low=0.0, high=1.0),
    }

    def grid(self, model: Model, inputs: Any) -> torch.Tensor:
        """``(B, h, w)`` float64 rollout on the patch grid, before resizing to the input."""
        x = as_inputs(inputs)
        attentions = capture_attentions(model, x, self.name)
        flow = rollout(attentions, self.params["head_fusion"], self.params["residual"])
        prefix = int(getattr(model.module, "num_prefix_tokens", 1))
        return token_grid(flow, prefix)

    def tokens(self, model: Model, inputs: Any) -> torch.Tensor:
        """``(B, L)`` float64 rollout over the tokens of a text model's ``(B, D + 1, 1, L)`` input
        (module doc, *Text*)."""
        x = as_inputs(inputs)
        attentions = token_attentions(model, x, self.name)
        flow = rollout(attentions, self.params["head_fusion"], self.params["residual"])
        return token_row(flow, x[:, -1, 0, :])

    def attribute(self, model: Model, batch: ExplainBatch) -> torch.Tensor:
        if model_modality(model) == "text":
            return self.tokens(model, batch.x).float()[:, None, :].cpu()
        x = batch.x
        grid = self.grid(model, x).float()
        maps = F.interpolate(grid[:, None], size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)[:, 0]
        return maps.cpu()
