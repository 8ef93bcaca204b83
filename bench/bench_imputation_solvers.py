"""The two exact CPU solvers of the ROAD imputation: banded Cholesky against SuperLU, by image size.

Work: ROAD's calls as the metric makes them on the CPU (``bench_imputation_chunks.road_calls``: one
image, 16 masks a call, the first k % of the pixels in a map's order for k = 1, 3, ..., 99, both
orders), on ``random`` and ``smooth`` maps, for images of ``--sizes`` pixels a side (64: the shapes
and mechanism tracks; 224: the photo tracks).

Prints, per size and map, in one run: the seconds of SuperLU and of banded Cholesky in one thread
and their ratio (below 1: banded is faster), the same work split over two threads (the metric
imputes in two threads beside the forward passes; both solvers release the GIL, BLAS kept to one
thread as the metric keeps it) and the largest difference between the two solvers' images; last,
the banded solver in two threads with BLAS at its own thread count against one BLAS thread.
:data:`~xaibench.metrics.faithfulness.imputation.BANDED_MAX_SIDE` is set from these ratios.

Run: ``.venv/bin/python bench/bench_imputation_solvers.py [--sizes 64,96,128,160,192,224] [--images 2]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_imputation_chunks import road_calls

from xaibench.blas_threads import one_blas_thread
from xaibench.metrics.faithfulness import imputation


def timed(calls: list[tuple[np.ndarray, np.ndarray]], banded: bool, threads: int) -> tuple[float, list[np.ndarray]]:
    """Seconds to impute every call with one solver in ``threads`` threads, and the images."""
    imputation.BANDED_MAX_SIDE = 10**6 if banded else 0
    out: list[np.ndarray | None] = [None] * len(calls)

    def work(part: range) -> None:
        for k in part:
            image, masks = calls[k]
            out[k] = imputation.linear_imputation(image, masks)

    workers = [threading.Thread(target=work, args=(range(t, len(calls), threads),)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start, out  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,96,128,160,192,224")
    parser.add_argument("--images", type=int, default=2)
    args = parser.parse_args()
    default = imputation.BANDED_MAX_SIDE
    print(f"default: banded up to {default} px a side")
    print("size  maps    calls  SuperLU 1t  banded 1t  ratio  SuperLU 2t  banded 2t  ratio  max |diff|")
    with one_blas_thread():
        for size in (int(s) for s in args.sizes.split(",")):
            for maps in ("random", "smooth"):
                calls = road_calls(size, args.images if size <= 112 else 1, 16, maps)
                lu1, ref = timed(calls, banded=False, threads=1)
                band1, out = timed(calls, banded=True, threads=1)
                lu2, _ = timed(calls, banded=False, threads=2)
                band2, _ = timed(calls, banded=True, threads=2)
                diff = max(float(np.abs(a - b).max()) for a, b in zip(ref, out, strict=True))
                print(
                    f"{size:4d}  {maps:6s}  {len(calls):5d}  {lu1:9.2f}s  {band1:8.2f}s  {band1 / lu1:5.2f}"
                    f"  {lu2:9.2f}s  {band2:8.2f}s  {band2 / lu2:5.2f}  {diff:.1e}"
                )
    # BLAS at its own thread count: its threads spin against the two imputing threads
    calls = road_calls(64, args.images, 16, "random")
    spinning, _ = timed(calls, banded=True, threads=2)
    with one_blas_thread():
        one, _ = timed(calls, banded=True, threads=2)
    print(
        f"64 px, banded, two threads: BLAS at its own thread count {spinning:.2f}s, on one thread {one:.2f}s "
        f"({spinning / one:.2f}x)"
    )
    imputation.BANDED_MAX_SIDE = default


if __name__ == "__main__":
    main()
