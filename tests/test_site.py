"""The static site without a browser: escaping, links, determinism, folder safety, ties, correlations,
and the verdicts (proxy labels, "not ranked", statuses and flags, the cross-track overview, the
model randomisation cascade, verified submissions, the ranking rule)."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from _site_data import (
    BLOCKS,
    EVIL_NAME,
    EVIL_NOTES,
    EVIL_PARAM,
    EVIL_SAMPLE,
    MEANS,
    PROXY_LABEL,
    RANDOMISATION,
    write_submissions,
)
from click.testing import CliRunner
from scipy.stats import spearmanr

from xaibench.cli import cli
from xaibench.metaeval.correlations import oriented, pair_rho, spearman
from xaibench.plugins.manager import XaibenchError
from xaibench.publish.board import build_leaderboard, content_digest
from xaibench.python_api import publish_leaderboard, run
from xaibench.site import build_site


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    write_submissions(root / "subs")
    build_site(root / "subs", root / "site")
    return root / "site"


def _pages(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): p.read_text(encoding="utf-8") for p in sorted(site.rglob("*.html"))}


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]
        if tag == "script":
            self.scripts.append(a)


def test_every_submitted_string_is_escaped_and_data_survives_the_json_block(built: Path) -> None:
    pages = _pages(built)
    assert set(pages) >= {"index.html", "methodology.html", "correlations.html", "explainers/evil.html"}
    for rel, html in pages.items():
        for raw in ("<script>window.__pwned", "<img src=x", "<svg onload", "<b onmouseover", "'><svg"):
            assert raw not in html, f"{rel} contains unescaped {raw!r}"
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in pages["index.html"]
    evil = pages["explainers/evil.html"]
    assert "xaibench &lt;script&gt;window.__pwned=1&lt;/script&gt;" in evil  # its verification record
    for literal in (EVIL_PARAM, EVIL_NOTES, EVIL_SAMPLE):
        assert literal.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").split('"')[0] in evil
    block = re.search(r'<script type="application/json" id="xb-data">(.*?)</script>', pages["index.html"], re.S)
    assert block is not None and "<" not in block.group(1)
    assert json.loads(block.group(1))["explainers"]["evil"]["name"] == EVIL_NAME


def test_only_the_sites_own_script_runs_and_every_link_is_relative_and_resolves(built: Path) -> None:
    for rel, html in _pages(built).items():
        parser = _Refs()
        parser.feed(html)
        srcs = [s.get("src") for s in parser.scripts]
        assert sorted(srcs, key=str) == sorted(
            [("../" if rel.startswith("explainers/") else "") + "assets/site.js"]
            + ([None] if rel == "index.html" else []),
            key=str,
        ), rel
        assert all(s.get("type") == "application/json" for s in parser.scripts if not s.get("src"))
        assert "Content-Security-Policy" in html and "default-src 'none'" in html
        for ref in parser.refs:
            if ref.startswith("#") or ref == "data:,":
                continue
            parts = urlsplit(ref)
            assert not parts.scheme and not parts.netloc, f"{rel}: absolute link {ref}"
            target = (built / rel).parent / parts.path
            assert target.resolve().is_relative_to(built.resolve()) and target.exists(), f"{rel}: broken link {ref}"


def test_same_submissions_build_byte_identical_sites(built: Path, tmp_path: Path) -> None:
    write_submissions(tmp_path / "subs")
    build_site(tmp_path / "subs", tmp_path / "again")

    def digests(root: Path) -> dict[str, str]:
        return {
            p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*")
            if p.is_file()
        }

    assert digests(built) == digests(tmp_path / "again")


def test_pages_carry_no_indentation_but_inside_pre(built: Path) -> None:
    from xaibench.site.writer import compact_html

    pages = _pages(built)
    outside = {rel: re.sub(r"<pre\b.*?</pre>", "", html, flags=re.S) for rel, html in pages.items()}
    assert not [rel for rel, html in outside.items() if re.search(r"\n[ \t]", html)]
    params = [m for html in pages.values() for m in re.findall(r"<pre class=\"params\">.*?</pre>", html, flags=re.S)]
    assert params and all("\n  " in m for m in params if "\n" in m)  # pretty-printed parameters keep theirs
    assert compact_html("<ul>\n  <li>a</li>\n\t<li>b</li>\n</ul><pre>\n  x\n</pre>\n  ") == (
        "<ul>\n<li>a</li>\n<li>b</li>\n</ul><pre>\n  x\n</pre>\n"
    )


def test_site_folder_is_replaced_only_when_it_is_a_site(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    other = tmp_path / "precious"
    other.mkdir()
    (other / "thesis.tex").write_text("keep me")
    with pytest.raises(XaibenchError, match="not an xaibench site"):
        build_site(subs, other)
    assert (other / "thesis.tex").read_text() == "keep me"
    site = tmp_path / "site"
    build_site(subs, site)
    (site / "stale.html").write_text("old")
    (subs / "gamma.json").unlink()
    build_site(subs, site)
    assert not (site / "stale.html").exists() and not (site / "explainers" / "gamma.html").exists()
    assert (site / "explainers" / "beta.html").exists()


def test_invalid_or_tampered_submissions_stop_the_build_with_the_line(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    data = json.loads((subs / "beta.json").read_text())
    overlay = subs / data["tracks"]["synth-a"]["examples"][0]["jpeg"]
    overlay.write_bytes(overlay.read_bytes() + b"x")
    with pytest.raises(XaibenchError, match=r"beta\.json:\d+:\d+: the overlay file's sha256 differs"):
        build_site(subs, tmp_path / "site")
    # Without validation the builder still refuses to show a file it cannot verify, or one outside assets/.
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(overlay.read_bytes())
    data["tracks"]["synth-a"]["examples"][1]["jpeg"] = "assets/../../outside.jpg"
    data["tracks"]["synth-a"]["examples"][1]["sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
    (subs / "beta.json").write_text(json.dumps(data))
    build_site(subs, tmp_path / "site", validate=False)
    beta = (tmp_path / "site" / "explainers" / "beta.html").read_text()
    assert beta.count("overlay file missing or not verified") == 2
    assert beta.count('<img src="../assets/overlays/') == 2  # track synth-b's two examples


def test_overview_shows_directions_intervals_ties_counts_and_badges(built: Path) -> None:
    html = (built / "index.html").read_text()
    first = html.split('<section class="track"')[1]
    assert "↑ higher is better" in first and "↓ lower is better" in first
    table = first.split("</table>")[0]  # the ranking metrics of track synth-a
    for key, value in (("beta", "0.410"), ("gamma", "0.400")):  # iou: gamma lies in beta's interval
        row = re.search(rf'<tr data-key="{key}".*?</tr>', table, re.S)
        assert row is not None
        [cell] = [c for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S) if value in c]
        assert 'class="rank tie"' in cell and "#3=" in cell  # oracle, a reference, takes no rank
    beta_iou = json.loads((built / "data" / "submissions" / "beta.json").read_text())["tracks"]["synth-a"]["metrics"][
        "iou"
    ]
    assert f"[{beta_iou['ci_low']:.3f}, {beta_iou['ci_high']:.3f}]" in first and "n=10" in first
    assert re.search(r"n=9 · <abbr[^>]*>n/a</abbr> 1", first)  # gamma's mae
    assert first.count('class="badge ref"') == 2 and first.count("tuned on benchmark") == 2  # both tables
    assert 'data-key="tuned-net" data-tuned="true"' in first and 'data-key="oracle" data-reference="true"' in first


def test_methodology_lists_registry_metrics_with_direction_and_version(built: Path) -> None:
    html = (built / "methodology.html").read_text()
    row = re.search(r"<code>deletion</code></th>(.*?)</tr>", html, re.S)
    assert row is not None
    assert "lower is better" in row.group(1) and "1.0.0" in row.group(1) and "Deletion AUC" in row.group(1)
    assert "not in any submission" in html  # installed metrics nobody submitted are still documented
    for p in sorted(built.glob("data/submissions/*.json")):
        assert hashlib.sha256(p.read_bytes()).hexdigest() in html


def test_spearman_matches_scipy_and_is_na_when_undefined() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x, y = rng.integers(0, 5, 8).astype(float), rng.random(8)
        expected = spearmanr(x, y).statistic
        got = spearman(x, y)
        assert (got is None) == bool(np.isnan(expected)) and (got is None or got == pytest.approx(expected))
    assert spearman([1, 2], [2, 1]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert oriented({"a": 1.0}, "lower") == {"a": -1.0}
    assert pair_rho({"a": 1, "b": 2, "c": 3, "d": 9}, {"a": 3, "b": 2, "c": 1}) == (-1.0, 3)


def test_correlations_page_against_pasta_q1_by_hand(built: Path) -> None:
    # synth-a: iou ranks evil<gamma<beta<alpha<tuned<oracle; pasta_q1 ranks evil<gamma<oracle<beta<tuned<alpha:
    # d^2 = 0 + 0 + 1 + 4 + 0 + 9 = 14 -> rho = 1 - 6 * 14 / (6 * 35) = 0.6; mae (lower is better) orders the same.
    assert spearman([MEANS[x]["iou"] for x in MEANS], [MEANS[x]["pasta_q1"] for x in MEANS]) == pytest.approx(0.6)  # type: ignore[misc]
    html = (built / "correlations.html").read_text()
    first = html.split('<section class="track"')[1]
    for metric in ("iou", "mae"):
        row = re.search(rf"<code>{metric}</code></th>(.*?)</tr>", first, re.S)
        assert row is not None and "+0.60" in row.group(1) and '<td data-sort="6">6</td>' in row.group(1)
    assert first.count('<svg class="chart heat"') == 2


def test_cli_leaderboard_build_writes_files_and_site(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    out = tmp_path / "lb"
    result = CliRunner().invoke(cli, ["leaderboard", "build", "--submissions", str(subs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "leaderboard.csv").exists() and (out / "site" / "index.html").exists()
    assert (out / "site" / "data" / "leaderboard.csv").read_text() == (out / "leaderboard.csv").read_text()
    site_json = json.loads((out / "site" / "data" / "leaderboard.json").read_text())
    assert site_json == json.loads((out / "leaderboard.json").read_text())
    assert {"rules", "families", "summary"} <= set(site_json)
    custom = tmp_path / "public"
    result = CliRunner().invoke(
        cli, ["leaderboard", "build", "--submissions", str(subs), "--out", str(out), "--site", str(custom)]
    )
    assert result.exit_code == 0 and (custom / "explainers" / "alpha.html").exists()
    none = tmp_path / "lb2"
    result = CliRunner().invoke(
        cli, ["leaderboard", "build", "--submissions", str(subs), "--out", str(none), "--no-site"]
    )
    assert result.exit_code == 0 and not (none / "site").exists()


class _Opens:
    """Counts every open of a ``*.json`` file in one folder (``open``, ``io.open``, pathlib, ``os.open``)."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.counts = folder.resolve(), Counter[str]()
        opened, os_open = builtins.open, os.open

        def counted(file: Any, *args: Any, **kwargs: Any) -> Any:
            self._see(file)
            return opened(file, *args, **kwargs)

        def os_counted(file: Any, *args: Any, **kwargs: Any) -> Any:
            self._see(file)
            return os_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", counted)
        monkeypatch.setattr(io, "open", counted)
        monkeypatch.setattr(os, "open", os_counted)

    def _see(self, file: Any) -> None:
        if isinstance(file, str | Path) and Path(file).suffix == ".json":
            path = Path(file).resolve()
            if path.parent == self.folder:
                self.counts[path.name] += 1


