"""Results at the field's scale (issue 28): the record store, the leaderboard, the site, a submission.

Generates synthetic results with :mod:`xaibench.testing.scale` (nothing computes explanations),
then measures, each in a child process of its own (so its peak memory, ``ru_maxrss``, is its own):

- records: 50 explainers x 20 tracks x 40 metrics x 100 samples (4M records) written through
  ``RecordStore.append``: the store's size on disk; the time and peak memory of loading them all
  as a DataFrame (``xaibench.results.records``); the time for a run to start scoring with the store
  present (open a track's ``RecordStore`` and test a key, as the runner does per track); the time
  to summarise every (track, explainer, metric) as the runner does (``xaibench.stats.summarise``
  and ``distribution_summary``, after the stores are read);
- submissions: 50 explainers x 20 tracks x 30 metrics x 1000 samples: the time and peak memory
  of ``leaderboard build``'s Python path (``publish_leaderboard`` without the site) for the first
  10, 20 and 50 explainers; the site of the 50 (overview size, largest page, build time); one
  explainer's submission (20 tracks x 30 metrics x 1000 samples): its size and the time of
  ``submission validate`` (schema and consistency, recomputing every mean and interval;
  ``submission verify`` re-runs records and needs the real explainer).

Goals (printed beside the figures, at full scale): store <= 200 MB, load <= 10 s and 2 GB,
start <= 10 s, leaderboard of 50 <= 60 s and 2 GB, overview <= 2 MB, submission <= 10 MB.
``--scale s`` multiplies the tracks and samples (explainers and metrics stay), e.g. ``--scale 0.1``
for a quick run of 2 tracks; goals are for ``--scale 1``.

Run: ``.venv/bin/python bench/bench_scale.py [--scale 0.1] [--dir DIR] [--skip-records|--skip-board]``.
Generating the full-size data takes minutes (about 5.5 for the 50 submissions on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

RECORDS = {"tracks": 20, "explainers": 50, "metrics": 40, "samples": 100}
BOARD = {"tracks": 20, "explainers": 50, "metrics": 30, "samples": 1000}
BOARD_SIZES = (10, 20, 50)
MB = 1e6


def scaled(shape: dict[str, int], scale: float) -> dict[str, int]:
    """Tracks and samples times ``scale`` (at least 1 track and 8 samples: enough to rank)."""
    return {
        **shape,
        "tracks": max(1, round(shape["tracks"] * scale)),
        "samples": max(8, round(shape["samples"] * scale)),
    }


# ------------------------------------------------------------------------------ in the child


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB  # Linux: KiB


def child(step: str, args: dict[str, Any]) -> dict[str, Any]:
    """One measurement; returns its figures (seconds, MB). Each step imports only what it measures
    (the generator imports the runner and torch: 550 MB that reading records does not need)."""
    if step == "imports":  # the baseline: what importing the measured code costs before any data
        import xaibench.publish.validation
        import xaibench.python_api
        import xaibench.results
        import xaibench.runner.storage.store
        import xaibench.site

        return {"peak_mb": _peak_mb()}
    if step == "load-imports":  # the baseline of the load step: the results reader alone
        import xaibench.results  # noqa: F401

        return {"peak_mb": _peak_mb()}
    if step in ("gen-records", "gen-submissions"):
        from xaibench.testing.scale import ScaleData, ScaleSpec
    if step == "gen-records":
        start = time.perf_counter()
        n = ScaleData(ScaleSpec(**args["shape"])).write_records(Path(args["workdir"]))
        return {"seconds": time.perf_counter() - start, "records": n}
    if step == "gen-submissions":
        start = time.perf_counter()
        paths = ScaleData(ScaleSpec(**args["shape"])).write_submissions(Path(args["folder"]), only=args["only"])
        return {"seconds": time.perf_counter() - start, "files": [str(p) for p in paths]}
    if step == "load":  # curves=False: the `curve` column left None
        from xaibench.results import records

        start = time.perf_counter()
        frame = records(args["workdir"], curves=args.get("curves", True))
        return {"seconds": time.perf_counter() - start, "rows": len(frame), "peak_mb": _peak_mb()}
    if step == "start":
        from xaibench.runner.storage.store import RecordStore

        start = time.perf_counter()
        store = RecordStore(Path(args["workdir"]) / "results" / f"{args['track']}.jsonl")
        found = args["key"] in store
        return {"seconds": time.perf_counter() - start, "found": found, "peak_mb": _peak_mb()}
    if step == "summarise":
        return _summarise(Path(args["workdir"]), args["seed"])
    if step == "board":
        from xaibench.python_api import publish_leaderboard

        start = time.perf_counter()
        published = publish_leaderboard(Path(args["folder"]), Path(args["out"]), with_site=False)
        return {"seconds": time.perf_counter() - start, "rows": len(published.board.rows), "peak_mb": _peak_mb()}
    if step == "site":
        return _site(Path(args["folder"]), Path(args["out"]))
    if step == "validate":
        from xaibench.publish.validation import validate_file

        start = time.perf_counter()
        issues = validate_file(Path(args["file"]))
        return {"seconds": time.perf_counter() - start, "issues": len(issues), "peak_mb": _peak_mb()}
    raise SystemExit(f"bench_scale: unknown step {step!r}")


def _summarise(workdir: Path, seed: int) -> dict[str, Any]:
    """Every (track, explainer, metric) summarised as the runner's ``Runner.summarise`` does it."""
    from collections import defaultdict

    from xaibench.runner.distributions import distribution_summary
    from xaibench.runner.storage.store import RecordStore
    from xaibench.stats import summarise

    stores = [RecordStore(p) for p in sorted((workdir / "results").glob("*.jsonl"))]
    start = time.perf_counter()
    n = 0
    for store in stores:
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for record in store.records.values():
            groups[(record["track"], record["explainer"]["name"], record["metric"])].append(record)
        for (track, _explainer, _metric), group in groups.items():
            summarise(group, seed=seed, track=track)
            distribution_summary(group)
            n += 1
    return {"seconds": time.perf_counter() - start, "summaries": n, "peak_mb": _peak_mb()}


