"""Issue 25 item 1 (metrics): a metric of a third-party distribution is scored in a worker process
of its own, never in the runner's (xaibench/runner/isolation/metric_worker.py).

The runner's registry holds a hand-made stand-in for each metric of a distribution written to a
temporary site folder (class data only, ``remote_distribution`` naming the distribution), as the
runner's catalogue will; the worker imports the distribution for real. Each test drives a small
run (``shapes``, ``gradient``, CPU) and reads the records.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._distributions import write_distribution
from xaibench import hookimpl
from xaibench.api import Metric, TrackSpec
from xaibench.metrics.faithfulness.curves import Deletion
from xaibench.metrics.other.sensitivity import MaxSensitivity
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run
from xaibench.runner.score import score_folder
from xaibench.runner.track import load_track
from xaibench.sandbox import sandbox_enabled, sandbox_status

DIST = "xb-remote-metrics"
MODULE = "xb_remote_metrics"
BROKEN = "xb-broken-metrics"
CODE = """
    import os
    import time

    import numpy as np
    import torch

    import xaibench.runner.evaluate
    from xaibench import hookimpl
    from xaibench.api import Metric, MetricOutput
    from xaibench.metrics.faithfulness.curves import Deletion
    from xaibench.metrics.other.sensitivity import MaxSensitivity


    class RemoteDeletion(Deletion):
        name = "remote-deletion"


    class RemoteSensitivity(MaxSensitivity):  # re-runs the explainer: through the runner
        name = "remote-sensitivity"


    class Vandal(Metric):
        name = "vandal"
        needs = ("model",)

        def score(self, batch):
            with torch.no_grad():
                for p in batch.model.module.parameters():
                    p.mul_(0.5).add_(1.0)  # the weights, changed in place
            batch.model.module.register_forward_hook(lambda module, args, out: out * 0 + 1)
            xaibench.runner.evaluate.score_batch = lambda *a, **k: None  # a runner function, patched
            torch.set_num_threads(2)
            return MetricOutput(values=np.ones(len(batch.samples)), reasons=[None] * len(batch.samples))


    class Escaper(Metric):
        name = "escaper"

        def score(self, batch):  # 1.0 when it could write beside its own module, outside its scratch
            try:
                with open(os.path.join(os.path.dirname(__file__), "escaped.txt"), "w") as fh:
                    fh.write("out")
                value = 1.0
            except OSError:
                value = 0.0
            return MetricOutput(values=np.full(len(batch.samples), value), reasons=[None] * len(batch.samples))


    class Spawner(Metric):
        name = "spawner"

        def score(self, batch):  # leaves a daemon behind, its pid as the value
            import subprocess

            pid = subprocess.Popen(["sleep", "600"], start_new_session=True).pid
            n = len(batch.samples)
            return MetricOutput(values=np.full(n, float(pid)), reasons=[None] * n)


    class Exits(Metric):
        name = "exits"

        def score(self, batch):
            print("\\x1b[2Jscreen wiped", flush=True)
            os._exit(0)


    class Forger(Metric):
        name = "forger"

        def score(self, batch):  # writes a frame header of 1 TiB on the runner's pipe
            import fcntl
            import stat
            import struct

            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    mode, flags = os.fstat(fd).st_mode, fcntl.fcntl(fd, fcntl.F_GETFL)
                    if fd > 2 and stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
                        os.write(fd, struct.pack("<Q", 1 << 40))
                except OSError:
                    pass
            time.sleep(60)


    class Loops(Metric):
        name = "loops"

        def score(self, batch):
            while True:
                time.sleep(0.05)


    @hookimpl
    def register_metrics(register):
        for cls in (RemoteDeletion, RemoteSensitivity, Vandal, Escaper, Spawner, Exits, Forger, Loops):
            register(cls)
"""
BROKEN_CODE = """
    raise RuntimeError("this metric plugin cannot be imported")