@pytest.mark.parametrize("how", ["cli", "publish_leaderboard", "build_site"])
def test_a_build_opens_each_submission_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Validation, ranking, the leaderboard files and the whole site read each file once; a file
    changed since (same size, even its modification time put back) is read again."""
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    out = tmp_path / "lb"

    def build() -> None:
        if how == "cli":
            result = CliRunner().invoke(cli, ["leaderboard", "build", "--submissions", str(subs), "--out", str(out)])
            assert result.exit_code == 0, result.output
        elif how == "publish_leaderboard":
            publish_leaderboard(subs, out)
        else:
            build_site(subs, out / "site")

    opens = _Opens(subs, monkeypatch)
    build()
    assert opens.counts == {"alpha.json": 1, "beta.json": 1, "gamma.json": 1}
    assert (out / "site" / "explainers" / "beta.html").exists()

    path = subs / "beta.json"
    text, before = path.read_text(encoding="utf-8"), path.stat()
    assert "test-Dist" not in text  # (a renamed explainer would not validate: its intervals' seed names it)
    path.write_text(text.replace('"test-dist"', '"test-Dist"', 1), encoding="utf-8")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    opens.counts.clear()
    build()
    assert opens.counts == {"beta.json": 1}  # the others are unchanged: not opened again
    assert "test-Dist" in (out / "site" / "data" / "submissions" / "beta.json").read_text(encoding="utf-8")


def test_concept_examples_show_their_sentence_escaped(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    data = json.loads((subs / "gamma.json").read_text())
    data["explainer"]["kind"] = "concept"
    for track in data["tracks"].values():
        track["examples"] = [
            {"sample_id": "s0", "render": "xaibench-concept-sentence/1", "sentence": "because of <b>fur</b> (+0.90)."}
        ]
    (subs / "gamma.json").write_text(json.dumps(data))
    build_site(subs, tmp_path / "site")
    html = (tmp_path / "site" / "explainers" / "gamma.html").read_text()
    assert html.count('<blockquote class="sentence">because of &lt;b&gt;fur&lt;/b&gt; (+0.90).</blockquote>') == 2
    assert "Canonical concept sentences (xaibench-concept-sentence/1)" in html


def test_metrics_without_any_value_on_a_track_are_listed_not_tabled(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    for name in ("alpha", "beta", "gamma"):
        data = json.loads((subs / f"{name}.json").read_text())
        iou = data["tracks"]["synth-b"]["metrics"]["iou"]
        iou.update(mean=None, ci_low=None, ci_high=None, n=0, n_na=10, na_reasons={"no <mask>": 10})
        iou["samples"] = dict.fromkeys(iou["samples"])
        iou.pop("histogram")
        (subs / f"{name}.json").write_text(json.dumps(data))
    build_site(subs, tmp_path / "site")
    a, b = (tmp_path / "site" / "index.html").read_text().split('<section class="track"')[1:3]
    assert 'data-metric="iou"' in a and 'data-metric="iou"' not in b
    assert "so not shown:\n<code>iou</code>." in b and "Most common reason: no &lt;mask&gt;." in b


def test_a_track_the_explainer_cannot_apply_to_says_why_once_in_place_of_its_tables(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    data = json.loads((subs / "gamma.json").read_text())
    track = data["tracks"]["synth-b"]
    n = track["provenance"]["n_samples"]
    reason = "explainer raised ValueError: gamma: model <m> is not a concept model"
    track["explained"] = {"computed": 0, "cached": 0, "failed": n}
    track["examples"] = []
    for m in track["metrics"].values():
        m.update(mean=None, ci_low=None, ci_high=None, n=0, n_na=n, na_reasons={reason: n})
        m["samples"] = dict.fromkeys(m["samples"])
        m.pop("histogram", None)
        m.pop("curve", None)
    (subs / "gamma.json").write_text(json.dumps(data))
    build_site(subs, tmp_path / "site")
    html = (tmp_path / "site" / "explainers" / "gamma.html").read_text()
    applies, not_applicable = _track(html, 1), _track(html, 2)
    escaped = reason.replace("<", "&lt;").replace(">", "&gt;")
    assert not_applicable.count(escaped) == 1 and "Not applicable on this track" in not_applicable
    assert "<table" not in not_applicable and "Examples" not in not_applicable
    assert "<table" in applies and "Not applicable" not in applies
    # the track's table: no row for gamma there, one line naming it and the reason instead
    index = (tmp_path / "site" / "index.html").read_text()
    first, second = index.split('<section class="track"')[1:3]
    assert 'data-key="gamma"' in first and 'data-key="gamma"' not in second
    assert second.count(escaped) == 1 and '<a href="explainers/gamma.html">gamma</a>: ' + escaped in second


# ----------------------------------------------------------------------------- verdicts


def _track(html: str, k: int) -> str:
    """The k-th track section (1-based) of a page."""
    return html.split('<section class="track"')[k].split("</section>")[0]


def _row(html: str, key: str) -> str:
    row = re.search(rf'<tr data-key="{re.escape(key)}".*?</tr>', html, re.S)
    assert row is not None, key
    return row.group(0)


def _header(html: str, metric: str) -> str:
    head = re.search(rf'<th scope="col"[^>]*data-metric="{metric}".*?</th>', html, re.S)
    assert head is not None, metric
    return head.group(0)


def _cells(row: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)


def test_overview_across_tracks_orders_by_mean_win_rate_with_each_tracks_overall_rank(built: Path) -> None:
    # By hand. Perceptual is not ranked (proxy checkpoint), so overall = mean of the alignment and
    # faithfulness mean ranks; oracle is a reference: shown, never ranked, in no comparison.
    # synth-a: alignment (iou, mae) tuned 1, alpha 2, beta 3, gamma 3.5 (iou tie with beta), evil 5;
    # faithfulness alpha 1, tuned 2, beta 3, gamma 4, evil 5 -> overall alpha 1.5 = tuned 1.5 (1=),
    # beta 3 (3), gamma 3.75 (4), evil 5. synth-b: insertion has 6 shared samples (not ranked), iou is
    # reversed -> alpha 1, tuned 2, beta 3, gamma 4, evil 5.
    # Win rate = (others ranked worse + 0.5 x others tied) / 4; mean over the two tracks.
    expected = [
        ("alpha", "0.94", ["1=", "1"]),  # (3.5 + 4) / 4 / 2
        ("tuned-net", "0.81", ["1=", "2"]),  # (3.5 + 3) / 8
        ("beta", "0.50", ["3", "3"]),  # (2 + 2) / 8
        ("gamma", "0.25", ["4", "4"]),
        ("evil", "0.00", ["5", "5"]),
        ("oracle", "reference", []),  # a reference: a line after the methods, no win rate, no rank
    ]
    html = (built / "index.html").read_text()
    overview = html.split('<section class="overview"')[1].split("</section>")[0]
    assert "Mean win rate, in the style of HELM" in overview and "a shared rank counts as half" in overview
    got = []
    for key, row in re.findall(r'<tr data-key="([^"]+)"(.*?)</tr>', overview, re.S):
        rate = re.search(r'<td class="winrate"[^>]*>(.*?)</td>', row, re.S)
        assert rate is not None
        shown = re.sub(r"<[^>]+>", "", rate.group(1)).strip()
        got.append((key, shown, re.findall(r'<span class="overall[^"]*">(\d+=?)</span>', row)))
    assert got == expected
    assert html.index('<section class="overview"') < html.index('<section class="track"')
    # The per-track tables: overall rank first, then the explainer; both pinned when the table scrolls.
    heads = re.findall(r'<th scope="col"([^>]*)>(.*?)</th>', _track(html, 1), re.S)
    assert ">Rank<" in heads[0][1] and ">Explainer<" in heads[1][1]
    assert 'class="pin pin-rank"' in heads[0][0] and 'class="pin pin-name"' in heads[1][0]
    assert 'class="pin"' in overview.split("<tbody>")[1].split("</th>")[0]


# ----------------------------------------------------------------------------- references, a default run

DEFAULT_RUN: dict[str, Any] = {"tracks": ["shapes", "photos"], "metrics": ["iou", "deletion", "model_randomisation"]}
"""A default run (``xaibench run --explainer default`` on the default suite: ``oracle`` among the
explainers), cut to two tracks, a metric of each ranked family present and the sanity check, 8
samples a track (the least that ranks), so that it takes about a minute."""


@pytest.fixture(scope="module")
def default_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("default-run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        res = run(
            "default",
            **DEFAULT_RUN,
            limit=8,
            progress=False,
            workdir=root / "work",
            submissions=root / "sub",
            leaderboard_dir=root / "lb",
        )
    assert res.failed == {} and res.site_dir is not None
    return res.site_dir


def _body_rows(table: str) -> list[tuple[str, str]]:
    """(key, the row from its attributes on) of each body row of a table, in the page's order."""
    return re.findall(r'<tr data-key="([^"]+)"(.*?)</tr>', table.split("<tbody>")[1], re.S)


