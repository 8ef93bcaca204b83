"""What a run returns (:class:`RunResults`): its summary, the files publishing wrote, this run's
board built in memory (:func:`run_board`), and its records and leaderboard as pandas DataFrames
(read on first use, :mod:`xaibench.results`). :func:`xaibench.run` fills one; the meta-evaluation
reads it (:mod:`xaibench.metaeval.pipeline`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pandas as pd

    from xaibench.plugins.manager import Registry
    from xaibench.publish.board import Leaderboard
    from xaibench.publish.record_bundle import JoinedRecord
    from xaibench.publish.shapes import RunSummary

__all__ = ["Published", "RunResults", "run_board", "run_record_ids"]


@dataclass
class Published:
    """What :func:`publish_leaderboard` wrote: the board, its files, and the site (if built)."""

    board: Any
    files: list[Path]
    site_dir: Path | None = None
    pages: list[Path] = field(default_factory=list)


@dataclass
class RunResults:
    """What :func:`run` returns.

    ``summary`` is the run summary (``<workdir>/summary.json``, ``xaibench.summary/1``);
    ``failed`` maps each track that could not be loaded to its error. ``submission_files``,
    ``leaderboard_files`` and ``site_dir`` are what publishing wrote (empty / ``None`` when
    nothing was published: no ``output_path``, ``submissions`` or ``leaderboard_dir``, or
    ``publish=False``). :attr:`board` ranks this run alone; :attr:`errors` and :attr:`warnings`
    say whether its answer can be read. :attr:`records` and :attr:`leaderboard` are read on first use.
    """

    summary: dict[str, Any]
    workdir: Path
    submissions_dir: Path | None = None
    submission_files: list[Path] = field(default_factory=list)
    leaderboard_dir: Path | None = None
    leaderboard_files: list[Path] = field(default_factory=list)
    site_dir: Path | None = None
    failed: dict[str, str] = field(default_factory=dict)
    published: Published | None = None
    """What publishing wrote (the board, its files, the site), ``None`` without a leaderboard."""
    board: Leaderboard | None = field(default=None, repr=False)
    """This run's board, built in memory: its explainers ranked on its tracks only (what
    ``xaibench run`` prints), against the record's submissions when it joined the record; the
    leaderboard files rank every submission of the folder."""
    record: JoinedRecord | None = None
    """The run of a suite with a record (``record-v1``) joined to it: the record's submissions
    written beside the run's, or the line saying why not (:mod:`xaibench.publish.record_bundle`)."""

    @property
    def errors(self) -> list[str]:
        """Why the run's answer cannot be read (e.g. a track mostly n/a), one line each; the
        command line prints them in red and exits 1 (:func:`xaibench.runner.health_lines`)."""
        from xaibench.runner import health_lines  # looked up at each call (tests replace it)

        return health_lines(self.summary)[0]

    @property
    def warnings(self) -> list[str]:
        """What to doubt in the answer (e.g. a model at chance on a track), one line each."""
        from xaibench.runner import health_lines

        return health_lines(self.summary)[1]

    @property
    def tracks(self) -> list[str]:
        """The tracks the run scored (those that failed to load are in :attr:`failed`)."""
        return [t for t, s in self.summary["tracks"].items() if "error" not in s]

    @property
    def wall_time_s(self) -> float:
        return float(self.summary["run"]["wall_time_s"])

    @cached_property
    def records(self) -> pd.DataFrame:
        """This run's per-sample records (columns: :data:`xaibench.results.RECORD_COLUMNS`): those
        of the workdir whose track, explainer (name, version, parameters), metric (id, version,
        parameters), sample, seed, model, dataset revision and runtime the summary names, so
        records that earlier runs left in the same workdir are not included."""
        from xaibench.results import records

        frame = records(self.workdir)
        wanted = run_record_ids(self.summary)
        if frame.empty:
            return frame
        ids = frame.apply(_record_id, axis=1)
        return frame[ids.isin(wanted)].reset_index(drop=True)

    @cached_property
    def leaderboard(self) -> pd.DataFrame | None:
        """The leaderboard rebuilt after the run, from every submission in ``submissions_dir``
        (columns: :data:`xaibench.results.LEADERBOARD_COLUMNS`); ``None`` when none was written."""
        from xaibench.results import leaderboard

        return leaderboard(self.leaderboard_dir) if self.leaderboard_files and self.leaderboard_dir else None

    def __repr__(self) -> str:
        run = self.summary.get("run", {})
        explainers = sorted({e for t in self.summary["tracks"].values() for e in t.get("explainers", {})})
        failed = f", failed={sorted(self.failed)}" if self.failed else ""
        return (
            f"RunResults(suite={run.get('suite')!r}, tracks={self.tracks}, explainers={explainers}, "
            f"seed={run.get('seed')}, wall_time_s={run.get('wall_time_s')}, workdir={str(self.workdir)!r}{failed})"
        )


