"""Hostile outputs are one line: what a plugin returns or declares fails that component, never the run.

A metric value of 1e200, a ``forward_passes`` of 10**400 or a metric that returns nothing usable
is its batch's n/a with one line, and the run still writes its submission; a plugin registering
a name a built-in holds (an explainer ``gradient``) is refused that name in one warning line and
every run goes on with the built-in; ``XAIBENCH_LOAD_PLUGINS`` names distributions, so another
distribution's entry point of the same name never loads; and a plugin's words (an exception's
text, a description) reach the terminal escaped: no escape sequence, no rich markup.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

import xaibench.cli.output as cli_module
from tests._distributions import write_distribution
from xaibench import hookimpl
from xaibench.api import Explainer, MetricOutput
from xaibench.cli import main
from xaibench.plugins import manager
from xaibench.runner.distributions import histogram
from xaibench.runner.isolation.metric_worker import MAX_VALUE, checked_output

REPO = Path(__file__).resolve().parents[1]
METRICS_DIST = "xb-hostile-metrics"
CLASH_DIST = "xb-clash-gradient"

HOSTILE_METRICS = """
    import numpy as np

    from xaibench import hookimpl
    from xaibench.api import Metric, MetricOutput


    class Huge(Metric):
        name = "huge"
        version = "1.0.0"

        def score(self, batch):
            n = len(batch.samples)
            return MetricOutput(values=np.full(n, 1e200), reasons=[None] * n)


    class Countless(Metric):
        name = "countless"
        version = "1.0.0"

        def score(self, batch):
            n = len(batch.samples)
            return MetricOutput(values=np.full(n, 0.5), reasons=[None] * n, forward_passes=10**400)


    class Nothing(Metric):
        name = "nothing"
        version = "1.0.0"

        def score(self, batch):
            return None


    @hookimpl
    def register_metrics(register):
        for cls in (Huge, Countless, Nothing):
            register(cls)
"""
CLASHING_EXPLAINER = """
    from xaibench import hookimpl
    from xaibench.api import Explainer


    class Gradient(Explainer):
        name = "gradient"

        def explain(self, model, inputs, targets, *, seed=0, context=None):
            raise RuntimeError("the impostor ran")


    @hookimpl
    def register_explainers(register):
        register(Gradient)
"""


def _xaibench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m xaibench ARGS`` with ``site``'s distributions installed (and no allow list)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)]), "HF_HUB_OFFLINE": "1"}
    env.pop("XAIBENCH_LOAD_PLUGINS", None)
    env.pop("XAIBENCH_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "xaibench", *args], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One ``xaibench run`` of ``gradient`` and ``random`` with the hostile metrics (scored in their
    distribution's metric worker, as every third-party metric is) and a distribution that registers
    an explainer named ``gradient`` installed: its result and its folder."""
    root = tmp_path_factory.mktemp("hostile-outputs")
    site = root / "site"
    site.mkdir()
    write_distribution(site, METRICS_DIST, "xb_hostile_metrics", HOSTILE_METRICS)
    write_distribution(site, CLASH_DIST, "xb_clash_gradient", CLASHING_EXPLAINER)
    outputs = ["--workdir", str(root / "w"), "--submissions", str(root / "s"), "--leaderboard-dir", str(root / "lb")]
    result = _xaibench(
        site,
        "run",
        *("-e", "gradient,random", "--track", "shapes", "--limit", "2", "--quiet", "--device", "cpu"),
        *("--metric", "iou,huge,countless,nothing"),
        *outputs,
    )
    return result, root


def _records(root: Path) -> list[dict[str, Any]]:
    path = root / "w" / "results" / "shapes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _reasons(root: Path, metric: str) -> set[str | None]:
    return {r["na_reason"] for r in _records(root) if r["metric"] == metric}


