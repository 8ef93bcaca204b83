"""What one explainer call cost: wall seconds and peak memory (DESIGN 10, issue 41).

A worker measures each call (:func:`measure`): its wall seconds, the peak resident memory above
what the process held just before the call (MB; the kernel's high-water mark is reset first where
``/proc/self/clear_refs`` lets a process do so, else the lifetime peak bounds it from above), and
on a CUDA device the peak device memory torch allocated during the call (MB). The runner splits a
batch's cost over its samples (:func:`per_sample`), stores each sample's share beside its cached
explanation, and sums them per track (:func:`summarise_costs`), so a resumed or cached run keeps
the true cost of the explanations it reads back. Costs a worker reports are checked
(:func:`checked`): a reply is data from plugin-controlled processes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["COST_FIELDS", "checked", "measure", "per_sample", "summarise_costs"]

COST_FIELDS = ("seconds", "peak_rss_mb", "peak_device_mb")
"""A call's cost: wall seconds, peak RSS above the pre-call baseline (MB), peak device memory (MB)."""
MAX_SECONDS = 366 * 24 * 3600.0
MAX_MB = 1e9

T = TypeVar("T")


def _status_kb(field: str) -> float | None:
    """``field`` (``VmRSS``, ``VmHWM``) of ``/proc/self/status`` in kB, ``None`` where unreadable."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_peak() -> None:
    """Reset the kernel's RSS high-water mark of this process, where it lets us (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        pass


def measure(call: Callable[[], T], device: str = "cpu") -> tuple[T, dict[str, float]]:
    """Run ``call`` and return its result with its cost (:data:`COST_FIELDS`; ``peak_rss_mb`` or
    ``peak_device_mb`` absent where this process cannot read them). Exceptions propagate."""
    cuda = device.startswith("cuda")
    if cuda:
        import torch

        torch.cuda.reset_peak_memory_stats(device)
        before_device = torch.cuda.memory_allocated(device)
    _reset_peak()
    before = _status_kb("VmRSS")
    started = time.perf_counter()
    result = call()
    cost: dict[str, float] = {"seconds": time.perf_counter() - started}
    peak = _status_kb("VmHWM")
    if before is not None and peak is not None:
        cost["peak_rss_mb"] = max(0.0, peak - before) / 1024.0
    if cuda:
        cost["peak_device_mb"] = max(0, torch.cuda.max_memory_allocated(device) - before_device) / 2**20
    return result, cost


def checked(cost: Any) -> dict[str, float] | None:
    """``cost`` as a worker reported it, if it is a mapping of :data:`COST_FIELDS` to finite,
    non-negative, plausible numbers (seconds below a year, MB below 1e9); else ``None``."""
    if not isinstance(cost, Mapping):
        return None
    out: dict[str, float] = {}
    for key, value in cost.items():
        if key not in COST_FIELDS or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        limit = MAX_SECONDS if key == "seconds" else MAX_MB
        if not (math.isfinite(value) and 0 <= value <= limit):
            return None
        out[str(key)] = float(value)
    return out if "seconds" in out else None


def per_sample(cost: Mapping[str, float] | None, n: int) -> dict[str, float] | None:
    """Each of a batch's ``n`` samples' share of its ``cost``: the seconds split evenly, the
    peaks (the batch's, shared by its samples) as they are."""
    if cost is None or n <= 0:
        return None
    return {k: (v / n if k == "seconds" else v) for k, v in cost.items()}


def summarise_costs(costs: Iterable[Mapping[str, float] | None], n_samples: int) -> dict[str, Any]:
    """One track's explanation cost from its samples' shares: ``seconds`` (their sum: the
    explaining time of the whole track, measured when each map was computed, whether this run
    computed it or read it from the cache), ``per_sample_seconds`` (mean), the largest
    ``peak_rss_mb`` and ``peak_device_mb`` (``None`` where unmeasured), and ``measured``: how many
    of the track's ``n_samples`` have a cost (maps computed before costs were kept have none)."""
    known = [c for c in costs if c]
    seconds = sum(c["seconds"] for c in known)
    rss = [c["peak_rss_mb"] for c in known if "peak_rss_mb" in c]
    device = [c["peak_device_mb"] for c in known if "peak_device_mb" in c]
    return {
        "seconds": round(seconds, 3),
        "per_sample_seconds": round(seconds / len(known), 6) if known else None,
        "peak_rss_mb": round(max(rss), 1) if rss else None,
        "peak_device_mb": round(max(device), 1) if device else None,
        "measured": len(known),
        "n_samples": n_samples,
    }
