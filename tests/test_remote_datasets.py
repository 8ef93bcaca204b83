"""Issue 25: a third-party dataset loads in a sandboxed worker; the runner gets its samples as data.

The runner holds a stand-in for the dataset (its class data and main parameter), never imports its
module, and builds the track from the samples the worker sends back: the records are those of the
same dataset class registered in the runner. A dataset whose import patches xaibench changes only
its own worker; one whose ``samples`` exits or loops is one line, and the run goes on.
"""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._distributions import records_by_key, without_distribution, write_distribution
from xaibench.errors import XaibenchError
from xaibench.plugins import catalogue, manager
from xaibench.runner import evaluate
from xaibench.runner.isolation import dataset_worker, wire
from xaibench.runner.run import RunConfig, resolve_tracks, run
from xaibench.sandbox import sandbox_enabled, sandbox_status
from xaibench.suites.adhoc import adhoc_track, main_parameter

# Small images with a square mask; ``n`` is the main parameter (the first named one).
BLOBS = """
import numpy as np
from xaibench import hookimpl
from xaibench.api import Dataset, GroundTruth, Sample


class Blobs(Dataset):
    name = "NAME"
    version = "1.0"
    description = "random images, a square mask each"
    synthetic = True

    def __init__(self, n=4, seed=0):
        self.n, self.seed = int(n), int(seed)
        self.label_names = ("a", "b", "c", "d")

    @property
    def revision(self):
        return f"blobs-{self.n}-{self.seed}"

    def __len__(self):
        return self.n

    def samples(self, limit=None):
        BEFORE
        rng = np.random.default_rng(self.seed)
        for i in range(self.n if limit is None else min(limit, self.n)):
            image = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
            mask = np.zeros((64, 64), dtype=bool)
            y, x = (int(v) for v in rng.integers(0, 48, 2))
            mask[y : y + 16, x : x + 16] = True
            truth = GroundTruth(mask=mask, notes=("square",))
            yield Sample(id=f"blob-{i}", image=image, label=i % 4, ground_truth=truth, meta={"i": i, "tag": "x"})


@hookimpl
def register_datasets(register):
    register(Blobs)
"""

# What a hostile dataset's module does at import: halve every metric value the runner scores.
PATCH = """
import xaibench.runner.evaluate as evaluate

_score_batch = evaluate.score_batch


def _halved(metric, batch, kind):
    out = _score_batch(metric, batch, kind)
    out.values = [v / 2 for v in out.values]
    return out


evaluate.score_batch = _halved
"""


def _code(name: str, before: str = "pass", prefix: str = "") -> str:
    return prefix + textwrap.dedent(BLOBS).replace("NAME", name).replace("BEFORE", before)


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate, "score_batch", evaluate.score_batch)  # restored, whatever imported a plugin
    return folder


def _registry(monkeypatch: pytest.MonkeyPatch, *, entry_points: bool = True) -> manager.Registry:
    registry = manager.Registry(load_entry_points=entry_points)
    monkeypatch.setattr(manager, "_REGISTRY", registry)
    return registry


def _config(workdir: Path, tracks: list[Any], **more: Any) -> RunConfig:
    return RunConfig(
        explainers=["gradient"],
        suite_tracks=tracks,
        metrics=["iou", "deletion"],
        limit=3,
        workdir=workdir,
        progress=False,
        examples=0,
        device="cpu",
        **more,
    )


def _blobs_track(dataset: str = "blobs") -> Any:
    return adhoc_track("shapes-cnn:shapes", f"{dataset}:3", name="blobs-track")


