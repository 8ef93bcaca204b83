"""The metric selector language (xaibench/suites/metric_selection.py) and the time estimate
(xaibench/runner/estimate.py): unit tests with hand-written oracles."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from xaibench.api import ForwardCounter, GroundTruth, Metric, Sample, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry
from xaibench.runner.estimate import (
    EXPLANATION_COST,
    UNKNOWN_COST,
    duration,
    estimate,
    metric_cost,
    metrics_cost,
)
from xaibench.runner.run import Runner
from xaibench.suites.adhoc import adhoc_track
from xaibench.suites.metric_selection import check_selectors, resolve_metrics, select_metrics, track_has_masks

ALIGNMENT_RANKING = ["iou", "mae", "mass_accuracy", "pointing_game"]
DEFAULT_WITH_MASKS = [*ALIGNMENT_RANKING, "deletion", "insertion", "model_randomisation"]


def _names(metrics: list[Metric]) -> list[str]:
    return [m.name for m in metrics]


def test_default_is_the_photos_faithfulness_ranking_metrics_plus_alignment_when_masked(registry: Registry) -> None:
    track = adhoc_track("timm:resnet18", "folder:/data/cats")
    assert track.metrics == ("default",)
    with_masks = resolve_metrics(registry, track, None, masks=True)
    assert _names(with_masks) == DEFAULT_WITH_MASKS
    params = {m.name: dict(m.params) for m in with_masks}
    assert params["deletion"]["steps"] == 10 and params["insertion"]["steps"] == 10  # the photos track's curves
    assert params["model_randomisation"] == {"blocks": 5}
    assert _names(resolve_metrics(registry, track, None, masks=False)) == [
        "deletion",
        "insertion",
        "model_randomisation",
    ]


def test_all_family_and_ids(registry: Registry) -> None:
    track = TrackSpec(name="t", dataset="shapes", model="shapes-cnn")
    every = _names(resolve_metrics(registry, track, ["all"]))
    assert len(every) == 59 and not any(n.startswith("quantus_") for n in every)  # default = False stays out
    native = _names(resolve_metrics(registry, track, ["native"]))
    assert set(every) <= set(native)  # no installed plugin adds a default metric here
    assert {"irof", "continuity", "complexity", "efficient_mprt"} <= set(native) - set(every)
    assert not any(n.startswith("quantus_") for n in native)  # a plugin's opt-in metrics are not native
    assert _names(resolve_metrics(registry, track, None)) == every  # a track without metrics: all, as before
    alignment = _names(resolve_metrics(registry, track, ["family:alignment"]))
    assert len(alignment) == 29 and set(ALIGNMENT_RANKING) <= set(alignment) and "deletion" not in alignment
    # ids keep their order, repeats collapse, and a named metric keeps its own defaults
    chosen = select_metrics(registry, ["deletion", "family:sanity", "deletion", "default"])
    assert list(chosen)[:2] == ["deletion", "model_randomisation"] and chosen["deletion"] == {}
    assert dict(resolve_metrics(registry, track, ["deletion"])[0].params)["steps"] == 50


def test_track_params_win_over_the_defaults_and_wanted_wins_over_the_track(registry: Registry) -> None:
    track = TrackSpec(name="t", dataset="d", model="m", metrics=("default",), metric_params={"deletion": {"steps": 20}})
    params = {m.name: dict(m.params) for m in resolve_metrics(registry, track, None)}
    assert params["deletion"]["steps"] == 20 and params["insertion"]["steps"] == 10
    assert _names(resolve_metrics(registry, track, ["iou", "sparseness"])) == ["iou", "sparseness"]


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("iuo", "unknown metric 'iuo'; did you mean 'iou', 'irof'?"),
        (
            "family:alignmnt",
            "'family:alignmnt': no such metric family; families: alignment, faithfulness, ground_truth, other, ",
        ),
        ("family:", "'family:': no such metric family"),
        ("", "metric selector '': expected a metric id, family:NAME, all, native or default"),
    ],
)
def test_bad_selectors_are_one_line(registry: Registry, selector: str, message: str) -> None:
    with pytest.raises(XaibenchError) as info:
        check_selectors(registry, ["iou", selector])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_masks_on_at_least_half_of_the_samples() -> None:
    image = np.zeros((4, 4, 3), np.uint8)
    truth = GroundTruth(mask=np.ones((4, 4), bool))
    levels = GroundTruth(levels=np.full((4, 4), 0.5, np.float32))

    def samples(*truths: GroundTruth | None) -> list[Sample]:
        return [Sample(id=str(i), image=image, ground_truth=t) for i, t in enumerate(truths)]

    assert track_has_masks(samples(truth, None)) and track_has_masks(samples(levels, levels, None))
    assert not track_has_masks(samples(truth, None, None)) and not track_has_masks([])
    assert not track_has_masks(samples(GroundTruth(notes=("no mask",)), None))


# ------------------------------------------------------------------------------------ estimate


class _Opaque(Metric):
    """A third-party metric that needs the model and declares nothing readable."""

    name: ClassVar[str] = "opaque"
    needs: ClassVar[tuple[str, ...]] = ("model",)
    family: ClassVar[Any] = "faithfulness"


def test_estimate_arithmetic(registry: Registry) -> None:
    track = TrackSpec(name="t", dataset="d", model="m", metric_params={"deletion": {"steps": 10}})
    deletion, iou, randomisation, road = resolve_metrics(
        registry, track, ["deletion", "iou", "model_randomisation", "road_sufficiency"]
    )
    costs = [metric_cost(m) for m in (deletion, iou, randomisation, road, _Opaque())]
    assert costs == [11.0, 0.0, 6 * EXPLANATION_COST, 50.0, UNKNOWN_COST]
    # per sample: 11 + 0 + 18 + 50 + 3 (the explanation) = 82; two explainers with 8 samples to do,
    # one resumed with nothing left: 16 x 82 = 1312 forward passes; at 40 images/s 32.8 s
    found = estimate([deletion, iou, randomisation, road], [8, 0, 8], 40.0)
    assert (found.forward_passes, found.explainers, found.samples, found.metrics) == (1312.0, 2, 8, 4)
    assert found.seconds == pytest.approx(32.8)
    assert found.line("cats") == (
        "estimate: about 33 s for track cats (4 metrics x 2 explainers x 8 samples, "
        "~1312 forward passes at 40 images/s)"
    )
    assert estimate([deletion], [0, 0], 40.0).forward_passes == 0.0


def test_the_robustness_members_pass_is_counted_once(registry: Registry) -> None:
    track = TrackSpec(name="t", dataset="d", model="m", metric_params={"avg_sensitivity": {"n": 4}})
    max_s, avg_s, lipschitz = resolve_metrics(
        registry, track, ["max_sensitivity", "avg_sensitivity", "local_lipschitz_estimate"]
    )
    one = metric_cost(max_s)
    assert one == 11 * EXPLANATION_COST  # n = 10 perturbed inputs, each explained, and the clean one
    # max_sensitivity and local_lipschitz_estimate share (n=10, radius=0.02); avg_sensitivity (n=4) has its own
    assert metrics_cost([max_s, lipschitz]) == one
    assert metrics_cost([max_s, avg_s, lipschitz]) == one + metric_cost(avg_s) == one + 5 * EXPLANATION_COST


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "1 s"), (89, "89 s"), (90, "2 min"), (185, "3 min"), (4850, "1 h 21 min")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_the_runner_logs_an_estimate_only_above_a_minute() -> None:
    def slow(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.2)  # 4 images per 0.2 s at best: at most 20 images/s
        return torch.zeros(x.shape[0], 3)

    track = SimpleNamespace(
        forward=ForwardCounter(slow), inputs=torch.zeros(6, 3, 8, 8), spec=SimpleNamespace(name="cats")
    )
    logged: list[str] = []
    runner = SimpleNamespace(progress=SimpleNamespace(log=logged.append))

    def state(missing: int) -> SimpleNamespace:
        return SimpleNamespace(metrics=[_Opaque()], missing_samples=lambda: set(range(missing)))

    # 100 samples x (50 + 3) forward passes at <= 20 images/s: >= 265 s
    long = Runner.announce_estimate(runner, track, [state(100)])  # type: ignore[arg-type]
    assert long is not None and long.seconds > 60 and logged == [long.line("cats")]
    assert (
        logged[0].startswith("estimate: about ")
        and "for track cats (1 metrics x 1 explainers x 100 samples" in logged[0]
    )
    assert track.forward.images == 0  # the timing forward is not counted against the track
    short = Runner.announce_estimate(runner, track, [state(1)])  # type: ignore[arg-type]
    assert short is not None and short.seconds < 60 and len(logged) == 1
    assert Runner.announce_estimate(runner, track, [state(0), state(0)]) is None  # type: ignore[arg-type]