def _site(folder: Path, out: Path) -> dict[str, Any]:
    from xaibench.publish.board import build_leaderboard
    from xaibench.site import build_site

    board = build_leaderboard(folder)  # ranked again here (not timed): the site's own time follows
    start = time.perf_counter()
    pages = build_site(folder, out, board=board, validate=False)
    sizes = {str(p.relative_to(out)): p.stat().st_size for p in pages}
    biggest = max(sizes, key=sizes.__getitem__)
    return {
        "seconds": time.perf_counter() - start,
        "overview_bytes": sizes["index.html"],
        "pages": len(pages),
        "largest_page": biggest,
        "largest_bytes": sizes[biggest],
        "peak_mb": _peak_mb(),
    }


# ----------------------------------------------------------------------------- in the parent


def measure(step: str, **args: Any) -> dict[str, Any]:
    """Run ``step`` in a child process; its figures (it fails the bench with the child's error)."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", step, json.dumps(args)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench_scale: step {step} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def line(what: str, figure: str, goal: str = "") -> None:
    print(f"  {what:<44} {figure:>22}   {('goal ' + goal) if goal else ''}", flush=True)


def bench_records(root: Path, scale: float) -> None:
    shape = scaled(RECORDS, scale)
    workdir = root / "workdir"
    n = shape["tracks"] * shape["explainers"] * shape["metrics"] * shape["samples"]
    print(f"records: {shape['explainers']} explainers x {shape['tracks']} tracks x {shape['metrics']} metrics "
          f"x {shape['samples']} samples = {n:,}", flush=True)  # fmt: skip
    gen = measure("gen-records", shape=shape, workdir=str(workdir))
    line("generated and appended (RecordStore.append)", f"{gen['seconds']:.1f} s")
    line("store size on disk", f"{folder_bytes(workdir / 'results') / MB:.1f} MB", "<= 200 MB")
    load = measure("load", workdir=str(workdir))
    assert load["rows"] == n, load
    line("load all as a DataFrame (results.records)", f"{load['seconds']:.1f} s, {load['peak_mb']:.0f} MB",
         "<= 10 s, 2 GB")  # fmt: skip
    lean = measure("load", workdir=str(workdir), curves=False)
    line("  the same without the curves (curves=False)", f"{lean['seconds']:.1f} s, {lean['peak_mb']:.0f} MB",
         "<= 10 s, 2 GB")  # fmt: skip
    base = measure("load-imports")
    line("  (peak memory of importing the reader alone)", f"{base['peak_mb']:.0f} MB")
    key = _first_key(shape)
    start = measure("start", workdir=str(workdir), track="synth-00", key=key)
    assert start["found"], start
    line("run start: open a track's store, test a key", f"{start['seconds']:.2f} s, {start['peak_mb']:.0f} MB",
         "<= 10 s")  # fmt: skip
    summ = measure("summarise", workdir=str(workdir), seed=0)
    line(f"summarise {summ['summaries']:,} (track, explainer, metric)", f"{summ['seconds']:.1f} s")


def _first_key(shape: dict[str, int]) -> str:
    """A key of the first track's records, as a run would test it (the generator's first record)."""
    from xaibench.testing.scale import ScaleData, ScaleSpec

    return next(ScaleData(ScaleSpec(**shape)).records(0, 0))["key"]


def _index(path: Path, shape: dict[str, int]) -> int:
    """The explainer index of a generated submission file (the generator's order)."""
    from xaibench.testing.scale import explainer_names

    return explainer_names(shape["explainers"]).index(path.stem)


def bench_board(root: Path, scale: float) -> None:
    shape = scaled(BOARD, scale)
    subs = root / "submissions"
    print(f"leaderboard: {shape['explainers']} explainers x {shape['tracks']} tracks x {shape['metrics']} metrics "
          f"x {shape['samples']} samples", flush=True)  # fmt: skip
    start = time.perf_counter()
    jobs = max(1, min(os.cpu_count() or 1, 8))
    with ThreadPoolExecutor(jobs) as pool:  # one child process per share of the explainers
        shares = [list(range(k, shape["explainers"], jobs)) for k in range(jobs)]
        done = list(pool.map(lambda only: measure("gen-submissions", shape=shape, folder=str(subs), only=only), shares))
    files = sorted((Path(f) for d in done for f in d["files"]), key=lambda p: _index(p, shape))
    line(f"generated (the project's writer, {jobs} processes)", f"{time.perf_counter() - start:.1f} s")
    times = {}
    for n in BOARD_SIZES:
        if n > len(files):
            continue
        part = root / f"subs-{n}"
        part.mkdir()
        for f in files[:n]:
            os.link(f, part / f.name)
        board = measure("board", folder=str(part), out=str(root / f"board-{n}"))
        times[n] = board["seconds"]
        goal = "<= 60 s, 2 GB" if n == 50 else ""
        line(f"leaderboard build, {n} explainers", f"{board['seconds']:.1f} s, {board['peak_mb']:.0f} MB", goal)
    if len(times) > 1:
        first, last = min(times), max(times)
        line(f"time, {first} -> {last} explainers", f"x{times[last] / times[first]:.1f} for x{last / first:.1f}",
             "close to linear")  # fmt: skip
    site = measure("site", folder=str(subs), out=str(root / "site"))
    built = f"{site['seconds']:.1f} s, {site['peak_mb']:.0f} MB"
    line(f"site of {len(files)} explainers: {site['pages']} pages", built)
    line("site overview (index.html)", f"{site['overview_bytes'] / MB:.2f} MB", "<= 2 MB")
    line(f"largest page ({site['largest_page']})", f"{site['largest_bytes'] / MB:.2f} MB")
    one = files[0]
    val = measure("validate", file=str(one))
    assert val["issues"] == 0, val
    line(f"one submission ({shape['tracks']} x {shape['metrics']} x {shape['samples']})",
         f"{one.stat().st_size / MB:.2f} MB", "<= 10 MB")  # fmt: skip
    line("its validation (submission validate)", f"{val['seconds']:.1f} s, {val['peak_mb']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="tracks and samples times this (default 1)")
    parser.add_argument("--dir", type=Path, help="where the generated data go (kept); default a temporary folder")
    parser.add_argument("--skip-records", action="store_true", help="only the leaderboard, site and submission")
    parser.add_argument("--skip-board", action="store_true", help="only the record store")
    parser.add_argument("--child", nargs=2, metavar=("STEP", "ARGS"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(child(opts.child[0], json.loads(opts.child[1]))))
        return
    if not 0 < opts.scale <= 1:
        parser.error(f"--scale must be in (0, 1], got {opts.scale}")
    root = opts.dir or Path(tempfile.mkdtemp(prefix="xaibench-bench-scale-"))
    if opts.dir and opts.dir.exists() and any(opts.dir.iterdir()):
        parser.error(f"--dir {opts.dir}: not empty (give a new or empty folder)")
    root.mkdir(parents=True, exist_ok=True)
    print(f"bench_scale --scale {opts.scale} in {root} (goals are for --scale 1)", flush=True)
    line("peak memory of the imports alone (baseline)", f"{measure('imports')['peak_mb']:.0f} MB")
    try:
        if not opts.skip_records:
            bench_records(root, opts.scale)
        if not opts.skip_board:
            bench_board(root, opts.scale)
    finally:
        if opts.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
