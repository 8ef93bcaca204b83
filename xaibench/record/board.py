"""The record's meta-evaluation and board, built from its committed files alone (DESIGN 10).

``record/<suite>/`` holds, beside ``submissions/``:

- ``meta/validity.json``: the validity tests' verdicts (:mod:`xaibench.record.validity`: the
  ladder and the planted cue, run once per suite version by ``xaibench record board --tests``);
- ``meta/meta.json`` and ``meta/meta.csv``: the meta-evaluation of the submissions (rank
  stability under resampling, agreement, the validity verdicts; no consistency or protocol
  re-runs: those re-run every explainer), ``created`` being the latest submission's, so that a
  rebuild writes the same bytes;
- ``leaderboard/``: the board's files and its site, with the meta gate applied.

:func:`build_record_board` writes all of them from the submissions and ``validity.json``: no
model runs, the same bytes on every machine (the site is built without the shared data's PASTA
paper tables, which are the data folder's, not the record's). :func:`check_record_board` rebuilds
them into a scratch folder and names each file that differs from the committed one: CI's check.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from xaibench.errors import XaibenchError
from xaibench.metaeval.submissions import meta_of_submissions
from xaibench.publish.record_bundle import BUNDLE_DIR, bundle_file, make_bundle, read_bundle, write_bundle
from xaibench.publish.submission import read_submissions
from xaibench.record.validity import VALIDITY_NAME, read_validity

__all__ = ["RecordBoard", "build_record_board", "check_record_board", "record_created"]

META_FOLDER, BOARD_FOLDER, SUBMISSIONS_FOLDER = "meta", "leaderboard", "submissions"
_DATA_ENV = ("XAIBENCH_DATA_DIR", "XAIBENCH_DATA_PASTA_PAPER")
SITE_LINK = "../../submissions/"
"""The record's site (``leaderboard/site/``) links its submissions and overlays in place rather than
copying them: the record would otherwise hold each file twice (about 20 MB for 39 explainers)."""


@dataclass(frozen=True)
class RecordBoard:
    """What :func:`build_record_board` wrote: ``meta.json`` and the board's folder."""

    meta_json: Path
    board_dir: Path
    bundle: Path | None = None


def record_created(submissions: Path) -> str:
    """The latest ``created`` of the record's submissions: the time its meta names."""
    times = [str(s.data.get("created", "")) for s in read_submissions(submissions, keep_bytes=False)]
    times = [t for t in times if t]
    if not times:
        raise XaibenchError(f"{submissions}: no submissions to build the record's board from")
    return max(times)


@contextmanager
def _without_data_folder() -> Iterator[None]:
    """The environment without the data folder's variables, restored afterwards: the record's
    site never shows tables of ``shared/data`` and does not change with where it is."""
    saved = {k: os.environ.pop(k) for k in _DATA_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def build_record_board(folder: Path, suite: str, *, seed: int = 0, bundle_dir: Path | None = None) -> RecordBoard:
    """Write the meta-evaluation and the board of the record in ``folder`` (``record/<suite>``):
    ``meta/meta.json``, ``meta/meta.csv`` and ``leaderboard/`` with its site, from
    ``folder/submissions`` and ``folder/meta/validity.json`` (absent: every metric's validity is
    untested, which the gate reads as it reads any); and the bundle that travels with the
    package into ``bundle_dir`` (:mod:`xaibench.publish.record_bundle`: ``xaibench record board``
    passes the package's :data:`~xaibench.publish.record_bundle.BUNDLE_DIR`; ``None``, the default:
    not written)."""
    from xaibench.python_api import publish_leaderboard

    submissions = folder / SUBMISSIONS_FOLDER
    if not submissions.is_dir():
        raise XaibenchError(f"{submissions}: no such folder (the record's submissions)")
    target = folder
    validity_file = folder / META_FOLDER / VALIDITY_NAME
    validity = read_validity(validity_file, suite) if validity_file.is_file() else None
    created = record_created(submissions)
    result = meta_of_submissions(submissions, target / META_FOLDER, seed=seed, validity=validity, created=created)
    with _without_data_folder():
        publish_leaderboard(submissions, target / BOARD_FOLDER, with_site=True, meta=result.json_path, linked=SITE_LINK)
    bundle = write_bundle(bundle_file(suite, bundle_dir), make_bundle(submissions, suite)) if bundle_dir else None
    return RecordBoard(result.json_path, target / BOARD_FOLDER, bundle)


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()}


def check_record_board(folder: Path, suite: str, *, seed: int = 0, bundle_dir: Path | None = BUNDLE_DIR) -> list[str]:
    """Rebuild the record's meta and board into a scratch folder and compare them, file by file,
    with those committed in ``folder``, and the package's bundle (in ``bundle_dir``; ``None``: not
    checked) with the one the submissions make: one line per file that differs, is missing or is
    extra (empty: byte-identical)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="xaibench-record-check-") as tmp:
        scratch = Path(tmp) / folder.name
        shutil.copytree(folder / SUBMISSIONS_FOLDER, scratch / SUBMISSIONS_FOLDER)
        validity = folder / META_FOLDER / VALIDITY_NAME
        if validity.is_file():
            (scratch / META_FOLDER).mkdir(parents=True)
            shutil.copyfile(validity, scratch / META_FOLDER / VALIDITY_NAME)
        build_record_board(scratch, suite, seed=seed, bundle_dir=None)
        for part in (META_FOLDER, BOARD_FOLDER):
            built, committed = scratch / part, folder / part
            have = _files(committed) if committed.is_dir() else set()
            want = _files(built) - ({Path(VALIDITY_NAME)} if part == META_FOLDER else set())
            have -= {Path(VALIDITY_NAME)} if part == META_FOLDER else set()
            for rel in sorted(want - have):
                problems.append(f"{committed / rel}: missing (the rebuild writes it)")
            for rel in sorted(have - want):
                problems.append(f"{committed / rel}: not written by the rebuild")
            for rel in sorted(want & have):
                if not filecmp.cmp(built / rel, committed / rel, shallow=False):
                    problems.append(f"{committed / rel}: differs from its rebuild from the submissions")
    if bundle_dir is not None:
        shipped = bundle_file(suite, bundle_dir)
        try:
            same = read_bundle(suite, bundle_dir) == json.loads(
                json.dumps(make_bundle(folder / SUBMISSIONS_FOLDER, suite))
            )
        except XaibenchError as exc:
            problems.append(str(exc))
        else:
            if not shipped.is_file():
                problems.append(f"{shipped}: missing (xaibench record board writes it)")
            elif not same:
                problems.append(f"{shipped}: differs from the bundle of {folder / SUBMISSIONS_FOLDER}")
    return problems
