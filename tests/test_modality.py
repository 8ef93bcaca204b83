"""Modality in the core (issue 46 item 1, DESIGN 12): a component declares the modalities it
supports; on a track of another modality an explainer's or a metric's records are n/a with the
reason ``modality``, said in one line per track, and a model that does not take its dataset's
modality is a track error. Image runs are unchanged (the golden default-suite tests hold that).

The text track here is built at run time, as a plugin would build one: token ids as the sample,
a bag-of-embeddings model whose logit is a known sum, a text-capable explainer and metric."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from xaibench import hookimpl
from xaibench.api import (
    Dataset,
    Explainer,
    GroundTruth,
    Metric,
    MetricInput,
    MetricOutput,
    Model,
    Sample,
    TrackSpec,
    modality_reason,
)
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run
from xaibench.runner.track import build_track

VOCAB, LENGTH, EVIDENCE = 16, 12, 3  # token 3 is the class-1 evidence


class TinyTokens(Dataset):
    """Token sequences of ids 4..15 with the evidence token planted at one place in odd samples."""

    name = "tiny-tokens"
    version = "1.0.0"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    synthetic = True
    label_names = ("absent", "present")

    @property
    def revision(self) -> str:
        return "tiny-tokens-1"

    def __len__(self) -> int:
        return 8

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        rng = np.random.default_rng(0)
        for i in range(min(limit or 8, 8)):
            ids = rng.integers(4, VOCAB, LENGTH)
            mask = np.zeros((1, LENGTH), dtype=bool)
            if i % 2:
                place = int(rng.integers(0, LENGTH))
                ids[place] = EVIDENCE
                mask[0, place] = True
            yield Sample(id=f"t{i}", image=ids.astype(np.int64), label=i % 2, ground_truth=GroundTruth(mask=mask))


class BagOfTokens(Model):
    """Logit 1 = 4 x (count of the evidence token); logit 0 = 1 (a known, additive mechanism)."""

    name = "bag-of-tokens"
    version = "1.0.0"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    synthetic = True

    def __init__(self) -> None:
        weights = torch.zeros(VOCAB, 2)
        weights[:, 0] = 1.0 / LENGTH
        weights[EVIDENCE, 1] = 4.0
        self.module = _Bag(weights).eval()
        self.label_names = ("absent", "present")

    @property
    def identity(self) -> str:
        return "bag-of-tokens-1"

    def preprocess(self, images: Any) -> torch.Tensor:
        return torch.as_tensor(np.stack([np.asarray(i) for i in images]))[:, None, :]  # (B, 1, L) token ids


class _Bag(torch.nn.Module):
    def __init__(self, weights: torch.Tensor) -> None:
        super().__init__()
        self.weights = torch.nn.Parameter(weights)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weights[ids[:, 0, :].long()].sum(dim=1)


class TokenWeight(Explainer):
    """Each token's contribution to the target logit (exact for the bag model)."""

    name = "token-weight"
    version = "1.0.0"
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        ids = torch.as_tensor(inputs)[:, 0, :].long().cpu()  # the harness hands inputs over as float32
        weights = model.module.weights.detach().cpu()
        chosen = weights[ids, torch.as_tensor(np.asarray(targets)).view(-1, 1)]  # (B, L)
        return chosen[:, None, :].numpy().astype(np.float32)


class TopTokenHit(Metric):
    """1 where the highest-scored token is in the mask (pointing game on tokens)."""

    name = "top_token_hit"
    version = "1.0.0"
    family = "other"
    direction = "higher"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    needs: ClassVar[tuple[str, ...]] = ("mask",)
    value_range = (0.0, 1.0)

    def score(self, batch: MetricInput) -> MetricOutput:
        assert batch.saliency is not None
        values = []
        for saliency, sample in zip(batch.saliency, batch.samples, strict=True):
            mask = sample.ground_truth.mask if sample.ground_truth is not None else None
            values.append(float(mask.ravel()[int(np.argmax(saliency.ravel()))]) if mask is not None else np.nan)
        return MetricOutput(values=np.asarray(values), reasons=[None] * len(values))


class TextPlugin:
    @hookimpl
    def register_datasets(self, register: Any) -> None:
        register(TinyTokens)

    @hookimpl
    def register_models(self, register: Any) -> None:
        register(BagOfTokens)

    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(TokenWeight)

    @hookimpl
    def register_metrics(self, register: Any) -> None:
        register(TopTokenHit)


TEXT_TRACK = TrackSpec(name="tiny-text", dataset="tiny-tokens", model="bag-of-tokens", synthetic=True)


@pytest.fixture()
def text_registry(registry: manager.Registry) -> manager.Registry:
    registry.add_plugin(TextPlugin(), name="text-test")
    return registry


