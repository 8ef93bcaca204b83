"""The ``ground_truth`` metric family (DESIGN 11): hand-computed oracles for every rule, the resize
path against ``resize_bilinear``, Spearman against scipy, the batch's shared work, the registry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from xaibench.api import GroundTruth, MetricInput, Sample, metric_value_range
from xaibench.explainers.baselines import exact_attribution
from xaibench.imaging import resize_bilinear
from xaibench.metrics.ground_truth import batch as gt_batch
from xaibench.metrics.ground_truth import formulas as gt
from xaibench.metrics.ground_truth.metrics import GROUND_TRUTH_METRICS
from xaibench.plugins.manager import Registry
from xaibench.suites.metric_selection import select_metrics

IDS = ("gt_mass_inside", "gt_pointing", "gt_rank_correlation", "gt_sign_agreement")
BY_NAME = {cls.name: cls for cls in GROUND_TRUTH_METRICS}

# ----------------------------------------------------------------------------- a 4 x 4 known answer

# A* = the top-left 2 x 2 block. Regions: 1 = top-left, 2 = bottom-right, 3 = top-right, 4 = bottom-left
# (each 2 x 2); contributions c = (2, -1, 0.5, 0).
MASK = np.zeros((4, 4), dtype=bool)
MASK[:2, :2] = True
REGIONS = np.array(
    [
        [1, 1, 3, 3],
        [1, 1, 3, 3],
        [4, 4, 2, 2],
        [4, 4, 2, 2],
    ]
)
CONTRIBUTIONS = np.array([2.0, -1.0, 0.5, 0.0])
KNOWN = GroundTruth(mask=MASK, regions=REGIONS, contributions=CONTRIBUTIONS)

E_SIGNED = np.array(
    [
        [4.0, -2.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, -3.0, 0.0],
        [0.0, 0.0, 0.0, 2.0],
    ],
    dtype=np.float32,
)
# |E| inside A* = 4 + 2 + 0 + 1 = 7, |E| total = 7 + 3 + 2 = 12             -> mass 7/12
# max |E| = 4 at (0, 0), inside A*, no tie                                   -> pointing 1
# region sums s = (4 - 2 + 1, -3 + 2, 0, 0) = (3, -1, 0, 0)
# average ranks of s = (4, 1, 2.5, 2.5), of c = (4, 1, 3, 2); mean 2.5
# dx = (1.5, -1.5, 0, 0), dy = (1.5, -1.5, 0.5, -0.5): sum dx dy = 4.5, sum dx^2 = 4.5, sum dy^2 = 5
#                                                       -> Spearman 4.5 / sqrt(22.5) = sqrt(0.9)
# nonzero contributions: regions 1 (+), 2 (-), 3 (+); sums 3 (+, agrees), -1 (-, agrees), 0 (agrees
# with no sign)                                                              -> sign agreement 2/3
ORACLE = {"gt_mass_inside": 7 / 12, "gt_pointing": 1.0, "gt_rank_correlation": np.sqrt(0.9), "gt_sign_agreement": 2 / 3}
NO_KNOWN_ANSWER = gt_batch.NO_KNOWN_ANSWER
ONE_SIGN = gt.ONE_SIGN


def binary(mask: np.ndarray, effect: float = 1.0) -> GroundTruth:
    """A binary A* as a known answer: regions [A* = 1, the rest = 2], contributions [effect, 0]."""
    return GroundTruth(mask=mask, regions=np.where(mask, 1, 2), contributions=np.array([effect, 0.0]))


def batch_of(saliency: np.ndarray, gts: list[GroundTruth | None]) -> MetricInput:
    samples = []
    for i, truth in enumerate(gts):
        size = truth.mask.shape if truth is not None and truth.mask is not None else saliency.shape[1:]
        samples.append(Sample(id=f"s{i}", image=np.zeros((*size, 3), np.float32), ground_truth=truth))
    return MetricInput(saliency=np.asarray(saliency), concepts=None, samples=samples, targets=np.zeros(len(gts), int))


def scores(batch: MetricInput) -> dict[str, tuple[np.ndarray, list[str | None]]]:
    """Every metric's values and reasons on ``batch`` (one memo, as the runner scores a batch)."""
    out = {}
    for name in IDS:
        o = BY_NAME[name]().score(batch)
        out[name] = (o.values, o.reasons)
    return out