@pytest.mark.slow
def test_a_default_runs_site_draws_oracle_as_a_reference_line_with_no_rank_in_every_table(default_site: Path) -> None:
    board = json.loads((default_site / "data" / "leaderboard.json").read_text(encoding="utf-8"))
    overall = {(r["track"], r["explainer"]): r for r in board["rows"] if r["metric"] == "rank:overall"}
    assert {x for _, x in overall} == {"random", "center", "sobel", "oracle", "gradient", "gradcam"}
    html = (default_site / "index.html").read_text(encoding="utf-8")
    across = html.split('<section class="overview"')[1].split("</section>")[0].split("</table>")[0]
    tables = {"Across tracks": across}
    for k, track in enumerate(sorted(DEFAULT_RUN["tracks"]), start=1):  # tracks in name order
        section = _track(html, k)
        assert f'data-track="{track}"' in section.split(">")[0]
        for j, table in enumerate(t for t in section.split("</table>") if "<tbody>" in t):
            tables[f"{track} table {j + 1}"] = table
        if track == "photos":  # no masks: oracle explains nothing there, said once instead of a row
            note = section.split('class="note notapplicable">')[1].split("</p>")[0]
            assert '<a href="explainers/oracle.html">oracle</a>: ' in note and section.count("notapplicable") == 1
    assert len(tables) == 5  # each track: its ranking metrics and the metrics reported, not ranked
    for where, table in tables.items():
        rows = _body_rows(table)
        keys = [k for k, _ in rows]
        if where.startswith("photos"):
            assert "oracle" not in keys and keys, (where, keys)
            continue
        assert keys.count("oracle") == 1 and keys[-1] == "oracle", (where, keys)  # after every method
        oracle = rows[-1][1]
        head = oracle.split(">")[0]
        assert 'data-reference="true" class="reference"' in head, where  # drawn as a reference line
        assert 'class="rank' not in oracle and 'class="overall' not in oracle, where  # no rank anywhere in it
        assert all('class="reference"' not in row.split(">")[0] for _, row in rows[:-1]), where
        ranking = "Ranking metrics on" in table or where == "Across tracks"
        if ranking:  # its rank cell is the line's label, sorted last both ways
            assert re.search(r'<td class="(?:pin pin-rank|winrate)" data-sort=""><span class="ref-line"', oracle), where
            assert ">reference</span>" in oracle
            overall_ranks = [re.findall(r'<span class="overall[^"]*">(\d+)=?</span>', row) for _, row in rows[:-1]]
            assert all(overall_ranks), where  # every method keeps its overall rank
    for track in DEFAULT_RUN["tracks"]:
        assert overall[(track, "oracle")]["rank"] is None
        # A baseline the sanity check flags ("insensitive to the model") stays ranked and flagged.
        flagged = [x for (t, x), r in overall.items() if t == track and "insensitive" in r["flags"] and x != "oracle"]
        assert flagged and all(overall[(track, x)]["rank"] is not None for x in flagged)
        for x in flagged:
            name = _row(tables[f"{track} table 1"], x).split("</th>")[0]
            assert "⚠ insensitive to the model" in name and 'class="reference"' not in name
    winrates = [re.search(r'<td class="winrate"[^>]*>(.*?)</td>', row, re.S) for _, row in _body_rows(across)]
    shown = [re.sub(r"<[^>]+>", "", m.group(1)).strip() for m in winrates if m]
    assert shown[-1] == "reference" and all(re.fullmatch(r"\d\.\d\d", w) for w in shown[:-1])
    assert [float(w) for w in shown[:-1]] == sorted((float(w) for w in shown[:-1]), reverse=True)


