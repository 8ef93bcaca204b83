"""One adapter from xaibench's metric API to Quantus 0.6 metrics.

The model, the batch, the maps and the masks go in; per-sample scores come out, NaN with a
reason where n/a. Each sample is one Quantus call (batch of one) with its own seed,
``derive_seed(batch seed, metric id, sample id)``, put in torch's and numpy's global
generators (Quantus draws from them) and in Quantus' own ``seed`` arguments, then restored:
a score never depends on the rest of its batch, and the caller's random streams are untouched.

Known Quantus defects and how the adapter avoids them:

- **3-channel attributions**: several Quantus metrics index ``C x H x W`` positions where they
  perturb ``H x W`` pixels and crash (``ROAD``) or silently differ. xaibench maps are 2-D, so
  Quantus always gets channel-summed ``(1, 1, S, S)`` attributions, also from the explainer
  re-runs (:meth:`QuantusMetric.explain_func`).
- **Empty masks** (``RelevanceRankAccuracy`` divides by the mask's size): answered n/a
  "empty ground-truth mask" before Quantus is called.
- **Explainer re-runs**: Quantus wants ``explain_func(model, inputs, targets)``; the adapter
  wraps the batch's explainer (the run's explainer, wherever it runs) in one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench.kit import ExplainContext, Metric, MetricInput, MetricOutput, Sample, derive_seed, resize_bilinear, seeded

PLUGIN_VERSION = "0.1.0"


def quantus_version() -> str:
    """The installed Quantus version (``missing`` when it is not installed)."""
    try:
        return version("quantus")
    except PackageNotFoundError:
        return "missing"


VERSION = f"{PLUGIN_VERSION}+quantus.{quantus_version()}"
"""Every metric's version: the plugin's, plus the Quantus release that computes it."""


def sample_seed(seed: int, metric: str, sample_id: str) -> int:
    """The seed of one sample's Quantus call (31 bits: Quantus adds to it and numpy takes 32)."""
    return derive_seed(seed, metric, sample_id) % (2**31 - 1)


class Tally:
    """Images forwarded through a :class:`Counted` module; shared by Quantus' deep copies."""

    def __init__(self) -> None:
        self.images = 0

    def __deepcopy__(self, memo: dict) -> Tally:
        return self


class Counted(torch.nn.Module):
    """The model's module as Quantus sees it: counts forwarded images, computes nothing else.
    Always in eval mode (Quantus refuses training-mode models); the inner module is not touched."""

    def __init__(self, inner: torch.nn.Module, tally: Tally) -> None:
        super().__init__()
        self.inner = inner
        self.tally = tally
        self.training = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.tally.images += int(x.shape[0])
        return self.inner(x)


class SwappedModel:
    """The track's model with another module (Quantus' randomised copy) and its own identity."""

    def __init__(self, base: Any, module: torch.nn.Module, tag: str) -> None:
        self._base = base
        self.module = module
        self.identity = f"{base.identity}~{tag}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


@dataclass
class Call:
    """The arrays of one sample's Quantus call: ``x`` ``(1, C, H, W)``, ``y`` ``(1,)``, ``a``
    ``(1, 1, H, W)`` channel-summed attributions, ``s`` ``(1, 1, H, W)`` mask or ``None``."""

    x: np.ndarray
    y: np.ndarray
    a: np.ndarray
    s: np.ndarray | None = None


