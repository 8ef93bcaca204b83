"""Publishing a submissions folder: the leaderboard files and the static site, swapped in at once
(:func:`publish_leaderboard`; ``xaibench run`` after its run, ``xaibench leaderboard build``,
``xaibench meta`` and the record's board)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from xaibench.run_results import Published

if TYPE_CHECKING:
    from xaibench.plugins.manager import Registry

__all__ = ["publish_leaderboard"]


def publish_leaderboard(
    submissions: Path,
    board_dir: Path,
    site_dir: Path | None = None,
    *,
    with_site: bool = True,
    registry: Registry | None = None,
    meta: Path | None = None,
    linked: str | None = None,
) -> Published:
    """Validate every submission in ``submissions``, write the leaderboard files to ``board_dir``
    and, with ``with_site``, the static site (``site_dir``, default ``board_dir/site``), all
    swapped in at once (:func:`xaibench.site.board_folder.publish_board_folder`: a kill leaves
    the old folder or the new one, never a mix; a folder of other files is refused). Nothing
    is printed; ``xaibench run`` and ``xaibench leaderboard build`` print from what it returns.
    ``meta``: the ``meta.json`` of ``xaibench meta`` to apply (default: beside the submissions,
    :func:`xaibench.publish.board.meta_file`), only when it matches them (:mod:`xaibench.publish.gate`).
    ``linked``: the site links the submission files and overlays at that URL (relative to its root)
    instead of copying them (the record's site, beside its submissions)."""
    from xaibench.publish.board import build_leaderboard
    from xaibench.publish.validation import require_valid, submission_files
    from xaibench.site.board_folder import publish_board_folder

    require_valid(submission_files([submissions]))
    board = build_leaderboard(submissions, meta, keep_bytes=with_site)  # the site copies the files' bytes
    # the leaderboard files and the site land together: one staging folder swapped in whole
    written = publish_board_folder(
        board, submissions, board_dir, site_dir, with_site=with_site, registry=registry, linked=linked
    )
    published = Published(board=board, files=list(written.files))
    published.site_dir, published.pages = written.site_dir, list(written.pages)
    return published
