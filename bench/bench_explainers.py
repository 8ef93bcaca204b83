"""Explainer cost table: milliseconds per image on the default tracks.

Tracks: ``shapes`` (the shapes CNN, 64 px) and ``photos`` (EfficientNet-Lite0, 224 px, the
photos that installed packages ship). Every explainer of the registry (built-ins and the
installed plugin distributions) runs with its default parameters in batches of the
runner's size (16). A first call on one image is made and reported separately (it pays
for library imports and one-time set-up), then the whole track is timed once.

Columns: wall and CPU milliseconds per image per track; ``x grad`` is the photos cost
relative to the built-in ``gradient`` explainer (one forward and one backward pass)
measured in the same run, a ratio that survives a busy machine; ``suite s`` estimates
the explainer's share of a cold default-suite run: ``first call + ms/image x images``
over the suite's tracks (two shapes tracks of ``--shapes`` images, one photos track of
``--photos`` images).

    .venv/bin/python bench/bench_explainers.py [--shapes 64] [--photos 8] [--threads 1] [--only gradcam,rise]

``--threads`` sets torch's intra-op threads (default 1): on a machine shared with other
jobs, two OpenMP threads spin-wait and inflate both wall and CPU time several-fold. The
runner uses torch's default (all cores); on an idle 2-core machine expect wall times
about 1.5x lower than the 1-thread numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from xaibench.api import ExplainContext, Model, Sample
from xaibench.plugins.manager import Registry

BATCH = 16


@dataclass
class Track:
    name: str
    model: Model
    samples: list[Sample]
    inputs: torch.Tensor
    targets: np.ndarray


def load_track(registry: Registry, name: str, dataset: str, model: str, limit: int, **model_params) -> Track:
    m = registry.create("model", model, **model_params)
    ds = registry.create("dataset", dataset)
    samples = list(ds.samples(limit=limit))
    inputs = m.preprocess([s.image for s in samples])
    with torch.no_grad():
        targets = m.module(inputs).argmax(dim=1).numpy()
    return Track(name, m, samples, inputs, targets)


def time_explainer(registry: Registry, name: str, track: Track) -> tuple[float, float, float]:
    """(first-call seconds on one image, wall ms per image and CPU ms per image over the whole
    track). CPU time counts every thread; it is steadier than wall time on a busy machine."""
    explainer = registry.create("explainer", name, materialise=True)  # timed in this process
    t0 = time.perf_counter()
    explainer.explain(
        track.model, track.inputs[:1].clone(), track.targets[:1], seed=0, context=ExplainContext(track.samples[:1])
    )
    first = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(track.samples), BATCH):
        sl = slice(start, start + BATCH)
        maps = explainer.explain(
            track.model, track.inputs[sl].clone(), track.targets[sl], seed=0, context=ExplainContext(track.samples[sl])
        )
        if not np.isfinite(np.asarray(maps, dtype=np.float64)).all():
            print(f"warning: {name} returned non-finite values on {track.name}", file=sys.stderr)
    n = len(track.samples)
    return first, 1000 * (time.perf_counter() - t0) / n, 1000 * (time.process_time() - c0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", type=int, default=64, help="images on the shapes track (default 64)")
    parser.add_argument("--photos", type=int, default=8, help="images on the photos track (default 8)")
    parser.add_argument("--only", default="", help="comma-separated explainer names (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    registry = Registry()
    broken = [f"{p.name}: {p.error}" for p in registry.plugins.values() if not p.ok]
    for line in broken:
        print(f"plugin not loaded: {line}", file=sys.stderr)
    names = [n for n in registry.names("explainer") if n not in ("oracle", "gradient")]
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        names = [n for n in names if n in wanted]
    names = ["gradient", *names]  # the reference for the "x grad" column

    t0 = time.perf_counter()
    shapes = load_track(registry, "shapes", "shapes", "shapes-cnn", args.shapes, variant="shapes")
    photos = load_track(registry, "photos", "photos", "efficientnet-lite0", args.photos)
    print(
        f"torch threads {torch.get_num_threads()}; shapes {len(shapes.samples)} x {shapes.model.input_size} px, "
        f"photos {len(photos.samples)} x {photos.model.input_size} px; "
        f"tracks loaded in {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    n_suite = {"shapes": 2 * args.shapes, "photos": args.photos}
    for track in (shapes, photos):  # warm-up (allocator, kernels) so the first row is not penalised
        time_explainer(registry, "gradient", track)

    header = (
        f"{'explainer':22s} {'distribution':17s} {'first s':>7s} {'shapes ms/img':>13s} {'(cpu)':>7s} "
        f"{'photos ms/img':>13s} {'(cpu)':>8s} {'x grad':>7s} {'suite s':>7s}"
    )
    print(header)
    print("-" * len(header))
    total = 0.0
    reference = 1.0
    for name in names:
        info = registry.info("explainer", name)
        if registry.entry("explainer", name).cls.kind != "saliency":
            print(f"{name:22s} {info.distribution:17s} (concept explainer: needs a concept model; not timed)")
            continue
        wall, cpu = {}, {}
        first_total = 0.0
        try:
            for track in (shapes, photos):
                first, wall[track.name], cpu[track.name] = time_explainer(registry, name, track)
                first_total = max(first_total, first)
        except Exception as exc:  # noqa: BLE001 - an explainer that does not apply to a track is reported, not fatal
            print(f"{name:22s} {info.distribution:17s} (not applicable: {str(exc)[:70]})")
            continue
        suite = first_total + sum(wall[t] * n_suite[t] for t in wall) / 1000
        total += suite
        if name == "gradient":
            reference = wall["photos"]
        print(
            f"{name:22s} {info.distribution:17s} {first_total:7.2f} {wall['shapes']:13.1f} {cpu['shapes']:7.1f} "
            f"{wall['photos']:13.1f} {cpu['photos']:8.1f} {wall['photos'] / reference:7.1f} {suite:7.1f}",
            flush=True,
        )
    print("-" * len(header))
    print(
        f"estimated explainer time of a cold default-suite run ({n_suite['shapes']} shapes images over two tracks, "
        f"{n_suite['photos']} photos): {total:.0f} s; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
