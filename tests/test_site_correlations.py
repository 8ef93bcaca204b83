"""The correlations page's "Human ratings against metrics" section (issue 16, part 5).

Its correlations must equal ``scipy.stats.spearmanr`` on the tables, computed here independently
(the CSVs read with :mod:`csv` and joined by hand). A small synthetic ``pasta-paper`` folder makes
the page testable without the shared data; the tests on the real tables skip when
``../shared/data/pasta-paper`` is absent. Without any table, the section is one line.
"""

from __future__ import annotations

import csv
import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _site_data import write_submissions
from scipy.stats import pearsonr, spearmanr

from xaibench.errors import XaibenchError
from xaibench.metaeval.human_ratings import MISSING_LINE
from xaibench.pasta.paper_tables import PAPER_DIR_ENV, find_paper_dir, load_paper_tables
from xaibench.site import build_site

SHARED_PAPER = Path(__file__).resolve().parents[2] / "shared" / "data" / "pasta-paper"
needs_shared = pytest.mark.skipif(
    not (SHARED_PAPER / "human_ratings_by_technique.csv").is_file(),
    reason=f"the shared PASTA paper tables are not at {SHARED_PAPER} (../shared/data/pasta-paper)",
)
HUMANS = ("fidelity_q1", "complexity_q2_q3", "objectivity_q4", "robustness_q5_q6")
METRICS = {
    "road_faithfulness": "faithfulness_road",
    "max_sensitivity": "robustness_gaussian",
    "sparseness": "sparseness",
}
# The site fixture's explainers renamed to explainers the table maps to (gamma has no sparseness).
RENAMED = {"alpha": "gradcam", "beta": "lime", "gamma": "scorecam", "tuned-net": "eigencam"}
TECHNIQUE = {"gradcam": "GradCAM", "lime": "LIME", "scorecam": "ScoreCAM", "eigencam": "EigenCAM"}


# ----------------------------------------------------------------------------- helpers


class _Tables(HTMLParser):
    """Rows of every table with an id (or data-track / data-track-versus): key -> [(row attrs, [cell text])]."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[tuple[dict[str, str | None], list[str]]]] = {}
        self._table: str | None = None
        self._row: tuple[dict[str, str | None], list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            key = a.get("id") or (f"track:{a['data-track']}" if a.get("data-track") else None)
            key = key or (f"versus:{a['data-track-versus']}" if a.get("data-track-versus") else None)
            self._table = key
            if key:
                self.tables[key] = []
        elif tag == "tr" and self._table:
            self._row = (a, [])
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row[1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(html: str) -> dict[str, list[tuple[dict[str, str | None], list[str]]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def _body(rows: list[tuple[dict[str, str | None], list[str]]]) -> dict[str, list[str]]:
    """data-metric -> cells of the table's body rows."""
    return {str(a["data-metric"]): cells for a, cells in rows if a.get("data-metric")}


def _shown(rho: float) -> str:
    return "n/a" if rho != rho else f"{rho:+.2f}"


