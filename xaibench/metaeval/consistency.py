"""Noise resilience and adversarial reactivity of a metric: IAC, IEC and MC (DESIGN 9).

MetaQuantus (Hedstrom et al., TMLR 2023) scores an evaluation metric by how its scores move when
the model or the input is perturbed. A **minor** perturbation (fewer than 5 % of predictions
change) should leave the scores where they were (noise resilience, NR); a **disruptive** one
(more than 50 % change) should move them (adversarial reactivity, AR). For L explainers, N
samples and K perturbation draws, with ``Q*`` the unperturbed scores ``(L, N)``, ``Q^_k`` the
scores under draw k and ``I_k`` the samples the draw concerns (NR: prediction unchanged; AR:
prediction changed):

- **IAC** (intra-consistency), per explainer and draw: the two-sided Wilcoxon signed-rank p-value
  of ``Q*[l, I_k]`` against ``Q^_k[l, I_k]`` (``zero_method="zsplit"``); for AR, one minus it.
  Averaged over explainers and draws. Higher is better, in [0, 1].
- **IEC** (inter-consistency), per draw: NR, the fraction of (sample, rank position) pairs where
  the explainers' order by score is the same before and after (``argsort`` over explainers, per
  sample); AR, the fraction of (explainer, sample) pairs whose perturbed score is *worse* than
  the unperturbed one, in the metric's direction. Averaged over draws. Higher is better, in [0, 1].
- **MC** (meta-consistency) = the mean of IAC_NR, IAC_AR, IEC_NR and IEC_AR, in [0, 1]; higher
  is better. Reported per perturbation type (``model``: multiplicative weight noise, ``input``:
  additive input noise) and as the mean of the types.

Deviation from the ``metaquantus`` 0.0.5 code (written down in docs/meta.md): its IEC_AR compares
``q* < q^`` whatever the metric's direction (the direction string is only tested for truth), so
for a higher-is-better metric it counts a score that *improved* under disruption as reactive;
here the comparison follows the direction, which is what its paper describes. For a
lower-is-better metric both agree. Where a draw concerns no sample (no prediction changed under
a "disruptive" draw), metaquantus counts the p-value as 0; here that draw is left out, and a
figure with no draw left is n/a.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MINOR, DISRUPTIVE = "minor", "disruptive"
MINOR_MAX_CHANGE = 0.05  # a minor perturbation changes fewer than 5 % of predictions
DISRUPTIVE_MIN_CHANGE = 0.5  # a disruptive one more than 50 %
DRAWS = 5  # K
FIGURES = ("iac_nr", "iac_ar", "iec_nr", "iec_ar", "mc")


def wilcoxon_p(q_star: np.ndarray, q_hat: np.ndarray) -> float:
    """The two-sided Wilcoxon signed-rank p-value of paired scores (``zero_method="zsplit"``, as
    metaquantus calls it); 1.0 when every pair is equal (nothing to tell apart)."""
    from scipy.stats import wilcoxon

    q_star, q_hat = np.asarray(q_star, dtype=np.float64), np.asarray(q_hat, dtype=np.float64)
    if q_star.size == 0:
        return math.nan
    if np.array_equal(q_star, q_hat):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(wilcoxon(q_star, q_hat, alternative="two-sided", zero_method="zsplit")[1])


def iac(q_star: np.ndarray, q_hats: np.ndarray, indices: np.ndarray, *, adversary: bool) -> float:
    """IAC over explainers and draws: ``q_star`` ``(L, N)``, ``q_hats`` ``(K, L, N)``, ``indices``
    ``(K, N)`` booleans (the samples each draw concerns). Higher is better, in [0, 1]."""
    values = []
    for q_hat, keep in zip(q_hats, indices, strict=True):
        if not keep.any():
            continue
        for row_star, row_hat in zip(q_star, q_hat, strict=True):
            p = wilcoxon_p(row_star[keep], row_hat[keep])
            values.append(1.0 - p if adversary else p)
    return float(np.mean(values)) if values else math.nan


def iec_resilience(q_star: np.ndarray, q_hats: np.ndarray, indices: np.ndarray) -> float:
    """IEC under minor perturbations: per draw, the fraction of (sample, rank position) pairs of
    the concerned samples where the explainers' order by score (``argsort`` over explainers) is
    unchanged; averaged over draws. Higher is better, in [0, 1]."""
    order_star = np.argsort(q_star, axis=0)
    values = []
    for q_hat, keep in zip(q_hats, indices, strict=True):
        if keep.any():
            values.append(float((np.argsort(q_hat, axis=0)[:, keep] == order_star[:, keep]).mean()))
    return float(np.mean(values)) if values else math.nan


def iec_adversary(q_star: np.ndarray, q_hats: np.ndarray, indices: np.ndarray, direction: str) -> float:
    """IEC under disruptive perturbations: per draw, the fraction of (explainer, concerned sample)
    pairs whose perturbed score is worse than the unperturbed one in ``direction`` (``higher``:
    lower after; ``lower``: higher after); averaged over draws. Higher is better, in [0, 1]."""
    values = []
    for q_hat, keep in zip(q_hats, indices, strict=True):
        if not keep.any():
            continue
        worse = q_hat[:, keep] < q_star[:, keep] if direction == "higher" else q_hat[:, keep] > q_star[:, keep]
        values.append(float(worse.mean()))
    return float(np.mean(values)) if values else math.nan


@dataclass
class Consistency:
    """IAC, IEC and MC of one metric on one track under one kind of perturbation (``model`` or
    ``input``); every figure higher is better, in [0, 1], NaN when not computable."""

    kind: str
    iac_nr: float
    iac_ar: float
    iec_nr: float
    iec_ar: float
    sigma_minor: float
    sigma_disruptive: float
    changed_minor: float  # mean fraction of predictions changed by the minor draws
    changed_disruptive: float

    @property
    def mc(self) -> float:
        parts = [self.iac_nr, self.iac_ar, self.iec_nr, self.iec_ar]
        return math.nan if any(math.isnan(p) for p in parts) else float(np.mean(parts))


@dataclass
class MetaConsistency:
    """The noise-resilience and adversarial-reactivity figures of one (track, metric): one
    :class:`Consistency` per kind of perturbation, and ``mc``, their mean (higher is better,
    in [0, 1]). ``reason`` says why a kind is missing."""

    kinds: dict[str, Consistency] = field(default_factory=dict)
    reason: str | None = None
    explainers: list[str] = field(default_factory=list)
    sample_ids: list[str] = field(default_factory=list)  # the samples every explainer and draw has a value for

    @property
    def samples(self) -> int:
        return len(self.sample_ids)

    @property
    def mc(self) -> float:
        values = [c.mc for c in self.kinds.values() if not math.isnan(c.mc)]
        return float(np.mean(values)) if values else math.nan

    def as_json(self) -> dict[str, Any]:
        def number(x: float) -> float | None:
            return None if math.isnan(x) else round(float(x), 6)

        return {
            "mc": number(self.mc),
            "explainers": self.explainers,
            "samples": self.samples,
            **({"reason": self.reason} if self.reason else {}),
            "kinds": {
                kind: {
                    **{f: number(getattr(c, f) if f != "mc" else c.mc) for f in FIGURES},
                    "sigma_minor": number(c.sigma_minor),
                    "sigma_disruptive": number(c.sigma_disruptive),
                    "changed_minor": number(c.changed_minor),
                    "changed_disruptive": number(c.changed_disruptive),
                }
                for kind, c in self.kinds.items()
            },
        }


def concerned(indices: np.ndarray, q_hats: np.ndarray) -> np.ndarray:
    """``indices`` ``(K, N)`` less, per draw, the samples where some explainer has no perturbed
    score (n/a, NaN: e.g. a CAM that returns a constant map on a disrupted model)."""
    return indices & np.isfinite(q_hats).all(axis=1)


def consistency(
    kind: str,
    direction: str,
    q_star: np.ndarray,
    minor: tuple[float, np.ndarray, np.ndarray],
    disruptive: tuple[float, np.ndarray, np.ndarray],
) -> Consistency:
    """The figures of one kind of perturbation. ``q_star``: unperturbed scores ``(L, N)`` in the
    metric's own units; ``minor`` and ``disruptive``: ``(sigma, q_hats (K, L, N), changed (K, N))``,
    ``changed`` true where the draw changed the sample's prediction; a NaN in ``q_hats`` (n/a)
    leaves that sample out of that draw (:func:`concerned`)."""
    s_minor, q_minor, changed_minor = minor
    s_disr, q_disr, changed_disr = disruptive
    unchanged = concerned(~changed_minor, q_minor)
    changed = concerned(changed_disr, q_disr)
    return Consistency(
        kind=kind,
        iac_nr=iac(q_star, q_minor, unchanged, adversary=False),
        iac_ar=iac(q_star, q_disr, changed, adversary=True),
        iec_nr=iec_resilience(q_star, q_minor, unchanged),
        iec_ar=iec_adversary(q_star, q_disr, changed, direction),
        sigma_minor=s_minor,
        sigma_disruptive=s_disr,
        changed_minor=float(changed_minor.mean()),
        changed_disruptive=float(changed_disr.mean()),
    )


def pick_level(candidates: Sequence[float], changed: Sequence[float], level: str) -> float | None:
    """The strength to use: for ``minor``, the largest candidate whose mean fraction of changed
    predictions is below 5 %; for ``disruptive``, the smallest above 50 %. ``None`` when none is."""
    pairs = sorted(zip(candidates, changed, strict=True))
    if level == MINOR:
        ok = [s for s, c in pairs if c < MINOR_MAX_CHANGE]
        return max(ok) if ok else None
    ok = [s for s, c in pairs if c > DISRUPTIVE_MIN_CHANGE]
    return min(ok) if ok else None
