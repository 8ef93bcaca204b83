"""The torch imputation (MG-PCG, ``imputation_torch``) against the exact SuperLU imputation.

Work: a 50-step ROAD curve (percentages 1, 3, ..., 99, most salient pixels first) on 4 real
photos at 224 px in ImageNet-normalised space: 200 systems of 3 channels. Saliency maps are
``edges`` (the photo's gradient magnitude, fine-grained like gradient maps) or ``smooth``
(a Gaussian-blurred random field, CAM-like blobs). Configurations timed in one run:

- SuperLU (``linear_imputation``, all 200 masks in its block-diagonal chunks), CPU;
- torch ``cold``: all steps of all photos solved together (chunks of ``--chunk`` masks);
- torch ``warm``: step by step, all photos together, each step warm-started from the previous;

each with CG and V-cycle in float64, CG float64 + V-cycle float32, and float32 throughout
(float32 cannot reach tol 1e-7: its unconverged systems fall back to SuperLU, counted and
timed as such). Prints ms per system, the ratio to SuperLU, CG iterations (max per call,
mean over calls) and the max abs difference from SuperLU. With CUDA available the torch
configurations also run there (absolute times, synchronised).

Run: ``.venv/bin/python bench/bench_imputation.py [--photos 4] [--steps 50] [--maps edges|smooth]
[--threads 2] [--chunk 25] [--no-cuda]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from scipy.ndimage import gaussian_filter, sobel

from xaibench.datasets.photos import PhotosDataset
from xaibench.imaging import to_model_input
from xaibench.metrics.faithfulness.imputation import linear_imputation
from xaibench.metrics.faithfulness.imputation_torch import (
    ImputationFallbackWarning,
    SolveInfo,
    linear_imputation_torch,
)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def saliency(images: torch.Tensor, kind: str) -> np.ndarray:
    out = []
    for k, img in enumerate(images.numpy().astype(np.float64)):
        if kind == "edges":
            grey = img.mean(axis=0)
            out.append(np.hypot(sobel(grey, 0), sobel(grey, 1)))
        else:
            rng = np.random.default_rng(k)
            out.append(gaussian_filter(rng.standard_normal(img.shape[1:]), 8))
    return np.stack(out)


def curve_masks(maps: np.ndarray, percents: list[int]) -> np.ndarray:
    """``(P, S, H, W)``: for every photo P and step S, the first percents[S] % most salient pixels."""
    n, h, w = maps.shape
    order = np.argsort(-maps.reshape(n, -1), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(h * w)[None].repeat(n, 0), axis=1)
    counts = (np.asarray(percents) * h * w) // 100
    return (rank[:, None, :] < counts[None, :, None]).reshape(n, len(percents), h, w)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_cold(images, masks, device, dtype, pdtype, chunk):
    n, s = masks.shape[:2]
    flat_img = images.repeat_interleave(s, dim=0).to(device)
    flat_mask = torch.from_numpy(masks.reshape(n * s, *masks.shape[2:])).to(device)
    outs, iters, fallback = [], [], 0
    sync(device)
    t = time.perf_counter()
    for start in range(0, n * s, chunk):
        info = SolveInfo()
        outs.append(
            linear_imputation_torch(
                flat_img[start : start + chunk],
                flat_mask[start : start + chunk],
                dtype=dtype,
                precond_dtype=pdtype,
                info=info,
            )
        )
        iters.append(info.iterations)
        fallback += info.fallback
    sync(device)
    elapsed = time.perf_counter() - t
    return elapsed, torch.cat(outs).cpu().reshape(n, s, *images.shape[1:]), iters, fallback


def run_warm(images, masks, device, dtype, pdtype):
    s = masks.shape[1]
    img = images.to(device)
    steps = torch.from_numpy(masks).to(device)
    outs, iters, fallback, previous = [], [], 0, None
    sync(device)
    t = time.perf_counter()
    for k in range(s):
        info = SolveInfo()
        previous = linear_imputation_torch(
            img, steps[:, k], dtype=dtype, precond_dtype=pdtype, initial=previous, info=info
        )
        outs.append(previous)
        iters.append(info.iterations)
        fallback += info.fallback
    sync(device)
    elapsed = time.perf_counter() - t
    return elapsed, torch.stack(outs, dim=1).cpu(), iters, fallback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--maps", choices=("edges", "smooth"), default="edges")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=25, help="masks per cold torch call")
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", ImputationFallbackWarning)

    samples = list(PhotosDataset().samples(limit=args.photos))
    images = to_model_input([s.image for s in samples], 224, MEAN, STD)
    percents = list(range(1, 100, 2))[: args.steps]
    masks = curve_masks(saliency(images, args.maps), percents)
    n_sys = masks.shape[0] * masks.shape[1]
    print(
        f"{len(samples)} photos x {len(percents)} steps = {n_sys} systems (3 channels each), maps={args.maps}, "
        f"torch threads={torch.get_num_threads()}"
    )

    t = time.perf_counter()
    ref = np.stack([linear_imputation(images[k].numpy(), masks[k]) for k in range(masks.shape[0])])
    superlu = time.perf_counter() - t
    print(f"{'SuperLU (CPU)':42s} {superlu / n_sys * 1e3:8.2f} ms/system   1.00x")

    configs = [
        ("float64", torch.float64, torch.float64),
        ("float64 CG + float32 V-cycle", torch.float64, torch.float32),
        ("float32", torch.float32, torch.float32),
    ]
    devices = [torch.device("cpu")]
    if torch.cuda.is_available() and not args.no_cuda:
        devices.append(torch.device("cuda"))
    for device in devices:
        if device.type == "cuda":  # warm-up: CUDA context, kernels
            run_cold(images[:1], masks[:1, :2], device, torch.float64, torch.float64, args.chunk)
            print(f"-- CUDA: {torch.cuda.get_device_name()}")
        for label, dtype, pdtype in configs:
            for mode in ("cold", "warm"):
                if mode == "cold":
                    elapsed, out, iters, fb = run_cold(images, masks, device, dtype, pdtype, args.chunk)
                else:
                    elapsed, out, iters, fb = run_warm(images, masks, device, dtype, pdtype)
                err = float(np.abs(out.numpy().astype(np.float64) - ref).max())
                name = f"torch {device.type} {label} {mode}"
                per = elapsed / n_sys * 1e3
                print(
                    f"{name:42s} {per:8.2f} ms/system {superlu / elapsed:6.2f}x  "
                    f"iters max {max(iters)} mean {np.mean(iters):.1f}  fallback {fb}/{n_sys * 3}  "
                    f"max|diff| {err:.1e}"
                )


if __name__ == "__main__":
    main()