def test_a_dataset_of_a_distribution_loads_in_a_worker_with_the_records_of_the_same_class_in_process(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _code("blobs")
    write_distribution(site, "xb-blobs", "xb_blobs", code)
    monkeypatch.delitem(sys.modules, "xb_blobs", raising=False)
    registry = _registry(monkeypatch)
    cls = registry.entry("dataset", "blobs").cls
    assert manager.remote_distribution(cls) == "xb-blobs"
    assert main_parameter(cls) == "n" and cls.synthetic is True
    with pytest.raises(catalogue.StandInError):
        list(cls(n=3).samples())
    assert list(inspect.signature(cls).parameters) == ["n", "seed"]  # suite files are checked against it
    with pytest.raises(XaibenchError, match="dataset 'blobs': got an unexpected keyword argument 'size'"):
        registry.create("dataset", "blobs", size=3)
    run(_config(tmp_path / "remote", [_blobs_track()]), registry)
    assert "xb_blobs" not in sys.modules  # described in a probe, loaded in its worker: never imported here

    local = types.ModuleType("blobs_in_process")
    exec(compile(code, "blobs_in_process.py", "exec"), local.__dict__)
    control = _registry(monkeypatch, entry_points=False)
    control.add_plugin(local, name="blobs-in-process")
    assert manager.remote_distribution(control.entry("dataset", "blobs").cls) is None
    run(_config(tmp_path / "local", [_blobs_track()]), control)

    remote, here = records_by_key(tmp_path / "remote", "blobs-track"), records_by_key(tmp_path / "local", "blobs-track")
    assert len(remote) == 6  # 3 samples x 2 metrics
    assert without_distribution(remote) == without_distribution(here)
    summaries = [json.loads((tmp_path / w / "summary.json").read_text()) for w in ("remote", "local")]
    provenance = [without_distribution(s["tracks"]["blobs-track"]["provenance"]) for s in summaries]
    assert provenance[0] == provenance[1]
    assert provenance[0]["dataset"] == {"name": "blobs", "revision": "blobs-3-0", "params": {"n": "3"}}


def test_a_dataset_whose_import_patches_the_runner_leaves_the_other_tracks_records_unchanged(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_distribution(site, "xb-patchy", "xb_patchy", _code("patchy", prefix=PATCH))
    monkeypatch.delitem(sys.modules, "xb_patchy", raising=False)
    registry = _registry(monkeypatch)
    shapes = resolve_tracks(registry, "default", ["shapes"])
    run(_config(tmp_path / "clean", shapes), registry)
    run(_config(tmp_path / "both", [_blobs_track("patchy"), *shapes]), registry)
    assert "xb_patchy" not in sys.modules
    clean, both = records_by_key(tmp_path / "clean", "shapes"), records_by_key(tmp_path / "both", "shapes")
    assert len(clean) == 6 and both == clean
    assert len(records_by_key(tmp_path / "both", "blobs-track")) == 6


@pytest.mark.parametrize(
    ("before", "said"),
    [
        ("import os; os._exit(0)", "dataset worker exited with status 0"),
        ("raise RuntimeError('no data')", "samples raised RuntimeError: no data"),
        ("while True: pass", "dataset worker timed out after 12 s"),
    ],
    ids=["os-exit", "raises", "loops"],
)
def test_a_dataset_that_breaks_in_its_worker_is_one_line_and_the_run_goes_on(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, before: str, said: str
) -> None:
    write_distribution(site, "xb-broken-data", "xb_broken_data", _code("broken", before=before))
    monkeypatch.setattr(dataset_worker, "START_SECONDS", 0.0)
    registry = _registry(monkeypatch)
    shapes = resolve_tracks(registry, "default", ["shapes"])
    result = run(_config(tmp_path / "w", [_blobs_track("broken"), *shapes], timeout=12), registry)
    error = result.summary["tracks"]["blobs-track"]["error"]
    assert error == f"dataset 'broken' of distribution xb-broken-data: {said}"
    assert "\n" not in error
    assert len(records_by_key(tmp_path / "w", "shapes")) == 6
    assert "xb_broken_data" not in sys.modules


def test_a_dataset_that_cannot_be_built_or_writes_outside_its_scratch_folder_is_one_line(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded without a run: bad parameters are the worker's error; a write outside the scratch
    folder is refused where Landlock exists (the sandbox), and the scratch folder is writable."""
    outside = tmp_path / "outside.txt"
    before = f"open({str(outside)!r}, 'w').write('x') if self.seed == 1 else open(__import__('tempfile').mktemp(), 'w')"
    write_distribution(site, "xb-writer", "xb_writer", _code("writer", before=before))
    registry = _registry(monkeypatch)
    with pytest.raises(XaibenchError) as info:
        dataset_worker.open_dataset(registry, "writer", {"n": "many"}, limit=2)
    assert str(info.value).startswith("dataset 'writer' of distribution xb-writer: could not be built: ")
    assert "invalid literal for int()" in str(info.value) and "\n" not in str(info.value)
    loaded = dataset_worker.open_dataset(registry, "writer", {"n": 5}, limit=2)
    assert isinstance(loaded, dataset_worker.LoadedDataset) and len(loaded) == 5
    assert [s.id for s in loaded.samples()] == ["blob-0", "blob-1"] and loaded.label_names == ("a", "b", "c", "d")
    first = next(loaded.samples())
    assert (
        first.ground_truth is not None and first.ground_truth.mask.sum() == 256 and first.meta == {"i": 0, "tag": "x"}
    )
    if not sandbox_status().startswith("landlock") or not sandbox_enabled():
        pytest.skip("no Landlock here: the worker runs without its sandbox")
    with pytest.raises(XaibenchError) as info:
        dataset_worker.open_dataset(registry, "writer", {"seed": 1}, limit=2)
    assert str(info.value).startswith("dataset 'writer' of distribution xb-writer: samples raised PermissionError")
    assert not outside.exists() and "xb_writer" not in sys.modules


def test_a_sample_frame_whose_fields_are_not_of_their_types_is_garbage() -> None:
    good = {"id": "a", "image": np.zeros((4, 4, 3), np.uint8), "label": 1, "target": None, "meta": {}}
    good["ground_truth"] = {"mask": np.ones((4, 4), bool), "levels": None, "boxes": None, "notes": ["n"]}
    sample = dataset_worker.check_sample(good)
    assert sample.id == "a" and sample.ground_truth is not None and sample.ground_truth.notes == ("n",)
    for key, value in [
        ("id", 3),
        ("image", np.zeros((2, 2, 2, 2, 2), np.uint8)),
        ("image", "pixels"),
        ("label", 1.5),
        ("meta", []),
        ("ground_truth", {"mask": "all", "levels": None, "boxes": None, "notes": []}),
    ]:
        with pytest.raises(wire.WireError):
            dataset_worker.check_sample({**good, key: value})
