"""The GIL-free banded Cholesky solve of the imputation, against scipy's LAPACK wrapper and numpy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from xaibench.metrics.faithfulness.banded import _dpbsv, solve_banded_spd


def _spd_band(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """Lower band storage of a random diagonally dominant (so positive definite) band matrix."""
    band = np.zeros((width + 1, n))
    band[1:] = -rng.random((width, n))
    for d in range(1, width + 1):
        band[d, n - d :] = 0.0  # below the matrix's last row: not part of it
    full = _dense(band)
    band[0] = np.abs(full).sum(axis=1) + 1.0
    return band


def _dense(band: np.ndarray) -> np.ndarray:
    n = band.shape[1]
    full = np.zeros((n, n))
    for d in range(band.shape[0]):
        idx = np.arange(n - d)
        full[idx + d, idx] = band[d, : n - d]
        full[idx, idx + d] = band[d, : n - d]
    return full


def test_the_ctypes_route_is_the_one_taken():
    assert _dpbsv() is not None  # scipy exposes dpbsv to C: the GIL-free call, not the fallback


def test_blocks_of_several_widths_solve_as_scipys_wrapper_does():
    rng = np.random.default_rng(0)
    sizes, widths = [7, 1, 30, 12], [3, 0, 5, 1]
    blocks = [_spd_band(rng, n, w) for n, w in zip(sizes, widths, strict=True)]
    width = max(widths)
    band = np.zeros((width + 1, sum(sizes)), order="F")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for block, lo, w in zip(blocks, starts[:-1], widths, strict=True):
        band[: w + 1, lo : lo + block.shape[1]] = block
    rhs = np.asfortranarray(rng.normal(size=(sum(sizes), 3)))
    expected = []
    for block, lo, hi in zip(blocks, starts[:-1], starts[1:], strict=True):
        _, x, info = lapack.dpbsv(block, rhs[lo:hi], lower=1)
        assert info == 0
        expected.append(x)
        np.testing.assert_allclose(_dense(block) @ x, rhs[lo:hi], atol=1e-10)
    solution = rhs.copy(order="F")
    solve_banded_spd(band, solution, starts, np.array(widths))
    np.testing.assert_array_equal(solution, np.concatenate(expected))  # the same routine: the same bits


def test_a_block_that_is_not_positive_definite_is_named():
    band = np.asfortranarray([[1.0, -1.0, 2.0], [0.0, 0.0, 0.0]])
    with pytest.raises(np.linalg.LinAlgError, match="block 1: info 1"):
        solve_banded_spd(band, np.ones((3, 1), order="F"), np.array([0, 1, 3]), np.array([0, 1]))


def test_arrays_in_c_order_are_refused():
    with pytest.raises(ValueError, match="Fortran order"):
        solve_banded_spd(np.ones((1, 4)), np.ones((4, 2)), np.array([0, 4]), np.array([0]))