def test_perceptual_values_carry_the_proxy_label_and_not_ranked_everywhere(built: Path) -> None:
    html = (built / "index.html").read_text()
    for k in (1, 2):
        track = _track(html, k)
        q1 = _header(track, "pasta_q1")
        assert PROXY_LABEL in q1 and "not ranked: proxy checkpoint" in q1 and "-0.23 &lt; 0.3" in q1
        family = re.search(r'<th scope="col"[^>]*data-family="perceptual".*?</th>', track, re.S)
        assert family is not None and "not ranked: proxy checkpoint" in family.group(0)
        note = re.search(r'<details class="note notranked">(.*?)</details>', track, re.S)  # one line until opened
        assert note is not None and PROXY_LABEL in note.group(1) and "<strong>sanity</strong>" in note.group(1)
        summary = note.group(1).split("</summary>")[0]
        assert "<strong>perceptual</strong>, <strong>sanity</strong>" in summary and PROXY_LABEL not in summary
        for key in MEANS:  # every pasta_q1 cell says "not ranked" (a reference's: "never ranked"), no rank
            said = "never ranked" if key == "oracle" else "not ranked"
            q1_cell = [c for c in _cells(_row(track.split("</table>")[0], key)) if said in c and "pasta" not in c]
            assert len(q1_cell) >= 2 and all('class="rank' not in c for c in q1_cell)  # perceptual rank, pasta_q1
        q5 = _header(track.split("</table>")[1], "pasta_q5")  # the "more metrics" table
        assert "↓ lower is better" in q5 and PROXY_LABEL in q5 and "not ranked" in q5
    alpha = (built / "explainers" / "alpha.html").read_text()
    q1_row = re.search(r'<th scope="row"[^>]*data-sort="pasta_q1">.*?</tr>', _track(alpha, 1), re.S)
    assert q1_row is not None and PROXY_LABEL in q1_row.group(0) and "not ranked" in q1_row.group(0)
    assert "Shown but not ranked on this track" in _track(alpha, 1)
    # the family's reason is said once, above the table; each of its rows points there
    family_cells = re.findall(r"</th>\s*<td[^>]*>(.*?)</td>", _track(alpha, 1).split("<h3>Metrics</h3>")[1], re.S)
    perceptual = [c for c in family_cells if c.startswith("perceptual")]
    assert perceptual and all(
        c == 'perceptual<span class="status">not ranked here (why: above)</span>' for c in perceptual
    )
    correlations = (built / "correlations.html").read_text()
    assert f'<h3>Each metric against pasta_q1 <span class="label">{PROXY_LABEL}</span></h3>' in correlations
    assert f"(perceptual values: {PROXY_LABEL})" in correlations  # the heatmaps' titles


