"""Alignment metrics (DESIGN 2): hand-computed oracles, edge cases from ANCHORS.md, and
cross-checks against Quantus 0.6 where Quantus is right."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.ndimage import distance_transform_edt

from xaibench.api import GroundTruth, MetricInput, Sample
from xaibench.imaging import resize_bilinear
from xaibench.metrics.alignment import formulas as al
from xaibench.metrics.alignment.batch import AlignmentBatch
from xaibench.metrics.normalise import normalise_levels, normalise_saliency
from xaibench.metrics.plugin import METRICS

ALIGNMENT_METRICS = [cls for cls in METRICS if cls.family == "alignment"]
BY_NAME = {cls.name: cls for cls in ALIGNMENT_METRICS}


def raster_map(h: int = 4, w: int = 4) -> np.ndarray:
    """E[i] = (i + 0.5) / (h * w) in raster order: distinct values, none on a multiple of 0.05."""
    return ((np.arange(h * w) + 0.5) / (h * w)).reshape(1, h, w).astype(np.float32)


def mask_from(flat_idx: list[int], h: int = 4, w: int = 4) -> np.ndarray:
    m = np.zeros(h * w, dtype=bool)
    m[flat_idx] = True
    return m.reshape(1, h, w)


def batch_of(
    saliency: np.ndarray, gts: list[GroundTruth | None], sizes: list[tuple[int, int]] | None = None
) -> MetricInput:
    samples = []
    for i, gt in enumerate(gts):
        if sizes is not None:
            size = sizes[i]
        elif gt is not None and gt.mask is not None:
            size = gt.mask.shape
        elif gt is not None and gt.levels is not None:
            size = gt.levels.shape
        else:
            size = saliency.shape[1:]
        samples.append(Sample(id=f"s{i}", image=np.zeros((*size, 3), np.float32), ground_truth=gt))
    return MetricInput(saliency=saliency, concepts=None, samples=samples, targets=np.zeros(len(gts), int))


def score(name: str, batch: MetricInput, **params):
    return BY_NAME[name](**params).score(batch)


# ----------------------------------------------------------------------------- normalisation


def test_normalise_positive_part_and_min_max():
    out = normalise_saliency(np.array([[-1.0, 0.0], [1.0, 3.0]]))
    np.testing.assert_allclose(out.maps[0], [[0, 0], [1 / 3, 1]], atol=1e-7)
    assert not out.degenerate[0]
    # the minimum of the positive part maps to 0 even when it is not 0
    out = normalise_saliency(np.array([[2.0, 4.0], [3.0, 6.0]]))
    np.testing.assert_allclose(out.maps[0], [[0, 0.5], [0.25, 1]], atol=1e-7)


def test_normalise_constant_and_negative_maps_are_degenerate_zeros():
    maps = np.stack([np.full((3, 3), 7.0), np.full((3, 3), -2.0), -np.arange(9.0).reshape(3, 3), np.eye(3)])
    out = normalise_saliency(maps)
    assert out.degenerate.tolist() == [True, True, True, False]
    assert (out.maps[:3] == 0).all()
    np.testing.assert_array_equal(out.maps[3], np.eye(3))


def test_normalise_non_finite_is_flagged():
    m = np.ones((2, 3, 3))
    m[0, 1, 1] = np.nan
    m[1] = np.arange(9).reshape(3, 3)
    out = normalise_saliency(m)
    assert out.nonfinite.tolist() == [True, False]
    assert out.degenerate[0] and (out.maps[0] == 0).all()


def test_bilinear_resize_hand_values():
    # align_corners=False, x2: output x in input space = (x + 0.5) / 2 - 0.5 -> -0.25, 0.25, 0.75, 1.25
    # clamped to [0, 1]: 0, 0.25, 0.75, 1
    up = resize_bilinear(np.array([[[0.0, 1.0], [0.0, 1.0]]]), (2, 4))
    np.testing.assert_allclose(up[0], [[0, 0.25, 0.75, 1]] * 2, atol=1e-7)
    # shrinking is antialiased like the model preprocessing: a triangle filter widened by the
    # scale 2. Output pixel 0 sits at input x = 0.5; inputs 0, 1, 2 lie 0.5, 0.5, 1.5 away with
    # weights 1 - d / 2 = 0.75, 0.75, 0.25; values 0, 0, 1 give 0.25 / 1.75 = 1 / 7.
    down = resize_bilinear(np.array([[[0.0, 0.0, 1.0, 1.0]] * 2]), (2, 2))
    np.testing.assert_allclose(down[0], [[1 / 7, 6 / 7]] * 2, atol=1e-6)
    out = normalise_saliency(np.array([[0.0, 1.0], [0.0, 1.0]]), (2, 4))
    np.testing.assert_allclose(out.maps[0], [[0, 0.25, 0.75, 1]] * 2, atol=1e-7)


def test_normalise_levels_scaled_by_max_negative_clipped():
    out = normalise_levels(np.array([[-0.2, 0.2], [0.4, 0.1]]))
    np.testing.assert_allclose(out.maps[0], [[0, 0.5], [1, 0.25]], atol=1e-7)
    assert out.clipped[0]
    out = normalise_levels(np.zeros((2, 2)))
    assert (out.maps == 0).all() and not out.clipped[0]
    with pytest.raises(ValueError, match="NaN"):
        normalise_levels(np.array([[np.nan, 1.0]]))


# ----------------------------------------------------------------------------- binary metrics

A4 = [0, 10, 11, 12]  # mask pixels, flat indices on a 4 x 4 grid


def test_topk_matched_oracle():
    # k = |A| = 4; the 4 highest pixels are 12..15; |B & A| = |{12}| = 1
    s = al.topk_scores(raster_map(), mask_from(A4))
    assert s["iou"].values[0] == pytest.approx(1 / 7)  # 1 / (4 + 4 - 1)
    for name in ("precision", "recall", "f1"):
        assert s[name].values[0] == pytest.approx(1 / 4)
        assert s[name].reasons == [None]


def test_fixed_threshold_oracle():
    # E >= 0.5 <=> i >= 7.5: B = 8..15 (|B| = 8); B & A = {10, 11, 12}
    s = al.threshold_scores(raster_map(), mask_from(A4), 0.5)
    assert s["iou"].values[0] == pytest.approx(3 / 9)
    assert s["precision"].values[0] == pytest.approx(3 / 8)
    assert s["recall"].values[0] == pytest.approx(3 / 4)
    assert s["f1"].values[0] == pytest.approx(0.5)  # 2 * 3 / (8 + 4)


def test_threshold_averaged_oracle():
    thetas = [0.05 * j for j in range(1, 20)]
    assert tuple(round(t, 2) for t in thetas) == al.THRESHOLDS
    expected = {"iou": [], "precision": [], "recall": [], "f1": []}
    for t in al.THRESHOLDS:
        b = {i for i in range(16) if (i + 0.5) / 16 >= t}  # brute force over pixels
        inter = len(b & set(A4))
        p, r = inter / len(b), inter / 4
        expected["iou"].append(inter / len(b | set(A4)))
        expected["precision"].append(p)
        expected["recall"].append(r)
        expected["f1"].append(0.0 if p + r == 0 else 2 * p * r / (p + r))
    s = al.threshold_averaged_scores(raster_map(), mask_from(A4))
    for name, vals in expected.items():
        assert s[name].values[0] == pytest.approx(np.mean(vals), abs=1e-12), name
    # one value by hand: at theta = 0.05, B = {1..15}, inter = 3, so precision = 3 / 15
    assert expected["precision"][0] == pytest.approx(3 / 15)


@pytest.mark.parametrize("thresholds", [al.THRESHOLDS, (0.1, 0.3, 0.35, 0.9)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threshold_levels_match_float64_comparisons(thresholds, dtype):
    t = np.array(thresholds)
    rng = np.random.default_rng(4)
    near = np.concatenate([t.astype(dtype), np.nextafter(t.astype(dtype), dtype(0)), np.nextafter(t, 2).astype(dtype)])
    v = np.concatenate([rng.random(5000), near, [0.0, 1.0, -0.5, 3.0]]).astype(dtype)
    expected = (v.astype(np.float64)[:, None] >= t[None, :]).sum(axis=1)
    np.testing.assert_array_equal(al.threshold_levels(v, t), expected)
    # and the averaged metric equals the mean of the fixed-threshold metric
    E = v[:4900].reshape(1, 70, 70)
    A = np.zeros_like(E, dtype=bool)
    A[0, 10:40, 20:50] = True
    avg = al.threshold_averaged_scores(E, A, thresholds)
    for name in ("iou", "precision", "recall", "f1"):
        per = [al.threshold_scores(E, A, th)[name].values[0] for th in thresholds]
        assert avg[name].values[0] == pytest.approx(np.mean(per), abs=1e-12)


def test_f1_is_zero_when_precision_and_recall_are_zero():
    E = np.zeros((1, 2, 2), np.float32)
    E[0, 0, 0] = 1.0
    s = al.threshold_scores(E, np.array([[[False, False], [False, True]]]))
    assert s["precision"].values[0] == 0 and s["recall"].values[0] == 0
    assert s["f1"].values[0] == 0 and s["f1"].reasons == [None]
    assert s["iou"].values[0] == 0


def test_empty_mask_is_na_for_every_mask_metric():
    E = raster_map()
    empty = np.zeros((1, 4, 4), bool)
    for result in (al.topk_scores(E, empty), al.threshold_scores(E, empty), al.threshold_averaged_scores(E, empty)):
        for name, sc in result.items():
            assert np.isnan(sc.values[0]), name
            assert sc.reasons == ["empty mask"], name
    assert np.isnan(al.pointing_game(E, empty).values[0])
    assert np.isnan(al.mass_accuracy(E, empty).values[0])
    mae = al.mae_scores(E, empty.astype(np.float32))
    assert mae["mae"].values[0] == pytest.approx(E.mean())  # still defined: M = 0 everywhere
    assert mae["fp_mae"].values[0] == pytest.approx(E.mean())
    assert np.isnan(mae["fn_mae"].values[0]) and mae["fn_mae"].reasons == ["empty mask"]


def test_empty_binarised_map_is_na_for_precision_and_f1():
    E = np.zeros((1, 4, 4), np.float32)  # a degenerate map after normalisation
    A = mask_from(A4)
    s = al.threshold_scores(E, A)
    assert np.isnan(s["precision"].values[0]) and s["precision"].reasons == ["empty binarised map"]
    assert np.isnan(s["f1"].values[0]) and s["f1"].reasons == ["empty binarised map"]
    assert s["recall"].values[0] == 0 and s["iou"].values[0] == 0
    avg = al.threshold_averaged_scores(E, A)
    assert np.isnan(avg["precision"].values[0])
    assert avg["precision"].reasons == ["empty binarised map at theta=0.05"]
    assert avg["iou"].values[0] == 0


def test_topk_ties_broken_by_raster_order():
    E = np.array([[[0.9, 0.5, 0.5], [0.5, 0.5, 0.1]]])
    np.testing.assert_array_equal(al.topk_binarise(E, [3])[0], [[True, True, True], [False, False, False]])
    # all tied (degenerate map): the first k pixels in raster order
    Z = np.zeros((2, 3, 3))
    B = al.topk_binarise(Z, [4, 0])
    np.testing.assert_array_equal(B[0].ravel(), [1, 1, 1, 1, 0, 0, 0, 0, 0])
    assert not B[1].any()
    # so on an all-zero map top-k IoU depends on where A lies in raster order, deterministically
    s = al.topk_scores(Z[:1], mask_from([1, 8], 3, 3))
    assert s["precision"].values[0] == pytest.approx(1 / 2)
    assert s["iou"].values[0] == pytest.approx(1 / 3)


def test_topk_per_sample_k_matches_stable_argsort():
    rng = np.random.default_rng(1)
    E = rng.integers(0, 4, size=(6, 5, 7)).astype(np.float32)  # many ties
    k = rng.integers(0, 36, size=6)
    B = al.topk_binarise(E, k)
    for i in range(6):
        order = np.argsort(-E[i].ravel(), kind="stable")
        expected = np.zeros(35, bool)
        expected[order[: k[i]]] = True
        np.testing.assert_array_equal(B[i].ravel(), expected)


def test_all_ones_map():
    E = np.ones((1, 4, 4), np.float32)  # an all-ones map given directly (not through normalisation)
    A = mask_from(A4)
    t = al.threshold_scores(E, A)
    assert t["precision"].values[0] == pytest.approx(4 / 16)
    assert t["recall"].values[0] == 1 and t["iou"].values[0] == pytest.approx(4 / 16)
    pg = al.pointing_game(E, A, tolerance=0.0)
    assert pg.extras["tied_maxima"][0] == 16
    assert pg.values[0] == 1.0  # first maximum is pixel 0, which lies in A
    assert al.mass_accuracy(E, A).values[0] == pytest.approx(4 / 16)
    # through normalisation an all-ones saliency map is constant: zeros, flagged degenerate
    out = normalise_saliency(np.ones((4, 4)))
    assert out.degenerate[0] and (out.maps == 0).all()


def test_human_levels_oracle():
    E = np.array([[[0.9, 0.1], [0.5, 0.3]]])
    M = np.array([[[0.2, 0.3], [0.6, 1.0]]])
    h75 = al.human_level_scores(E, M, 0.75)  # A = {3}, top-1 = {0}
    assert h75["iou"].values[0] == 0 and h75["f1"].values[0] == 0
    h50 = al.human_level_scores(E, M, 0.5)  # A = {2, 3}, top-2 = {0, 2}
    assert h50["iou"].values[0] == pytest.approx(1 / 3) and h50["precision"].values[0] == pytest.approx(0.5)
    h25 = al.human_level_scores(E, M, 0.25)  # A = {1, 2, 3}, top-3 = {0, 2, 3}
    assert h25["iou"].values[0] == pytest.approx(0.5) and h25["recall"].values[0] == pytest.approx(2 / 3)
    low = al.human_level_scores(E, np.array([[[0.2, 0.3], [0.4, 0.1]]]), 0.5)
    assert np.isnan(low["iou"].values[0]) and low["iou"].reasons == ["empty mask at level tau=0.5"]


# ----------------------------------------------------------------------------- pointing game, mass, MAE


def point_map(shape: tuple[int, int], *points: tuple[int, int]) -> np.ndarray:
    E = np.zeros((1, *shape), np.float32)
    E[0, shape[0] // 2, shape[1] // 2] = 0.5  # not degenerate
    for p in points:
        E[(0, *p)] = 1.0
    return E


def single_pixel_mask(shape: tuple[int, int], y: int, x: int) -> np.ndarray:
    A = np.zeros((1, *shape), bool)
    A[0, y, x] = True
    return A


@pytest.mark.parametrize(
    ("shape", "target", "hit_point", "miss_point"),
    [
        ((224, 224), (100, 100), (109, 112), (109, 113)),  # 9^2 + 12^2 = 15^2; 9^2 + 13^2 > 15^2
        ((448, 448), (100, 100), (118, 124), (118, 125)),  # tolerance scales to 30 px
        ((224, 448), (100, 100), (100, 130), (100, 131)),  # W doubled: 30 px along x ...
        ((224, 448), (100, 100), (115, 100), (116, 100)),  # ... still 15 px along y
        ((112, 112), (50, 50), (50, 57), (50, 58)),  # 7.5 px at half resolution
    ],
)
def test_pointing_game_tolerance_scales_with_resolution(shape, target, hit_point, miss_point):
    A = single_pixel_mask(shape, *target)
    assert al.pointing_game(point_map(shape, hit_point), A).values[0] == 1.0
    assert al.pointing_game(point_map(shape, miss_point), A).values[0] == 0.0


def test_pointing_game_mask_touching_border_and_no_wraparound():
    shape = (224, 224)
    border = np.zeros((1, *shape), bool)
    border[0, :, 0] = True  # the left column
    assert al.pointing_game(point_map(shape, (0, 15)), border).values[0] == 1.0
    assert al.pointing_game(point_map(shape, (223, 15)), border).values[0] == 1.0
    assert al.pointing_game(point_map(shape, (0, 16)), border).values[0] == 0.0
    # a window clipped at the border must not wrap around to the opposite corner
    corner = single_pixel_mask(shape, 223, 223)
    assert al.pointing_game(point_map(shape, (0, 0)), corner).values[0] == 0.0
    assert al.pointing_game(point_map(shape, (223, 210)), corner).values[0] == 1.0


def test_pointing_game_ties_first_in_raster_order_and_counted():
    shape = (224, 224)
    E = point_map(shape, (200, 10), (10, 200))  # raster order: (10, 200) comes first
    A = single_pixel_mask(shape, 200, 10)
    pg = al.pointing_game(E, A)
    assert pg.values[0] == 0.0
    assert pg.extras["tied_maxima"][0] == 2
    assert pg.extras["point"][0].tolist() == [10, 200]


def test_pointing_game_matches_distance_transform():
    rng = np.random.default_rng(3)
    hits = 0
    for shape in [(224, 224), (37, 61), (300, 170), (500, 375)]:
        n = 24
        A = np.zeros((n, *shape), bool)
        E = 0.9 * rng.random((n, *shape)).astype(np.float32)
        for i in range(n):  # a few small blobs, and the maximum placed up to ~22 px (at 224) from one
            for _ in range(rng.integers(1, 4)):
                y, x = rng.integers(0, shape[0]), rng.integers(0, shape[1])
                A[i, y : y + rng.integers(1, 8), x : x + rng.integers(1, 8)] = True
            dy, dx = rng.uniform(-22, 22, size=2) * np.array(shape) / 224
            E[i, int(np.clip(y + dy, 0, shape[0] - 1)), int(np.clip(x + dx, 0, shape[1] - 1))] = 1.0
        pg = al.pointing_game(E, A)
        sampling = (224 / shape[0], 224 / shape[1])
        for i in range(n):
            py, px = pg.extras["point"][i]
            d = distance_transform_edt(~A[i], sampling=sampling)[py, px]
            assert pg.values[i] == float(d <= 15.0), (shape, i, d)
        hits += int(pg.values.sum())
    assert 0 < hits < 4 * 24  # the comparison covered hits and misses


def test_mass_accuracy_oracle():
    E = np.array([[[1.0, 0.5], [0.0, 0.5]]])
    A = np.array([[[True, False], [False, True]]])
    assert al.mass_accuracy(E, A).values[0] == pytest.approx(0.75)
    zero = al.mass_accuracy(np.zeros((1, 2, 2)), A)
    assert np.isnan(zero.values[0]) and zero.reasons == ["zero total saliency (degenerate map)"]


def test_mae_oracle():
    E = np.array([[[1.0, 0.5], [0.0, 0.25]]])
    M = np.array([[[1.0, 0.0], [0.5, 0.0]]])
    s = al.mae_scores(E, M)
    assert s["mae"].values[0] == pytest.approx(1.25 / 4)
    assert s["fp_mae"].values[0] == pytest.approx(0.375)  # M = 0 at pixels 1, 3
    assert s["fn_mae"].values[0] == pytest.approx(0.25)  # M > 0 at pixels 0, 2
    full = al.mae_scores(E, np.ones((1, 2, 2)))
    assert np.isnan(full["fp_mae"].values[0]) and full["fp_mae"].reasons == ["no pixels with M = 0"]


def test_rasterise_boxes():
    m = al.rasterise_boxes(np.array([[1, 0, 3, 2], [2.5, 1.2, 4, 3]]), (4, 5))
    expected = np.array(
        [
            [0, 1, 1, 0, 0],
            [0, 1, 1, 1, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 0, 0, 0],
        ],
        bool,
    )
    np.testing.assert_array_equal(m, expected)
    np.testing.assert_array_equal(al.rasterise_boxes(np.array([[-5, -5, 1, 1]]), (2, 2)), [[1, 0], [0, 0]])
    assert not al.rasterise_boxes(np.zeros((0, 4)), (3, 3)).any()


# ----------------------------------------------------------------------------- Metric classes

EXPECTED_IDS = {
    *(m + s for m in ("iou", "precision", "recall", "f1") for s in ("", "_t50", "_avg", "_h25", "_h50", "_h75")),
    "pointing_game",
    "mass_accuracy",
    "mae",
    "fp_mae",
    "fn_mae",
}


def test_metric_ids_and_metadata():
    names = [cls.name for cls in ALIGNMENT_METRICS]
    assert len(names) == len(set(names)) == 29
    assert set(names) == EXPECTED_IDS
    assert {c.name for c in ALIGNMENT_METRICS if c.ranking} == {"iou", "pointing_game", "mass_accuracy", "mae"}
    for cls in ALIGNMENT_METRICS:
        assert cls.family == "alignment"
        assert cls.direction == ("lower" if cls.name.endswith("mae") else "higher")
        assert cls.needs == (("levels",) if "_h" in cls.name else ("mask",))
        assert cls.version and "is better" in cls.description and cls.unit
        assert cls.__module__ == "xaibench.metrics.alignment.metrics"


def test_metric_batch_groups_sizes_and_matches_pure_functions():
    rng = np.random.default_rng(5)
    sizes = [(30, 40), (50, 50), (30, 40), (50, 50), (224, 224)]
    gts = []
    for h, w in sizes:
        m = np.zeros((h, w), bool)
        m[h // 4 : h // 2, w // 3 : w // 2 + 3] = True
        gts.append(GroundTruth(mask=m))
    sal = rng.normal(size=(5, 32, 32)).astype(np.float32)
    batch = batch_of(sal, gts)
    for name in ("iou", "precision_t50", "recall_avg", "pointing_game", "mass_accuracy", "mae", "fn_mae"):
        out = score(name, batch)
        for i, gt in enumerate(gts):
            E = normalise_saliency(sal[i], gt.mask.shape).maps
            A = gt.mask[None]
            pure = {
                "iou": lambda E, A: al.topk_scores(E, A)["iou"],
                "precision_t50": lambda E, A: al.threshold_scores(E, A)["precision"],
                "recall_avg": lambda E, A: al.threshold_averaged_scores(E, A)["recall"],
                "pointing_game": al.pointing_game,
                "mass_accuracy": al.mass_accuracy,
                "mae": lambda E, A: al.mae_scores(E, A.astype(np.float32))["mae"],
                "fn_mae": lambda E, A: al.mae_scores(E, A.astype(np.float32))["fn_mae"],
            }[name](E, A)
            assert out.values[i] == pytest.approx(pure.values[0], abs=1e-12), (name, i)
    assert len(AlignmentBatch.of(batch).groups) == 3


def test_metric_shared_state_is_computed_once():
    m = np.zeros((8, 8), bool)
    m[2:5, 2:5] = True
    batch = batch_of(np.random.default_rng(0).random((2, 8, 8)).astype(np.float32), [GroundTruth(mask=m)] * 2)
    score("iou", batch)
    assert AlignmentBatch.key(batch) in batch.memo
    ctx = AlignmentBatch.of(batch)
    assert len(batch.memo) == 2  # the normalised batch and the top-k scores
    for name in ("precision", "recall", "f1"):
        score(name, batch)
    assert AlignmentBatch.of(batch) is ctx
    assert len(batch.memo) == 2 and ctx.scores_key(("topk",)) in batch.memo  # four metrics, one computation
    score("iou_t50", batch)
    score("iou_t50", batch, theta=0.3)
    assert len(batch.memo) == 4
    assert ctx.scores_key(("threshold", 0.5)) in batch.memo and ctx.scores_key(("threshold", 0.3)) in batch.memo


def test_metric_na_reasons_are_counted_never_dropped():
    m = np.zeros((8, 8), bool)
    m[2:5, 2:5] = True
    levels = np.zeros((8, 8), np.float32)
    levels[2:6, 2:6] = 0.4
    levels[3:5, 3:5] = 0.8
    gts = [
        GroundTruth(mask=m),
        None,
        GroundTruth(mask=np.zeros((8, 8), bool)),
        GroundTruth(levels=levels),
        GroundTruth(boxes=np.array([[2, 2, 5, 5]])),
    ]
    sal = np.random.default_rng(0).random((5, 8, 8)).astype(np.float32)
    batch = batch_of(sal, gts, sizes=[(8, 8)] * 5)
    iou = score("iou", batch)
    assert len(iou.values) == 5
    assert iou.reasons == [None, "no ground truth", "empty mask", None, None]
    # boxes are rasterised: the same region as the mask of sample 0
    E4 = normalise_saliency(sal[4]).maps
    assert iou.values[4] == pytest.approx(al.topk_scores(E4, m[None])["iou"].values[0])
    h50 = score("iou_h50", batch)
    assert h50.reasons == ["no multi-level map", "no ground truth", "no multi-level map", None, "no multi-level map"]
    assert np.isnan(h50.values).sum() == 4 and not np.isnan(h50.values[3])
    pg = score("pointing_game", batch)
    assert pg.reasons[2] == "empty mask" and np.isnan(pg.values[2])
    assert pg.extras[1] is None and pg.extras[0]["tied_maxima"] == 1
    # levels are scaled by their max 0.8 (0.4 -> 0.5, 0.8 -> 1): the plain metrics use A = M > 0,
    # h50 keeps both rings (M >= 0.5), h75 only the core
    E = normalise_saliency(sal[3]).maps
    ring = al.topk_scores(E, (levels > 0)[None])["iou"].values[0]
    core = al.topk_scores(E, (levels >= 0.8)[None])["iou"].values[0]
    assert ring != core
    assert iou.values[3] == pytest.approx(ring) and h50.values[3] == pytest.approx(ring)
    assert score("iou_h75", batch).values[3] == pytest.approx(core)
    mae = score("mae", batch)
    assert mae.values[3] == pytest.approx(np.abs(E[0] - levels / 0.8).mean(), abs=1e-6)


def test_metric_degenerate_and_non_finite_maps():
    m = np.zeros((6, 6), bool)
    m[0, 0:2] = True
    sal = np.stack([np.ones((6, 6)), np.full((6, 6), np.nan), np.eye(6)]).astype(np.float32)
    batch = batch_of(sal, [GroundTruth(mask=m)] * 3)
    pg = score("pointing_game", batch)
    assert pg.extras[0] == {"degenerate": True, "tied_maxima": 36}
    assert pg.values[0] == 1.0  # all tied: first pixel in raster order, which lies in A
    assert pg.extras[2] == {"degenerate": False, "tied_maxima": 6}
    assert pg.reasons[1] == "non-finite saliency map" and np.isnan(pg.values[1])
    mass = score("mass_accuracy", batch)
    assert mass.reasons[0] == "zero total saliency (degenerate map)"
    assert mass.values[2] == pytest.approx(1 / 6)


def test_metric_levels_clipped_is_noted_and_bad_input_raises():
    levels = np.array([[-0.5, 1.0], [0.5, 0.0]], np.float32)
    batch = batch_of(np.ones((1, 2, 2), np.float32), [GroundTruth(levels=levels)])
    assert score("mae", batch).extras[0]["levels_clipped"] is True
    bad = batch_of(np.ones((1, 2, 2), np.float32), [GroundTruth(mask=np.ones((2, 2), bool), levels=np.ones((3, 3)))])
    with pytest.raises(ValueError, match=r"sample 's0'.*differ in size"):
        score("iou", bad)
    with pytest.raises(ValueError, match=r"\(B, S, S\)"):
        score("iou", batch_of(np.ones((2, 2, 2), np.float32), [GroundTruth(mask=np.ones((2, 2), bool))]))


def test_metric_concept_explanations_are_na():
    batch = batch_of(np.zeros((1, 2, 2)), [GroundTruth(mask=np.ones((2, 2), bool))])
    batch.saliency = None
    out = score("iou", batch)
    assert np.isnan(out.values[0]) and out.reasons == ["no saliency map"]


# ----------------------------------------------------------------------------- Quantus 0.6


@pytest.fixture(scope="module")
def quantus():
    q = pytest.importorskip("quantus")
    warnings.filterwarnings("ignore", module="quantus")
    return q


def quantus_call(metric, E: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Quantus on precomputed maps: model=None, channel-first (n, 1, H, W)."""
    a = E[:, None].astype(np.float32)
    s = A[:, None].astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = metric(model=None, x_batch=np.zeros_like(a), y_batch=np.zeros(len(E), int), a_batch=a, s_batch=s)
    return np.asarray(out, dtype=np.float64)


