"""The shapes of the JSON documents publishing reads and writes, as ``TypedDict`` classes.

Three documents: the run summary (``summary.json``, read when the submissions of a run are
written), a submission file (``xaibench.submission/2``, ``/1`` still read: docs/results.md and
docs/submission.schema.json) and the leaderboard (``xaibench.leaderboard/2``: its rows, family
verdicts, win rates and explainer blocks). They stay plain dicts at run time, so what is written
is exactly what was built, key order included; the classes say which keys a reader may expect.

A submission is data from outside: a file that passed validation has the keys the schema
requires, but the site also shows files built without validation (``build_site(validate=False)``),
so its readers still check each value's type where the schema leaves it open.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
"""Any value JSON can hold."""
JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object whose keys are free (parameters, provenance details, environments)."""

Direction = Literal["higher", "lower"]
"""The better direction of a metric's values."""


# ----------------------------------------------------------------------------- shared blocks


class ExplainerBlock(TypedDict, total=False):
    """The explainer as records, summaries and submissions describe it."""

    name: str
    version: str
    kind: str
    params: JsonObject
    params_digest: str
    """The first 12 hex digits of the parameters' digest; a variant's file is ``<name>@<digest>.json``."""
    distribution: str
    distribution_version: str
    reference_only: bool
    tuned_on_benchmark: bool


class Histogram(TypedDict, total=False):
    edges: list[float]
    counts: list[int]
    quantiles: list[float]


class Curve(TypedDict, total=False):
    """The mean curve over samples (deletion, insertion, the randomisation cascade)."""

    fraction: list[float]
    mean: list[float]
    q25: list[float]
    q75: list[float]
    n: int


class MetricSummary(TypedDict, total=False):
    """One metric of one explainer on one track: mean, 95 % interval and counts (``n`` with a
    value, ``n_na`` without), with the metric's identity, distribution and per-sample values."""

    id: str
    version: str
    family: str
    direction: Direction
    params: JsonObject
    ranking: bool
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_na: int
    na_reasons: dict[str, int]
    forward_passes_per_sample: float
    histogram: Histogram
    curve: Curve
    samples: dict[str, float | None]
    """Sample id -> value (None for n/a); what the paired ranking compares. The run summary's
    and ``xaibench.submission/1``'s form; ``/2`` writes ``values`` instead."""
    values: list[float | None] | str
    """``xaibench.submission/2``: the per-sample values aligned with the track's ``sample_ids``
    (or the metric's own): base64 of little-endian float64 (NaN for n/a), or a JSON array (None
    for n/a). Read through :func:`xaibench.publish.submission_files.per_sample`."""
    sample_ids: list[str]
    """``/2``: the ids of this metric's ``values`` when they are not the track's."""


class Explained(TypedDict, total=False):
    """How the explanations of a run came about: computed, taken from the cache, failed."""

    computed: int
    cached: int
    failed: int


class Provenance(TypedDict, total=False):
    """Where a track's numbers come from: dataset, model, how the explained class was chosen."""

    track: str
    synthetic: bool
    dataset: JsonObject
    """``name``, ``revision``, ``params``."""
    model: JsonObject
    """``name``, ``identity``, ``params``."""
    target: str
    """The track's target rule (``predicted`` or ``label``)."""
    target_sources: dict[str, int]
    """Where the explained classes came from, as the records say: source -> samples."""
    n_samples: int
    model_check: JsonObject
    """Whether the model is at chance on the samples (:class:`xaibench.runner.chance.ModelCheck`)."""


class PluginVersion(TypedDict, total=False):
    name: str
    distribution: str
    version: str
    ok: bool


# ----------------------------------------------------------------------------- the run summary


class ExplainerResults(TypedDict):
    """One explainer's block of a track in the run summary."""

    explainer: ExplainerBlock
    explain_seconds: float
    cost: dict[str, JsonValue]
    explained: Explained
    metrics: dict[str, MetricSummary]


