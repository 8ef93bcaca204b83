"""Is the model of a track better than chance? (issue 24, item 5.)

A model at chance (random weights, the wrong checkpoint, inputs it was not trained on) makes every
faithfulness curve flat: deletion is 1/K for every explainer, and a ranking of the explainers
ranks float noise. :func:`model_check` tells from the clean forward pass of a track (the
probabilities :func:`xaibench.runner.track.build_track` computes anyway) whether that is so:

- **labelled** track (every sample names the model class it shows: ``Sample.target``, the
  candidate classes of ``meta["target_candidates"]``, or, with the target rule ``"label"``, an
  integer ``Sample.label`` in ``[0, K)``): at chance when the 95 % Wilson score interval of the
  top-1 accuracy contains the chance accuracy (``1/K`` for K model classes; the mean of
  ``|candidates| / K`` when labels span several classes);
- **unlabelled** track: at chance when the mean top-1 probability is not clearly above chance:
  the 95 % interval of the mean (Student's t over the track's samples) reaches down to
  :func:`unlabelled_threshold` ``(K) = 1/K + (1 - 1/K)/K``. In words: the model's confidence in
  excess of chance, ``(mean_top1 - 1/K) / (1 - 1/K)`` in [0, 1] (0 for a uniform output, 1 for a
  certain one), must clearly exceed ``1/K``: half the way to certainty for K = 2 (a threshold of
  0.75), about ``2/K`` for large K (0.0533 for K = 37, 0.001999 for K = 1000), where the former
  rule (``mean_top1 < 2/K``) was right but said every two-class model was at chance.

The result is stored in the track's provenance (``provenance["model_check"]``), so the run
summary, the records' submissions, the leaderboard files and the site all carry it;
:func:`chance_warning` is the one sentence every output prints for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

from xaibench.api import Sample

__all__ = [
    "Z95",
    "ModelCheck",
    "chance_warning",
    "mean_interval",
    "model_check",
    "true_classes",
    "unlabelled_threshold",
    "wilson_interval",
]

Z95 = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95 % interval."""


