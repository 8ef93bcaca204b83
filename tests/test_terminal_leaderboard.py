"""The terminal leaderboard at 120 columns, and parameter variants shown by their parameters.

The board imitates the default suite's: three tracks, its long metric ids (``mass_accuracy``,
``pointing_game``, ``road_faithfulness``...), eight explainers, a perceptual family from a proxy
checkpoint (shown, not ranked), the sanity metric, and ``zennit-lrp`` twice: with its default
parameters (``zennit-lrp.json``) and as a variant (``zennit-lrp@<digest>.json``, epsilon=0.25).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from xaibench.publish.board import Leaderboard, board_json, build_board
from xaibench.publish.leaderboard import explainer_labels
from xaibench.publish.submission import SUBMISSION_SCHEMA
from xaibench.publish.writers import print_leaderboard, to_csv, to_markdown

WIDTH = 120
DIGEST = "2ed4e548330e"
VARIANT = f"zennit-lrp@{DIGEST}"
PROXY = "PASTA (proxy, technique-level labels)"
# metric id -> (family, direction, ranking), per track, in the default suite's style
SHAPES = {
    "iou": ("alignment", "higher", True),
    "mae": ("alignment", "lower", True),
    "mass_accuracy": ("alignment", "higher", True),
    "pointing_game": ("alignment", "higher", True),
    "deletion": ("faithfulness", "lower", True),
    "insertion": ("faithfulness", "higher", True),
    "road_faithfulness": ("faithfulness", "higher", True),
    "pasta_q1": ("perceptual", "higher", True),
    "model_randomisation": ("sanity", "lower", False),
}
TRACKS = {
    "shapes": SHAPES,
    "shapes-shortcut": {k: v for k, v in SHAPES.items() if k not in ("insertion", "road_faithfulness")},
    "photos": {k: SHAPES[k] for k in ("deletion", "insertion", "pasta_q1", "model_randomisation")},
}
EXPLAINERS: dict[str, dict[str, Any]] = {
    "gradcam": {"aug_smooth": False, "eigen_smooth": False, "reshape": "model"},
    "gradient": {"absolute": True},
    "integrated-gradients": {"n_steps": 32, "baseline": "black"},
    "sobel": {},
    "center": {"sigma": 0.25},
    "random": {},
    "oracle": {},
    "zennit-lrp": {"epsilon": 1e-6, "composite": "epsilon_plus"},
    VARIANT: {"epsilon": 0.25, "composite": "epsilon_plus"},
}
N = 12


def _metric(family: str, direction: str, ranking: bool, mean: float) -> dict[str, Any]:
    samples = {f"s{i}": mean + 0.01 * ((i * 7) % 5 - 2) for i in range(N)}
    params = {"label": PROXY, "heldout_q1_spearman": -0.23} if family == "perceptual" else {}
    return {
        "family": family,
        "direction": direction,
        "ranking": ranking,
        "params": params,
        "mean": mean,
        "ci_low": mean - 0.02,
        "ci_high": mean + 0.02,
        "n": N,
        "n_na": 0,
        "samples": samples,
    }


def _submission(key: str, k: int) -> dict[str, Any]:
    name = key.split("@")[0]
    tracks = {}
    for t, (track, metrics) in enumerate(TRACKS.items()):
        tracks[track] = {
            "provenance": {"model": {"name": "shapes-cnn"}, "dataset": {"name": track}, "n_samples": N},
            "metrics": {
                m: _metric(*spec, mean=0.1 + 0.07 * ((k * 3 + i + t) % 9) + (0.4 if m == "model_randomisation" else 0))
                for i, (m, spec) in enumerate(metrics.items())
            },
        }
    return {
        "schema": SUBMISSION_SCHEMA,
        "explainer": {"name": name, "params": EXPLAINERS[key], "params_digest": DIGEST if "@" in key else f"d{k}"},
        "disclosure": {"reference_only": name == "oracle", "tuned_on_benchmark": False, "notes": ""},
        "created": "2026-01-01T00:00:00+00:00",
        "tracks": tracks,
    }


@pytest.fixture(scope="module")
def board() -> Leaderboard:
    return build_board([(Path(f"{key}.json"), _submission(key, k)) for k, key in enumerate(EXPLAINERS)])


def _printed(board: Leaderboard, width: int = WIDTH, **kw: Any) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    print_leaderboard(board, console, **kw)
    return console.export_text().splitlines()


def _words(board: Leaderboard) -> set[str]:
    """Every word a reader must see whole: metric ids, family names, explainer labels' words."""
    words = {"overall", "explainer", "alignment", "faithfulness", "perceptual", *TRACKS}
    words |= {m for ms in board.ranking_metrics.values() for m in ms} | {"model_randomisation"}
    for info in board.explainers.values():
        words |= set(info["label"].split())
    return {w.strip("()[],;") for w in words}


