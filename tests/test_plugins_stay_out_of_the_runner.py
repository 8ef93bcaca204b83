"""Issue 25 item 1: the runner never executes third-party code.

Discovery reads each distribution's description, made in a sandboxed probe; the runner holds
stand-ins; a worker imports only the distribution of the component it runs. So a plugin whose
import patches xaibench changes nothing outside its own workers: not another explainer's records,
not the verifier. A plugin that exits, raises, loops or signals at import is one line, and the run
goes on for the others.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._distributions import write_distribution
from xaibench.cli import main
from xaibench.plugins import manager
from xaibench.publish.submission_files import decode_values, encode_values
from xaibench.runner import evaluate
from xaibench.runner.run import RunConfig, run

# An explainer whose module, at import, halves every metric value the scoring code returns (the
# attack that halved gradient's IoU before issue 25) and makes the verifier accept any value.
PATCHER = """
import numpy as np
import xaibench.publish.verify as verify
import xaibench.runner.evaluate as evaluate
from xaibench import hookimpl
from xaibench.kit import Explainer

_score_batch = evaluate.score_batch


def _halved(metric, batch, kind):
    out = _score_batch(metric, batch, kind)
    out.values = [v / 2 for v in out.values]
    return out


evaluate.score_batch = _halved
verify._matches = lambda recorded, rerun, tolerance: True


class Patcher(Explainer):
    name = "patcher"
    version = "1.0"

    def explain(self, model, inputs, targets, *, seed=0, context=None):
        n, _, h, w = inputs.shape
        return np.random.default_rng(seed).random((n, h, w)).astype(np.float32)


@hookimpl
def register_explainers(register):
    register(Patcher)
"""


@pytest.fixture()
def patcher_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> manager.Registry:
    """A registry that sees the patcher's distribution (and the installed ones); the scoring
    function and the verifier are restored afterwards, whatever imported the plugin."""
    import xaibench.publish.verify as verify

    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "xb-patcher", "xb_patcher", PATCHER)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate, "score_batch", evaluate.score_batch)
    monkeypatch.setattr(verify, "_matches", verify._matches)
    monkeypatch.delitem(sys.modules, "xb_patcher", raising=False)
    registry = manager.Registry()
    monkeypatch.setattr(manager, "_REGISTRY", registry)
    return registry


def _config(workdir: Path, explainers: list[str], executor: str = "local") -> RunConfig:
    return RunConfig(
        explainers=explainers,
        tracks=["shapes"],
        metrics=["iou", "deletion"],
        limit=4,
        workdir=workdir,
        progress=False,
        examples=0,
        executor=executor,
        device="cpu",
    )


def _records(workdir: Path, explainer: str) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (workdir / "results" / "shapes.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["explainer"]["name"] == explainer:
            # timings vary; the integrity tag is keyed per workdir by design
            out[record["key"]] = {k: v for k, v in record.items() if k not in ("wall_time_s", "integrity")}
    return out


def test_an_import_time_patch_leaves_another_explainers_records_bit_identical(
    tmp_path: Path, patcher_site: manager.Registry
) -> None:
    assert manager.remote_distribution(patcher_site.entry("explainer", "patcher").cls) == "xb-patcher"
    run(_config(tmp_path / "clean", ["gradient"]), patcher_site)
    run(_config(tmp_path / "both", ["patcher", "gradient"]), patcher_site)
    assert "xb_patcher" not in sys.modules  # described in a probe, run in its worker: never imported here
    clean, both = _records(tmp_path / "clean", "gradient"), _records(tmp_path / "both", "gradient")
    assert len(clean) == 8 and both == clean
    assert len(_records(tmp_path / "both", "patcher")) == 8


def test_the_same_patch_does_reach_the_runner_under_the_trusted_in_process_executor(
    tmp_path: Path, patcher_site: manager.Registry
) -> None:
    """The control: the attack is real. With ``--executor inprocess`` (trusted code only) the
    plugin is imported in the runner, and gradient's values are halved."""
    run(_config(tmp_path / "clean", ["gradient"]), patcher_site)
    summary = run(_config(tmp_path / "trusted", ["patcher", "gradient"], executor="inprocess"), patcher_site).summary
    assert summary["run"]["executor"] == "inprocess"  # the provenance says trusted code ran here
    assert "xb_patcher" in sys.modules
    clean, trusted = _records(tmp_path / "clean", "gradient"), _records(tmp_path / "trusted", "gradient")
    assert not set(clean) & set(trusted)  # an in-process run's records are keyed apart (never reused)
    by = {(r["metric"], r["sample_id"]): r["value"] for r in trusted.values()}
    halved = [(r["value"], by[(r["metric"], r["sample_id"])]) for r in clean.values() if r["value"]]
    assert halved and all(after == pytest.approx(before / 2) for before, after in halved)


def test_submission_verify_reports_the_true_mismatch_when_the_plugin_patches_the_verifier(
    tmp_path: Path, patcher_site: manager.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = ["--workdir", tmp_path / "w", "--submissions", tmp_path / "s", "--leaderboard-dir", tmp_path / "lb"]
    args = ["run", "-e", "patcher", "--track", "shapes", "--limit", "4", "--metric", "iou", "--device", "cpu", "-q"]
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in [*args, *outputs]])
        raise SystemExit(0)
    assert info.value.code in (0, None)
    path = tmp_path / "s" / "patcher.json"
    data = json.loads(path.read_text())
    track = data["tracks"]["shapes"]
    values = decode_values(track["metrics"]["iou"]["values"]).tolist()  # xaibench.submission/2
    values[track["sample_ids"].index(sorted(track["sample_ids"])[0])] += 0.25
    track["metrics"]["iou"]["values"] = encode_values(values)
    path.write_text(json.dumps(data))
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["submission", "verify", str(path)])
        raise SystemExit(0)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert info.value.code == 1, lines
    assert lines[-1] == "FAILED: 1 of 4 records differ by more than 1e-06 (3 match)"
    assert "xb_patcher" not in sys.modules


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import os\nos._exit(0)\n", "import ended its process (status 0) with nothing said; skipped"),
        ("raise RuntimeError('boom')\n", "import raised RuntimeError('boom'); skipped"),
        ("while True:\n    pass\n", "import did not finish in 10 s; skipped"),
        (
            "import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\n",
            "import raised PermissionError(1, 'Operation not permitted'); skipped",
        ),
    ],
    ids=["os-exit", "raises", "loops", "signals-the-runner"],
)
def test_a_plugin_that_breaks_at_import_is_one_line_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], code: str, said: str
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "xb-broken", "xb_broken", code)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XAIBENCH_PLUGIN_TIMEOUT", "10")
    monkeypatch.setattr(manager, "_REGISTRY", None)
    outputs = ["--workdir", tmp_path / "w", "--submissions", tmp_path / "s", "--leaderboard-dir", tmp_path / "lb"]
    args = ["run", "-e", "gradient", "--track", "shapes", "--limit", "2", "--metric", "iou", "--device", "cpu", "-q"]
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in [*args, *outputs]])
        raise SystemExit(0)
    _, err = capfd.readouterr()
    assert info.value.code in (0, None), err
    warnings = [line for line in err.splitlines() if "xb-broken" in line]
    assert warnings == [f"warning: plugin xb-broken (entry point broken): {said}"], err
    assert len(_records(tmp_path / "w", "gradient")) == 2
    assert "xb_broken" not in sys.modules
