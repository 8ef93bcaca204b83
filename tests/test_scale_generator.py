"""The scale generator (xaibench.testing.scale): records the store and the frames read, submissions
that validate and rank, values in each family's range, seeded, with ties and n/a shares."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xaibench.errors import XaibenchError
from xaibench.publish.board import build_leaderboard
from xaibench.publish.validation import validate_file
from xaibench.results import records
from xaibench.runner.storage.store import RecordStore
from xaibench.testing.scale import (
    BUILTIN_METRICS,
    NA_REASONS,
    SYNTHETIC_CYCLE,
    ScaleData,
    ScaleSpec,
    explainer_names,
    metric_specs,
)

SMALL = ScaleSpec(tracks=2, explainers=4, metrics=6, samples=12, seed=3, na_max=0.2)
RECORD_FIELDS = {  # RecordMaker.record's keys (xaibench/runner/records.py), "curve" where there is one
    "key", "key_version", "metric", "sample_id", "value", "na_reason", "wall_time_s", "forward_passes",
    "schema", "track", "explainer", "model", "dataset", "seed", "xaibench", "platform", "device", "torch",
    "torch_threads", "batch_size", "metric_info", "target",
}  # fmt: skip


def test_builtin_metric_ids_families_directions_and_ranking_are_the_registrys(builtin_registry) -> None:
    for metric_id, family, direction, ranking in BUILTIN_METRICS:
        cls = builtin_registry.entry("metric", metric_id).cls
        assert (cls.family, cls.direction, bool(cls.ranking)) == (family, direction, ranking), metric_id
    assert len({m[0] for m in BUILTIN_METRICS}) == len(BUILTIN_METRICS) == len(builtin_registry.names("metric"))


def test_metrics_and_explainers_beyond_the_catalogue_are_synthetic() -> None:
    n = len(BUILTIN_METRICS)  # the registered built-ins, then synthetic ids in the family cycle
    specs = metric_specs(n + 2)
    assert [m.id for m in specs[:3]] == ["iou", "mae", "mass_accuracy"]
    assert [(m.id, m.family, m.direction, m.ranking) for m in specs[n:]] == [
        (f"m_{n}", *SYNTHETIC_CYCLE[n % 4], False),
        (f"m_{n + 1}", *SYNTHETIC_CYCLE[(n + 1) % 4], False),
    ]
    names = explainer_names(31)
    assert names[0] == "gradient" and names[29:] == ["x_29", "x_30"] and len(set(names)) == 31


def test_records_go_through_the_store_and_read_back_as_a_frame(tmp_path: Path) -> None:
    data = ScaleData(SMALL)
    assert data.write_records(tmp_path) == SMALL.n_records == 2 * 4 * 6 * 12
    stores = [RecordStore(tmp_path / "results" / f"{t}.jsonl") for t in data.tracks]
    assert [len(s.records) for s in stores] == [4 * 6 * 12] * 2  # unique keys, all verified
    assert sum(s.unverified + s.old_keys + s.torn_lines for s in stores) == 0
    one = next(iter(stores[0].records.values()))
    assert set(one) - {"integrity"} == RECORD_FIELDS
    curved = [r for r in stores[0].records.values() if r["metric"] == "deletion" and r["value"] is not None]
    assert curved and all(len(r["curve"]["probability"]) == 51 for r in curved)
    frame = records(tmp_path)
    assert len(frame) == SMALL.n_records
    assert set(frame["metric"]) == {m.id for m in data.metrics}


def test_values_follow_each_familys_range_and_na_shares_stay_under_the_bound() -> None:
    data = ScaleData(ScaleSpec(tracks=1, explainers=6, metrics=40, samples=200, na_max=0.05))
    for mi, m in enumerate(data.metrics):
        for xi in range(6):
            values, reasons = data.values(0, xi, mi)
            shown = values[~np.isnan(values)]
            na = int(np.isnan(values).sum())
            assert na <= 0.05 * 200 + 10  # a share drawn in [0, 5 %], binomial noise on top
            assert [r is None for r in reasons] == list(~np.isnan(values))
            assert {r for r in reasons if r is not None} <= set(NA_REASONS[m.family])
            if m.family == "robustness":
                assert shown.min() > 0 and np.mean(shown) > np.median(shown)  # positive, right-skewed
            elif m.family == "perceptual":
                assert shown.min() >= 1 and shown.max() <= 5
            elif m.family == "sanity":
                assert shown.min() >= -1 and shown.max() <= 1
            else:
                assert shown.min() >= 0 and shown.max() <= 1


def test_quality_orders_the_means_by_direction_and_some_pairs_tie() -> None:
    data = ScaleData(ScaleSpec(tracks=1, explainers=10, metrics=2, samples=400, seed=1))
    best = max(data.quality, key=data.quality.__getitem__)
    worst = min(data.quality, key=data.quality.__getitem__)
    b, w = data.explainers.index(best), data.explainers.index(worst)
    iou_b, iou_w = (np.nanmean(data.values(0, x, 0)[0]) for x in (b, w))  # iou: higher is better
    mae_b, mae_w = (np.nanmean(data.values(0, x, 1)[0]) for x in (b, w))  # mae: lower is better
    assert iou_b > iou_w + 0.1 and mae_b < mae_w - 0.1
    q = [data.quality[x] for x in data.explainers]
    assert q[0] == q[1] and q[2] != q[3]  # pairs (0, 1) and (10, 11), ... share a quality
    assert len(set(q)) == 9


def test_the_same_spec_gives_the_same_values_and_another_seed_others() -> None:
    a, b = ScaleData(SMALL), ScaleData(SMALL)
    c = ScaleData(ScaleSpec(tracks=2, explainers=4, metrics=6, samples=12, seed=4, na_max=0.2))
    va, vb, vc = (d.values(1, 2, 3)[0] for d in (a, b, c))
    assert np.array_equal(va, vb, equal_nan=True) and not np.array_equal(va, vc, equal_nan=True)


def test_submissions_are_written_by_the_projects_writer_validate_and_rank(tmp_path: Path) -> None:
    spec = ScaleSpec(tracks=2, explainers=3, metrics=3, samples=10)
    paths = ScaleData(spec).write_submissions(tmp_path)
    assert [p.name for p in paths] == ["gradient.json", "integrated-gradients.json", "smoothgrad.json"]
    assert all(validate_file(p) == [] for p in paths)
    sub = json.loads(paths[0].read_text())
    assert sub["schema"] == "xaibench.submission/2" and sorted(sub["tracks"]) == ["synth-00", "synth-01"]
    board = build_leaderboard(tmp_path)
    overall = [r for r in board.rows if r["metric"] == "rank:overall"]
    assert len(overall) == 2 * 3
    assert {r["explainer"] for r in overall} == {"gradient", "integrated-gradients", "smoothgrad"}


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("tracks", 0, "scale spec: tracks must be a whole number of at least 1, got 0"),
        ("samples", 2.5, "scale spec: samples must be a whole number of at least 1, got 2.5"),
        ("na_max", 1.0, "scale spec: na_max must be in [0, 1), got 1.0"),
    ],
)
def test_a_bad_spec_is_one_line(field: str, value: object, line: str) -> None:
    with pytest.raises(XaibenchError) as info:
        ScaleSpec(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == line