def _tokens(line: str) -> list[str]:
    return [t.strip("()[],;!*") for t in re.split(r"[\s│┃|]+", line) if t.strip("()[],;!*")]


def _broken(lines: list[str], words: set[str]) -> list[str]:
    """Known words cut short (``gradie…``) or split across lines (``mass_ac`` above ``curacy``)."""
    out = []
    for i, line in enumerate(lines):
        below = _tokens(lines[i + 1]) if i + 1 < len(lines) else []
        for t in _tokens(line):
            for w in words:
                cut = t.endswith("…") and w.startswith(t[:-1]) and t[:-1] != w
                rest = w[len(t) :]
                split = (
                    t != w
                    and w.startswith(t)
                    and any(rest.startswith(u) and len(u) >= min(3, len(rest)) for u in below)
                )
                if cut or split:
                    out.append(f"{w!r} broken at {t!r} in {line.strip()!r}")
    return out


def test_the_compact_view_fits_120_columns_with_no_word_broken(board: Leaderboard) -> None:
    lines = _printed(board)
    too_wide = [line for line in lines if Text(line).cell_len > WIDTH]
    assert not too_wide, too_wide[0]
    assert not _broken(lines, _words(board)), _broken(lines, _words(board))[:5]
    for info in board.explainers.values():  # every name whole on one line
        assert any(info["label"] in line for line in lines), info["label"]
    text = "\n".join(lines)
    assert "zennit-lrp (epsilon=0.25)" in text  # the variant by its parameters
    assert DIGEST not in text
    # each track's table is short: a title, a header, one line per explainer, a few notes
    titles = [i for i, line in enumerate(lines) if re.match(r"^(shapes|shapes-shortcut|photos): ", line)]
    assert len(titles) == 3
    summary = next(i for i, line in enumerate(lines) if line.startswith("across tracks"))
    for start, end in zip(titles, [*titles[1:], summary], strict=True):
        assert end - start <= len(EXPLAINERS) + 12, lines[start:end]
    assert "zennit-lrp (epsilon=0.25)" in "\n".join(lines[summary:])  # the cross-track summary stays


def test_the_compact_view_keeps_overall_and_family_ranks_and_names_what_it_leaves_out(board: Leaderboard) -> None:
    text = "\n".join(_printed(board))
    shapes = text[text.index("shapes: ") : text.index("shapes-shortcut: ")]
    header = next(line for line in shapes.splitlines() if "overall" in line)
    assert re.search(r"overall\s.*explainer\s.*alignment\s.*faithfulness", header)
    assert "perceptual: not ranked" in shapes  # an unranked family is a note, not a column of dashes
    for metric in SHAPES:  # every metric is a column or named under the table
        assert metric in shapes, metric
    assert "not shown:" in shapes and "model_randomisation" in shapes.split("not shown:")[1]
    assert re.search(r"#\d=? \d\.\d{3}", shapes)  # metric cells: rank and mean
    assert "oracle (reference)" in shapes