def random_case(seed: int, n: int = 16, shape: tuple[int, int] = (24, 32)):
    rng = np.random.default_rng(seed)
    E = normalise_saliency(rng.normal(size=(n, *shape))).maps  # continuous: no ties
    A = np.zeros((n, *shape), bool)
    for i in range(n):  # fixed-size boxes, so |A| = k is the same for every sample
        y, x = rng.integers(0, shape[0] - 6), rng.integers(0, shape[1] - 8)
        A[i, y : y + 6, x : x + 8] = True
    return E, A


def test_quantus_pointing_game_agrees_without_tolerance(quantus):
    E, A = random_case(0, n=64)
    theirs = quantus_call(quantus.PointingGame(normalise=False, abs=False, disable_warnings=True), E, A)
    ours = al.pointing_game(E, A, tolerance=0.0).values
    np.testing.assert_array_equal(ours, theirs)
    assert 0 < ours.sum() < len(ours)


def test_quantus_mass_accuracy_and_attribution_localisation(quantus):
    E, A = random_case(1)
    ours = al.mass_accuracy(E, A).values
    rma = quantus_call(quantus.RelevanceMassAccuracy(normalise=False, abs=False, disable_warnings=True), E, A)
    np.testing.assert_allclose(ours, rma, atol=1e-6)
    loc = quantus.AttributionLocalisation(normalise=False, abs=False, disable_warnings=True)
    np.testing.assert_allclose(ours, quantus_call(loc, E, A), atol=1e-6)


