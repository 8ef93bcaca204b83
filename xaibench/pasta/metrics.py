"""Metric plugins ``pasta_q1`` .. ``pasta_q6``: the predicted human rating (1..5 stars) per question.

Family ``perceptual``, unit "stars (1-5)". Q1-Q4: direction ``higher`` (more stars). Only
``pasta_q1`` ("consistent with how I would explain the class") enters the family rank, and only
when the checkpoint is valid (DESIGN 7: labelled ``PASTA``, or a held-out Q1 technique-level
Spearman of at least 0.3 on its model card, recorded as the ``heldout_q1_spearman`` param); the
others are shown. Q5 and Q6 ask how much the explanation *changed* under a light or strong
perturbation: more stars mean more change, so they are ``lower`` is better, shown, never ranked.

Parameters: ``checkpoint`` (a packaged checkpoint name, default ``proxy-v1``, or a file path;
``$XAIBENCH_PASTA_CHECKPOINT`` replaces the default).
The metric's recorded params add the checkpoint's label (``PASTA (proxy, technique-level
labels)`` for the default), its digest, the render and sentence versions and the encoder
identities, so every stored result says which checkpoint and render produced it.

n/a, never a number, when: the checkpoint cannot be loaded; it has no branch for the
explanation kind; its encoder cannot run here or differs from the one it was trained with; the
render version changed; or the explained class is outside a checkpoint's fixed label vocabulary.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from xaibench.api import Metric, MetricCost, MetricInput, MetricOutput
from xaibench.pasta.checkpoint import DEFAULT_CHECKPOINT

__all__ = ["PASTA_METRICS", "QUESTION_TEXT", "PastaQ1", "PastaQ2", "PastaQ3", "PastaQ4", "PastaQ5", "PastaQ6"]

CHECKPOINT_ENV = "XAIBENCH_PASTA_CHECKPOINT"
"""When set, the checkpoint used by metrics created without an explicit ``checkpoint`` parameter."""

QUESTION_TEXT: dict[str, str] = {
    "Q1": "the explanation is consistent with how I would explain the class",
    "Q2": "the explanation can be trusted",
    "Q3": "the explanation is easy to understand",
    "Q4": "the explanation can be understood by a large number of people",
    "Q5": "how much the explanation changed under a light perturbation",
    "Q6": "how much the explanation changed under a strong perturbation",
}


class _PastaMetric(Metric):
    family: ClassVar[str] = "perceptual"  # type: ignore[assignment]
    direction: ClassVar[str] = "higher"  # type: ignore[assignment]
    unit: ClassVar[str] = "stars (1-5)"
    value_range: ClassVar[tuple[float, float]] = (1.0, 5.0)  # 1 + 4 u, u in [0, 1] (xaibench.pasta.network)
    cost = MetricCost(forward_passes=1)  # one encoder pass over the map's render
    version: ClassVar[str] = "1.0.0"
    licence: ClassVar[str] = "Apache-2.0"
    needs: ClassVar[tuple[str, ...]] = ("model",)
    explanation_kinds: ClassVar[tuple[str, ...]] = ("saliency", "concept")  # type: ignore[assignment]
    default_params: ClassVar[dict[str, Any]] = {"checkpoint": DEFAULT_CHECKPOINT}
    question: ClassVar[int] = 0

    def __init__(self, **params: Any) -> None:
        if "checkpoint" not in params and os.environ.get(CHECKPOINT_ENV):
            params["checkpoint"] = os.environ[CHECKPOINT_ENV]
        super().__init__(**params)
        self._scorer: Any = None
        self._error: str | None = None
        try:
            from xaibench.pasta.scorer import get_scorer

            self._scorer = get_scorer(self.params["checkpoint"])
            self.params.update(self._scorer.describe())
        except Exception as exc:  # noqa: BLE001 - a missing or broken checkpoint gives n/a, not a crash
            self._error = f"PASTA checkpoint {self.params['checkpoint']!r} could not be loaded: {exc}"
            self.params["error"] = self._error

    def score(self, batch: MetricInput) -> MetricOutput:
        n = len(batch.samples)
        if self._scorer is None:
            return MetricOutput.not_applicable(n, self._error or "no PASTA checkpoint")
        kind = "concept" if batch.saliency is None and batch.concepts is not None else "saliency"
        scorer = self._scorer
        scored = batch.memo.get(("pasta", scorer.checkpoint.sha256, kind), lambda: scorer.score(batch, kind))
        values = np.asarray(scored.scores[:, self.question], dtype=np.float64)
        return MetricOutput(values=values, reasons=list(scored.reasons))


class PastaQ1(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q1: the explanation is consistent with how I would
    explain the class. Stars (1-5), higher is better; the one PASTA metric in the perceptual rank."""

    name = "pasta_q1"
    question = 0
    ranking = True
    description = f"PASTA Q1: predicted 1-5 star rating, {QUESTION_TEXT['Q1']} (default: proxy checkpoint)"


class PastaQ2(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q2: the explanation can be trusted. Stars (1-5),
    higher is better; not ranked."""

    name = "pasta_q2"
    question = 1
    description = f"PASTA Q2: predicted 1-5 star rating, {QUESTION_TEXT['Q2']} (default: proxy checkpoint)"


class PastaQ3(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q3: the explanation is easy to understand.
    Stars (1-5), higher is better; not ranked."""

    name = "pasta_q3"
    question = 2
    description = f"PASTA Q3: predicted 1-5 star rating, {QUESTION_TEXT['Q3']} (default: proxy checkpoint)"


class PastaQ4(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q4: the explanation can be understood by a large
    number of people. Stars (1-5), higher is better; not ranked."""

    name = "pasta_q4"
    question = 3
    description = f"PASTA Q4: predicted 1-5 star rating, {QUESTION_TEXT['Q4']} (default: proxy checkpoint)"


class PastaQ5(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q5: how much the explanation changed under a light
    perturbation. Stars (1-5), lower is better (fewer stars: the explanation changed less); not ranked."""

    name = "pasta_q5"
    direction = "lower"
    question = 4
    description = f"PASTA Q5: predicted 1-5 star rating, {QUESTION_TEXT['Q5']} (default: proxy checkpoint)"


class PastaQ6(_PastaMetric):
    """Predicted 1-5 star rating for PASTA question Q6: how much the explanation changed under a strong
    perturbation. Stars (1-5), lower is better (fewer stars: the explanation changed less); not ranked."""

    name = "pasta_q6"
    direction = "lower"
    question = 5
    description = f"PASTA Q6: predicted 1-5 star rating, {QUESTION_TEXT['Q6']} (default: proxy checkpoint)"


PASTA_METRICS: tuple[type[Metric], ...] = (PastaQ1, PastaQ2, PastaQ3, PastaQ4, PastaQ5, PastaQ6)
