"""``field-profile``: where the time of each faithfulness metric of the ``field`` step goes, so that
a missed speed goal says what to move within the same device slot. Each metric is called once more
on the ``field`` step's inputs (8 photos, EfficientNet-Lite0, the timed parameters, a fresh batch)
under ``torch.profiler`` (the device's busy time; the host's hottest torch ops, in every thread
where the installed torch can) and once under ``cProfile`` (the hottest Python functions by their
own time, in the calling thread and in every thread the metric starts: a wait for the device shows
as the function that waits, e.g. ``tolist``, a wait for a builder thread as a lock's ``acquire``).

A step of its own, after ``field``: the profilers are the least tried code on a new device, and a
crash here leaves ``field``'s figures written. No goals; figures: each metric's wall and (CUDA)
device-busy seconds; the hot lists are in the JSON (``profile``) and printed. Dry run: 2 photos, a
tenth of the step counts, the ``field`` dry run's three metrics, on the CPU.
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import ROOT, Config, sync
from .field import DRY_FAITHFULNESS

HOT = 6
"""Rows of each hot list (torch ops, Python functions)."""


def run(cfg: Config) -> dict[str, Any]:
    from _faithfulness_common import load_track
    from bench_field_faithfulness import METRICS

    model, inputs, targets, saliency, samples = load_track(2 if cfg.dry else 8)
    model.module.to(cfg.device)
    names = DRY_FAITHFULNESS if cfg.dry else list(METRICS)
    profiled = where_time_goes(model, inputs, targets, saliency, samples, cfg.device, names, 0.1 if cfg.dry else 1.0)
    print_profile(profiled)
    figures: dict[str, float] = {}
    for name, p in profiled.items():
        figures[f"{name} wall s"] = p["wall_s"]
        if p["device_busy_s"] is not None:
            figures[f"{name} device busy s"] = p["device_busy_s"]
    return {"figures": figures, "goals": {}, "profile": profiled}


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
    """Per faithfulness metric of ``names`` (the timed parameters at ``scale``), after one call
    unprofiled, one call on a fresh batch under each profiler: ``wall_s`` (``torch.profiler``'s
    call), ``device_busy_s`` (CUDA: the kernels' summed time; None on the CPU), ``torch_ops`` (the
    :data:`HOT` torch ops with the most self CPU time, in every thread where torch can:
    ``[name, calls, seconds]``) and ``python`` (the :data:`HOT` functions with the most own time
    under ``cProfile``, every thread: ``[file:line(function), calls, seconds]``; a wait for the
    device shows as the function that waits, e.g. ``tolist``, a wait for a builder thread as a
    lock's ``acquire``)."""
    from _faithfulness_common import make_batch
    from bench_field_faithfulness import METRICS, plans

    x = inputs.to(device)
    out: dict[str, dict[str, Any]] = {}
    for name, params, _ in plans(int(x.shape[-1] * x.shape[-2]), scale):
        if name not in names:
            continue

        def call(name: str = name, params: dict[str, Any] = params) -> None:
            METRICS[name](**params).score(make_batch(model, x, targets, saliency, samples, 16, device))
            sync(device)

        call()  # warm: the device's kernels loaded, the allocator's blocks cached, as in the timed runs
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
    (``[file:line(function), calls, seconds]``), ``python_threads``, how many threads that is, and
    ``python_wall_s``, that call's wall seconds (cProfile slows Python-heavy code: not ``wall_s``)."""
    profilers = [cProfile.Profile()]

    def start_in_new_thread(*_: Any) -> None:  # called once per new thread: cProfile then takes over
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()

    threading.setprofile(start_in_new_thread)
    started = time.perf_counter()
    try:
        profilers[0].runcall(call)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    wall = time.perf_counter() - started
    stats = pstats.Stats(*profilers).stats  # {(file, line, func): (primitive calls, calls, own s, cumul. s, callers)}
    hot = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:HOT]
    return {
        "python": [
            [f"{short(file)}:{line}({func})", int(calls), own] for (file, line, func), (_, calls, own, _, _) in hot
        ],
        "python_threads": len(profilers),
        "python_wall_s": wall,
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
