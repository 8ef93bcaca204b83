"""Small synthetic submission files for the site tests (written by the tests, no benchmark run).

Two tracks, six explainers, hand-picked means so that sort orders and ties are known:
``alpha`` is best, ``oracle`` is a reference, ``tuned-net`` discloses tuning on the benchmark,
and ``evil`` carries HTML and script in every string it controls.

Per-sample values (``samples``) are ``mean + NOISE[i]``, the same noise for every explainer, so a
paired difference is constant and significant unless it is 0; only ``gamma``'s ``iou`` adds
``+-GAMMA_SWING`` in turn, so ``beta`` (0.41) and ``gamma`` (0.40) tie on ``iou`` (their paired
differences are -0.09 and +0.11, and the 95 % interval of their mean 0.01 contains 0).
The pasta metrics come from a proxy checkpoint (held-out Q1 Spearman -0.23), so the perceptual
family is shown but not ranked; ``model_randomisation`` flags ``oracle`` and ``evil``
(mean > 0.5); ``insertion`` on ``synth-b`` has values for 6 of 10 samples only (too few to rank,
and 40 % n/a); ``alpha`` passed verification and ``beta`` and ``evil`` failed it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.pasta.render import render_overlay
from xaibench.publish.examples import jpeg_bytes
from xaibench.seeds import derive_seed
from xaibench.stats import bootstrap_ci

EVIL_NAME = "<script>window.__pwned=1</script>"
EVIL_PARAM = "<img src=x onerror=window.__pwned=2>"
EVIL_NOTES = "</script><script>window.__pwned=3</script>\"'><svg onload=window.__pwned=4>"
EVIL_SAMPLE = "<b onmouseover=window.__pwned=5>s</b>"

# metric id -> (family, direction, ranking)
METRICS: dict[str, tuple[str, str, bool]] = {
    "iou": ("alignment", "higher", True),
    "mae": ("alignment", "lower", True),
    "deletion": ("faithfulness", "lower", True),
    "insertion": ("faithfulness", "higher", True),
    "pasta_q1": ("perceptual", "higher", True),
    "pasta_q5": ("perceptual", "lower", False),
    "sparseness": ("other", "higher", False),
    "model_randomisation": ("sanity", "lower", False),
}
N_SAMPLES = 10
# explainer -> metric -> mean on track "synth-a" (track "synth-b" uses 1 - mean for iou, same otherwise)
MEANS: dict[str, dict[str, float | None]] = {
    "alpha": {"iou": 0.62, "mae": 0.20, "deletion": 0.10, "insertion": 0.70, "pasta_q1": 3.9, "sparseness": 0.55},
    "beta": {"iou": 0.41, "mae": 0.31, "deletion": 0.22, "insertion": 0.52, "pasta_q1": 3.1, "sparseness": 0.40},
    "gamma": {"iou": 0.40, "mae": 0.45, "deletion": 0.35, "insertion": 0.33, "pasta_q1": 2.2, "sparseness": None},
    "oracle": {"iou": 0.95, "mae": 0.05, "deletion": 0.30, "insertion": 0.40, "pasta_q1": 2.9, "sparseness": 0.90},
    "tuned-net": {"iou": 0.70, "mae": 0.15, "deletion": 0.12, "insertion": 0.66, "pasta_q1": 3.5, "sparseness": 0.60},
    "evil": {"iou": 0.10, "mae": 0.60, "deletion": 0.50, "insertion": 0.20, "pasta_q1": 1.5, "sparseness": 0.20},
}
# Shown-only perceptual and sanity metrics (the same on both tracks).
PASTA_Q5 = {"alpha": 2.0, "beta": 2.4, "gamma": 3.1, "oracle": 1.6, "tuned-net": 2.2, "evil": 4.0}
RANDOMISATION = {"alpha": 0.10, "beta": 0.20, "gamma": -0.10, "oracle": 0.95, "tuned-net": 0.15, "evil": 0.70}
for _name, _means in MEANS.items():
    _means.update(pasta_q5=PASTA_Q5[_name], model_randomisation=RANDOMISATION[_name])
SEED = 0  # the run seed recorded; intervals are the seeded bootstrap of the values, as a run writes them
NOISE = (-0.02, 0.02, -0.01, 0.01, -0.03, 0.03, 0.02, -0.01, -0.01, 0.0)  # sums to 0 over 6, 9 and 10 samples
GAMMA_SWING = 0.1
PROXY_LABEL = "PASTA (proxy, technique-level labels)"
HELDOUT_Q1_SPEARMAN = -0.23
BLOCKS = 4  # parameter blocks of the model_randomisation cascade
# explainer -> the submission's "verification" (others: none)
VERIFICATION: dict[str, dict[str, Any]] = {
    "alpha": {
        "verified_at": "2026-01-02T03:04:05+00:00",
        "checked": 5,
        "matched": 5,
        "tolerance": 1e-6,
        "passed": True,
        "xaibench": "0.1.0",
    },
    "beta": {
        "verified_at": "2026-01-03T00:00:00+00:00",
        "checked": 5,
        "matched": 3,
        "tolerance": 1e-6,
        "passed": False,
        "xaibench": "0.1.0",
    },
    "evil": {
        "verified_at": "2026-01-04T00:00:00+00:00",
        "checked": 2,
        "matched": 1,
        "tolerance": 1e-6,
        "passed": False,
        "xaibench": EVIL_NAME,
    },
}


def _samples(metric: str, mean: float | None, n: int, swing: bool) -> dict[str, float | None]:
    """``mean + NOISE[i]`` (+- ``GAMMA_SWING`` in turn when ``swing``) for the first ``n`` samples, then null."""
    out: dict[str, float | None] = {}
    for i in range(N_SAMPLES):
        if mean is None or i >= n:
            out[f"s{i:02d}"] = None
        else:
            value = mean + NOISE[i] + (GAMMA_SWING * (1 if i % 2 == 0 else -1) if swing else 0.0)
            out[f"s{i:02d}"] = round(value, 6)
    return out


def _metric(metric: str, mean: float | None, n_na: int, *, label: str, swing: bool = False) -> dict[str, Any]:
    """A metric block whose interval is the runner's seeded bootstrap (seed ``SEED``) of its values."""
    family, direction, ranking = METRICS[metric]
    n = 0 if mean is None else N_SAMPLES - n_na
    samples = _samples(metric, mean, n, swing)
    low, high = bootstrap_ci([v for v in samples.values() if v is not None], derive_seed(SEED, "bootstrap", label))
    params: dict[str, Any] = {}
    if metric.startswith("pasta_"):
        params = {"question": metric[-2:].upper(), "label": PROXY_LABEL, "heldout_q1_spearman": HELDOUT_Q1_SPEARMAN}
    block: dict[str, Any] = {
        "id": metric,
        "version": "1.0.0",
        "family": family,
        "direction": direction,
        "params": params,
        "ranking": ranking,
        "mean": mean,
        "ci_low": None if mean is None else low,
        "ci_high": None if mean is None else high,
        "n": n,
        "n_na": N_SAMPLES - n,
        "na_reasons": {"empty ground truth": N_SAMPLES - n} if n < N_SAMPLES else {},
        "forward_passes_per_sample": 0.0,
        "samples": samples,
    }
    if mean is not None and 0 <= mean <= 1:
        counts = [0] * 10
        counts[min(int(mean * 10), 9)] = n
        block["histogram"] = {
            "edges": [k / 10 for k in range(11)],
            "counts": counts,
            "quantiles": [mean - 0.1, mean - 0.05, mean, mean + 0.05, mean + 0.1],
        }
    if metric in ("deletion", "insertion") and mean is not None:
        x = np.linspace(0, 1, 11)
        y = (1 - x) * (2 * mean) if metric == "deletion" else np.minimum(1.0, x * 2 * mean + 0.1)
        y = np.clip(y, 0, 1)
        block["curve"] = {
            "fraction": x.tolist(),
            "mean": y.tolist(),
            "q25": np.clip(y - 0.05, 0, 1).tolist(),
            "q75": np.clip(y + 0.05, 0, 1).tolist(),
            "n": n,
        }
    if metric == "model_randomisation" and mean is not None:
        # The cascade: randomising more blocks (output first) takes |E| from the original (1) down to the mean.
        fraction = [k / BLOCKS for k in range(1, BLOCKS + 1)]
        y = [round(1 - (1 - mean) * f, 6) for f in fraction]
        block["curve"] = {
            "fraction": fraction,
            "mean": y,
            "q25": [round(max(v - 0.05, -1.0), 6) for v in y],
            "q75": [round(min(v + 0.05, 1.0), 6) for v in y],
            "n": n,
        }
    return block