def _records(workdir: Path) -> list[dict[str, Any]]:
    import json

    lines = (workdir / "results" / "tiny-text.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_on_a_text_track_image_only_components_are_na_with_the_modality_reason_said_once(
    text_registry: manager.Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = RunConfig(
        explainers=["token-weight", "gradcam", "sobel"],
        metrics=["top_token_hit", "sparseness"],
        suite_tracks=[TEXT_TRACK],
        workdir=tmp_path / "work",
        examples=0,
        executor="inprocess",
    )
    result = run(config, text_registry)
    records = _records(tmp_path / "work")
    by = {(r["explainer"]["name"], r["metric"], r["sample_id"]): r for r in records}
    assert len(by) == 3 * 2 * 8
    # the text-capable pair is scored: the exact contributions point at the planted token
    hits = [by["token-weight", "top_token_hit", f"t{i}"]["value"] for i in (1, 3, 5, 7)]
    assert hits == [1.0, 1.0, 1.0, 1.0]
    # an image-only explainer: every record n/a, the reason naming the explainer and the modality
    gradcam = {r["na_reason"] for k, r in by.items() if k[0] == "gradcam"}
    assert gradcam == {modality_reason("explainer", "gradcam", ("image",), "text")}
    # an image-only metric: n/a for the text-capable explainer too (the samples without evidence
    # have a constant map, whose own reason comes first)
    sparse = {by["token-weight", "sparseness", f"t{i}"]["na_reason"] for i in (1, 3, 5, 7)}
    assert sparse == {"modality: metric sparseness supports image, not text"}
    line = result.summary["tracks"]["tiny-text"]["modality_na"]
    assert line == (
        "track tiny-text (text): n/a for explainers gradcam, sobel and metrics sparseness: they do not support text"
    )


def test_the_board_gives_an_explainer_that_applies_to_no_sample_no_row_and_one_line_per_reason(
    text_registry: manager.Registry, tmp_path: Path
) -> None:
    from rich.console import Console

    from xaibench.publish.board import build_leaderboard
    from xaibench.publish.submission import write_run
    from xaibench.publish.writers import print_leaderboard, to_csv, to_markdown

    config = RunConfig(
        explainers=["token-weight", "random", "gradcam"],
        metrics=["top_token_hit"],
        suite_tracks=[TEXT_TRACK],
        workdir=tmp_path / "work",
        examples=0,
        executor="inprocess",
    )
    write_run(run(config, text_registry), text_registry, tmp_path / "subs")
    board = build_leaderboard(tmp_path / "subs", keep_bytes=False)
    reason = modality_reason("explainer", "gradcam", ("image",), "text")
    assert board.away("tiny-text") == {"gradcam": reason}
    said = f"n/a here: gradcam ({reason})"
    md = to_markdown(board)
    table = md.split("## tiny-text")[1]
    assert "| gradcam |" not in md and table.count(said) == 1 and "| token-weight |" in table
    console = Console(record=True, width=160)
    print_leaderboard(board, console)
    text = console.export_text()
    flat = " ".join(text.split())  # the caption under a narrow table wraps at spaces
    assert flat.count(said) == 1 and "gradcam │" not in text and "token-weight" in text
    # the data files keep every row (n/a, with its count) for whoever reads them
    assert any(r["explainer"] == "gradcam" and r["value"] is None for r in board.rows)
    assert "gradcam" in to_csv(board.rows)


def test_a_model_that_does_not_take_the_datasets_modality_is_a_track_error(text_registry: manager.Registry) -> None:
    dataset = text_registry.create("dataset", "tiny-tokens")
    model = text_registry.create("model", "shapes-cnn")
    spec = TrackSpec(name="mixed", dataset="tiny-tokens", model="shapes-cnn")
    with pytest.raises(XaibenchError) as caught:
        build_track(spec, dataset, model, list(dataset.samples(2)))
    assert str(caught.value) == "track 'mixed': model 'shapes-cnn' takes image, but dataset 'tiny-tokens' gives text"


@pytest.mark.parametrize(
    ("kind", "modalities", "expected"),
    [
        ("explainer", ("audio",), "use a tuple of distinct values from ('image', 'text')"),
        ("explainer", (), "use a tuple of distinct values from ('image', 'text')"),
        ("explainer", "text", "use a tuple of distinct values from ('image', 'text')"),
        ("dataset", ("image", "text"), "use one of ('image', 'text') (as a one-element tuple)"),
    ],
)
def test_modalities_outside_the_known_ones_are_refused_at_registration(
    registry: manager.Registry, kind: str, modalities: Any, expected: str
) -> None:
    base: type = TokenWeight if kind == "explainer" else TinyTokens
    bad = type("Bad", (base,), {"name": "bad-modalities", "modalities": modalities})

    class Plugin:
        @hookimpl
        def register_explainers(self, register: Any) -> None:
            if kind == "explainer":
                register(bad)

        @hookimpl
        def register_datasets(self, register: Any) -> None:
            if kind == "dataset":
                register(bad)

    status = registry.add_plugin(Plugin(), name="bad")
    assert not status.ok and status.error is not None
    assert expected in status.error, status.error
    assert f"{kind} 'bad-modalities' has modalities" in status.error
    assert "bad-modalities" not in [entry.info.name for entry in registry.entries(kind)]


def test_built_in_components_declare_image_and_list_their_modalities(registry: manager.Registry) -> None:
    from xaibench.plugins.listing import component_rows

    rows = {row["name"]: row for row in component_rows(registry, "explainer")}
    assert rows["gradcam"]["modalities"] == ["image"]
    assert registry.info("metric", "average_drop").modalities == ("image",)
    assert registry.info("metric", "insertion").modalities == ("image", "text")
    assert registry.info("metric", "iou").modalities == ("image", "text")
    assert registry.info("dataset", "shapes").modalities == ("image",)
