"""Size of the committed record with JPEG overlays and scalar arrays on one line (issue 41).

The record of record (``record/record-v1/``: submissions, overlay assets, meta, board and static
site) must stay at most 50 MB. This copies a record folder (default: the repository's own
``record/record-v1``; the source is only read) to a temporary folder, then

- re-encodes every overlay PNG under ``submissions/assets/`` as the JPEG ``xaibench run`` now
  writes (:func:`xaibench.publish.examples.jpeg_bytes`: quality 85, optimised, baseline), named
  ``<k>-<sample id>.jpg``, and points each submission's example entry at it (``jpeg`` and its
  ``sha256`` in place of ``png``);
- rewrites every submission with :func:`xaibench.files.dumps_readable` (arrays of scalars on one
  line) and checks that it parses to the same data (but for the example entries);
- leaves the leaderboard, its site and ``meta/`` as they are,

and prints the size of each part before and after, in MB (10^6 bytes of file contents, not disk
blocks): the submission files, the overlay assets, the site's explainer pages, the rest of the
site, the leaderboard files beside the site, and ``meta/``; then a projection to ``--explainers``
explainers (39: the record's full set). Per-explainer parts (submissions, assets, explainer
pages) are scaled by explainers / submissions now; the board's and meta's parts by the same
factor, an upper bound (their tables grow with the explainers, their fixed parts do not).
``--validate`` also validates every rewritten submission with its overlays (slow: every summary
is recomputed).

Run: ``.venv/bin/python bench/bench_record_size.py [--record record/record-v1] [--explainers 39] [--validate]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from xaibench.files import dumps_readable
from xaibench.publish.examples import jpeg_bytes

REPO = Path(__file__).resolve().parents[1]
PARTS = ("submissions", "assets", "explainer pages", "rest of the site", "leaderboard", "meta")
PER_EXPLAINER = ("submissions", "assets", "explainer pages")


def part_of(rel: Path) -> str | None:
    """The part of the record a file (relative to the record folder) belongs to."""
    top = rel.parts[0]
    if top == "submissions":
        return "assets" if len(rel.parts) > 1 and rel.parts[1] == "assets" else "submissions"
    if top == "meta":
        return "meta"
    if top == "leaderboard":
        if len(rel.parts) > 1 and rel.parts[1] == "site":
            return "explainer pages" if len(rel.parts) > 2 and rel.parts[2] == "explainers" else "rest of the site"
        return "leaderboard"
    return None


def sizes(record: Path) -> dict[str, int]:
    """Bytes per part (files outside the parts are counted under ``other``)."""
    out = dict.fromkeys((*PARTS, "other"), 0)
    for path in record.rglob("*"):
        if path.is_file():
            out[part_of(path.relative_to(record)) or "other"] += path.stat().st_size
    return out


def to_jpeg(submissions: Path, example: dict[str, Any]) -> None:
    """Re-encode the example's PNG as the run's JPEG, beside it, and point the entry at it."""
    png = submissions / example["png"]
    with Image.open(png) as image:
        pixels = np.asarray(image.convert("RGB"))
    data = jpeg_bytes(pixels)
    jpg = png.with_suffix(".jpg")
    jpg.write_bytes(data)
    png.unlink()
    rel, digest = jpg.relative_to(submissions).as_posix(), hashlib.sha256(data).hexdigest()
    new = {"png": ("jpeg", rel), "sha256": ("sha256", digest)}
    entry = dict(new.get(k, (k, v)) for k, v in example.items())  # the key order kept, png renamed jpeg
    example.clear()
    example.update(entry)


def rewrite(record: Path) -> tuple[int, int, int]:
    """Rewrite the copy in place; returns (submissions, overlays re-encoded, PNG files left)."""
    submissions = record / "submissions"
    files = sorted(submissions.glob("*.json"))
    overlays = 0
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        before = json.loads(json.dumps(data))
        for track in data.get("tracks", {}).values():
            for example in track.get("examples", []):
                if "png" in example:
                    to_jpeg(submissions, example)
                    overlays += 1
        text = dumps_readable(data) + "\n"
        assert json.loads(text) == data, path
        assert _without_examples(json.loads(text)) == _without_examples(before), path
        path.write_text(text, encoding="utf-8")
    left = sum(1 for _ in (submissions / "assets").rglob("*.png")) if (submissions / "assets").is_dir() else 0
    return len(files), overlays, left


def _without_examples(data: dict[str, Any]) -> dict[str, Any]:
    tracks = {k: {kk: vv for kk, vv in t.items() if kk != "examples"} for k, t in data.get("tracks", {}).items()}
    return {**data, "tracks": tracks}


def table(rows: list[tuple[str, float, float]], head: tuple[str, str, str]) -> str:
    lines = [f"  {'part':<18} {head[1]:>10} {head[2]:>10}"]
    lines += [f"  {name:<18} {a:>10.2f} {b:>10.2f}" for name, a, b in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, default=REPO / "record" / "record-v1", help="the record folder to copy")
    parser.add_argument("--explainers", type=int, default=39, help="projection to this many explainers")
    parser.add_argument("--validate", action="store_true", help="validate every rewritten submission")
    args = parser.parse_args()
    source: Path = args.record.resolve()
    if not (source / "submissions").is_dir():
        parser.error(f"{source}: no submissions/ folder; pass --record")
    mb: Callable[[int], float] = lambda n: n / 1e6  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="xaibench-record-size-") as tmp:
        copy = Path(tmp) / source.name
        shutil.copytree(source, copy, symlinks=True)
        before = sizes(copy)
        n, overlays, left = rewrite(copy)
        after = sizes(copy)
        if args.validate:
            from xaibench.publish.validation import validate_file

            problems = [str(i) for p in sorted((copy / "submissions").glob("*.json")) for i in validate_file(p)]
            print(f"validated {n} rewritten submissions: {len(problems)} problems")
            for line in problems[:10]:
                print(f"  {line}")
    factor = args.explainers / n
    print(f"record: {source} ({n} submissions, {overlays} overlays re-encoded, {left} PNG files left)")
    rows = [(p, mb(before[p]), mb(after[p])) for p in PARTS]
    if before["other"] or after["other"]:
        rows.append(("other", mb(before["other"]), mb(after["other"])))
    rows.append(("total", mb(sum(before.values())), mb(sum(after.values()))))
    print("size in MB (10^6 bytes), site and meta as they are:")
    print(table(rows, ("part", "before", "after")))
    print(f"projected to {args.explainers} explainers (x {factor:.2f}; board and meta parts: an upper bound):")
    projected = [(p, mb(before[p]) * factor, mb(after[p]) * factor) for p in PARTS]
    projected.append(("total", sum(r[1] for r in projected), sum(r[2] for r in projected)))
    print(table(projected, ("part", "before", "after")))
    fixed_after = sum(mb(after[p]) for p in PARTS if p not in PER_EXPLAINER)
    tight = sum(mb(after[p]) * factor for p in PER_EXPLAINER) + fixed_after
    print(f"  after, with the board and meta parts kept at today's size (a lower bound): {tight:.2f}")


if __name__ == "__main__":
    main()
