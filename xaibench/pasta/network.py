"""The PASTA scoring network, its loss and its training loop (DESIGN 5).

One small MLP per question (Q1..Q6) on a standardised embedding (optionally projected on the
training set's leading whitened principal components, ``pca``):
``Linear(D, hidden) -> ReLU -> Dropout -> Linear(hidden, 1) -> sigmoid``. The sigmoid output
``u`` in (0, 1) is on the label scale ``(r - 1) / 4``; the score is ``1 + 4 u``, so it is
always within [1, 5] (the reference script's unbounded ReLU could exceed 5, ANCHORS).

Loss, per question over a batch, averaged over questions with labels:
``a x (1 - cos(u - mean u, y - mean y)) + b x mean((u - y)^2) + c x mean_{y_i > y_j} max(0, margin - (u_i - u_j))``.
The cosine is taken between the batch's *centred* prediction and label vectors (so it is
``1 - Pearson r``): the uncentred cosine of two vectors of positive numbers is close to 1 whatever
their order, and would not train. A question whose labels are constant in the batch contributes
no cosine and no ranking term. Paper defaults: a = 1, b = 0.01, c = 0.1; Adam, batch 128,
500 epochs, lr 1e-3. ``margin`` (default 0.05 on the unit scale, i.e. 0.2 stars) is ours.

A second head, ``linear``, is ridge regression on the same standardised (optionally PCA-projected)
inputs, fitted in closed form on the unit-scale labels (:func:`fit_ridge`) and clamped to [0, 1],
so its score is also within [1, 5]. ``TrainSettings.head`` picks ``mlp``, ``ridge`` or ``auto``
(model selection on a validation split, :func:`xaibench.pasta.training.evaluation.fit_model`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "HEADS",
    "QUESTIONS",
    "ScoringNetwork",
    "TrainSettings",
    "fit_ridge",
    "pasta_loss",
    "to_stars",
    "to_unit",
    "train_network",
    "train_network_tracked",
]

QUESTIONS: tuple[str, ...] = ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6")
HEADS: tuple[str, ...] = ("auto", "mlp", "ridge")
"""``TrainSettings.head``: model selection among the candidates, a fixed MLP, or fixed ridge regression."""


def to_unit(stars: np.ndarray) -> np.ndarray:
    """Ratings in [1, 5] to the unit scale ``(r - 1) / 4``."""
    return (np.asarray(stars, dtype=np.float64) - 1.0) / 4.0


def to_stars(unit: np.ndarray) -> np.ndarray:
    """Unit-scale values to ratings ``1 + 4 u``."""
    return 1.0 + 4.0 * np.asarray(unit, dtype=np.float64)


@dataclass(frozen=True)
class TrainSettings:
    """Training hyper-parameters (paper defaults where the paper gives them)."""

    epochs: int = 500
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.0
    a: float = 1.0
    b: float = 0.01
    c: float = 0.1
    margin: float = 0.05
    hidden: int = 64
    dropout: float = 0.1
    pca: int = 0
    """Project standardised embeddings on this many whitened principal components of the training set (0: off)."""
    seed: int = 0
    threads: int = 1
    head: str = "auto"
    """``auto`` (default): choose head, PCA, weight decay and epochs (early stopping) on a validation split
    disjoint in images and techniques; ``mlp``: the MLP with the fields above; ``ridge``: ridge with ``alpha``."""
    alpha: float = 100.0
    """Ridge penalty on the standardised inputs (``head="ridge"``)."""

    def __post_init__(self) -> None:
        if self.head not in HEADS:
            raise ValueError(f"TrainSettings: head must be one of {list(HEADS)}, got {self.head!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSettings:
        """Settings from a checkpoint's metadata; settings recorded before ``head`` existed were an MLP's."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("head", "mlp")
        return cls(**values)


