"""The steps of ``xaibench record board`` and ``xaibench record check`` around the board itself:
the validity tests run once and kept as data, the README beside the records that shows the
record's rows, and the whole check of the committed record (the command line prints their results)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xaibench.publish.validation import submission_files, validate_file
from xaibench.record.board import check_record_board
from xaibench.record.build import record_paths, unpinned_tracks
from xaibench.record.readme import START, readme_problem
from xaibench.suites.record import RECORD_SUITE, REVISIONS


def record_readme(root: Path) -> Path | None:
    """The README beside the records' folder ``root`` that shows the record's rows, if there is one."""
    readme = root.resolve().parent / "README.md"
    try:
        return readme if START in readme.read_text(encoding="utf-8") else None
    except OSError:
        return None


def run_validity_tests(
    root: Path,
    suite: str,
    *,
    data_dir: Path | None,
    threads: int,
    timeout: float,
    progress: bool,
    say: Callable[[str], None],
) -> Path:
    """``record board --tests``: the validity tests (the ladder on every alignment metric, the planted
    cue on the faithfulness metrics of a track whose model uses its cue) of the record of ``suite``
    in ``root``, run in its workdir and written to ``ROOT/<suite>/meta/validity.json``; returns that file."""
    from xaibench.record.validity import VALIDITY_NAME, compute_validity, write_validity

    paths = record_paths(suite, root)
    options = {"threads": threads, "timeout": timeout or None, "progress": progress}
    validity = compute_validity(
        paths.submissions, suite, paths.workdir / "meta", data_dir=data_dir, run_options=options, say=say
    )
    return write_validity(root / suite / "meta" / VALIDITY_NAME, validity, suite=suite, seed=0)


def record_problems(root: Path, suite: str, *, bundle_dir: Path | None) -> list[str]:
    """What is wrong with the committed record of ``suite`` in ``root``, one line each: a submission
    that does not validate or holds a track computed on another dataset than the suite pins, a meta
    or board (or the bundle in ``bundle_dir``) that its rebuild from the submissions does not
    reproduce byte for byte, a README whose rows are stale."""
    folder = root / suite
    files = submission_files([folder / "submissions"])
    problems = [str(issue) for path in files for issue in validate_file(path)]
    if suite == RECORD_SUITE:
        problems += [
            f"{path}: track {track} {why}: rerun xaibench record build"
            for path in files
            for track, why in unpinned_tracks(_tracks(path), REVISIONS).items()
        ]
    problems += check_record_board(folder, suite, bundle_dir=bundle_dir)
    readme = record_readme(root)
    if readme is not None and (problem := readme_problem(readme, folder, suite)) is not None:
        problems.append(problem)
    return problems


def _tracks(path: Path) -> dict[str, Any]:
    """The tracks of the submission file ``path`` (none when it does not read: its validation says why)."""
    try:
        tracks = json.loads(path.read_text(encoding="utf-8")).get("tracks")
    except (OSError, ValueError, AttributeError):
        return {}
    return tracks if isinstance(tracks, dict) else {}