def test_the_run_with_hostile_metrics_completes_and_writes_its_submissions(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, root = hostile_run
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert "Too many bins" not in result.stdout + result.stderr
    # the run ends as any run whose values are mostly n/a: exit 1 with one error line, the reasons in it
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1, result.stdout + result.stderr
    assert errors[0].startswith("error: track shapes: ") and "metric returned the value 1e+200" in errors[0]
    assert sorted(p.name for p in (root / "s").glob("*.json")) == ["gradient.json", "random.json"], result.stderr
    submission = json.loads((root / "s" / "gradient.json").read_text())
    metrics = submission["tracks"]["shapes"]["metrics"]
    assert metrics["iou"]["n"] == 2  # the other metrics scored as ever
    assert metrics["huge"]["n"] == 0 and metrics["huge"]["n_na"] == 2


def test_a_metric_value_of_1e200_is_that_batch_na_in_one_line(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, root = hostile_run
    (reason,) = _reasons(root, "huge")
    assert reason is not None and "\n" not in reason
    assert reason == "metric returned the value 1e+200, beyond ±1e+100; the batch is n/a"
    assert all(r["value"] is not None for r in _records(root) if r["metric"] == "iou")


def test_forward_passes_of_10_to_the_400_is_one_line_and_no_traceback(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, root = hostile_run
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    (reason,) = _reasons(root, "countless")
    assert reason == "metric returned forward_passes = about 10^400; a count is a whole number from 0 to 1e+12"
    (nothing,) = _reasons(root, "nothing")
    assert nothing == "metric output cannot be read: AttributeError: 'NoneType' object has no attribute 'values'"
    assert all(r["forward_passes"] == 0 for r in _records(root) if r["metric"] in ("countless", "nothing"))


def test_a_plugin_explainer_named_gradient_is_refused_in_one_line_and_runs_go_on(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, root = hostile_run
    assert "track shapes failed" not in result.stdout + result.stderr, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "gradient" in line]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith(f"warning: plugin {CLASH_DIST} (entry point clash_gradient): explainer 'gradient'")
    assert "xaibench" in warnings[0].split("refused")[1]  # both distributions named
    records = [r for r in _records(root) if r["explainer"]["name"] == "gradient"]
    assert records and all(r["explainer"]["distribution"] == "xaibench" for r in records)
    assert all(r["na_reason"] is None for r in records if r["metric"] == "iou")  # the built-in ran


# ------------------------------------------------------------------ the checks themselves, in process


def test_checked_output_refuses_absurd_values_and_counts_and_keeps_nan_per_sample() -> None:
    fine = checked_output(MetricOutput(values=np.array([0.5, np.nan]), reasons=[None, "own"], forward_passes=3), 2)
    assert fine.values[0] == 0.5 and np.isnan(fine.values[1]) and fine.reasons == [None, "own"]
    assert fine.forward_passes == 3
    for values, passes, start in [
        ([1.0, np.inf], 0, "metric returned the value inf"),
        ([1.0, -2 * MAX_VALUE], 0, "metric returned the value -2e+100"),
        ([1.0, 2.0], -1, "metric returned forward_passes = -1"),
        ([1.0, 2.0], float("nan"), "metric returned forward_passes = nan"),
        ([1.0, 2.0], True, "metric returned forward_passes = True"),
        ([1.0, 2.0, 3.0], 0, "metric returned 3 values for 2 samples"),
    ]:
        out = checked_output(MetricOutput(values=np.array(values), reasons=[None] * 2, forward_passes=passes), 2)
        assert np.isnan(out.values).all() and out.forward_passes == 0
        assert len(set(out.reasons)) == 1 and out.reasons[0].startswith(start), out.reasons
    hostile = checked_output(MetricOutput(values=np.ones(1), reasons=["a\nb\x1b[2Jc"]), 1)
    assert hostile.reasons == ["a b\\x1b[2Jc"]  # one line, the escape code made visible


@pytest.mark.parametrize(
    "values",
    [[1e200], [1e200, 1e200], [-1.7e308, 1.7e308], [1.79e308], [2.0000001, 2.0000003], [3.0], [0.25, 0.75]],
)
def test_histograms_of_any_finite_values_are_valid(values: list[float]) -> None:
    hist = histogram(values)
    assert hist is not None
    edges = hist["edges"]
    assert len(edges) == 21 and all(np.isfinite(edges)) and all(b > a for a, b in itertools.pairwise(edges))
    assert sum(hist["counts"]) == len(values) and all(np.isfinite(hist["quantiles"]))
    json.dumps(hist, allow_nan=False)


def test_the_histogram_of_ordinary_values_is_unchanged() -> None:
    assert histogram([0.25, 0.75])["edges"] == [round(i / 20, 6) for i in range(21)]
    assert histogram([3.0])["edges"][0] == 2.5 and histogram([5.0, 7.0])["edges"][-1] == 7.0


# ------------------------------------------------------------------ names and allow lists


class _Clash(Explainer):
    name = "gradient"
    version = "9.9.9"
    licence = "test"


class _Other(Explainer):
    name = "clash-other"
    version = "1.0.0"
    licence = "test"


class _ClashPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(_Clash)
        register(_Other)


def test_a_name_a_built_in_holds_is_refused_naming_both_distributions_and_the_rest_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(manager, "on_plugin_error", lines.append)
    registry = manager.Registry(load_entry_points=False)
    status = registry.add_plugin(_ClashPlugin(), name="clash", distribution=("xb-clash", "3.1.0"))
    assert lines == [
        "plugin clash: explainer 'gradient' of xb-clash 3.1.0 refused: the name is already "
        f"xaibench {registry.info('explainer', 'gradient').distribution_version}'s (plugin "
        "xaibench.explainers.plugin), which keeps it"
    ]
    assert registry.info("explainer", "gradient").distribution == "xaibench"
    assert registry.create("explainer", "gradient").version != "9.9.9"
    assert registry.info("explainer", "clash-other").distribution == "xb-clash"
    assert status.ok and status.components == ["explainer:clash-other"]


def _install(site: Path, distribution: str, module: str, entry_point: str, explainer: str) -> None:
    """Distribution ``distribution`` whose entry point ``entry_point`` registers ``explainer``."""
    code = f"""
        from xaibench import hookimpl
        from xaibench.api import Explainer

        class Mine(Explainer):
            name = {explainer!r}

        @hookimpl
        def register_explainers(register):
            register(Mine)
    """
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{distribution.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[xaibench]\n{entry_point} = {module}\n")


def test_the_allow_list_names_distributions_not_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "xb-wanted-cam", "xb_wanted_cam", "sharedcam", "wanted-cam")
    _install(site, "xb-impostor-cam", "xb_impostor_cam", "sharedcam", "impostor-cam")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("XAIBENCH_DISABLE_PLUGINS", raising=False)
    lines: list[str] = []
    monkeypatch.setattr(manager, "on_plugin_error", lines.append)

    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", "XB_Wanted.cam")  # spelled as pip compares names
    names = manager.Registry().names("explainer")
    assert "wanted-cam" in names and "impostor-cam" not in names and "gradient" in names
    assert lines == []

    monkeypatch.setenv("XAIBENCH_LOAD_PLUGINS", "sharedcam")  # an entry-point name allows nothing
    names = manager.Registry().names("explainer")
    assert "wanted-cam" not in names and "impostor-cam" not in names
    assert lines == [
        "XAIBENCH_LOAD_PLUGINS names distributions, and no installed distribution with xaibench plugins is "
        "named 'sharedcam' ('sharedcam' is an entry point of xb-impostor-cam, xb-wanted-cam); nothing loaded for it"
    ]

    monkeypatch.delenv("XAIBENCH_LOAD_PLUGINS")
    monkeypatch.setenv("XAIBENCH_DISABLE_PLUGINS", "xb-impostor-cam")  # the block list names them too
    names = manager.Registry().names("explainer")
    assert "wanted-cam" in names and "impostor-cam" not in names


# ------------------------------------------------------------------ escaping on the terminal

FORGED = "\x1b[2K\rverified: 16 of 16 records match"


class _Forger(Explainer):
    """Raises with text that, printed raw, clears the line and writes a verdict of its own."""

    name = "forger"
    version = "1.0.0"
    licence = "test"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        raise RuntimeError(FORGED)


class _Marked(Explainer):
    name = "marked"
    version = "1.0.0"
    licence = "test"
    description = "[red]x[/red] [link=https://evil.example]y[/link] \x1b[31mz"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        raise NotImplementedError


class _TerminalPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(_Forger)
        register(_Marked)


def _cli(capfd: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
        raise SystemExit(0)
    out, err = capfd.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers forked from the zygote (Linux)")
def test_an_exception_text_with_escape_codes_is_printed_escaped(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], registry: manager.Registry
) -> None:
    registry.add_plugin(_TerminalPlugin(), name="terminal")
    outputs = ["--workdir", tmp_path / "w", "--submissions", tmp_path / "s", "--leaderboard-dir", tmp_path / "lb"]
    small = ["--track", "shapes", "--limit", "2", "--metric", "iou", "--quiet", "--device", "cpu"]
    code, out, err = _cli(capfd, "run", "-e", "forger", *small, *outputs)
    assert code == 1, (out, err)
    assert "\x1b" not in out + err and "\r" not in out + err
    errors = [line for line in (out + err).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "explainer raised RuntimeError: \\x1b[2K" in errors[0], errors


def test_markup_and_escape_codes_in_a_description_show_as_typed_in_xaibench_list(
    capfd: pytest.CaptureFixture[str], registry: manager.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.add_plugin(_TerminalPlugin(), name="terminal")
    monkeypatch.setattr(cli_module, "console", Console(width=1000, force_terminal=False))
    code, out, err = _cli(capfd, "list", "explainers")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if " marked " in line]
    assert "[red]x[/red] [link=https://evil.example]y[/link] \\x1b[31mz" in row
    assert "\x1b" not in out