def one(saliency: np.ndarray, truth: GroundTruth | None) -> dict[str, tuple[float, str | None]]:
    """Each metric's value and reason for one map (H x W) and its truth."""
    return {k: (float(v[0]), r[0]) for k, (v, r) in scores(batch_of(saliency[None], [truth])).items()}


# ----------------------------------------------------------------------------- hand-computed oracles


def test_the_hand_computed_oracle():
    got = one(E_SIGNED, KNOWN)
    for name, expected in ORACLE.items():
        assert got[name][1] is None, name
        assert got[name][0] == pytest.approx(expected, abs=1e-12), name


def test_the_sign_is_kept_not_clipped():
    # negating the map: magnitudes unchanged (mass, pointing), region sums negated (-3, 1, 0, 0):
    # ranks (1, 4, 2.5, 2.5) against c's (4, 1, 3, 2): dx = (-1.5, 1.5, 0, 0) -> Spearman -sqrt(0.9);
    # signs: region 1 -, region 2 +, region 3 0 -> no region agrees -> 0
    got = one(-E_SIGNED, KNOWN)
    assert got["gt_mass_inside"][0] == pytest.approx(7 / 12)
    assert got["gt_pointing"][0] == 1.0
    assert got["gt_rank_correlation"][0] == pytest.approx(-np.sqrt(0.9))
    assert got["gt_sign_agreement"][0] == 0.0


def test_an_unsigned_map_has_no_sign_agreement():
    # |E|: region sums (7, 5, 0, 0), ranks (4, 3, 1.5, 1.5) against (4, 1, 3, 2):
    # dx = (1.5, 0.5, -1, -1), dy = (1.5, -1.5, 0.5, -0.5): sum dx dy = 2.25 - 0.75 - 0.5 + 0.5 = 1.5,
    # sum dx^2 = 4.5, sum dy^2 = 5 -> 1.5 / sqrt(22.5) = sqrt(0.1)
    got = one(np.abs(E_SIGNED), KNOWN)
    assert got["gt_sign_agreement"][1] == "unsigned map"
    assert np.isnan(got["gt_sign_agreement"][0])
    assert got["gt_rank_correlation"] == (pytest.approx(np.sqrt(0.1)), None)
    assert got["gt_mass_inside"][0] == pytest.approx(7 / 12)


def test_mass_counts_magnitude_outside_the_mask():
    # 6 x 6, A* = the centre 2 x 2; |E| = 1 on A* (4 px), 2 at (0, 0) and -2 at (5, 5):
    # inside 4, total 4 + 4 = 8 -> 0.5; max |E| = 2 outside A* (tied twice, both outside) -> 0.
    # As a binary known answer (A* = region 1, c = 1; the rest = region 2, c = 0): sums (4, 2 - 2 = 0)
    # rank as c does -> 1; c has one sign -> sign agreement n/a
    mask = np.zeros((6, 6), dtype=bool)
    mask[2:4, 2:4] = True
    e = np.where(mask, 1.0, 0.0).astype(np.float32)
    e[0, 0], e[5, 5] = 2.0, -2.0
    got = one(e, binary(mask))
    assert got["gt_mass_inside"] == (0.5, None)
    assert got["gt_pointing"] == (0.0, None)
    assert got["gt_rank_correlation"] == (1.0, None)
    assert got["gt_sign_agreement"] == (pytest.approx(np.nan, nan_ok=True), ONE_SIGN)
    out = BY_NAME["gt_pointing"]().score(batch_of(e[None], [binary(mask)]))
    assert out.extras == [{"degenerate": False, "tied_maxima": 2}]


@pytest.mark.parametrize(
    ("where", "hit"),
    [
        ([(0, 0), (1, 1)], 1.0),  # both tied maxima inside A*: a hit
        ([(0, 0), (3, 3)], 0.0),  # the first in raster order is inside, the other outside: a miss
        ([(0, 3), (1, 0)], 0.0),  # the first in raster order is outside, the other inside: a miss
        ([(1, 0)], 1.0),  # one maximum, inside
        ([(2, 0)], 0.0),  # one maximum, outside
    ],
)
def test_pointing_ties_hit_only_when_every_maximum_is_inside(where, hit):
    e = np.full((4, 4), 0.25, dtype=np.float32)
    for k, (r, c) in enumerate(where):
        e[r, c] = 5.0 if k % 2 == 0 else -5.0  # tied in |E|, opposite signs
    out = BY_NAME["gt_pointing"]().score(batch_of(e[None], [KNOWN]))
    assert out.values[0] == hit and out.reasons == [None]
    assert out.extras[0]["tied_maxima"] == len(where)