def test_quantus_top_k_intersection_is_top_k_precision(quantus):
    E, A = random_case(2)
    k = int(A[0].sum())
    theirs = quantus_call(quantus.TopKIntersection(k=k, normalise=False, abs=False, disable_warnings=True), E, A)
    ours = al.topk_scores(E, A)
    np.testing.assert_allclose(ours["precision"].values, theirs, atol=1e-6)
    np.testing.assert_allclose(ours["recall"].values, theirs, atol=1e-6)


def test_where_we_differ_from_quantus(quantus):
    """Documented deviations from Quantus 0.6 PointingGame (ANCHORS.md)."""
    pg = quantus.PointingGame(normalise=False, abs=False, disable_warnings=True)
    shape = (224, 224)
    # 1. Empty mask: Quantus stores NaN into a bool array, which becomes True: a hit.
    #    Ours: n/a with the reason, counted as n/a by the runner.
    E = point_map(shape, (50, 50))
    empty = np.zeros((1, *shape), bool)
    assert quantus_call(pg, E, empty)[0] == 1.0
    ours = al.pointing_game(E, empty)
    assert np.isnan(ours.values[0]) and ours.reasons == ["empty mask"]
    # 2. Tolerance: Quantus requires the maximum inside the mask; ours accepts 15 px at 224.
    A = single_pixel_mask(shape, 100, 100)
    near = point_map(shape, (109, 112))
    assert quantus_call(pg, near, A)[0] == 0.0
    assert al.pointing_game(near, A).values[0] == 1.0
    # 3. Ties: Quantus counts a hit if any tied maximum is in the mask; ours takes the first in
    #    raster order and records how many maxima were tied.
    tied = point_map(shape, (10, 200), (200, 10))
    far = single_pixel_mask(shape, 200, 10)
    assert quantus_call(pg, tied, far)[0] == 1.0
    ours = al.pointing_game(tied, far)
    assert ours.values[0] == 0.0 and ours.extras["tied_maxima"][0] == 2


