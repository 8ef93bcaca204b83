"""The record's validity tests computed from reference runs (DESIGN 9 and 10).

The ladder (:mod:`xaibench.metaeval.ladder`) of every alignment metric on every track, and the
planted-cue test (:mod:`xaibench.metaeval.planted`) of every faithfulness metric on the tracks with
a measured cue reliance: the reference explainers ``ladder`` and ``planted`` run through ``run``
(:func:`xaibench.python_api.run`, injected: the runner's front door lives above this package),
then each (track, metric)'s verdict. :mod:`xaibench.record.validity` reads which metrics and
reliance figures the record holds, calls :func:`reference_validity` and keeps the verdicts as data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from xaibench.metaeval.assess import Validity
from xaibench.metaeval.ladder import LEVELS
from xaibench.metaeval.pipeline import RunFunction, ladder_verdicts, planted_verdicts

Key = tuple[str, str]
"""(track, metric)."""


def reference_validity(
    families: Mapping[str, Mapping[str, str]],
    reliance: Mapping[str, Mapping[str, float]],
    suite: str,
    workdir: Path,
    *,
    run: RunFunction,
    seed: int = 0,
    data_dir: Path | None = None,
    run_options: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
) -> dict[Key, Validity]:
    """Run the ladder on every track's alignment metrics (``families``: track -> metric -> family)
    and the planted-cue test on the faithfulness metrics of the tracks in ``reliance`` (track ->
    the model's measured accuracies with the cue or the object painted over), into ``workdir``
    (cached: a second call reuses the runs), and return each (track, metric)'s verdict."""
    options = dict(run_options or {})
    out: dict[Key, Validity] = {}
    aligned = {t: sorted(m for m, f in ms.items() if f == "alignment") for t, ms in families.items()}
    for track, metrics in sorted((t, ms) for t, ms in aligned.items() if ms):
        say(f"validity: the ladder ({len(LEVELS)} levels) on {track}: {', '.join(metrics)}")
        out.update(
            ladder_verdicts(
                workdir,
                [track],
                metrics,
                suite=suite,
                seed=seed,
                output_path=None,
                data_dir=data_dir,
                run_options=options,
                run=run,
            )
        )
    for track, figures in sorted(reliance.items()):
        metrics = sorted(m for m, f in families.get(track, {}).items() if f == "faithfulness")
        if not metrics:
            continue
        say(f"validity: the planted cue on {track}: {', '.join(metrics)}")
        out.update(
            planted_verdicts(
                workdir,
                {track: figures},
                metrics,
                suite=suite,
                seed=seed,
                output_path=None,
                data_dir=data_dir,
                run_options=options,
                run=run,
            )
        )
    return out
