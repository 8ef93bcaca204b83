"""Loading one track: its dataset, its model, model inputs and the explained classes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaibench.api import Dataset, ForwardCounter, Model, Sample, TrackSpec
from xaibench.errors import XaibenchError
from xaibench.explainers.planted import reliance, relies_on
from xaibench.plugins.manager import Registry
from xaibench.runner.chance import model_check
from xaibench.runner.storage.cache import image_digest
from xaibench.tokens import tokenized

CPU = torch.device("cpu")


@dataclass
class TrackContext:
    """Everything the runner needs for one track, loaded once. The model and ``inputs`` are on
    ``device``, the run's (resolved once by the runner and carried here, not read back from the
    tensors); explainers get their batches there and workers rebuild the model there.

    ``model``, ``inputs`` and ``forward`` are ``None`` only for ``xaibench score`` without a
    model (alignment metrics read the maps and the ground truth, nothing else).
    """

    spec: TrackSpec
    dataset: Dataset
    model: Model | None
    samples: list[Sample]
    inputs: torch.Tensor | None
    targets: np.ndarray
    target_sources: list[str]
    digests: dict[str, str]
    forward: ForwardCounter | None
    provenance: dict[str, Any] = field(default_factory=dict)
    device: torch.device = CPU

    def sample_index(self) -> dict[str, int]:
        return {s.id: i for i, s in enumerate(self.samples)}

    @property
    def revision(self) -> str:
        """The dataset's revision as read once when the track was loaded (its provenance); a
        dataset may compute it from its content, so a run does not ask it again per record."""
        known = (self.provenance.get("dataset") or {}).get("revision")
        return str(known) if known is not None else str(self.dataset.revision)

    @property
    def modality(self) -> str:
        """What the track's samples are (``"image"`` or ``"text"``): its dataset's modality."""
        return track_modality(self.dataset)

    @property
    def input_size(self) -> tuple[int, int] | None:
        """``(H, W)`` of the model inputs, which every saliency map of a run has; ``None`` without a model."""
        return None if self.inputs is None else (int(self.inputs.shape[-2]), int(self.inputs.shape[-1]))


def track_modality(dataset: Dataset) -> str:
    """The modality of ``dataset``'s samples (its declared ``modalities``' one entry)."""
    return str(next(iter(getattr(dataset, "modalities", ("image",)))))


def supports(component: Any, modality: str) -> bool:
    """Whether an explainer, a metric or a model (an instance, a stand-in or a handle) declares ``modality``."""
    return modality in tuple(getattr(component, "modalities", ("image",)))


def check_modalities(spec: TrackSpec, dataset: Dataset, model: Model | None) -> None:
    """A model that does not take its dataset's modality is a track error (one line naming both)."""
    modality = track_modality(dataset)
    if model is not None and not supports(model, modality):
        takes = ", ".join(tuple(getattr(model, "modalities", ("image",))))
        raise XaibenchError(
            f"track {spec.name!r}: model {spec.model!r} takes {takes}, but dataset {spec.dataset!r} gives {modality}"
        )


def load_track(
    spec: TrackSpec,
    registry: Registry,
    *,
    limit: int | None = None,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    only: Collection[str] | None = None,
    timeout: float | None = None,
) -> TrackContext:
    """Instantiate the dataset and model of a track, take its first samples and build the context.

    The first samples are the first ``limit`` (and the track's own limit); ``only``, when given,
    then keeps just those sample ids, in track order (``xaibench submission verify`` re-runs a
    subset this way: the ids are those of the original run, whose ``limit`` it passes). An id of
    ``only`` that is not among the first samples raises :class:`XaibenchError` naming it.

    A third-party dataset (a stand-in) is loaded in a worker, within ``timeout`` seconds
    (:func:`xaibench.runner.isolation.dataset_worker.open_dataset`): the runner gets its samples as data. A
    third-party model is built in a worker of its own and reached through a proxy
    (:class:`xaibench.runner.isolation.component_worker.RemoteModel`)."""
    from xaibench.runner.isolation import component_worker
    from xaibench.runner.isolation.dataset_worker import open_dataset  # it imports this module's users

    effective_limit = min(x for x in (limit, spec.limit) if x is not None) if (limit or spec.limit) else None
    dataset: Dataset = open_dataset(
        registry, spec.dataset, dict(spec.dataset_params), limit=effective_limit, timeout=timeout
    )
    component_worker.install(timeout=timeout)  # a plugin's model: a proxy, its code in a worker
    model: Model = registry.create("model", spec.model, **dict(spec.model_params))
    samples = list(dataset.samples(effective_limit))
    if only is not None:
        wanted = set(only)
        missing = sorted(wanted - {s.id for s in samples})
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise XaibenchError(
                f"track {spec.name!r}: no sample {missing[0]!r}{more} among its first {len(samples)} samples"
            )
        samples = [s for s in samples if s.id in wanted]
    return build_track(spec, dataset, model, samples, batch_size=batch_size, device=device)