def test_cells_show_status_and_flags_and_explainers_their_flags_beside_the_name(built: Path) -> None:
    html = (built / "index.html").read_text()
    b = _track(html, 2)
    assert '<span class="status">too few samples (n = 6)</span>' in _header(b, "insertion")
    ranked = b.split("</table>")[0]
    for key in (k for k in MEANS if k != "oracle"):  # the reference's cells say it is never ranked
        [cell] = [c for c in _cells(_row(ranked, key)) if "too few samples" in c]
        assert "too few samples (n = 6)" in cell and "⚠ n/a 40 %" in cell and 'class="rank' not in cell
    assert "n/a 10 %" not in html  # gamma's mae: 1 of 10 n/a is not above 25 %
    overview = html.split('<section class="overview"')[1].split("</section>")[0]
    for section in (overview, _track(html, 1), b):
        for table in section.split("</table>")[:-1]:
            for key in MEANS:
                name = _row(table, key).split("</th>")[0]
                flagged = RANDOMISATION[key] > 0.5  # oracle (0.95) and evil (0.70)
                assert ("⚠ insensitive to the model" in name) == flagged, (key, name)
    oracle = (built / "explainers" / "oracle.html").read_text()
    h1 = oracle.split("<h1>")[1].split("</h1>")[0]
    assert "⚠ insensitive to the model (synth-a, synth-b)" in h1
    assert all("Flagged on this track" in _track(oracle, k) for k in (1, 2))
    assert "insensitive to the model" not in (built / "explainers" / "alpha.html").read_text()


