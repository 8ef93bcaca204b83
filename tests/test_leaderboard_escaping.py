"""Hostile strings from submissions are inert in leaderboard.md (rendered as CommonMark) and in
the terminal (DESIGN 7): no link, image, autolink, raw HTML, heading or escape sequence forms."""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from xaibench.publish.board import Leaderboard, build_board
from xaibench.publish.writers import md_escape, print_leaderboard, to_markdown

PAYLOADS = (
    "<link rel=stylesheet href=http://x/a.css>",
    "<meta http-equiv=refresh content=0;url=http://x>",
    "<img src=x onerror=alert(1)>",
    "[a](javascript:alert(1))",
    "![i](http://x/p.png)",
    "<http://x>",
    "\x1b[31m",
    "<script>alert(1)</script>",
    "# heading",
    "- item",
    "+ item",
    "`code`",
    "*em* _em_",
    "[/bold red]",
    "[ref]: http://x",
    "line\nbreak | pipe",
    "\\<b>",
)


def hostile(k: int) -> str:
    """A string that starts with payload ``k`` and carries every other one."""
    return PAYLOADS[k % len(PAYLOADS)] + " " + " ".join(PAYLOADS)


def _samples(value: float) -> dict[str, float | None]:
    return {f"{hostile(0)}-{k}": value for k in range(10)}


def _block(value: float, family: str, direction: str, label: str | None = None) -> dict[str, Any]:
    params = {"label": label, "heldout_q1_spearman": -0.23} if label else {"note": hostile(1)}
    return {
        "family": family,
        "direction": direction,
        "ranking": family != "sanity",
        "params": params,
        "mean": value,
        "ci_low": value,
        "ci_high": value,
        "n": 10,
        "n_na": 0,
        "samples": _samples(value),
    }


def hostile_board() -> Leaderboard:
    """Two explainers whose every string (name, file stem, track, dataset, model, metric ids,
    label, notes, plugin names) is hostile; one is insensitive (a flag). A board note naming a
    hostile file is added by hand: a later date no longer supersedes (two files for one
    explainer are an error), so no note names a file by itself."""
    subs = []
    for k, value in enumerate((0.9, 0.1)):
        metric_ids = [hostile(2 + k), hostile(3 + k), hostile(4 + k)]
        metrics = {
            metric_ids[0]: _block(value, "alignment", "higher"),
            metric_ids[1]: _block(1 - value, "faithfulness", "lower"),
            metric_ids[2]: _block(2 + value, "perceptual", "higher", label=hostile(5 + k)),
            "model_randomisation": _block(value, "sanity", "lower"),
        }
        subs.append(
            {
                "schema": "xaibench.submission/1",
                "explainer": {"name": hostile(6 + k), "version": hostile(7), "params": {"p": hostile(8)}},
                "disclosure": {"tuned_on_benchmark": True, "reference_only": True, "notes": hostile(9)},
                "created": f"2026-0{k + 2}-01T00:00:00+00:00",
                "environment": {"platform": hostile(10)},
                "plugins": [{"name": hostile(11)}],
                "tracks": {
                    hostile(12): {
                        "provenance": {
                            "dataset": {"name": hostile(13), "revision": hostile(14)},
                            "model": {"name": hostile(15), "identity": hostile(16)},
                            "n_samples": 10,
                        },
                        "metrics": metrics,
                    }
                },
            }
        )
    files = [Path(f"{hostile(k)}.json") for k in (0, 3)]
    board = build_board([(files[0], subs[0]), (files[1], subs[1])])
    board.notes.append(f"{files[0]} on track {hostile(12)} is noted by {hostile(8)}.json")
    assert board.rows
    return board


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.parametrize("tables", [False, True])
def test_leaderboard_md_renders_inert_as_commonmark(tables: bool) -> None:
    md = to_markdown(hostile_board())
    renderer = MarkdownIt("commonmark")  # raw HTML enabled
    if tables:
        renderer = renderer.enable("table")
    html = renderer.render(md)
    for needle in ("<link", "<meta", "<img", "<script", "<a ", "<style", "<iframe", "<svg"):
        assert needle not in html, needle
    parser = _Tags()
    parser.feed(html)
    allowed = {"h1", "h2", "p", "ul", "li", "code", "table", "thead", "tbody", "tr", "th", "td"}
    assert {tag for tag, _ in parser.tags} <= allowed
    attrs = [name for _, tag_attrs in parser.tags for name, _ in tag_attrs]
    assert not [a for a in attrs if a in ("href", "src") or a.startswith("on")]
    assert [tag for tag, _ in parser.tags].count("h2") == 3  # Across tracks, the track, Notes: no injected heading
    text = "".join(parser.text)
    for payload in PAYLOADS:  # every payload is shown, as text
        shown = payload.replace("\x1b", "\\x1b").replace("\n", "\\x0a")
        assert shown in text, shown
    assert "insensitive to the model" in text


def test_md_escape_breaks_every_markdown_and_html_construct() -> None:
    assert md_escape("<img src=x>") == "&lt;img src=x&gt;"
    assert md_escape("[a](j:x)") == "\\[a\\](j:x)"  # no link: the brackets are escaped
    assert md_escape("![i](p)") == "\\!\\[i\\](p)"
    assert md_escape("# h") == "\\# h" and md_escape("- l") == "\\- l" and md_escape("+ l") == "\\+ l"
    assert md_escape("a-b") == "a-b"  # only a leading - starts a list
    assert md_escape("x|y\\z`*_~") == "x\\|y\\\\z\\`\\*\\_\\~"
    assert md_escape("\x1b[31m\n") == "\\\\x1b\\[31m\\\\x0a"
    assert md_escape("\"'&") == "&quot;&#39;&amp;"


def test_the_terminal_shows_hostile_strings_as_text() -> None:
    out = io.StringIO()
    console = Console(file=out, width=20000, color_system=None, force_terminal=False, emoji=True)
    print_leaderboard(hostile_board(), console)  # unbalanced rich markup must not raise
    text = out.getvalue()
    assert "\x1b" not in text and "\\x1b[31m" in text
    assert "[/bold red]" in text and "<img src=x onerror=alert(1)>" in text
    assert "insensitive to the model" in text
