"""What explaining costs, kept with the explanations (issue 41): wall seconds and peak memory per
call, split over a batch's samples, stored beside each cached map and summed per track, so that a
resumed or cached run reports the true cost, not the cost of reading the cache."""

from __future__ import annotations

import json
import math
import mmap
import time
from pathlib import Path

import numpy as np
import pytest

from xaibench.runner.cost import checked, measure, per_sample, summarise_costs
from xaibench.runner.isolation.scheduling import parse_answer
from xaibench.runner.storage.cache import ExplanationCache


def test_a_reported_cost_is_kept_only_when_it_is_plausible() -> None:
    good = {"seconds": 1.5, "peak_rss_mb": 20.0}
    assert checked(good) == good
    assert checked({"seconds": 2, "peak_device_mb": 0}) == {"seconds": 2.0, "peak_device_mb": 0.0}
    for bad in (
        None,
        [1.0],
        {"peak_rss_mb": 3.0},  # no seconds
        {"seconds": math.nan},
        {"seconds": -1.0},
        {"seconds": True},
        {"seconds": 1e12},  # more than a year
        {"seconds": 1.0, "peak_rss_mb": 1e200},
        {"seconds": 1.0, "note": "hi"},  # a field that is not a cost
    ):
        assert checked(bad) is None, bad
    # a worker's reply: the cost is data from a plugin's process, checked like the rest
    answer = parse_answer(("done", [np.zeros((2, 2), np.float32)], None, False, {"seconds": math.inf}), "task")
    assert answer.outputs is not None and answer.cost is None  # type: ignore[union-attr]
    answer = parse_answer(("done", [np.zeros((2, 2), np.float32)], None, False, good), "task")
    assert answer.cost == good  # type: ignore[union-attr]


def test_a_batch_cost_is_split_over_its_samples_and_summed_per_track() -> None:
    assert per_sample({"seconds": 3.0, "peak_rss_mb": 90.0}, 3) == {"seconds": 1.0, "peak_rss_mb": 90.0}
    assert per_sample(None, 3) is None and per_sample({"seconds": 1.0}, 0) is None
    costs = [{"seconds": 1.0, "peak_rss_mb": 90.0}, {"seconds": 0.5, "peak_rss_mb": 120.0}, None, {"seconds": 1.5}]
    assert summarise_costs(costs, 5) == {
        "seconds": 3.0,
        "per_sample_seconds": 1.0,  # 3.0 s over the 3 measured samples
        "peak_rss_mb": 120.0,
        "peak_device_mb": None,
        "measured": 3,
        "n_samples": 5,
    }


def test_measure_reports_the_calls_seconds_and_the_memory_it_held() -> None:
    def work() -> int:
        # Fresh anonymous pages, touched: a NumPy block could reuse pages a long test process
        # already holds (freed heap the allocator kept), which raise no resident memory at all.
        with mmap.mmap(-1, 64 * 2**20) as block:
            pages = np.frombuffer(block, np.uint8)
            pages[::4096] = 1
            time.sleep(0.05)
            total = int(pages[: 4096 * 10 : 4096].sum())
            del pages
        return total

    result, cost = measure(work)
    assert result == 10 and cost["seconds"] >= 0.05
    if "peak_rss_mb" in cost:  # where /proc/self/status is readable
        assert cost["peak_rss_mb"] >= 40.0  # MiB, of the 64 MiB the call held (the baseline's pages vary)


def test_the_cache_keeps_a_maps_cost_beside_it_and_drops_a_forged_one(tmp_path: Path) -> None:
    cache = ExplanationCache(tmp_path / "cache")
    cache.put("k", np.zeros((4, 4), np.float32), {"seconds": 0.25, "peak_rss_mb": 12.0})
    assert cache.cost("k") == {"seconds": 0.25, "peak_rss_mb": 12.0}
    cache.put("plain", np.zeros((4, 4), np.float32))
    assert cache.cost("plain") is None and cache.get("plain") is not None  # no cost: unknown, the map is valid
    forged = next((tmp_path / "cache").rglob("*.cost.json"))
    forged.write_text(json.dumps({"seconds": 0.001}))  # its tag no longer matches
    assert cache.cost("k") is None and cache.get("k") is not None


@pytest.mark.slow
def test_a_cached_run_reports_the_cost_the_maps_had_when_they_were_computed(tmp_path: Path) -> None:
    import xaibench

    def run(*metrics: str) -> dict:
        results = xaibench.run(["gradient"], tracks=["shapes"], metrics=list(metrics), limit=8, output_path=tmp_path)
        return results.summary["tracks"]["shapes"]["explainers"]["gradient"]

    block = run("iou")
    assert block["explained"]["computed"] == 8
    assert block["cost"]["measured"] == block["cost"]["n_samples"] == 8 and block["cost"]["seconds"] > 0
    resumed = run("iou")  # every record is there: nothing is explained again
    assert resumed["explained"] == {"computed": 0, "cached": 0, "failed": 0} and resumed["cost"] == block["cost"]
    cached = run("iou", "mae")  # a new metric: the maps are read from the cache
    assert cached["explained"]["cached"] == 8 and cached["cost"] == block["cost"]  # the true cost, not the cache's
    submitted = json.loads((tmp_path / "submissions" / "gradient.json").read_text())
    assert submitted["tracks"]["shapes"]["cost"] == block["cost"]
