"""Held-out evaluation of a PASTA scoring network (DESIGN 5): splits and agreement statistics.

Splits keep images **and** techniques (XAI methods) disjoint between train and test:

- ``kfold``: techniques and images are each dealt (seeded) into ``k`` groups; for every pair
  (technique group f, image group g) a network is trained on the items whose technique is not in
  f and whose image is not in g, and tested on the items in f x g. Every item is predicted
  exactly once, by a network that saw neither its technique nor its image (``k^2`` trainings).
- ``loto`` (leave one technique out): the same with one technique per group, i.e. for every
  technique t and image group g, train on (not t) x (not g), test on t x g.

Statistics per question, on the pooled held-out predictions (1..5 scale): MSE, quadratic
weighted kappa (predictions and labels rounded to the nearest star, halves up) and Spearman's
rho. With technique-level labels (the ratings table) the technique-level Spearman compares each
technique's mean prediction with its label; it is the number a proxy checkpoint reports.

Model selection (``TrainSettings.head == "auto"``, the default; :func:`fit_model`): the items a
network may learn from are dealt into a 2 x 2 grid of technique groups x image groups; each of the
four cells is predicted by models trained on the opposite cell (neither its techniques nor its
images), so the **validation** predictions are disjoint in images and techniques from what
predicted them, and, inside a held-out split, from the test items too (they are not in the pool).
Every candidate of :data:`CANDIDATES` (ridge at several penalties, PCA + MLP and MLP at two weight
decays, the MLPs checked every 10 epochs for early stopping) is scored by the mean over questions
of the validation Spearman; the best (ties: the earlier, simpler one) is refitted on all the pool's
items and its configuration is what a model card records as ``chosen``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from xaibench.pasta.network import QUESTIONS, ScoringNetwork, TrainSettings, train_network_tracked

__all__ = [
    "CANDIDATES",
    "Selection",
    "configuration",
    "cross_validate",
    "fit_model",
    "make_splits",
    "quadratic_weighted_kappa",
    "select_settings",
    "spearman",
    "summarise",
    "to_stars_int",
    "validation_splits",
]


def to_stars_int(values: np.ndarray) -> np.ndarray:
    """Round ratings to whole stars 1..5 (halves round up)."""
    return np.clip(np.floor(np.asarray(values, dtype=np.float64) + 0.5), 1, 5).astype(int)


def quadratic_weighted_kappa(a: np.ndarray, b: np.ndarray, low: int = 1, high: int = 5) -> float:
    """Cohen's kappa with quadratic weights between two integer ratings vectors (1 = perfect, 0 = chance).

    scikit-learn's ``cohen_kappa_score(weights="quadratic")`` on the fixed rating scale
    ``low..high`` (the weights are distances on that scale, not between the ratings that occur).
    NaN when undefined (fewer than 2 items, or both raters constant on the same value).
    """
    import warnings

    from sklearn.metrics import cohen_kappa_score  # lazy: scikit-learn is only needed to evaluate checkpoints

    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    if len(a) != len(b) or len(a) < 2:
        return float("nan")
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # the undefined case warns, then returns NaN, which is what we return
        return float(cohen_kappa_score(a, b, labels=np.arange(low, high + 1), weights="quadratic"))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho (average ranks for ties); NaN when either side is constant or n < 3."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


def _groups(values: Sequence[str], k: int, rng: np.random.Generator) -> list[list[str]]:
    unique = sorted(set(values))
    order = [unique[i] for i in rng.permutation(len(unique))]
    k = max(1, min(k, len(unique)))
    return [order[i::k] for i in range(k)]


@dataclass(frozen=True)
class Split:
    train: np.ndarray
    test: np.ndarray
    held_techniques: tuple[str, ...]
    held_images: tuple[str, ...]


def make_splits(
    images: Sequence[str],
    techniques: Sequence[str],
    protocol: str = "loto",
    k: int = 5,
    image_folds: int = 3,
    seed: int = 0,
) -> list[Split]:
    """Disjoint-image, disjoint-technique splits (see the module docstring); empty test sets are dropped."""
    rng = np.random.default_rng(seed)
    images, techniques = np.asarray(images, dtype=object), np.asarray(techniques, dtype=object)
    if protocol == "loto":
        tech_groups = [[t] for t in sorted(set(techniques))]
        img_groups = _groups(list(images), image_folds, rng)
    elif protocol == "kfold":
        tech_groups = _groups(list(techniques), k, rng)
        img_groups = _groups(list(images), k, rng)
    else:
        raise ValueError(f"unknown protocol {protocol!r}; use loto or kfold")
    if len(tech_groups) < 2:
        raise ValueError(f"{protocol}: need at least 2 techniques, got {len(tech_groups)}")
    single_image = len(img_groups) < 2
    splits = []
    for tg in tech_groups:
        in_t = np.isin(techniques, tg)
        for ig in img_groups:
            in_i = np.isin(images, ig) if not single_image else np.ones(len(images), bool)
            test = np.flatnonzero(in_t & in_i)
            train = np.flatnonzero(~in_t & (~in_i if not single_image else True))
            if len(test) and len(train) >= 2:
                splits.append(Split(train, test, tuple(tg), tuple(ig)))
    return splits


CANDIDATES: tuple[dict[str, Any], ...] = (
    {"head": "ridge", "alpha": 10.0},
    {"head": "ridge", "alpha": 100.0},
    {"head": "ridge", "alpha": 1000.0},
    {"head": "ridge", "alpha": 10000.0},
    {"head": "mlp", "pca": 16, "hidden": 32, "weight_decay": 1e-3},
    {"head": "mlp", "pca": 16, "hidden": 32, "weight_decay": 1e-1},
    {"head": "mlp", "pca": 0, "hidden": 64, "weight_decay": 1e-2},
)
"""Configurations model selection chooses among (fields of :class:`TrainSettings`; the rest come from the
settings given). MLPs train at most ``settings.epochs`` epochs and keep the best multiple of 10 (early stopping)."""

SELECTION_EPOCHS = 100
"""Most epochs an MLP candidate trains during selection (its early-stopping epoch is at most this)."""


def validation_splits(images: Sequence[str], techniques: Sequence[str], seed: int = 0) -> list[Split]:
    """The 2 x 2 validation grid of :func:`fit_model`: cell (f, g) is predicted from the items of the other
    technique group and the other image group. Empty when there are fewer than 2 techniques or 2 images."""
    if len(set(techniques)) < 2 or len(set(images)) < 2:
        return []
    return make_splits(images, techniques, "kfold", k=2, seed=seed + 7919)


def configuration(settings: TrainSettings) -> dict[str, Any]:
    """The fields of ``settings`` that describe its head, as a model card records them."""
    chosen: dict[str, Any] = {"head": settings.head, "pca": settings.pca}
    if settings.head == "ridge":
        chosen["alpha"] = settings.alpha
    else:
        chosen |= {"hidden": settings.hidden, "weight_decay": settings.weight_decay, "epochs": settings.epochs}
    return chosen


@dataclass(frozen=True)
class Selection:
    """The configuration model selection chose and the validation score of every candidate."""

    chosen: TrainSettings
    table: list[dict[str, Any]]  # one row per candidate: its fields, epochs, validation Spearman (mean over Qs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": configuration(self.chosen),
            "criterion": "mean over questions of the validation Spearman (2 x 2 technique x image grid)",
            "candidates": self.table,
        }


def _mean_spearman(preds: np.ndarray, labels: np.ndarray) -> float:
    values = [spearman(preds[:, q], labels[:, q]) for q in range(labels.shape[1])]
    values = [v for v in values if v == v]
    return float(np.mean(values)) if values else float("nan")


def select_settings(
    embeddings: np.ndarray,
    labels: np.ndarray,
    images: Sequence[str],
    techniques: Sequence[str],
    settings: TrainSettings,
    candidates: Sequence[dict[str, Any]] = CANDIDATES,
) -> Selection:
    """Choose among ``candidates`` on the validation grid of ``images`` x ``techniques`` (module docstring).

    Without a usable grid (fewer than 2 techniques or images) the first candidate is chosen unscored.
    """
    splits = validation_splits(images, techniques, settings.seed)
    table: list[dict[str, Any]] = []
    best: tuple[float, TrainSettings] | None = None
    max_epochs = min(settings.epochs, SELECTION_EPOCHS)
    for cand in candidates:
        cfg = replace(settings, **cand) if cand.get("head") == "ridge" else replace(settings, **cand, epochs=max_epochs)
        by_epoch: dict[int, np.ndarray] = {}
        for split in splits:
            _, _, tracked = train_network_tracked(
                embeddings[split.train], labels[split.train], cfg, eval_x=embeddings[split.test]
            )
            for epoch, pred in tracked.items():
                by_epoch.setdefault(epoch, np.full(labels.shape, np.nan))[split.test] = pred
        scored = {e: _mean_spearman(p, labels) for e, p in by_epoch.items()}
        scored = {e: v for e, v in scored.items() if v == v}
        if scored:
            epoch = max(scored, key=lambda e: (scored[e], -e))
            score = scored[epoch]
        else:
            epoch, score = (0 if cfg.head == "ridge" else max_epochs), float("nan")
        chosen = cfg if cfg.head == "ridge" else replace(cfg, epochs=max(epoch, 1))
        row = {**cand, **({} if cfg.head == "ridge" else {"epochs": chosen.epochs})}
        table.append({**row, "validation": round(score, 4) if score == score else None})
        if score == score and (best is None or score > best[0]):
            best = (score, chosen)
    if best is None:
        return Selection(replace(settings, **candidates[0]), table)
    return Selection(best[1], table)


def fit_model(
    embeddings: np.ndarray,
    labels: np.ndarray,
    images: Sequence[str],
    techniques: Sequence[str],
    settings: TrainSettings,
) -> tuple[ScoringNetwork, list[float], Selection | None]:
    """Fit the network ``settings`` describe; with ``head="auto"`` first choose the configuration on a validation
    split disjoint in images and techniques (:func:`select_settings`). Returns the network, its loss history and
    the selection (``None`` for a fixed head)."""
    selection = None
    if settings.head == "auto":
        selection = select_settings(embeddings, labels, images, techniques, settings)
        settings = selection.chosen
    net, history, _ = train_network_tracked(embeddings, labels, settings)
    return net, history, selection


def cross_validate(
    embeddings: np.ndarray,
    labels: np.ndarray,
    images: Sequence[str],
    techniques: Sequence[str],
    settings: TrainSettings,
    *,
    protocol: str = "loto",
    k: int = 5,
    image_folds: int = 3,
    log: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, list[Split]]:
    """Held-out predictions ``(N, Q)`` (NaN for items no split tested) and the splits used."""
    splits = make_splits(images, techniques, protocol, k, image_folds, settings.seed)
    preds = np.full(labels.shape, np.nan)
    images_arr, techniques_arr = np.asarray(images, dtype=object), np.asarray(techniques, dtype=object)
    for n, split in enumerate(splits):
        net, _, _ = fit_model(
            embeddings[split.train],
            labels[split.train],
            list(images_arr[split.train]),
            list(techniques_arr[split.train]),
            settings,
        )
        preds[split.test] = net.scores(embeddings[split.test])
        if log is not None:
            log(
                f"split {n + 1}/{len(splits)}: held out {', '.join(split.held_techniques)} "
                f"x {len(split.held_images)} images"
            )
    return preds, splits


def summarise(
    preds: np.ndarray,
    labels: np.ndarray,
    techniques: Sequence[str],
    questions: Sequence[str] = QUESTIONS,
    technique_level: bool = False,
) -> dict[str, Any]:
    """Per-question MSE, QWK and Spearman on items (and per technique when labels are technique-level)."""
    techniques = np.asarray(techniques, dtype=object)
    out: dict[str, Any] = {}
    for q, name in enumerate(questions):
        ok = np.isfinite(preds[:, q]) & np.isfinite(labels[:, q])
        p, y = preds[ok, q], labels[ok, q]
        row: dict[str, Any] = {
            "n": int(ok.sum()),
            "mse": float(np.mean((p - y) ** 2)) if ok.any() else float("nan"),
            "qwk": quadratic_weighted_kappa(to_stars_int(y), to_stars_int(p)),
            "spearman": spearman(p, y),
        }
        if technique_level:
            techs = sorted(set(techniques[ok]))
            mean_pred = np.array([p[techniques[ok] == t].mean() for t in techs])
            label = np.array([y[techniques[ok] == t].mean() for t in techs])
            row["technique_spearman"] = spearman(mean_pred, label)
            row["technique_mse"] = float(np.mean((mean_pred - label) ** 2)) if techs else float("nan")
            row["per_technique"] = {
                t: {"label": round(float(lv), 4), "predicted": round(float(pv), 4)}
                for t, lv, pv in zip(techs, label, mean_pred, strict=True)
            }
        out[name] = row
    return out
