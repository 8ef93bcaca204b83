"""Public types of xaibench: the data model every plugin codes against.

Images are ``H x W x 3`` float32 arrays in [0, 1] at their native size. A model
resizes them to its square input size; explainers return saliency maps at that
input size; alignment metrics resize maps to the ground truth's size (DESIGN 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np

from xaibench.metric_cost import MetricCost
from xaibench.params import Param, resolve_params

Direction = Literal["higher", "lower"]
Family = Literal["alignment", "faithfulness", "robustness", "ground_truth", "perceptual", "other", "sanity"]
"""Every metric family, in display order; what the board does with each is one row of
:data:`xaibench.families.POLICIES`."""
ExplanationKind = Literal["saliency", "concept"]
Modality = Literal["image", "text"]
MODALITIES: tuple[str, ...] = ("image", "text")
"""What a sample can be (DESIGN 12): an image (an explanation or a mask is H x W) or a token
sequence (one value per token)."""

T = TypeVar("T")


# ----------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class GroundTruth:
    """Human ground truth for one image, at the image's native size.

    ``mask``: binary evidence mask (bool, H x W). ``levels``: multi-level map in
    [0, 1] (float32, H x W), e.g. human attention. ``boxes``: ``(N, 4)`` pixel
    boxes ``x0, y0, x1, y1`` (exclusive end). Any subset may be present.

    A known answer (DESIGN 11, the mechanism tracks): ``regions`` labels each pixel with its
    region (int, H x W; ``k >= 1`` is region ``k``, 0 belongs to no region) and
    ``contributions`` holds region ``k``'s exact, signed contribution to the explained class's
    logit at index ``k - 1`` (float, relative to the explainers' baseline, the normalised zero;
    logit units). ``mask`` is then the region A* the model's decision depends on. Both or neither.
    """

    mask: np.ndarray | None = None
    levels: np.ndarray | None = None
    boxes: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    regions: np.ndarray | None = None
    contributions: np.ndarray | None = None

    def binary(self) -> np.ndarray | None:
        """The binary mask A used by the binary metrics (DESIGN 2): the mask, else
        ``levels > 0``, else the rasterised boxes."""
        if self.mask is not None:
            return self.mask.astype(bool)
        if self.levels is not None:
            return self.levels > 0
        return None

    def multilevel(self) -> np.ndarray | None:
        """The map M in [0, 1]: the levels, else the binary mask as 0/1."""
        if self.levels is not None:
            return self.levels.astype(np.float32)
        if self.mask is not None:
            return self.mask.astype(np.float32)
        return None


@dataclass
class Sample:
    """One image of a dataset. ``label`` is an index into the dataset's
    ``label_names`` (or ``None``); ``target`` optionally fixes the model class
    to explain (set by datasets that map their labels onto a model's classes)."""

    id: str
    image: np.ndarray
    label: int | None = None
    ground_truth: GroundTruth | None = None
    target: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> tuple[int, int]:
        return int(self.image.shape[0]), int(self.image.shape[1])


# ----------------------------------------------------------------------------- components


@dataclass(frozen=True)
class ComponentInfo:
    """Metadata every registered component carries (shown by ``xaibench list``)."""

    name: str
    kind: str
    version: str
    description: str
    licence: str
    needs: tuple[str, ...]
    distribution: str
    distribution_version: str
    plugin: str
    modalities: tuple[str, ...] = ("image",)


class Component:
    """Base of every component. Subclasses set the class attributes below.

    ``needs`` lists requirements: for explainers ``gradients``,
    ``target_layer`` or ``model_agnostic``; for metrics ``mask``, ``levels``,
    ``model``; for datasets ``data_root``.

    ``modalities`` (:data:`MODALITIES`, DESIGN 12): for a dataset the one its samples have, for a
    model the one it takes, for an explainer or a metric those it can explain or score. On a track
    of another modality an explainer's or a metric's records are n/a with the reason
    :func:`modality_reason`, said once per track.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0.0.0"
    description: ClassVar[str] = ""
    licence: ClassVar[str] = "unknown"
    needs: ClassVar[tuple[str, ...]] = ()
    modalities: ClassVar[tuple[str, ...]] = ("image",)


def model_modality(model: Any) -> str:
    """What ``model`` takes: ``"text"`` for a model of token sequences only (a :class:`TextModel`,
    or a stand-in declaring ``modalities = ("text",)``; input ``(B, D + 1, 1, L)``, maps
    ``(1, L)``), else ``"image"``."""
    return "text" if tuple(getattr(model, "modalities", ("image",))) == ("text",) else "image"


def modality_reason(kind: str, name: str, modalities: Sequence[str], modality: str) -> str:
    """The n/a reason of an explainer or metric that does not support a track's ``modality``."""
    return f"modality: {kind} {name} supports {', '.join(modalities)}, not {modality}"


class Parametrised(Component):
    """A component built from keyword parameters: ``default_params`` names every parameter and
    its default; ``param_specs`` (optional, per name) coerces and bounds values. The base class
    checks both once, in ``__init__``; ``validate_params`` may add checks across parameters."""

    default_params: ClassVar[Mapping[str, Any]] = {}
    param_specs: ClassVar[Mapping[str, Param]] = {}
    component_kind: ClassVar[str] = "component"

    def __init__(self, **params: Any) -> None:
        resolved = resolve_params(self.component_kind, self.name, self.default_params, self.param_specs, params)
        self.params = self.validate_params(resolved)

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Checks beyond the specs (e.g. between parameters); return the parameters to use."""
        return params


class Dataset(Component):
    """A finite ordered set of samples. Construct with keyword parameters."""

    label_names: Sequence[str] = ()
    synthetic: ClassVar[bool] = False
    source: ClassVar[str] = ""

    @property
    def revision(self) -> str:
        """A string that changes whenever the data changes (a content digest)."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def samples(self, limit: int | None = None) -> Iterator[Sample]:
        raise NotImplementedError


class Model(Component):
    """A classifier to explain. Instances are loaded and in eval mode.

    ``module`` maps normalised ``(B, 3, S, S)`` tensors to logits. ``mean`` and
    ``std`` are the per-channel normalisation; the deletion baseline is the
    normalised zero, i.e. the mean. ``target_layers`` are dotted module paths
    for CAM methods.
    """

    module: Any
    input_size: int = 224
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    label_names: Sequence[str] = ()
    target_layers: Sequence[str] = ()
    synthetic: ClassVar[bool] = False

    @property
    def identity(self) -> str:
        """Architecture plus weights digest; keys every cache entry."""
        raise NotImplementedError

    def preprocess(self, images: Sequence[np.ndarray]) -> Any:
        """Resize (squash, bilinear) to ``input_size`` and normalise; returns a tensor."""
        from xaibench.imaging import to_model_input

        return to_model_input(images, self.input_size, self.mean, self.std)


@dataclass(frozen=True)
class Tokenized:
    """A text model's tokenisation of a sample's words: ``ids`` (the model's token ids, no special
    tokens), ``word_of`` (for each token, the index of the word it comes from) and ``tokens``
    (each token as text, for display)."""

    ids: tuple[int, ...]
    word_of: tuple[int, ...]
    tokens: tuple[str, ...]


class TextModel(Model):
    """A classifier of token sequences (DESIGN 12; ``modalities = ("text",)``).

    A text sample's ``image`` is its words (a 1-D array of strings); the runner tokenises it with
    :meth:`tokenize` (:func:`xaibench.tokens.tokenized`: the sample becomes its ``max_tokens``
    token ids, cut or padded with ``pad_id``, its ground truth spread from words to their tokens).
    ``preprocess`` makes the model input of such samples: a ``(B, D + 1, 1, L)`` float tensor, each
    token's embedding (``embeddings``, ``(V, D)``) minus the padding token's, then a presence
    channel (1 for a token, 0 for padding). The explainers' baseline, zero, is therefore the
    all-padding sequence, and the faithfulness metrics' deletion of a token (setting it to zero)
    replaces it with the padding token. ``module`` maps that tensor to logits. Maps and masks on
    text are ``(1, L)``: one value per token."""

    modalities: ClassVar[tuple[str, ...]] = ("text",)
    embeddings: Any = None
    pad_id: int = 0
    max_tokens: int = 64

    def tokenize(self, words: Sequence[str]) -> Tokenized:
        raise NotImplementedError

    def preprocess(self, images: Sequence[np.ndarray]) -> Any:
        """Token id arrays (each ``max_tokens`` long) -> ``(B, D + 1, 1, L)`` float32 (class doc)."""
        import torch

        ids = torch.as_tensor(np.stack([np.asarray(i, dtype=np.int64) for i in images]))
        table = torch.as_tensor(self.embeddings, dtype=torch.float32)
        vectors = table[ids] - table[self.pad_id]  # (B, L, D)
        presence = (ids != self.pad_id).to(torch.float32)[..., None]
        return torch.cat([vectors, presence], dim=-1).permute(0, 2, 1)[:, :, None, :].contiguous()


class Explainer(Parametrised):
    """Maps (model, inputs, targets) to explanations.

    ``explain`` gets a normalised ``(B, 3, S, S)`` tensor and ``(B,)`` int
    targets and returns a ``(B, S, S)`` float array (saliency, any real scale)
    or, for ``kind = "concept"``, a list of ``{concept: weight}`` dicts.
    Parameters are constructor keywords, validated by ``validate_params``.
    """

    kind: ClassVar[ExplanationKind] = "saliency"
    component_kind: ClassVar[str] = "explainer"
    reference_only: ClassVar[bool] = False
    tuned_on_benchmark: ClassVar[bool] = False

    def explain(
        self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context: ExplainContext | None = None
    ) -> Any:
        raise NotImplementedError


@dataclass
class ExplainContext:
    """What an explainer may read besides the model: the samples (ground truth is
    only for reference explainers such as ``oracle``)."""

    samples: Sequence[Sample]


@dataclass
class ForwardCounter:
    """Batched softmax probabilities with a count of images forwarded.

    ``device`` is where the model runs (the run's ``--device``): each chunk of ``x`` is moved
    there, and the probabilities come back on ``x``'s device, so a metric may pass CPU tensors
    whatever the device. ``None``: the model runs wherever ``x`` is.

    Forward passes run in ``torch.inference_mode``. ``channels_last`` (default): 4-D image batches
    are handed to the model in the channels-last memory format, which convolutions read fastest
    (measured on EfficientNet-Lite0 at 224 px, 2 CPU threads: 13.1 against 16.7 ms per image;
    ``bench/bench_faithfulness_overhead.py``). Values are the same up to float32 rounding
    (logits within 1e-5)."""

    fn: Callable[[Any], Any]
    batch_size: int = 64
    images: int = 0
    calls: int = 0
    device: Any = None
    channels_last: bool = True

    def __call__(self, x: Any) -> Any:
        import torch

        outs = []
        device = None if self.device is None else torch.device(self.device)
        with torch.inference_mode():
            for start in range(0, int(x.shape[0]), self.batch_size):
                chunk = x[start : start + self.batch_size]
                home = chunk.device
                if device is not None and chunk.device != device:
                    chunk = chunk.to(device)
                if self.channels_last and chunk.dim() == 4:
                    chunk = chunk.contiguous(memory_format=torch.channels_last)
                probs = torch.softmax(self.fn(chunk).float(), dim=1)
                outs.append(probs.to(home))
                self.images += int(chunk.shape[0])
                self.calls += 1
        return torch.cat(outs) if outs else torch.empty(0)


class BatchMemo:
    """Work shared between the metrics that score one batch (clean probabilities, normalised
    maps, ROAD curves, PASTA scores): each value is built once per key, by the first metric that
    asks, and read by the others. Keys are hashable tuples whose first item names the owner
    (``("faithfulness", "p_clean", sample_id, target)``), so owners never collide."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value under ``key``, built with ``build()`` on first use."""
        if key not in self._values:
            self._values[key] = build()
        return self._values[key]

    def lookup(self, key: Hashable) -> Any | None:
        """The value under ``key``, or ``None`` when nothing was stored yet."""
        return self._values.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        """Store a value computed together with others (e.g. several curves in one pass)."""
        self._values[key] = value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)