"""
DECLARED = ("version", "family", "direction", "ranking", "default", "unit", "explanation_kinds", "needs")


def _stand_in(name: str, distribution: str, like: type[Metric] = Metric, **attrs: Any) -> type[Metric]:
    """A stand-in metric class: the class data its plugin declares, none of its code."""
    data = {key: getattr(like, key) for key in DECLARED}
    data.update(default_params=dict(like.default_params), param_specs=dict(like.param_specs))
    data.update(attrs, name=name, remote_distribution=distribution)
    return type(f"StandIn_{name.replace('-', '_')}", (Metric,), data)


class _StandIns:
    """The plugin object that registers the stand-ins in the runner's registry."""

    def __init__(self, classes: list[type[Metric]]) -> None:
        self.classes = classes

    @hookimpl
    def register_metrics(self, register: Any) -> None:
        for cls in self.classes:
            register(cls)


@pytest.fixture()
def remote(tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """The runner's registry (built before the site folder exists) with the stand-ins added."""
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, DIST, MODULE, CODE)
    write_distribution(site, BROKEN, "xb_broken_metrics", BROKEN_CODE)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("XAIBENCH_DISABLE_PLUGINS", raising=False)
    # the workers load only these two distributions (the built-ins always): a faster start
    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", f"{DIST},{BROKEN}")
    classes = [
        _stand_in("remote-deletion", DIST, Deletion),
        _stand_in("remote-sensitivity", DIST, MaxSensitivity),
        _stand_in("vandal", DIST, needs=("model",)),
        _stand_in("escaper", DIST),
        _stand_in("spawner", DIST),
        _stand_in("exits", DIST),
        _stand_in("forger", DIST),
        _stand_in("loops", DIST),
    ]
    registry.add_plugin(_StandIns(classes), name="remote-stand-ins", distribution=(DIST, "1.0"))
    registry.add_plugin(_StandIns([_stand_in("broken", BROKEN)]), name="broken-stand-ins", distribution=(BROKEN, "1.0"))
    assert registry.plugins["remote-stand-ins"].ok and registry.plugins["broken-stand-ins"].ok
    return registry