class TrackSummary(TypedDict, total=False):
    """One track of the run summary; a track that failed to load has only ``error``."""

    provenance: Provenance
    explainers: dict[str, ExplainerResults]
    error: str


class RunInfo(TypedDict, total=False):
    """The run block of the summary: the environment, the suite, seed and limit, the plugins."""

    xaibench: str
    python: str
    torch: str
    platform: str
    machine: str
    device: str
    device_name: str
    torch_threads: int
    suite: str | None
    seed: int | None
    intervals: str  # the interval rule (xaibench.stats.INTERVAL_RULE); absent before issue 28
    limit: int | None
    started: str
    plugins: list[PluginVersion]
    repairs: JsonObject
    wall_time_s: float


class RunSummary(TypedDict):
    """``<workdir>/summary.json`` as the runner writes it (``RunResult.summary``)."""

    schema: str
    run: RunInfo
    tracks: dict[str, TrackSummary]


# ----------------------------------------------------------------------------- a submission file


class Disclosure(TypedDict, total=False):
    tuned_on_benchmark: bool
    reference_only: bool
    notes: str


class Verification(TypedDict, total=False):
    """What ``xaibench submission verify`` found: records re-run, matched, within ``tolerance``."""

    verified_at: str
    checked: int
    matched: int
    tolerance: float
    passed: bool
    xaibench: str
    seed: int | None
    """The seed of the draw (``None``: every record was re-run)."""


class Example(TypedDict, total=False):
    """One example overlay: the sample, its explained class, the overlay file under ``assets/``
    (``jpeg``; ``png`` in submissions written before JPEG overlays; never both) and its sha256;
    a concept explanation's ``sentence``; or a text explanation's highlighted tokens, no file
    (:mod:`xaibench.pasta.highlight`): ``tokens``, one of ``values`` per token in [0, 1], and
    ``truth``, the positions of the tokens inside the ground-truth mask."""

    sample_id: str
    target: int
    target_name: str | None
    render: str
    jpeg: str
    png: str
    sha256: str
    sentence: str
    tokens: list[str]
    values: list[float]
    truth: list[int]
    na_reason: str


class TrackResults(TypedDict, total=False):
    """One track of a submission."""

    provenance: Provenance
    explained: Explained
    explain_seconds: float
    cost: dict[str, JsonValue]
    """What explaining the track cost (:func:`xaibench.runner.cost.summarise_costs`)."""
    sample_ids: list[str]
    """``xaibench.submission/2``: the sample ids every metric's ``values`` align with (each once)."""
    metrics: dict[str, MetricSummary]
    examples: list[Example]


class SubmittedRun(TypedDict, total=False):
    started: str
    limit: int | None
    torch_threads: int
    batch_size: int  # images per model forward pass (``--batch-size``); absent before it was recorded


class SubmissionData(TypedDict):
    """A submission file (``xaibench.submission/1`` or ``/2``); :func:`xaibench.publish.submission.load_submission`
    checks the schema name and that ``explainer`` (with a ``name``) and ``tracks`` are objects."""

    schema: str
    explainer: ExplainerBlock
    disclosure: NotRequired[Disclosure]
    created: NotRequired[str]
    environment: NotRequired[JsonObject]
    run: NotRequired[SubmittedRun]
    plugins: NotRequired[list[PluginVersion]]
    seed: NotRequired[int | None]
    intervals: NotRequired[str]  # the interval rule (xaibench.stats.INTERVAL_RULE); absent: the earlier one
    suite: NotRequired[str | None]
    tracks: dict[str, TrackResults]
    verification: NotRequired[Verification]


# ----------------------------------------------------------------------------- the leaderboard


class Rules(TypedDict):
    """The ranking rules written into leaderboard.json (see :data:`xaibench.publish.leaderboard.RULES`)."""

    min_shared_samples: int
    na_flag_fraction: float
    perceptual_min_spearman: float
    sanity_flag_above: float


