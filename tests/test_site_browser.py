"""The static leaderboard site in a real headless Chromium (Playwright driving Debian's /usr/bin/chromium).

Built from small synthetic submissions written by the test (tests/_site_data.py), served both
from ``file://`` and from a localhost ``http.server``. Checks: every page loads with no console
error and no request leaving the site; sorting by a column header; the disclosure filters;
submitted HTML/script stays inert text; at a phone's 390 px width no page scrolls sideways (only
the table containers do) and the rank and explainer columns stay pinned while a table scrolls;
numbers first: at 390 x 844 and 1280 x 800 the first board row starts within the first screen, on
the overview and on a track's own page, and no badge breaks inside a word.
Screenshots go to ``test-artifacts/`` (gitignored).

Needs ``pip install playwright`` (never ``playwright install``: the system browser is used) and
``apt-get install chromium``; set ``XAIBENCH_CHROMIUM`` to use another Chromium binary. Without
them the module is skipped, unless ``XAIBENCH_REQUIRE_BROWSER=1`` (set it in CI), which fails it.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _site_data import EVIL_NAME, EVIL_NOTES, EVIL_PARAM, EVIL_SAMPLE, write_submissions
from PIL import Image

from xaibench.site import build_site

pytestmark = pytest.mark.browser


def _unavailable(reason: str) -> None:
    """Skip the module, or fail it when ``XAIBENCH_REQUIRE_BROWSER=1`` (CI: a missing install must not pass)."""
    if os.environ.get("XAIBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests required but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    from playwright import sync_api
except ImportError:
    _unavailable("python package playwright not installed (pip install playwright)")


def _chromium() -> str | None:
    for candidate in (os.environ.get("XAIBENCH_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


CHROMIUM = _chromium()
if CHROMIUM is None:
    _unavailable("no Chromium binary (apt-get install chromium, or set XAIBENCH_CHROMIUM)")

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = (
    "index.html",
    "methodology.html",
    "correlations.html",
    *(f"explainers/{n}.html" for n in ("alpha", "beta", "gamma", "oracle", "tuned-net", "evil")),
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    subs = write_submissions(root / "submissions")
    build_site(subs, root / "site")
    return root / "site"


@pytest.fixture(scope="module")
def split_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same submissions with each track on a page of its own (as a large board's are)."""
    from xaibench.site import build
    from xaibench.site.views.tracks import place_tracks

    root = tmp_path_factory.mktemp("split")
    subs = write_submissions(root / "submissions")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(build, "place_tracks", lambda views: place_tracks(views, inline_cells=0))
        build_site(subs, root / "site")
    assert (root / "site" / "tracks" / "001-synth-a.html").is_file()
    return root / "site"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_root(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def context() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="xaibench-chromium-")  # a fresh --user-data-dir
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=LAUNCH_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield ctx
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


class Watched:
    """A page plus what it logged and which requests it made."""

    def __init__(self, ctx: Any, allowed: tuple[str, ...]) -> None:
        self.page = ctx.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on(
            "console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

        def route(r: Any) -> None:
            if r.request.url.startswith(allowed):
                r.continue_()
            else:
                self.outside.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)

    def goto(self, url: str) -> None:
        response = self.page.goto(url, wait_until="load")
        assert response is None or response.ok, f"{url}: HTTP {response.status if response else '?'}"


@pytest.fixture()
def watch(context: Any, site: Path, http_root: str) -> Iterator[Any]:
    """Opens watched pages; ``watch(root)`` also allows a second built site's files."""
    opened: list[Watched] = []

    def make(also: Path | None = None) -> Watched:
        w = Watched(context, (site.as_uri() + "/", http_root, "data:", *([also.as_uri() + "/"] if also else [])))
        opened.append(w)
        return w

    yield make
    for w in opened:
        w.page.close()


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"site-{name}.png"))


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_every_page_loads_without_console_errors_or_outside_requests(
    scheme: str, site: Path, http_root: str, watch: Any
) -> None:
    base = site.as_uri() + "/" if scheme == "file" else http_root
    w = watch()
    for rel in PAGES:
        w.goto(base + rel)
        assert w.page.title().endswith("xaibench leaderboard"), rel
        broken = w.page.eval_on_selector_all(
            "img", "imgs => imgs.filter(i => !i.complete || i.naturalWidth === 0).length"
        )
        assert broken == 0, f"{rel}: {broken} image(s) did not load"
        assert w.page.evaluate("document.styleSheets.length") == 1, f"{rel}: site.css not applied"
        _shot(w.page, f"{scheme}-{rel.replace('/', '-').removesuffix('.html')}")
    assert w.errors == [], w.errors
    assert w.outside == [], f"requests outside the site: {w.outside}"
    assert w.page.evaluate("typeof window.__pwned") == "undefined"


