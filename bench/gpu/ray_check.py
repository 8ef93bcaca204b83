"""``ray``: the Ray executor with one GPU gives records identical to the local executor's.

The same small run (``gradient`` and ``gradcam`` on ``shapes``, ``--limit 8``, ``sparseness`` and
``deletion``) with ``--executor local`` and with ``--executor ray`` on the device; every record's
value, n/a reason, curve, extras and target compared exactly (bench_executors.py's comparison). Ray
needs about 6 s to start. Dry run: ``--limit 2``, one metric, CPU.
"""

from __future__ import annotations

from typing import Any

from .common import Config, goal, records, xaibench_run

FIELDS = ("value", "na_reason", "curve", "extras", "target")


def comparable(out: Any) -> dict[str, tuple[Any, ...]]:
    found = records(out).values()
    return {f"{r['track']}/{r['explainer']['name']}/{r['metric']}/{r['sample_id']}": r for r in found}


def run(cfg: Config) -> dict[str, Any]:
    import ray  # noqa: F401  (the step needs xaibench[ray])

    metrics = ["--metric", "sparseness"] if cfg.dry else ["--metric", "sparseness,deletion"]
    base = ["-e", "gradient,gradcam", "--track", "shapes", "--limit", "2" if cfg.dry else "8", *metrics]
    base += ["--device", cfg.device, "--no-publish"]
    runs = {"local": [*base, "--executor", "local"], "ray": [*base, "--executor", "ray"]}
    seconds = {name: xaibench_run(args, cfg.tmp / f"ray-{name}") for name, args in runs.items()}
    local, ray_ = (comparable(cfg.tmp / f"ray-{name}") for name in runs)
    found = [f"{k}: only in {'local' if k in local else 'ray'}" for k in sorted(local.keys() ^ ray_.keys())]
    for key in sorted(local.keys() & ray_.keys()):
        found += [f"{key} {f}" for f in FIELDS if local[key].get(f) != ray_[key].get(f)]
    return {
        "figures": {
            "local_run_s": seconds["local"],
            "ray_run_s": seconds["ray"],
            "records": len(local),
            "differences": len(found),
        },
        "goals": {"identical_records": goal(len(found), "==", 0), "has_records": goal(len(local), ">=", 1)},
        "differences": found[:200],
    }
