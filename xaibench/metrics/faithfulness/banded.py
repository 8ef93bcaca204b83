"""Banded symmetric positive definite solves (LAPACK ``dpbsv``) in place, without the GIL.

The imputation of ROAD runs in two worker threads while the forward passes run
(:mod:`~xaibench.metrics.faithfulness.context`); scipy's ``scipy.linalg.lapack.dpbsv`` keeps the
GIL for the whole factorisation, so two threads solve no faster than one. This module calls the
same LAPACK routine, the one scipy links (``scipy.linalg.cython_lapack``), through :mod:`ctypes`,
which releases the GIL for the call: measured on 200 solves of a 2,000-unknown band of 60
diagonals, scipy's wrapper took 179 ms in one thread and 180 ms in two, this call 181 ms and 96 ms
(``bench/bench_imputation_solvers.py`` times the whole imputation in one and two threads). The
solutions are the same bit for bit as scipy's wrapper gives (tested). Where the routine cannot be
reached that way, it falls back to scipy's wrapper.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

import numpy as np
from scipy.linalg import lapack

_INT = ctypes.POINTER(ctypes.c_int)
_DPBSV = ctypes.CFUNCTYPE(None, ctypes.c_char_p, _INT, _INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, _INT, _INT)
"""``dpbsv(uplo, n, kd, nrhs, ab, ldab, b, ldb, info)``, every argument by reference."""


@cache
def _dpbsv() -> Callable[..., None] | None:
    """LAPACK ``dpbsv`` as scipy links it, callable without the GIL; None where unreachable."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__["dpbsv"]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        address = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
    except (ImportError, AttributeError, KeyError, ValueError):  # pragma: no cover - scipy without the C API
        return None
    return _DPBSV(address) if address else None


def solve_banded_spd(band: np.ndarray, rhs: np.ndarray, starts: np.ndarray, widths: np.ndarray) -> None:
    """Solve block-diagonal banded systems in place, one call per block.

    ``band``: ``(K + 1, M)`` float64 in Fortran order, LAPACK's lower band storage
    (``band[i - j, j] = A[i, j]``); ``rhs``: ``(M, C)`` float64 in Fortran order, overwritten by
    the solution. Block ``s`` is unknowns ``starts[s]:starts[s + 1]`` with ``widths[s] <= K``
    sub-diagonals; blocks must not be coupled. ``band`` is overwritten by the Cholesky factors.
    Raises :class:`numpy.linalg.LinAlgError` when a block is not positive definite.
    """
    if not (band.flags.f_contiguous and rhs.flags.f_contiguous and band.dtype == rhs.dtype == np.float64):
        raise ValueError("solve_banded_spd: band and rhs must be float64 in Fortran order")
    routine = _dpbsv()
    ldab, m = band.shape
    channels = rhs.shape[1]
    for s in range(len(starts) - 1):
        lo, hi, kd = int(starts[s]), int(starts[s + 1]), int(widths[s])
        if hi == lo:
            continue
        if routine is None:  # pragma: no cover - scipy without the C API
            _, x, info = lapack.dpbsv(band[: kd + 1, lo:hi], rhs[lo:hi], lower=1)
            rhs[lo:hi] = x
        else:
            status = ctypes.c_int(0)
            routine(
                b"L",
                ctypes.byref(ctypes.c_int(hi - lo)),
                ctypes.byref(ctypes.c_int(kd)),
                ctypes.byref(ctypes.c_int(channels)),
                band.ctypes.data + lo * band.strides[1],
                ctypes.byref(ctypes.c_int(ldab)),
                rhs.ctypes.data + lo * rhs.strides[0],
                ctypes.byref(ctypes.c_int(m)),
                ctypes.byref(status),
            )
            info = status.value
        if info != 0:
            raise np.linalg.LinAlgError(f"banded Cholesky (LAPACK dpbsv) failed on block {s}: info {info}")