def _keys(page: Any, table: Any) -> list[str]:
    return table.locator("tbody tr").evaluate_all("rows => rows.map(r => r.getAttribute('data-key'))")


def _track_table(page: Any) -> Any:
    """The ranking table of the first track (the cross-track overview table comes before it)."""
    return page.locator("section.track table.board").first


def test_clicking_a_header_sorts_by_that_column_best_first_then_reversed(site: Path, watch: Any) -> None:
    w = watch()
    w.goto(site.as_uri() + "/index.html")
    table = _track_table(w.page)
    # overall rank order; oracle, a reference, has no rank and comes last
    assert _keys(w.page, table) == ["alpha", "tuned-net", "beta", "gamma", "evil", "oracle"]
    iou = table.locator("th[data-metric='iou']")
    iou.locator("button").click()  # higher is better: descending first
    assert _keys(w.page, table) == ["oracle", "tuned-net", "alpha", "beta", "gamma", "evil"]
    assert iou.get_attribute("aria-sort") == "descending"
    iou.locator("button").click()
    assert _keys(w.page, table) == ["evil", "gamma", "beta", "alpha", "tuned-net", "oracle"]
    assert iou.get_attribute("aria-sort") == "ascending"
    mae = table.locator("th[data-metric='mae']")
    mae.locator("button").click()  # lower is better: ascending first
    assert _keys(w.page, table) == ["oracle", "tuned-net", "alpha", "beta", "gamma", "evil"]
    assert iou.get_attribute("aria-sort") == "none"
    table.locator("thead th", has_text="Explainer").locator("button").click()
    names = table.locator("tbody th[scope=row] a").all_inner_texts()
    assert names == sorted(names, key=str.lower)
    _shot(w.page, "sorted-by-name")


def test_na_values_sort_last_in_both_directions(site: Path, watch: Any) -> None:
    w = watch()
    w.goto(site.as_uri() + "/index.html")
    w.page.locator("section.track").first.locator("details:not(.notranked) > summary").click()  # more metrics
    table = w.page.locator("section.track").first.locator("table.board").nth(1)
    header = table.locator("th[data-metric='sparseness']")
    header.locator("button").click()
    assert _keys(w.page, table) == ["oracle", "tuned-net", "alpha", "beta", "evil", "gamma"]
    header.locator("button").click()
    assert _keys(w.page, table) == ["evil", "beta", "alpha", "tuned-net", "oracle", "gamma"]


def test_disclosure_filters_hide_tuned_and_reference_explainers(site: Path, watch: Any) -> None:
    w = watch()
    w.goto(site.as_uri() + "/index.html")
    rows = _track_table(w.page).locator("tbody tr")

    def visible() -> list[str]:
        return [
            k
            for k, shown in zip(
                _keys(w.page, _track_table(w.page)),
                [rows.nth(i).is_visible() for i in range(rows.count())],
                strict=True,
            )
            if shown
        ]

    assert len(visible()) == 6
    w.page.check("#hide-tuned")
    assert visible() == ["alpha", "beta", "gamma", "evil", "oracle"]
    assert w.page.locator("tr[data-key='tuned-net']:visible").count() == 0  # every table of every track
    w.page.check("#hide-reference")
    assert visible() == ["alpha", "beta", "gamma", "evil"]
    assert "2 explainers hidden" in w.page.inner_text("#filter-status")
    _shot(w.page, "filtered")
    w.page.uncheck("#hide-tuned")
    w.page.uncheck("#hide-reference")
    assert len(visible()) == 6


