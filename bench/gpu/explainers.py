"""``explainers``: every explainer of the built-ins and of the captum, gradcam, rise and zennit
distributions on the device, ``--limit 8``, scored with ``sparseness`` only (cheap: the point is
the maps): the saliency explainers on tracks ``shapes`` and ``photos``, the references that need
the ground truth (``oracle``, ``ladder``, ``planted``) on ``shapes-shortcut`` (photos have no masks,
shapes no planted cue), the concept explainers on the concept-bottleneck model ``shapes-cbm``, and
``attention-rollout`` on the ``vit`` suite.

Goals: no explainer failed on a batch (the summary's ``explained.failed``), no record is n/a for an
error, and no host copies on the hot path: one call per explainer on a batch of photos under
``torch.profiler`` counts the device-to-host copies (``Memcpy DtoH``); a few are allowed (the final
copy of the maps, ``targets.tolist()``, a scalar or two): at most ``MAX_DTOH`` per call. Without CUDA
the profile is reported as skipped. Dry run: ``--limit 2``, shapes only, a few explainers (and ``concept-linear``), CPU.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

from .common import Config, dtoh_copies, env, goal, records, xaibench_run

DISTRIBUTIONS = ("xaibench", "xaibench-captum", "xaibench-gradcam", "xaibench-rise", "xaibench-zennit")
DRY_EXPLAINERS = ["gradient", "sobel", "oracle", "saliency", "gradcam", "scorecam", "rise", "zennit-lrp"]
DRY_CONCEPT = ["concept-linear"]
MAX_DTOH = 8


def explainer_names() -> dict[str, str]:
    """Name -> kind (``saliency``, ``concept``; ``reference`` for one that needs the ground truth) of
    every explainer of ``DISTRIBUTIONS``."""
    listed = subprocess.run(
        [sys.executable, "-m", "xaibench", "list", "explainers", "--json"],
        env=env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        e["name"]: "reference" if "ground_truth" in e["needs"] else e["kind"]
        for e in json.loads(listed.stdout)
        if e["distribution"] in DISTRIBUTIONS
    }


def host_copies(names: list[str], cfg: Config) -> dict[str, Any]:
    """Per explainer, the DtoH copies of one call on 8 photos (the first call warms up, unprofiled)."""
    if not cfg.cuda:
        return {"skipped": "no CUDA"}
    from bench_explainers import load_track

    from xaibench.api import ExplainContext
    from xaibench.plugins.manager import Registry

    registry = Registry()
    track = load_track(registry, "photos", "photos", "efficientnet-lite0", 8)
    track.model.module.to(cfg.device)
    x = track.inputs.to(cfg.device)
    counts: dict[str, Any] = {}
    for name in names:
        if registry.entry("explainer", name).cls.kind != "saliency":
            continue
        explainer = registry.create("explainer", name, materialise=True)  # timed here, in this process

        def call(explainer: Any = explainer) -> Any:
            return explainer.explain(
                track.model, x.clone(), track.targets, seed=0, context=ExplainContext(track.samples)
            )

        try:
            call()
            counts[name] = dtoh_copies(call)
        except Exception as exc:  # noqa: BLE001  (one explainer failing is a finding, not a crash of the step)
            counts[name] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return counts


def failures(out: Any) -> tuple[int, int, list[str]]:
    """(failed batches per the summary, n/a records from errors, examples) of one run's folder."""
    summary = json.loads((out / ".xaibench" / "summary.json").read_text(encoding="utf-8"))
    failed, examples = 0, []
    for track, entry in summary["tracks"].items():
        for name, ex in entry["explainers"].items():
            n = ex["explained"]["failed"]
            failed += n
            if n:
                examples.append(f"{track}/{name}: {n} failed")
    errors = 0
    for r in records(out).values():
        reason = r.get("na_reason") or ""
        bad_value = r["value"] is not None and not math.isfinite(r["value"])
        if "error" in reason.lower() or "fail" in reason.lower() or bad_value:
            errors += 1
            if len(examples) < 40:
                examples.append(f"{r['track']}/{r['explainer']['name']}/{r['sample_id']}: {reason or r['value']}")
    return failed, errors, examples


def runs(cfg: Config) -> tuple[list[str], dict[str, list[str]]]:
    """(the saliency explainers, the runs): saliency explainers on shapes and photos; the references
    that need the ground truth on shapes-shortcut only (masks and a planted cue); concept explainers
    on the concept-bottleneck model ``shapes-cbm`` (any other model refuses them);
    ``attention-rollout`` on the ``vit`` suite."""
    device = ["--device", cfg.device, "--metric", "sparseness", "--limit", "2" if cfg.dry else "8"]
    if cfg.dry:
        saliency, concept = DRY_EXPLAINERS, DRY_CONCEPT
    else:
        kinds = explainer_names()
        saliency = [n for n, k in kinds.items() if k == "saliency"]
        references = [n for n, k in kinds.items() if k == "reference"]
        concept = [n for n, k in kinds.items() if k == "concept"]
    found = {"saliency": ["-e", ",".join(saliency), "--track", "shapes", *device]}
    found["concept"] = ["-e", ",".join(concept), "--model", "shapes-cbm", "--dataset", "shapes", *device]
    if not cfg.dry:
        found["saliency"] += ["--track", "photos"]
        found["references"] = ["-e", ",".join(references), "--track", "shapes-shortcut", *device]
        found["vit"] = ["-e", "attention-rollout", "--suite", "vit", *device]
    return saliency, found


def run(cfg: Config) -> dict[str, Any]:
    names, planned = runs(cfg)
    figures: dict[str, float] = {}
    examples: list[str] = []
    for label, args in planned.items():
        out = cfg.tmp / f"explainers-{label}"
        figures[f"{label}_run_s"] = xaibench_run(args, out)
        failed, errors, found = failures(out)
        figures[f"{label}_failed_batches"] = failed
        figures[f"{label}_error_records"] = errors
        figures[f"{label}_records"] = len(records(out))
        examples += found
    copies = host_copies(names, cfg)
    counted = {k: v for k, v in copies.items() if isinstance(v, int)}
    goals = {
        "no_failed_batches": goal(sum(v for k, v in figures.items() if k.endswith("_failed_batches")), "==", 0),
        "no_error_records": goal(sum(v for k, v in figures.items() if k.endswith("_error_records")), "==", 0),
    }
    if counted:
        figures["max_dtoh_copies_per_call"] = max(counted.values())
        goals["host_copies"] = goal(max(counted.values()), "<=", MAX_DTOH)
        goals["profiled_all"] = goal(len(copies) - len(counted), "==", 0)
    return {"runs": planned, "figures": figures, "goals": goals, "dtoh_copies": copies, "problems": examples}
