"""Run health on every output (issue 24, item 5): a random-weight 37-class ResNet-18 on 8
labelled images is at chance, and the summary, leaderboard.json, leaderboard.md and the site say
so on that track only; the site's "explained class" is what the records say per sample."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_adhoc_tracks import make_folder, records

from xaibench.python_api import run

SUITE = """
name = "health"

[[tracks]]
name = "chance37"
model = "timm"
model_params = { arch = "resnet18", pretrained = false, num_classes = 37 }
dataset = "folder"
dataset_params = { root = "{suite_dir}/pets" }
target = "label"

[[tracks]]
name = "by-label"
model = "timm"
model_params = { arch = "resnet18", pretrained = false, num_classes = 37 }
dataset = "folder"
dataset_params = { root = "{suite_dir}/named" }
target = "label"

[[tracks]]
name = "by-prediction"
model = "timm"
model_params = { arch = "resnet18", pretrained = false, num_classes = 37 }
dataset = "folder"
dataset_params = { root = "{suite_dir}/plain" }
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of three tracks: integer labels < 37 explained as model classes (``target =
    "label"``: a labelled track for the chance check), class names explained by the label rule
    (their sorted indices), and no labels (``predicted``)."""
    root = tmp_path_factory.mktemp("health")
    pets = make_folder(root / "pets", n=8)
    (pets / "labels.csv").write_text("id,label\n" + "".join(f"s{i},{4 * i + 1}\n" for i in range(8)))
    named = make_folder(root / "named", n=3)
    (named / "labels.csv").write_text("id,label\ns0,cat\ns1,dog\ns2,cat\n")
    make_folder(root / "plain", n=3)
    (root / "health.toml").write_text(SUITE)
    result = run(
        "random,center",
        suite=root / "health.toml",
        metrics="iou",
        workdir=root / "work",
        submissions=root / "subs",
        leaderboard_dir=root / "board",
        executor="inprocess",
        progress=False,
        device="cpu",
    )
    return {"root": root, "summary": result.summary}


def test_the_summary_warns_of_the_model_at_chance_once(outputs: dict[str, Any]) -> None:
    summary = outputs["summary"]
    check = summary["tracks"]["chance37"]["provenance"]["model_check"]
    assert check["labelled"] is True and check["classes"] == 37 and check["n"] == 8
    assert check["at_chance"] is True and check["ci"][0] <= 1 / 37 <= check["ci"][1]
    on_disk = json.loads((outputs["root"] / "work" / "summary.json").read_text())
    assert on_disk["health"] == summary["health"]
    warnings = summary["health"]["warnings"]
    assert [w.split(":")[0] for w in warnings if "chance37" in w] == ["track chance37"]
    assert summary["health"]["errors"] == []  # every iou has a mask: nothing n/a


def test_leaderboard_files_carry_the_warning_on_its_track(outputs: dict[str, Any]) -> None:
    board = outputs["root"] / "board"
    data = json.loads((board / "leaderboard.json").read_text())
    expected = outputs["summary"]["health"]["warnings"]
    assert sorted(line for lines in data["warnings"].values() for line in lines) == sorted(expected)
    assert data["warnings"]["chance37"] == [w for w in expected if w.startswith("track chance37:")]
    assert data["tracks"]["chance37"]["model_check"]["at_chance"] is True
    md = (board / "leaderboard.md").read_text()
    section = md.split("## chance37:")[1].split("\n## ")[0]
    warning_lines = [line for line in section.splitlines() if line.startswith("**Warning:**")]
    assert len(warning_lines) == 1 and "looks at chance" in warning_lines[0]
    assert md.count("**Warning:**") == len(expected)


def _section(html: str, marker: str) -> str:
    start = html.index(marker)
    end = html.find('<section class="track"', start + 1)
    return html[start : end if end != -1 else len(html)]


def test_the_site_shows_the_warning_on_the_track_and_the_overview(outputs: dict[str, Any]) -> None:
    site = outputs["root"] / "board" / "site"
    index = (site / "index.html").read_text()
    chance = _section(index, 'id="track-chance37"')
    assert chance.count('class="warning"') == 1 and "looks at chance" in chance
    start = index.index('id="overview"')
    overview = index[start : index.index("</section>", start)]  # the filters now stand above it
    assert "track chance37: model timm looks at chance" in overview
    page = (site / "explainers" / "random.html").read_text()
    heading = page.index("<h2>chance37:")
    assert "looks at chance" in page[heading : page.index("</section>", heading)]


def test_the_site_says_the_explained_class_the_records_say(outputs: dict[str, Any]) -> None:
    """Per track: the sources the site names with their sample counts are those of the records."""
    root = outputs["root"]
    index = (root / "board" / "site" / "index.html").read_text()
    page = (root / "board" / "site" / "explainers" / "center.html").read_text()
    seen = {}
    for track in ("chance37", "by-label", "by-prediction"):
        rows = [r for r in records(root / "work", track) if r["explainer"]["name"] == "center"]
        from_records = Counter(r["target"]["source"] for r in rows)
        shown = re.findall(r'class="target-source" data-source="([^"]+)"', _section(index, f'id="track-{track}"'))
        assert Counter(shown) == Counter(set(from_records)), (track, shown, from_records)
        heading = page.index(f"<h2>{track}:")
        on_page = re.findall(r'data-source="([^"]+)"', page[heading : page.index("</section>", heading)])
        assert set(on_page) == set(from_records)
        seen[track] = set(from_records)
    # the tracks explain different things (labels, predictions), so the comparison above can fail
    assert seen == {"chance37": {"label"}, "by-label": {"label"}, "by-prediction": {"predicted"}}
    assert "the label" in _section(index, 'id="track-by-label"')


def test_a_track_with_every_value_na_exits_1_naming_the_reason(tmp_path: Path) -> None:
    """The real path, no stub: ``iou`` on a folder without masks is n/a for every sample, so the
    run writes its results, then says why in one line and exits 1 (issue 24 item 5)."""
    import shutil

    from click.testing import CliRunner

    from xaibench.cli import cli

    data = make_folder(tmp_path / "nomasks", n=4)
    shutil.rmtree(data / "masks")
    args = ["run", "-q", "-e", "gradient,random", "--model", "shapes-cnn", "--dataset", f"folder:{data}"]
    args += ["--metric", "iou", "--device", "cpu", "--output-path", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith("error: track shapes-cnn-on-nomasks: 8 of 8 values (100 %)"), errors[0]
    assert errors[0].endswith("most common reasons: no ground truth (8)"), errors[0]
    assert (tmp_path / "out" / "submissions" / "gradient.json").is_file()