def submission(name: str, folder: Path, *, examples: bool = True) -> dict[str, Any]:
    """One synthetic submission (and its overlay JPEGs under ``folder/assets``)."""
    evil = name == "evil"
    shown = EVIL_NAME if evil else name
    params = {"strength": 1, "label": EVIL_PARAM} if evil else {"strength": 1}
    tracks: dict[str, Any] = {}
    for track in ("synth-a", "synth-b"):
        metrics = {}
        for metric, mean in MEANS[name].items():
            if track == "synth-b" and metric == "iou" and mean is not None:
                mean = round(1 - mean, 6)
            n_na = 1 if (name == "gamma" and metric == "mae") else 0
            if track == "synth-b" and metric == "insertion":
                n_na = 4  # 6 shared samples: too few to rank, and 40 % n/a
            label = f"{track}/{shown}/{metric}"
            metrics[metric] = _metric(metric, mean, n_na, label=label, swing=name == "gamma" and metric == "iou")
        block: dict[str, Any] = {
            "provenance": {
                "track": track,
                "synthetic": True,
                "dataset": {"name": "shapes", "revision": "rev-" + track, "params": {}},
                "model": {"name": "shapes-cnn", "identity": "shapes-cnn@test", "params": {}},
                "target": "predicted",
                "n_samples": N_SAMPLES,
            },
            "explained": {"computed": N_SAMPLES, "cached": 0, "failed": 0},
            "explain_seconds": 0.5,
            "metrics": metrics,
        }
        if examples:
            rng = np.random.default_rng(len(name))
            items = []
            for k in range(2):
                sample = EVIL_SAMPLE if evil and k == 0 else f"{track}-{k:04d}"
                data = jpeg_bytes(render_overlay(rng.random((24, 24, 3)), rng.random((24, 24)), size=48))
                rel = f"assets/{name}@abc/{track}/{k}-s{k}.jpg"
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
                items.append(
                    {
                        "sample_id": sample,
                        "target": k,
                        "target_name": EVIL_PARAM if evil else f"class {k}",
                        "render": "xaibench-jet-overlay/1",
                        "jpeg": rel,
                        "sha256": hashlib.sha256(data).hexdigest(),
                    }
                )
            block["examples"] = items
        tracks[track] = block
    data: dict[str, Any] = {
        "schema": "xaibench.submission/1",
        "explainer": {
            "name": shown,
            "version": "1.0.0",
            "kind": "saliency",
            "params": params,
            "params_digest": "abc",
            "distribution": EVIL_NAME if evil else "test-dist",
            "distribution_version": "0.0.1",
            "reference_only": name == "oracle",
            "tuned_on_benchmark": name == "tuned-net",
        },
        "disclosure": {
            "tuned_on_benchmark": name == "tuned-net",
            "reference_only": name == "oracle",
            "notes": EVIL_NOTES if evil else "",
        },
        "created": "2026-01-01T00:00:00+00:00",
        "environment": {
            "xaibench": "0.1.0",
            "python": "3.11",
            "torch": "2",
            "platform": EVIL_PARAM if evil else "linux",
        },
        "plugins": [
            {"name": EVIL_NAME if evil else "builtin", "distribution": "xaibench", "version": "0.1.0", "ok": True}
        ],
        "seed": SEED,
        "suite": "synthetic",
        "tracks": tracks,
    }
    if name in VERIFICATION:
        data["verification"] = dict(VERIFICATION[name])
    return data


def write_submissions(folder: Path, names: tuple[str, ...] = tuple(MEANS)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(submission(name, folder), indent=2) + "\n", encoding="utf-8")
    return folder
