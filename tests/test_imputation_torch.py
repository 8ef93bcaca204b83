"""The batched torch imputation (MG-PCG) against the exact SuperLU imputation and hand oracles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from xaibench.datasets.photos import PhotosDataset
from xaibench.errors import XaibenchError
from xaibench.imaging import to_model_input
from xaibench.metrics.faithfulness.imputation import linear_imputation, noisy_linear_imputation
from xaibench.metrics.faithfulness.imputation_torch import (
    ImputationFallbackWarning,
    ImputationNotConvergedError,
    SolveInfo,
    linear_imputation_torch,
    noisy_linear_imputation_torch,
)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224
ATOL = 1e-5


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    """Three real photos at 224 px in ImageNet-normalised space, ``(3, 3, 224, 224)``."""
    dataset = PhotosDataset(["chelsea", "coffee", "astronaut"])
    images = [s.image for s in dataset.samples()]
    if len(images) < 3:
        pytest.skip(f"photos not installed: {dataset.skipped}")
    return to_model_input(images, SIZE, MEAN, STD)


def saliency_masks(seed: int, percents: list[int], descending: bool) -> np.ndarray:
    """``(K, 224, 224)`` masks removing the i % least (or most) salient pixels of a smooth random map."""
    rng = np.random.default_rng(seed)
    saliency = gaussian_filter(rng.standard_normal((SIZE, SIZE)), 6).ravel()
    order = np.argsort(-saliency if descending else saliency, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    counts = (np.asarray(percents) * order.size) // 100
    return (rank[None] < counts[:, None]).reshape(len(percents), SIZE, SIZE)


def max_error(ours: torch.Tensor, ref: np.ndarray) -> float:
    return float(np.abs(ours.numpy().astype(np.float64) - ref).max())


# ----------------------------------------------------------------------------- hand oracles


def test_single_pixel_is_weighted_mean_of_neighbours():
    image = torch.arange(25, dtype=torch.float32).reshape(1, 5, 5) ** 1.5
    removed = torch.zeros((1, 5, 5), dtype=torch.bool)
    removed[0, 2, 2] = True
    out = linear_imputation_torch(image, removed)
    x = image[0].double()
    expected = (x[1, 2] + x[3, 2] + x[2, 1] + x[2, 3]) / 6 + (x[1, 1] + x[1, 3] + x[3, 1] + x[3, 3]) / 12
    assert abs(float(out[0, 0, 2, 2]) - float(expected)) < 1e-6
    keep = ~removed[0]
    assert torch.equal(out[0, 0][keep], image[0][keep])


def test_corner_pixel_renormalises_over_in_image_neighbours():
    image = torch.tensor([[[1.0, 2.0, 9.0], [4.0, 8.0, 9.0], [9.0, 9.0, 9.0]]])
    removed = torch.zeros((1, 3, 3), dtype=torch.bool)
    removed[0, 0, 0] = True
    out = linear_imputation_torch(image, removed)
    # neighbours (0,1) and (1,0) weigh 1/6, (1,1) weighs 1/12; total 5/12
    expected = (2.0 / 6 + 4.0 / 6 + 8.0 / 12) / (5 / 12)
    assert abs(float(out[0, 0, 0, 0]) - expected) < 1e-6


def test_everything_removed_gives_zero_and_nothing_removed_is_identity():
    image = torch.randn(2, 3, 16, 16)
    removed = torch.zeros((2, 16, 16), dtype=torch.bool)
    removed[0] = True
    out = linear_imputation_torch(image, removed)
    assert torch.equal(out[0], torch.zeros(3, 16, 16))
    assert torch.equal(out[1], image[1])


# ----------------------------------------------------------------------------- SuperLU oracle


@pytest.mark.parametrize("descending", [False, True], ids=["least_salient", "most_salient"])
def test_real_photos_match_superlu(photos, descending):
    percents = [1, 5, 20, 40, 60, 80, 95, 99]
    for k in range(2):
        masks = saliency_masks(k, percents, descending)
        ref = linear_imputation(photos[k].numpy(), masks)
        info = SolveInfo()
        ours = linear_imputation_torch(photos[k], torch.from_numpy(masks), on_failure="raise", info=info)
        assert max_error(ours, ref) < ATOL
        assert info.fallback == 0 and info.iterations < 40


def adversarial_masks() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    masks = {}
    masks["isolated"] = rng.random((SIZE, SIZE)) < 0.02
    rows = np.zeros((SIZE, SIZE), dtype=bool)
    rows[[0, 1, 2, 50, 111, 112, 200, 223], :] = True
    masks["rows"] = rows
    masks["columns"] = rows.T.copy()
    ii, jj = np.indices((SIZE, SIZE))
    masks["checkerboard"] = (ii + jj) % 2 == 0
    masks["all_but_corner"] = np.ones((SIZE, SIZE), dtype=bool)
    masks["all_but_corner"][SIZE - 1, 0] = False
    masks["all_but_centre"] = np.ones((SIZE, SIZE), dtype=bool)
    masks["all_but_centre"][117, 93] = False
    masks["all_but_one_row"] = np.ones((SIZE, SIZE), dtype=bool)
    masks["all_but_one_row"][5] = False
    masks["border_frame_known"] = np.ones((SIZE, SIZE), dtype=bool)
    masks["border_frame_known"][[0, -1], :] = False
    masks["border_frame_known"][:, [0, -1]] = False
    masks["everything"] = np.ones((SIZE, SIZE), dtype=bool)
    masks["nothing"] = np.zeros((SIZE, SIZE), dtype=bool)
    return masks


def test_adversarial_masks_match_superlu(photos):
    masks = adversarial_masks()
    stack = np.stack(list(masks.values()))
    ref = linear_imputation(photos[2].numpy(), stack)
    info = SolveInfo()
    ours = linear_imputation_torch(photos[2], torch.from_numpy(stack), on_failure="raise", info=info)
    for k, name in enumerate(masks):
        assert max_error(ours[k], ref[k]) < ATOL, name
    assert torch.equal(ours[list(masks).index("everything")], torch.zeros(3, SIZE, SIZE))
    assert info.fallback == 0


def test_batch_of_images_and_steps_with_warm_start_matches_superlu(photos):
    percents = [10, 30, 50, 70, 90]
    steps = [saliency_masks(10 + k, percents, descending=k % 2 == 1) for k in range(3)]
    # (image, step) pairs in one batch: 3 images x 5 steps
    images = photos.repeat_interleave(len(percents), dim=0)
    masks = np.concatenate(steps)
    ref = linear_imputation(images.numpy(), masks)
    ours = linear_imputation_torch(images, torch.from_numpy(masks), on_failure="raise")
    assert max_error(ours, ref) < ATOL
    # warm start: step s starts from step s - 1's result, for all 3 images together
    previous, cold, warm = None, SolveInfo(), SolveInfo()
    for s in range(len(percents)):
        idx = [k * len(percents) + s for k in range(3)]
        step_masks = torch.from_numpy(masks[idx])
        info = SolveInfo()
        out = linear_imputation_torch(photos, step_masks, initial=previous, on_failure="raise", info=info)
        assert max_error(out, ref[idx]) < ATOL
        previous = out
        warm.iterations += info.iterations
        linear_imputation_torch(photos, step_masks, on_failure="raise", info=info)
        cold.iterations += info.iterations
    assert warm.iterations <= cold.iterations


def test_float64_preconditioner_matches_superlu(photos):
    masks = saliency_masks(7, [2, 50, 98], descending=False)
    ref = linear_imputation(photos[0].numpy(), masks)
    ours = linear_imputation_torch(photos[0], torch.from_numpy(masks), precond_dtype=torch.float64, on_failure="raise")
    assert max_error(ours, ref) < ATOL


def test_noisy_imputation_matches_numpy(photos):
    masks = saliency_masks(4, [25, 75], descending=True)
    noise = np.random.default_rng(0).standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)
    ref = noisy_linear_imputation(photos[1].numpy(), masks, noise, noise_std=0.05)
    ours = noisy_linear_imputation_torch(photos[1], torch.from_numpy(masks), torch.from_numpy(noise), noise_std=0.05)
    assert max_error(ours, ref) < ATOL
    # known pixels carry no noise
    keep = torch.from_numpy(~masks)[:, None].expand(-1, 3, -1, -1)
    assert torch.equal(ours[keep], photos[1].expand(2, -1, -1, -1)[keep])


# ----------------------------------------------------------------------------- failure paths


def test_not_converging_raises_or_falls_back_to_superlu(photos):
    masks = saliency_masks(5, [60], descending=False)
    removed = torch.from_numpy(masks)
    with pytest.raises(ImputationNotConvergedError, match="did not converge in max_iter=1"):
        linear_imputation_torch(photos[0], removed, max_iter=1, on_failure="raise")
    info = SolveInfo()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = linear_imputation_torch(photos[0], removed, max_iter=1, info=info)
    assert any(issubclass(w.category, ImputationFallbackWarning) for w in caught)
    assert info.fallback == 3
    assert max_error(out, linear_imputation(photos[0].numpy(), masks)) < ATOL


def test_bad_inputs_raise_one_line_errors():
    image = torch.zeros(3, 8, 8)
    with pytest.raises(XaibenchError, match="removed must be an \\(N, H, W\\) bool tensor"):
        linear_imputation_torch(image, torch.zeros(8, 8, dtype=torch.bool))
    with pytest.raises(XaibenchError, match="do not match removed masks"):
        linear_imputation_torch(image, torch.zeros(1, 9, 8, dtype=torch.bool))
    with pytest.raises(XaibenchError, match="do not match removed masks"):
        linear_imputation_torch(torch.zeros(2, 3, 8, 8), torch.zeros(3, 8, 8, dtype=torch.bool))
    with pytest.raises(XaibenchError, match="on_failure must be 'exact' or 'raise'"):
        linear_imputation_torch(image, torch.zeros(1, 8, 8, dtype=torch.bool), on_failure="ignore")  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_superlu(photos):
    masks = saliency_masks(8, [5, 50, 95], descending=True)
    ref = linear_imputation(photos[0].numpy(), masks)
    out = linear_imputation_torch(photos[0].cuda(), torch.from_numpy(masks).cuda(), on_failure="raise")
    assert out.device.type == "cuda"
    assert max_error(out.cpu(), ref) < ATOL


def test_a_fragmented_gradient_mask_converges_within_a_few_iterations(photos):
    """The 7 % most salient pixels of EfficientNet-Lite0's input gradient on ``chelsea`` (1,171
    pieces, 680 of them single pixels): with damped Jacobi as the smoother the V-cycle was not
    positive definite on the Galerkin levels and CG stalled (349 to 400 iterations, then SuperLU);
    with l1-Jacobi it converges in about 10 and matches SuperLU."""
    from xaibench.models.efficientnet_lite import EfficientNetLite0

    model = EfficientNetLite0()
    x = model.preprocess([next(iter(PhotosDataset(["chelsea"]).samples())).image]).requires_grad_(True)
    logits = model.module(x)
    torch.softmax(logits, dim=1)[0, int(logits.argmax())].backward()
    gradient = x.grad.abs().sum(dim=1)[0].numpy().astype(np.float64).ravel()
    order = np.argsort(-gradient, kind="stable")
    removed = np.zeros(gradient.size, dtype=bool)
    removed[order[: 7 * gradient.size // 100]] = True
    removed = removed.reshape(1, SIZE, SIZE)
    info = SolveInfo()
    ours = linear_imputation_torch(x.detach()[0], torch.from_numpy(removed), info=info, max_iter=30, on_failure="raise")
    assert info.iterations <= 15
    assert max_error(ours, linear_imputation(x.detach()[0].numpy(), removed)) < ATOL
