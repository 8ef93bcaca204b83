"""``field``: the field's metrics of DESIGN 3b (issue 27) against Quantus 0.6 on the device: the
eleven faithfulness metrics whose cost is forward passes (``bench/bench_field_faithfulness.py``)
and the seven robustness metrics whose cost is re-running the explainer (``bench/bench_robustness.py``),
8 photos, EfficientNet-Lite0, both sides on the same device, inputs and step counts.

Goals, per metric: a forward-pass metric at least 3x faster than Quantus and at most 1.3x the time
of its own forward passes alone, and (CUDA only) at most :data:`MAX_HOST_COPIES` device-to-host
copies in one call (``torch.profiler``); a robustness metric at least as fast as Quantus.

Where the time goes (``profile`` in the JSON, printed too): each faithfulness metric once more under
``torch.profiler`` (the device's busy time, the host's hottest torch ops) and under ``cProfile`` (the
hottest Python functions by their own time, the metric's own threads included), so that a missed
goal says what to move within the same device slot.

Dry run: 2 photos, a tenth of the step counts, one repeat, three faithfulness and two robustness
metrics (:data:`DRY_FAITHFULNESS`, :data:`DRY_ROBUSTNESS`), on the CPU (the goals are not expected
to hold there).
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import ROOT, Config, dtoh_copies, goal

MAX_HOST_COPIES = 4
"""Device-to-host copies one faithfulness metric may make on a batch: the clean probabilities,
the scores (one copy after the last forward), and at most two of per-sample sums or orders; a copy
per forward batch would make the host wait for every forward before queueing the next."""

DRY_FAITHFULNESS = ["faithfulness_correlation", "pixel_flipping", "infidelity"]
DRY_ROBUSTNESS = ["max_sensitivity", "relative_input_stability"]
"""The dry run's metrics: one of each kind of perturbation (random subsets, ordered steps, noise;
the shared perturbation pass and a stability ratio), to check the plumbing in seconds."""


def run(cfg: Config) -> dict[str, Any]:
    import quantus  # noqa: F401  (fail early, before the minutes of the rest)
    from _faithfulness_common import load_track
    from bench_field_faithfulness import measure as measure_faithfulness
    from bench_robustness import measure as measure_robustness

    n_images = 2 if cfg.dry else 8
    model, inputs, targets, saliency, samples = load_track(n_images)
    rows = measure_faithfulness(
        model,
        inputs,
        targets,
        saliency,
        samples,
        device=cfg.device,
        repeat=1 if cfg.dry else 2,
        scale=0.1 if cfg.dry else 1.0,
        only=DRY_FAITHFULNESS if cfg.dry else None,
    )
    figures: dict[str, float] = {}
    goals: dict[str, dict[str, Any]] = {}
    for r in rows:
        name = r["metric"]
        figures[f"{name} ours s"] = r["ours_s"]
        figures[f"{name} Quantus/ours"] = r["quantus_over_ours"]
        figures[f"{name} ours/forwards"] = r["ours_over_forwards"]
        goals[f"{name} Quantus/ours"] = goal(r["quantus_over_ours"], ">=", 3)
        goals[f"{name} ours/forwards"] = goal(r["ours_over_forwards"], "<=", 1.3)
    if cfg.cuda:
        copies = host_copies(model, inputs, targets, saliency, samples, cfg.device)
        for name, count in copies.items():
            figures[f"{name} host copies"] = count
            goals[f"{name} host copies"] = goal(count, "<=", MAX_HOST_COPIES)
    names = [r["metric"] for r in rows]
    profiled = where_time_goes(model, inputs, targets, saliency, samples, cfg.device, names, 0.1 if cfg.dry else 1.0)
    print_profile(profiled)
    model, inputs, targets, _, samples = load_track(n_images)  # a fresh model: nothing left from above
    robust = measure_robustness(
        model,
        inputs,
        targets,
        samples,
        n=4 if cfg.dry else 10,
        device=cfg.device,
        metrics=DRY_ROBUSTNESS if cfg.dry else None,
    )
    for r in robust["rows"]:
        name = r["metric"]
        figures[f"{name} ours s"] = r["ours_s"]
        figures[f"{name} Quantus/ours"] = r["quantus_over_ours"]
        figures[f"{name} ours/own work"] = r["ours_over_own_work"]
        goals[f"{name} Quantus/ours"] = goal(r["quantus_over_ours"], ">=", 1)
    figures["robustness all, one pass, Quantus/ours"] = robust["together"]["quantus_over_ours"]
    return {"figures": figures, "goals": goals, "faithfulness": rows, "robustness": robust, "profile": profiled}


def host_copies(model: Any, inputs: Any, targets: Any, saliency: Any, samples: Any, device: str) -> dict[str, int]:
    """Per faithfulness metric, the device-to-host copies of one call on the bench's batch (after
    the timed calls above: warm)."""
    from _faithfulness_common import make_batch
    from bench_field_faithfulness import METRICS, plans

    x = inputs.to(device)
    counts = {}
    for name, params, _ in plans(int(x.shape[-1] * x.shape[-2]), 1.0):
        batch = make_batch(model, x, targets, saliency, samples, 16, device)
        counts[name] = dtoh_copies(lambda name=name, params=params, batch=batch: METRICS[name](**params).score(batch))
    return counts


HOT = 6
"""Rows of each hot list (torch ops, Python functions)."""


def where_time_goes(
    model: Any,
    inputs: Any,
    targets: Any,
    saliency: Any,
    samples: Any,
    device: str,
    names: list[str],
    scale: float = 1.0,
) -> dict[str, dict[str, Any]]:
    """Per faithfulness metric of ``names`` (the timed parameters at ``scale``), one call on a fresh
    batch under each profiler: ``wall_s`` (``torch.profiler``'s call), ``device_busy_s`` (CUDA: the
    kernels' summed time; None on the CPU), ``torch_ops`` (the :data:`HOT` torch ops with the most
    self CPU time, in every thread where torch can: ``[name, calls, seconds]``) and ``python`` (the
    :data:`HOT` functions with the most own time under ``cProfile``, every thread:
    ``[file:line(function), calls, seconds]``; a wait for the device shows as the function that
    waits, e.g. ``tolist``, a wait for a builder thread as a lock's ``acquire``)."""
    from _faithfulness_common import make_batch
    from bench_field_faithfulness import METRICS, plans

    from .common import sync

    x = inputs.to(device)
    out: dict[str, dict[str, Any]] = {}
    for name, params, _ in plans(int(x.shape[-1] * x.shape[-2]), scale):
        if name not in names:
            continue

        def call(name: str = name, params: dict[str, Any] = params) -> None:
            METRICS[name](**params).score(make_batch(model, x, targets, saliency, samples, 16, device))
            sync(device)

        out[name] = {**torch_profile(call, device), **python_profile(call)}
    return out


def torch_profile(call: Callable[[], None], device: str) -> dict[str, Any]:
    """``wall_s``, ``device_busy_s``, ``torch_ops`` and ``torch_ops_threads`` (``"all"``, or
    ``"calling"`` where this torch cannot profile every thread) of one ``call()`` (see
    :func:`where_time_goes`)."""
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    try:  # the metric's builder threads too, where this torch can; else the calling thread only
        config, threads = _ExperimentalConfig(profile_all_threads=True), "all"
    except TypeError:
        config, threads = _ExperimentalConfig(), "calling"
    with profile(activities=activities, experimental_config=config) as prof:
        started = time.perf_counter()
        call()
        wall = time.perf_counter() - started
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]  # kernels and copies, not the ops
    busy = sum(e.self_device_time_total for e in kernels) / 1e6 if cuda else None
    ops = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:HOT]
    return {
        "wall_s": wall,
        "device_busy_s": busy,
        "torch_ops": [[e.key, int(e.count), e.self_cpu_time_total / 1e6] for e in ops],
        "torch_ops_threads": threads,
    }


