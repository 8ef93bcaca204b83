"""The metrics page: meta-evaluation's report cards (``xaibench meta``, docs/meta.md), one per
metric and track, from the ``meta.json`` applied to the board, with each track's agreement matrix
as a heat map and the graded-oracle ladder of its ranking alignment metrics as small plots; and,
where the run has mechanism tracks (DESIGN 11), the known-answer table: proxy metric by mechanism."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from xaibench.families import DEFAULT_FAMILY, family_index
from xaibench.metaeval.consistency import FIGURES
from xaibench.publish.board import Leaderboard
from xaibench.site.charts import Series, curve_chart, heatmap

ANCHORS = {
    "ladder": "graded-oracle ladder (Tomsett et al. 2020)",
    "planted-cue": "planted cue (Saliency-Bench's watermark; Adebayo et al. 2018)",
    "stability": "rank stability (LATEC, Klein et al. 2024)",
    "agreement": "agreement (MetaQuantus, Hedstrom et al. 2023)",
}


def card_id(track: str, metric: str) -> str:
    """The anchor of a card on the metrics page (the leaderboard's metric headers link to it)."""
    return f"card-{track}-{metric}".replace(" ", "-")


def _num(x: Any, digits: int = 3) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def _interval(v: dict[str, Any]) -> str:
    if v.get("value") is None:
        return ""
    low, high = v.get("ci_low"), v.get("ci_high")
    shown = f" [{_num(low)}, {_num(high)}]" if low is not None and high is not None else ""
    return f"{v.get('figure')} = {_num(v.get('value'))}{shown}"


def _order(item: tuple[str, dict[str, Any]]) -> tuple[int, str]:
    return (family_index(str(item[1].get("family", DEFAULT_FAMILY))), item[0])


def meta_tracks(board: Leaderboard) -> list[dict[str, Any]]:
    """One entry per track of the applied ``meta.json``: its cards, heat map and ladder plots."""
    data = board.meta or {}
    out = []
    for track, block in sorted((data.get("tracks") or {}).items()):
        found = (block.get("metrics") or {}).items()
        metrics = sorted(((str(k), v) for k, v in found if isinstance(v, dict)), key=_order)
        cards = []
        for name, card in metrics:
            s = card.get("stability") or {}
            v = card.get("validity") or {}
            ceiling = card.get("human_ceiling") or {}
            n_for = s.get("n_for_tau_0.9")
            cards.append(
                {
                    "id": card_id(track, name),
                    "metric": name,
                    "family": card.get("family"),
                    "direction": card.get("direction"),
                    "verdict": ", ".join([str(card.get("verdict")), *card.get("flags", [])]),
                    "invalid": card.get("verdict") == "invalid",
                    "test": ANCHORS.get(str(v.get("test")), v.get("test")) if v.get("test") else "",
                    "figure": _interval(v),
                    "mean_tau": _num(s.get("mean_tau"), 2),
                    "p05_tau": _num(s.get("p05_tau"), 2),
                    "p_top": _num(s.get("p_top_first"), 2),
                    "n_for_tau": str(n_for) if n_for is not None else f"> {s.get('n')}",
                    "ceiling": _num(ceiling.get("value")) if ceiling else "",
                    **_consistency(card.get("consistency")),
                    **_protocol(card.get("protocol")),
                }
            )
        ranking = [name for name, card in metrics if card.get("ranking")]
        matrix = [[1.0 if a == b else _tau(block, a, b) for b in ranking] for a in ranking]
        ladders = [
            _ladder_chart(name, card)
            for name, card in metrics
            if card.get("ranking") and (card.get("validity") or {}).get("test") == "ladder"
        ]
        means = block.get("agreement_means") or {}
        out.append(
            {
                "track": track,
                "cards": cards,
                "heat": heatmap(ranking, matrix, title=f"{track}: Kendall tau between ranking metrics")
                if len(ranking) > 1
                else None,
                "ladders": [c for c in ladders if c is not None],
                "within": {f: _num(t, 2) for f, t in (means.get("within") or {}).items()},
                "across": _num(means.get("across"), 2),
            }
        )
    return out


def _protocol(protocol: Any) -> dict[str, str]:
    """The protocol-sensitivity cells of a card: ``min / mean`` tau, the cherry-pick count, and
    each setting's tau and winners (a tooltip); empty when not measured."""
    if not isinstance(protocol, dict):
        return {"protocol_tau": "", "cherry_pick": "", "protocol_settings": ""}
    if protocol.get("reason"):
        return {"protocol_tau": str(protocol["reason"]), "cherry_pick": "", "protocol_settings": ""}
    settings = [s for s in protocol.get("settings") or [] if isinstance(s, dict)]
    shown = "; ".join(
        f"{s.get('label')}: tau {_num(s.get('tau'), 2)}, first {', '.join(map(str, s.get('winners') or [])) or 'n/a'}"
        for s in settings
    )
    pick = protocol.get("cherry_pick")
    return {
        "protocol_tau": f"{_num(protocol.get('min_tau'), 2)} / {_num(protocol.get('mean_tau'), 2)}",
        "cherry_pick": str(pick) if isinstance(pick, int) else "n/a",
        "protocol_settings": shown,
    }


def _tau(block: dict[str, Any], a: str, b: str) -> float | None:
    pair = ((block.get("metrics") or {}).get(a, {}).get("agreement") or {}).get(b) or {}
    tau = pair.get("tau")
    return float(tau) if isinstance(tau, (int, float)) and math.isfinite(tau) else None


def _ladder_chart(name: str, card: dict[str, Any]) -> Markup | None:
    details = (card.get("validity") or {}).get("details") or {}
    levels, means = details.get("levels"), details.get("m")
    if not (isinstance(levels, list) and isinstance(means, list) and len(levels) == len(means) > 1):
        return None
    lo, hi = min(means), max(means)
    span = (lo - 0.05, hi + 0.05) if hi > lo else (lo - 0.5, lo + 0.5)
    series = [Series(label=f"{name}: m(a)", x=levels, y=means, main=True)]
    return curve_chart(
        series, title=f"{name}: ladder", x_label="noise share a", y_label="m(a)", width=240, height=160, y_range=span
    )


def _consistency(block: Any) -> dict[str, str]:
    """The MC cell of a card (higher is better, in [0, 1]) and its details: IAC and IEC of each
    kind of perturbation, with the strengths used."""
    if not isinstance(block, dict):
        return {"mc": "", "mc_detail": ""}
    parts = []
    for kind, f in sorted((block.get("kinds") or {}).items()):
        if isinstance(f, dict):
            figures = ", ".join(f"{k.upper().replace('_', ' ')} {_num(f.get(k), 2)}" for k in FIGURES)
            parts.append(f"{kind} (sigma {_num(f.get('sigma_minor'))} / {_num(f.get('sigma_disruptive'))}): {figures}")
    if block.get("reason"):
        parts.append(str(block["reason"]))
    return {"mc": _num(block.get("mc"), 2), "mc_detail": "; ".join(parts)}


def known_answer_table(board: Leaderboard) -> dict[str, Any] | None:
    """The known-answer table of the applied ``meta.json`` (DESIGN 11, docs/meta.md): one column
    per mechanism track, one row per proxy faithfulness metric, each cell Kendall tau-b with its
    95 % interval and the verdict (a tooltip names the explainers and samples, or why it is
    untested); ``None`` when no track has one."""
    data = board.meta or {}
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for track, block in sorted((data.get("tracks") or {}).items()):
        tests = (block or {}).get("known_answer") if isinstance(block, dict) else None
        if isinstance(tests, dict) and tests:
            found[str(track)] = {str(m): t for m, t in tests.items() if isinstance(t, dict)}
    if not found:
        return None
    tracks = sorted(found)
    metrics = sorted({m for tests in found.values() for m in tests})
    rows = [{"metric": m, "cells": [_known_cell(found[t].get(m)) for t in tracks]} for m in metrics]
    return {"tracks": tracks, "rows": rows}


def _known_cell(test: dict[str, Any] | None) -> dict[str, str]:
    """One cell of the known-answer table: ``tau [low, high]``, the verdict and a tooltip."""
    if test is None:
        return {"text": "", "verdict": "", "title": ""}
    verdict = str(test.get("verdict", ""))
    if test.get("reason") or test.get("tau") is None:
        return {"text": "", "verdict": verdict, "title": str(test.get("reason") or "")}
    low, high = test.get("ci_low"), test.get("ci_high")
    shown = f" [{_num(low, 2)}, {_num(high, 2)}]" if low is not None and high is not None else ""
    explainers = test.get("explainers") or []
    title = f"{len(explainers)} explainers ({', '.join(map(str, explainers))}), {test.get('samples')} samples"
    return {"text": f"{_num(test.get('tau'), 2)}{shown}", "verdict": verdict, "title": title}
