"""Thin subclasses of pytorch-grad-cam classes (imported lazily: the library pulls in
OpenCV, matplotlib and scikit-learn).

- :class:`ScoreCAMTopK` scores at most ``max_channels`` activation channels (those with
  the largest spatial variance, as Faster Score-CAM does); ``None`` scores all, which
  reproduces the library's ScoreCAM. Unscored channels get weight 0.
- :class:`AblationCAMTopK` ablates at most ``max_channels`` channels (the same
  top-variance rule) of CNN ``(B, C, h, w)`` or ViT token ``(B, N, C)`` activations,
  restores the model if ablation fails, and runs without progress bars.
- :class:`LeanFullGrad` sums the per-channel normalised bias-gradient maps at each
  layer's own resolution and resizes once (the library resizes every channel first:
  gigabytes for 1000-channel layers at 224 px). Bilinear resizing is linear, so the
  result equals the library's up to float rounding.
- :class:`LeanEigenCAM` and :class:`LeanEigenGradCAM` project on the first principal
  component with a thin SVD on one BLAS thread (the library computes the full
  ``C x C`` basis it then discards: 20x slower at 1280 channels), the component's sign fixed
  by a convention (:func:`first_component_projection`); the library's numbers up to that sign
  (tested).
- :func:`class_dff` is Deep Feature Factorization made class-specific (see its docstring).
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import cv2
import numpy as np
import pytorch_grad_cam.ablation_cam as _ablation_module
import torch
import torch.nn.functional as F
from pytorch_grad_cam import AblationCAM, AblationLayer, EigenCAM, EigenGradCAM, FullGrad, ScoreCAM
from pytorch_grad_cam.activations_and_gradients import ActivationsAndGradients
from pytorch_grad_cam.feature_factorization.deep_feature_factorization import dff
from pytorch_grad_cam.utils.find_layers import replace_layer_recursive
from pytorch_grad_cam.utils.image import scale_cam_image
from threadpoolctl import threadpool_limits

from xaibench.kit import chunks, forward_batch


def _top_variance_channels(activations: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` channels of ``(C, h, w)`` activations with the largest spatial
    variance; ties go to the lower channel index."""
    variance = activations.flatten(1).double().var(dim=1, unbiased=False).numpy()
    order = np.argsort(-variance, kind="stable")[:k]
    return torch.from_numpy(np.sort(order))


class ScoreCAMTopK(ScoreCAM):
    """Score-CAM (Wang et al. 2020) with an optional cap on the number of scored channels."""

    def __init__(self, model, target_layers, reshape_transform=None, max_channels: int | None = None) -> None:
        super().__init__(model, target_layers, reshape_transform=reshape_transform)
        self.max_channels = max_channels

    def get_cam_weights(self, input_tensor, target_layer, targets, activations, grads) -> np.ndarray:
        acts = torch.from_numpy(np.asarray(activations, dtype=np.float32))
        batch, channels = int(acts.shape[0]), int(acts.shape[1])
        keep = channels if self.max_channels is None else min(channels, self.max_channels)
        weights = np.zeros((batch, channels), dtype=np.float32)
        with torch.no_grad():
            for i in range(batch):
                idx = _top_variance_channels(acts[i], keep) if keep < channels else torch.arange(channels)
                # the library's UpsamplingBilinear2d is bilinear with align_corners=True
                up = F.interpolate(
                    acts[i][idx][None], size=input_tensor.shape[-2:], mode="bilinear", align_corners=True
                )[0]
                flat = up.flatten(1)
                low, high = flat.min(dim=1).values, flat.max(dim=1).values
                up = (up - low[:, None, None]) / (high - low + 1e-8)[:, None, None]
                up = up.to(input_tensor)  # made on the host: to the inputs' device (and dtype)
                scores = []
                for part in chunks(keep, forward_batch(int(input_tensor.shape[-1]))):
                    masked = input_tensor[i][None] * up[part, None]
                    scores.append(targets[i](self.model(masked)).float().cpu())
                weights[i, idx.numpy()] = torch.softmax(torch.cat(scores), dim=0).numpy()
        return weights


_NO_PROGRESS = types.SimpleNamespace(tqdm=lambda iterable, *args, **kwargs: iterable)


@contextmanager
def _quiet_ablation() -> Iterator[None]:
    saved = _ablation_module.tqdm
    _ablation_module.tqdm = _NO_PROGRESS
    try:
        yield
    finally:
        _ablation_module.tqdm = saved


