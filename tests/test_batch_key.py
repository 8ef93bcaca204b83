"""The batch size (images per forward pass) is part of the record key; records keyed before are kept, not reused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xaibench.plugins import manager
from xaibench.runner.records import KEY_VERSION
from xaibench.runner.run import RunConfig, run
from xaibench.runner.storage.store import RecordStore

METRICS = ["iou", "deletion"]
LIMIT = 4


def _config(workdir: Path, batch: int, progress: bool = False) -> RunConfig:
    return RunConfig(
        explainers=["gradient"],
        tracks=["shapes"],
        metrics=METRICS,
        limit=LIMIT,
        workdir=workdir,
        forward_batch=batch,
        progress=progress,
        examples=0,
    )


def _records(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines()]


def test_two_batch_sizes_keep_two_sets_and_the_same_one_reuses_all(tmp_path: Path, registry: manager.Registry) -> None:
    work = tmp_path / "w"
    run(_config(work, 16), registry)
    second = run(_config(work, 3), registry).summary
    records = _records(work)
    n = len(METRICS) * LIMIT
    assert sorted(r["batch_size"] for r in records) == [3] * n + [16] * n
    assert {r["key_version"] for r in records} == {KEY_VERSION}
    assert len({r["key"] for r in records}) == 2 * n
    # the explanations do not depend on --batch-size: served from the cache, only scoring reran
    assert second["tracks"]["shapes"]["explainers"]["gradient"]["explained"]["cached"] == LIMIT
    assert second["run"]["batch_size"] == 3
    third = run(_config(work, 3), registry).summary
    assert len(_records(work)) == 2 * n
    assert third["tracks"]["shapes"]["explainers"]["gradient"]["explained"] == {"computed": 0, "cached": 0, "failed": 0}


def test_old_key_records_are_named_in_one_line_kept_and_not_reused(
    tmp_path: Path, registry: manager.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "w"
    run(_config(work, 16), registry)
    path = work / "results" / "shapes.jsonl"
    old = []
    for record in _records(work):  # as an xaibench before KEY_VERSION 2 wrote them
        del record["key_version"], record["batch_size"]
        record["key"] = "0" + record["key"][1:]
        old.append(json.dumps(record))
    old_text = "\n".join(old) + "\n"
    path.write_text(old_text)
    assert RecordStore(path).old_keys == len(old)
    capsys.readouterr()
    summary = run(_config(work, 16, progress=True), registry).summary
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "from before the batch size" in line]
    assert len(lines) == 1 and str(path) in err.replace("\n", "") and f"{len(old)} records" in lines[0]
    assert summary["tracks"]["shapes"]["old_key_records"] == len(old)
    assert path.read_text().startswith(old_text)  # kept, byte for byte
    new = _records(work)[len(old) :]
    assert len(new) == len(old) and all(r["key_version"] == KEY_VERSION for r in new)
    assert "old_key_records" not in run(_config(tmp_path / "fresh", 16), registry).summary["tracks"]["shapes"]