def _read_csv(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return {(r["technique"], r["backbone"]): r for r in csv.DictReader(fh)}


def _joined(folder: Path) -> list[tuple[dict[str, str], dict[str, str]]]:
    ratings = _read_csv(folder / "human_ratings_by_technique.csv")
    metrics = _read_csv(folder / "metrics_by_technique.csv")
    return [(ratings[k], metrics[k]) for k in ratings if k in metrics]


def _subs(root: Path) -> Path:
    subs = write_submissions(root / "subs")
    for old, new in RENAMED.items():
        path = subs / f"{old}.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["explainer"]["name"] = new
        path.write_text(json.dumps(data), encoding="utf-8")
    return subs


def _build(root: Path, paper_dir: Path | None = None) -> str:
    build_site(_subs(root), root / "site", validate=False, paper_dir=paper_dir)
    return (root / "site" / "correlations.html").read_text(encoding="utf-8")


def _write_paper(folder: Path, ratings: list[list[object]], metrics: list[list[object]], readme: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    head = "technique,backbone,explanation_type,fidelity_q1,complexity_q2_q3,objectivity_q4,robustness_q5_q6,"
    lines = [head + "transcription_note"] + [",".join(map(str, r)) for r in ratings]
    (folder / "human_ratings_by_technique.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    mhead = "technique,backbone," + ",".join(f"{c}_{s}" for c in METRICS.values() for s in ("mean", "std"))
    (folder / "metrics_by_technique.csv").write_text(
        "\n".join([mhead] + [",".join(map(str, r)) for r in metrics]) + "\n", encoding="utf-8"
    )
    if readme:
        (folder / "README.md").write_text(readme, encoding="utf-8")
    return folder


# A synthetic table: six techniques on one backbone, known ranks.
SYN_RATINGS = [
    ["GradCAM", "R", "saliency", 2.0, 2.1, 2.2, 4.0, ""],
    ["LIME", "R", "saliency", 3.5, 3.0, 3.1, 3.0, ""],
    ["ScoreCAM", "R", "saliency", 3.0, 2.5, 2.4, 3.5, ""],
    ["EigenCAM", "R", "saliency", 4.0, 3.9, 3.8, 2.5, ""],
    ["SHAP", "R", "saliency", 1.5, 1.5, 1.6, 4.5, "a note"],
    ["Other", "R", "saliency", 2.5, 2.6, 2.7, 3.9, ""],
]
SYN_METRICS = [
    ["GradCAM", "R", 0.10, 0.1, 0.9, 0.2, 0.70, 0.1],
    ["LIME", "R", 0.30, 0.1, 0.5, 0.2, 0.20, 0.1],
    ["ScoreCAM", "R", 0.20, 0.1, 0.8, 0.2, 0.50, 0.1],
    ["EigenCAM", "R", 0.40, 0.1, 0.4, 0.2, 0.60, 0.1],
    ["SHAP", "R", 0.05, 0.1, 1.2, 0.2, 0.40, 0.1],
    ["Other", "R", 0.25, 0.1, 0.7, 0.2, 0.30, 0.1],
]
README = "Correlation between ROAD faithfulness and human Q1 scores: Pearson 0.01, Spearman -0.04.\n"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XAIBENCH_DATA_DIR", raising=False)
    monkeypatch.delenv(PAPER_DIR_ENV, raising=False)


def _check_against(html: str, folder: Path) -> None:
    """Every cell of the "each metric against each human rating" table equals scipy on the CSVs."""
    joined = _joined(folder)
    body = _body(_tables(html)["human-against"])
    assert set(body) == set(METRICS)
    for metric, column in METRICS.items():
        x = [float(m[f"{column}_mean"]) for _, m in joined]
        for i, human in enumerate(HUMANS):
            rho = spearmanr(x, [float(r[human]) for r, _ in joined]).statistic
            assert body[metric][1 + i] == _shown(rho), (metric, human)
        r_q1 = pearsonr(x, [float(r["fidelity_q1"]) for r, _ in joined]).statistic
        assert body[metric][5] == _shown(r_q1)
        assert body[metric][7] == str(len(joined))


# ----------------------------------------------------------------------------- with a table (synthetic)


def test_the_page_finds_the_tables_through_xaibench_data_dir_and_equals_scipy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    folder = _write_paper(tmp_path / "data" / "pasta-paper", SYN_RATINGS, SYN_METRICS, README)
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(tmp_path / "data"))
    html = _build(tmp_path)
    assert MISSING_LINE not in html
    _check_against(html, folder)
    # Hand-checked: faithfulness ranks 2,5,3,6,1,4 against fidelity ranks 2,5,4,6,1,3: d^2 = 2, rho = 1 - 6*2/210.
    assert _body(_tables(html)["human-against"])["road_faithfulness"][1] == _shown(1 - 12 / 210) == "+0.94"
    # The paper's Table 1 figure, as the README records it.
    assert "ρ -0.04, r +0.01 (with Q1, per image)" in unescape(html)


def test_our_metrics_on_each_track_against_human_q1_equal_scipy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    from _site_data import MEANS

    folder = _write_paper(tmp_path / "pp", SYN_RATINGS, SYN_METRICS)
    monkeypatch.setenv(PAPER_DIR_ENV, str(folder))
    html = _build(tmp_path)
    tables = _tables(html)
    q1 = {r[0]: float(r[3]) for r in SYN_RATINGS}
    for track in ("synth-a", "synth-b"):
        values = tables[f"track:{track}"]
        shown = {cells[0]: cells for _, cells in values[1:]}
        assert set(shown) == {TECHNIQUE[e] for e in RENAMED.values()}  # only mapped explainers, one row each
        assert shown["GradCAM"][1] == "gradcam" and shown["GradCAM"][2] == "2.00"
        versus = _body(tables[f"versus:{track}"])
        for metric in ("pasta_q1", "deletion", "sparseness"):
            pairs = [(MEANS[k][metric], q1[TECHNIQUE[e]]) for k, e in RENAMED.items() if MEANS[k][metric] is not None]
            rho = spearmanr([a for a, _ in pairs], [b for _, b in pairs]).statistic
            assert versus[metric][2] == _shown(rho), (track, metric)
            assert versus[metric][3] == str(len(pairs))
        # sparseness is also one of the paper's metrics: its rho on the same techniques is shown beside ours.
        techniques = [TECHNIQUE[e] for k, e in RENAMED.items() if MEANS[k]["sparseness"] is not None]
        paper = {r[0]: float(r[6]) for r in SYN_METRICS}
        rho = spearmanr([paper[t] for t in techniques], [q1[t] for t in techniques]).statistic
        assert versus["sparseness"][4] == f"{_shown(rho)} (n = {len(techniques)})"
        assert versus["deletion"][4] == "–"


def test_an_unreadable_table_found_in_the_environment_is_one_line_and_an_explicit_one_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    bad = [[*SYN_RATINGS[0][:3], 7.5, *SYN_RATINGS[0][4:]]]  # fidelity 7.5 is outside 1..5
    folder = _write_paper(tmp_path / "data" / "pasta-paper", bad, SYN_METRICS)
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(tmp_path / "data"))
    html = unescape(_build(tmp_path / "a"))
    line = re.search(r'id="human-ratings-missing">([^<]*)<', html)
    assert line is not None and "fidelity_q1 = 7.5 is outside 1..5" in line.group(1)
    assert "human_ratings_by_technique.csv:2" in line.group(1) and 'id="human-against"' not in html
    with pytest.raises(XaibenchError, match=r"human_ratings_by_technique.csv:2: fidelity_q1 = 7.5 is outside 1..5"):
        _build(tmp_path / "b", paper_dir=folder)
    monkeypatch.setenv(PAPER_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(XaibenchError, match=r"XAIBENCH_DATA_PASTA_PAPER=.*nowhere: no such folder"):
        find_paper_dir()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r, m: ([*r, r[0]], m), r"human_ratings_by_technique.csv:8: GradCAM \(R\) appears twice"),
        (lambda r, m: (r, [[*m[0][:2], "x", *m[0][3:]]]), r"metrics_by_technique.csv:2: faithfulness_road_mean is not"),
    ],
)
def test_bad_tables_name_the_file_and_line(tmp_path: Path, edit: object, message: str) -> None:
    ratings, metrics = edit(SYN_RATINGS, SYN_METRICS)  # type: ignore[operator]
    with pytest.raises(XaibenchError, match=message):
        load_paper_tables(_write_paper(tmp_path / "pp", ratings, metrics))


