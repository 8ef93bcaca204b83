"""Paired, sample-aware ranking (DESIGN 7), validity-gated families, sanity flags, the
cross-track summary and duplicate submissions, on hand-built submissions with known answers."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xaibench.cli import main
from xaibench.errors import XaibenchError
from xaibench.publish.board import Leaderboard, board_json, build_board, build_leaderboard
from xaibench.publish.leaderboard import CSV_COLUMNS, compare, entries_from_submissions, rank_metric
from xaibench.publish.validation import validate_file
from xaibench.publish.writers import md_escape, to_csv, to_markdown
from xaibench.seeds import derive_seed
from xaibench.stats import N_BOOTSTRAP

PROXY = "PASTA (proxy, technique-level labels)"


def ids(n: int) -> list[str]:
    return [f"s{k:02d}" for k in range(n)]


def block(
    samples: dict[str, float | None],
    *,
    family: str = "alignment",
    direction: str = "higher",
    ranking: bool = True,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A metric block whose mean and counts follow from ``samples`` (a point interval)."""
    values = [v for v in samples.values() if v is not None]
    mean = sum(values) / len(values) if values else None
    return {
        "id": "m",
        "version": "1.0.0",
        "family": family,
        "direction": direction,
        "params": params or {},
        "ranking": ranking,
        "mean": mean,
        "ci_low": mean,
        "ci_high": mean,
        "n": len(values),
        "n_na": len(samples) - len(values),
        "na_reasons": {"empty mask": len(samples) - len(values)} if len(values) < len(samples) else {},
        "samples": samples,
    }


