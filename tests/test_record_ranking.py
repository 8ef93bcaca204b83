"""What the board of record ranks (DESIGN 10): references take no rank anywhere, and on a track
whose model relies on a planted cue, alignment to the object is a diagnosis, out of the overall
rank. Also the reliance itself, measured by the run on the real ``shapes-shortcut`` model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xaibench.publish.board import build_board, is_reference, track_diagnosis
from xaibench.publish.leaderboard import DIAGNOSIS_STATUS, REFERENCE_STATUS, Entry, rank_track

IDS = [f"s{k}" for k in range(10)]


def entry(explainer: str, metric: str, value: float, family: str = "alignment", direction: str = "higher") -> Entry:
    """An entry whose 10 samples all have ``value`` (so any difference is a strict win)."""
    return Entry("t", explainer, metric, family, direction, True, value, value, value, 10, 0, dict.fromkeys(IDS, value))


def rows_of(entries: list[Entry], **kwargs: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["explainer"], r["metric"]): dict(r) for r in rank_track("t", entries, **kwargs).rows}


METHODS = [
    entry("a", "iou", 0.6),
    entry("b", "iou", 0.3),
    entry("a", "deletion", 0.4, "faithfulness", "lower"),
    entry("b", "deletion", 0.2, "faithfulness", "lower"),
]
ORACLE = [entry("oracle", "iou", 1.0), entry("oracle", "deletion", 0.05, "faithfulness", "lower")]


def test_a_reference_takes_no_rank_and_moves_no_methods_rank() -> None:
    without = rows_of(METHODS)
    with_oracle = rows_of(METHODS + ORACLE, references={"oracle"})
    # the oracle beats both methods on both metrics, yet every method keeps its rank and value
    for key, row in without.items():
        assert (with_oracle[key]["rank"], with_oracle[key]["value"]) == (row["rank"], row["value"]), key
    assert with_oracle[("a", "iou")]["rank"] == 1 and with_oracle[("b", "deletion")]["rank"] == 1
    oracle_rows = {m: r for (x, m), r in with_oracle.items() if x == "oracle"}
    assert set(oracle_rows) == {"iou", "deletion", "rank:alignment", "rank:faithfulness", "rank:overall"}
    assert all(r["rank"] is None and r["status"] == REFERENCE_STATUS for r in oracle_rows.values())
    assert oracle_rows["iou"]["value"] == 1.0
    # unflagged, the same oracle would head both metrics (what the board did before)
    ranked = rows_of(METHODS + ORACLE)
    assert ranked[("oracle", "iou")]["rank"] == 1 and ranked[("oracle", "rank:overall")]["rank"] == 1


def test_a_diagnosis_family_is_ranked_among_methods_but_leaves_the_overall_rank() -> None:
    reason = "diagnosis: the model relies on the planted cue"
    plain = rows_of(METHODS)
    # a wins alignment, b wins faithfulness: the overall rank is a tie of 1.5 each
    assert plain[("a", "rank:overall")]["value"] == plain[("b", "rank:overall")]["value"] == 1.5
    ranking = rank_track("t", METHODS, diagnosis={"alignment": reason})
    rows = {(r["explainer"], r["metric"]): r for r in ranking.rows}
    assert rows[("a", "iou")]["rank"] == 1 and rows[("b", "iou")]["rank"] == 2  # still shown and ranked
    assert rows[("a", "rank:alignment")]["rank"] == 1 and rows[("a", "rank:alignment")]["status"] == DIAGNOSIS_STATUS
    assert ranking.families["alignment"] == {"ranked": False, "reason": reason, "label": None}
    # the overall rank is faithfulness alone: b first
    assert (rows[("b", "rank:overall")]["rank"], rows[("b", "rank:overall")]["value"]) == (1, 1.0)
    assert (rows[("a", "rank:overall")]["rank"], rows[("a", "rank:overall")]["value"]) == (2, 2.0)


def test_the_board_reads_references_and_the_diagnosis_from_the_files() -> None:
    assert is_reference({"explainer": {"reference_only": True}}) and is_reference(
        {"disclosure": {"reference_only": True}}
    )
    assert not is_reference({"explainer": {"reference_only": False}, "disclosure": {}})
    reliance = {"accuracy": 1.0, "accuracy_without_cue": 0.3125, "accuracy_without_object": 1.0, "relies_on": "cue"}
    reason = track_diagnosis({"cue_reliance": reliance})["alignment"]
    assert reason.startswith("diagnosis: the model relies on the planted cue (accuracy 0.31 with the cue painted over")
    assert track_diagnosis({"cue_reliance": {**reliance, "relies_on": "object"}}) == {}
    assert track_diagnosis({}) == {}

    def submission(name: str, values: dict[str, float], reference: bool = False) -> tuple[Path, dict[str, Any]]:
        metrics = {
            m: {
                "family": f,
                "direction": d,
                "ranking": True,
                "mean": v,
                "n": 10,
                "n_na": 0,
                "samples": dict.fromkeys(IDS, v),
            }
            for m, (f, d, v) in {
                "iou": ("alignment", "higher", values["iou"]),
                "deletion": ("faithfulness", "lower", values["deletion"]),
            }.items()
        }
        track = {"provenance": {"cue_reliance": reliance}, "metrics": metrics}
        data = {"explainer": {"name": name, "reference_only": reference}, "tracks": {"cue": track}}
        return Path(f"{name}.json"), data

    board = build_board(
        [
            submission("a", {"iou": 0.6, "deletion": 0.4}),
            submission("b", {"iou": 0.3, "deletion": 0.2}),
            submission("oracle", {"iou": 1.0, "deletion": 0.05}, reference=True),
        ]
    )
    overall = {r["explainer"]: r for r in board.rows if r["metric"] == "rank:overall"}
    assert (overall["b"]["rank"], overall["a"]["rank"], overall["oracle"]["rank"]) == (1, 2, None)
    assert overall["oracle"]["status"] == REFERENCE_STATUS
    assert board.families["cue"]["alignment"]["ranked"] is False
    assert board.summary["order"][0] == "b"  # the reference is not first across tracks either


def test_a_run_measures_that_the_shortcut_model_relies_on_the_cue() -> None:
    from xaibench.plugins.manager import get_registry
    from xaibench.runner.track import load_track
    from xaibench.suites.record import RECORD_TRACKS

    spec = next(t.spec for t in RECORD_TRACKS if t.spec.name == "shapes-shortcut")
    track = load_track(spec, get_registry(), limit=64)
    figures = track.provenance["cue_reliance"]
    assert figures["n"] == 64 and figures["relies_on"] == "cue"
    # painting the watermark over costs most of the accuracy; painting the object over costs none
    assert (
        figures["accuracy_without_cue"]
        < 0.5
        <= figures["accuracy"]
        == pytest.approx(figures["accuracy_without_object"])
    )
    assert track.forward is not None and track.forward.images == 0  # not counted against any metric
    plain = next(t.spec for t in RECORD_TRACKS if t.spec.name == "shapes")
    assert "cue_reliance" not in load_track(plain, get_registry(), limit=8).provenance  # no cue, no figures


def test_the_golden_default_board_ranks_no_reference_and_keeps_shortcut_alignment_out_of_the_overall() -> None:
    golden = json.loads((Path(__file__).parent / "golden" / "default-suite.json").read_text())
    for seed in ("0", "1"):
        rows = golden[seed]
        oracle = {k: r for k, r in rows.items() if k.split("/")[1] == "oracle"}
        assert oracle and all(r["rank"] is None for r in oracle.values())
        assert all(r["status"] == REFERENCE_STATUS for k, r in oracle.items() if "/rank:" in k)
        shortcut = {
            k.split("/")[1]: r
            for k, r in rows.items()
            if k.startswith("shapes-shortcut/") and k.endswith("/rank:alignment")
        }
        methods = {x: r for x, r in shortcut.items() if x != "oracle"}
        assert methods and all(r["status"] == DIAGNOSIS_STATUS and r["rank"] is not None for r in methods.values())
        # the overall mean rank there is the faithfulness family's alone (the only other ranked family)
        for x in methods:
            overall = rows[f"shapes-shortcut/{x}/rank:overall"]["value"]
            assert overall == rows[f"shapes-shortcut/{x}/rank:faithfulness"]["value"], x