@pytest.mark.parametrize("rel", ["index.html", "explainers/evil.html", "methodology.html", "correlations.html"])
def test_submitted_html_and_script_render_as_inert_text(rel: str, site: Path, watch: Any) -> None:
    w = watch()
    w.goto(site.as_uri() + "/" + rel)
    for details in w.page.locator("details").all():
        details.evaluate("d => d.open = true")
    w.page.mouse.move(200, 300)
    assert w.page.evaluate("typeof window.__pwned") == "undefined"
    assert (
        w.page.locator("[onerror], [onload], [onmouseover], img[src='x'], body script:not([src]):not([type])").count()
        == 0
    )
    text = w.page.inner_text("body")
    expected = {
        "index.html": [EVIL_NAME],
        "explainers/evil.html": [EVIL_NAME, EVIL_PARAM, EVIL_NOTES, EVIL_SAMPLE],
        "methodology.html": [],
        "correlations.html": [],
    }[rel]
    for literal in expected:
        assert literal in text, f"{literal!r} not shown literally on {rel}"
    assert w.errors == [], w.errors
    _shot(w.page, "inert-" + rel.replace("/", "-").removesuffix(".html"))


def test_explainer_page_shows_overlays_curves_and_histograms(site: Path, watch: Any) -> None:
    w = watch()
    w.goto(site.as_uri() + "/explainers/alpha.html")
    section = w.page.locator("section.track").first
    assert section.locator(".examples img").count() == 2
    assert section.locator(".examples img").first.evaluate("i => i.naturalWidth") == 48
    curves = section.locator("svg.curve")
    assert curves.count() == 3  # deletion, insertion and the model_randomisation cascade
    assert curves.first.locator("polyline.main").count() == 1
    assert curves.first.locator("polyline.other").count() == 5  # the other explainers, in grey
    # the grid, ticks and border are the page's one shared frame, shown through each curve's <use>, in
    # the site's colours: the plot's left border (x = 44 of 380) is drawn along its whole height
    assert curves.first.locator("use").evaluate("u => u.getBBox().width") > 320
    shot = Image.open(io.BytesIO(curves.first.screenshot())).convert("RGB")
    scale = shot.width / 380
    column = [shot.getpixel((round(44 * scale), round(y * scale))) for y in range(20, 195)]
    assert sum(px != (255, 255, 255) for px in column) > 0.9 * len(column)
    assert section.locator("svg.hist").count() == 6  # metrics with values in [0, 1]
    hist = Image.open(io.BytesIO(section.locator("svg.hist").first.screenshot())).convert("RGB")
    scale = hist.width / 180  # the shared base line (y = 26 of 40) spans the chart
    row = [hist.getpixel((round(x * scale), round(26 * scale))) for x in range(2, 178)]
    assert sum(px != (255, 255, 255) for px in row) > 0.9 * len(row)
    _shot(w.page, "explainer-alpha")


def test_phone_width_scrolls_only_inside_tables_and_the_explainer_column_stays_pinned(site: Path, watch: Any) -> None:
    w = watch()
    w.page.set_viewport_size({"width": 390, "height": 844})
    for rel in PAGES:
        w.goto(site.as_uri() + "/" + rel)
        assert w.page.evaluate("document.documentElement.scrollWidth") <= 390, f"{rel} overflows at 390 px"
    w.goto(site.as_uri() + "/index.html")
    _shot(w.page, "phone-index")
    first_columns = w.page.eval_on_selector_all(
        "table.board",
        "ts => ts.map(t => [t.tHead.rows[0].cells[0], t.tBodies[0].rows[0].cells[0]]"
        ".map(c => getComputedStyle(c).position))",
    )
    assert len(first_columns) == 5  # the overview, then two tables per track
    assert all(p == ["sticky", "sticky"] for p in first_columns), first_columns
    # Scroll the first track's table sideways: the rank and explainer columns stay put, the metrics move.
    table = _track_table(w.page)
    scroller = table.locator("xpath=..")
    assert scroller.evaluate("s => s.classList.contains('scroll') && s.scrollWidth > s.clientWidth + 100")
    row = table.locator("tbody tr").first

    def lefts() -> list[float]:
        return row.evaluate("r => Array.from(r.cells).slice(0, 3).map(c => c.getBoundingClientRect().left)")

    rank, name, family = lefts()
    scroller.evaluate("s => { s.scrollLeft = 200; }")
    after = lefts()
    assert after[0] == pytest.approx(rank, abs=1) and after[1] == pytest.approx(name, abs=1)
    assert after[2] == pytest.approx(family - 200, abs=1)
    assert w.page.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(w.page, "phone-index-scrolled")
    assert w.errors == [], w.errors


