"""A submission's summary numbers must follow from its own per-sample values (issue 25, item 5).

The fixture files are those of tests/_site_data.py, whose intervals are the runner's seeded
bootstrap of their values; each test breaks one number and checks the one-line finding.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _site_data import submission

from xaibench.errors import XaibenchError
from xaibench.publish.board import build_leaderboard
from xaibench.publish.recompute import MAX_MAGNITUDE
from xaibench.publish.submission_files import compact_track, decode_values, encode_values
from xaibench.publish.validation import require_valid, validate_text
from xaibench.seeds import derive_seed
from xaibench.stats import INTERVAL_RULE, bootstrap_ci, interval_seed, shared_intervals


def _messages(data: dict[str, Any]) -> list[str]:
    return [f"{i.pointer} {i.message}" for i in validate_text(json.dumps(data, indent=2), "s.json")]


@pytest.fixture()
def alpha(tmp_path: Path) -> dict[str, Any]:
    data = submission("alpha", tmp_path, examples=False)
    assert _messages(data) == []
    return data


def _iou(data: dict[str, Any]) -> dict[str, Any]:
    return data["tracks"]["synth-a"]["metrics"]["iou"]


def test_the_fixture_interval_is_the_runner_bootstrap(alpha: dict[str, Any]) -> None:
    iou = _iou(alpha)
    values = [v for v in iou["samples"].values() if v is not None]
    low, high = bootstrap_ci(values, derive_seed(0, "bootstrap", "synth-a/alpha/iou"))
    assert (iou["ci_low"], iou["ci_high"]) == (low, high)
    assert low < iou["mean"] < high  # a real interval, not a point


def test_a_mean_its_values_do_not_have_is_rejected_naming_track_metric_and_explainer(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    _iou(data).update(mean=0.99, ci_high=1.0)  # the interval still contains the claimed mean
    assert _messages(data) == [
        "/tracks/synth-a/metrics/iou/mean track synth-a, metric iou, explainer alpha: "
        "mean 0.99 but its 10 per-sample values average 0.62"
    ]


def test_a_mean_off_by_less_than_the_tolerance_passes_and_by_more_fails(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    _iou(data)["mean"] += 1e-12
    assert _messages(data) == []
    _iou(data)["mean"] += 1e-7
    [message] = _messages(data)
    assert message.startswith("/tracks/synth-a/metrics/iou/mean ") and "average 0.62" in message


def test_an_interval_other_than_the_seeded_bootstrap_is_rejected(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    iou = _iou(data)
    iou["ci_high"] += 1e-6
    [message] = _messages(data)
    assert message.startswith("/tracks/synth-a/metrics/iou/ci_high track synth-a, metric iou, explainer alpha: ")
    assert "but the seeded bootstrap of its 10 per-sample values (seed 0) gives" in message
    data["seed"] = 1  # another run seed: another bootstrap, for every metric of the file
    iou["ci_high"] -= 1e-6
    messages = _messages(data)
    assert any(m.startswith("/tracks/synth-a/metrics/iou/ci_") for m in messages)
    assert len(messages) > 10 and all("(seed 1) gives" in m for m in messages)


def test_without_a_seed_the_interval_must_lie_within_the_values(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    data["seed"] = None
    iou = _iou(data)
    iou["ci_high"] += 1e-6  # not the bootstrap, but plausible: accepted
    assert _messages(data) == []
    iou["ci_high"] = max(v for v in iou["samples"].values() if v is not None) + 0.01
    [message] = _messages(data)
    assert "interval [" in message and "reaches beyond its per-sample values" in message


@pytest.mark.parametrize("value", [1e308, -1e101, 2e100])
def test_a_per_sample_value_beyond_the_bound_is_rejected(alpha: dict[str, Any], value: float) -> None:
    data = copy.deepcopy(alpha)
    _iou(data)["samples"]["s03"] = value
    [message] = _messages(data)
    assert message.startswith("/tracks/synth-a/metrics/iou/samples/s03 track synth-a, metric iou, explainer alpha:")
    assert f"larger in size than {MAX_MAGNITUDE:g}" in message


def test_a_value_at_the_bound_is_not_rejected_for_its_size(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    _iou(data)["samples"]["s03"] = MAX_MAGNITUDE
    assert not any("larger in size" in m for m in _messages(data))
    assert any("/iou/mean " in m for m in _messages(data))  # but the mean no longer follows


def test_nan_per_sample_value_is_reported_once_per_place(alpha: dict[str, Any]) -> None:
    text = json.dumps(alpha, indent=2).replace('"s03": 0.63', '"s03": NaN', 1)
    assert '"s03": NaN' in text
    messages = [i.message for i in validate_text(text, "s.json")]
    assert any("NaN is not valid JSON" in m for m in messages)
    assert any("per-sample value of 's03' is nan, not a finite number" in m for m in messages)


def test_summary_numbers_without_samples_must_be_within_the_bound(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    iou = _iou(data)
    del iou["samples"]
    iou.update(mean=1e150, ci_low=1e149, ci_high=1e151)
    messages = _messages(data)
    assert [m.split(" ")[0] for m in messages] == [
        "/tracks/synth-a/metrics/iou/mean",
        "/tracks/synth-a/metrics/iou/ci_low",
        "/tracks/synth-a/metrics/iou/ci_high",
    ]


def test_na_reasons_must_count_the_nulls(alpha: dict[str, Any]) -> None:
    data = copy.deepcopy(alpha)
    mae = data["tracks"]["synth-a"]["metrics"]["mae"]
    mae["na_reasons"] = {"empty mask": 2}
    assert _messages(data) == [
        "/tracks/synth-a/metrics/mae/na_reasons track synth-a, metric mae, explainer alpha: "
        "na_reasons count 2 n/a but n_na = 0"
    ]


def test_the_leaderboard_build_refuses_a_file_whose_mean_is_not_its_values(tmp_path: Path) -> None:
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("alpha", "beta"):
        data = submission(name, folder, examples=False)
        if name == "beta":
            _iou(data).update(mean=0.99, ci_high=1.0)
        (folder / f"{name}.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(XaibenchError) as info:
        require_valid(sorted(folder.glob("*.json")))
    assert str(info.value).startswith(f"invalid submission: {folder / 'beta.json'}:")
    assert "track synth-a, metric iou, explainer beta: mean 0.99 but its 10 per-sample values average 0.41" in str(
        info.value
    )
    (folder / "beta.json").unlink()
    assert build_leaderboard(folder).rows  # the other file alone builds


# ----------------------------------------------------------------------------- the same checks on /2


def _v2(data: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out["schema"] = "xaibench.submission/2"
    out["tracks"] = {name: compact_track(t) for name, t in out["tracks"].items()}
    return out


def _set(data: dict[str, Any], sample: str, value: float) -> None:
    """Set one per-sample value of synth-a/iou in a /2 file."""
    track = data["tracks"]["synth-a"]
    values = decode_values(track["metrics"]["iou"]["values"]).tolist()
    values[track["sample_ids"].index(sample)] = value
    track["metrics"]["iou"]["values"] = encode_values(values)


def test_v2_summary_numbers_must_follow_from_the_values_too(alpha: dict[str, Any]) -> None:
    data = _v2(alpha)
    assert _messages(data) == []
    _iou(data).update(mean=0.99, ci_high=1.0)
    assert _messages(data) == [
        "/tracks/synth-a/metrics/iou/mean track synth-a, metric iou, explainer alpha: "
        "mean 0.99 but its 10 per-sample values average 0.62"
    ]
    data = _v2(alpha)
    _set(data, "s03", _iou(alpha)["samples"]["s03"] + 1e-6)  # one value moved: the mean no longer follows
    [message] = _messages(data)
    assert message.startswith("/tracks/synth-a/metrics/iou/mean ") and "average 0.6200001" in message


@pytest.mark.parametrize("value", [1e308, float("inf"), -float("inf")])
def test_v2_per_sample_value_beyond_the_bound_points_at_its_index(alpha: dict[str, Any], value: float) -> None:
    data = _v2(alpha)
    _set(data, "s03", value)
    [message] = _messages(data)
    assert message.startswith("/tracks/synth-a/metrics/iou/values/3 track synth-a, metric iou, explainer alpha: ")
    assert "per-sample value of 's03' " in message


def _shared_rule(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` re-stated under the shared-resample rule: ``intervals`` set and every interval
    recomputed from the track's one resample (n/a included, in the samples' order)."""
    out = copy.deepcopy(data)
    out["intervals"] = INTERVAL_RULE
    for track_name, track in out["tracks"].items():
        for m in track["metrics"].values():
            row = np.array([np.nan if v is None else v for v in m["samples"].values()], dtype=np.float64)
            (low,), (high,) = shared_intervals(row[None], interval_seed(out["seed"], track_name))
            m["ci_low"], m["ci_high"] = float(low), float(high)
    return out