class _TopVarianceAblationLayer(AblationLayer):
    """Stands in for the target layer during Ablation-CAM: returns copies of one image's
    cached activations, copy ``i`` with the ``i``-th chosen channel ablated.

    Chosen channels: at most ``max_channels``, those of the CAM's ``(C, h, w)`` view of the
    activations (after the reshape) with the largest spatial variance. (The library's own
    selection, ``ratio_channels_to_ablate < 1``, scores channels by overlap with an EigenCAM
    mask; an all-zero, dead channel scores NaN there, sorts last and is ablated first,
    although ablating it changes nothing.)

    - CNN activations ``(B, C, h, w)``: the channel (axis 1) is ablated at every position,
      as the library's ``AblationLayer`` does.
    - ViT activations ``(B, N, C)`` (tokens, which the reshape folds into the grid): the
      channel (last axis) is ablated in every token, the class (prefix) tokens included, as
      the library's ``AblationLayerVit`` does. The reshape leaves prefix tokens out of the
      map, but a class-token-pooled ViT reads its logits from the class token, so ablating
      the patch tokens alone would miss the channel's direct route to the output.

    The ablated value is the library's: 0 when the activations' minimum is 0 (after a
    ReLU), else far below it (the minimum minus 1e7).
    """

    def __init__(self, max_channels: int | None) -> None:
        super().__init__()
        self.max_channels = max_channels

    def activations_to_be_ablated(self, activations, ratio_channels_to_ablate=1.0) -> np.ndarray:
        channels = int(activations.shape[0])
        if self.max_channels is None or self.max_channels >= channels:
            chosen = np.arange(channels)
        else:
            chosen = _top_variance_channels(torch.as_tensor(np.asarray(activations)), self.max_channels).numpy()
        self.channels = channels
        self.indices = np.int32(chosen)
        return self.indices

    def set_next_batch(self, input_batch_index, activations, num_channels_to_ablate) -> None:
        one = activations[input_batch_index]  # the target layer's raw output for one image
        self.activations = one[None].repeat(num_channels_to_ablate, *([1] * one.dim()))

    def __call__(self, x) -> torch.Tensor:
        out = self.activations
        by_channel = out.transpose(1, 2) if out.dim() == 3 else out  # a view: writes land in out
        if out.dim() not in (3, 4) or int(by_channel.shape[1]) != self.channels:
            raise ValueError(
                f"ablationcam: target layer output {tuple(out.shape)}; expected (B, C, h, w) or tokens (B, N, C) "
                f"with the map's {self.channels} channels"
            )
        for i in range(out.size(0)):
            low = torch.min(out)  # over the whole batch, earlier ablations included: the library's value
            by_channel[i, self.indices[i]] = 0 if low == 0 else low - 1e7
        return out


class AblationCAMTopK(AblationCAM):
    """Ablation-CAM (Desai & Ramaswamy 2020) ablating at most ``max_channels`` channels, those
    with the largest spatial variance (as :class:`ScoreCAMTopK`); skipped channels get weight 0.
    Restores the model if ablation fails and runs without progress bars."""

    def __init__(self, model, target_layers, reshape_transform=None, max_channels: int | None = None) -> None:
        super().__init__(
            model,
            target_layers,
            reshape_transform,
            ablation_layer=_TopVarianceAblationLayer(max_channels),
            batch_size=16,  # replaced per call by forward_batch(input size)
            ratio_channels_to_ablate=1.0,
        )
        self.max_channels = max_channels

    def get_cam_weights(self, input_tensor, target_layer, targets, activations, grads) -> np.ndarray:
        self.batch_size = forward_batch(int(input_tensor.shape[-1]))
        try:
            with _quiet_ablation():
                return super().get_cam_weights(input_tensor, target_layer, targets, activations, grads)
        except BaseException:
            replace_layer_recursive(self.model, self.ablation_layer, target_layer)  # put the layer back
            raise


def _channel_scaled_sum(maps: np.ndarray) -> np.ndarray:
    """Min-max scale each ``(b, c)`` map of ``(B, C, h, w)`` to [0, 1] and sum over channels."""
    flat = maps.reshape(maps.shape[0], maps.shape[1], -1).astype(np.float32)
    flat = flat - flat.min(axis=2, keepdims=True)
    flat = flat / (1e-7 + flat.max(axis=2, keepdims=True))
    return flat.sum(axis=1).reshape(maps.shape[0], *maps.shape[2:])