class ScoringNetwork(nn.Module):
    """Per-question MLP heads on a standardised embedding; ``forward`` gives unit-scale ``(N, Q)``.

    The Q heads are independent MLPs (own weights ``w1[q]``, ``b1[q]``, ``w2[q]``, ``b2[q]``),
    evaluated together with batched matrix products.
    """

    def __init__(
        self,
        dim: int,
        hidden: int = 64,
        n_questions: int = len(QUESTIONS),
        dropout: float = 0.1,
        pca: int = 0,
        head: str = "mlp",
    ) -> None:
        super().__init__()
        if head not in ("mlp", "linear"):
            raise ValueError(f"ScoringNetwork: head must be 'mlp' or 'linear', got {head!r}")
        self.dim, self.hidden, self.n_questions = int(dim), int(hidden), int(n_questions)
        self.dropout_p, self.pca, self.head = float(dropout), int(pca), head
        self.register_buffer("shift", torch.zeros(self.dim))
        self.register_buffer("scale", torch.ones(self.dim))
        q, h = self.n_questions, self.hidden
        d = self.pca if self.pca > 0 else self.dim
        if self.pca > 0:
            self.register_buffer("proj", torch.zeros(self.dim, self.pca))
        if head == "linear":  # ridge: u = clamp(x w + b, 0, 1), weights set by fit_ridge
            self.w = nn.Parameter(torch.zeros(q, d))
            self.b = nn.Parameter(torch.full((q,), 0.5))
            return
        # nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
        self.w1 = nn.Parameter((torch.rand(q, d, h) * 2 - 1) / d**0.5)
        self.b1 = nn.Parameter((torch.rand(q, h) * 2 - 1) / d**0.5)
        self.w2 = nn.Parameter((torch.rand(q, h) * 2 - 1) / h**0.5)
        self.b2 = nn.Parameter((torch.rand(q) * 2 - 1) / h**0.5)
        self.dropout = nn.Dropout(self.dropout_p)

    def set_standardisation(self, embeddings: torch.Tensor) -> None:
        """Centre and scale inputs by the training embeddings' per-dimension mean and std; with ``pca``,
        also fit the whitened projection on the ``pca`` leading principal components."""
        self.shift.copy_(embeddings.mean(0))
        self.scale.copy_(embeddings.std(0, unbiased=False).clamp_min(1e-6))
        if self.pca > 0:
            x = ((embeddings - self.shift) / self.scale).double()
            _, sv, vt = torch.linalg.svd(x, full_matrices=False)
            k = min(self.pca, vt.shape[0])
            std = (sv[:k] / max(len(x) - 1, 1) ** 0.5).clamp_min(1e-6)
            proj = torch.zeros(self.dim, self.pca, dtype=torch.float64)
            proj[:, :k] = vt[:k].T / std
            # Fix each component's sign (largest |loading| positive) so the projection is deterministic.
            signs = torch.sign(proj[proj.abs().argmax(0), torch.arange(self.pca)])
            self.proj.copy_((proj * torch.where(signs == 0, 1.0, signs)).to(self.proj.dtype))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = (z - self.shift) / self.scale
        if self.pca > 0:
            x = x @ self.proj
        if self.head == "linear":
            return torch.clamp(x @ self.w.T + self.b, 0.0, 1.0)
        hidden = torch.relu(torch.einsum("nd,qdh->nqh", x, self.w1) + self.b1)
        logits = torch.einsum("nqh,qh->nq", self.dropout(hidden), self.w2) + self.b2
        return torch.sigmoid(logits)

    def scores(self, z: np.ndarray | torch.Tensor) -> np.ndarray:
        """Predicted ratings in [1, 5], ``(N, Q)`` float64 (eval mode, no gradients)."""
        was_training = self.training
        self.eval()
        with torch.no_grad():
            u = self(torch.as_tensor(np.asarray(z), dtype=self.shift.dtype)).double().numpy()
        self.train(was_training)
        return to_stars(u)


