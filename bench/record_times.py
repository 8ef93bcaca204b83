"""The wall time of a record build, from its logs: each explainer's seconds and share of the whole.

Reads the progress lines ``[i/n] NAME done in S s; ...`` that ``xaibench record build`` prints
(``bench/record_regenerate.sh`` appends them to ``DIR.log``, then a line for the validity tests,
meta and board that follow the build); a build resumed across sessions
has one log or several, read in the order given (an explainer finished twice counts its last
time). Prints one row per explainer, slowest first, then the total in hours and how many
explainers the logs finish. Interrupted work (an explainer killed before its ``done`` line) is
not in any line: the total is the finished explainers' time.

Run: ``.venv/bin/python bench/record_times.py LOG [LOG ...] [--explainers 39]``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DONE = re.compile(r"^\[\d+/\d+\] (?P<name>\S+) done in (?P<seconds>\d+(?:\.\d+)?) s")
AFTER_BUILD = "validity tests and board"
"""The step bench/record_regenerate.sh times after the build (its line: ``<step> done in S s``)."""
AFTER = re.compile(rf"^(?P<name>{AFTER_BUILD}) done in (?P<seconds>\d+(?:\.\d+)?) s")


def finished(logs: list[Path]) -> dict[str, float]:
    """Seconds of every explainer the logs finish, the last log's time where several do."""
    seconds: dict[str, float] = {}
    for log in logs:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if match := DONE.match(line) or AFTER.match(line):
                seconds[match["name"]] = float(match["seconds"])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--explainers", type=int, default=None, help="explainers of the record (for 'k of N')")
    args = parser.parse_args()
    missing = [str(log) for log in args.logs if not log.is_file()]
    if missing:
        raise SystemExit(f"no such log: {', '.join(missing)}")
    seconds = finished(args.logs)
    if not seconds:
        raise SystemExit(f"no 'done in' line in {', '.join(map(str, args.logs))}")
    total = sum(seconds.values())
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{name:<24} {s:>7.0f} s  {100 * s / total:5.1f} %")
    of = f" of {args.explainers}" if args.explainers else ""
    explainers = len(seconds) - (AFTER_BUILD in seconds)
    after = " and the validity tests" if AFTER_BUILD in seconds else ""
    print(f"total {total:.0f} s = {total / 3600:.2f} h for {explainers}{of} explainers{after}")


if __name__ == "__main__":
    main()
