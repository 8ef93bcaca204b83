"""The leaderboard folder written whole: the leaderboard files and the site land together.

:func:`publish_board_folder` writes ``leaderboard.csv/.json/.md`` and, when the site lies in the
folder (the default ``OUT/site``, or any ``OUT/<name>``), the site into one staging folder beside
the output (``.<name>.<pid>.<random>.staging``), then puts it in place of the output folder in
one step (:func:`xaibench.files.replace_folder`). A kill at any point leaves the complete old
folder or the complete new one, never the new CSV beside the old site; on Linux the swap is one
``renameat2(RENAME_EXCHANGE)`` and the folder is never missing, elsewhere a kill between the two
renames leaves it under an aside name, restored by the next build. The next build first removes
the staging folders of dead processes (:func:`xaibench.files.remove_stale_siblings`).

The folder is xaibench's: it is replaced only when it is absent, empty, or holds nothing but
what xaibench writes there (the leaderboard files, folders holding the site marker
``.xaibench-site``, leftovers of killed writes); a folder with anything else is refused in one
line, so no user file is ever deleted. A site outside the folder is replaced whole on its own,
after it (two folders cannot change in one step). Without the site (``with_site=False``) the new
folder holds only the leaderboard files: an earlier site in it is removed with the old folder.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from xaibench.errors import XaibenchError
from xaibench.files import is_leftover, make_staging_dir, named, remove_stale_siblings, replace_folder
from xaibench.plugins.manager import Registry
from xaibench.publish.board import Leaderboard
from xaibench.publish.writers import LEADERBOARD_FILES, leaderboard_texts


@dataclass
class BoardFolder:
    """What :func:`publish_board_folder` wrote: the leaderboard files, the site folder and its pages."""

    files: list[Path]
    site_dir: Path | None = None
    pages: list[Path] = field(default_factory=list)


def _absolute(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _is_site(path: Path) -> bool:
    from xaibench.site.writer import MARKER

    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def check_board_dir(board_dir: Path) -> None:
    """Refuse (one line) a leaderboard folder that holds anything xaibench did not write there."""
    if board_dir.exists() and not board_dir.is_dir():
        raise XaibenchError(f"{board_dir}: is a file, not a folder; pass a folder")
    if not board_dir.is_dir():
        return
    for entry in sorted(board_dir.iterdir()):
        name = entry.name
        ours = (name in LEADERBOARD_FILES and entry.is_file()) or _is_site(entry) or is_leftover(entry)
        if not ours:
            raise XaibenchError(
                f"{board_dir}: holds {name!r}, which xaibench did not write; the leaderboard folder is "
                "replaced as a whole, so pass a new or empty folder (or move it out)"
            )


def _site_place(board_dir: Path, site_dir: Path) -> str | None:
    """The site's name inside the leaderboard folder, or None when it lies outside; refuses the
    nestings that cannot be written whole."""
    board, site = _absolute(board_dir), _absolute(site_dir)
    if site == board or board.is_relative_to(site):
        raise XaibenchError(f"{site_dir}: the site folder cannot hold the leaderboard folder {board_dir}")
    if not site.is_relative_to(board):
        return None
    rel = site.relative_to(board)
    if len(rel.parts) != 1:
        raise XaibenchError(f"{site_dir}: a site inside {board_dir} must be one of its folders (e.g. {board_dir}/site)")
    return rel.parts[0]


def publish_board_folder(
    board: Leaderboard,
    submissions_dir: Path,
    board_dir: Path,
    site_dir: Path | None = None,
    *,
    with_site: bool = True,
    registry: Registry | None = None,
    paper_dir: Path | None = None,
    linked: str | None = None,
) -> BoardFolder:
    """Write the leaderboard files of ``board`` and, with ``with_site``, its site (``site_dir``,
    default ``board_dir/site``) as one folder replacing ``board_dir`` whole (module docstring).
    The submissions are not validated again (the caller validated them before ranking). ``linked``:
    the site links the submission files and overlays in place at that URL (relative to the site's
    root), and the leaderboard files in ``board_dir``, instead of copying them (the record's site);
    the site must then be one of ``board_dir``'s folders."""
    from xaibench.site.writer import check_site_dir, fill_site, write_site

    site = (site_dir or board_dir / "site") if with_site else None
    inside = _site_place(board_dir, site) if site is not None else None
    if linked is not None and site is not None and inside is None:
        raise XaibenchError(f"{site}: a site that links its data must lie in the leaderboard folder {board_dir}")
    check_board_dir(board_dir)
    if site is not None and inside is None:
        check_site_dir(site)
    contents = None  # the site's pages are built only where a site is written (about half a build's time)
    if site is not None:
        from xaibench.site.build import site_contents  # imports torch (the PASTA figures): only for a site

        contents = site_contents(
            submissions_dir, board=board, registry=registry, validate=False, paper_dir=paper_dir, linked=linked
        )
    target = _absolute(board_dir)  # a symlinked folder: replace what it points to, keep the link
    remove_stale_siblings(target)
    staging = make_staging_dir(target)
    try:
        for name, text in leaderboard_texts(board).items():
            try:
                (staging / name).write_text(text, encoding="utf-8")
            except OSError as exc:  # e.g. a full disk: name the file the user asked for
                raise named(exc, board_dir / name) from None
        if contents is not None and inside is not None:
            fill_site(staging / inside, *contents)
        replace_folder(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    written = BoardFolder(files=[board_dir / name for name in LEADERBOARD_FILES])
    if site is not None and contents is not None:
        pages = write_site(site, *contents) if inside is None else [site / p for p in sorted(contents[0])]
        written.site_dir, written.pages = site, pages
    return written