@pytest.mark.parametrize("fill", [0.0, 3.0, -2.0])
def test_a_constant_or_empty_map_scores_the_worst_value(fill):
    got = one(np.full((4, 4), fill, dtype=np.float32), KNOWN)
    assert got == {
        "gt_mass_inside": (0.0, None),
        "gt_pointing": (0.0, None),
        "gt_rank_correlation": (-1.0, None),
        "gt_sign_agreement": (0.0, None),  # worst, not "unsigned map", even for an all-zero map
    }
    assert BY_NAME["gt_mass_inside"]().score(batch_of(np.full((1, 4, 4), fill), [KNOWN])).extras == [
        {"degenerate": True}
    ]


def test_a_constant_map_scores_the_worst_even_where_a_star_is_everything():
    # A* = every pixel: the definitions alone would give a constant 1-map mass 1 and a hit (every tied
    # maximum lies inside); the constant rule gives 0 and 0. A non-constant map scores 1 and 1.
    # Rank correlation: region 2 (the rest) has no pixel and sums to 0; the constant map scores -1,
    # the other's sums (15 + 2 = 17, 0) rank as c = (1, 0) does -> 1. c has one sign: sign agreement
    # is n/a on both, the constant map included (the one-sign rule comes before the worst value).
    everything = binary(np.ones((4, 4), bool))
    sal = np.ones((2, 4, 4), np.float32)
    sal[1, 2, 1] = 2.0
    got = scores(batch_of(sal, [everything, everything]))
    assert got["gt_mass_inside"][0].tolist() == [0.0, 1.0]
    assert got["gt_pointing"][0].tolist() == [0.0, 1.0]
    assert got["gt_rank_correlation"][0].tolist() == [-1.0, 1.0]
    assert got["gt_sign_agreement"][1] == [ONE_SIGN, ONE_SIGN]


def test_constant_means_within_the_relative_tolerance():
    e = np.ones((2, 4, 4), dtype=np.float32)
    e[0, 0, 0] += np.float32(2**-23)  # max - min = 1.2e-7 <= 1e-6 * 1: constant
    e[1, 0, 0] += np.float32(1e-5)  # 1e-5 > 1e-6: not constant
    assert gt.is_constant(e).tolist() == [True, False]
    assert gt.is_constant(np.zeros((1, 3, 3))).tolist() == [True]
    assert gt.is_constant(np.array([[[-4.0, -4.0], [-4.0, -4.0 + 1e-4]]])).tolist() == [False]  # 1e-4 > 4e-6


def test_region_sums_all_equal_score_the_worst_rank_correlation():
    # regions 1 = (0, 0), 2 = (0, 1); the map is nonzero only at (3, 3), outside every region:
    # sums (0, 0) rank no region above the other -> -1; sign: no sum has a sign -> 0 of 2
    regions = np.zeros((4, 4), dtype=np.int64)
    regions[0, 0], regions[0, 1] = 1, 2
    truth = GroundTruth(mask=MASK, regions=regions, contributions=np.array([1.0, -1.0]))
    e = np.zeros((4, 4), dtype=np.float32)
    e[3, 3] = -1.0
    got = one(e, truth)
    assert got["gt_rank_correlation"] == (-1.0, None)
    assert got["gt_sign_agreement"] == (0.0, None)
    assert got["gt_mass_inside"] == (0.0, None)  # all of |E| outside A*


