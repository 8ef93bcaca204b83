"""docs/meta.md's known-answer table is the record's: every cell (tau, its 95 % interval and the
verdict of each proxy metric on each mechanism track) as `record/record-v1/meta/meta.json` holds it,
so the conclusions written under the table cannot drift from the committed measurement."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "meta.md"
META = REPO / "record" / "record-v1" / "meta" / "meta.json"


def _doc_table() -> dict[tuple[str, str], str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- known-answer table -->")[1].split("<!-- /known-answer table -->")[0]
    lines = [line for line in block.strip().splitlines() if line.startswith("|")]
    kinds = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    cells = {}
    for line in lines[2:]:
        proxy, *values = (c.strip() for c in line.strip("|").split("|"))
        for kind, value in zip(kinds, values, strict=True):
            cells[(proxy.strip("`"), kind)] = value
    return cells


def _cell(block: dict[str, object]) -> str:
    if block.get("tau") is None:
        return "untested"
    return f"{block['tau']:.2f} [{block['ci_low']:.2f}, {block['ci_high']:.2f}] {block['verdict']}"


def test_the_known_answer_table_is_the_records_measurement() -> None:
    tracks = json.loads(META.read_text(encoding="utf-8"))["tracks"]
    doc = _doc_table()
    measured = {
        (proxy, name.removeprefix("mechanism-")): _cell(block)
        for name, track in tracks.items()
        if name.startswith("mechanism-")
        for proxy, block in track["known_answer"].items()
    }
    assert len(doc) == 36 and set(doc) == set(measured)  # six proxies x six mechanisms, none left out
    assert doc == measured
    # the prose under it quotes the table's extremes
    prose = DOC.read_text(encoding="utf-8").split("<!-- /known-answer table -->")[1].split("**Verdict.**")[0]
    taus = [float(m) for m in re.findall(r"-?\d\.\d\d", measured[("average_drop", "interaction")])]
    assert f"tau {taus[0]:.2f} [{taus[1]:.2f}, {taus[2]:.2f}]" in prose
