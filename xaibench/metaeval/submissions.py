"""The meta-evaluation of a folder of submissions, end to end: read, assess, write."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from xaibench.metaeval.assess import TrackMeta, Validity, assess
from xaibench.metaeval.ceiling import Ceiling, fractions
from xaibench.metaeval.consistency import MetaConsistency
from xaibench.metaeval.files import digests, write_meta
from xaibench.metaeval.known_answer import KnownAnswer, known_answer
from xaibench.metaeval.protocol import Protocol
from xaibench.publish.leaderboard import entries_from_submissions, resolve_duplicates
from xaibench.publish.submission import read_submissions


@dataclass
class MetaResult:
    """What :func:`meta_of_submissions` computed and wrote."""

    tracks: dict[str, TrackMeta]
    json_path: Path
    csv_path: Path
    known_answer: list[KnownAnswer] = field(default_factory=list)
    """The known-answer tests of the mechanism tracks (DESIGN 11): reported, never a gate."""


def meta_of_submissions(
    folder: Path,
    out: Path,
    *,
    seed: int = 0,
    records: Iterable[Path] = (),
    tracks: Iterable[str] | None = None,
    validity: Mapping[tuple[str, str], Validity] | None = None,
    ceilings: Mapping[tuple[str, str], Ceiling] | None = None,
    consistency: Mapping[tuple[str, str], MetaConsistency] | None = None,
    protocol: Mapping[tuple[str, str], Protocol] | None = None,
    created: str | None = None,
) -> MetaResult:
    """Assess every (track, metric) of the submissions in ``folder`` (the leaderboard's input:
    duplicates resolved as it resolves them, reference-only explainers left out) and write
    ``meta.json``/``meta.csv`` into ``out``, with the digests of the submissions and of the
    ``records`` files (a workdir's journals and part files, :func:`xaibench.runner.storage.store.record_files`)
    used. ``tracks``: only these; ``validity``:
    the validity tests' outcomes by (track, metric) (:mod:`xaibench.metaeval.ladder`); ``ceilings``:
    the human ceilings by (track, metric) (:mod:`xaibench.metaeval.ceiling`), each explainer's mean
    then reported as a fraction of it; ``consistency``: noise resilience and adversarial reactivity
    by (track, metric) (:mod:`xaibench.metaeval.consistency`); ``protocol``: the protocol
    sensitivity by (track, metric) (:mod:`xaibench.metaeval.protocol`); ``created``: the time
    ``meta.json`` names (default now; the record passes a fixed one, for byte-identical rebuilds)."""
    loaded = read_submissions(folder)
    kept = resolve_duplicates(loaded)
    reference = {s.key for s in kept if bool(s.data.get("explainer", {}).get("reference_only"))}
    wanted = None if tracks is None else set(tracks)
    entries = [e for e in entries_from_submissions(kept) if wanted is None or e.track in wanted]
    result = assess(entries, seed=seed, reference=reference, validity=validity)
    for (track, metric), ceiling in (ceilings or {}).items():
        card = result.get(track, None) and result[track].cards.get(metric)
        if card is None:
            continue
        means = [(e.explainer, e.value) for e in entries if e.track == track and e.metric == metric]
        ceiling.fractions = fractions(ceiling, card.direction, [m for m in means if m[0] not in reference])
        card.ceiling = ceiling
    for (track, metric), figures in (consistency or {}).items():
        card = result.get(track, None) and result[track].cards.get(metric)
        if card is not None:
            card.consistency = figures
    for (track, metric), sensitivity in (protocol or {}).items():
        card = result[track].cards.get(metric) if track in result else None
        if card is not None:
            card.protocol = sensitivity
    known = known_answer(entries, seed=seed, reference=reference)
    json_path, csv_path = write_meta(
        out,
        result,
        seed=seed,
        submissions=digests(s.path for s in loaded),
        records=digests(records),
        created=created,
        known_answer=known,
    )
    return MetaResult(result, json_path, csv_path, known)