def test_a_file_under_the_shared_resample_rule_is_checked_against_that_rule(alpha: dict[str, Any]) -> None:
    shared = _shared_rule(alpha)
    assert _iou(shared)["ci_low"] != _iou(alpha)["ci_low"]  # the two rules draw other resamples
    assert _messages(shared) == []
    earlier = {k: v for k, v in shared.items() if k != "intervals"}  # the field dropped: the earlier rule
    assert any(m.startswith("/tracks/synth-a/metrics/iou/ci_") for m in _messages(earlier))
    _iou(shared)["ci_high"] += 1e-6
    [message] = _messages(shared)
    assert message.startswith("/tracks/synth-a/metrics/iou/ci_high ") and "(seed 0) gives" in message
    assert _messages({**alpha, "intervals": "per-label/0"})[0].startswith("/intervals ")  # an unknown rule


def test_a_v2_file_under_the_shared_rule_checks_every_metric_of_a_track_in_one_resample(
    alpha: dict[str, Any],
) -> None:
    """The /2 path computes a track's intervals together (one product for all its metrics of the
    same length); each is still the block's own interval: a nudge to any one bound is found there."""
    from xaibench.publish.recompute import track_intervals
    from xaibench.publish.sample_values import SampleValues

    shared = _shared_rule(alpha)
    data = _v2(shared)
    assert _messages(data) == []
    track = shared["tracks"]["synth-a"]
    blocks = []
    for m in track["metrics"].values():
        ids = list(m["samples"])
        blocks.append(
            {"samples": SampleValues(ids, np.array([np.nan if v is None else v for v in m["samples"].values()]))}
        )
    blocks.append({"samples": {"s0": 0.5}})  # a /1 map: left to the block's own check
    blocks.append({"samples": SampleValues(["a", "b", "c"], np.array([0.1, np.nan, 0.7]))})  # another length
    got = track_intervals(blocks, shared["seed"], "synth-a")
    assert sorted(got) == [k for k in range(len(blocks)) if k != len(blocks) - 2]
    for k, m in enumerate(track["metrics"].values()):
        assert got[k] == pytest.approx((m["ci_low"], m["ci_high"]), abs=1e-12)
    (lo,), (hi,) = shared_intervals(np.array([[0.1, np.nan, 0.7]]), interval_seed(shared["seed"], "synth-a"))
    assert got[len(blocks) - 1] == pytest.approx((lo, hi), abs=1e-12)
    assert track_intervals(blocks, "0", "synth-a") == {} and track_intervals(blocks, True, "synth-a") == {}
    for metric in data["tracks"]["synth-a"]["metrics"]:
        nudged = copy.deepcopy(data)
        nudged["tracks"]["synth-a"]["metrics"][metric]["ci_low"] -= 1e-6
        [message] = _messages(nudged)
        assert message.startswith(f"/tracks/synth-a/metrics/{metric}/ci_low ") and "(seed 0) gives" in message
