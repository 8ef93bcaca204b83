"""One table of family policy (issue 45): every family of ``api.Family`` has one row, in display
order; ranking follows the rows, family by family; and ``publish/`` and ``site/`` spell no
family's name, so a new family is a row, not a hunt through the branches that name the others.

The spelling check walks the source as the layer test walks imports: a string literal (docstrings
aside) whose whole value is a family's name, or ``rank:<family>`` / ``family:<family>``, is policy
written away from the table. A family named inside a sentence (a legend, a reason) is words,
written into the outputs byte for byte, and is allowed; so are the templates' sentences, but not a
quoted name there (a template that branches on a family).
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from xaibench.api import Family, Metric
from xaibench.errors import RegistrationError
from xaibench.families import BY_NAME, DEFAULT_FAMILY, POLICIES, UNKNOWN, FamilyPolicy, family_index, policy_of
from xaibench.plugins.manager import _check_metric
from xaibench.publish.board import track_diagnosis
from xaibench.publish.leaderboard import DIAGNOSIS_STATUS, Entry, known_answer_diagnosis, rank_track

PACKAGE = Path(__file__).resolve().parents[1] / "xaibench"
READERS = ("publish", "site")
NAMES = get_args(Family)
SPELLED = re.compile(rf"^(?:(?:rank|family):)?(?:{'|'.join(NAMES)})$")
QUOTED = re.compile(rf"""["'](?:(?:rank|family):)?(?:{"|".join(NAMES)})["']""")


def spellings(source: str) -> list[tuple[int, str]]:
    """(line, value) of each string literal in ``source`` that spells a family (docstrings and
    prose aside); the parts of an f-string count one by one."""
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return sorted(
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
        if SPELLED.match(n.value.strip())
    )


def test_every_family_has_one_row_in_display_order() -> None:
    assert tuple(p.name for p in POLICIES) == NAMES  # each once, in the order of api.Family
    assert tuple(BY_NAME) == NAMES and all(BY_NAME[p.name] is p for p in POLICIES)
    assert [family_index(f) for f in NAMES] == list(range(len(NAMES)))
    assert family_index("no such family") == len(NAMES) and policy_of("no such family") is UNKNOWN
    assert Metric.family == DEFAULT_FAMILY and DEFAULT_FAMILY in BY_NAME


def test_the_rows_are_consistent() -> None:
    for p in POLICIES:
        # counted, gated, known answers and cue diagnoses are about a family rank, which needs one
        assert p.ranked_within or not (p.counted_overall or p.needs_validity or p.known_answer or p.cue_diagnosis), p
        assert not (p.ranked_within and p.flags_explainers), p  # a flag family never ranks
        assert p.unranked_status == "" or p.unranked_status.startswith("not ranked: "), p
    # what DESIGN 3b, 4b, 10 and 11 say today, as rows
    counted = ["alignment", "faithfulness", "ground_truth", "perceptual"]
    assert [p.name for p in POLICIES if p.counted_overall] == counted
    assert [p.name for p in POLICIES if p.ranked_within and not p.counted_overall] == ["robustness"]
    assert [p.name for p in POLICIES if p.known_answer] == ["ground_truth"]
    assert [p.name for p in POLICIES if p.cue_diagnosis] == ["alignment"]
    assert [p.name for p in POLICIES if p.flags_explainers] == ["sanity"]
    assert [p.name for p in POLICIES if not p.note_unranked] == ["other"]


def _two_explainers(family: str) -> list[Entry]:
    """``a`` beats ``b`` on every one of 10 samples of one ranking metric of ``family``."""
    ids = [f"s{k}" for k in range(10)]
    return [
        Entry("t", x, "m", family, "higher", True, v, v, v, 10, 0, dict.fromkeys(ids, v), {"label": "PASTA"})
        for x, v in (("a", 0.9), ("b", 0.1))
    ]


@pytest.mark.parametrize("policy", [*POLICIES, UNKNOWN], ids=lambda p: p.name or "unknown")
def test_ranking_follows_the_row(policy: FamilyPolicy) -> None:
    family = policy.name or "no such family"
    ranking = rank_track("t", _two_explainers(family))
    rows = {(r["explainer"], r["metric"]): r for r in ranking.rows}
    assert (("a", f"rank:{family}") in rows) is policy.ranked_within
    assert rows[("a", "rank:overall")]["rank"] == (1 if policy.counted_overall else None)
    assert rows[("a", "m")]["rank"] == (1 if policy.ranked_within else None)
    assert ranking.families[family]["ranked"] is policy.ranked_within
    if not policy.ranked_within:
        assert rows[("a", "m")]["status"] == policy.unranked_status
        assert ranking.families[family]["reason"] == policy.unranked_reason
    # the checkpoint's label rides on the rows of a gated family only
    assert rows[("a", "m")]["label"] == ("PASTA" if policy.needs_validity else "")
    # a metric that is not a ranking one: never ranked, with the row's status
    shown = [replace(e, ranking=False) for e in _two_explainers(family)]
    row = next(r for r in rank_track("t", shown).rows if (r["explainer"], r["metric"]) == ("a", "m"))
    assert (row["rank"], row["status"]) == (None, policy.unranked_status)


def test_a_gated_family_without_a_valid_checkpoint_is_not_ranked() -> None:
    for policy in (p for p in POLICIES if p.needs_validity):
        entries = _two_explainers(policy.name)
        for e in entries:
            e.params = {"label": "proxy"}
        rows = {(r["explainer"], r["metric"]): r for r in rank_track("t", entries).rows}
        assert rows[("a", f"rank:{policy.name}")]["rank"] is None
        assert rows[("a", "m")]["status"].startswith("not ranked: proxy checkpoint")


def test_a_known_answer_makes_every_other_counted_family_a_diagnosis() -> None:
    for known in (p for p in POLICIES if p.known_answer):
        expected = {p.name for p in POLICIES if p.counted_overall and p is not known}
        diagnosis = known_answer_diagnosis(_two_explainers(known.name))
        assert set(diagnosis) == expected
        assert all(diagnosis[f] == known.known_answer.format(family=f) for f in expected)
        proxy = next(iter(sorted(expected)))
        proxies = [replace(e, metric="p", family=proxy) for e in _two_explainers(proxy)]
        entries = [*_two_explainers(known.name), *proxies]
        rows = {(r["explainer"], r["metric"]): r for r in rank_track("t", entries).rows}
        assert rows[("a", f"rank:{proxy}")]["status"] == DIAGNOSIS_STATUS


def test_a_cue_diagnosis_names_the_families_of_the_row() -> None:
    reliance = {"relies_on": "cue", "accuracy_without_cue": 0.25, "accuracy_without_object": 1}
    got = track_diagnosis({"cue_reliance": reliance})
    assert set(got) == {p.name for p in POLICIES if p.cue_diagnosis}
    assert all("accuracy 0.25 with the cue painted over, 1.00 with the object" in reason for reason in got.values())


def test_registration_refuses_a_family_without_a_row() -> None:
    class Stray(Metric):
        name = "stray"
        family = "stray"  # type: ignore[assignment]

    with pytest.raises(RegistrationError, match=re.escape(f"use one of {NAMES}")):
        _check_metric(Stray, "a-plugin")


def test_the_checker_finds_a_spelled_family_and_lets_prose_be() -> None:
    source = (
        '"""A docstring naming sanity."""\n'
        'if family == "sanity":\n'
        '    row = f"rank:perceptual {x}"\n'
        'x = {"alignment": 1}\n'
        'y = d.get("family", "other")\n'
        'z = "the robustness family is ranked within itself"\n'
        'w = "family:ground_truth"\n'
    )
    assert spellings(source) == [
        (2, "sanity"),
        (3, "rank:perceptual "),
        (4, "alignment"),
        (5, "other"),
        (7, "family:ground_truth"),
    ]
    assert QUOTED.search("{% if f == 'perceptual' %}") and not QUOTED.search("the perceptual family is ranked")


@pytest.mark.parametrize("folder", READERS)
def test_publish_and_site_spell_no_family(folder: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {value!r}"
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for line, value in spellings(path.read_text(encoding="utf-8"))
    ]
    found += [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path in sorted((PACKAGE / folder).rglob("*.j2"))
        for m in QUOTED.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"family names spelled outside xaibench/families.py (read a FamilyPolicy row): {found}"
