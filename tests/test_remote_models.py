"""Issue 25: a third-party model or encoder is built in a sandboxed worker; the runner holds a proxy.

The runner never imports the distribution: it gets the model's attributes as data, and its
preprocessing and forward passes (the faithfulness metrics' perturbed images) are requests to the
worker. The records are those of the same model class registered in the runner, sanity check
included (its blocks come from the parameter paths the worker reports). A model whose import
patches xaibench changes only its own workers; one whose constructor exits, raises or loops is one
line, and the run goes on. An encoder answers embeddings the same way.
"""

from __future__ import annotations

import json
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests._distributions import records_by_key, without_distribution, write_distribution
from xaibench.errors import XaibenchError
from xaibench.plugins import catalogue, manager
from xaibench.randomisation import parameter_blocks
from xaibench.runner import evaluate
from xaibench.runner.isolation import component_worker
from xaibench.runner.run import RunConfig, resolve_tracks, run
from xaibench.suites.adhoc import adhoc_track

# A small CNN with a preprocessing of its own (48 px, its own normalisation); ``width`` is the
# main parameter. Its weights come from a generator seeded by ``seed``.
TINY = """
import hashlib

import numpy as np
import torch
from torch import nn

from xaibench import hookimpl
from xaibench.api import Encoder, Model


class Tiny(Model):
    name = "NAME"
    version = "1.0"
    description = "a small CNN on 48 px"
    synthetic = True
    input_size = 48
    mean = (0.4, 0.5, 0.6)
    std = (0.2, 0.25, 0.3)
    target_layers = ("body.0",)

    def __init__(self, width=4, seed=0):
        BEFORE
        width, seed = int(width), int(seed)
        generator = torch.Generator().manual_seed(seed)
        self.module = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU()),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(4 * width, 3),
        ).eval()
        with torch.no_grad():
            for p in self.module.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in self.module.parameters()))
        self._identity = f"tiny-w{width}@{digest.hexdigest()[:12]}"
        self.label_names = ("x", "y", "z")
        self.weights_source = f"random(seed={seed})"

    @property
    def identity(self):
        return self._identity


class Sums(Encoder):
    name = "sums-NAME"
    version = "1.0"
    modalities = ("image", "text")

    @property
    def identity(self):
        return "sums-1"

    def encode_images(self, images):
        images = np.asarray(images, dtype=np.float32)
        return np.stack([images.mean(axis=(1, 2, 3)), images[..., 0].std(axis=(1, 2))], axis=1)

    def encode_texts(self, texts):
        return np.array([[len(t), t.count("a")] for t in texts], dtype=np.float32)


@hookimpl
def register_models(register):
    register(Tiny)


@hookimpl
def register_encoders(register):
    register(Sums)
"""

# What a hostile model's module does at import: halve every metric value the runner scores.
PATCH = """
import xaibench.runner.evaluate as evaluate

_score_batch = evaluate.score_batch


def _halved(metric, batch, kind):
    out = _score_batch(metric, batch, kind)
    out.values = [v / 2 for v in out.values]
    return out


evaluate.score_batch = _halved
"""

METRICS = ["iou", "deletion", "model_randomisation"]