# ----------------------------------------------------------------------------- without a table


def test_without_the_tables_the_section_is_one_line(tmp_path: Path, no_env: None) -> None:
    html = _build(tmp_path)
    start = html.index('id="human-ratings"')
    section = html[start : html.index("</section>", start)]
    assert section.count("<p") == 1 and unescape(MISSING_LINE) in unescape(section)
    assert "XAIBENCH_DATA_DIR" in MISSING_LINE and "--data-dir" in MISSING_LINE
    assert 'id="human-against"' not in html and 'href="#human-ratings"' in html


# ----------------------------------------------------------------------------- the shared tables


@needs_shared
def test_the_shared_tables_give_scipys_correlations(tmp_path: Path, no_env: None) -> None:
    html = _build(tmp_path, paper_dir=SHARED_PAPER)
    _check_against(html, SHARED_PAPER)
    # Hand-check: ROAD faithfulness against fidelity (Q1) over the 37 saliency rows with both.
    joined = _joined(SHARED_PAPER)
    assert len(joined) == 37
    faithfulness = [float(m["faithfulness_road_mean"]) for _, m in joined]
    rho = spearmanr(faithfulness, [float(r["fidelity_q1"]) for r, _ in joined])
    assert _body(_tables(html)["human-against"])["road_faithfulness"][1] == _shown(rho.statistic) == "+0.30"
    readme = (SHARED_PAPER / "README.md").read_text(encoding="utf-8")
    assert "Pearson 0.01, Spearman -0.04" in readme and "ρ -0.04, r +0.01" in unescape(html)
    # Within each backbone (ResNet50, ViT-B, CLIP-zero-shot have at least three rows; BCos one).
    backbones = _tables(html)["human-backbones"]
    head = backbones[0][1]
    assert head[1:] == ["ResNet50 (n = 13)", "ViT-B (n = 13)", "CLIP-zero-shot (n = 10)"]
    sparse = _body(backbones)["sparseness"]
    for i, backbone in enumerate(("ResNet50", "ViT-B", "CLIP-zero-shot")):
        pairs = [(float(m["sparseness_mean"]), float(r["fidelity_q1"])) for r, m in joined if r["backbone"] == backbone]
        assert sparse[1 + i] == _shown(spearmanr(*zip(*pairs, strict=True)).statistic)
    # The per-technique figures: every row of both tables, mapped explainers named.
    figures = {(c[0], c[1]): c for _, c in _tables(html)["human-figures"][1:]}
    assert len(figures) == 46 and figures[("GradCAM", "ResNet50")][10] == "gradcam"
    assert figures[("LIME", "ViT-B")][3] == "3.06" and figures[("BCos", "ResNet50-BCos")][10] == "–"


@needs_shared
def test_the_shared_folder_is_found_from_xaibench_data_dir(monkeypatch: pytest.MonkeyPatch, no_env: None) -> None:
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED_PAPER.parent))
    assert find_paper_dir() == SHARED_PAPER
    tables = load_paper_tables(SHARED_PAPER)
    assert tables.table1 == {"pearson": 0.01, "spearman": -0.04}
    assert {r.technique for r in tables.rows if r.note} == {"GradCAMElementWise", "HiResCAM"}
