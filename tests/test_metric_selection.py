"""The metric selector language (xaibench/suites/metric_selection.py) and the time estimate
(xaibench/runner/estimate.py): unit tests with hand-written oracles."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from xaibench.api import ForwardCounter, GroundTruth, Metric, MetricCost, Sample, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry
from xaibench.runner.estimate import (
    EXPLANATION_COST,
    duration,
    estimate,
    metric_cost,
    metrics_cost,
    unknown_line,
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


class _Stated(_Opaque):
    """A third-party metric that states its cost: 50 forward passes per sample."""

    name: ClassVar[str] = "stated"
    cost: ClassVar[Any] = MetricCost(forward_passes=50)


def test_estimate_arithmetic(registry: Registry) -> None:
    track = TrackSpec(name="t", dataset="d", model="m", metric_params={"deletion": {"steps": 10}})
    deletion, iou, randomisation, road = resolve_metrics(
        registry, track, ["deletion", "iou", "model_randomisation", "road_sufficiency"]
    )
    costs = [metric_cost(m) for m in (deletion, iou, randomisation, road, _Opaque())]
    assert costs == [11.0, 0.0, 6 * EXPLANATION_COST, 50.0, None]  # the opaque metric states none: unknown
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
    assert one == 11 + 10 * EXPLANATION_COST  # n = 10 perturbed inputs, each explained; n + 1 forwards
    # max_sensitivity and local_lipschitz_estimate share (n=10, radius=0.02); avg_sensitivity (n=4) has its own
    assert metrics_cost([max_s, lipschitz]) == one
    assert metrics_cost([max_s, avg_s, lipschitz]) == one + metric_cost(avg_s) == one + 5 + 4 * EXPLANATION_COST


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
    runner = SimpleNamespace(progress=SimpleNamespace(log=logged.append), unknown_costs_said=set())

    def state(missing: int) -> SimpleNamespace:
        return SimpleNamespace(metrics=[_Stated()], missing_samples=lambda: set(range(missing)))

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


# ------------------------------------------------------------------------------- a metric states its cost


def test_every_built_in_metric_states_its_cost(registry: Registry) -> None:
    """Each of xaibench's metrics states what one sample costs it (``Metric.cost``), valid for its
    parameters; the estimate reads that and nothing else (a metric without one fails here)."""
    from xaibench.metric_cost import cost_problem

    built_in = [e for e in registry.entries("metric") if e.info.distribution == "xaibench"]
    assert len(built_in) > 80
    silent = [e.info.name for e in built_in if metric_cost(registry.create("metric", e.info.name)) is None]
    assert silent == [], f"these metrics state no cost (Metric.cost): {silent}"
    assert all(cost_problem(e.cls.cost, e.cls.default_params) is None for e in built_in)
    assert metric_cost(_Opaque()) is None  # the check above can fail: a metric without a cost has none


def test_stated_costs_are_the_counts_the_metrics_make(registry: Registry) -> None:
    """What a metric states one sample costs is what it does: the images it has the explainer
    explain again, and its forward passes to within one (the clean image and the all-baseline
    one are shared by a batch's faithfulness metrics), counted while it scores two samples of
    the shapes track (64 x 64 px)."""
    from xaibench.api import BatchMemo, MetricInput
    from xaibench.metric_cost import evaluate_cost
    from xaibench.runner.evaluate import score_batch
    from xaibench.runner.track import load_track

    spec = next(t for t in registry.create("suite", "default").tracks() if t.name == "shapes")
    track = load_track(spec, registry, limit=2)
    gradient = registry.create("explainer", "gradient")
    explained = [0]

    class Counting:
        name, params = gradient.name, gradient.params

        def explain(self, model: Any, inputs: Any, targets: Any, **kw: Any) -> Any:
            explained[0] += int(inputs.shape[0])
            return gradient.explain(model, inputs, targets, **kw)

    assert track.inputs is not None and track.forward is not None
    maps = np.asarray(gradient.explain(track.model, track.inputs, torch.as_tensor(track.targets), seed=0))
    small = {
        "deletion": {"steps": 6},
        "road_faithfulness": {"thresholds": [10, 20]},
        "max_sensitivity": {"n": 2},
        "model_randomisation": {"blocks": 2},
        "smooth_mprt": {"blocks": 1, "n": 2},
        "selectivity": {"patch_size": 32},
        "region_perturbation": {"patch_size": 16, "regions_evaluation": 5},
        "sensitivity_n": {"sizes": 2, "nr_runs": 3},
        "monotonicity_correlation": {"steps": 4, "nr_samples": 2},
        "non_sensitivity": {"patch": 32},
        "input_invariance": {},
        "average_drop": {},
    }
    for name, params in small.items():
        metric = registry.create("metric", name, **params)
        batch = MetricInput(
            saliency=maps.astype(np.float64),
            concepts=None,
            samples=list(track.samples),
            targets=track.targets,
            inputs=track.inputs,
            model=track.model,
            forward=track.forward,
            explainer=Counting(),  # type: ignore[arg-type]
            memo=BatchMemo(),
        )
        before, explained[0] = track.forward.images, 0
        out = score_batch(metric, batch, "saliency")
        assert not any(out.reasons), (name, out.reasons)
        parts = evaluate_cost(metric.cost, dict(metric.params), 64 * 64)
        assert parts is not None
        stated_explanations = sum(p.explanations for p in parts)
        # a metric that re-runs the explainer reports its explanations as its forward passes
        forwards = (out.forward_passes or track.forward.images - before) / 2 - (
            explained[0] / 2 if out.forward_passes else 0
        )
        assert explained[0] / 2 == stated_explanations, name
        assert abs(sum(p.forward_passes for p in parts) - forwards) <= 1, (name, forwards)


def test_a_metric_that_states_no_cost_is_left_out_and_said_once() -> None:
    """Never a silent guess: the estimate counts what the other metrics state, says ``at least``,
    and the run says once (not per track) which metric it left out."""
    track = SimpleNamespace(
        forward=ForwardCounter(lambda x: torch.zeros(x.shape[0], 3)),
        inputs=torch.zeros(6, 3, 8, 8),
        spec=SimpleNamespace(name="cats"),
    )
    logged: list[str] = []
    runner = SimpleNamespace(progress=SimpleNamespace(log=logged.append), unknown_costs_said=set())
    state = SimpleNamespace(metrics=[_Opaque(), _Stated()], missing_samples=lambda: set(range(4)))
    first = Runner.announce_estimate(runner, track, [state])  # type: ignore[arg-type]
    again = Runner.announce_estimate(runner, track, [state])  # type: ignore[arg-type]  # the next track
    assert first is not None and again is not None and first.unknown == ("opaque",)
    assert first.forward_passes == 4 * (50 + EXPLANATION_COST)  # the stated metric and the explanation only
    assert [line for line in logged if "no cost" in line] == [f"[yellow]{unknown_line(['opaque'])}"]
    assert unknown_line(["opaque"]) == (
        "estimate: metric opaque states no cost (Metric.cost): the time estimates leave it out"
    )
    slow = estimate([_Opaque(), _Stated()], [100], 1.0)
    assert slow.line("cats") == (
        "estimate: at least 1 h 28 min for track cats (2 metrics x 1 explainers x 100 samples, "
        "~5300 forward passes at 1 images/s; 1 of unknown cost left out)"
    )


@pytest.mark.parametrize(
    ("cost", "problem"),
    [
        (MetricCost(forward_passes="steps + 1"), None),
        (MetricCost(forward_passes="max(thresholds) // 2", explanations=1), None),
        ((MetricCost(forward_passes="pixels // steps ** 2", shared="pass"), MetricCost(explanations="steps")), None),
        (None, None),
        (MetricCost(forward_passes="stpes + 1"), "reads 'stpes', which is not a parameter"),
        (MetricCost(forward_passes="__import__('os')"), "Call is not allowed"),
        (MetricCost(forward_passes="steps.real"), "Attribute is not allowed"),
        (MetricCost(forward_passes="2 ** 99"), "an exponent must be from 0 to 8"),
        (MetricCost(forward_passes="steps +"), "is not an expression"),
        (MetricCost(forward_passes=-1), "must be finite and >= 0"),
        (MetricCost(explanations=True), "must be a number or an expression"),
        (MetricCost(shared=""), "shared must be a non-empty name"),
        ({"forward_passes": 1}, "cost must be a MetricCost"),
    ],
)
def test_a_stated_cost_is_checked_when_the_metric_registers(cost: Any, problem: str | None) -> None:
    from xaibench.metric_cost import cost_problem
    from xaibench.plugins.hookspecs import hookimpl

    found = cost_problem(cost, ["steps", "thresholds"])
    assert (found is None) if problem is None else (found is not None and problem in found), found

    class Costed(_Opaque):
        name: ClassVar[str] = "costed"
        default_params: ClassVar[dict[str, Any]] = {"steps": 3, "thresholds": (10, 20)}

    Costed.cost = cost  # type: ignore[misc]

    class Plugin:
        @hookimpl
        def register_metrics(self, register: Any) -> None:
            register(Costed)

    registry = Registry()
    status = registry.add_plugin(Plugin(), name="costed")
    if problem is None:
        assert status.ok and "costed" in registry.names("metric")
    else:  # the plugin fails to load, in one line naming the metric and what is wrong
        assert not status.ok and "costed" not in registry.names("metric")
        assert "metric 'costed': " in str(status.error) and problem in str(status.error), status.error


def test_a_cost_is_computed_from_the_parameters_and_the_input_size() -> None:
    from xaibench.metric_cost import evaluate_cost

    road = MetricCost(forward_passes="max(thresholds) // 2", shared="road")
    [part] = evaluate_cost(road, {"thresholds": (10, 30, 99), "road_noise": 0.01}, 4096) or ()
    assert part.forward_passes == 49.0 and part.explanations == 0.0 and part.shared is not None
    patches = MetricCost(forward_passes="min(regions, pixels // patch ** 2) + 1", explanations="len(sizes)")
    [part] = evaluate_cost(patches, {"regions": 100, "patch": 16, "sizes": [1, 2, 3]}, 224 * 224) or ()
    assert (part.forward_passes, part.explanations) == (101.0, 3.0)  # 196 patches, capped at 100
    [part] = evaluate_cost(patches, {"regions": 100, "patch": 16, "sizes": []}, 64 * 64) or ()
    assert (part.forward_passes, part.explanations) == (17.0, 0.0)
    for params, message in (({"regions": "x", "patch": 16, "sizes": []}, "not a number"), ({}, "has no value")):
        with pytest.raises(ValueError, match=message):
            evaluate_cost(patches, params, 4096)
    assert evaluate_cost(None, {}, 4096) is None


def test_a_stand_in_carries_the_cost_its_plugin_states(registry: Registry) -> None:
    """The runner never imports a plugin: its metrics' costs travel as data in the catalogue."""
    import json

    from xaibench.plugins import catalogue

    for name in ("road_faithfulness", "max_sensitivity", "iou"):
        cls = registry.entry("metric", name).cls
        data = json.loads(json.dumps(catalogue.component_data("metric", cls)))
        stand_in = catalogue.stand_in("metric", data, "some-dist", "some-plugin")
        assert stand_in.cost == cls.cost, name  # type: ignore[attr-defined]
    data = json.loads(json.dumps(catalogue.component_data("metric", _Opaque)))
    assert catalogue.stand_in("metric", data, "some-dist", "some-plugin").cost is None  # type: ignore[attr-defined]