def _run(registry: manager.Registry, workdir: Path, metrics: list[str], **options: Any) -> list[dict[str, Any]]:
    config = RunConfig(
        explainers=["gradient"],
        tracks=["shapes"],
        metrics=metrics,
        limit=options.pop("limit", 2),
        workdir=workdir,
        device="cpu",
        progress=False,
        examples=0,
        **options,
    )
    run(config, registry)
    path = workdir / "results" / "shapes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _by_metric(records: list[dict[str, Any]], metric: str) -> dict[str, dict[str, Any]]:
    return {r["sample_id"]: r for r in records if r["metric"] == metric}


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what legitimately varies between runs: timings and the integrity tag (keyed per workdir)."""
    return {k: v for k, v in record.items() if k not in ("wall_time_s", "integrity")}


def test_a_remote_metric_gives_the_in_process_values_bit_for_bit(tmp_path: Path, remote: manager.Registry) -> None:
    records = _run(remote, tmp_path / "w", ["deletion", "remote-deletion", "max_sensitivity", "remote-sensitivity"])
    pairs = [("deletion", "remote-deletion"), ("max_sensitivity", "remote-sensitivity")]
    assert len(records) == 4 * 2
    for _sid, record, other in (
        (s, r, _by_metric(records, b)[s]) for a, b in pairs for s, r in _by_metric(records, a).items()
    ):
        assert other["value"] == record["value"] is not None, other["na_reason"]  # bit-identical floats
        assert other["na_reason"] is None
        assert other["curve"] == record["curve"]
        assert other["forward_passes"] == record["forward_passes"] > 0
        assert other["wall_time_s"] > 0
        assert set(other) == set(record)  # the same record shape
    assert MODULE not in sys.modules  # the runner never imported the metric's plugin


def test_a_model_mutating_metric_changes_nothing_the_other_metrics_see(
    tmp_path: Path, remote: manager.Registry
) -> None:
    options = {"limit": 4, "metric_batch": 2}  # two batches: what batch 1 did would show in batch 2
    clean = _run(remote, tmp_path / "clean", ["deletion", "iou"], **options)
    hostile = _run(remote, tmp_path / "hostile", ["vandal", "escaper", "spawner", "deletion", "iou"], **options)
    assert [r["value"] for r in _by_metric(hostile, "vandal").values()] == [1.0] * 4  # it did run
    if sandbox_enabled() and sandbox_status().startswith("landlock"):  # the worker writes only its scratch
        assert [r["value"] for r in _by_metric(hostile, "escaper").values()] == [0.0] * 4
        assert not (tmp_path / "site" / "escaped.txt").exists()
    pids = {int(r["value"]) for r in _by_metric(hostile, "spawner").values()}
    assert len(pids) == 2 and not any(Path(f"/proc/{pid}").exists() for pid in pids)  # killed after each batch
    for metric in ("deletion", "iou"):
        before, after = _by_metric(clean, metric), _by_metric(hostile, metric)
        assert len(before) == 4
        assert {k: _comparable(v) for k, v in after.items()} == {k: _comparable(v) for k, v in before.items()}
    assert MODULE not in sys.modules


def test_a_worker_that_exits_or_cannot_import_gives_na_in_one_line_and_the_run_goes_on(
    tmp_path: Path, remote: manager.Registry, capfd: pytest.CaptureFixture[str]
) -> None:
    records = _run(remote, tmp_path / "w", ["iou", "exits", "forger", "broken", "remote-deletion"])
    reasons = {m: {r["na_reason"] for r in _by_metric(records, m).values()} for m in ("exits", "forger", "broken")}
    assert reasons["exits"] == {"metric worker exited with status 0"}
    (forged,) = reasons["forger"]
    assert forged.startswith(f"metric worker replied garbage: a reply of {1 << 40} bytes exceeds the limit")
    (broken,) = reasons["broken"]
    assert broken.startswith(f"metric plugin {BROKEN} failed to load: RuntimeError: this metric plugin cannot")
    assert "\n" not in broken
    for metric in ("iou", "remote-deletion"):  # the others, and the restarted worker, still score
        assert all(r["value"] is not None for r in _by_metric(records, metric).values())
    assert {MODULE, "xb_broken_metrics"}.isdisjoint(sys.modules)
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "[metric worker] \\x1b[2Jscreen wiped" in err.splitlines()  # escaped, marked as the worker's
    assert "\x1b" not in err


def test_a_worker_that_overruns_the_timeout_is_killed_and_gives_na(tmp_path: Path, remote: manager.Registry) -> None:
    records = _run(remote, tmp_path / "w", ["iou", "loops"], timeout=3)
    assert {r["na_reason"] for r in _by_metric(records, "loops").values()} == {"metric worker timed out after 3 s"}
    assert all(r["value"] is not None for r in _by_metric(records, "iou").values())


def test_xaibench_score_scores_a_remote_metric_in_its_worker_too(tmp_path: Path, remote: manager.Registry) -> None:
    track = load_track(TrackSpec(name="shapes", dataset="shapes", model="shapes-cnn"), remote, limit=3)
    maps = tmp_path / "maps"
    maps.mkdir()
    rng = np.random.default_rng(0)
    for sample in track.samples:
        np.save(maps / f"{sample.id}.npy", rng.random(track.input_size).astype(np.float32))
    scored = score_folder(remote, "shapes", maps, "shapes-cnn", ["deletion", "remote-deletion"])["metrics"]
    here, there = scored["deletion"]["per_sample"], scored["remote-deletion"]["per_sample"]
    assert there == here and sum(v is not None for v in here.values()) == 3
    assert MODULE not in sys.modules
