"""Noisy linear imputation as a batched torch operation (any device), checked against SuperLU.

Solves the same systems as :func:`xaibench.metrics.faithfulness.imputation.linear_imputation`
(weights 1/6 direct, 1/12 diagonal, renormalised at the image border; equation of a removed
pixel j: ``sum_k w_jk (u_j - u_k) = 0`` over its in-image neighbours k; every pixel removed ->
0) for every mask and channel of a batch together, on the tensors' device, without Python
loops over pixels.

**Method.** Conjugate gradients preconditioned by one multigrid V-cycle (MG-PCG):

- The operator of each mask is a variable 9-point stencil ``(N, 9, H, W)`` on the full pixel
  grid, applied with shifted slices (9 multiply-adds). Known pixels carry the identity and
  take no part in the solve; the restriction of the operator to the removed pixels is
  symmetric positive definite whenever at least one pixel is known.
- Coarse levels halve the grid (bilinear prolongation ``P``, full-weighting restriction
  ``P^T``, both masked to the active pixels of the finer level) down to at most
  ``8 x 8``; each coarse operator is the Galerkin product ``P^T A P``, again a 9-point
  stencil, computed for the whole batch with 9 probe vectors (a 3 x 3 colouring of the coarse
  grid). The coarsest level is solved by a batched dense pseudo-inverse (the Galerkin operator
  can be singular when masked prolongations coincide, e.g. around one isolated removed pixel).
- Smoother: l1-Jacobi (each active row divided by its l1 norm, sum_k |a_jk|; Baker, Falgout,
  Kolev and Yang 2011), 2 sweeps before and after the coarse correction, so the V-cycle is a
  symmetric preconditioner. l1-Jacobi converges for every symmetric positive definite operator,
  so the V-cycle stays positive definite on every level. Damped Jacobi (weight 2/3), used before,
  does not on the Galerkin operators of fragmented masks: a 7 % ROAD mask of a photo's gradient
  map (1,171 pieces, 680 single pixels) took 349 to 400 CG iterations and fell back to SuperLU
  (on a GPU, 3 or 4 systems of every call did); with l1-Jacobi every system of 4 photos x 50
  ROAD steps converges within 10 (``bench/bench_imputation.py``). CG uses the flexible (Polak-Ribiere) update,
  which tolerates a preconditioner applied in a lower precision.
- The channels of one mask share the operator and its hierarchy; every (mask, channel)
  system has its own CG scalars and stops on its own.

**Stopping rule.** A system has converged when the V-cycle applied to its residual,
``z = M^-1 (b - A u)``, an estimate of the error of ``u`` in the image's own units, satisfies
``max |z| <= tol`` (default ``1e-7``, normalised-space units); the true residual is recomputed
in float64 at the end and must pass ``max |M^-1 r| <= 10 tol`` (the slack covers the drift between
the CG recurrence and the true residual in lower precisions). A system that has not converged after ``max_iter``
iterations is either re-solved exactly with SuperLU on the CPU (``on_failure="exact"``, the
default, with a :class:`ImputationFallbackWarning`) or raises
:class:`ImputationNotConvergedError` (``on_failure="raise"``).

**Precision.** ``dtype`` (default float64) is the precision of the CG vectors and scalars;
``precond_dtype`` (default float32) that of the V-cycle. float32 everywhere cannot reach
1e-5 on large removed regions (the system's condition number grows like the square of the
region's width; measured: 462 of 600 systems of a 50-step ROAD curve on 4 photos missed
tol and fell back), float64 CG with a float32 V-cycle can, and on CPU it is about 15 % faster
than float64 throughout with the same iterations; ``bench/bench_imputation.py`` measures all three.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import torch
import torch.nn.functional as F

from xaibench.errors import XaibenchError
from xaibench.metrics.faithfulness.imputation import NEIGHBOUR_WEIGHTS, linear_imputation

__all__ = [
    "ImputationFallbackWarning",
    "ImputationNotConvergedError",
    "SolveInfo",
    "linear_imputation_torch",
    "noisy_linear_imputation_torch",
]

#: Offsets of the 9-point stencil, index 4 is the centre (row-major over dr, dc in -1..1).
OFFSETS: tuple[tuple[int, int], ...] = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1))
CENTRE = 4
_WEIGHT = {(dr, dc): w for dr, dc, w in NEIGHBOUR_WEIGHTS}
_COARSEST = 8  # a level whose sides are both <= this is solved densely
_SWEEPS = 2


class ImputationNotConvergedError(XaibenchError):
    """The iterative imputation did not reach its tolerance within ``max_iter`` iterations."""


class ImputationFallbackWarning(RuntimeWarning):
    """Some systems did not converge iteratively and were solved exactly with SuperLU on the CPU."""


@dataclass
class SolveInfo:
    """What a solve did: CG iterations (largest over the systems), final error estimate
    (``max |M^-1 r|`` over all systems, normalised-space units, lower is better), the
    number of (mask, channel) systems solved iteratively and of those re-solved exactly."""

    iterations: int = 0
    error_estimate: float = 0.0
    systems: int = 0
    fallback: int = 0
    per_system_iterations: list[int] = field(default_factory=list)


# ----------------------------------------------------------------------------- stencils


def _apply(stencil: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``A u`` for a ``(N, 9, H, W)`` stencil and ``(N, C, H, W)`` vectors (zero outside the grid)."""
    h, w = u.shape[-2:]
    padded = F.pad(u, (1, 1, 1, 1))
    s = stencil.to(u.dtype)
    out = s[:, CENTRE : CENTRE + 1] * u
    for o, (dr, dc) in enumerate(OFFSETS):
        if o != CENTRE:
            out.addcmul_(s[:, o : o + 1], padded[:, :, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w])
    return out