@dataclass
class MetricInput:
    """Everything a metric may read for one batch of valid explanations."""

    saliency: np.ndarray | None
    concepts: list[dict[str, float]] | None
    samples: list[Sample]
    targets: np.ndarray
    inputs: Any = None
    model: Model | None = None
    forward: ForwardCounter | None = None
    explainer: Explainer | None = None
    seed: int = 0
    memo: BatchMemo = field(default_factory=BatchMemo)


@dataclass
class MetricOutput:
    """Per-sample values (NaN where n/a) with reasons, optional curves and the
    number of model forward passes (images) the metric used."""

    values: np.ndarray
    reasons: list[str | None]
    curves: list[dict[str, Any] | None] | None = None
    forward_passes: int = 0
    extras: list[dict[str, Any] | None] | None = None

    @classmethod
    def not_applicable(cls, n: int, reason: str) -> MetricOutput:
        return cls(values=np.full(n, np.nan), reasons=[reason] * n)


class Metric(Parametrised):
    """Maps explanations to one score per sample.

    Set ``family``, ``direction`` (which way is better) and ``ranking`` (whether
    the metric enters its family's rank). ``applies`` returns a reason when the
    metric cannot apply to a track at all. ``default = False`` keeps a metric out of
    ``family:<name>`` selectors and of "every metric": it runs only when named by its id
    (``--metric``, a suite's metric list), as the Quantus adapters do.
    ``value_range`` is the closed interval ``(low, high)`` every per-sample value lies in by
    the metric's definition (``math.inf`` for an open side; default: any finite value): a
    submission whose values of this metric id lie outside it is refused
    (:func:`value_range_problem` says what a valid one is, :func:`outside_range` applies it).
    ``cost`` is what one sample costs, from the metric's parameters: a :class:`MetricCost`
    (forward passes and explanations per sample, numbers or expressions such as ``"steps + 1"``;
    :mod:`xaibench.metric_cost`), or a tuple of them when parts are shared separately. The time
    estimate printed before a long run reads it; ``None`` (the default) states none, and the
    estimate then says once that it leaves the metric out.
    """

    family: ClassVar[Family] = "other"
    direction: ClassVar[Direction] = "higher"
    ranking: ClassVar[bool] = False
    default: ClassVar[bool] = True
    unit: ClassVar[str] = ""
    value_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    cost: ClassVar[MetricCost | tuple[MetricCost, ...] | None] = None
    scores_constant_maps: ClassVar[bool] = False
    """Whether a constant map is scored (DESIGN 11: the ``ground_truth`` family gives it the worst
    value) rather than n/a with the explanation's "constant map" reason, as every other metric."""
    explanation_kinds: ClassVar[tuple[ExplanationKind, ...]] = ("saliency",)
    component_kind: ClassVar[str] = "metric"

    def score(self, batch: MetricInput) -> MetricOutput:
        raise NotImplementedError