def test_explainer_page_draws_the_model_randomisation_cascade(built: Path) -> None:
    alpha = _track((built / "explainers" / "alpha.html").read_text(), 1)
    svg = re.search(r'<svg class="chart curve"[^>]*aria-label="model_randomisation curve on synth-a".*?</svg>', alpha)
    assert svg is not None
    chart = svg.group(0)
    assert "fraction of parameter blocks randomised (output first)" in chart
    assert "Spearman of |E| with the original" in chart
    # the grid and ticks are the page's shared frame for a correlation axis, -1 to 1, drawn once
    use = re.search(r'<use href="#([^"]+)"/>', chart)
    assert use is not None
    page = (built / "explainers" / "alpha.html").read_text()
    frame = re.search(rf'<g id="{use.group(1)}">(.*?)</g>', page)
    assert frame is not None and page.count(f'<g id="{use.group(1)}">') == 1
    assert ">-1</text>" in frame.group(1) and ">-0.5</text>" in frame.group(1) and ">1</text>" in frame.group(1)
    assert "<text" not in chart.replace('<text class="axis"', "")  # no tick of its own
    main = re.search(r'<polyline class="line main" fill="none" points="([^"]+)">', chart)
    assert main is not None
    points = [float(v) for p in main.group(1).split() for v in p.split(",")]
    # Plot area: x from 44 to 368 px (fraction 0..1), y from 202 (rho -1) up to 12 (rho 1). The cascade of
    # alpha (mean 0.1) falls linearly from 1 - 0.9/4 = 0.775 at 1/4 of the blocks to 0.1 with all of them.
    expected = [(125.0, 33.375), (206.0, 54.75), (287.0, 76.125), (368.0, 97.5)]
    assert [1 - (1 - RANDOMISATION["alpha"]) * k / BLOCKS for k in (1, 2, 3, 4)] == pytest.approx(
        [0.775, 0.55, 0.325, 0.1]
    )
    assert points == pytest.approx([v for xy in expected for v in xy], abs=0.006)
    assert chart.count('<polyline class="line other"') == 5


