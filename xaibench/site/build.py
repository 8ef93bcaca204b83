"""Build the static leaderboard site from submission files (data only; nothing submitted is executed).

Layout of the output folder (default ``<leaderboard dir>/site``)::

    index.html               overview: the cross-track summary (mean win rate), one sortable table per
                             track (overall rank first), a filter box (explainers, tracks) and the
                             disclosure filters
    tracks/<k>-<slug>.html   large boards only: each track's tables on their own page, so the overview
                             stays small (over views.tracks.INLINE_CELLS table cells in all)
    correlations/<k>-<slug>.html  the same boards: each track's correlations on their own page
    explainers/<slug>.html   one page per submission: overlays, curves, distributions, provenance
    methodology.html         metrics from the registry: family, direction, version, description
    correlations.html        Spearman rho metric x metric across explainers; each metric vs pasta_q1;
                             the PASTA paper's human ratings against the classic metrics (metaeval/human_ratings.py)
    assets/site.css|site.js  the site's own CSS and vanilla JS (no CDN, no fonts, no requests)
    assets/overlays/*.jpg    example overlays (*.png from older submissions), copied after their sha256 was checked
    data/                    leaderboard.csv/.json and the submission files, for download (a site
                             built with ``linked``, the record's, links the board folder's own
                             leaderboard files and the submissions in place instead)

Safety: every submitted string is escaped by Jinja2's autoescape (HTML) or ``tojson`` (the one
``<script type="application/json">`` block, which escapes ``<``, ``>``, ``&`` and ``'``); file
names on the site are generated (slugs, digests), never taken from submissions; each page sets
a Content-Security-Policy allowing only the site's own script, style and images. Links are
relative, so the site works from ``file://`` and any static host. The output is deterministic
(no build timestamp): the same submissions give the same bytes.

The pages are views (:mod:`xaibench.site.views`) of the board and the submissions; one writer
(:mod:`xaibench.site.writer`) renders and writes them. Each submission file is read once: the
board keeps the submissions it was ranked from, and the site shows those.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from xaibench.errors import XaibenchError
from xaibench.metaeval.correlations import PERCEPTUAL_REFERENCE
from xaibench.metaeval.human_ratings import human_ratings_section
from xaibench.plugins.manager import Registry
from xaibench.publish.board import LEADERBOARD_SCHEMA, Leaderboard, build_board
from xaibench.publish.shapes import Verification
from xaibench.publish.submission import read_submissions
from xaibench.publish.submission_files import Submission
from xaibench.publish.validation import require_valid
from xaibench.publish.writers import to_csv, to_json
from xaibench.site.submitted import Submitted, submitted
from xaibench.site.views.cells import all_flags, board_rules, verification_view
from xaibench.site.views.correlations import correlation_view
from xaibench.site.views.explainers import chart_frames, explainer_tracks
from xaibench.site.views.meta import known_answer_table, meta_tracks
from xaibench.site.views.methodology import methodology
from xaibench.site.views.overview import overview
from xaibench.site.views.tokens import legend
from xaibench.site.views.tracks import place_tracks, track_view
from xaibench.site.writer import Page, write_site

BOARD_DATA = "data/"
"""Where a site's leaderboard files are, relative to its root: its own copies."""
LINKED_BOARD_DATA = "../"
"""Where a linked site's (the record's) leaderboard files are: the board folder it lies in."""


def build_site(
    submissions_dir: Path,
    site_dir: Path,
    *,
    board: Leaderboard | None = None,
    registry: Registry | None = None,
    validate: bool = True,
    paper_dir: Path | None = None,
    verified: Mapping[str, Verification] | None = None,
) -> list[Path]:
    """Validate the submissions, then write the whole site to ``site_dir``; returns the HTML pages.

    ``site_dir`` is replaced as a whole; it must be absent, empty, or a site built before
    (it holds the marker file ``.xaibench-site``), so no other folder is ever deleted.
    ``board``: the leaderboard of these submissions when it is already built (its submissions
    are shown, so no file is read again). ``paper_dir``: the shared ``pasta-paper`` folder for
    the correlations page's human ratings section; ``None`` finds it from the environment
    (``XAIBENCH_DATA_DIR``, as ``--data-dir`` sets it, or ``XAIBENCH_DATA_PASTA_PAPER``), and the
    section says in one line when it is absent. ``verified``: the builder's own verification
    results by :func:`~xaibench.publish.board.content_digest`, for the board built here (a
    file's own ``verification`` block shows only as a claim); unused when ``board`` is given.
    """
    pages, files = site_contents(
        submissions_dir, board=board, registry=registry, validate=validate, paper_dir=paper_dir, verified=verified
    )
    return write_site(site_dir, pages, files)