RANGE_SLACK = 1e-9
"""How far a value may lie outside its metric's ``value_range``, relative to the bound's size
(at least 1): float rounding (a Pearson correlation of 1 + 2e-16, an AUC of -1e-17)."""


def value_range_problem(value: object) -> str | None:
    """Why ``value`` is not a valid ``Metric.value_range``, else ``None``: the one check of the
    attribute (registration and the submission checks call it). Valid: a pair ``(low, high)`` of
    real numbers (not booleans, not NaN), ``low < high``; ``-math.inf``/``math.inf`` leave a side open."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        return f"value_range must be a pair (low, high), got {value!r}"
    low, high = value
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, int | float) or math.isnan(bound):
            return f"value_range bounds must be real numbers (math.inf for an open side), got {value!r}"
    if not low < high:
        return f"value_range must have low < high, got {value!r}"
    return None


def metric_value_range(metric: type[Metric] | Metric) -> tuple[float, float] | None:
    """The checked ``value_range`` of a metric class (or instance) as floats; ``None`` when it
    declares an invalid one (see :func:`value_range_problem`)."""
    value = getattr(metric, "value_range", (-math.inf, math.inf))
    if value_range_problem(value) is not None:
        return None
    low, high = value
    return float(low), float(high)


def outside_range(value: float, value_range: tuple[float, float]) -> bool:
    """Whether ``value`` lies outside ``value_range`` by more than :data:`RANGE_SLACK`
    (relative to the bound's size, at least 1); NaN is outside every range."""
    low, high = value_range
    if math.isnan(value):
        return True
    below = value < low - RANGE_SLACK * max(1.0, abs(low)) if math.isfinite(low) else False
    above = value > high + RANGE_SLACK * max(1.0, abs(high)) if math.isfinite(high) else False
    return below or above


# ----------------------------------------------------------------------------- encoders


class Encoder(Parametrised):
    """Embeds renders of explanations (DESIGN 5, the PASTA score): overlay images and/or sentences.

    ``modalities`` says what it embeds: ``"image"`` (``encode_images`` gets ``(N, S, S, 3)``
    uint8 renders) and/or ``"text"`` (``encode_texts`` gets strings). Both return ``(N, D)``
    float32 arrays. Construction must be cheap: load weights lazily, and report with
    ``unavailable()`` (a reason, or ``None``) when the encoder cannot run here. ``identity``
    names the architecture and weights; it keys the embedding cache.
    """

    modalities: ClassVar[tuple[str, ...]] = ("image",)
    component_kind: ClassVar[str] = "encoder"

    @property
    def identity(self) -> str:
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """Why this encoder cannot run here (missing package or weights), else ``None``."""
        return None

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"encoder {self.name!r} does not embed images")

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError(f"encoder {self.name!r} does not embed text")