def test_a_files_own_verification_shows_as_a_claim_only_the_builders_result_as_verified(
    built: Path, tmp_path: Path
) -> None:
    # the files' own blocks (alpha: passed, beta: failed): claims, never shown as verified
    alpha = (built / "explainers" / "alpha.html").read_text()
    assert "claims verified (not checked here): the file says 2026-01-02 (5 of 5 re-run records matched)" in alpha
    assert "verification passed" not in alpha and '<span class="badge verified"' not in alpha
    assert '<span class="badge unverified" title="claims verified (not checked here)' in alpha.split("</h1>")[0]
    beta = (built / "explainers" / "beta.html").read_text()
    assert "claims verification failed (not checked here): the file says 2026-01-03 (3 of 5" in beta
    assert "verified 2026" not in beta and "verified 2026" not in alpha
    assert "not verified" in (built / "explainers" / "gamma.html").read_text()
    html = (built / "index.html").read_text()
    for section in (html.split('<section class="overview"')[1], _track(html, 1)):
        assert "badge verified" not in _row(section, "alpha")
        assert ">claims verified (not checked here)</span>" in _row(section, "alpha")
        assert ">claims verification failed (not checked here)</span>" in _row(section, "beta")
        assert "badge verified" not in _row(section, "gamma") and "unverified" not in _row(section, "gamma")

    # the board builder's own result for alpha's exact content: shown as verified, with its date
    subs = built.parent / "subs"
    mine = {
        "verified_at": "2026-02-01T00:00:00+00:00",
        "checked": 5,
        "matched": 5,
        "tolerance": 1e-6,
        "passed": True,
        "xaibench": "0.1.0",
    }
    digest = content_digest(json.loads((subs / "alpha.json").read_text(encoding="utf-8")))
    build_site(subs, tmp_path / "site", verified={digest: mine})
    alpha = (tmp_path / "site" / "explainers" / "alpha.html").read_text()
    assert '<span class="verification passed">verified 2026-02-01 (5 of 5 re-run records matched)</span>' in alpha
    assert '<span class="badge verified"' in alpha.split("</h1>")[0] and "claims verified" not in alpha
    html = (tmp_path / "site" / "index.html").read_text()
    for section in (html.split('<section class="overview"')[1], _track(html, 1)):
        assert '<span class="badge verified" title="verified 2026-02-01' in _row(section, "alpha")
        assert "claims verification failed (not checked here)" in _row(section, "beta")  # beta: still a claim