def build_track(
    spec: TrackSpec,
    dataset: Dataset,
    model: Model | None,
    samples: Sequence[Sample],
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
) -> TrackContext:
    """The context of ``samples`` of ``dataset`` explained on ``model``: model inputs (one tensor),
    the explained classes (:func:`resolve_targets`) and content digests. ``batch_size`` is the
    number of images per forward pass. The model and the inputs are moved to ``device``; the
    forward counter runs there. Shared by ``xaibench run`` and ``xaibench score``.

    The provenance records how the explained classes came about (``target_sources``: source ->
    samples, as the records say per sample) and, with a model, whether it is at chance on the
    samples (``model_check``, :func:`xaibench.runner.chance.model_check`, from the same clean
    forward pass)."""
    samples = list(samples)
    if not samples:
        raise XaibenchError(f"track {spec.name!r}: dataset {spec.dataset!r} yielded no samples")
    check_modalities(spec, dataset, model)
    if model is not None and track_modality(dataset) == "text" and hasattr(model, "tokenize"):
        samples = [tokenized(model, s) for s in samples]  # as the model sees them (DESIGN 12)
    device = torch.device(device)
    inputs: torch.Tensor | None = None
    forward: ForwardCounter | None = None
    probs: np.ndarray | None = None
    if model is not None:
        try:
            inputs = model.preprocess([s.image for s in samples])
        except Exception as exc:
            raise XaibenchError(f"track {spec.name!r}: model preprocessing failed: {exc}") from exc
        if device.type != "cpu":  # on the CPU, nothing moves: numbers stay bit-identical
            model.module.to(device)
            inputs = inputs.to(device)
        forward = ForwardCounter(model.module, batch_size=batch_size, device=device)
        probs = forward(inputs).cpu().numpy()
        forward.images = forward.calls = 0
    targets, sources = resolve_targets(samples, probs, spec.target)
    digests = {s.id: image_digest(s.image) for s in samples}
    provenance = {
        "track": spec.name,
        "synthetic": bool(spec.synthetic or dataset.synthetic or (model is not None and model.synthetic)),
        "dataset": {"name": spec.dataset, "revision": dataset.revision, "params": dict(spec.dataset_params)},
        "model": {
            "name": spec.model,
            "identity": model.identity if model is not None else None,
            "params": dict(spec.model_params),
            # where the weights came from, parts initialised rather than loaded with their seed
            # (e.g. "checkpoint:PATH", "pretrained, new classifier random(seed=0)"), when the model says
            **({"weights": str(model.weights_source)} if getattr(model, "weights_source", None) else {}),
        },
        "target": spec.target,
        "target_sources": dict(Counter(sources).most_common()),
        "n_samples": len(samples),
    }
    if probs is not None:
        provenance["model_check"] = dict(model_check(probs, samples, spec.target))
    if model is not None and forward is not None and probs is not None and any("cue_box" in s.meta for s in samples):
        provenance["cue_reliance"] = cue_reliance(model, forward, samples, device, probs.argmax(axis=1))
    return TrackContext(
        spec=spec,
        dataset=dataset,
        model=model,
        samples=samples,
        inputs=inputs,
        targets=targets,
        target_sources=sources,
        digests=digests,
        forward=forward,
        provenance=provenance,
        device=device,
    )


def cue_reliance(
    model: Model,
    forward: ForwardCounter,
    samples: Sequence[Sample],
    device: torch.device | str,
    clean: Sequence[int],
) -> dict[str, Any]:
    """What the model relies on, on samples that carry a planted cue (DESIGN 9 and 10): its
    top-1 accuracy (fractions in [0, 1]) clean, with the cue painted over and with the object
    painted over (:func:`xaibench.explainers.planted.reliance`), and ``relies_on``: ``"cue"``,
    ``"object"`` or ``None`` (:func:`~xaibench.explainers.planted.relies_on`). ``clean``: the
    classes the track's clean forward pass predicted (not predicted again). Two forward passes per
    sample, not counted against any metric."""

    def predict(images: list[np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return forward(model.preprocess(images).to(device)).argmax(dim=1).cpu().numpy()

    figures = reliance(samples, predict, clean)
    forward.images = forward.calls = 0
    return {**figures, "relies_on": relies_on(figures)} if figures else {}


def resolve_targets(
    samples: Sequence[Sample], probs: np.ndarray | None, rule: str = "predicted"
) -> tuple[np.ndarray, list[str]]:
    """The class explained for each sample and where it came from (DESIGN 1).

    ``rule="predicted"`` (the default): the model's prediction on the clean image for every
    sample (``predicted``), whatever the dataset says about its labels. ``rule="label"``: the
    sample's label as a model class: ``Sample.target`` when the dataset maps its label onto the
    model's classes (``mapped``), else the most probable of ``meta["target_candidates"]`` when the
    label spans several model classes (``mapped-candidate``), else ``Sample.label`` taken as a
    model class index (``label``), unless the dataset records ``meta["target_source"] ==
    "predicted"`` (its label has no model class); a sample left without a class gets the
    prediction (``predicted``). ``probs`` are the model's clean probabilities, ``(N, classes)``;
    without them (no model) a sample the rule gives no class gets ``-1`` (``unknown``).
    """
    if rule not in ("predicted", "label"):
        raise XaibenchError(f"target rule must be 'predicted' or 'label', got {rule!r}")
    if probs is not None:
        targets = probs.argmax(axis=1)
        sources = ["predicted"] * len(samples)
    else:
        targets = np.full(len(samples), -1, dtype=np.int64)
        sources = ["unknown"] * len(samples)
    if rule == "predicted":
        return targets.astype(np.int64), sources
    for i, sample in enumerate(samples):
        candidates = sample.meta.get("target_candidates") or []
        if sample.target is not None:
            targets[i], sources[i] = sample.target, "mapped"
        elif candidates and probs is not None:  # a label spanning several model classes: its most probable member
            targets[i], sources[i] = max(candidates, key=lambda c: probs[i, c]), "mapped-candidate"
        elif sample.label is not None and sample.meta.get("target_source") != "predicted":
            targets[i], sources[i] = sample.label, "label"
    return targets.astype(np.int64), sources