def test_equal_contributions_spread_in_float32_stay_tied():
    # c = (1, 1, 0) (an AND: equal Shapley values) spread over 3 and 5 pixels: 1/3 and 1/5 in float32
    # sum to 1.00000003 and 1.00000001. Exact comparison ranks them (2, 3, 1) against c's (2.5, 2.5, 1)
    # -> Spearman sqrt(3)/2 = 0.866; within SUM_RTOL * sum|E| (2e-6) they tie -> 1
    regions = np.zeros((4, 4), np.int64)
    regions[0, :3] = 1
    regions[2, :] = 2
    regions[3, 0] = 2
    regions[3, 3] = 3
    truth = GroundTruth(mask=regions > 0, regions=regions, contributions=np.array([1.0, 1.0, 0.0]))
    e = exact_attribution(truth)
    sums = gt.region_sums(e[None], regions[None], [3])[0]
    assert sums[0] != sums[1]  # the float32 spread does not sum back exactly
    assert gt.spearman(sums, truth.contributions) == pytest.approx(np.sqrt(3) / 2)
    got = one(e, truth)
    assert got["gt_rank_correlation"] == (1.0, None)
    # c >= 0 and the exact map has no negative value: "one sign" is checked before "unsigned map"
    assert got["gt_sign_agreement"] == (pytest.approx(np.nan, nan_ok=True), ONE_SIGN)


def test_region_sums_within_the_resolution_of_zero_have_no_sign():
    # regions 1 and 2 (c = +1, -1); |E| total = 2 + 1e-7: tolerance 1e-6 * 2 = 2e-6.
    # sums (+1e-7, -2): region 1 is 0 at that resolution -> disagrees; region 2 agrees -> 1/2.
    # With region 1 at +1e-5 (above the tolerance) it agrees -> 1
    regions = np.zeros((4, 4), np.int64)
    regions[0, 0], regions[3, 3] = 1, 2
    truth = GroundTruth(mask=MASK, regions=regions, contributions=np.array([1.0, -1.0]))
    sal = np.zeros((2, 4, 4), np.float32)
    sal[:, 3, 3] = -2.0
    sal[0, 0, 0], sal[1, 0, 0] = 1e-7, 1e-5
    got = scores(batch_of(sal, [truth, truth]))
    assert got["gt_sign_agreement"][0].tolist() == [0.5, 1.0]
    # ranks: (1e-7, -2) and (1e-5, -2) both rank region 1 above region 2, as c does -> 1
    assert got["gt_rank_correlation"][0].tolist() == [1.0, 1.0]


def test_average_ranks_tie_within_the_tolerance_and_in_chains():
    assert gt.average_ranks(np.array([2.0, 1.0, 1.0 + 1e-9]), tol=1e-6).tolist() == [3.0, 1.5, 1.5]
    assert gt.average_ranks(np.array([2.0, 1.0, 1.0 + 1e-9])).tolist() == [3.0, 1.0, 2.0]
    assert gt.average_ranks(np.array([1.2, 0.0, 0.6, 5.0]), tol=0.7).tolist() == [2.0, 2.0, 2.0, 4.0]  # a chain
    assert np.isnan(gt.spearman(np.array([0.0, 0.6, 1.2]), np.array([1.0, 2.0, 3.0]), tol=0.7))


def test_empty_regions_sum_to_zero_and_take_part():
    # region 3 of 3 has no pixel: sums (3, -1, 0) against c = (2, -1, 0.5): ranks (3, 1, 2) both ->
    # Spearman 1; signs: + agrees, - agrees, 0 agrees with no sign -> 2/3
    regions = np.where(REGIONS == 3, 0, REGIONS)
    regions = np.where(regions == 4, 0, regions)
    truth = GroundTruth(mask=MASK, regions=regions, contributions=np.array([2.0, -1.0, 0.5]))
    got = one(E_SIGNED, truth)
    assert got["gt_rank_correlation"] == (pytest.approx(1.0), None)
    assert got["gt_sign_agreement"] == (pytest.approx(2 / 3), None)


# ----------------------------------------------------------------------------- n/a rules


