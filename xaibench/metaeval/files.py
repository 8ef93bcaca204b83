"""``meta.json`` and ``meta.csv``: the meta-evaluation's files (DESIGN 8 and 9).

``meta.json``: ``{"schema": "xaibench.meta/1", "seed", "xaibench", "created", "provenance":
{"submissions": {file: sha256}, "records": {file: sha256}}, "tracks": {track: {"agreement_means":
{"within": {family: tau}, "across": tau}, "metrics": {metric: card}}}}``, a card holding the
metric's family, direction, verdict, flags, validity test, stability figures and agreement
with every other metric, and (where measured) its ``protocol`` sensitivity: ``min_tau``,
``mean_tau``, ``cherry_pick`` and each setting's tau and winners. ``meta.csv``: the same figures
tidy, one row per (track, metric, test, figure): columns :data:`CSV_FIELDS`; ``value``,
``ci_low`` and ``ci_high`` are empty where a figure has none (``n_for_tau_0.9`` is empty when no
size below n reaches 0.9: "> n"; the ``protocol`` figures when the metric documents no
settings). Both are written atomically.

On a mechanism track (DESIGN 11) the track's block also holds ``known_answer``: ``{metric:
{"test": "known-answer", "direction", "tau", "ci_low", "ci_high", "verdict", "explainers": [...],
"samples", "ground_truth": [...], "reason"}}``, one per proxy faithfulness metric
(:mod:`xaibench.metaeval.known_answer`); ``meta.csv`` gives each as three rows of test
``known-answer``: figure ``tau`` (with its interval), ``explainers`` and ``samples`` (counts), the
``verdict`` column holding ``agrees``, ``disagrees``, ``undecided`` or ``untested``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from xaibench.files import write_csv_atomic, write_json_atomic
from xaibench.metaeval.assess import Card, TrackMeta
from xaibench.metaeval.known_answer import KnownAnswer
from xaibench.publish.gate import META_SCHEMA
from xaibench.version import __version__

SCHEMA = META_SCHEMA  # what leaderboard build reads (xaibench.publish.gate)
CSV_FIELDS = ("track", "metric", "test", "figure", "value", "ci_low", "ci_high", "verdict")
JSON_NAME, CSV_NAME = "meta.json", "meta.csv"


def digests(paths: Iterable[Path]) -> dict[str, str]:
    """``{file name: sha256 of its bytes}``: what ``leaderboard build`` matches a ``meta.json`` against."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(paths)}


def _number(x: float | int | None) -> float | int | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return x


def card_json(card: Card) -> dict[str, Any]:
    s, v = card.stability, card.validity
    return {
        "family": card.family,
        "direction": card.direction,
        "ranking": card.ranking,
        "verdict": v.verdict,
        "flags": card.flags,
        "validity": {
            "test": v.test,
            "figure": v.figure,
            "value": _number(v.value),
            "ci_low": _number(v.ci_low),
            "ci_high": _number(v.ci_high),
            **({"details": v.details} if v.details else {}),
        },
        "stability": {
            "mean_tau": _number(s.mean_tau),
            "p05_tau": _number(s.p05_tau),
            "p_top_first": _number(s.p_top),
            "n_for_tau_0.9": s.n_for_tau,
            "n": s.n,
            "explainers": s.explainers,
            "reason": s.reason,
        },
        "agreement": {
            other: {"tau": _number(a.tau), "ci_low": _number(a.low), "ci_high": _number(a.high), "n": a.n}
            for other, a in sorted(card.agreement.items())
        },
        **({"human_ceiling": _ceiling_json(card.ceiling)} if card.ceiling is not None else {}),
        **({"consistency": card.consistency.as_json()} if card.consistency is not None else {}),
        **({"protocol": _protocol_json(card.protocol)} if card.protocol is not None else {}),
    }


def _protocol_json(protocol: Any) -> dict[str, Any]:
    return {
        "min_tau": _number(protocol.min_tau),
        "mean_tau": _number(protocol.mean_tau),
        "cherry_pick": protocol.cherry_pick,
        "default_winners": list(protocol.default_winners),
        "reason": protocol.reason,
        "settings": [
            {"label": s.label, "params": s.params, "tau": _number(s.tau), "winners": list(s.winners), "n": s.n}
            for s in protocol.settings
        ],
    }


def _ceiling_json(ceiling: Any) -> dict[str, Any]:
    return {
        "value": _number(ceiling.value),
        "n": ceiling.n,
        "pairs": {pair: _number(v) for pair, v in sorted(ceiling.pairs.items())},
        "fractions": {x: _number(f) for x, f in sorted(ceiling.fractions.items())},
    }


def _by_track(known: Sequence[KnownAnswer]) -> dict[str, list[KnownAnswer]]:
    out: dict[str, list[KnownAnswer]] = defaultdict(list)
    for k in sorted(known, key=lambda k: (k.track, k.metric)):
        out[k.track].append(k)
    return out


def known_answer_json(known: KnownAnswer) -> dict[str, Any]:
    """One (track, proxy metric)'s known-answer test as ``meta.json`` holds it (see the module doc)."""
    return {
        "test": "known-answer",
        "direction": known.direction,
        "tau": _number(known.tau),
        "ci_low": _number(known.low),
        "ci_high": _number(known.high),
        "verdict": known.verdict,
        "explainers": list(known.explainers),
        "samples": known.samples,
        "ground_truth": list(known.truth),
        "reason": known.reason,
    }