@lru_cache(maxsize=16)
def _neighbour_kernel(dtype: torch.dtype, device: torch.device, channels: int) -> torch.Tensor:
    k = torch.zeros((3, 3), dtype=dtype, device=device)
    for dr, dc, wt in NEIGHBOUR_WEIGHTS:
        k[1 + dr, 1 + dc] = wt
    return k.expand(channels, 1, 3, 3).contiguous()


def _apply_fine(diag: torch.Tensor, mask: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``A u`` of the finest level for ``u`` zero on known pixels: one fixed 3 x 3 convolution,
    ``mask * (d * u - sum_k w_k u_k)``."""
    c = u.shape[1]
    conv = F.conv2d(u, _neighbour_kernel(u.dtype, u.device, c), padding=1, groups=c)
    return mask * (diag * u - conv)


def _fine_stencil(removed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The 9-point stencil of the imputation systems of ``(N, H, W)`` masks.

    Removed rows: centre ``d_j`` (sum of the weights of in-image neighbours), ``-w_jk`` towards
    removed neighbours, 0 towards known ones (they go to the right-hand side). Known rows: identity.
    """
    n, h, w = removed.shape
    rem = removed.to(dtype)
    inside = F.pad(torch.ones((n, h, w), dtype=dtype, device=removed.device), (1, 1, 1, 1))
    rem_p = F.pad(rem, (1, 1, 1, 1))
    stencil = torch.zeros((n, 9, h, w), dtype=dtype, device=removed.device)
    diag = torch.zeros((n, h, w), dtype=dtype, device=removed.device)
    for o, (dr, dc) in enumerate(OFFSETS):
        if o == CENTRE:
            continue
        wt = _WEIGHT[(dr, dc)]
        diag = diag + wt * inside[:, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
        stencil[:, o] = -wt * rem * rem_p[:, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
    stencil[:, CENTRE] = rem * diag + (1.0 - rem)
    return stencil


def _rhs(images: torch.Tensor, removed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``b_j = sum_{known in-image k} w_jk x_k`` on removed pixels, 0 on known ones."""
    h, w = removed.shape[-2:]
    rem = removed[:, None].to(dtype)
    known = F.pad(images.to(dtype) * (1.0 - rem), (1, 1, 1, 1))
    b = torch.zeros(known.shape[0], known.shape[1], h, w, dtype=dtype, device=images.device)
    for o, (dr, dc) in enumerate(OFFSETS):
        if o == CENTRE:
            continue
        b = b + _WEIGHT[(dr, dc)] * known[:, :, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
    return b * rem


# ----------------------------------------------------------------------------- multigrid hierarchy

_KERNEL_1D = (0.5, 1.0, 0.5)


def _kernel(dtype: torch.dtype, device: torch.device, channels: int) -> torch.Tensor:
    k = torch.tensor(_KERNEL_1D, dtype=dtype, device=device)
    return torch.outer(k, k).expand(channels, 1, 3, 3).contiguous()


@lru_cache(maxsize=64)
def _edge_scale(size: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``1 / (P_0 1)`` on the fine grid, where ``P_0`` is the plain bilinear transposed convolution.

    ``P_0`` gives an even-sized grid's last row and column only half a coarse node; dividing by
    its row sums makes ``P`` reproduce constants up to the border, which the near-constant modes
    of a large removed region (Neumann at the image border) need.
    """
    h, w = size
    hc, wc = (h + 1) // 2, (w + 1) // 2
    ones = torch.ones((1, 1, hc, wc), dtype=dtype, device=device)
    pad = (h - (2 * hc - 1), w - (2 * wc - 1))
    s = F.conv_transpose2d(ones, _kernel(dtype, device, 1), stride=2, padding=1, output_padding=pad)
    return 1.0 / s


def _restrict(r: torch.Tensor) -> torch.Tensor:
    """``P^T r`` (full weighting): ``(N, C, H, W)`` -> ``(N, C, ceil(H/2), ceil(W/2))``."""
    c = r.shape[1]
    r = r * _edge_scale(tuple(r.shape[-2:]), r.dtype, r.device)
    return F.conv2d(r, _kernel(r.dtype, r.device, c), stride=2, padding=1, groups=c)


def _prolong(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``P x`` (bilinear, constants reproduced up to the border): the exact adjoint of :func:`_restrict`."""
    c = x.shape[1]
    hc, wc = x.shape[-2:]
    pad = (size[0] - (2 * hc - 1), size[1] - (2 * wc - 1))
    out = F.conv_transpose2d(x, _kernel(x.dtype, x.device, c), stride=2, padding=1, output_padding=pad, groups=c)
    return out * _edge_scale(size, x.dtype, x.device)


@dataclass
class _Level:
    stencil: torch.Tensor  # (N, 9, H, W); inactive rows are the identity
    active: torch.Tensor  # (N, 1, H, W) 0/1 in the stencil's dtype
    inv_diag: torch.Tensor  # (N, 1, H, W) 1 / (l1 norm of the row) on active pixels, 0 elsewhere
    fine_diag: torch.Tensor | None = None  # finest level: apply by convolution (vectors zero off active)

    def apply(self, u: torch.Tensor) -> torch.Tensor:
        if self.fine_diag is not None:
            return _apply_fine(self.fine_diag, self.active, u)
        return _apply(self.stencil, u)


def _galerkin(fine: _Level) -> torch.Tensor:
    """Coarse stencil ``P_m^T A P_m`` (``P_m = active * P``) by 9 colour probes."""
    n, _, h, w = fine.stencil.shape
    hc, wc = (h + 1) // 2, (w + 1) // 2
    dtype, device = fine.stencil.dtype, fine.stencil.device
    ii = torch.arange(hc, device=device)
    jj = torch.arange(wc, device=device)
    colour = (ii[:, None] % 3) * 3 + (jj[None, :] % 3)  # (hc, wc)
    probes = (colour[None] == torch.arange(9, device=device)[:, None, None]).to(dtype)  # (9, hc, wc)
    probes = probes[None].expand(n, 9, hc, wc)
    x = fine.active * _prolong(probes, (h, w))
    y = _restrict(fine.active * fine.apply(x))  # (N, 9, hc, wc): y[c][I] = sum_{J colour c} A_c[I, J]
    stencil = torch.zeros((n, 9, hc, wc), dtype=dtype, device=device)
    for o, (dr, dc) in enumerate(OFFSETS):
        ni, nj = ii + dr, jj + dc
        inside = ((ni >= 0) & (ni < hc))[:, None] & ((nj >= 0) & (nj < wc))[None, :]
        idx = ((ni[:, None] % 3) * 3 + (nj[None, :] % 3)).expand(n, 1, hc, wc)
        stencil[:, o] = torch.gather(y, 1, idx)[:, 0] * inside.to(dtype)
    return stencil


def _level(stencil: torch.Tensor, active: torch.Tensor) -> _Level:
    """Make inactive rows and columns the identity and precompute the l1-Jacobi weights."""
    h, w = stencil.shape[-2:]
    act_p = F.pad(active, (1, 1, 1, 1))
    stencil = stencil.clone()
    for o, (dr, dc) in enumerate(OFFSETS):
        if o == CENTRE:
            continue
        stencil[:, o : o + 1] *= active * act_p[:, :, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
    stencil[:, CENTRE : CENTRE + 1] = torch.where(active > 0, stencil[:, CENTRE : CENTRE + 1], 1.0)
    l1 = stencil.abs().sum(dim=1, keepdim=True)  # inactive rows: the identity's 1
    inv_diag = active / l1
    return _Level(stencil, active, inv_diag)


class _Hierarchy:
    """Multigrid V-cycle for the ``(N, H, W)`` masks (channels share it)."""

    def __init__(self, removed: torch.Tensor, dtype: torch.dtype) -> None:
        fine = _fine_stencil(removed, dtype)
        active = removed[:, None].to(dtype)
        self.levels: list[_Level] = [_level(fine, active)]
        self.levels[0].fine_diag = fine[:, CENTRE : CENTRE + 1] * active
        while max(self.levels[-1].stencil.shape[-2:]) > _COARSEST:
            coarse = _galerkin(self.levels[-1])
            diag = coarse[:, CENTRE : CENTRE + 1]
            scale = diag.amax(dim=(2, 3), keepdim=True).clamp_min(torch.finfo(dtype).tiny)
            act = (diag > 1e-10 * scale).to(dtype)
            self.levels.append(_level(coarse, act))
        self._factor_coarsest()

    def _factor_coarsest(self) -> None:
        last = self.levels[-1]
        n, _, h, w = last.stencil.shape
        size = h * w
        dtype, device = last.stencil.dtype, last.stencil.device
        dense = torch.zeros((n, size, size), dtype=torch.float64, device=device)
        ii, jj = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
        rows = (ii * w + jj).reshape(-1)
        for o, (dr, dc) in enumerate(OFFSETS):
            ni, nj = (ii + dr).reshape(-1), (jj + dc).reshape(-1)
            ok = (ni >= 0) & (ni < h) & (nj >= 0) & (nj < w)
            r, c = rows[ok], (ni * w + nj)[ok]
            dense[:, r, c] += last.stencil[:, o].reshape(n, -1)[:, ok].to(torch.float64)
        # Symmetric positive semi-definite: masked prolongations of neighbouring coarse nodes can
        # coincide (e.g. one isolated removed pixel), so the coarsest operator may be singular; its
        # right-hand sides lie in its range and the pseudo-inverse solves them.
        vals, vecs = torch.linalg.eigh(dense)
        keep = vals > 1e-12 * vals.amax(dim=1, keepdim=True).clamp_min(1e-300)
        inv = torch.where(keep, 1.0 / torch.where(keep, vals, 1.0), 0.0)
        self.pinv = ((vecs * inv[:, None, :]) @ vecs.transpose(1, 2)).to(dtype)

    def select(self, keep: torch.Tensor) -> _Hierarchy:
        """The hierarchy of the masks ``keep`` (bool or indices) only."""
        sub = object.__new__(_Hierarchy)
        sub.levels = [
            _Level(
                lev.stencil[keep],
                lev.active[keep],
                lev.inv_diag[keep],
                None if lev.fine_diag is None else lev.fine_diag[keep],
            )
            for lev in self.levels
        ]
        sub.pinv = self.pinv[keep]
        return sub

    def _solve_coarsest(self, r: torch.Tensor) -> torch.Tensor:
        n, c, h, w = r.shape
        x = self.pinv.to(r.dtype) @ r.reshape(n, c, h * w).transpose(1, 2)
        return x.transpose(1, 2).reshape(n, c, h, w) * self.levels[-1].active

    def vcycle(self, r: torch.Tensor, depth: int = 0) -> torch.Tensor:
        """Approximate ``A^-1 r`` (zero initial guess); symmetric in ``r``."""
        if depth == len(self.levels) - 1:
            return self._solve_coarsest(r)
        lev = self.levels[depth]
        x = lev.inv_diag * r
        for _ in range(_SWEEPS - 1):
            x = x + lev.inv_diag * (r - lev.apply(x))
        res = lev.active * (r - lev.apply(x))
        xc = self.vcycle(_restrict(res), depth + 1)
        x = x + lev.active * _prolong(xc, tuple(r.shape[-2:]))
        for _ in range(_SWEEPS):
            x = x + lev.inv_diag * (r - lev.apply(x))
        return x


# ----------------------------------------------------------------------------- solve


def _check_inputs(images: torch.Tensor, removed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(images, torch.Tensor) or not isinstance(removed, torch.Tensor):
        raise XaibenchError("imputation: images and removed must be torch tensors")
    if removed.ndim != 3 or removed.dtype != torch.bool:
        raise XaibenchError(
            f"imputation: removed must be an (N, H, W) bool tensor, got {tuple(removed.shape)} {removed.dtype}"
        )
    if images.ndim == 3:
        images = images[None]
    if (
        images.ndim != 4
        or not images.is_floating_point()
        or tuple(images.shape[-2:]) != tuple(removed.shape[-2:])
        or images.shape[0] not in (1, removed.shape[0])
    ):
        raise XaibenchError(
            f"imputation: images of shape {tuple(images.shape)} ({images.dtype}) do not match removed masks "
            f"of shape {tuple(removed.shape)}; expected float (N, C, H, W) or (C, H, W)"
        )
    removed = removed.to(images.device)
    return images.expand(removed.shape[0], *images.shape[1:]), removed


def linear_imputation_torch(
    images: torch.Tensor,
    removed: torch.Tensor,
    *,
    tol: float = 1e-7,
    max_iter: int = 100,
    initial: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    precond_dtype: torch.dtype | None = torch.float32,
    on_failure: Literal["exact", "raise"] = "exact",
    info: SolveInfo | None = None,
) -> torch.Tensor:
    """Impute the removed pixels of ``N`` images (no noise), batched on the tensors' device.

    ``images``: ``(N, C, H, W)`` or ``(C, H, W)`` (shared by all masks) float tensor;
    ``removed``: ``(N, H, W)`` bool tensor, True where a pixel is imputed. ``initial``: an
    optional warm start broadcastable to ``(N, C, H, W)`` (e.g. the previous removal step's
    result); only its removed pixels are used. Returns a new ``(N, C, H, W)`` tensor in the
    images' dtype and on their device whose known pixels are the input's and whose removed
    pixels solve the imputation system to within ``tol`` (max abs error estimate, units of the
    images; see the module doc). An image with every pixel removed gives 0. Pass a
    :class:`SolveInfo` as ``info`` to receive iteration counts. ``precond_dtype=None`` runs
    the V-cycle in ``dtype``.
    """
    if on_failure not in ("exact", "raise"):
        raise XaibenchError(f"imputation: on_failure must be 'exact' or 'raise', got {on_failure!r}")
    if not tol > 0 or max_iter < 0:
        raise XaibenchError(f"imputation: need tol > 0 and max_iter >= 0, got tol={tol}, max_iter={max_iter}")
    images, removed = _check_inputs(images, removed)
    n, c, h, w = images.shape
    out_dtype = images.dtype
    info = info if info is not None else SolveInfo()
    pdtype = precond_dtype if precond_dtype is not None else dtype
    counts = removed.reshape(n, -1).sum(dim=1)
    everything = counts == h * w
    out = images.clone()
    out[everything] = 0.0
    todo = torch.nonzero((counts > 0) & ~everything).flatten()
    info.systems = int(todo.numel()) * c
    if todo.numel() == 0:
        return out
    rem = removed[todo]
    x_known = images[todo].to(dtype)
    mask = rem[:, None].to(dtype)
    hierarchy = _Hierarchy(rem, pdtype)
    diag = (_fine_stencil(rem, dtype)[:, CENTRE : CENTRE + 1] * mask).contiguous()
    b = _rhs(x_known, rem, dtype)

    full = (hierarchy, diag, mask, b)

    def precondition(r: torch.Tensor) -> torch.Tensor:
        return hierarchy.vcycle(r.to(pdtype)).to(dtype)

    if initial is not None:
        start = torch.as_tensor(initial).to(device=images.device, dtype=dtype)
        u = start.expand(n, c, h, w)[todo] * mask
    else:
        u = torch.zeros_like(b)
    u_all = u
    sel = torch.arange(rem.shape[0], device=u.device)  # masks still iterated (indices into todo)
    r = b - _apply_fine(diag, mask, u)
    z = precondition(r)
    err = z.abs().amax(dim=(2, 3))  # (masks, C)
    done = err <= tol
    p = z.clone()
    rz = (r * z).sum(dim=(2, 3))
    iters = torch.zeros_like(err, dtype=torch.int64)
    it = 0
    while not bool(done.all()) and it < max_iter:
        live_masks = ~done.all(dim=1)
        if int(live_masks.sum()) <= 0.75 * live_masks.numel():
            # Drop the masks whose channels have all converged: later iterations cost only the rest.
            u_all = u_all.clone() if u_all is u else u_all
            u_all[sel] = u
            sel = sel[live_masks]
            hierarchy = hierarchy.select(live_masks)
            diag, mask, b = diag[live_masks], mask[live_masks], b[live_masks]
            u, r, z, p = u[live_masks], r[live_masks], z[live_masks], p[live_masks]
            rz, err, done = rz[live_masks], err[live_masks], done[live_masks]
        it += 1
        live = (~done).to(dtype)
        ap = _apply_fine(diag, mask, p)
        pap = (p * ap).sum(dim=(2, 3))
        alpha = torch.where(pap > 0, rz / torch.where(pap > 0, pap, 1.0), 0.0) * live
        u = u + alpha[..., None, None] * p
        r_new = r - alpha[..., None, None] * ap
        z_new = precondition(r_new)
        rz_new = (r_new * z_new).sum(dim=(2, 3))
        beta_num = (z_new * (r_new - r)).sum(dim=(2, 3))  # flexible (Polak-Ribiere) CG
        beta = torch.where(rz > 0, beta_num / torch.where(rz > 0, rz, 1.0), 0.0)
        p = z_new + beta[..., None, None] * p
        r, z, rz = r_new, z_new, rz_new
        iters[sel] += (~done).to(torch.int64)
        err = torch.where(done, err, z.abs().amax(dim=(2, 3)))
        done = done | (err <= tol)
    if u_all is not u:
        u_all = u_all.clone()
        u_all[sel] = u
    u = u_all
    hierarchy, diag, mask, b = full
    # Check the true residual (not the recurrence) before accepting a system.
    f64 = torch.float64
    r_true = b.to(f64) - _apply_fine(diag.to(f64), mask.to(f64), u.to(f64))
    err = hierarchy.vcycle(r_true.to(pdtype)).abs().amax(dim=(2, 3)).to(torch.float64)
    ok = err <= tol * 10  # the recurrence and the true residual differ by rounding
    info.iterations = it
    info.per_system_iterations = iters.flatten().tolist()
    info.error_estimate = float(err.max())
    solved = torch.where(mask > 0, u, x_known).to(out_dtype)
    out[todo] = solved
    if not bool(ok.all()):
        bad = torch.nonzero(~ok.all(dim=1)).flatten()
        message = (
            f"imputation: {int((~ok).sum())} of {ok.numel()} systems did not converge in max_iter={max_iter} "
            f"iterations (error estimate {float(err.max()):.2e} > tol={tol:.1e})"
        )
        if on_failure == "raise":
            raise ImputationNotConvergedError(message)
        warnings.warn(message + "; solved exactly with SuperLU on the CPU", ImputationFallbackWarning, stacklevel=2)
        idx = todo[bad]
        exact = linear_imputation(images[idx].detach().cpu().numpy(), removed[idx].cpu().numpy())
        out[idx] = torch.from_numpy(exact).to(device=out.device, dtype=out_dtype)
        info.fallback = int(bad.numel()) * c
    return out


def noisy_linear_imputation_torch(
    images: torch.Tensor,
    removed: torch.Tensor,
    noise: torch.Tensor | None,
    *,
    noise_std: float = 0.01,
    **kwargs: object,
) -> torch.Tensor:
    """:func:`linear_imputation_torch` plus ``noise_std * noise`` on the removed pixels.

    ``noise``: a standard-normal field broadcastable to ``(N, C, H, W)`` (drawn by the caller
    from a seeded generator); ``None`` or ``noise_std == 0`` gives the exact linear imputation.
    Other keyword arguments go to :func:`linear_imputation_torch`.
    """
    out = linear_imputation_torch(images, removed, **kwargs)  # type: ignore[arg-type]
    if noise is not None and noise_std != 0.0:
        scaled = noise_std * torch.as_tensor(noise).to(device=out.device, dtype=out.dtype)
        out = torch.where(removed.to(out.device)[:, None], out + scaled, out)
    return out
