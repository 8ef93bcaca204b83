"""BLAS on one thread for a stretch of work whose matrix products are small.

OpenBLAS threads spin while they wait for work; on small products they cost more than they give
and take the cores that torch and the other worker threads need. Measured on 2 busy cores: a board
of many metrics' paired tables took 8x the CPU time with BLAS threads
(:mod:`xaibench.publish.leaderboard`); ROAD's banded imputation on 64 px images, in two threads
beside the forward passes (:mod:`xaibench.metrics.faithfulness.road`), made a 64-sample ``shapes``
track take 13.0 s instead of 9.6 s (``bench/bench_imputation_solvers.py`` measures the solves
alone, without the forwards: 1.17x).
"""

from __future__ import annotations

import contextlib
import functools


@functools.cache
def _controller() -> object | None:
    try:
        from threadpoolctl import ThreadpoolController  # installed with scikit-learn
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        return None
    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """A context in which every BLAS library the process loaded runs on one thread (process-wide:
    enter it from the thread that starts the work, not from each worker thread)."""
    controller = _controller()
    if controller is None:  # pragma: no cover
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")  # type: ignore[attr-defined]