# ----------------------------------------------------------------------------- suites


@dataclass(frozen=True)
class TrackSpec:
    """One dataset x one model. ``target`` is ``predicted`` (default, DESIGN 1) or ``label``.

    ``metrics`` are the metric ids and selectors the track runs (``family:NAME``, ``all``,
    ``default``; ``None``: ``all``, every metric with ``default = True``); ``metric_params``
    overrides metric parameters for this track (recorded).
    """

    name: str
    dataset: str
    model: str
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    model_params: Mapping[str, Any] = field(default_factory=dict)
    target: Literal["predicted", "label"] = "predicted"
    synthetic: bool = False
    limit: int | None = None
    metrics: tuple[str, ...] | None = None
    metric_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""


class Suite(Component):
    """A named list of tracks. ``tracks()`` may look at the environment (data roots)."""

    def tracks(self) -> list[TrackSpec]:
        raise NotImplementedError

    def status(self) -> str:
        """One line for ``xaibench list suites`` (e.g. which data roots were found)."""
        return ""

    def revisions(self) -> Mapping[str, tuple[str, int]]:
        """Track name -> the ``(revision, number of samples)`` its dataset must have: a suite that
        pins its data (the official suite, DESIGN 10) says so here, and a run whose copy differs
        stops before any work with one line naming the dataset and what differs. Default: none."""
        return {}


Register = Callable[[type[Component]], None]