def test_methodology_states_the_ranking_rule_with_the_boards_values(built: Path, tmp_path: Path) -> None:
    html = (built / "methodology.html").read_text()
    rules = html.split('<section id="rules">')[1].split("</section>")[0]
    for text in (
        "compared on the samples where both have a value",
        "the 95 % paired bootstrap interval of the mean difference excludes 0; when the interval contains 0 they tie",
        "Rank = 1 + the number of explainers significantly better",
        "share at least 8 samples with values",
        "too few samples (n = k)",
        "more than 25 % n/a is flagged",
        "labelled <code>PASTA</code>",
        "held-out technique-level Spearman of at least 0.3 on Q1",
        "<code>pasta_q5</code> and <code>pasta_q6</code>",
        "are <em>lower is better</em>",
        "The sanity family is never ranked.",
        "mean is above 0.5",
        "overall rank is the mean over the ranked families only",
    ):
        assert text in rules, text
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta"))
    board = build_leaderboard(subs)
    board.rules = {
        "min_shared_samples": 12,
        "na_flag_fraction": 0.4,
        "perceptual_min_spearman": 0.45,
        "sanity_flag_above": 0.6,
    }
    build_site(subs, tmp_path / "site", board=board)
    html = (tmp_path / "site" / "methodology.html").read_text()
    for text in ("share at least 12 samples", "more than 40 % n/a", "at least 0.45 on Q1", "mean is above 0.6"):
        assert text in html, text
    assert re.search(r"share at least\s+12 samples", (tmp_path / "site" / "index.html").read_text())


def test_large_boards_put_each_track_on_a_page_named_by_position_and_slug() -> None:
    from xaibench.site.views.tracks import INLINE_CELLS, place_tracks

    def view(name: str, rows: int, metrics: int) -> Any:
        ranked = [{}] * metrics
        return {"name": name, "href": "#x", "rows": [{}] * rows, "families": [{}], "ranked": ranked, "others": []}

    small = [view("a", 10, 7), view("b", 10, 7)]  # 10 rows x (2 + 1 + 7) cells = 100 a track
    assert place_tracks(small) == {} and [v["href"] for v in small] == ["#x", "#x"]
    cells_each = 50 * (2 + 1 + 27)  # 1,500: two such tracks are exactly the limit, three are over it
    assert 2 * cells_each == INLINE_CELLS and place_tracks([view("a", 50, 27), view("b", 50, 27)]) == {}
    big = [view("synth-00", 50, 27), view(EVIL_NAME, 50, 27), view("ÄÖ", 50, 27)]
    files = place_tracks(big)
    assert files == {
        "synth-00": "tracks/001-synth-00.html",
        EVIL_NAME: "tracks/002-script-window-pwned-1-script.html",
        "ÄÖ": "tracks/003-track.html",
    }
    assert [v["href"] for v in big] == list(files.values())


def test_grey_context_lines_are_thinned_to_at_most_26_points_keeping_both_ends() -> None:
    from xaibench.site.charts import OTHER_POINTS, _thin

    xs = [k / 50 for k in range(51)]
    tx, ty = _thin(xs, [1 - x for x in xs])
    assert len(tx) == OTHER_POINTS == 26 and tx[0] == 0.0 and tx[-1] == 1.0 and tx[1] == 0.04
    assert ty == [1 - x for x in tx]
    assert _thin([0.0, 0.5, 1.0], [1.0, 2.0, 3.0]) == ([0.0, 0.5, 1.0], [1.0, 2.0, 3.0])