def test_not_applicable_reasons():
    levels_only = GroundTruth(levels=np.ones((4, 4), np.float32))
    mask_only = GroundTruth(mask=MASK)
    equal = GroundTruth(mask=MASK, regions=REGIONS, contributions=np.full(4, 0.5))
    zeros = GroundTruth(mask=MASK, regions=REGIONS, contributions=np.zeros(4))
    single = GroundTruth(mask=MASK, regions=(REGIONS == 1).astype(int), contributions=np.array([1.0]))
    empty = GroundTruth(mask=np.zeros((4, 4), bool), regions=REGIONS, contributions=CONTRIBUTIONS)
    gts = [None, levels_only, mask_only, equal, zeros, single, empty, KNOWN, KNOWN]
    sal = np.stack([E_SIGNED] * len(gts))
    sal[7, 2, 2] = np.nan
    sal[8, 0, 1] = np.inf
    got = scores(batch_of(sal, gts))
    common = ["no ground truth", "no ground-truth mask (A*)", NO_KNOWN_ANSWER]
    nonfinite = ["non-finite saliency map", "non-finite saliency map"]
    expected = {
        "gt_mass_inside": [*common, None, None, None, "empty mask", *nonfinite],
        "gt_pointing": [*common, None, None, None, "empty mask", *nonfinite],
        "gt_rank_correlation": [
            *common,
            "contributions all equal: rank correlation undefined",
            "contributions all equal: rank correlation undefined",
            "fewer than two regions: rank correlation undefined",
            None,  # the region metrics do not read A*
            *nonfinite,
        ],
        "gt_sign_agreement": [
            *common,
            ONE_SIGN,  # every contribution 0.5 > 0
            "no region with a nonzero contribution",  # all 0: checked before "one sign"
            ONE_SIGN,  # one region, +1
            None,
            *nonfinite,
        ],
    }
    for name, reasons in expected.items():
        values, got_reasons = got[name]
        assert got_reasons == reasons, name
        assert np.isnan(values).tolist() == [r is not None for r in reasons], name
    assert got["gt_mass_inside"][0][3:6].tolist() == pytest.approx([7 / 12] * 3)
    assert got["gt_pointing"][0][3:6].tolist() == [1.0] * 3
    assert got["gt_sign_agreement"][0][6] == pytest.approx(2 / 3)
    assert got["gt_rank_correlation"][0][6] == pytest.approx(np.sqrt(0.9))
    assert NO_KNOWN_ANSWER.startswith("no known answer (")


def test_a_mask_alone_is_no_known_answer_on_all_four():
    # a mask (with or without levels) but no regions and contributions is alignment's ground truth, not
    # a known answer: n/a on all four, a constant map included (the missing answer is the truth's, not
    # the map's). The same A* as a binary known answer (regions [A*, rest], c = (2, 0)) scores: mass 7/12,
    # pointing 1 (as the oracle); sums (3, -3 + 2 = -1) rank as c does -> 1; c has one sign -> n/a
    with_levels = GroundTruth(mask=MASK, levels=MASK.astype(np.float32))
    gts = [GroundTruth(mask=MASK), with_levels, GroundTruth(mask=MASK), binary(MASK, effect=2.0)]
    sal = np.stack([E_SIGNED, E_SIGNED, np.zeros((4, 4), np.float32), E_SIGNED])
    got = scores(batch_of(sal, gts))
    for name in IDS:
        values, reasons = got[name]
        assert reasons[:3] == [NO_KNOWN_ANSWER] * 3, name
        assert np.isnan(values[:3]).all(), name
    assert got["gt_mass_inside"][0][3] == pytest.approx(7 / 12)
    assert got["gt_pointing"][0][3] == 1.0
    assert got["gt_rank_correlation"][0][3] == 1.0
    assert got["gt_sign_agreement"][1][3] == ONE_SIGN


