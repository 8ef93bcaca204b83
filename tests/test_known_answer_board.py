"""A track scored against a known answer (DESIGN 11): the ``ground_truth`` family alone makes the
overall rank, the proxies are shown and ranked within their families as diagnoses; and the exact
reference map the ``oracle`` draws there."""

from __future__ import annotations

import numpy as np

from xaibench.api import GroundTruth
from xaibench.explainers.baselines import exact_attribution
from xaibench.publish.leaderboard import DIAGNOSIS_STATUS, Entry, known_answer_diagnosis, rank_track

IDS = [f"s{k}" for k in range(10)]


def entry(explainer: str, metric: str, value: float, family: str, direction: str = "higher") -> Entry:
    return Entry("t", explainer, metric, family, direction, True, value, value, value, 10, 0, dict.fromkeys(IDS, value))


# a wins the known answer; b wins both proxies (deletion: lower is better; perception)
ENTRIES = [
    entry("a", "gt_mass_inside", 0.9, "ground_truth"),
    entry("b", "gt_mass_inside", 0.2, "ground_truth"),
    entry("a", "deletion", 0.5, "faithfulness", "lower"),
    entry("b", "deletion", 0.1, "faithfulness", "lower"),
    entry("a", "pasta_q1", 0.1, "perceptual"),
    entry("b", "pasta_q1", 0.8, "perceptual"),
]


def test_on_a_known_answer_track_only_the_ground_truth_family_ranks_overall() -> None:
    ranking = rank_track("t", ENTRIES)
    rows = {(r["explainer"], r["metric"]): r for r in ranking.rows}
    assert (rows[("a", "rank:overall")]["rank"], rows[("a", "rank:overall")]["value"]) == (1, 1.0)
    assert (rows[("b", "rank:overall")]["rank"], rows[("b", "rank:overall")]["value"]) == (2, 2.0)
    # the proxy is still ranked within its family, marked a diagnosis
    assert rows[("b", "deletion")]["rank"] == 1 and rows[("b", "rank:faithfulness")]["rank"] == 1
    assert rows[("b", "rank:faithfulness")]["status"] == DIAGNOSIS_STATUS
    assert ranking.families["faithfulness"]["ranked"] is False
    assert "known answer" in str(ranking.families["faithfulness"]["reason"])
    assert ranking.families["ground_truth"]["ranked"] is True
    # without the ground_truth family the same proxies decide: b first
    plain = {(r["explainer"], r["metric"]): r for r in rank_track("t", ENTRIES[2:]).rows}
    assert plain[("b", "rank:overall")]["rank"] == 1 and plain[("a", "rank:overall")]["rank"] == 2


def test_the_rule_needs_a_ranking_ground_truth_metric() -> None:
    assert known_answer_diagnosis(ENTRIES[2:]) == {}
    shown_only = Entry("t", "a", "gt_x", "ground_truth", "higher", False, 1, 1, 1, 10, 0, {})
    assert known_answer_diagnosis([shown_only, *ENTRIES[2:]]) == {}
    all_na = Entry("t", "a", "gt_pointing", "ground_truth", "higher", True, None, None, None, 10, 10, {})
    assert known_answer_diagnosis([all_na, *ENTRIES[2:]]) == {}  # an ordinary track, where it is n/a
    assert set(known_answer_diagnosis(ENTRIES)) == {"alignment", "faithfulness", "perceptual"}


def test_the_exact_attribution_sums_to_each_regions_contribution_inside_a_star() -> None:
    # 2 x 6 image, three regions: 1 = columns 0-1, 2 = columns 2-3, 3 = columns 4-5 (zero contribution)
    regions = np.array([[1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 3, 3]])
    mask = np.zeros((2, 6), dtype=bool)
    mask[0, 0] = True  # region 1's evidence: one pixel
    mask[:, 2:4] = True  # region 2's evidence: its four pixels
    truth = GroundTruth(mask=mask, regions=regions, contributions=np.array([3.0, -2.0, 0.0]))
    got = exact_attribution(truth)
    expected = np.array([[3.0, 0, -0.5, -0.5, 0, 0], [0, 0, -0.5, -0.5, 0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(got, expected)
    sums = np.bincount(regions.ravel(), weights=got.ravel().astype(float), minlength=4)[1:]
    np.testing.assert_allclose(sums, [3.0, -2.0, 0.0])
    assert np.abs(got[~mask]).sum() == 0.0
    # a region with a contribution but no pixel in A* spreads it over the whole region
    truth = GroundTruth(mask=np.zeros((2, 6), bool), regions=regions, contributions=np.array([4.0, 0.0, 0.0]))
    np.testing.assert_array_equal(exact_attribution(truth)[:, :2], np.ones((2, 2)))
