"""Per-sample values of one (track, explainer, metric) as arrays: a read-only mapping without a
Python object per value.

A leaderboard of 50 explainers x 20 tracks x 30 metrics x 1,000 samples holds 30 million
per-sample values; as ``dict[str, float | None]`` they take about 2 GB, as one float64 array per
(track, explainer, metric) against the file's shared list of sample ids 240 MB.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np


class SampleValues(Mapping[str, float | None]):
    """Sample id -> value (``None`` for n/a: NaN or infinite in ``array``), in the order of
    ``ids``. ``ids`` and ``array`` are read directly by the ranking code (:attr:`ids`,
    :attr:`array`, NaN for n/a); everything else sees a mapping equal to the ``dict`` it replaces."""

    __slots__ = ("_positions", "array", "ids")

    def __init__(self, ids: Sequence[str], array: np.ndarray) -> None:
        values = np.asarray(array, dtype=np.float64)
        if values.shape != (len(ids),):
            raise ValueError(f"{values.shape[0] if values.ndim else 0} values for {len(ids)} sample ids")
        if not np.isfinite(values).all():
            values = np.where(np.isfinite(values), values, np.nan)
        self.ids: Sequence[str] = ids
        self.array: np.ndarray = values
        self._positions: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __getitem__(self, key: str) -> float | None:
        if self._positions is None:
            self._positions = {s: k for k, s in enumerate(self.ids)}
        value = float(self.array[self._positions[key]])
        return None if math.isnan(value) else value

    def __contains__(self, key: object) -> bool:
        if self._positions is None:
            self._positions = {s: k for k, s in enumerate(self.ids)}
        return key in self._positions

    def values(self) -> list[float | None]:  # type: ignore[override]
        """The values in id order, ``None`` for n/a (a list: one pass over the array)."""
        return [None if math.isnan(v) else v for v in self.array.tolist()]

    def items(self) -> list[tuple[str, float | None]]:  # type: ignore[override]
        return list(zip(self.ids, self.values(), strict=True))

    def __repr__(self) -> str:
        return f"SampleValues({len(self.ids)} samples, {int(np.isnan(self.array).sum())} n/a)"
