"""``xaibench meta``: :func:`xaibench.python_api.meta` (how far each metric can be trusted on each
track), then its cards and the known-answer tests printed as tables."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from xaibench.cli import output
from xaibench.cli.options import DATA_DIR_OPTION, _split, run_option
from xaibench.cli.output import fixed


@click.command("meta")
@click.option(
    "--suite",
    default=None,
    help="Run this suite first (name or FILE.toml; the cache and records of an earlier run are reused), "
    "then assess its tracks. Default: 'default', unless --submissions is given.",
)
@click.option(
    "--explainer",
    "-e",
    "explainers",
    multiple=True,
    default=("default",),
    show_default=True,
    help="Explainers the suite is run with (comma-separated or repeated).",
)
@click.option("--track", "tracks", multiple=True, help="Only these tracks (repeatable).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Use at most this many samples per track in the run and meta's own runs (as xaibench run --limit).",
)
@click.option(
    "--output-path",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Where the run writes (DIR/.xaibench, DIR/submissions, DIR/leaderboard) and meta goes (DIR/meta).",
)
@click.option(
    "--submissions",
    "submissions_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Assess this folder's submissions as they are (no run), unless --suite is given too.",
)
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="Folder for meta.json/csv."
)
@click.option("--seed", default=0, show_default=True, help="Seed of the run and of every resample.")
@click.option(
    "--consistency",
    type=click.Choice(["synthetic", "all", "none"]),
    default="synthetic",
    show_default=True,
    help="Tracks where noise resilience and adversarial reactivity (IAC, IEC, MC) are measured: 20 perturbed "
    "re-runs of the track each; 'synthetic' keeps to tracks with a synthetic model, cheap to re-run.",
)
@click.option(
    "--no-protocol",
    is_flag=True,
    help="Skip protocol sensitivity (each ranking metric re-scored under its documented settings).",
)
@DATA_DIR_OPTION
@run_option("progress")
def meta_(
    suite: str | None,
    explainers: tuple[str, ...],
    tracks: tuple[str, ...],
    limit: int | None,
    output_path: Path,
    submissions_dir: Path | None,
    out_dir: Path | None,
    seed: int,
    consistency: str,
    no_protocol: bool,
    data_dir: Path | None,
    quiet: bool,
) -> None:
    """How far each metric can be trusted on each track (DESIGN 9; docs/meta.md): rank stability
    under resampling, agreement between metrics, noise resilience and adversarial reactivity,
    verdicts; writes meta.json and meta.csv."""
    from xaibench.python_api import meta

    result = meta(
        _split(explainers),
        suite=suite,
        tracks=_split(tracks) or None,
        output_path=None if submissions_dir is not None and suite is None else output_path,
        submissions=submissions_dir,
        out=out_dir,
        seed=seed,
        data_dir=data_dir,
        consistency=consistency,
        progress=not quiet,
        protocol=not no_protocol,
        **({"limit": limit} if limit is not None else {}),
    )
    columns = ["track", "metric", "family", "verdict", "mean tau", "p05 tau", "P(top first)", "n for tau 0.9"]
    protocol = any(c.protocol is not None for t in result.tracks.values() for c in t.cards.values())
    table = Table(*columns, *(("protocol min tau", "cherry-pick") if protocol else ()), "MC")
    for track, track_meta in result.tracks.items():
        for name, card in track_meta.cards.items():
            s = card.stability
            n_for = str(s.n_for_tau) if s.n_for_tau is not None else f"> {s.n}"
            mc = fixed(card.consistency.mc) if card.consistency is not None else "-"
            cells = [track, name, card.family, card.verdict, fixed(s.mean_tau), fixed(s.p05_tau), fixed(s.p_top)]
            p = card.protocol
            measured = p is not None and not p.reason
            extra = [] if not protocol else [fixed(p.min_tau), str(p.cherry_pick)] if measured else ["", ""]
            table.add_row(*cells, n_for, *extra, mc)
    output.console.print(table)
    if result.known_answer:  # DESIGN 11: which proxy agrees with the known answer, per mechanism track
        known = Table("track", "proxy metric", "tau", "95 % interval", "verdict", "explainers", "samples")
        for k in result.known_answer:
            interval = "" if k.reason else f"[{fixed(k.low)}, {fixed(k.high)}]"
            known.add_row(
                k.track,
                k.metric,
                fixed(k.tau),
                interval,
                k.reason or k.verdict,
                str(len(k.explainers)),
                str(k.samples),
            )
        output.console.print(known)
    output.console.print(f"wrote {result.json_path} and {result.csv_path}")
