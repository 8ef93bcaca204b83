"""Run health (issue 24, item 5): the Wilson interval, the model-at-chance check of a track's
provenance, and the error and warning lines read from a run summary. Oracles are computed by
hand (the Wilson formula written out in each test's comment); the end-to-end outputs are in
tests/test_health_outputs.py."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from torch import nn

from xaibench.api import Model, Sample, TrackSpec
from xaibench.runner.chance import (
    chance_warning,
    mean_interval,
    model_check,
    true_classes,
    unlabelled_threshold,
    wilson_interval,
)
from xaibench.runner.health import health_lines, na_share
from xaibench.runner.track import build_track

# ----------------------------------------------------------------------------- the Wilson score interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # p = 0.5, z^2 = 3.841459: centre (0.5 + 0.192073) / 1.384146 = 0.5,
        # half 1.959964 * sqrt(0.025 + 0.009604) / 1.384146 = 0.263407
        (5, 10, 0.236593, 0.763407),
        # p = 0: high = (z^2/n) / (1 + z^2/n) = 0.384146 / 1.384146 = 0.277533, low = 0
        (0, 10, 0.0, 0.277533),
        (10, 10, 0.722467, 1.0),
        # p = 0.8: centre 0.992073 / 1.384146 = 0.716740, half 1.959964 * 0.160011 / 1.384146 = 0.226577
        (8, 10, 0.490163, 0.943317),
        # p = 0.2: the mirror image of 8 of 10
        (2, 10, 0.056683, 0.509837),
        # 0 of 8: high = (3.841459 / 8) / (1 + 3.841459 / 8) = 0.480182 / 1.480182 = 0.324407
        (0, 8, 0.0, 0.324407),
    ],
)
def test_wilson_interval_against_hand_computed_values(successes: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=2e-6)


def test_wilson_interval_of_nothing_is_everything_and_bad_counts_raise() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(-1, 2)


# ----------------------------------------------------------------------------- which class a sample shows


def sample(i: int, *, label: Any = None, target: Any = None, **meta: Any) -> Sample:
    return Sample(id=f"s{i}", image=np.zeros((4, 4, 3), np.float32), label=label, target=target, meta=meta)


def test_true_classes_follow_the_target_then_the_candidates_then_the_label_rule() -> None:
    assert true_classes(sample(0, label=9, target=3), "predicted", 5) == {3}
    assert true_classes(sample(0, target_candidates=[1, 2]), "predicted", 5) == {1, 2}
    assert true_classes(sample(0, label=4), "label", 5) == {4}
    assert true_classes(sample(0, label=4), "predicted", 5) is None  # a label the rule does not explain
    assert true_classes(sample(0, label=5), "label", 5) is None  # out of the model's range
    assert true_classes(sample(0, label=True), "label", 5) is None  # a bool is no class
    assert true_classes(sample(0, target=7), "predicted", 5) is None
    assert true_classes(sample(0), "label", 5) is None


# ----------------------------------------------------------------------------- the rule on probabilities


def one_hot_probs(predicted: list[int], k: int) -> np.ndarray:
    probs = np.full((len(predicted), k), 0.1 / (k - 1))
    probs[np.arange(len(predicted)), predicted] = 0.9
    return probs


def test_labelled_accuracy_at_chance_when_the_interval_contains_one_over_k() -> None:
    # K = 4, chance 0.25; 5 of 10 right: [0.2366, 0.7634] contains 0.25 -> at chance
    samples = [sample(i, target=i % 4) for i in range(10)]
    predicted = [i % 4 if i < 5 else (i + 1) % 4 for i in range(10)]
    check = model_check(one_hot_probs(predicted, 4), samples)
    assert check["labelled"] and check["classes"] == 4 and check["chance"] == 0.25
    assert check["accuracy"] == 0.5 and check["ci"] == pytest.approx([0.236593, 0.763407], abs=2e-6)
    assert check["at_chance"] is True
    assert "5/10" in check["reason"] and "contains chance 0.250" in check["reason"]
    # 8 of 10 right: [0.4902, 0.9433] excludes 0.25 -> not at chance
    predicted = [i % 4 if i < 8 else (i + 1) % 4 for i in range(10)]
    check = model_check(one_hot_probs(predicted, 4), samples)
    assert check["accuracy"] == 0.8 and check["at_chance"] is False and "excludes" in check["reason"]


def test_candidate_labels_raise_the_chance_level() -> None:
    # every sample accepts 2 of K = 10 classes: chance 0.2; 2 of 10 right: [0.0567, 0.5098] contains it
    samples = [sample(i, target_candidates=[0, 1]) for i in range(10)]
    predicted = [0, 1] + [5] * 8
    check = model_check(one_hot_probs(predicted, 10), samples)
    assert check["chance"] == pytest.approx(0.2) and check["accuracy"] == 0.2 and check["at_chance"] is True
    # with 1/K = 0.1 as chance the same accuracy would not be at chance: the candidates matter
    samples = [sample(i, target=0) for i in range(10)]
    check = model_check(one_hot_probs([0, 0] + [5] * 8, 10), samples)
    assert check["chance"] == pytest.approx(0.1) and check["at_chance"] is True  # 0.1 in [0.0567, 0.5098]
    check = model_check(one_hot_probs([0] * 6 + [5] * 4, 10), samples)
    assert check["at_chance"] is False  # 6 of 10: [0.3127, 0.8318] excludes 0.1


def test_mean_interval_against_hand_computed_values() -> None:
    # mean 0.35, deviations +-0.05 and +-0.1: sd = sqrt(0.025 / 3) = 0.091287, se = 0.045644,
    # t(0.975, 3) = 3.182446: half 0.145258
    low, high = mean_interval(np.array([0.4, 0.45, 0.3, 0.25]))
    assert (low, high) == pytest.approx((0.204742, 0.495258), abs=1e-6)
    assert mean_interval(np.array([0.7])) == (0.7, 0.7)  # one value: the point
    assert mean_interval(np.array([0.9, 0.9, 0.9])) == pytest.approx((0.9, 0.9))
    with pytest.raises(ValueError, match="no values"):
        mean_interval(np.array([]))


@pytest.mark.parametrize(
    ("k", "threshold"),
    # 1/K + (1 - 1/K)/K, worked out: 0.5 + 0.25; 1/3 + 2/9; 0.1 + 0.09; 1/37 + 36/1369; 0.001 + 0.000999
    [(2, 0.75), (3, 0.555556), (10, 0.19), (37, 0.053324), (1000, 0.001999)],
)
def test_unlabelled_threshold_is_a_margin_over_one_over_k_that_shrinks_with_k(k: int, threshold: float) -> None:
    assert unlabelled_threshold(k) == pytest.approx(threshold, abs=1e-6)
    assert unlabelled_threshold(k) - 1 / k < 1 / k  # never more than the former rule's 2/K
    with pytest.raises(ValueError, match="at least 2 classes"):
        unlabelled_threshold(1)


def test_unlabelled_at_chance_when_the_interval_of_the_mean_top1_reaches_the_threshold() -> None:
    samples = [sample(i) for i in range(4)]  # no label: the mean-top-1 rule, threshold 0.4375 for K = 4
    low = np.array([[0.4, 0.2, 0.2, 0.2], [0.2, 0.45, 0.2, 0.15], [0.3, 0.3, 0.25, 0.15], [0.25] * 4])
    check = model_check(low, samples)  # mean top-1 0.35, interval [0.2047, 0.4953] (above)
    assert not check["labelled"] and check["mean_top1"] == pytest.approx(0.35) and check["at_chance"] is True
    assert check["accuracy"] is None and check["ci"] is None
    assert check["top1_ci"] == pytest.approx([0.204742, 0.495258], abs=1e-6) and check["threshold"] == 0.4375
    assert "does not clear 1/K + (1 - 1/K)/K = 0.4375 (K = 4)" in check["reason"]
    # mean 0.6 but wide: sd = sqrt(0.04 / 3) = 0.11547, half 3.182446 * 0.057735 = 0.183739 -> low 0.4163
    wide = np.array([[0.7, 0.1, 0.1, 0.1]] * 2 + [[0.1, 0.1, 0.5, 0.3]] * 2)
    assert model_check(wide, samples)["at_chance"] is True
    # mean 0.75, sd 0.057735, half 0.091870 -> low 0.6581 clears 0.4375
    high = np.array([[0.8, 0.1, 0.05, 0.05]] * 2 + [[0.1, 0.1, 0.7, 0.1]] * 2)
    check = model_check(high, samples)
    assert check["at_chance"] is False and check["top1_ci"] == pytest.approx([0.65813, 0.84187], abs=1e-5)
    assert "clears" in check["reason"] and "does not clear" not in check["reason"]
    # one sample without a class makes the track unlabelled: the rule is not mixed
    mixed = [sample(0, target=0), sample(1, target=0), sample(2, target=0), sample(3)]
    check = model_check(high, mixed)
    assert check["labelled"] is False and check["reason"].startswith("3 of 4 samples labelled; mean top-1")
    assert model_check(np.zeros((0, 4)), [])["at_chance"] is False  # no samples: nothing to say


def test_a_confident_two_class_model_is_not_at_chance() -> None:
    # the issue's case: mean top-1 0.95 on 16 unlabelled samples; the former rule's 2/K = 1.0 warned
    top1 = np.array([0.99, 0.91] * 8)
    probs = np.stack([top1, 1 - top1], axis=1)
    check = model_check(probs, [sample(i) for i in range(16)])
    assert check["mean_top1"] == pytest.approx(0.95) and check["at_chance"] is False
    assert chance_warning("cats-dogs", {"model": {"name": "m"}, "model_check": check}) is None


def random_weight_probs(k: int, n: int = 8) -> np.ndarray:
    """A random-weight ResNet-18 with ``k`` classes on ``n`` random images: its probabilities."""
    pytest.importorskip("timm")
    from xaibench.models.timm_model import TimmModel

    model = TimmModel(arch="resnet18", pretrained=False, num_classes=k)
    images = torch.from_numpy(np.random.default_rng(0).random((n, 3, 48, 48), dtype=np.float32))
    with torch.no_grad():
        return torch.softmax(model.module.eval()(images), dim=1).numpy()


def confident_probs(k: int, n: int = 8) -> np.ndarray:
    """:class:`ShadeModel` with ``k`` classes on flat grey images of its classes 0..4: it is sure."""
    images = torch.stack([torch.full((3, 8, 8), 0.2 * (i % min(k, 5))) for i in range(n)])
    with torch.no_grad():
        return torch.softmax(ShadeModel(k).module(images), dim=1).numpy()


@pytest.mark.parametrize("k", [2, 3, 10, 1000])
def test_unlabelled_rule_tells_a_confident_model_from_a_random_weight_one_at_every_k(k: int) -> None:
    samples = [sample(i) for i in range(8)]
    confident = model_check(confident_probs(k), samples)
    assert confident["classes"] == k and confident["mean_top1"] > 0.99 and confident["at_chance"] is False
    random = model_check(random_weight_probs(k), samples)
    # random weights: the mean top-1 sits just above 1/K, under the threshold
    assert random["classes"] == k and 1 / k <= random["mean_top1"] < unlabelled_threshold(k)
    assert random["at_chance"] is True
    if k == 2:  # the issue's numbers: a coin flip warns, and the warning says why
        assert random["mean_top1"] == pytest.approx(0.5, abs=0.1)
        line = chance_warning("cats-dogs", {"model": {"name": "resnet18"}, "model_check": random})
        assert line is not None and "does not clear 1/K + (1 - 1/K)/K = 0.75 (K = 2)" in line


# ----------------------------------------------------------------------------- from build_track


class ShadeModel(Model):
    """Predicts the class of a grey level: an image of class c is a flat grey ``0.2 * c`` (in [0, 1])."""

    name: ClassVar[str] = "shade"
    version: ClassVar[str] = "1.0.0"
    input_size = 8
    mean = (0.0, 0.0, 0.0)
    std = (1.0, 1.0, 1.0)

    def __init__(self, k: int) -> None:
        centres = torch.tensor([0.2 * c for c in range(k)])

        class Net(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return -1000.0 * (x.mean(dim=(1, 2, 3))[:, None] - centres[None, :]) ** 2

        self.module = Net().eval()

    @property
    def identity(self) -> str:
        return "shade@test"


class Shades:
    revision = "shades-1"
    synthetic = False


def shade(i: int, c: int, target: int) -> Sample:
    return Sample(id=f"s{i}", image=np.full((8, 8, 3), 0.2 * c, np.float32), label=target, target=target)


def test_build_track_records_the_check_in_the_provenance() -> None:
    spec = TrackSpec(name="shades", dataset="shades", model="shade", target="label")
    # K = 5, chance 0.2: the model sees shade c and says c; the targets are right on 9 of 10
    right = [shade(i, i % 5, i % 5) for i in range(9)] + [shade(9, 1, 3)]
    track = build_track(spec, Shades(), ShadeModel(5), right)  # type: ignore[arg-type]
    check = track.provenance["model_check"]
    assert check["labelled"] and check["accuracy"] == 0.9 and check["at_chance"] is False
    assert track.provenance["target_sources"] == {"mapped": 10}
    assert chance_warning("shades", track.provenance) is None
    # right on 2 of 10: [0.0567, 0.5098] contains 0.2 -> at chance, and the warning names the track and model
    wrong = [shade(i, i % 5, i % 5 if i < 2 else (i + 1) % 5) for i in range(10)]
    track = build_track(spec, Shades(), ShadeModel(5), wrong)  # type: ignore[arg-type]
    assert track.provenance["model_check"]["at_chance"] is True
    line = chance_warning("shades", track.provenance)
    assert line is not None and line.startswith("track shades: model shade looks at chance (accuracy 2/10")


def test_a_random_weight_37_class_resnet_is_at_chance() -> None:
    timm = pytest.importorskip("timm")
    from xaibench.models.timm_model import TimmModel

    model = TimmModel(arch="resnet18", pretrained=False, num_classes=37)
    assert timm is not None and model.module.num_classes == 37
    rng = np.random.default_rng(0)
    samples = [
        Sample(id=f"p{i}", image=rng.random((48, 48, 3), dtype=np.float32), label=3 * i, target=3 * i) for i in range(8)
    ]
    spec = TrackSpec(name="pets", dataset="folder", model="timm")
    track = build_track(spec, Shades(), model, samples)  # type: ignore[arg-type]
    check = track.provenance["model_check"]
    assert check["classes"] == 37 and check["labelled"] and check["at_chance"] is True
    # at most 1 of 8 right is what chance gives; its interval reaches down past 1/37 = 0.027
    assert check["ci"][0] <= 1 / 37 <= check["ci"][1]

    # the same images without labels (the prediction explained): the top-1 rule says so too
    unlabelled = [Sample(id=s.id, image=s.image) for s in samples]
    check = build_track(spec, Shades(), model, unlabelled).provenance["model_check"]  # type: ignore[arg-type]
    assert not check["labelled"] and check["at_chance"] is True and check["mean_top1"] < 2 / 37
    assert check["top1_ci"][0] <= unlabelled_threshold(37)  # the new rule says so as well as the former


# ----------------------------------------------------------------------------- lines from a summary


def metric(n: int, n_na: int, reasons: dict[str, int] | None = None) -> dict[str, Any]:
    return {"n": n, "n_na": n_na, "na_reasons": reasons or {}}


def explainer(name: str, metrics: dict[str, Any], *, reference: bool = False) -> dict[str, Any]:
    return {"explainer": {"name": name, "reference_only": reference}, "metrics": metrics}


def test_health_lines_error_when_more_than_half_of_the_methods_values_are_na() -> None:
    summary = {
        "tracks": {
            # 3 + 4 = 7 n/a of 2 + 10 = 12 values (58 %): an error; the oracle's 20 n/a do not count
            "mostly-na": {
                "provenance": {},
                "explainers": {
                    "gradient": explainer("gradient", {"iou": metric(1, 3, {"no mask": 3}), "deletion": metric(4, 0)}),
                    "random": explainer("random", {"iou": metric(0, 4, {"no mask": 3, "empty map": 1})}),
                    "oracle": explainer("oracle", {"iou": metric(0, 20, {"no ground truth": 20})}, reference=True),
                },
            },
            # 4 n/a of 8: exactly half is not more than half
            "half": {"explainers": {"gradient": explainer("gradient", {"iou": metric(4, 4, {"x": 4})})}},
            # only the reference is n/a: no error
            "reference-na": {
                "explainers": {
                    "gradient": explainer("gradient", {"iou": metric(4, 0)}),
                    "oracle": explainer("oracle", {"iou": metric(0, 40, {"no ground truth": 40})}, reference=True),
                }
            },
            "broken": {"error": "dataset 'x' yielded no samples"},  # reported where it failed
        }
    }
    errors, warnings = health_lines(summary)
    assert errors == [
        "track mostly-na: 7 of 12 values (58 %) of its explainers are n/a; "
        "most common reasons: no mask (6), empty map (1)"
    ]
    assert warnings == []
    assert na_share(summary["tracks"]["reference-na"])[:2] == (0, 4)


def test_health_lines_warn_once_per_track_whose_model_is_at_chance() -> None:
    at_chance = {
        "model": {"name": "timm"},
        "model_check": {"at_chance": True, "reason": "accuracy 0/8 = 0.000, 95 % interval [0.000, 0.324]"},
    }
    fine = {"model": {"name": "shapes-cnn"}, "model_check": {"at_chance": False, "reason": "..."}}
    summary = {
        "tracks": {
            "pets": {"provenance": at_chance, "explainers": {"g": explainer("g", {"deletion": metric(8, 0)})}},
            "shapes": {"provenance": fine, "explainers": {"g": explainer("g", {"deletion": metric(8, 0)})}},
            "old": {"provenance": {"model": {"name": "m"}}, "explainers": {}},  # before the check existed
        }
    }
    errors, warnings = health_lines(summary)
    assert errors == []
    assert warnings == [
        "track pets: model timm looks at chance (accuracy 0/8 = 0.000, 95 % interval [0.000, 0.324]); "
        "its explainers are ranked on differences such a model does not support"
    ]
