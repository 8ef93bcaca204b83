"""How faithfulness metrics build and forward perturbed images: batch-by-batch building (memory
bounded by the batch size), the same probabilities whatever the pipeline, the forward passes'
memory format and mode, and ROAD's two imputation solvers agreeing."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from xaibench.api import BatchMemo, ForwardCounter, MetricInput, Model, Sample
from xaibench.metrics.faithfulness.context import BatchedScorer, faithfulness_batch, pipelined
from xaibench.metrics.faithfulness.perturbation import imputation_backend
from xaibench.metrics.faithfulness.road import RoadFaithfulness


class PixelSum(torch.nn.Module):
    """Logits ``[0, a * mean(x)]``: the probability of class 1 is a closed form of the image."""

    def __init__(self, a: float = 0.7) -> None:
        super().__init__()
        self.a = a

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.a * x.double().mean(dim=(1, 2, 3))
        return torch.stack([torch.zeros_like(z), z], dim=1)


def expected(images: torch.Tensor) -> np.ndarray:
    z = 0.7 * images.double().mean(dim=(1, 2, 3))
    return torch.sigmoid(z).numpy()


class Ctx:
    """The two fields of a FaithfulnessBatch that BatchedScorer reads."""

    def __init__(self, batch_size: int) -> None:
        self.forward = ForwardCounter(PixelSum(), batch_size=batch_size)
        self.device = torch.device("cpu")


@pytest.mark.parametrize("builders", [0, 1, 2])
def test_lazy_jobs_are_built_one_forward_batch_at_a_time(builders: int) -> None:
    rng = np.random.default_rng(0)
    stacks = {
        key: torch.from_numpy(rng.normal(size=(n, 3, 4, 4)).astype(np.float32))
        for key, n in [("a", 7), ("b", 1), ("c", 12), ("d", 0), ("e", 5)]
    }
    ctx = Ctx(batch_size=4)
    scorer = BatchedScorer(ctx, builders=builders)  # type: ignore[arg-type]
    slices: list[tuple[str, int, int]] = []
    alive, peak, lock = [0], [0], threading.Lock()
    original = ctx.forward.fn.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        with lock:
            alive[0] -= 1  # this batch is being forwarded: it no longer waits
        return original(x)

    ctx.forward.fn.forward = forward  # type: ignore[method-assign]

    def source(key: str):
        def build(start: int, stop: int) -> torch.Tensor:
            slices.append((key, start, stop))
            return stacks[key][start:stop]

        return build

    real_build = scorer._build

    def counting_build(pieces):
        with lock:
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
        return real_build(pieces)

    scorer._build = counting_build  # type: ignore[method-assign]
    for key, images in stacks.items():
        scorer.add_lazy(key, len(images), source(key), target=1)
    out = scorer.finish()
    for key, images in stacks.items():
        np.testing.assert_allclose(out[key], expected(images) if len(images) else np.zeros(0), atol=1e-6)
    assert all(stop - start <= 4 for _, start, stop in slices)  # never more than one batch of a job
    assert sum(stop - start for _, start, stop in slices) == 25  # every image built once
    assert ctx.forward.calls == 7 and ctx.forward.images == 25  # full batches of 4, the last of 1
    assert peak[0] <= builders + 1  # built batches waiting for the forward: bounded, not all 7


def test_pipelined_keeps_order_and_raises_the_workers_error() -> None:
    assert list(pipelined(lambda j: j * j, list(range(9)), workers=2)) == [j * j for j in range(9)]

    def fail(j: int) -> int:
        if j == 3:
            raise RuntimeError("job 3 failed")
        return j

    with pytest.raises(RuntimeError, match="job 3 failed"):
        list(pipelined(fail, list(range(6)), workers=2))


def test_forward_counter_runs_in_inference_mode_and_channels_last_changes_no_value() -> None:
    seen: list[tuple[bool, bool]] = []

    class Probe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append((torch.is_inference_mode_enabled(), x.is_contiguous(memory_format=torch.channels_last)))
            return self.conv(x).mean(dim=(2, 3))

    torch.manual_seed(0)
    module = Probe().eval()
    x = torch.randn(5, 3, 16, 16)
    fast = ForwardCounter(module, batch_size=2)(x)
    plain = ForwardCounter(module, batch_size=2, channels_last=False)(x)
    assert seen[:3] == [(True, True)] * 3 and seen[3:] == [(True, False), (True, False), (True, False)]
    np.testing.assert_allclose(fast.numpy(), plain.numpy(), atol=1e-6)


def test_imputation_backend_is_exact_on_the_cpu_and_torch_elsewhere() -> None:
    assert imputation_backend("cpu") == "exact"
    assert imputation_backend(torch.device("cuda", 0)) == "torch"
    assert imputation_backend("cpu", "torch") == "torch"
    with pytest.raises(ValueError, match="unknown imputation solver 'lapack'"):
        imputation_backend("cpu", "lapack")  # type: ignore[arg-type]


class Model32(Model):
    name = "pixel-sum"
    input_size = 32
    mean = (0.5, 0.5, 0.5)
    std = (0.25, 0.25, 0.25)

    def __init__(self) -> None:
        self.module = PixelSum(a=3.0).eval()


def test_road_curves_agree_between_the_exact_and_the_torch_solver() -> None:
    rng = np.random.default_rng(3)
    images = torch.from_numpy(rng.normal(size=(3, 3, 32, 32)).astype(np.float32))
    saliency = rng.random((3, 32, 32))

    def score(solver: str):
        batch = MetricInput(
            saliency=saliency,
            concepts=None,
            samples=[Sample(id=f"s{i}", image=np.zeros((1, 1, 3), np.float32)) for i in range(3)],
            targets=np.ones(3, dtype=np.int64),
            inputs=images,
            model=Model32(),
            forward=ForwardCounter(Model32().module, batch_size=8),
            seed=0,
            memo=BatchMemo(),
        )
        metric = RoadFaithfulness()
        metric.imputation = solver  # type: ignore[assignment]
        assert not isinstance(faithfulness_batch(batch), str)
        return metric.score(batch)

    exact, iterative = score("exact"), score("torch")
    for a, b in zip(exact.curves, iterative.curves, strict=True):
        for side in ("sufficiency", "necessity"):
            np.testing.assert_allclose(a[side]["probability"], b[side]["probability"], atol=1e-5)
    np.testing.assert_allclose(exact.values, iterative.values, atol=1e-5)
    assert exact.forward_passes == iterative.forward_passes == 3 + 3 * 2 * 50
