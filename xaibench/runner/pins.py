"""A suite's pinned data (:meth:`xaibench.api.Suite.revisions`), checked before any work.

The official suite pins each track's dataset by content digest and sample count (DESIGN 10): a
user whose copy differs gets one line naming the dataset and what differs before a single
explanation is computed, since results on another copy are not comparable with the record's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from xaibench.api import Dataset, TrackSpec
from xaibench.errors import XaibenchError

__all__ = ["check_revisions"]


def check_revisions(
    suite: str,
    specs: Iterable[TrackSpec],
    pinned: Mapping[str, tuple[str, int]],
    load: Callable[[TrackSpec], Dataset],
) -> None:
    """Compare each track's dataset (``load(spec)`` builds it) with ``pinned[track]``, its
    ``(revision, samples)``; raise :class:`XaibenchError` in one line naming the first dataset
    that differs and how. Tracks ``pinned`` does not name are not checked."""
    for spec in specs:
        if spec.name not in pinned:
            continue
        want_revision, want_samples = pinned[spec.name]
        dataset = load(spec)
        revision, samples = str(dataset.revision), len(dataset)  # type: ignore[arg-type]
        differs = []
        if samples != want_samples:
            differs.append(f"{samples} samples where the suite's copy has {want_samples}")
        if revision != want_revision:
            differs.append(f"content digest {revision} where the suite's is {want_revision}")
        if differs:
            root = spec.dataset_params.get("root")
            raise XaibenchError(
                f"suite {suite}: dataset {spec.dataset!r} of track {spec.name!r}"
                f"{f' at {root}' if root else ''} differs from the suite's copy ({'; '.join(differs)}): "
                "its results would not be comparable; use the suite's copy (docs/datasets.md)"
            )