class ModelCheck(TypedDict):
    """``provenance["model_check"]`` of a track (docs/results.md)."""

    labelled: bool
    """Every sample names its model class (the accuracy rule); else the mean-top-1 rule."""
    n: int
    """Samples checked (the track's samples)."""
    classes: int
    """K, the model's number of classes (columns of its probabilities)."""
    chance: float
    """Labelled: the accuracy of guessing, ``1/K`` (or mean ``|candidates|/K``); unlabelled: ``1/K``."""
    accuracy: float | None
    """Top-1 accuracy in [0, 1] (labelled tracks; else ``None``)."""
    ci: list[float] | None
    """The 95 % Wilson score interval ``[low, high]`` of the accuracy (labelled tracks; else ``None``)."""
    mean_top1: float
    """Mean over samples of the largest class probability, in [1/K, 1]."""
    top1_ci: list[float] | None
    """Unlabelled tracks: the 95 % interval ``[low, high]`` of ``mean_top1`` (:func:`mean_interval`);
    labelled tracks: ``None``."""
    threshold: float | None
    """Unlabelled tracks: :func:`unlabelled_threshold` of K, the value ``top1_ci`` must clear;
    labelled tracks: ``None``."""
    at_chance: bool
    reason: str
    """One sentence: the numbers the verdict rests on."""


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval ``(low, high)`` of a proportion ``successes / n`` (both in
    [0, 1]): ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``z`` = :data:`Z95`.
    Unlike the normal (Wald) interval it is not empty at 0 or n successes, which is where a small
    track's accuracy often is. SciPy computes it (``binomtest(...).proportion_ci(method="wilson")``;
    tests/test_health.py checks it against values worked out by hand). ``n == 0`` gives
    ``(0.0, 1.0)``: nothing is known."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest

    ci = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def mean_interval(values: np.ndarray) -> tuple[float, float]:
    """The 95 % Student's t interval ``(low, high)`` of the mean of ``values`` (1-D, any unit):
    ``mean ± t(0.975, n - 1) · sd / sqrt(n)`` with the sample standard deviation. One value, or
    values all equal, give the point ``(mean, mean)``: nothing says it varies."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("mean_interval: no values")
    mean = float(values.mean())
    if values.size < 2:
        return mean, mean
    from scipy.stats import t

    half = float(t.ppf(0.975, values.size - 1)) * float(values.std(ddof=1)) / float(np.sqrt(values.size))
    return mean - half, mean + half


def unlabelled_threshold(classes: int) -> float:
    """The mean top-1 probability an unlabelled track's model must clearly exceed not to be at
    chance: ``1/K + (1 - 1/K)/K`` for K = ``classes`` >= 2 (a probability). It is the point where
    the confidence in excess of chance, ``(p - 1/K) / (1 - 1/K)``, equals ``1/K``: 0.75 for K = 2,
    0.5556 for K = 3, 0.19 for K = 10, 0.001999 for K = 1000 (about ``2/K`` as K grows)."""
    if classes < 2:
        raise ValueError(f"unlabelled_threshold: need at least 2 classes, got {classes}")
    return 1.0 / classes + (1.0 - 1.0 / classes) / classes


def true_classes(sample: Sample, rule: str, classes: int) -> frozenset[int] | None:
    """The model classes ``sample`` shows, as its dataset or the track's target rule says: its
    ``target``; else its ``meta["target_candidates"]``; else, with ``rule == "label"``, its
    integer ``label`` when in ``[0, classes)``; else ``None`` (the sample is unlabelled for the
    model). A class outside ``[0, classes)`` does not count."""

    def valid(c: object) -> bool:
        return isinstance(c, int | np.integer) and not isinstance(c, bool) and 0 <= int(c) < classes

    if sample.target is not None:
        return frozenset({int(sample.target)}) if valid(sample.target) else None
    candidates = sample.meta.get("target_candidates") or []
    if candidates:
        return frozenset(int(c) for c in candidates) if all(valid(c) for c in candidates) else None
    if rule == "label" and sample.label is not None and valid(sample.label):
        return frozenset({int(sample.label)})
    return None


def model_check(probs: np.ndarray, samples: Sequence[Sample], rule: str = "predicted") -> ModelCheck:
    """Whether the model whose clean probabilities on ``samples`` are ``probs`` (``(N, K)``, rows
    summing to 1) is at chance on them; ``rule`` is the track's target rule (see the module doc)."""
    probs = np.asarray(probs, dtype=np.float64)
    n, k = int(probs.shape[0]), int(probs.shape[1])
    if n != len(samples):
        raise ValueError(f"model_check: {n} rows of probabilities for {len(samples)} samples")
    mean_top1 = float(probs.max(axis=1).mean()) if n else 0.0
    truth = [true_classes(s, rule, k) for s in samples]
    labelled = n > 0 and all(t is not None for t in truth)
    out: ModelCheck = {
        "labelled": labelled,
        "n": n,
        "classes": k,
        "chance": 1.0 / k if k else 0.0,
        "accuracy": None,
        "ci": None,
        "mean_top1": round(mean_top1, 6),
        "top1_ci": None,
        "threshold": None,
        "at_chance": False,
        "reason": "",
    }
    if k < 2:
        out["reason"] = f"the model has {k} class: no chance level"
        return out
    if labelled:
        predicted = probs.argmax(axis=1)
        correct = sum(int(predicted[i]) in t for i, t in enumerate(truth) if t is not None)
        chance = float(np.mean([len(t) / k for t in truth if t is not None]))
        low, high = wilson_interval(correct, n)
        at_chance = low <= chance <= high
        out.update(
            chance=round(chance, 6),
            accuracy=round(correct / n, 6),
            ci=[round(low, 6), round(high, 6)],
            at_chance=at_chance,
            reason=(
                f"accuracy {correct}/{n} = {correct / n:.3f}, 95 % interval [{low:.3f}, {high:.3f}] "
                f"{'contains' if at_chance else 'excludes'} chance {chance:.3f} (K = {k})"
            ),
        )
        return out
    if n == 0:
        out["reason"] = "no samples: nothing to check"
        return out
    threshold = unlabelled_threshold(k)
    low, high = mean_interval(probs.max(axis=1))
    at_chance = low <= threshold
    known = sum(t is not None for t in truth)
    labels = f"{known} of {n} samples labelled" if known else "no labels"
    out.update(
        top1_ci=[round(low, 6), round(high, 6)],
        threshold=round(threshold, 6),
        at_chance=at_chance,
        reason=(
            f"{labels}; mean top-1 probability {mean_top1:.3f}, 95 % interval [{low:.3f}, {high:.3f}], "
            f"{'does not clear' if at_chance else 'clears'} 1/K + (1 - 1/K)/K = {threshold:.4g} (K = {k})"
        ),
    )
    return out


def chance_warning(track: str, provenance: Mapping[str, Any]) -> str | None:
    """The warning line for a track whose provenance says its model is at chance, else ``None``:
    the same sentence in the summary's health, the leaderboard files and the site."""
    check = provenance.get("model_check")
    if not isinstance(check, Mapping) or check.get("at_chance") is not True:
        return None
    model = provenance.get("model")
    name = model.get("name") if isinstance(model, Mapping) else None
    return (
        f"track {track}: model {name or '?'} looks at chance ({check.get('reason', '')}); "
        "its explainers are ranked on differences such a model does not support"
    )