def _resize(maps: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of ``(B, h, w)`` maps to ``size = (width, height)`` with OpenCV."""
    return np.stack([cv2.resize(np.float32(m), size) for m in maps])


class LeanFullGrad(FullGrad):
    """FullGrad (Srinivas & Fleuret 2019) with the library's formula and less memory."""

    def __init__(self, model, reshape_transform=None) -> None:
        super().__init__(model, [], reshape_transform)

    def compute_cam_per_layer(self, input_tensor, target_category, eigen_smooth) -> np.ndarray:
        if eigen_smooth:
            return super().compute_cam_per_layer(input_tensor, target_category, eigen_smooth)
        size = self.get_target_width_height(input_tensor)
        input_grad = input_tensor.grad.detach().cpu().numpy()
        total = _resize(_channel_scaled_sum(np.abs(input_grad * input_tensor.detach().cpu().numpy())), size)
        grads_list = [g.cpu().numpy() for g in self.activations_and_grads.gradients]
        if len(self.bias_data) != len(grads_list):
            raise RuntimeError(f"FullGrad: {len(self.bias_data)} bias layers but {len(grads_list)} gradients")
        for bias, grads in zip(self.bias_data, grads_list, strict=True):
            total += _resize(_channel_scaled_sum(np.abs(bias[None, :, None, None] * grads)), size)
        return total[:, None]


def first_component_projection(activations: np.ndarray) -> np.ndarray:
    """The library's ``get_2d_projection``: per image, centre the ``(h*w, C)`` activation
    matrix and project it on its first right singular vector; thin SVD, one BLAS thread
    (small matrices: extra threads only spin).

    A singular vector's sign is arbitrary: LAPACK returns one or the other depending on its
    build and kernels (full or thin SVD, CPU features), and the library keeps whichever comes,
    so its map can come out inverted on one machine and not on another. Here the sign follows
    scikit-learn's ``svd_flip`` convention: each projection's entry of largest magnitude is
    positive (:func:`signed_by_largest_entry`), the same map from every LAPACK."""
    batch = np.nan_to_num(np.asarray(activations, dtype=np.float32), nan=0.0)
    out = []
    with threadpool_limits(limits=1, user_api="blas"):
        for a in batch:
            flat = a.reshape(a.shape[0], -1).T
            flat = flat - flat.mean(axis=0)
            _, _, vt = np.linalg.svd(flat, full_matrices=False)
            out.append(signed_by_largest_entry(flat @ vt[0]).reshape(a.shape[1:]))
    return np.float32(out)


def signed_by_largest_entry(projection: np.ndarray) -> np.ndarray:
    """``projection`` or its negative, whichever has its entry of largest magnitude positive (the
    first such entry on a tie of magnitudes; an all-zero projection is returned as is)."""
    flat = projection.reshape(-1)
    return -projection if flat.size and flat[np.argmax(np.abs(flat))] < 0 else projection


class LeanEigenCAM(EigenCAM):
    """Eigen-CAM with :func:`first_component_projection`."""

    def get_cam_image(self, input_tensor, target_layer, target_category, activations, grads, eigen_smooth):
        return first_component_projection(activations)


class LeanEigenGradCAM(EigenGradCAM):
    """EigenGrad-CAM with :func:`first_component_projection`."""

    def get_cam_image(self, input_tensor, target_layer, target_category, activations, grads, eigen_smooth):
        return first_component_projection(grads * activations)


def class_dff(
    module: torch.nn.Module,
    layer: torch.nn.Module,
    reshape: Callable[[torch.Tensor], torch.Tensor] | None,
    x: torch.Tensor,
    targets: list[int],
    n_components: int,
) -> np.ndarray:
    """Class-specific Deep Feature Factorization (Collins et al. 2018), one image at a time.

    The library's NMF (``random_state=0``) factorises the layer's activations into
    ``n_components`` concepts (channel vectors) and their heatmaps. Each image is
    factorised alone, so its map never depends on the rest of the batch. A concept's
    relevance to the target class is the dot product of its channel vector with the
    Grad-CAM channel weights (the spatially averaged gradient of the target logit),
    which equals the classifier's score of the concept up to scale for a global-pool +
    linear head. The map is the relevance-weighted sum (negative relevance clipped) of
    the min-max scaled concept heatmaps.

    At most as many concepts as the layer has channels: NMF of a ``C x hw`` matrix into more than
    ``C`` non-negative factors is not unique, and which factorisation the solver reaches then
    turns on the last bits of the activations (on the 2-channel layer of the mechanism models,
    activations moved by 1e-6 changed 9 of 40 maps by up to 60 % with 5 concepts, none by 1e-5
    with 2: ``tests/test_gradcam_plugin.py``). Layers with ``C >= n_components`` are unchanged.
    """
    grabber = ActivationsAndGradients(module, [layer], reshape)
    try:
        with torch.enable_grad():
            logits = grabber(x)
            picked = logits[torch.arange(len(targets)), torch.as_tensor(targets)].sum()
            picked.backward()
        activations = grabber.activations[0].numpy()
        gradients = grabber.gradients[0].numpy()
    finally:
        grabber.release()
    if activations.ndim != 4:
        raise ValueError(
            f"dff: target layer output has shape {activations.shape}; expected (B, C, h, w) "
            "(for token outputs set reshape='vit' or give the model a reshape_transform)"
        )
    size = (int(x.shape[-1]), int(x.shape[-2]))
    channels = int(activations.shape[1])
    maps = []
    for i in range(len(targets)):
        with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
            warnings.simplefilter("ignore")  # NMF convergence warnings on small activations
            concepts, heatmaps = dff(activations[i : i + 1].copy(), n_components=min(n_components, channels))
        relevance = np.maximum(gradients[i].mean(axis=(1, 2)) @ concepts, 0.0)
        scaled = scale_cam_image(heatmaps[0], size)
        maps.append(np.tensordot(relevance.astype(np.float32), scaled, axes=1))
    return np.stack(maps).astype(np.float32)
