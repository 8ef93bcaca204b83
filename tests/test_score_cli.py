"""`xaibench score`: the DESIGN 8 JSON shape, oracle values and bad inputs on a folder dataset, and
the same per-sample values as `xaibench run` for the same maps and seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from xaibench import hookimpl
from xaibench.api import Explainer, TrackSpec
from xaibench.cli import main
from xaibench.plugins import manager
from xaibench.runner.explain import explain_track
from xaibench.runner.run import RunConfig, run
from xaibench.runner.track import load_track


def _folder(root: Path, n: int = 3, size: tuple[int, int] = (40, 60)) -> dict[str, np.ndarray]:
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    rng = np.random.default_rng(0)
    masks = {}
    for i in range(n):
        sid = f"img{i}"
        Image.fromarray((rng.random((*size, 3)) * 255).astype(np.uint8)).save(root / "images" / f"{sid}.png")
        mask = np.zeros(size, dtype=np.uint8)
        mask[5 + i : 20 + i, 10 : 30 + 5 * i] = 255
        Image.fromarray(mask).save(root / "masks" / f"{sid}.png")
        masks[sid] = mask > 0
    return masks


def _score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["score", *args])
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def test_score_json_shape_and_oracle_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    masks = _folder(tmp_path / "data")
    maps = tmp_path / "maps"
    maps.mkdir()
    for sid, mask in list(masks.items())[:2]:  # img2 has no explanation: n/a, counted
        np.save(
            maps / f"{sid}.npy", mask.astype(np.float32) + 0.01 * np.arange(mask.size).reshape(mask.shape) / mask.size
        )
    code, out, err = _score(
        capsys, "--dataset", str(tmp_path / "data"), "--explanations", str(maps),
        "--metric", "iou", "--metric", "pointing_game", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert set(result) == {"metrics"}
    iou = result["metrics"]["iou"]
    assert set(iou) == {"mean", "n", "n_na", "per_sample"}
    assert (iou["n"], iou["n_na"]) == (2, 1)
    assert iou["per_sample"] == {"img0": 1.0, "img1": 1.0, "img2": None}
    assert result["metrics"]["pointing_game"]["mean"] == 1.0


def test_score_rejects_a_corrupt_image_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _folder(tmp_path / "data")
    (tmp_path / "data" / "images" / "img1.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    (tmp_path / "maps").mkdir()
    code, _, err = _score(capsys, "--dataset", str(tmp_path / "data"), "--explanations", str(tmp_path / "maps"))
    assert code == 1
    assert err.startswith("error: ") and "img1.png" in err and len(err.strip().splitlines()) == 1


def test_score_rejects_a_mask_of_the_wrong_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _folder(tmp_path / "data")
    Image.fromarray(np.zeros((10, 10), dtype=np.uint8)).save(tmp_path / "data" / "masks" / "img0.png")
    (tmp_path / "maps").mkdir()
    code, _, err = _score(capsys, "--dataset", str(tmp_path / "data"), "--explanations", str(tmp_path / "maps"))
    assert code == 1 and "masks/img0.png" in err and "10x10" in err and "40x60" in err


def test_score_rejects_a_map_that_is_not_2d(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _folder(tmp_path / "data")
    (tmp_path / "maps").mkdir()
    np.save(tmp_path / "maps" / "img0.npy", np.zeros((2, 3, 4)))
    code, _, err = _score(capsys, "--dataset", str(tmp_path / "data"), "--explanations", str(tmp_path / "maps"))
    assert code == 1 and "img0.npy" in err and "2-D" in err


# ----------------------------------------------------------------------------- score == run

CONSTANT = "shapes-test-0002"
# Metrics that need no explainer (score has none): alignment, faithfulness (one seeded with the
# run seed: ROAD with uniform noise) and sparseness.
SHARED = (
    "iou", "pointing_game", "mass_accuracy", "iou_avg", "deletion", "insertion", "average_drop",
    "road_faithfulness_uniform", "sparseness",
)  # fmt: skip


class _Fixed(Explainer):
    """Deterministic maps from the input pixels; a constant map for one sample."""

    name = "fixed-test"
    version = "1.0.0"

    def explain(self, model: Any, inputs: Any, targets: Any, *, seed: int = 0, context: Any = None) -> Any:
        maps = inputs.detach().float().abs().sum(dim=1) + torch.linspace(0.0, 1.0, inputs.shape[-1])
        for j, sample in enumerate(context.samples):
            if sample.id == CONSTANT:
                maps[j] = 1.0
        return maps.numpy()


class _FixedPlugin:
    @hookimpl
    def register_explainers(self, register: Any) -> None:
        register(_Fixed)


def test_score_and_run_give_identical_values_for_identical_maps(
    tmp_path: Path, registry: manager.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    registry.add_plugin(_FixedPlugin(), name="fixed")
    seed, limit = 3, 6
    config = RunConfig(
        explainers=["fixed-test"], tracks=["shapes"], metrics=list(SHARED), seed=seed, limit=limit,
        workdir=tmp_path / "work", progress=False, examples=0,
    )  # fmt: skip
    summary = run(config, registry).summary["tracks"]["shapes"]["explainers"]["fixed-test"]["metrics"]
    lines = (tmp_path / "work" / "results" / "shapes.jsonl").read_text().splitlines()
    ran = {(r["metric"], r["sample_id"]): r["value"] for r in map(json.loads, lines)}
    assert len(ran) == len(SHARED) * limit

    # The same maps as files: the explainer's output on the run's track (the constant one included).
    track = load_track(TrackSpec(name="shapes", dataset="shapes", model="shapes-cnn"), registry, limit=limit)
    ids = [s.id for s in track.samples]
    maps = tmp_path / "maps"
    maps.mkdir()
    explained = explain_track(track, _Fixed(), cache=None, seed=seed)
    assert set(explained.failures) == {CONSTANT}
    for sid, value in explained.values.items():
        np.save(maps / f"{sid}.npy", value)
    np.save(maps / f"{CONSTANT}.npy", np.ones(track.inputs.shape[-2:], dtype=np.float32))

    args = ["--dataset", "shapes", "--model", "shapes-cnn", "--explanations", str(maps), "--seed", str(seed)]
    code, out, err = _score(capsys, *args, *(a for m in SHARED for a in ("--metric", m)), "--json")
    assert code == 0, err
    scored = json.loads(out)["metrics"]
    for metric in SHARED:
        per_sample = scored[metric]["per_sample"]
        assert {sid: per_sample[sid] for sid in ids} == {sid: ran[(metric, sid)] for sid in ids}, metric
        assert per_sample[CONSTANT] is None and ran[(metric, CONSTANT)] is None  # n/a in both
        assert all(v is None for sid, v in per_sample.items() if sid not in ids)  # no file: n/a
        assert sum(v is not None for v in per_sample.values()) == scored[metric]["n"] > 0, metric
        assert (scored[metric]["mean"], scored[metric]["n"]) == (summary[metric]["mean"], summary[metric]["n"])


def test_a_constant_map_of_another_size_is_na_through_score_as_through_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resizing a constant 300 x 300 map to the model's input leaves float noise (about 4e-7);
    it must stay n/a ("constant map"), as the runner makes a constant explainer output, not
    score IoU 0 from a raster-order top-k of an all-zero normalised map."""
    from xaibench.imaging import resize_bilinear

    resized = resize_bilinear(np.full((300, 300), 0.7, dtype=np.float32), (64, 64))
    assert float(resized.max()) != float(resized.min())  # the noise this test is about
    maps = tmp_path / "maps"
    maps.mkdir()
    np.save(maps / "shapes-test-0000.npy", np.full((300, 300), 0.7, dtype=np.float32))
    args = ["--dataset", "shapes", "--model", "shapes-cnn", "--explanations", str(maps), "--metric", "iou"]
    code, out, err = _score(capsys, *args, "--json")
    assert code == 0, err
    iou = json.loads(out)["metrics"]["iou"]
    assert iou["per_sample"]["shapes-test-0000"] is None and iou["n"] == 0