def meta_json(
    tracks: Mapping[str, TrackMeta],
    *,
    seed: int,
    submissions: Mapping[str, str],
    records: Mapping[str, str],
    created: str | None = None,
    known_answer: Sequence[KnownAnswer] = (),
) -> dict[str, Any]:
    """``meta.json``'s content (see the module doc); ``created`` defaults to now (UTC, seconds):
    the record passes its submissions' latest, so that a rebuild writes the same bytes.
    ``known_answer``: the known-answer tests, each in its track's block (a track of ``tracks``)."""
    known = _by_track(known_answer)
    return {
        "schema": SCHEMA,
        "seed": seed,
        "xaibench": __version__,
        "created": created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "provenance": {"submissions": dict(submissions), "records": dict(records)},
        "tracks": {
            track: {
                "agreement_means": {
                    "within": {f: _number(t) for f, t in meta.within.items()},
                    "across": _number(meta.across),
                },
                "metrics": {name: card_json(card) for name, card in meta.cards.items()},
                **({"known_answer": {k.metric: known_answer_json(k) for k in known[track]}} if track in known else {}),
            }
            for track, meta in tracks.items()
        },
    }


def csv_rows(tracks: Mapping[str, TrackMeta], known_answer: Sequence[KnownAnswer] = ()) -> Iterator[dict[str, Any]]:
    """The rows of ``meta.csv`` (see the module doc): each track's cards, then its known-answer tests."""
    known = _by_track(known_answer)
    for track, meta in tracks.items():
        for name, card in meta.cards.items():
            for test, figure, value, low, high in _figures(card):
                cells = {"value": _number(value), "ci_low": _number(low), "ci_high": _number(high)}
                yield {"track": track, "metric": name, "test": test, "figure": figure, **cells, "verdict": card.verdict}
        for k in known.get(track, []):
            for figure, value, low, high in (
                ("tau", k.tau, k.low, k.high),
                ("explainers", len(k.explainers), None, None),
                ("samples", k.samples, None, None),
            ):
                cells = {"value": _number(value), "ci_low": _number(low), "ci_high": _number(high)}
                yield {
                    "track": track,
                    "metric": k.metric,
                    "test": "known-answer",
                    "figure": figure,
                    **cells,
                    "verdict": k.verdict,
                }


def _figures(card: Card) -> Iterator[tuple[str, str, Any, Any, Any]]:
    """``(test, figure, value, ci_low, ci_high)`` of every figure of one card."""
    v, s = card.validity, card.stability
    if v.test is not None:
        yield v.test, v.figure or "", v.value, v.ci_low, v.ci_high
    yield "stability", "mean_tau", s.mean_tau, None, None
    yield "stability", "p05_tau", s.p05_tau, None, None
    yield "stability", "p_top_first", s.p_top, None, None
    yield "stability", "n_for_tau_0.9", s.n_for_tau, None, None
    yield "stability", "n", s.n, None, None
    for other, a in sorted(card.agreement.items()):
        yield "agreement", f"tau:{other}", a.tau, a.low, a.high
    if card.ceiling is not None:
        yield "human-ceiling", "ceiling", card.ceiling.value, None, None
        for explainer, fraction in sorted(card.ceiling.fractions.items()):
            yield "human-ceiling", f"fraction:{explainer}", fraction, None, None
    if card.consistency is not None:
        mc = card.consistency
        yield "consistency", "mc", mc.mc, None, None
        for kind, c in sorted(mc.kinds.items()):
            for figure in ("iac_nr", "iac_ar", "iec_nr", "iec_ar"):
                yield "consistency", f"{figure}:{kind}", getattr(c, figure), None, None
            yield "consistency", f"mc:{kind}", c.mc, None, None
            yield "consistency", f"sigma_minor:{kind}", c.sigma_minor, None, None
            yield "consistency", f"sigma_disruptive:{kind}", c.sigma_disruptive, None, None
    if card.protocol is not None:
        yield "protocol", "min_tau", card.protocol.min_tau, None, None
        yield "protocol", "mean_tau", card.protocol.mean_tau, None, None
        yield "protocol", "cherry_pick_count", card.protocol.cherry_pick, None, None


def write_meta(
    folder: Path,
    tracks: Mapping[str, TrackMeta],
    *,
    seed: int,
    submissions: Mapping[str, str],
    records: Mapping[str, str] | None = None,
    created: str | None = None,
    known_answer: Sequence[KnownAnswer] = (),
) -> tuple[Path, Path]:
    """Write ``meta.json`` and ``meta.csv`` into ``folder`` (atomically); returns their paths.
    ``created``: the time it names (default now); ``known_answer``: the known-answer tests
    (:mod:`xaibench.metaeval.known_answer`) of the mechanism tracks."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = folder / JSON_NAME, folder / CSV_NAME
    content = meta_json(
        tracks, seed=seed, submissions=submissions, records=records or {}, created=created, known_answer=known_answer
    )
    write_json_atomic(json_path, content)
    write_csv_atomic(csv_path, CSV_FIELDS, csv_rows(tracks, known_answer))
    return json_path, csv_path
