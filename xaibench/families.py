"""The metric families' policy: one table of what the board does with each family (DESIGN 6, 7).

Ranking (:func:`xaibench.publish.leaderboard.rank_track`), the board
(:func:`xaibench.publish.board.track_diagnosis`), the leaderboard writers and the site read these
rows and never spell a family's name (``tests/test_family_policy.py`` checks that). What a board
shows and ranks is declared here as data, as HELM's schema files declare it; a new family is a
name in :data:`xaibench.api.Family` and a row of :data:`POLICIES`.

A row says:

- ``ranked_within``: the family has a ``rank:<family>`` row per explainer, the competition rank
  of its mean rank over the family's ranking metrics (lower is better).
- ``counted_overall``: that family rank enters ``rank:overall`` (the mean of the counted family
  ranks); ``robustness`` is ranked within itself only (DESIGN 3b).
- ``needs_validity``: ranked only when the track's perceptual checkpoint is valid (labelled
  ``PASTA``, or a held-out Q1 Spearman at least the rules' ``perceptual_min_spearman``:
  :func:`xaibench.publish.leaderboard.perceptual_validity`); its rows carry the checkpoint's label.
- ``unranked_status``: the status of a metric row the family does not rank (``""``: none).
- ``unranked_reason``: the family verdict's reason on a track where it is never ranked.
- ``note_unranked``: the site notes "not ranked: <reason>" where it is not ranked (false for a
  family never meant to rank, whose not being ranked is no news).
- ``flags_explainers``: its metrics flag explainers ("insensitive to the model"), never rank them;
  every track table shows them.
- ``known_answer``: non-empty for the family scored against an answer built into the model
  (DESIGN 11): on a track where one of its ranking metrics has values, every other counted family
  is a diagnosis, with this reason (``{family}``: that family's name).
- ``cue_diagnosis``: non-empty for a family that is a diagnosis on a track whose model relies on
  a planted cue more than on the object (DESIGN 10), with this reason (``{without_cue}``,
  ``{without_object}``: the model's accuracy with the cue, the object painted over).

A diagnosis family is shown and ranked among the methods, but leaves the overall rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from xaibench.api import Family


@dataclass(frozen=True)
class FamilyPolicy:
    """One family's row of the policy table (the module doc says what each field means)."""

    name: str
    ranked_within: bool = False
    counted_overall: bool = False
    needs_validity: bool = False
    unranked_status: str = ""
    unranked_reason: str = "shown only"
    note_unranked: bool = True
    flags_explainers: bool = False
    known_answer: str = ""
    cue_diagnosis: str = ""


POLICIES: tuple[FamilyPolicy, ...] = (
    FamilyPolicy(
        "alignment",
        ranked_within=True,
        counted_overall=True,
        cue_diagnosis=(
            "diagnosis: the model relies on the planted cue (accuracy {without_cue:.2f} with the cue painted "
            "over, {without_object:.2f} with the object painted over), so alignment to the object is no "
            "evidence of a faithful map; out of the overall rank"
        ),
    ),
    FamilyPolicy("faithfulness", ranked_within=True, counted_overall=True),
    FamilyPolicy("robustness", ranked_within=True),
    FamilyPolicy(
        "ground_truth",
        ranked_within=True,
        counted_overall=True,
        known_answer=(
            "diagnosis: this track's model decides by a mechanism built in, so the {family} family, a proxy, is "
            "reported beside the known answer (the ground_truth family), which alone makes the overall rank"
        ),
    ),
    FamilyPolicy(
        "perceptual",
        ranked_within=True,
        counted_overall=True,
        needs_validity=True,
        unranked_status="not ranked: shown only",
    ),
    FamilyPolicy("other", note_unranked=False),
    FamilyPolicy(
        "sanity",
        unranked_status="not ranked: sanity check",
        unranked_reason="sanity check, never ranked",
        flags_explainers=True,
    ),
)
"""Every family of :data:`xaibench.api.Family`, one row each, in display order."""

BY_NAME: Mapping[str, FamilyPolicy] = MappingProxyType({p.name: p for p in POLICIES})
"""Family name -> its row, in display order."""

UNKNOWN = FamilyPolicy("")
"""The row of a family a submission names that is not in the table: shown only, never ranked."""

DEFAULT_FAMILY: Family = "other"
"""The family of a metric that states none (:attr:`xaibench.api.Metric.family`'s default), also
read for a submission block without one."""


def policy_of(family: str) -> FamilyPolicy:
    """The row of ``family``; :data:`UNKNOWN` for a name outside the table."""
    return BY_NAME.get(family, UNKNOWN)


_POSITION = {p.name: i for i, p in enumerate(POLICIES)}


def family_index(family: str) -> int:
    """Position of ``family`` in the display order (:data:`POLICIES`); unknown families last."""
    return _POSITION.get(family, len(POLICIES))