def pasta_loss(
    pred: torch.Tensor, target: torch.Tensor, *, a: float = 1.0, b: float = 0.01, c: float = 0.1, margin: float = 0.05
) -> tuple[torch.Tensor, dict[str, float]]:
    """The DESIGN 5 loss on unit-scale ``(N, Q)`` tensors; NaN targets are missing labels.

    Returns the total (mean over questions that have labels) and its parts (cosine, mse, rank),
    each averaged over the questions where it is defined.
    """
    valid = ~torch.isnan(target)
    m = valid.to(pred.dtype)
    y = torch.where(valid, target, torch.zeros_like(target))
    count = m.sum(0)
    has = count > 0
    if not bool(has.any()):
        raise ValueError("pasta_loss: the batch has no labels")
    safe = count.clamp_min(1.0)
    mse = (m * (pred - y) ** 2).sum(0) / safe
    uc = (pred - (m * pred).sum(0) / safe) * m
    yc = (y - (m * y).sum(0) / safe) * m
    spread = yc.abs().amax(0) > 1e-9
    cos = (uc * yc).sum(0) / (uc.norm(dim=0) * yc.norm(dim=0) + 1e-8)
    better = ((y[:, None, :] - y[None, :, :]) > 1e-9) & valid[:, None, :] & valid[None, :, :]
    hinge = torch.relu(margin - (pred[:, None, :] - pred[None, :, :])) * better
    rank = hinge.sum((0, 1)) / better.sum((0, 1)).clamp_min(1)
    ordered = spread & (count > 1)
    per_q = b * mse + torch.where(ordered, a * (1.0 - cos) + c * rank, torch.zeros_like(mse))
    total = per_q[has].mean()
    with torch.no_grad():
        info = {
            "mse": float(mse[has].mean()),
            "cos": float((1.0 - cos)[ordered].mean()) if bool(ordered.any()) else 0.0,
            "rank": float(rank[ordered].mean()) if bool(ordered.any()) else 0.0,
        }
    return total, info


def train_network(
    embeddings: np.ndarray,
    labels: np.ndarray,
    settings: TrainSettings,
    log: Callable[[str], None] | None = None,
) -> tuple[ScoringNetwork, list[float]]:
    """Fit a :class:`ScoringNetwork` on ``(N, D)`` embeddings and ``(N, Q)`` ratings in [1, 5] (NaN = missing).

    ``settings.head``: ``ridge`` fits :func:`fit_ridge`; ``mlp`` and ``auto`` train the MLP the other fields
    describe (choosing a configuration needs the items' images and techniques for its validation split:
    :func:`xaibench.pasta.training.evaluation.fit_model` does that). Deterministic for fixed inputs
    and settings (seeded init and batch order, fixed thread count). Returns the network in eval mode and the
    mean loss per epoch (ridge: one value, its training MSE on the unit scale).
    """
    net, history, _ = train_network_tracked(embeddings, labels, settings, log=log)
    return net, history