def python_profile(call: Callable[[], None]) -> dict[str, Any]:
    """``python``: the :data:`HOT` functions with the most own time in one ``call()`` under
    ``cProfile``, summed over the calling thread and every thread started during the call
    (``[file:line(function), calls, seconds]``), and ``python_threads``, how many threads that is."""
    profilers = [cProfile.Profile()]

    def start_in_new_thread(*_: Any) -> None:  # called once per new thread: cProfile then takes over
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()

    threading.setprofile(start_in_new_thread)
    try:
        profilers[0].runcall(call)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(*profilers).stats  # {(file, line, function): (calls, primitive, own s, cumulative s, callers)}
    hot = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:HOT]
    return {
        "python": [
            [f"{short(file)}:{line}({func})", int(calls), own] for (file, line, func), (_, calls, own, _, _) in hot
        ],
        "python_threads": len(profilers),
    }


def short(file: str) -> str:
    """A source path after ``site-packages/`` or relative to the repository, or as given."""
    path = Path(file)
    if "site-packages" in path.parts:
        return "/".join(path.parts[path.parts.index("site-packages") + 1 :])
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else file


def print_profile(profiled: dict[str, dict[str, Any]]) -> None:
    """Each metric's wall and device-busy time and its hottest ops and functions, a few lines each."""
    for name, p in profiled.items():
        busy = "n/a" if p["device_busy_s"] is None else f"{p['device_busy_s']:.4f} s"
        print(f"   where {name}'s {p['wall_s']:.4f} s go (device busy {busy}):", flush=True)
        ops = ", ".join(f"{key} x{calls} {sec * 1e3:.1f} ms" for key, calls, sec in p["torch_ops"])
        print(f"      torch ops ({p['torch_ops_threads']} threads): {ops}", flush=True)
        funcs = ", ".join(f"{key} x{calls} {sec * 1e3:.1f} ms" for key, calls, sec in p["python"])
        print(f"      python ({p['python_threads']} threads): {funcs}", flush=True)