def sub(
    name: str,
    tracks: dict[str, dict[str, dict[str, Any]]],
    *,
    created: str = "2026-01-01T00:00:00+00:00",
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A submission with the given metric blocks per track (valid against the schema)."""
    return {
        "schema": "xaibench.submission/1",
        "explainer": {"name": name, "version": "1.0.0", "params": params or {}},
        "disclosure": {"tuned_on_benchmark": False, "reference_only": False, "notes": ""},
        "created": created,
        "tracks": {
            track: {
                "provenance": {
                    "dataset": {"name": "d", "revision": "r"},
                    "model": {"name": "m", "identity": "m@1"},
                    "n_samples": _n_samples(metrics),
                },
                "metrics": metrics,
            }
            for track, metrics in tracks.items()
        },
    }


def _n_samples(metrics: dict[str, dict[str, Any]]) -> int:
    first = next(iter(metrics.values()))
    return int(first["n"] + first["n_na"])


def board_of(*subs: dict[str, Any], files: list[str] | None = None) -> Leaderboard:
    names = files or [f"{s['explainer']['name']}.json" for s in subs]
    return build_board([(Path(f), s) for f, s in zip(names, subs, strict=True)])


def rows_of(board: Leaderboard, track: str = "t") -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["explainer"], r["metric"]): r for r in board.rows if r["track"] == track}


def const(value: float, n: int = 10) -> dict[str, float | None]:
    return dict.fromkeys(ids(n), value)


# ----------------------------------------------------------------------------- paired comparisons


def _crossing_samples() -> dict[str, dict[str, float | None]]:
    """a and b valid on different samples (12 in all): shared s02..s09 (8), where a = b + d with
    d = 0.05, 0.06, ..., 0.12 > 0. Off the shared set a has 0.0 (s00, s01) and b has 1.0 (s10,
    s11), so the unpaired means order them the other way: mean(a) = (4 + 0.68) / 10 = 0.468,
    mean(b) = (4 + 2) / 10 = 0.6."""
    a: dict[str, float | None] = dict.fromkeys(ids(12), None)
    b: dict[str, float | None] = dict.fromkeys(ids(12), None)
    a["s00"] = a["s01"] = 0.0
    b["s10"] = b["s11"] = 1.0
    for k in range(8):
        b[f"s{k + 2:02d}"] = 0.5
        a[f"s{k + 2:02d}"] = 0.5 + 0.05 + 0.01 * k
    return {"a": a, "b": b}


def _crossing_subs(direction: str = "higher") -> list[dict[str, Any]]:
    return [sub(x, {"t": {"iou": block(v, direction=direction)}}) for x, v in _crossing_samples().items()]


def test_explainers_valid_on_different_samples_are_compared_on_their_shared_samples_only() -> None:
    rows = rows_of(board_of(*_crossing_subs()))
    assert rows[("a", "iou")]["value"] == pytest.approx(0.468) and rows[("b", "iou")]["value"] == pytest.approx(0.6)
    assert (rows[("a", "iou")]["rank"], rows[("b", "iou")]["rank"]) == (1, 2)  # paired: a wins every shared sample
    assert rows[("a", "iou")]["status"] == rows[("b", "iou")]["status"] == ""
    assert (rows[("a", "rank:overall")]["rank"], rows[("b", "rank:overall")]["rank"]) == (1, 2)
    lower = rows_of(board_of(*_crossing_subs("lower")))  # same numbers, lower is better: b wins
    assert (lower[("a", "iou")]["rank"], lower[("b", "iou")]["rank"]) == (2, 1)


def test_the_paired_interval_comes_from_the_shared_resample_of_the_track_ids_and_is_order_free() -> None:
    a, b = entries_from_submissions([(Path(f"{s['explainer']['name']}.json"), s) for s in _crossing_subs()])
    c = compare(a, b)
    assert (c.shared, c.winner) == (8, "a")
    samples = _crossing_samples()
    # one resample of all 12 ids, seeded by (track, metric); each resample's mean difference is
    # taken over the drawn ids both have (s02..s09), each drawn id counted as often as drawn
    rng = np.random.default_rng(derive_seed(0, "paired", "t", "iou"))
    draws = rng.integers(0, 12, size=(N_BOOTSTRAP, 12))
    means = []
    for row in draws:
        d = [samples["a"][f"s{k:02d}"] - samples["b"][f"s{k:02d}"] for k in row if 2 <= k <= 9]  # type: ignore[operator]
        if d:
            means.append(sum(d) / len(d))
    assert len(means) == N_BOOTSTRAP  # (a resample drawing none of the 8 shared ids would be left out)
    expected = np.percentile(means, [2.5, 97.5])
    assert (c.low, c.high) == pytest.approx(tuple(expected), abs=1e-12)
    assert 0.05 - 1e-9 <= c.low <= c.high <= 0.12 + 1e-9  # every resample mean lies within [min d, max d]
    assert compare(b, a) == c


@pytest.mark.parametrize("shared", [7, 8])
def test_a_metric_ranks_only_on_at_least_8_shared_samples(shared: int) -> None:
    a: dict[str, float | None] = {sid: (0.9 if k < 10 else None) for k, sid in enumerate(ids(20))}
    start = 10 - shared  # b has values on s{start}..s{start + 9}: `shared` of them overlap a's s00..s09
    b: dict[str, float | None] = {sid: (0.1 if start <= k < start + 10 else None) for k, sid in enumerate(ids(20))}
    board = board_of(sub("a", {"t": {"iou": block(a)}}), sub("b", {"t": {"iou": block(b)}}))
    rows = rows_of(board)
    if shared == 8:
        assert (rows[("a", "iou")]["rank"], rows[("b", "iou")]["rank"]) == (1, 2)
        assert rows[("a", "rank:overall")]["rank"] == 1
        assert board.families["t"]["alignment"] == {"ranked": True, "reason": None, "label": None}
    else:
        for x in ("a", "b"):
            assert rows[(x, "iou")]["rank"] is None
            assert rows[(x, "iou")]["status"] == "too few samples (n = 7)"
            assert rows[(x, "rank:alignment")]["status"] == "not ranked: too few samples (n = 7)"
            assert rows[(x, "rank:overall")]["rank"] is None and rows[(x, "rank:overall")]["value"] is None
        assert board.families["t"]["alignment"]["ranked"] is False
        md = to_markdown(board)
        assert "too few samples (n = 7)" in md  # in the header (every cell shares it)


def test_an_explainer_sharing_too_few_samples_with_everyone_is_left_out_the_others_rank() -> None:
    a = {sid: 0.9 for sid in ids(10)}
    b = {sid: 0.5 for sid in ids(10)}
    c: dict[str, float | None] = {sid: (0.1 if k < 5 else None) for k, sid in enumerate(ids(10))}
    rows = rows_of(board_of(*(sub(x, {"t": {"iou": block(v)}}) for x, v in (("a", a), ("b", b), ("c", c)))))
    assert [rows[(x, "iou")]["rank"] for x in "abc"] == [1, 2, None]
    assert rows[("c", "iou")]["status"] == "too few samples (n = 5)"
    assert [rows[(x, "rank:overall")]["rank"] for x in "abc"] == [1, 2, None]


def test_ties_by_paired_interval_share_ranks_even_when_not_transitive() -> None:
    # a - c = 0.2 on every sample: a beats c. a - b and b - c alternate 0.4 / -0.2 (mean 0.1):
    # a resample mean is 0.4 - 0.06 k with k ~ Binomial(10, 1/2) negatives, and P(k >= 8) = 5.5 %
    # > 2.5 %, so the 95 % interval reaches below 0 (and above): ties. Ranks: a 1, b 1, c 2.
    e = [0.3 if k % 2 else -0.3 for k in range(10)]
    a = {sid: 0.2 for sid in ids(10)}
    b = {sid: 0.1 + e[k] for k, sid in enumerate(ids(10))}
    c = {sid: 0.0 for sid in ids(10)}
    subs = [sub(x, {"t": {"iou": block(v)}}) for x, v in (("a", a), ("b", b), ("c", c))]
    board = board_of(*subs)
    rows = rows_of(board)
    assert [rows[(x, "iou")]["rank"] for x in "abc"] == [1, 1, 2]
    assert build_board([(Path(f"{s['explainer']['name']}.json"), s) for s in reversed(subs)]).rows == board.rows
    md = to_markdown(board)
    assert "\\#1= " in md and "\\#2 " in md
    zero = rows_of(board_of(sub("a", {"t": {"iou": block(a)}}), sub("z", {"t": {"iou": block(dict(a))}})))
    assert zero[("a", "iou")]["rank"] == zero[("z", "iou")]["rank"] == 1  # identical values: d = 0, a tie


def test_more_than_a_quarter_na_is_flagged_in_the_cell() -> None:
    a: dict[str, float | None] = {sid: (None if k < 3 else 0.5) for k, sid in enumerate(ids(10))}  # 30 % n/a
    b: dict[str, float | None] = {sid: (None if k < 3 else 0.5) for k, sid in enumerate(ids(12))}  # 25 %: not more
    rows = rows_of(board_of(sub("a", {"t": {"iou": block(a)}}), sub("b", {"t": {"iou": block(b)}})))
    assert rows[("a", "iou")]["flags"] == "n/a 30 %"
    assert rows[("b", "iou")]["flags"] == ""


def test_submissions_without_per_sample_values_are_shown_not_ranked() -> None:
    old = block(const(0.9))
    del old["samples"]
    a, b = block(const(0.5)), block(const(0.1))
    board = board_of(sub("old", {"t": {"iou": old}}), sub("a", {"t": {"iou": a}}), sub("b", {"t": {"iou": b}}))
    rows = rows_of(board)
    assert rows[("old", "iou")]["rank"] is None and rows[("old", "iou")]["value"] == pytest.approx(0.9)
    assert rows[("old", "iou")]["status"] == "not ranked: no per-sample values"
    assert rows[("old", "rank:overall")]["status"] == "not ranked: no per-sample values"
    assert (rows[("a", "iou")]["rank"], rows[("b", "iou")]["rank"]) == (1, 2)
    assert rank_metric(
        [e for e in entries_from_submissions([(Path("old.json"), sub("old", {"t": {"iou": old}}))])]
    ) == {"old": (None, "not ranked: no per-sample values")}


# ----------------------------------------------------------------------------- families


def _three(label: str, rho: float | None, q5_ranking: bool = False, sanity: bool = False, track: str = "t") -> list:
    """a, b, c on 10 samples with constant values, so every comparison is strict:
    iou (higher) a 0.9 > b 0.5 > c 0.1 -> ranks 1, 2, 3; deletion (lower) b 0.1 < a 0.2 < c 0.3
    -> b 1, a 2, c 3; pasta_q1 (higher) c 4 > b 3 > a 2 -> c 1, b 2, a 3 (when ranked);
    pasta_q5 (lower, shown only); model_randomisation (sanity): a 0.8, b 0.1, c 0.5."""
    params = {"label": label, "heldout_q1_spearman": rho}
    values = {
        "a": (0.9, 0.2, 2.0, 1.0, 0.8),
        "b": (0.5, 0.1, 3.0, 2.0, 0.1),
        "c": (0.1, 0.3, 4.0, 3.0, 0.5),
    }
    out = []
    for x, (iou, deletion, q1, q5, mr) in values.items():
        metrics = {
            "iou": block(const(iou)),
            "deletion": block(const(deletion), family="faithfulness", direction="lower"),
            "pasta_q1": block(const(q1), family="perceptual", params=params),
            "pasta_q5": block(const(q5), family="perceptual", direction="lower", ranking=q5_ranking, params=params),
        }
        if sanity:
            metrics["model_randomisation"] = block(const(mr), family="sanity", direction="lower", ranking=False)
        out.append(sub(x, {track: metrics}))
    return out


def test_a_proxy_perceptual_family_is_shown_labelled_and_left_out_of_the_overall_rank() -> None:
    board = board_of(*_three(PROXY, -0.23))
    rows = rows_of(board)
    reason = "proxy checkpoint, held-out Q1 technique-level Spearman -0.23 < 0.3"
    assert board.families["t"]["perceptual"] == {"ranked": False, "reason": reason, "label": PROXY}
    for x in "abc":
        assert rows[(x, "pasta_q1")]["rank"] is None and rows[(x, "pasta_q1")]["status"] == f"not ranked: {reason}"
        assert rows[(x, "rank:perceptual")]["rank"] is None
        assert rows[(x, "rank:perceptual")]["status"] == f"not ranked: {reason}"
        for m in ("pasta_q1", "pasta_q5", "rank:perceptual"):
            assert rows[(x, m)]["label"] == PROXY
        assert rows[(x, "iou")]["label"] == rows[(x, "rank:overall")]["label"] == ""
    # overall = mean of the alignment and faithfulness family ranks: a (1 + 2) / 2, b (2 + 1) / 2, c 3
    assert [rows[(x, "rank:overall")]["value"] for x in "abc"] == [1.5, 1.5, 3.0]
    assert [rows[(x, "rank:overall")]["rank"] for x in "abc"] == [1, 1, 3]
    md = to_markdown(board)
    assert md_escape(f"perceptual (not ranked: {reason}) [{PROXY}]") in md
    assert board_of(*_three(PROXY, None)).families["t"]["perceptual"]["reason"] == (
        "proxy checkpoint, held-out Q1 technique-level Spearman not reported"
    )


@pytest.mark.parametrize(("label", "rho"), [("PASTA", None), (PROXY, 0.35)])
def test_a_valid_perceptual_family_enters_the_overall_rank(label: str, rho: float | None) -> None:
    board = board_of(*_three(label, rho, q5_ranking=True))
    rows = rows_of(board)
    assert board.families["t"]["perceptual"] == {"ranked": True, "reason": None, "label": label}
    assert [rows[(x, "pasta_q1")]["rank"] for x in "abc"] == [3, 2, 1]
    # overall: a (1 + 2 + 3) / 3 = 2, b (2 + 1 + 2) / 3 = 5/3, c (3 + 3 + 1) / 3 = 7/3
    assert [rows[(x, "rank:overall")]["value"] for x in "abc"] == pytest.approx([2.0, 5 / 3, 7 / 3])
    assert [rows[(x, "rank:overall")]["rank"] for x in "abc"] == [2, 1, 3]
    # Q5 is lower-is-better and never ranked, even from a file that says ranking = true
    for x in "abc":
        q5 = rows[(x, "pasta_q5")]
        assert (q5["direction"], q5["rank"], q5["status"], q5["label"]) == (
            "lower",
            None,
            "not ranked: shown only",
            label,
        )
    assert "pasta_q5" not in board.ranking_metrics["t"]


def test_the_sanity_family_flags_insensitive_explainers_and_never_ranks() -> None:
    plain = rows_of(board_of(*_three(PROXY, -0.23)))
    board = board_of(*_three(PROXY, -0.23, sanity=True))
    rows = rows_of(board)
    assert [rows[(x, "rank:overall")]["rank"] for x in "abc"] == [plain[(x, "rank:overall")]["rank"] for x in "abc"]
    assert not any(m == "rank:sanity" for _, m in rows)
    assert board.families["t"]["sanity"]["ranked"] is False
    for x in "abc":
        assert rows[(x, "model_randomisation")]["rank"] is None
        assert rows[(x, "model_randomisation")]["status"] == "not ranked: sanity check"
    # a: 0.8 > 0.5 flagged; c: exactly 0.5 is not above; b: 0.1
    assert [board.explainers[x]["flags"]["t"] for x in "abc"] == [["insensitive to the model"], [], []]
    assert rows[("a", "rank:overall")]["flags"] == "insensitive to the model"
    assert (
        rows[("a", "rank:alignment")]["flags"] == rows[("a", "rank:perceptual")]["flags"] == "insensitive to the model"
    )
    assert rows[("b", "rank:overall")]["flags"] == rows[("c", "rank:overall")]["flags"] == ""
    assert md_escape("a (flag: insensitive to the model)") in to_markdown(board)


def test_mean_win_rate_across_tracks() -> None:
    # t1 (proxy, gated): overall a 1, b 1, c 3; t2 (PASTA): b 1, a 2, c 3.
    # win rates: a t1 (1 + 0.5) / 2 = 0.75, t2 1 / 2 = 0.5 -> 0.625; b 0.75, 1.0 -> 0.875; c 0, 0 -> 0
    one, two = _three(PROXY, -0.23, track="t1"), _three("PASTA", None, track="t2")
    merged = [{**s1, "tracks": {**s1["tracks"], **s2["tracks"]}} for s1, s2 in zip(one, two, strict=True)]
    board = board_of(*merged)
    summary = board.summary["explainers"]
    assert summary["a"] == {"mean_win_rate": 0.625, "tracks": 2, "overall_ranks": {"t1": 1, "t2": 2}}
    assert summary["b"]["mean_win_rate"] == 0.875 and summary["c"]["mean_win_rate"] == 0.0
    assert board.summary["order"] == ["b", "a", "c"]
    assert set(board.families) == {"t1", "t2"}


# ----------------------------------------------------------------------------- files


def test_csv_and_json_columns_and_shape() -> None:
    board = board_of(*_three(PROXY, -0.23, sanity=True))
    header = next(csv.reader(io.StringIO(to_csv(board.rows))))
    assert header == [
        "track", "explainer", "metric", "family", "direction", "value", "ci_low", "ci_high", "n", "n_na", "rank",
        "status", "label", "flags",
    ]  # fmt: skip
    assert tuple(header) == CSV_COLUMNS
    data = board_json(board)
    assert data["schema"] == "xaibench.leaderboard/2"
    assert data["rules"] == {
        "min_shared_samples": 8,
        "na_flag_fraction": 0.25,
        "perceptual_min_spearman": 0.3,
        "sanity_flag_above": 0.5,
    }
    assert set(data) >= {"rows", "tracks", "families", "explainers", "summary"}
    assert data["explainers"]["a"]["verification"] is None
    assert all(set(r) == set(CSV_COLUMNS) for r in data["rows"])
    json.dumps(data)  # plain JSON


def _write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    assert validate_file(path) == [], path
    return path


def test_two_submissions_of_the_same_explainer_params_and_track_are_an_error_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sub("gradient", {"t": {"iou": block(const(0.5))}})
    _write(tmp_path / "s", "gradient.json", data)
    _write(tmp_path / "s", "gradient-copy.json", data)
    _write(tmp_path / "s", "other.json", sub("other", {"t": {"iou": block(const(0.1))}}))
    with pytest.raises(XaibenchError, match=r"gradient-copy\.json and .*gradient\.json"):
        build_leaderboard(tmp_path / "s")
    with pytest.raises(SystemExit) as exit_info:
        main(["leaderboard", "build", "--submissions", str(tmp_path / "s"), "--out", str(tmp_path / "lb"), "--no-site"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.search(r"/gradient-copy\.json and .*/gradient\.json;", err), err
    # other parameters: another entry, not a duplicate
    _write(tmp_path / "s", "gradient-copy.json", sub("gradient", {"t": {"iou": block(const(0.5))}}, params={"x": 1}))
    assert {r["explainer"] for r in build_leaderboard(tmp_path / "s").rows} == {"gradient", "gradient-copy", "other"}


def test_a_later_created_date_no_longer_supersedes_two_files_of_one_explainer_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    early = sub(
        "gradient", {"t": {"iou": block(const(0.2))}, "u": {"iou": block(const(0.2))}}, created="2026-01-01T00:00:00Z"
    )
    late = sub("gradient", {"t": {"iou": block(const(0.7))}}, created="2026-02-01T00:00:00+00:00")
    _write(tmp_path, "gradient.json", early)
    _write(tmp_path, "gradient-v2.json", late)
    _write(tmp_path, "other.json", sub("other", {"t": {"iou": block(const(0.5))}, "u": {"iou": block(const(0.5))}}))
    with pytest.raises(XaibenchError, match=r"gradient-v2\.json and .*gradient\.json") as info:
        build_leaderboard(tmp_path)
    message = str(info.value)
    assert "\n" not in message and "'created' date does not choose" in message, message
    with pytest.raises(SystemExit) as exit_info:
        main(["leaderboard", "build", "--submissions", str(tmp_path), "--out", str(tmp_path / "lb"), "--no-site"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.search(r"/gradient-v2\.json and .*/gradient\.json;", err), err