def site_contents(
    submissions_dir: Path,
    *,
    board: Leaderboard | None = None,
    registry: Registry | None = None,
    validate: bool = True,
    paper_dir: Path | None = None,
    linked: str | None = None,
    verified: Mapping[str, Verification] | None = None,
) -> tuple[dict[str, Page], dict[str, str | bytes]]:
    """The site's pages and files (what :func:`xaibench.site.writer.write_site` and
    :func:`xaibench.site.writer.fill_site` write), from the submissions (see :func:`build_site`).
    ``linked``: the submissions folder's URL relative to the site's root; the site then links the
    submission files and overlays there, and the leaderboard files in its parent folder (the
    board folder it was written into by :func:`xaibench.site.board_folder.publish_board_folder`),
    instead of copying them."""
    if not submissions_dir.is_dir():
        raise XaibenchError(f"{submissions_dir}: no such submissions folder")
    files = sorted(submissions_dir.glob("*.json"))
    if validate:
        require_valid(files)
    subs = _board_submissions(board, files)
    if subs is None:
        subs = read_submissions(submissions_dir)
    board = board or build_board(subs, verified=verified)
    if registry is None:
        from xaibench.plugins.manager import get_registry

        registry = get_registry()
    shown, overlays = submitted(subs, board, submissions_dir, linked)
    copies: dict[str, str | bytes] = {}  # linked: the board folder's files and the submissions, in place
    if linked is None:
        copies = {
            "data/leaderboard.csv": to_csv(board.rows),
            "data/leaderboard.json": to_json(board),
            **{f"data/submissions/{s.slug}.json": s.raw for s in shown},
        }
    data: dict[str, str | bytes] = {**copies, **overlays}
    return _pages(board, shown, registry, paper_dir, BOARD_DATA if linked is None else LINKED_BOARD_DATA), data


def _board_submissions(board: Leaderboard | None, files: list[Path]) -> list[Submission] | None:
    """The board's submissions when they are exactly the folder's files, as read; else None."""
    if board is None:
        return None
    subs = list(getattr(board, "submissions", ()))
    if [s.path for s in subs] != files or any(s.raw is None for s in subs):
        return None
    return subs


def _pages(
    board: Leaderboard, subs: list[Submitted], registry: Registry, paper_dir: Path | None, board_data: str = BOARD_DATA
) -> dict[str, Page]:
    """Every page of the site: the overview, methodology and correlations, one page per submission;
    ``board_data``: where the leaderboard files are, relative to the site's root."""
    by_key = {s.key: s for s in subs}
    rules = board_rules(board)
    common = {
        "board_data": board_data,
        "subs": subs,
        "n_subs": len(subs),
        "files": [(s.download, s.path.name, s.sha256) for s in subs],
        "has_meta": board.meta is not None,  # the metrics page (xaibench meta's cards) is built
    }
    names = {s.key: (str(s.data["explainer"].get("name", s.key)), s.name) for s in subs}
    tracks = [track_view(board, t, by_key) for t in board.track_names()]
    track_files = place_tracks(tracks)
    corr_files = {t: f.replace("tracks/", "correlations/", 1) for t, f in track_files.items()}
    correlations = [correlation_view(board, t, k, corr_files.get(t)) for k, t in enumerate(board.track_names())]
    page_data = {
        "schema": LEADERBOARD_SCHEMA,
        "explainers": {s.key: {"name": s.name, "tuned": s.tuned, "reference": s.reference} for s in subs},
    }
    pages = {
        "index.html": Page(
            "index.html.j2",
            {
                "root": "",
                "page": "overview",
                "tracks": tracks,
                "split": bool(track_files),
                "overview": overview(board, by_key, track_files),
                "rules": rules,
                "page_data": page_data,
                **common,
            },
        ),
        "methodology.html": Page(
            "methodology.html.j2",
            {"root": "", "page": "methodology", "families": methodology(registry, subs), "rules": rules, **common},
        ),
        "correlations.html": Page(
            "correlations.html.j2",
            {
                "root": "",
                "page": "correlations",
                "tracks": correlations,
                "split": bool(track_files),
                "reference": PERCEPTUAL_REFERENCE,
                "human": human_ratings_section(board.rows, names, paper_dir),
                **common,
            },
        ),
    }
    for view in tracks:  # large boards: one page per track (views.tracks.place_tracks), and its correlations
        if view["name"] in track_files:
            pages[track_files[view["name"]]] = Page(
                "track.html.j2",
                {"root": "../", "page": "track", "t": view, "rules": rules, "page_data": page_data, **common},
            )
    for corr in correlations:
        if corr["name"] in corr_files:
            context = {"root": "../", "page": "correlations", "t": corr, "reference": PERCEPTUAL_REFERENCE, **common}
            pages[corr_files[corr["name"]]] = Page("correlation_track.html.j2", context)
    if board.meta is not None:  # the meta.json of xaibench meta applied to this board
        pages["metrics.html"] = Page(
            "metrics.html.j2",
            {
                "root": "",
                "page": "metrics",
                "meta_tracks": meta_tracks(board),
                "known_answer": known_answer_table(board),
                **common,
            },
        )
    for sub in subs:
        tracks = explainer_tracks(sub, board, by_key)
        pages[f"explainers/{sub.slug}.html"] = Page(
            "explainer.html.j2",
            {
                "root": "../",
                "page": "explainer",
                "sub": sub,
                "tracks": tracks,
                "chart_frames": chart_frames(tracks),
                "verification": verification_view(board, sub.key, sub),
                "flags": all_flags(board, sub.key),
                "highlight_legend": legend(),
                **common,
            },
        )
    return pages
