"""Explainers are blind to the answer (issue 42): only a reference reads the ground truth.

An adversary's explainer read the ground-truth mask from its context's samples, scored IoU 1.000
and ranked first, with a disclosure saying it was neither a reference nor tuned. Now a method's
explainer gets each sample's id, image and class to explain only (no ground truth, no label, no
meta such as a planted cue's box), in its own call and in every call a metric makes (the
robustness family re-runs it with a context); a reference (``oracle``) still reads the truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench import hookimpl
from xaibench.api import Explainer, Sample
from xaibench.plugins import manager
from xaibench.runner.executors import blinded
from xaibench.runner.run import RunConfig, Runner


class ReadsTheAnswer(Explainer):
    """A method (not a reference) that returns the ground-truth mask when it can see it."""

    name = "reads-the-answer"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        maps = np.random.default_rng(seed).random((inputs.shape[0], *inputs.shape[-2:])).astype(np.float32)
        for k, sample in enumerate(context.samples if context is not None else []):
            seen = [sample.ground_truth is not None, sample.label is not None, bool(sample.meta)]
            if any(seen):
                truth = sample.ground_truth.binary() if sample.ground_truth is not None else None
                if truth is not None and truth.shape == maps.shape[1:]:
                    maps[k] = truth.astype(np.float32)
                else:
                    maps[k] = 1.0  # saw something it should not: flat, and scored as such
        return maps


class Plugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(ReadsTheAnswer)


def _values(workdir: Path, explainer: str, metric: str) -> list[float]:
    out = []
    for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["explainer"]["name"] == explainer and record["metric"] == metric:
            out.append(record["value"])
    return out


def test_a_method_never_sees_the_ground_truth_a_reference_does(tmp_path: Path, registry: manager.Registry) -> None:
    registry.add_plugin(Plugin(), name="answer-reader")
    config = RunConfig(
        explainers=["reads-the-answer", "oracle"],
        tracks=["shapes"],
        metrics=["iou", "max_sensitivity"],
        limit=8,
        workdir=tmp_path / "w",
        progress=False,
        examples=0,
    )
    with Runner(config, registry) as runner:
        runner.run()
    reader = _values(tmp_path / "w", "reads-the-answer", "iou")
    oracle = _values(tmp_path / "w", "oracle", "iou")
    assert len(reader) == 8 and len(oracle) == 8
    assert min(oracle) > 0.99  # the reference reads the truth
    assert max(reader) < 0.5, reader  # with the truth it scored 1.0 everywhere
    # the robustness family re-runs it with a context too: still blind (a flat map would be 0 sensitivity)
    sensitivity = _values(tmp_path / "w", "reads-the-answer", "max_sensitivity")
    assert len(sensitivity) == 8 and all(v is None or v > 0 for v in sensitivity), sensitivity


def test_blinded_samples_keep_id_image_and_target_only() -> None:
    image = np.zeros((4, 4, 3), np.float32)
    sample = Sample(id="s", image=image, label=2, ground_truth=object(), target=1, meta={"cue_box": (0, 0, 1, 1)})  # type: ignore[arg-type]
    (seen,) = blinded([sample])
    assert (seen.id, seen.image is image, seen.target) == ("s", True, 1)
    assert seen.ground_truth is None and seen.label is None and seen.meta == {}
    with pytest.raises(AttributeError):
        seen.ground_truth.binary()  # type: ignore[union-attr]