def test_one_sign_contributions_make_only_sign_agreement_n_a():
    # REGIONS with c = (2, 1, 0.5, 0) or its negation: no region pushes against the class, so sign
    # agreement is n/a ("one sign") while the other three score.
    # E_SIGNED: sums (3, -1, 0, 0), ranks (4, 1, 2.5, 2.5); c's ranks (4, 3, 2, 1), dy = (1.5, 0.5, -0.5, -1.5):
    # sum dx dy = 2.25 - 0.75 = 1.5, sum dx^2 = 4.5, sum dy^2 = 5 -> 1.5 / sqrt(22.5) = sqrt(0.1); the
    # negated c has dy negated -> -sqrt(0.1).
    # |E_SIGNED| (unsigned): sums (7, 5, 0, 0), ranks (4, 3, 1.5, 1.5), dx = (1.5, 0.5, -1, -1):
    # sum dx dy = 2.25 + 0.25 + 0.5 + 1.5 = 4.5, sum dx^2 = 4.5 -> 4.5 / sqrt(22.5) = sqrt(0.9); the reason
    # is "one sign", not "unsigned map" (checked before). A constant map scores the worst on the other
    # three (0, 0, -1) and stays n/a "one sign" (checked before the worst value).
    pos = GroundTruth(mask=MASK, regions=REGIONS, contributions=np.array([2.0, 1.0, 0.5, 0.0]))
    neg = GroundTruth(mask=MASK, regions=REGIONS, contributions=-pos.contributions)
    sal = np.stack([E_SIGNED, E_SIGNED, np.abs(E_SIGNED), np.full((4, 4), 3.0, np.float32)])
    got = scores(batch_of(sal, [pos, neg, pos, pos]))
    assert got["gt_sign_agreement"][1] == [ONE_SIGN] * 4
    assert np.isnan(got["gt_sign_agreement"][0]).all()
    for name in ("gt_mass_inside", "gt_pointing", "gt_rank_correlation"):
        assert got[name][1] == [None] * 4, name
    assert got["gt_mass_inside"][0].tolist() == pytest.approx([7 / 12, 7 / 12, 7 / 12, 0.0])
    assert got["gt_pointing"][0].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert got["gt_rank_correlation"][0].tolist() == pytest.approx([np.sqrt(0.1), -np.sqrt(0.1), np.sqrt(0.9), -1.0])
    # with both signs (KNOWN) the same maps score sign agreement: 2/3, "unsigned map", 0 (worst)
    both = scores(batch_of(sal[[0, 2, 3]], [KNOWN] * 3))["gt_sign_agreement"]
    assert both[1] == [None, "unsigned map", None]
    assert both[0][[0, 2]].tolist() == pytest.approx([2 / 3, 0.0])


def test_a_constant_map_does_not_hide_undefined_ground_truth():
    # n/a that comes from the ground truth stays n/a for a constant map; the map's own defects score worst
    equal = GroundTruth(mask=MASK, regions=REGIONS, contributions=np.full(4, 0.5))
    empty = GroundTruth(mask=np.zeros((4, 4), bool), regions=REGIONS, contributions=CONTRIBUTIONS)
    got = scores(batch_of(np.zeros((2, 4, 4), np.float32), [equal, empty]))
    assert got["gt_rank_correlation"][1] == ["contributions all equal: rank correlation undefined", None]
    assert got["gt_rank_correlation"][0][1] == -1.0
    assert got["gt_mass_inside"][1] == [None, "empty mask"]
    assert got["gt_mass_inside"][0][0] == 0.0


def test_no_saliency_map():
    batch = batch_of(np.zeros((1, 4, 4)), [KNOWN])
    batch.saliency = None
    for name in IDS:
        out = BY_NAME[name]().score(batch)
        assert np.isnan(out.values[0]) and out.reasons == ["no saliency map"]


@pytest.mark.parametrize(
    ("truth", "match"),
    [
        (GroundTruth(mask=MASK, regions=REGIONS, contributions=CONTRIBUTIONS[:3]), "labels must lie in 0..3"),
        (GroundTruth(mask=MASK, regions=REGIONS - 2, contributions=CONTRIBUTIONS), "labels must lie"),
        (GroundTruth(mask=MASK, regions=REGIONS[:3], contributions=CONTRIBUTIONS), "differ in size"),
        (GroundTruth(mask=MASK, regions=REGIONS), "both regions and contributions"),
        (GroundTruth(mask=MASK, contributions=CONTRIBUTIONS), "both regions and contributions"),
        (GroundTruth(mask=MASK, regions=REGIONS.astype(float), contributions=CONTRIBUTIONS), "integer labels"),
        (GroundTruth(mask=MASK, regions=REGIONS, contributions=np.array([1.0, np.nan, 0, 0])), "finite 1-D"),
    ],
)
def test_malformed_ground_truth_raises(truth, match):
    with pytest.raises(ValueError, match=match):
        BY_NAME["gt_mass_inside"]().score(batch_of(E_SIGNED[None], [truth]))


# ----------------------------------------------------------------------------- resize, batches, memo


def _independent(e: np.ndarray, truth: GroundTruth) -> dict[str, float]:
    """The four definitions written out directly on one resized map (loops over regions)."""
    mag = np.abs(e.astype(np.float64))
    tied = mag == mag.max()
    sums = np.array([e[truth.regions == k].sum(dtype=np.float64) for k in range(1, len(truth.contributions) + 1)])
    c = truth.contributions
    nz = c != 0
    both = (c > 0).any() and (c < 0).any()
    return {
        "gt_mass_inside": mag[truth.mask].sum() / mag.sum(),
        "gt_pointing": float(truth.mask[tied].all()),
        "gt_rank_correlation": spearmanr(sums, c).statistic,
        "gt_sign_agreement": float((np.sign(sums[nz]) == np.sign(c[nz])).mean()) if both else np.nan,
    }


