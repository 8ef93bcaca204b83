"""SuperLU imputation: how the size of its block-diagonal chunks (``max_unknowns``) sets its speed.

Work: ROAD's calls as the metric makes them on the CPU: one image, ``--batch`` masks a call (the
batch of the faithfulness scorer), the masks the first k % of the pixels in the map's order for
k = 1, 3, ..., 99 (50 steps), both orders. Maps: ``random`` (fragmented masks, the worst case for
fill-in) and ``smooth`` (a blurred random field: CAM-like blobs). Images of ``--sizes`` pixels a
side (64: ``shapes`` and the mechanism tracks; 224: the photo tracks, one image whatever
``--images`` says: each call is slow).

Prints, per image size and map, the seconds of each chunk bound and the ratio to the current
default (:data:`~xaibench.metrics.faithfulness.imputation.DEFAULT_MAX_UNKNOWNS`), and checks that
every bound gives the same images bit for bit (the blocks of a block-diagonal system are factored
independently, so chunking changes no value).

Run: ``.venv/bin/python bench/bench_imputation_chunks.py [--sizes 64,224] [--images 4] [--batch 16]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.ndimage import gaussian_filter

from xaibench.metrics.faithfulness.formulas import DEFAULT_THRESHOLDS, road_percents
from xaibench.metrics.faithfulness.imputation import DEFAULT_MAX_UNKNOWNS, linear_imputation
from xaibench.metrics.faithfulness.perturbation import pixel_count

BOUNDS = (50_000, 16_384, 8_192, 4_096, 2_048)


def road_calls(size: int, images: int, batch: int, maps: str, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(image, masks)`` of every call ROAD makes for ``images`` random images of ``size`` px."""
    rng = np.random.default_rng(seed)
    pixels = size * size
    counts = np.unique(pixel_count(road_percents(DEFAULT_THRESHOLDS), 100, pixels))  # ROAD's own steps
    calls = []
    for _ in range(images):
        image = rng.standard_normal((3, size, size)).astype(np.float32)
        field = rng.random((size, size))
        if maps == "smooth":
            field = gaussian_filter(field, sigma=size / 16)
        for order in (-1, 1):
            rank = np.argsort(np.argsort(order * field.ravel(), kind="stable"), kind="stable")
            for start in range(0, counts.size, batch):
                masks = np.stack([(rank < c).reshape(size, size) for c in counts[start : start + batch]])
                calls.append((image, masks))
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,224")
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    bounds = sorted({*BOUNDS, DEFAULT_MAX_UNKNOWNS}, reverse=True)
    for size in (int(s) for s in args.sizes.split(",")):
        for maps in ("random", "smooth"):
            calls = road_calls(size, args.images if size <= 112 else 1, args.batch, maps)
            seconds: dict[int, float] = {}
            reference: list[np.ndarray] | None = None
            for bound in bounds:
                t0 = time.perf_counter()
                out = [linear_imputation(image, masks, max_unknowns=bound) for image, masks in calls]
                seconds[bound] = time.perf_counter() - t0
                if reference is None:
                    reference = out
                elif not all(np.array_equal(a, b) for a, b in zip(out, reference, strict=True)):
                    raise SystemExit(f"max_unknowns={bound} changed the imputed images ({size} px, {maps} maps)")
            base = seconds[DEFAULT_MAX_UNKNOWNS]
            row = "  ".join(f"{bound}: {s:.2f} s ({s / base:.2f}x)" for bound, s in seconds.items())
            print(f"{size} px, {maps} maps, {len(calls)} calls: {row}")
    print(f"every bound gave the same images bit for bit; default {DEFAULT_MAX_UNKNOWNS} (ratios are to it)")


if __name__ == "__main__":
    main()