def test_wide_shows_every_metric_column_with_intervals(board: Leaderboard) -> None:
    compact = "\n".join(_printed(board))
    wide = "\n".join(_printed(board, width=1000, wide=True))
    for track, metrics in TRACKS.items():
        section = wide[wide.index(f"{track}: ") :]
        header = next(line for line in section.splitlines() if "overall rank" in line)
        for metric in metrics:
            assert metric in header, (track, metric)
    assert re.search(r"\[\d\.\d{3}, \d\.\d{3}\]", wide) and not re.search(r"\[\d\.\d{3}, \d\.\d{3}\]", compact)
    assert "zennit-lrp (epsilon=0.25)" in wide
    assert "Ranks are per track and direction-aware" in wide  # the full legend


def test_the_variant_keeps_its_key_in_rows_csv_and_json(board: Leaderboard) -> None:
    data = board_json(board)
    assert data["explainers"][VARIANT]["label"] == "zennit-lrp (epsilon=0.25)"
    assert data["explainers"]["zennit-lrp"]["label"] == "zennit-lrp"
    assert {r["explainer"] for r in data["rows"]} == set(EXPLAINERS)
    csv_keys = {r["explainer"] for r in csv.DictReader(io.StringIO(to_csv(board.rows)))}
    assert VARIANT in csv_keys
    assert "zennit-lrp (epsilon=0.25)" in to_markdown(board)
    json.dumps(data)  # still serialisable


def _block(name: str, digest: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "params": params, "params_digest": digest}


def test_labels_show_what_sets_a_variant_apart() -> None:
    labels = explainer_labels(
        {
            "lrp": _block("lrp", "d0", epsilon=1e-6, composite="plus", gamma=0.25),
            "lrp@d1": _block("lrp", "d1", epsilon=0.25, composite="plus", gamma=0.25),
            "lrp@d2": _block("lrp", "d2", epsilon=1e-6, composite="alpha1beta0", gamma=0.25),
            "cam@e1": _block("cam", "e1", layer="layer4", smooth=True),  # no default file: all its parameters
            "cam@e2": _block("cam", "e2", layer="layer3", smooth=True),
            "solo@f1": _block("solo", "f1", k=3),
            "gradient": _block("gradient", "g0"),
        }
    )
    assert labels == {
        "lrp": "lrp",
        "lrp@d1": "lrp (epsilon=0.25)",
        "lrp@d2": "lrp (composite=alpha1beta0)",
        "cam@e1": "cam (layer=layer4)",
        "cam@e2": "cam (layer=layer3)",
        "solo@f1": "solo (k=3)",
        "gradient": "gradient",
    }


def test_labels_are_short_and_unique() -> None:
    many = {f"p{i}": i for i in range(6)}
    labels = explainer_labels(
        {
            "x@a": _block("x", "a", path="/a/very/long/checkpoint/path/model.pt", **many),
            "y@b": _block("y", "b", w=[1.5, 2.0], flag=True),
            "y@c": _block("y", "c", w=[1.5, 2.0], flag=True),  # same parameters, another digest
        }
    )
    assert labels["x@a"] == "x (path=/a/very/long/checkpoint…, p0=0, p1=1, …)"
    assert (labels["y@b"], labels["y@c"]) == ("y@b", "y@c")  # one label for two keys: the keys instead
    assert explainer_labels({"y@b": _block("y", "b", w=[1.5, 2.0], flag=True)}) == {"y@b": "y (w=[1.5,2.0], flag=true)"}


def test_the_site_shows_the_variant_by_its_parameters_and_keeps_its_key(tmp_path: Path) -> None:
    from xaibench.site import build_site

    subs = tmp_path / "subs"
    subs.mkdir()
    for k, key in enumerate(EXPLAINERS):
        (subs / f"{key}.json").write_text(json.dumps(_submission(key, k)), encoding="utf-8")
    build_site(subs, tmp_path / "site", validate=False)
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert ">zennit-lrp (epsilon=0.25)</a>" in index
    assert f'data-key="{VARIANT}"' in index  # rows are still keyed by the file stem
    page = next((tmp_path / "site" / "explainers").glob("zennit-lrp_*.html")).read_text(encoding="utf-8")
    assert "<h1>zennit-lrp (epsilon=0.25)" in page and DIGEST in page