class QuantusMetric(Metric):
    """Base of every ``quantus_`` metric: set ``quantus_class`` (the Quantus class name) and
    override :meth:`quantus_kwargs` (constructor arguments), :meth:`prepare` (the arrays of one
    sample, or the reason it is n/a) or :meth:`batch_problem` (why a whole batch is n/a)."""

    quantus_class: ClassVar[str] = ""
    nan_reason: ClassVar[str] = "Quantus returned NaN"
    ranking = False
    default: ClassVar[bool] = False
    """Off by default: a suite's ``family:`` selectors and "every metric" leave it out; name it."""
    licence = "LGPL-3.0"
    version = VERSION

    def quantus_kwargs(self, call: Call, seed: int, batch: MetricInput) -> dict[str, Any]:
        """Constructor arguments of the Quantus metric beyond the adapter's fixed ones (by
        default the metric's parameters, which then bear Quantus' own names)."""
        return dict(self.params)

    def batch_problem(self, batch: MetricInput) -> str | None:
        """Why no sample of this batch can be scored, else ``None``."""
        if batch.saliency is None:
            return "needs a saliency map (concept explanations have no pixels to score)"
        if "model" in self.needs and batch.model is None:
            return "needs model access"
        if "explainer" in self.needs and batch.explainer is None:
            return "needs the explainer to re-run it"
        return None

    def prepare(self, batch: MetricInput, index: int, inputs: np.ndarray | None) -> Call | str:
        """Sample ``index`` at the model's input size: its input, target and map."""
        saliency = np.asarray(batch.saliency[index], dtype=np.float32)
        if inputs is None:
            return Call(x=np.zeros((1, 1, *saliency.shape), np.float32), y=batch.targets[index : index + 1], a=saliency)
        size = tuple(inputs.shape[-2:])
        if saliency.shape != size:
            saliency = resize_bilinear(saliency[None], size)[0]
        return Call(x=inputs[index : index + 1], y=np.asarray(batch.targets[index : index + 1]), a=saliency)

    def explain_func(self, batch: MetricInput, sample: Sample, tally: Tally) -> Callable[..., np.ndarray]:
        """Quantus' ``explain_func``: the batch's explainer on the model Quantus hands over (the
        track's model, or a copy Quantus changed), its 2-D maps returned as ``(B, 1, S, S)``."""
        module = batch.model.module if batch.model is not None else None

        def explain(model: Any, inputs: Any, targets: Any, **_: Any) -> np.ndarray:
            inner = model.inner if isinstance(model, Counted) else model
            target_model = batch.model if inner is module else self.changed_model(batch, inner)
            x = torch.as_tensor(np.asarray(inputs), dtype=torch.float32)
            if batch.inputs is not None:
                x = x.to(torch.as_tensor(batch.inputs).device)
            context = ExplainContext(samples=[sample] * int(x.shape[0]))
            out = batch.explainer.explain(
                target_model, x, torch.as_tensor(np.asarray(targets)).long(), seed=batch.seed, context=context
            )
            if isinstance(out, list):
                raise ValueError("the explainer returned concept explanations")
            tally.images += int(x.shape[0])
            maps = np.asarray(out.detach().cpu() if isinstance(out, torch.Tensor) else out, dtype=np.float32)
            return maps.reshape(maps.shape[0], 1, *maps.shape[-2:])

        return explain

    def changed_model(self, batch: MetricInput, module: torch.nn.Module) -> Any:
        """The model to explain when Quantus hands over a module that is not the track's."""
        raise RuntimeError("Quantus handed the explainer a model other than the track's")

    def score(self, batch: MetricInput) -> MetricOutput:
        n = len(batch.samples)
        problem = self.batch_problem(batch)
        if problem is not None:
            return MetricOutput.not_applicable(n, problem)
        try:
            quantus = importlib.import_module("quantus")
        except ImportError:
            return MetricOutput.not_applicable(n, "Quantus is not installed: pip install 'quantus>=0.6,<0.7'")
        inputs, device = None, None
        if "model" in self.needs:
            assert batch.model is not None
            given = (
                batch.inputs if batch.inputs is not None else batch.model.preprocess([s.image for s in batch.samples])
            )
            device = str(torch.as_tensor(given).device)
            inputs = torch.as_tensor(given).detach().to("cpu", torch.float32).numpy()
        tally = Tally()
        values = np.full(n, np.nan)
        reasons: list[str | None] = [None] * n
        for i, sample in enumerate(batch.samples):
            call = self.prepare(batch, i, inputs)
            if isinstance(call, str):
                reasons[i] = call
                continue
            seed = sample_seed(batch.seed, self.name, sample.id)
            try:
                value = self.call_quantus(quantus, batch, sample, call, seed, device, tally)
            except Exception as exc:  # noqa: BLE001 - Quantus or the explainer failed: n/a for this sample only
                line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                reasons[i] = f"Quantus {self.quantus_class} failed: {line}"
                continue
            if np.isfinite(value):
                values[i] = value
            else:
                reasons[i] = self.nan_reason
        return MetricOutput(values=values, reasons=reasons, forward_passes=tally.images)

    def call_quantus(
        self, quantus: Any, batch: MetricInput, sample: Sample, call: Call, seed: int, device: str | None, tally: Tally
    ) -> float:
        """One sample through Quantus under its seed; the value Quantus returns for it."""
        kwargs = {"disable_warnings": True, "display_progressbar": False, "return_aggregate": False}
        metric = getattr(quantus, self.quantus_class)(**kwargs, **self.quantus_kwargs(call, seed, batch))
        args: dict[str, Any] = {"x_batch": call.x, "y_batch": np.asarray(call.y, dtype=np.int64), "channel_first": True}
        args.update(a_batch=call.a.reshape(1, 1, *call.a.shape[-2:]), s_batch=call.s, batch_size=1)
        if "model" in self.needs:
            assert batch.model is not None
            args.update(model=Counted(batch.model.module, tally), device=device)
        else:
            args.update(model=None)
        if "explainer" in self.needs:
            args.update(explain_func=self.explain_func(batch, sample, tally))
        with seeded(seed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = metric(**args)
        return float(np.asarray(out, dtype=np.float64).reshape(-1)[0])