def test_binary_metrics_on_a_multi_level_map_use_the_middle_human_level():
    """DESIGN 2: on a multi-level map the plain binary metrics and the pointing game use
    A = M >= 0.5. A wide faint halo (M = 0.2) around the centre and the strong human level
    (M = 1) in one corner: a centre prior hit the halo under A = M > 0, and misses now."""
    levels = np.full((32, 32), 0.2, dtype=np.float32)
    levels[:4, :4] = 1.0  # the 16 pixels at human level >= 0.5
    centre = np.zeros((1, 32, 32), dtype=np.float32)
    centre[0, 16, 16] = 1.0  # maximum at the centre, 17 px from the corner block: beyond 15 px * 32/224
    batch = batch_of(centre, [GroundTruth(levels=levels)])
    assert score("pointing_game", batch).values[0] == 0.0
    corner = np.zeros((1, 32, 32), dtype=np.float32)
    corner[0, :4, :4] = 1.0
    batch = batch_of(corner, [GroundTruth(levels=levels)])
    assert score("pointing_game", batch).values[0] == 1.0
    # top-k matched IoU: k = |A| = 16, exactly the corner block -> 1.0 (under M > 0, k would be 1024: IoU 1/64)
    assert score("iou", batch).values[0] == pytest.approx(1.0)
    assert score("iou_h50", batch).values[0] == pytest.approx(1.0)
    assert score("mass_accuracy", batch).values[0] == pytest.approx(1.0)
