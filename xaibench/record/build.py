"""The leaderboard of record (DESIGN 10): regenerate it, resumably, one explainer at a time.

The record of a suite version lives in ``record/<suite>/`` (:func:`record_paths`), apart from
what runs write:

- ``submissions/``: one submission per installed explainer, default parameters, seed 0, in the
  compact format, with example overlays (``assets/``) on the synthetic tracks and ``photos`` only
  (no render of a ``shared/data`` image is committed);
- ``meta/`` and ``leaderboard/``: the meta-evaluation and the board built from the submissions.

:func:`build_record` computes only what is missing: an explainer whose submission already holds
every track of the suite is skipped, and one that lacks some tracks runs on those alone (adding
an explainer computes only that explainer; a track whose dataset pin changed, such as a new sample
count, is recomputed for every explainer and the rest kept). Its runs go to an ignored workdir
(``.xaibench/record/<suite>/``: records, explanation cache), so a killed regeneration resumes
where it stopped, and each finished explainer's submission is written atomically at once (the
unit that is committed between sessions). Progress is one line per explainer with the time so far
and an estimate of what is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaibench.errors import XaibenchError
from xaibench.plugins.manager import Registry, get_registry
from xaibench.publish.submission import load_submission, submission_filename, write_run
from xaibench.runner import API, DEFAULT_EXECUTOR, Runner, data_dir, make_run_config, resolve_explainers
from xaibench.safe_names import checked_name
from xaibench.suites.record import RECORD_SUITE, RECORD_TRACKS, REVISIONS, Pinned, missing_tracks

__all__ = ["RecordPaths", "RecordProgress", "build_record", "missing_work", "record_paths", "unpinned_tracks"]

RECORD_ROOT = Path("record")
"""Where records live, relative to the repository root (the folder xaibench runs in)."""
RECORD_SEED = 0
"""Every submission of the record is seed 0 (DESIGN 10)."""
RECORD_EXAMPLES = 2
"""Example overlays per (track, explainer) in the record (the runs' default is 4): each was a 224 px
PNG of about 37 kB and is now a JPEG of about 6.5 kB (``bench/bench_record_size.py``: the first 20
explainers' 330 overlays, 12.3 MB as PNG, 2.1 MB as JPEG), of the record's 50 MB; two show the
explainer as well."""


@dataclass(frozen=True)
class RecordPaths:
    """Where one suite version's record keeps its submissions, and the ignored workdir that computes it."""

    submissions: Path
    workdir: Path


def record_paths(suite: str = RECORD_SUITE, root: Path = RECORD_ROOT, workdir: Path | None = None) -> RecordPaths:
    """The record of ``suite`` under ``root`` (``record/<suite>/``); ``workdir`` defaults to
    ``.xaibench/record/<suite>`` beside ``root`` (ignored by git, like every run's output)."""
    base = root / checked_name(suite, kind="suite")
    work = workdir if workdir is not None else root.parent / ".xaibench" / "record" / suite
    return RecordPaths(base / "submissions", work)


def missing_work(
    submissions: Path,
    explainer: str,
    tracks: Sequence[str],
    suite: str = RECORD_SUITE,
    limit: int | None = None,
    pins: Mapping[str, Pinned] | None = None,
    version: str | None = None,
) -> list[str]:
    """The tracks of ``tracks`` that ``explainer``'s record submission (default parameters, in
    ``submissions``) does not hold yet; all of them when it has none, or one of another suite,
    seed or sample limit, or (``version``: the installed explainer's) of another explainer version
    (it is then rewritten whole). With ``pins`` (track -> the dataset
    revision and sample count the suite pins), a track held at another revision or sample count
    (a pin that changed since it was computed) is missing too, and is recomputed alone."""
    path = submissions / submission_filename(explainer, "", default_params=True)
    if not path.exists():
        return list(tracks)
    data = load_submission(path)
    if data.get("suite") != suite or data.get("seed") != RECORD_SEED or data.get("run", {}).get("limit") != limit:
        return list(tracks)
    if version is not None and data.get("explainer", {}).get("version") != version:
        return list(tracks)
    have = data.get("tracks", {})
    stale = unpinned_tracks(have, pins or {})
    return [t for t in tracks if t not in have or t in stale]


def unpinned_tracks(tracks: Mapping[str, Any], pins: Mapping[str, Pinned]) -> dict[str, str]:
    """The tracks of a submission's ``tracks`` that were not computed on the dataset ``pins`` names
    for them (another revision or sample count), each with one line saying what differs."""
    out: dict[str, str] = {}
    for name, track in tracks.items():
        pin = pins.get(name)
        provenance = (track.get("provenance") if isinstance(track, Mapping) else None) or {}
        revision = (provenance.get("dataset") or {}).get("revision")
        if pin is not None and (revision, provenance.get("n_samples")) != (pin.revision, pin.samples):
            out[name] = (
                f"computed on dataset revision {revision} ({provenance.get('n_samples')} samples); "
                f"the suite pins {pin.revision} ({pin.samples} samples)"
            )
    return out


@dataclass
class RecordProgress:
    """What :func:`build_record` did: explainers run (with their seconds), skipped, and failed."""

    ran: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def build_record(
    *,
    explainers: Sequence[str] = ("all",),
    suite: str = RECORD_SUITE,
    tracks: Sequence[str] | None = None,
    paths: RecordPaths | None = None,
    data: Path | None = None,
    executor: str = DEFAULT_EXECUTOR,
    workers: int = 1,
    threads: int = 2,
    timeout: float | None = 300.0,
    limit: int | None = None,
    progress: bool = True,
    say: Callable[[str], None] = print,
    registry: Registry | None = None,
) -> RecordProgress:
    """Compute what the record of ``suite`` lacks for ``explainers`` (``all``: every installed
        one), one explainer at a time, writing each one's submission into ``paths.submissions`` as
        soon as it is done. ``tracks`` restricts the tracks (default: every track of the suite, all of
        which must be found: the real ones under ``data``). ``limit``: at most this many samples per
    track, for a trial (the record uses every sample). ``say`` prints the progress lines."""
    registry = registry or get_registry()
    paths = paths or record_paths(suite)
    out = RecordProgress()
    with data_dir(data, API):
        wanted = [t.spec.name for t in RECORD_TRACKS if tracks is None or t.spec.name in tracks]
        unknown = [t for t in tracks or () if t not in {r.spec.name for r in RECORD_TRACKS}]
        if unknown:
            raise XaibenchError(
                f"{suite} has no track {unknown[0]!r}; it has {', '.join(t.spec.name for t in RECORD_TRACKS)}"
            )
        absent = [t for t in missing_tracks() if t in wanted]
        if absent:
            raise XaibenchError(
                f"the record of {suite} needs the data of {', '.join(absent)}: pass --data-dir (docs/datasets.md)"
            )
        real = {t.spec.name for t in RECORD_TRACKS if t.real}
        names = resolve_explainers(registry, list(explainers))
        pins = REVISIONS if suite == RECORD_SUITE and limit is None else None
        todo = [
            (n, missing_work(paths.submissions, n, wanted, suite, limit, pins, registry.info("explainer", n).version))
            for n in names
        ]
        todo = [(n, m) for n, m in todo if m]
        out.skipped = [n for n in names if n not in {n for n, _ in todo}]
        say(f"record {suite}: {len(names)} explainers, {len(out.skipped)} complete, {len(todo)} to compute")
        paths.submissions.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        for i, (name, missing) in enumerate(todo, 1):
            say(f"[{i}/{len(todo)}] {name}: {', '.join(missing)}")
            t0 = time.monotonic()
            try:
                config = make_run_config(
                    [name],
                    suite=suite,
                    tracks=missing,
                    seed=RECORD_SEED,
                    limit=limit,
                    examples=RECORD_EXAMPLES,
                    workdir=paths.workdir,
                    timeout=timeout,
                    threads=threads,
                    workers=workers,
                    executor=executor,
                    progress=progress,
                )
                with Runner(config, registry) as runner:
                    result = runner.run()
            except XaibenchError as exc:
                out.failed[name] = str(exc)
                say(f"[{i}/{len(todo)}] {name} failed: {exc}")
                continue
            # overlays of the synthetic tracks and photos only: shared data is never rendered into the record
            result.examples = [e for e in result.examples if e.track not in real]
            write_run(result, registry, paths.submissions)
            out.ran[name] = time.monotonic() - t0
            elapsed = time.monotonic() - started
            left = elapsed / i * (len(todo) - i)
            say(
                f"[{i}/{len(todo)}] {name} done in {out.ran[name]:.0f} s; "
                f"{elapsed:.0f} s so far, about {left:.0f} s left"
            )
    return out