def random_truth(rng: np.random.Generator, size: int, k: int) -> GroundTruth:
    regions = rng.integers(0, k + 1, size=(size, size))
    mask = np.isin(regions, rng.choice(np.arange(1, k + 1), size=2, replace=False))
    return GroundTruth(mask=mask, regions=regions, contributions=rng.normal(size=k).round(1))


def test_the_map_is_resized_bilinearly_to_the_truth_keeping_its_sign():
    rng = np.random.default_rng(11)
    sal = rng.normal(size=(3, 8, 8)).astype(np.float32)
    truths = [random_truth(rng, 4, 3) for _ in range(3)]
    got = scores(batch_of(sal, truths))
    resized = resize_bilinear(sal, (4, 4))
    assert resized.min() < 0  # the sign survives the resize
    for i, truth in enumerate(truths):
        for name, expected in _independent(resized[i], truth).items():
            assert got[name][0][i] == pytest.approx(expected, abs=1e-9, nan_ok=True), (i, name)
    one_sign = [not ((t.contributions > 0).any() and (t.contributions < 0).any()) for t in truths]
    assert got["gt_sign_agreement"][1] == [ONE_SIGN if o else None for o in one_sign]
    assert not all(one_sign)  # at least one sample's sign agreement is compared


def test_a_positive_factor_changes_no_value():
    rng = np.random.default_rng(8)
    truths = [random_truth(rng, 6, 4) for _ in range(6)]
    sal = rng.normal(size=(6, 6, 6)).astype(np.float32)
    base = scores(batch_of(sal, truths))
    for factor in (1e-3, 250.0):
        scaled = scores(batch_of(sal * np.float32(factor), truths))
        for name in IDS:
            np.testing.assert_allclose(scaled[name][0], base[name][0], rtol=1e-6, err_msg=name)
    flipped = scores(batch_of(-sal, truths))  # a negative one flips the two signed metrics
    np.testing.assert_allclose(flipped["gt_rank_correlation"][0], -base["gt_rank_correlation"][0], rtol=1e-9)


def test_mixed_sizes_in_one_batch_score_as_each_alone():
    rng = np.random.default_rng(5)
    truths = [random_truth(rng, 4, 3), random_truth(rng, 6, 4), GroundTruth(mask=MASK), random_truth(rng, 6, 5)]
    # the mask alone (sample 2) is n/a in the same size group as sample 0, and changes nothing there
    sal = rng.normal(size=(4, 8, 8)).astype(np.float32)
    sal[2] = np.abs(sal[2])
    together = scores(batch_of(sal, truths))
    for i, truth in enumerate(truths):
        alone = scores(batch_of(sal[i : i + 1], [truth]))
        for name in IDS:
            np.testing.assert_array_equal(together[name][0][i : i + 1], alone[name][0])
            assert together[name][1][i : i + 1] == alone[name][1]
        if truth.contributions is not None:
            resized = resize_bilinear(sal[i], truth.mask.shape)
            for name, expected in _independent(resized, truth).items():
                assert together[name][0][i] == pytest.approx(expected, abs=1e-9, nan_ok=True), (i, name)
    assert together["gt_mass_inside"][1][2] == NO_KNOWN_ANSWER


def test_the_batch_resizes_once_and_sums_regions_once(monkeypatch):
    calls = {"resize": 0, "sums": 0}
    resize, sums = gt_batch.resize_bilinear, gt.region_sums

    def counted_resize(*args, **kwargs):
        calls["resize"] += 1
        return resize(*args, **kwargs)

    def counted_sums(*args, **kwargs):
        calls["sums"] += 1
        return sums(*args, **kwargs)

    monkeypatch.setattr(gt_batch, "resize_bilinear", counted_resize)
    monkeypatch.setattr(gt, "region_sums", counted_sums)
    rng = np.random.default_rng(2)
    truths = [random_truth(rng, 4, 3), random_truth(rng, 6, 3), random_truth(rng, 4, 2)]
    batch = batch_of(rng.normal(size=(3, 8, 8)).astype(np.float32), truths)
    first = scores(batch)
    assert calls == {"resize": 2, "sums": 2}  # one per ground-truth size, whatever number of metrics
    again = scores(batch)
    assert calls == {"resize": 2, "sums": 2}  # the memo answers the second time
    for name in IDS:
        np.testing.assert_array_equal(first[name][0], again[name][0])