def _code(name: str, before: str = "pass", prefix: str = "") -> str:
    return prefix + textwrap.dedent(TINY).replace("NAME", name).replace("BEFORE", before)


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("XAIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate, "score_batch", evaluate.score_batch)  # restored, whatever imported a plugin
    monkeypatch.setattr(manager, "remote_builders", {})  # installed by the run, for this test only
    return folder


def _registry(monkeypatch: pytest.MonkeyPatch, *, entry_points: bool = True) -> manager.Registry:
    registry = manager.Registry(load_entry_points=entry_points)
    monkeypatch.setattr(manager, "_REGISTRY", registry)
    return registry


def _config(workdir: Path, tracks: list[Any], metrics: list[str] = METRICS, **more: Any) -> RunConfig:
    return RunConfig(
        explainers=["gradient"],
        suite_tracks=tracks,
        metrics=metrics,
        limit=3,
        workdir=workdir,
        progress=False,
        examples=0,
        device="cpu",
        **more,
    )


def _tiny_track(model: str = "tiny") -> Any:
    return adhoc_track(f"{model}:5", "shapes", name="tiny-track")


def test_a_model_of_a_distribution_runs_in_a_worker_with_the_records_of_the_same_class_in_process(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _code("tiny")
    write_distribution(site, "xb-tiny", "xb_tiny", code)
    monkeypatch.delitem(sys.modules, "xb_tiny", raising=False)
    registry = _registry(monkeypatch)
    cls = registry.entry("model", "tiny").cls
    assert manager.remote_distribution(cls) == "xb-tiny" and cls.synthetic is True
    with pytest.raises(catalogue.StandInError):
        _ = registry.create("model", "tiny").identity  # no builder installed: the stand-in itself
    with pytest.raises(XaibenchError, match="model 'tiny': got an unexpected keyword argument 'depth'"):
        registry.create("model", "tiny", depth=3)
    run(_config(tmp_path / "remote", [_tiny_track()]), registry)
    assert "xb_tiny" not in sys.modules  # described in a probe, built in its workers: never imported here

    local = types.ModuleType("tiny_in_process")
    exec(compile(code, "tiny_in_process.py", "exec"), local.__dict__)
    control = _registry(monkeypatch, entry_points=False)
    control.add_plugin(local, name="tiny-in-process")
    run(_config(tmp_path / "local", [_tiny_track()]), control)

    remote, here = records_by_key(tmp_path / "remote", "tiny-track"), records_by_key(tmp_path / "local", "tiny-track")
    assert len(remote) == 9  # 3 samples x 3 metrics
    assert without_distribution(remote) == without_distribution(here)
    rho = [r["value"] for r in remote.values() if r["metric"] == "model_randomisation"]
    assert len(rho) == 3 and all(v is not None for v in rho)  # the sanity check ran, on the worker's blocks
    summaries = [json.loads((tmp_path / w / "summary.json").read_text()) for w in ("remote", "local")]
    provenance = [without_distribution(s["tracks"]["tiny-track"]["provenance"]) for s in summaries]
    assert provenance[0] == provenance[1]
    assert provenance[0]["model"]["identity"].startswith("tiny-w5@")
    assert provenance[0]["model"]["weights"] == "random(seed=0)"


def test_the_proxy_answers_as_the_model_and_a_forward_that_fails_is_one_line(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_distribution(site, "xb-tiny2", "xb_tiny2", _code("tiny2"))
    registry = _registry(monkeypatch)
    component_worker.install()
    proxy = registry.create("model", "tiny2", width=3)
    assert isinstance(proxy, component_worker.RemoteModel)
    local = types.ModuleType("tiny2_here")
    exec(compile(_code("tiny2"), "tiny2_here.py", "exec"), local.__dict__)
    real = local.Tiny(width=3)
    assert proxy.identity == real.identity and proxy.input_size == 48
    assert proxy.mean == (0.4, 0.5, 0.6) and proxy.std == (0.2, 0.25, 0.3)
    assert proxy.label_names == ("x", "y", "z") and proxy.target_layers == ("body.0",)
    assert parameter_blocks(proxy.module, 5) == parameter_blocks(real.module, 5) == [["3"], ["0.0"]]
    images = [np.random.default_rng(i).integers(0, 256, (40, 30, 3), dtype=np.uint8) for i in range(3)]
    x = proxy.preprocess(images)
    assert torch.equal(x, real.preprocess(images))
    with torch.no_grad():
        assert torch.equal(proxy.module(x), real.module(x))
        last = x.contiguous(memory_format=torch.channels_last)
        assert torch.equal(proxy.module(last), real.module(last))
    with pytest.raises(XaibenchError) as info:
        proxy.module(torch.zeros(2, 5, 48, 48))  # five channels: the plugin's conv raises, in the worker
    assert str(info.value).startswith("model 'tiny2' of distribution xb-tiny2: forward raised RuntimeError")
    assert "\n" not in str(info.value)
    assert proxy.module(x).shape == (3, 3)  # the worker is still there
    worker = proxy.worker
    proxy.close()
    assert worker.process is not None and worker.process.poll() is not None
    with pytest.raises(XaibenchError, match="model worker was closed"):
        proxy.module(x)
    assert "xb_tiny2" not in sys.modules


@pytest.mark.parametrize(
    ("before", "said"),
    [
        ("import os; os._exit(0)", "model worker exited with status 0"),
        ("raise RuntimeError('no weights')", "could not be built: RuntimeError: no weights"),
        ("while True: pass", "model worker timed out after 12 s"),
    ],
    ids=["os-exit", "raises", "loops"],
)
def test_a_model_that_breaks_in_its_worker_is_one_line_and_the_run_goes_on(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, before: str, said: str
) -> None:
    write_distribution(site, "xb-broken-model", "xb_broken_model", _code("broken", before=before))
    monkeypatch.setattr(component_worker, "START_SECONDS", 0.0)
    registry = _registry(monkeypatch)
    shapes = resolve_tracks(registry, "default", ["shapes"])
    result = run(_config(tmp_path / "w", [_tiny_track("broken"), *shapes], ["iou"], timeout=12), registry)
    error = result.summary["tracks"]["tiny-track"]["error"]
    assert error == f"model 'broken' of distribution xb-broken-model: {said}"
    assert len(records_by_key(tmp_path / "w", "shapes")) == 3
    assert "xb_broken_model" not in sys.modules


def test_a_model_whose_import_patches_the_runner_leaves_the_other_tracks_records_unchanged(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_distribution(site, "xb-patchy-model", "xb_patchy_model", _code("patchy", prefix=PATCH))
    monkeypatch.delitem(sys.modules, "xb_patchy_model", raising=False)
    registry = _registry(monkeypatch)
    shapes = resolve_tracks(registry, "default", ["shapes"])
    metrics = ["iou", "deletion"]
    run(_config(tmp_path / "clean", shapes, metrics), registry)
    run(_config(tmp_path / "both", [_tiny_track("patchy"), *shapes], metrics), registry)
    assert "xb_patchy_model" not in sys.modules
    clean, both = records_by_key(tmp_path / "clean", "shapes"), records_by_key(tmp_path / "both", "shapes")
    assert len(clean) == 6 and both == clean
    assert len(records_by_key(tmp_path / "both", "tiny-track")) == 6


def test_an_encoder_of_a_distribution_embeds_in_its_worker(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_distribution(site, "xb-sums", "xb_sums", _code("s"))
    registry = _registry(monkeypatch)
    assert manager.remote_distribution(registry.entry("encoder", "sums-s").cls) == "xb-sums"
    component_worker.install()
    encoder = registry.create("encoder", "sums-s")
    assert isinstance(encoder, component_worker.RemoteEncoder) and encoder.worker.process is None  # lazy
    assert encoder.modalities == ("image", "text")
    assert encoder.unavailable() is None and encoder.identity == "sums-1"
    images = np.random.default_rng(0).integers(0, 256, (70, 8, 8, 3), dtype=np.uint8)  # two requests
    as_float = images.astype(np.float32)
    expected = np.stack([as_float.mean(axis=(1, 2, 3)), as_float[..., 0].std(axis=(1, 2))], axis=1)
    np.testing.assert_array_equal(encoder.encode_images(images), expected)
    np.testing.assert_array_equal(encoder.encode_texts(["banana", "kiwi"]), [[6, 3], [4, 0]])
    encoder.close()
    assert "xb_sums" not in sys.modules