def _record_id(row: Any) -> tuple[Any, ...]:
    return _identity(
        row["track"],
        row["explainer"],
        row["explainer_version"],
        row["explainer_params"],
        row["metric"],
        row["metric_version"],
        row["metric_params"],
        row["sample_id"],
        row["seed"],
        row["model"],
        row["dataset_revision"],
        row["torch"],
        row["torch_threads"],
        str(row["device"]).split(":")[0],
    )


def _identity(*parts: Any) -> tuple[Any, ...]:
    """A hashable identity: mappings as canonical JSON, integers as ``int``."""
    out = []
    for p in parts:
        if isinstance(p, Mapping):
            out.append(json.dumps(p, sort_keys=True, default=str))
        elif hasattr(p, "item") and not isinstance(p, str):  # numpy / pandas scalars
            out.append(p.item())
        else:
            out.append(p)
    return tuple(out)


def run_record_ids(summary: Mapping[str, Any]) -> set[tuple[Any, ...]]:
    """The identities of the records a run summary names (see :attr:`RunResults.records`)."""
    info = summary["run"]
    device_type = info.get("device_type") or str(info.get("device", "cpu")).split(":")[0]
    out: set[tuple[Any, ...]] = set()
    for track, block in summary["tracks"].items():
        if "error" in block:
            continue
        prov = block["provenance"]
        model, revision = prov["model"]["identity"], prov["dataset"]["revision"]
        for explainer in block["explainers"].values():
            x = explainer["explainer"]
            for metric, m in explainer["metrics"].items():
                for sample in m.get("samples", {}):
                    out.add(
                        _identity(
                            track,
                            x["name"],
                            x["version"],
                            x["params"],
                            metric,
                            m["version"],
                            m["params"],
                            sample,
                            info["seed"],
                            model,
                            revision,
                            info["torch"],
                            info["torch_threads"],
                            device_type,
                        )
                    )
    return out


def run_board(summary: Mapping[str, Any], registry: Registry, submission_files: Sequence[Path] = ()) -> Leaderboard:
    """This run's board: its explainers ranked on its tracks only (the cross-track win rates over
    those tracks), built in memory. From the submission files the run wrote when it published
    (their disclosure kept; the tracks of earlier runs left out), else from the summary alone, so
    ``--no-publish`` writes nothing for it."""
    from xaibench.publish.board import build_board
    from xaibench.publish.submission import build_submission, load_submission, submission_name

    tracks = {t for t, block in summary["tracks"].items() if "error" not in block}
    if submission_files:
        return build_board(
            (path, {**data, "tracks": {t: v for t, v in data["tracks"].items() if t in tracks}})
            for path, data in ((p, load_submission(p)) for p in submission_files)
        )
    blocks = {
        name: entry["explainer"] for t in sorted(tracks) for name, entry in summary["tracks"][t]["explainers"].items()
    }
    made = []
    for name, block in sorted(blocks.items()):
        path = Path(submission_name(registry, name, block))
        made.append((path, build_submission(cast("RunSummary", summary), name, None)))
    return build_board(made)