def test_values_lie_in_each_metric_s_range():
    rng = np.random.default_rng(9)
    truths = [random_truth(rng, 6, 4) for _ in range(40)]
    got = scores(batch_of(rng.normal(size=(40, 6, 6)).astype(np.float32), truths))
    for name in IDS:
        low, high = metric_value_range(BY_NAME[name])
        values = got[name][0][~np.isnan(got[name][0])]
        assert len(values) > 30 and values.min() >= low and values.max() <= high, name
        assert len(np.unique(values)) > 1, name  # the random maps spread over the range


def test_the_exact_attribution_scores_the_optimum():
    # the oracle explainer's map for a known answer (contributions spread over each region's pixels
    # inside A*): every nonzero contribution has its region inside A*, so every metric is at its best
    rng = np.random.default_rng(4)
    regions = rng.integers(0, 5, size=(6, 6))
    contributions = np.array([3.0, -1.5, 0.7, -0.2])
    truth = GroundTruth(mask=regions > 0, regions=regions, contributions=contributions)
    got = one(exact_attribution(truth), truth)
    assert {k: v for k, (v, _) in got.items()} == pytest.approx(
        {"gt_mass_inside": 1.0, "gt_pointing": 1.0, "gt_rank_correlation": 1.0, "gt_sign_agreement": 1.0}
    )


# ----------------------------------------------------------------------------- Spearman


def test_average_ranks_and_spearman_equal_scipy_on_random_cases():
    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(200):
        n = int(rng.integers(2, 12))
        x = rng.integers(0, 4, size=n).astype(float) if trial % 2 else rng.normal(size=n)
        y = rng.integers(-2, 3, size=n).astype(float)
        np.testing.assert_array_equal(gt.average_ranks(x), rankdata(x, method="average"))
        expected = spearmanr(x, y).statistic if len(np.unique(x)) > 1 and len(np.unique(y)) > 1 else np.nan
        if np.isnan(expected):
            assert np.isnan(gt.spearman(x, y))
            continue
        assert gt.spearman(x, y) == pytest.approx(expected, abs=1e-12)
        checked += 1
    assert checked > 100


def test_region_sums_are_one_bincount_over_the_batch():
    # sample 0: labels 1, 2 over E = 1..16; sample 1: 3 regions, region 3 empty
    e = np.arange(1, 33, dtype=np.float32).reshape(2, 4, 4)
    regions = np.zeros((2, 4, 4), dtype=np.int64)
    regions[0, 0, :] = 1  # 1 + 2 + 3 + 4 = 10
    regions[0, 3, 3] = 2  # 16
    regions[1, :, 0] = 1  # 17 + 21 + 25 + 29 = 92
    regions[1, 1, 1] = 2  # 22
    a, b = gt.region_sums(e, regions, [2, 3])
    assert a.tolist() == [10.0, 16.0]
    assert b.tolist() == [92.0, 22.0, 0.0]
    with pytest.raises(ValueError, match="labels must lie"):
        gt.region_sums(e, regions, [1, 3])


# ----------------------------------------------------------------------------- registry


def test_the_registry_sees_the_four_metrics_of_the_ground_truth_family():
    registry = Registry(load_entry_points=False)
    status = registry.plugins["xaibench.metrics.plugin"]
    assert status.ok, status.error
    ranges = {
        "gt_mass_inside": (0.0, 1.0),
        "gt_pointing": (0.0, 1.0),
        "gt_rank_correlation": (-1.0, 1.0),
        "gt_sign_agreement": (0.0, 1.0),
    }
    for name in IDS:
        entry = registry.entry("metric", name)
        assert entry.cls is BY_NAME[name]
        assert (entry.cls.family, entry.cls.direction, entry.cls.ranking) == ("ground_truth", "higher", True)
        assert entry.info.needs == ("mask",)
        assert metric_value_range(entry.cls) == ranges[name]
    assert sorted(e.info.name for e in registry.entries("metric") if e.cls.family == "ground_truth") == sorted(IDS)
    assert list(select_metrics(registry, ["family:ground_truth"])) == list(IDS)
