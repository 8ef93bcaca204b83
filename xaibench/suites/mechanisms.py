"""The ``mechanisms`` suite: one track per mechanism kind, scored against a known answer (DESIGN 11).

Track ``mechanism-<kind>``: the ``mechanisms`` dataset of that kind on the ``mechanism`` model of
that kind (a decision built in, so each sample has an exact answer A*), the explained class the
prediction, and the ground-truth family (the only one in these tracks' overall rank) beside the
faithfulness family (the proxies the known-answer meta test judges). :data:`MECHANISM_TRACKS` are
the track specs as data, for other suites (the record) to include.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from xaibench.api import Suite, TrackSpec
from xaibench.datasets.mechanisms import KINDS

__all__ = ["MECHANISM_METRICS", "MECHANISM_TRACKS", "PROBES", "MechanismsSuite", "mechanism_track"]

MECHANISM_METRICS: tuple[str, ...] = ("family:ground_truth", "family:faithfulness")
"""Scored on every mechanism track: the known answer and the proxies it judges."""

PROBES: Mapping[str, str] = {
    "confined": "maps that bleed outside the evidence: one coloured mark decides, coloured clutter and grey "
    "texture count for nothing.",
    "additive": "exact attributions: 8 signed marks add their exact contributions (linear and quadratic terms) "
    "over 16 grid regions.",
    "interaction": "an AND of two marks: each is necessary, neither alone suffices; their Shapley values are equal.",
    "cancellation": "two opposite marks that cancel exactly: the class is the bias alone, each mark matters +a / -a.",
    "distractor": "a centre prior or an edge map drawn to a large black-and-white checkerboard the model provably "
    "ignores, the mark beside it.",
    "saturation": "a saturated detector: zero gradient on the evidence and a gradient texture everywhere that adds "
    "nothing to the logit (integrated gradients' case).",
}
"""Which failure of an explainer each kind probes (the tracks' descriptions)."""


def mechanism_track(kind: str, n: int | None = None) -> TrackSpec:
    """The track ``mechanism-<kind>``; ``n`` samples (``None``: the dataset's default, 128)."""
    if kind not in KINDS:
        raise ValueError(f"mechanisms: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    dataset_params: dict[str, object] = {"mechanism": kind}
    if n is not None:
        dataset_params["n"] = int(n)
    return TrackSpec(
        name=f"mechanism-{kind}",
        dataset="mechanisms",
        model="mechanism",
        dataset_params=dataset_params,
        model_params={"mechanism": kind},
        target="predicted",
        synthetic=True,
        metrics=MECHANISM_METRICS,
        description=f"Known answer, {kind}: probes {PROBES[kind]}",
    )


MECHANISM_TRACKS: tuple[TrackSpec, ...] = tuple(mechanism_track(kind) for kind in KINDS)
"""One track per kind, in :data:`xaibench.datasets.mechanisms.KINDS` order, at the default 128 samples."""


class MechanismsSuite(Suite):
    """Every mechanism track: explainers scored against a built-in, exactly known answer (DESIGN 11)."""

    name: ClassVar[str] = "mechanisms"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Known-answer tracks (DESIGN 11): confined, additive, interaction, cancellation, distractor and "
        "saturation mechanisms built into the `mechanism` model, ranked by the ground-truth family"
    )
    licence: ClassVar[str] = "Apache-2.0"

    def tracks(self) -> list[TrackSpec]:
        return list(MECHANISM_TRACKS)

    def status(self) -> str:
        return f"offline; {len(MECHANISM_TRACKS)} synthetic tracks of 128 samples with exact answers"