# ---------------------------------------------------------------- a board at the field's scale

LARGE = {"tracks": 20, "explainers": 50, "metrics": 1, "samples": 8}  # one ranking metric keeps the build short
OVERVIEW_LIMIT = 2_000_000  # bytes (issue 28's goal)


@pytest.fixture(scope="module")
def large_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of a generated 50 explainers x 20 tracks leaderboard, as ``leaderboard build`` writes it."""
    from xaibench.python_api import publish_leaderboard
    from xaibench.testing.scale import ScaleData, ScaleSpec

    root = tmp_path_factory.mktemp("large")
    ScaleData(ScaleSpec(**LARGE)).write_submissions(root / "submissions")
    published = publish_leaderboard(root / "submissions", root / "board")
    assert published.site_dir is not None
    return published.site_dir


def _shown(page: Any, selector: str, attribute: str) -> list[str]:
    """``attribute`` of the elements matching ``selector`` that are displayed."""
    return page.eval_on_selector_all(
        selector, f"els => els.filter(e => e.offsetParent !== null).map(e => e.getAttribute('{attribute}'))"
    )


def test_large_board_overview_is_small_and_its_filter_box_hides_what_does_not_match(
    large_site: Path, context: Any
) -> None:
    from xaibench.testing.scale import explainer_names, track_names

    names, tracks = explainer_names(LARGE["explainers"]), track_names(LARGE["tracks"])
    index = large_site / "index.html"
    assert index.stat().st_size <= OVERVIEW_LIMIT, f"overview is {index.stat().st_size} bytes"
    track_pages = sorted((large_site / "tracks").glob("*.html"))
    assert len(track_pages) == LARGE["tracks"]  # each track's tables on their own page
    assert len(list((large_site / "correlations").glob("*.html"))) == LARGE["tracks"]  # and their correlations
    for page in large_site.rglob("*.html"):  # every page small, every link relative and resolving
        assert page.stat().st_size <= OVERVIEW_LIMIT, f"{page.name}: {page.stat().st_size} bytes"
        for ref in re.findall(r'(?:href|src)="([^"#]+)', page.read_text(encoding="utf-8")):
            if not ref.startswith("data:"):
                assert (page.parent / ref).resolve().is_file(), f"{page}: broken link {ref}"
    w = Watched(context, (large_site.as_uri() + "/", "data:"))
    try:
        w.goto(index.as_uri())
        rows = "table.overview tbody tr[data-key]"
        assert sorted(_shown(w.page, rows, "data-key")) == sorted(names)
        w.page.fill("#filter-explainers", "GRAD")  # case-insensitive, part of the name
        expected = sorted(n for n in names if "grad" in n)
        assert 0 < len(expected) < len(names)
        assert sorted(_shown(w.page, rows, "data-key")) == expected
        hidden = len(names) - len(expected)
        assert w.page.text_content("#filter-status").startswith(f"{hidden} explainers hidden.")
        w.page.fill("#filter-explainers", "")
        assert len(_shown(w.page, rows, "data-key")) == len(names)
        w.page.fill("#filter-tracks", "synth-01")
        assert _shown(w.page, "table.overview th[data-track]", "data-track") == ["synth-01"]
        assert _shown(w.page, "ul.tracks li[data-track]", "data-track") == ["synth-01"]
        assert len(_shown(w.page, "table.overview td[data-track]", "data-track")) == len(names)  # one column
        w.page.fill("#filter-tracks", "")
        assert _shown(w.page, "table.overview th[data-track]", "data-track") == tracks
        # a track's own page: linked from the overview, with the same filter box
        w.page.click("ul.tracks li[data-track='synth-03'] a")
        w.page.wait_for_load_state("load")
        assert w.page.url.startswith((large_site / "tracks").as_uri())
        table = "section.track table.board[data-track='synth-03'] tbody tr[data-key]"
        assert sorted(_shown(w.page, table, "data-key")) == sorted(names)
        w.page.fill("#filter-explainers", "cam")
        assert sorted(_shown(w.page, table, "data-key")) == sorted(n for n in names if "cam" in n)
        _shot(w.page, "large-track-filtered")
        assert w.errors == [], w.errors
        assert w.outside == [], f"requests outside the site: {w.outside}"
    finally:
        w.page.close()


# ---------------------------------------------------------------- numbers first, layout that holds

SCREENS = {"phone": (390, 844), "laptop": (1280, 800)}
FIRST_ROW = "() => document.querySelector('table.board tbody tr').getBoundingClientRect().top"
BROKEN_WORDS = """els => els.filter(e => e.offsetParent !== null).flatMap(el => {
  const broken = [];
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    for (const m of node.data.matchAll(/[\\p{L}\\p{N}]+/gu)) {
      const r = document.createRange();
      r.setStart(node, m.index);
      r.setEnd(node, m.index + m[0].length);
      const lines = new Set(Array.from(r.getClientRects()).filter(b => b.width > 0).map(b => Math.round(b.top)));
      if (lines.size > 1) broken.push(el.textContent.trim() + ": " + m[0]);
    }
  }
  return broken;
})"""
"""For each displayed element, each word (a run of letters and digits) that its lines break inside:
a Range over the word has client rectangles on more than one line."""


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("rel", ["index.html", "tracks/001-synth-a.html"])
def test_the_first_screen_shows_the_board_with_rules_and_filters_folded(
    rel: str, screen: str, split_site: Path, watch: Any
) -> None:
    width, height = SCREENS[screen]
    w = watch(split_site)
    w.page.set_viewport_size({"width": width, "height": height})
    w.goto((split_site / rel).as_uri())
    top = w.page.evaluate(FIRST_ROW)
    assert 0 < top < height, f"{rel} at {width} x {height}: the first board row starts at {top:.0f} px"
    assert w.page.evaluate("document.getElementById('how-to-read').open") is False  # the rules: one line
    assert w.page.is_visible("#how-to-read > summary")
    # The filter box folds away on a phone and is open on a wide screen; it opens with one click.
    assert w.page.evaluate("document.getElementById('filters').open") is (width >= 700)
    if width < 700:
        assert not w.page.is_visible("#filter-explainers")
        w.page.click("#filters > summary")
        assert w.page.is_visible("#filter-explainers")
    _shot(w.page, f"first-screen-{screen}-{rel.replace('/', '-').removesuffix('.html')}")
    assert w.errors == [], w.errors


@pytest.mark.parametrize("screen", SCREENS)
def test_badges_and_names_wrap_between_words_only(screen: str, split_site: Path, site: Path, watch: Any) -> None:
    width, height = SCREENS[screen]
    w = watch(split_site)
    w.page.set_viewport_size({"width": width, "height": height})
    seen = 0
    for page in (site / "index.html", split_site / "tracks" / "001-synth-a.html", site / "explainers" / "oracle.html"):
        w.goto(page.as_uri())
        badges = w.page.locator(".badge")
        seen += badges.count()
        assert badges.evaluate_all(BROKEN_WORDS) == [], f"{page.name} at {width} px: badges break inside a word"
        styles = w.page.eval_on_selector_all(
            ".badge, tbody th.pin",
            "els => els.map(e => getComputedStyle(e)).map(c => c.wordBreak + ' ' + c.overflowWrap)",
        )
        assert styles and not [s for s in styles if "break-all" in s or "anywhere" in s], set(styles)
        assert w.page.evaluate("document.documentElement.scrollWidth") <= width, f"{page.name} scrolls sideways"
        # A reference line's label fits its cell whole (the pinned rank column is narrow).
        clipped = w.page.eval_on_selector_all(
            "tr.reference .ref-line",
            "els => els.filter(e => e.offsetParent !== null).filter(e => {"
            " const c = e.closest('td').getBoundingClientRect(), r = e.getBoundingClientRect();"
            " return r.left < c.left - 0.5 || r.right > c.right + 0.5; }).length",
        )
        assert clipped == 0, f"{page.name} at {width} px: {clipped} reference label(s) overflow their cell"
        if page.name != "oracle.html":
            assert w.page.locator("tr.reference .ref-line:visible").count() >= 1
    assert seen > 20