def _check_xy(embeddings: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
    y = torch.as_tensor(to_unit(labels), dtype=torch.float32)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise ValueError(f"train_network: embeddings {tuple(x.shape)} and labels {tuple(y.shape)} do not match")
    if len(x) < 2:
        raise ValueError("train_network: need at least 2 labelled items")
    return x, y


def fit_ridge(embeddings: np.ndarray, labels: np.ndarray, alpha: float, pca: int = 0) -> ScoringNetwork:
    """Ridge regression per question on standardised (optionally PCA-whitened) embeddings, closed form.

    Fits unit-scale labels ``(r - 1) / 4`` with penalty ``alpha`` (on the squared weights; the intercept
    is free); items whose label is NaN are left out of that question's fit. Returns a ``linear``
    :class:`ScoringNetwork` in eval mode.
    """
    x, y = _check_xy(embeddings, labels)
    net = ScoringNetwork(x.shape[1], 0, y.shape[1], 0.0, pca, head="linear")
    net.set_standardisation(x)
    with torch.no_grad():
        z = (x.double() - net.shift.double()) / net.scale.double()
        if net.pca > 0:
            z = z @ net.proj.double()
        yd = y.double()
        for q in range(y.shape[1]):
            ok = ~torch.isnan(yd[:, q])
            if int(ok.sum()) == 0:
                continue
            zq, yq = z[ok], yd[ok, q]
            zm, ym = zq.mean(0), yq.mean()
            zc, yc = zq - zm, yq - ym
            n, d = zc.shape
            if d <= n:
                w = torch.linalg.solve(zc.T @ zc + alpha * torch.eye(d, dtype=zc.dtype), zc.T @ yc)
            else:  # dual form: cheaper when there are fewer items than features
                w = zc.T @ torch.linalg.solve(zc @ zc.T + alpha * torch.eye(n, dtype=zc.dtype), yc)
            net.w[q] = w.float()
            net.b[q] = float(ym - zm @ w)
    return net.eval()


def train_network_tracked(
    embeddings: np.ndarray,
    labels: np.ndarray,
    settings: TrainSettings,
    *,
    eval_x: np.ndarray | None = None,
    eval_every: int = 10,
    log: Callable[[str], None] | None = None,
) -> tuple[ScoringNetwork, list[float], dict[int, np.ndarray]]:
    """:func:`train_network` that also predicts ``eval_x`` (ratings in [1, 5]) after every ``eval_every``
    epochs: returns ``{epoch: (M, Q) predictions}`` as well (empty without ``eval_x``; ridge: ``{0: ...}``).
    Early stopping picks the best of these epochs on validation items."""
    if settings.head == "ridge":
        net = fit_ridge(embeddings, labels, settings.alpha, settings.pca)
        pred = net.scores(embeddings)
        mse = float(np.nanmean((to_unit(pred) - to_unit(labels)) ** 2))
        return net, [mse], ({0: net.scores(eval_x)} if eval_x is not None else {})
    x, y = _check_xy(embeddings, labels)
    # Trained in float64: float32 training rounds differently with each CPU's vector kernels, and
    # 500 epochs turned that into differences of 1e-4 in held-out predictions, enough to swap two
    # techniques in a technique-level Spearman (DESIGN 6). In float64 they stay far below the 1e-4
    # that a model card prints. The checkpoint stores float32 weights (save_checkpoint).
    x, y = x.double(), y.double()
    tracked: dict[int, np.ndarray] = {}
    old_threads = torch.get_num_threads()
    torch.set_num_threads(int(settings.threads))
    try:
        torch.manual_seed(settings.seed)
        net = ScoringNetwork(x.shape[1], settings.hidden, y.shape[1], settings.dropout, settings.pca).double()
        net.set_standardisation(x)
        opt = torch.optim.Adam(net.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
        gen = torch.Generator().manual_seed(settings.seed)
        history: list[float] = []
        t0 = time.perf_counter()
        net.train()
        for epoch in range(settings.epochs):
            order = torch.randperm(len(x), generator=gen)
            total, count = 0.0, 0
            for start in range(0, len(x), settings.batch_size):
                idx = order[start : start + settings.batch_size]
                if len(idx) < 2:
                    continue
                loss, _ = pasta_loss(
                    net(x[idx]), y[idx], a=settings.a, b=settings.b, c=settings.c, margin=settings.margin
                )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                count += len(idx)
            history.append(total / max(count, 1))
            if eval_x is not None and (epoch + 1) % max(1, eval_every) == 0:
                tracked[epoch + 1] = net.scores(eval_x)
            if log is not None and (epoch + 1) % max(1, settings.epochs // 5) == 0:
                log(f"epoch {epoch + 1}/{settings.epochs} loss {history[-1]:.4f} ({time.perf_counter() - t0:.1f} s)")
        net.eval()
    finally:
        torch.set_num_threads(old_threads)
    return net, history, tracked
