"""Noisy linear imputation (Rong et al. 2022, ROAD), exact and batched.

Every removed pixel becomes the weighted mean of its 8 neighbours (weight 1/6
for the 4 direct neighbours, 1/12 for the 4 diagonal ones, DESIGN 3). Choices
made here (documented in ``docs/metrics.md``):

- **Space.** The caller passes images in the space it wants imputed; ROAD
  imputes in the model's normalised input space (as pytorch-grad-cam and the
  ROAD authors do). The solve is linear and per channel, so for a per-channel
  affine normalisation the result is the same as imputing in pixel space.
- **Image border.** A neighbour outside the image does not exist: the weights
  are renormalised over the neighbours that do exist (the equation of pixel j
  is ``sum_k w_jk (u_j - u_k) = 0`` over in-image neighbours k).
- **Chains of removed pixels.** A removed pixel whose neighbours are all
  removed is not special: its equation links it to them, and the linear system
  carries the known values inwards (a discrete harmonic interpolation).
- **Nothing known.** Only when every pixel of an image is removed is there no
  known value to interpolate from (the system is singular); the result is then
  0, i.e. the dataset mean in normalised space.

The systems of many images (e.g. all removal steps of a ROAD curve for every
image of a batch) are assembled together without Python loops over pixels, in
chunks that bound memory, and each image's system is solved exactly by one of
two direct solvers, chosen by the image's shorter side
(:data:`BANDED_MAX_SIDE`, measured by ``bench/bench_imputation_solvers.py``):

- **banded Cholesky** (LAPACK ``dpbsv``) for small images: the unknowns in
  raster order along the shorter side, so the matrix is a band of at most that
  side + 1 diagonals; on 64 px images it takes about a third of SuperLU's time;
- **SuperLU** (no pivoting: the matrix is symmetric positive definite) for
  larger ones, where the band grows with the side and a sparse factorisation
  wins: each chunk is one block-diagonal system, each block ordered by a
  geometric nested dissection of the pixel grid so that the factor stays small.

Both equal ``scipy.sparse.linalg.spsolve`` of the same system to rounding error,
and each image's system is solved on its own terms, so the chunking changes no
bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from xaibench.metrics.faithfulness.banded import solve_banded_spd

#: (row offset, column offset, weight) of the 8 neighbours.
NEIGHBOUR_WEIGHTS: tuple[tuple[int, int, float], ...] = (
    (-1, -1, 1 / 12),
    (-1, 0, 1 / 6),
    (-1, 1, 1 / 12),
    (0, -1, 1 / 6),
    (0, 1, 1 / 6),
    (1, -1, 1 / 12),
    (1, 0, 1 / 6),
    (1, 1, 1 / 12),
)

#: Default bound on the unknowns of one block-diagonal solve (an image with more is solved alone).
#: SuperLU factors a block-diagonal system more slowly than its blocks one chunk at a time once
#: the chunk is large: ROAD's calls on 64 px images (16 masks of one image a call) ran in 0.78 to
#: 0.83 of the time at 8,192 as at 50,000, and 224 px images, solved alone either way, the same
#: (bench/bench_imputation_chunks.py). The images are the same bit for bit at every bound.
DEFAULT_MAX_UNKNOWNS = 8_192

#: Images whose shorter side is at most this many pixels are solved by banded Cholesky, larger
#: ones by SuperLU. The band has up to side + 1 diagonals, so its factor costs about side^2 per
#: unknown against SuperLU's side (a nested dissection); measured on ROAD's calls
#: (bench/bench_imputation_solvers.py), banded Cholesky takes 0.34-0.39 of SuperLU's time at 64 px,
#: 0.7-0.8 at 192 px and 0.92-0.97 at 224 px, where SuperLU stays (the photo tracks' numbers with it).
BANDED_MAX_SIDE = 192

#: (row offset, column offset) of the neighbours that come before a pixel in raster order: the
#: lower triangle of the banded system.
_EARLIER = frozenset({(-1, -1), (-1, 0), (-1, 1), (0, -1)})


@lru_cache(maxsize=16)
def nested_dissection_rank(height: int, width: int, leaf: int = 8) -> np.ndarray:
    """Rank of every pixel (raster index) in a geometric nested-dissection order.

    The grid is split recursively by a middle row or column (the longer side);
    both halves are ordered before their separator. Restricted to any subset of
    pixels this is still a dissection order, so the factor of every imputation
    system has little fill-in. Returns an ``int64`` array of ``height * width``
    ranks (read-only, cached).
    """
    pieces: list[np.ndarray] = []
    stack: list[tuple[int, int, int, int, bool]] = [(0, height, 0, width, False)]
    # Iterative post-order: (r0, r1, c0, c1, expanded); a separator is emitted after its halves.
    while stack:
        r0, r1, c0, c1, expanded = stack.pop()
        h, w = r1 - r0, c1 - c0
        if h <= 0 or w <= 0:
            continue
        if h * w <= leaf * leaf or min(h, w) < 3:
            rows, cols = np.mgrid[r0:r1, c0:c1]
            pieces.append((rows * width + cols).ravel())
            continue
        if h >= w:
            mid = (r0 + r1) // 2
            if expanded:
                pieces.append(mid * width + np.arange(c0, c1))
            else:
                stack += [(r0, r1, c0, c1, True), (mid + 1, r1, c0, c1, False), (r0, mid, c0, c1, False)]
        else:
            mid = (c0 + c1) // 2
            if expanded:
                pieces.append(np.arange(r0, r1) * width + mid)
            else:
                stack += [(r0, r1, c0, c1, True), (r0, r1, mid + 1, c1, False), (r0, r1, c0, mid, False)]
    order = np.concatenate(pieces)
    rank = np.empty(height * width, dtype=np.int64)
    rank[order] = np.arange(height * width)
    rank.setflags(write=False)
    return rank


@lru_cache(maxsize=16)
def nested_dissection_order(height: int, width: int) -> np.ndarray:
    """Raster pixel indices sorted by :func:`nested_dissection_rank` (read-only, cached)."""
    order = np.argsort(nested_dissection_rank(height, width))
    order.setflags(write=False)
    return order


@dataclass(frozen=True)
class _Equations:
    """The equations of the removed pixels of ``N`` images, unknowns in a given pixel order.

    Unknown ``m`` is pixel ``(rows[m], cols[m])`` of image ``sys[m]``; unknowns are grouped by
    image. Equation of unknown j: ``diag[j] u_j - sum w u_k = rhs[j]`` over its removed in-image
    neighbours k (``links``: per neighbour offset ``(dr, dc)``, the unknowns that have that
    neighbour removed, the neighbour's unknown and the weight), ``rhs`` the weighted known
    neighbours, ``(M, C)``.
    """

    diag: np.ndarray
    rhs: np.ndarray
    links: tuple[tuple[tuple[int, int], np.ndarray, np.ndarray, float], ...]
    sys: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


def _check_shapes(removed: np.ndarray, images: np.ndarray) -> None:
    """``removed`` ``(N, H, W)``; ``images`` ``(C, H, W)``, ``(1, C, H, W)`` or ``(N, C, H, W)``."""
    if removed.ndim != 3:
        raise ValueError(f"imputation: removed must be (N, H, W) bool, got shape {removed.shape}")
    shared = images.ndim == 3 or (images.ndim == 4 and images.shape[0] == 1)
    if (
        images.ndim not in (3, 4)
        or images.shape[-2:] != removed.shape[1:]
        or not (shared or images.shape[0] == removed.shape[0])
    ):
        raise ValueError(
            f"imputation: images of shape {images.shape} do not match removed masks of shape {removed.shape}"
        )


def _equations(removed: np.ndarray, images: np.ndarray, pixel_order: np.ndarray | None) -> _Equations:
    """Assemble the equations of every removed pixel, without Python loops over pixels.

    ``pixel_order``: raster pixel indices in the order the unknowns of an image take (None:
    raster order).
    """
    n_img, height, width = removed.shape
    n_pix = height * width
    img = np.asarray(images, dtype=np.float64)
    channels = img.shape[-3]
    shared = img.ndim == 3 or img.shape[0] == 1
    flat = removed.reshape(n_img, n_pix)
    if pixel_order is None:
        sys_idx, pix = np.nonzero(flat)
    else:
        sys_idx, pos = np.nonzero(flat[:, pixel_order])
        pix = pixel_order[pos]
    rows, cols = np.divmod(pix, width)
    m = pix.size
    # Padded grids (one-pixel frame) make every neighbour index valid: state 0 = outside, 1 = known, 2 = removed.
    hp, wp = height + 2, width + 2
    state = np.zeros((n_img, hp, wp), dtype=np.int8)
    state[:, 1:-1, 1:-1] = 1 + removed
    state = state.reshape(-1)
    q = sys_idx * (hp * wp) + (rows + 1) * wp + (cols + 1)
    var = np.full(n_img * hp * wp, -1, dtype=np.int64)
    var[q] = np.arange(m)
    src = img.reshape(1 if shared else n_img, channels, height, width)
    values = np.zeros((src.shape[0], hp, wp, channels))
    values[:, 1:-1, 1:-1, :] = src.transpose(0, 2, 3, 1)
    values = values.reshape(-1, channels)
    local = (rows + 1) * wp + (cols + 1) if shared else q

    diag = np.zeros(m)
    rhs = np.zeros((m, channels))
    links = []
    for dr, dc, weight in NEIGHBOUR_WEIGHTS:
        step = dr * wp + dc
        neighbour = state[q + step]
        diag += weight * (neighbour != 0)
        rhs += (weight * (neighbour == 1))[:, None] * values[local + step]
        unknown = np.flatnonzero(neighbour == 2)
        links.append(((dr, dc), unknown, var[q[unknown] + step], weight))
    return _Equations(diag, rhs, tuple(links), sys_idx, rows, cols)


def build_system(removed: np.ndarray, images: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray, tuple[np.ndarray, ...]]:
    """Assemble the imputation systems of ``N`` images as one block-diagonal system.

    ``removed``: ``(N, H, W)`` bool, True where a pixel is imputed. ``images``:
    ``(N, C, H, W)``, or ``(C, H, W)`` / ``(1, C, H, W)`` shared by all masks, with
    the known values. Returns
    ``(A, b, (sys, rows, cols))``: ``A`` is ``(M, M)`` sparse (M = removed
    pixels in all images), ``b`` is ``(M, C)``, and unknown ``m`` is pixel
    ``(rows[m], cols[m])`` of image ``sys[m]``. Unknowns are grouped by image
    and ordered by :func:`nested_dissection_rank` within an image. Equation of a
    removed pixel j: ``d_j u_j - sum_{removed k} w_jk u_k = sum_{known k} w_jk x_k``
    with ``d_j`` the sum of the weights of j's in-image neighbours.
    """
    removed = np.asarray(removed, dtype=bool)
    images = np.asarray(images)
    _check_shapes(removed, images)
    eq = _equations(removed, images, nested_dissection_order(*removed.shape[1:]))
    m = eq.diag.size
    all_rows = np.concatenate([np.arange(m), *(own for _, own, _, _ in eq.links)])
    all_cols = np.concatenate([np.arange(m), *(other for _, _, other, _ in eq.links)])
    all_vals = np.concatenate([eq.diag, *(np.full(own.size, -weight) for _, own, _, weight in eq.links)])
    a = sp.csc_matrix((all_vals, (all_rows, all_cols)), shape=(m, m))
    return a, eq.rhs, (eq.sys, eq.rows, eq.cols)


def _solve_spd(a: sp.csc_matrix, b: np.ndarray) -> np.ndarray:
    if a.shape[0] == 0:
        return np.zeros_like(b)
    # Symmetric positive definite and already in a dissection order: no pivoting, no reordering.
    lu = spla.splu(a, permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    return lu.solve(b)


def _solve_superlu(removed: np.ndarray, images: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The chunk's systems as one block-diagonal SuperLU solve: ``(solution (M, C), (sys, rows, cols))``."""
    a, b, where = build_system(removed, images)
    return _solve_spd(a, b), where


def _solve_banded(removed: np.ndarray, images: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Each image's system by banded Cholesky (LAPACK ``dpbsv``), unknowns in raster order:
    ``(solution (M, C), (sys, rows, cols))``.

    In raster order the removed neighbours of a pixel that come before it are at most
    ``width + 1`` unknowns back, so the system is a band; each image's band is as wide as its
    own farthest link, and each image is factored alone (the chunk changes no bit).
    """
    n_img = removed.shape[0]
    eq = _equations(removed, images, None)
    m = eq.diag.size
    earlier = [(own, own - other, weight) for offset, own, other, weight in eq.links if offset in _EARLIER]
    starts = np.searchsorted(eq.sys, np.arange(n_img + 1))
    reach = np.zeros(n_img, dtype=np.int64)
    for own, distance, _ in earlier:
        np.maximum.at(reach, eq.sys[own], distance)
    # LAPACK's lower band storage, column by column: band[i - j, j] = A[i, j] for 0 <= i - j <= width.
    band = np.zeros((int(reach.max(initial=0)) + 1, m), order="F")
    band[0] = eq.diag
    for own, distance, weight in earlier:
        band[distance, own - distance] = -weight
    solution = np.asfortranarray(eq.rhs)
    solve_banded_spd(band, solution, starts, reach)
    return solution, (eq.sys, eq.rows, eq.cols)


def linear_imputation(
    images: np.ndarray,
    removed: np.ndarray,
    *,
    max_unknowns: int = DEFAULT_MAX_UNKNOWNS,
) -> np.ndarray:
    """Impute the removed pixels of ``N`` images exactly (no noise).

    ``images``: ``(N, C, H, W)`` or ``(C, H, W)`` (shared by all masks) float
    array; ``removed``: ``(N, H, W)`` bool. Returns a new ``(N, C, H, W)``
    float32 array whose known pixels are the input's and whose removed pixels
    solve the linear system of :func:`build_system`. Images are assembled
    together in chunks of at most ``max_unknowns`` unknowns (an image with
    more alone); each is solved exactly, by banded Cholesky when its shorter
    side is at most :data:`BANDED_MAX_SIDE` and by SuperLU otherwise.
    """
    removed = np.asarray(removed, dtype=bool)
    images = np.asarray(images)
    _check_shapes(removed, images)
    if images.ndim == 3:
        images = images[None]
    height, width = removed.shape[1:]
    banded = min(height, width) <= BANDED_MAX_SIDE
    if banded and width > height:
        # raster order along the shorter side keeps the band narrow; the weights are symmetric
        # under transposition, so the transposed system is the same system
        return (
            linear_imputation(images.swapaxes(-1, -2), removed.swapaxes(-1, -2), max_unknowns=max_unknowns)
            .swapaxes(-1, -2)
            .copy()
        )
    solve = _solve_banded if banded else _solve_superlu
    n_img = removed.shape[0]
    full = np.broadcast_to(images, (n_img, *images.shape[1:]))
    out = np.array(full, dtype=np.float32)
    counts = removed.reshape(n_img, -1).sum(axis=1)
    n_pix = height * width
    # Every pixel removed: nothing to interpolate from, the result is 0 (the mean in normalised space).
    everything = counts == n_pix
    out[everything] = 0.0
    todo = np.flatnonzero((counts > 0) & ~everything)
    start = 0
    while start < todo.size:
        stop, total = start, 0
        while stop < todo.size and (stop == start or total + counts[todo[stop]] <= max_unknowns):
            total += counts[todo[stop]]
            stop += 1
        chunk = todo[start:stop]
        src = images if images.shape[0] == 1 else images[chunk]
        solution, (sys_idx, rows, cols) = solve(removed[chunk], src.astype(np.float64, copy=False))
        out[chunk[sys_idx], :, rows, cols] = solution.astype(np.float32)
        start = stop
    return out


def noisy_linear_imputation(
    images: np.ndarray,
    removed: np.ndarray,
    noise: np.ndarray | None,
    *,
    noise_std: float = 0.01,
    max_unknowns: int = DEFAULT_MAX_UNKNOWNS,
) -> np.ndarray:
    """:func:`linear_imputation` plus ``noise_std * noise`` on the removed pixels.

    ``noise`` is a standard-normal field broadcastable to ``(N, C, H, W)``
    (drawn by the caller from a seeded generator, so results are reproducible);
    ``None`` or ``noise_std == 0`` gives the exact linear imputation.
    """
    out = linear_imputation(images, removed, max_unknowns=max_unknowns)
    if noise is not None and noise_std != 0.0:
        scaled = np.float32(noise_std) * np.asarray(noise, dtype=np.float32)
        np.add(out, scaled, out=out, where=np.asarray(removed, dtype=bool)[:, None])
    return out