class BoardRow(TypedDict):
    """One tidy row (DESIGN 8): a (track, explainer, metric) cell, or a ``rank:<family>`` /
    ``rank:overall`` row whose value is the mean rank (lower is better). The keys are the CSV's
    columns, in its order."""

    track: str
    explainer: str
    metric: str
    family: str
    direction: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    n_na: int | None
    rank: int | None
    status: str
    """``""`` when ranked or shown only; ``not ranked: <reason>``; ``too few samples (n = k)``."""
    label: str
    """The perceptual checkpoint's label on perceptual rows, else ``""``."""
    flags: str
    """``; ``-joined flags: ``n/a P %``, the explainer's ``insensitive to the model``."""


class FamilyVerdict(TypedDict):
    """Whether a family is ranked on a track, why not, and its checkpoint's label."""

    ranked: bool
    reason: str | None
    label: str | None


class ExplainerWinRate(TypedDict):
    mean_win_rate: float | None
    """Mean over the tracks of the share of other ranked explainers with a worse overall rank
    (ties count half): higher is better, in [0, 1]; None when ranked on no shared track."""
    tracks: int
    overall_ranks: dict[str, int]


class WinRates(TypedDict):
    """The view across tracks: each explainer's mean win rate, and their order (best first)."""

    explainers: dict[str, ExplainerWinRate]
    order: list[str]


class Superseded(TypedDict):
    """A duplicate submission dropped on a track for a later one (file names)."""

    track: str
    explainer: str
    file: str
    by: str


class SupersededBy(TypedDict):
    track: str
    by: str


class Supersedes(TypedDict):
    track: str
    file: str


class ExplainerInfo(TypedDict):
    """A submission as the leaderboard describes it, under its key (the file's stem)."""

    file: str
    explainer: ExplainerBlock
    disclosure: Disclosure
    environment: JsonObject
    plugins: list[PluginVersion]
    seed: int | None
    created: str | None
    verification: Verification | None
    """The board builder's own verification result for this exact content (``None``: none)."""
    claimed_verification: NotRequired[Verification]
    """The file's own ``verification`` block, as written (present only when the file has one)."""
    verification_claim: NotRequired[str | None]
    """How to show that block: "claims verified (not checked here)" or "claims verification
    failed (not checked here)" (``None`` when the builder's own result is shown instead)."""
    flags: dict[str, list[str]]
    """Track -> the explainer's flags there (``insensitive to the model``)."""
    superseded: NotRequired[list[SupersededBy]]
    supersedes: NotRequired[list[Supersedes]]
    label: NotRequired[str]
    """The display label: the name, or a parameter variant's name with its parameters."""


class ExplainerCost(TypedDict):
    """What explaining one track cost one explainer, as the board shows it (never ranked): from
    the submission's ``tracks.<track>.cost`` and its ``environment``; ``None`` where the file
    does not say (a submission written before costs were kept)."""

    per_sample_seconds: float | None
    """Wall seconds per image (the mean over the measured images), on ``device``."""
    seconds: float | None
    """Wall seconds of the whole track (the sum over the measured images)."""
    peak_rss_mb: float | None
    """The largest peak resident memory above the worker's baseline during one call, MB."""
    peak_device_mb: float | None
    """The largest peak device (GPU) memory torch allocated during one call, MB."""
    measured: int | None
    """How many of the track's images have a cost."""
    n_samples: int | None
    device: str | None
    """The machine's device: the environment's ``device_name`` (``cpu``, a GPU's name), else its ``device``."""
    torch_threads: int | None


class LeaderboardData(TypedDict):
    """leaderboard.json (``xaibench.leaderboard/2``)."""

    schema: str
    rules: Rules
    rows: list[BoardRow]
    tracks: dict[str, Provenance]
    families: dict[str, dict[str, FamilyVerdict]]
    explainers: dict[str, ExplainerInfo]
    summary: WinRates
    notes: list[str]
    warnings: dict[str, list[str]]
    """track -> warning lines (a model at chance); empty when all is well."""
    cost: dict[str, dict[str, ExplainerCost]]
    """track -> explainer key -> what explaining the track cost (shown, never ranked)."""
