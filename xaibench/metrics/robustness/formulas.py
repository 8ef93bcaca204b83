"""Pure formulas of the robustness family (DESIGN 3b): numpy only, vectorised over samples and
perturbations. Arrays are ``(B, n, ...)`` for the perturbed side and ``(B, ...)`` for the clean
side; every function returns a ``(B, n)`` array of ratios (lower is more robust)."""

from __future__ import annotations

import numpy as np

EPS_MIN = 1e-6
"""Agarwal et al. 2022's floor on the denominators of the relative stabilities (Quantus's ``eps_min``)."""


def _flat(clean: np.ndarray, perturbed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b, n = perturbed.shape[:2]
    return (
        np.asarray(clean, dtype=np.float64).reshape(b, 1, -1),
        np.asarray(perturbed, dtype=np.float64).reshape(b, n, -1),
    )


def distance(clean: np.ndarray, perturbed: np.ndarray, order: int = 2) -> np.ndarray:
    """``||a - a'_j||_order`` for each sample and perturbation: ``(B, n)``."""
    a, p = _flat(clean, perturbed)
    return np.linalg.norm(p - a, ord=order, axis=-1)


def relative_sensitivity(e: np.ndarray, e_p: np.ndarray) -> np.ndarray:
    """Yeh et al. 2019: ``||E - E'_j||_2 / ||E||_2``; NaN where ``||E|| = 0``."""
    norm = np.linalg.norm(np.asarray(e, dtype=np.float64).reshape(len(e), -1), axis=-1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > 0, distance(e, e_p) / np.where(norm > 0, norm, 1.0), np.nan)


def lipschitz_ratio(e: np.ndarray, e_p: np.ndarray, x: np.ndarray, x_p: np.ndarray, order: int = 2) -> np.ndarray:
    """Alvarez-Melis and Jaakkola 2018: ``||E - E'_j||_order / ||x - x'_j||_2`` (``order`` 2);
    Montavon et al. 2018's continuity is the same ratio with the L1 norm on the explanations."""
    dx = distance(x, x_p)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dx > 0, distance(e, e_p, order) / np.where(dx > 0, dx, 1.0), np.nan)


def relative_change(a: np.ndarray, a_p: np.ndarray, eps: float = EPS_MIN) -> np.ndarray:
    """``||(a - a'_j) / a||_2`` elementwise-relative, zeros of ``a`` replaced by ``eps`` (Agarwal 2022)."""
    c, p = _flat(a, a_p)
    return np.linalg.norm((c - p) / (c + (c == 0) * eps), axis=-1)


def relative_stability(e_change: np.ndarray, denominator: np.ndarray, eps: float = EPS_MIN) -> np.ndarray:
    """Agarwal et al. 2022: the explanation's relative change over ``max(denominator, eps)``."""
    return e_change / np.maximum(denominator, eps)


def relative_input_stability(
    e: np.ndarray, e_p: np.ndarray, x: np.ndarray, x_p: np.ndarray, eps: float = EPS_MIN
) -> np.ndarray:
    """RIS: ``||(E - E')/E|| / max(||(x - x')/x||, eps)``."""
    return relative_stability(relative_change(e, e_p, eps), relative_change(x, x_p, eps), eps)


def relative_output_stability(
    e: np.ndarray, e_p: np.ndarray, h: np.ndarray, h_p: np.ndarray, eps: float = EPS_MIN
) -> np.ndarray:
    """ROS: ``||(E - E')/E|| / max(||h(x) - h(x')||, eps)``, h the logits."""
    return relative_stability(relative_change(e, e_p, eps), distance(h, h_p), eps)


def relative_representation_stability(
    e: np.ndarray, e_p: np.ndarray, r: np.ndarray, r_p: np.ndarray, eps: float = EPS_MIN
) -> np.ndarray:
    """RRS: ``||(E - E')/E|| / max(||(L - L')/L||, eps)``, L an internal representation."""
    return relative_stability(relative_change(e, e_p, eps), relative_change(r, r_p, eps), eps)


def aggregate(ratios: np.ndarray, kept: np.ndarray, how: str) -> np.ndarray:
    """Max or mean over the kept, finite perturbations of each sample; NaN where none is left."""
    ok = kept & np.isfinite(ratios)
    count = ok.sum(axis=1)
    if how == "max":
        out = np.where(ok, ratios, -np.inf).max(axis=1)
    else:
        out = np.where(ok, ratios, 0.0).sum(axis=1) / np.maximum(count, 1)
    return np.where(count > 0, out, np.nan)
