"""Ad-hoc tracks from the command line (issue 15, item 1): `xaibench run -e gradient --model
timm:resnet18 --model-param checkpoint=PATH --dataset folder:PATH` runs offline on a folder with
masks and a checkpoint of random weights. The helpers here are shared with test_hf_dataset.py
and test_toml_suites.py."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from xaibench.api import TrackSpec
from xaibench.cli import _split_pairs, main
from xaibench.errors import XaibenchError
from xaibench.runner.run import resolve_tracks
from xaibench.suites.adhoc import adhoc_track, main_parameter, split_component, track_name

SIZE = 40  # small images: the model resizes them to its input size anyway
METRICS = "iou,deletion"  # one alignment metric (reads the masks) and one faithfulness metric (runs the model)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def mask_array(i: int) -> np.ndarray:
    """A binary 0/255 mask: a rectangle that moves with ``i``."""
    mask = np.zeros((SIZE, SIZE), dtype=np.uint8)
    mask[6 + i : 26 + i, 8 : 30 - i] = 255
    return mask


def image_array(i: int) -> np.ndarray:
    return (np.random.default_rng(i).random((SIZE, SIZE, 3)) * 255).astype(np.uint8)


def make_folder(root: Path, n: int = 3) -> Path:
    """A folder dataset (folder.py's layout): images/<id>.png and masks/<id>.png."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for i in range(n):
        Image.fromarray(image_array(i)).save(root / "images" / f"s{i}.png")
        Image.fromarray(mask_array(i)).save(root / "masks" / f"s{i}.png")
    return root


def make_checkpoint(path: Path) -> Path:
    """A timm resnet18 state dict with random weights."""
    import timm
    import torch

    torch.manual_seed(0)
    torch.save(timm.create_model("resnet18", pretrained=False).state_dict(), path)
    return path


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("weights") / "resnet18.pth")


def run_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str | Path) -> tuple[int, str]:
    """Exit status and output of ``xaibench run ARGS`` writing into ``tmp_path``."""
    outputs = ("--workdir", tmp_path / "work", "--submissions", tmp_path / "subs")
    argv = ["run", "-q", *outputs, "--leaderboard-dir", tmp_path / "board", *args]
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def records(workdir: Path, track: str) -> list[dict]:
    path = workdir / "results" / f"{track}.jsonl"
    assert path.is_file(), f"no records for track {track!r}: {sorted(p.name for p in (workdir / 'results').iterdir())}"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_scored(rows: Sequence[dict], ids: set[str]) -> None:
    """Every sample has a finite iou (alignment, from its mask) and deletion (faithfulness) value."""
    for metric in ("iou", "deletion"):
        got = {r["sample_id"]: r["value"] for r in rows if r["metric"] == metric}
        assert set(got) == ids, (metric, got)
        assert all(isinstance(v, float) and math.isfinite(v) for v in got.values()), (metric, got)
    assert all(0.0 <= r["value"] <= 1.0 for r in rows if r["metric"] == "iou")


# ---------------------------------------------------------------------------------------- end to end


def test_timm_checkpoint_on_a_folder_with_masks_runs_offline(
    tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_folder(tmp_path / "cats")
    code, output = run_cli(
        capsys,
        tmp_path,
        "-e",
        "gradient",
        "--model",
        "timm:resnet18",
        "--model-param",
        f"checkpoint={checkpoint}",
        "--dataset",
        f"folder:{data}",
        "--limit",
        "2",
        "--metric",
        METRICS,
    )
    assert code == 0, output
    rows = records(tmp_path / "work", "resnet18-on-cats")
    assert_scored(rows, {"s0", "s1"})
    summary = json.loads((tmp_path / "work" / "summary.json").read_text())
    assert summary["run"]["suite"] == "adhoc"
    provenance = summary["tracks"]["resnet18-on-cats"]["provenance"]
    assert provenance["model"]["params"] == {"arch": "resnet18", "checkpoint": str(checkpoint)}
    assert provenance["model"]["identity"].startswith("timm:resnet18@")
    assert (provenance["dataset"]["name"], provenance["dataset"]["params"]) == ("folder", {"root": str(data)})
    assert "resnet18-on-cats" in output  # the leaderboard printed the track
    # The submission re-runs from its recorded provenance (the suite "adhoc" is no plugin).
    try:
        main(["submission", "verify", str(tmp_path / "subs" / "gradient.json"), "--samples", "2"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    verified = capsys.readouterr().out
    assert code == 0 and "verified: 2 of 2 records" in verified, verified


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--model", "timm:resnet18"), "--model needs --dataset"),
        (("--dataset", "folder:x"), "--dataset needs --model"),
        (("--model-param", "checkpoint=x"), "--model-param needs --model"),
        (("--track-name", "mine"), "--track-name needs --model"),
        (("--target", "label"), "--target needs --model"),
        (("--suite", "default", "--model", "timm", "--dataset", "folder:x"), "either --suite or --model"),
        (("--model", "timm:resnet18", "--dataset", "folder:x", "--model-param", "checkpoint"), "'checkpoint'"),
        (("--model", "timmy:resnet18", "--dataset", "folder:x"), "unknown model 'timmy'; did you mean 'timm'?"),
        (("--model", "timm:resnet18", "--dataset", "hf"), "dataset 'hf': "),
    ],
)
def test_bad_adhoc_options_fail_with_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], named: str
) -> None:
    code, output = run_cli(capsys, tmp_path, "-e", "gradient", *args)
    assert code != 0, output
    assert "Traceback" not in output
    last = [line for line in output.splitlines() if line.strip()][-1]
    assert named in last, last
    assert not (tmp_path / "work" / "results").exists()


def test_a_missing_checkpoint_or_folder_is_one_line_naming_it(
    tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_folder(tmp_path / "cats", n=1)
    common = ("-e", "gradient", "--model", "timm:resnet18")
    code, output = run_cli(
        capsys, tmp_path, *common, "--model-param", "checkpoint=nope.pth", "--dataset", f"folder:{data}"
    )
    assert code == 1 and "nope.pth: checkpoint file not found" in output.strip().splitlines()[-1], output
    code, output = run_cli(
        capsys, tmp_path, *common, "--model-param", f"checkpoint={checkpoint}", "--dataset", f"folder:{tmp_path}/none"
    )
    assert code == 1 and "none: folder dataset root not found" in output.strip().splitlines()[-1], output
    assert not list((tmp_path / "subs").glob("*.json"))


# ---------------------------------------------------------------------------------------- the track


def test_arg_sets_the_plugins_first_parameter(registry: object) -> None:
    track = adhoc_track(
        "timm:resnet18", "folder:/data/cats", model_params={"checkpoint": "w.pth"}, dataset_params={"label_names": "x"}
    )
    assert (track.model, dict(track.model_params)) == ("timm", {"arch": "resnet18", "checkpoint": "w.pth"})
    assert (track.dataset, dict(track.dataset_params)) == ("folder", {"root": "/data/cats", "label_names": "x"})
    assert (track.name, track.target, track.metrics) == ("resnet18-on-cats", "predicted", ("default",))
    hf = adhoc_track("timm", "hf:C:/data/set.parquet", model_params={"arch": "vit"}, target="label", name="mine")
    assert dict(hf.dataset_params) == {"path": "C:/data/set.parquet"}
    assert (hf.name, hf.target, dict(hf.model_params)) == ("mine", "label", {"arch": "vit"})


def test_default_names_depend_on_the_text_only_and_are_file_safe() -> None:
    assert track_name("timm:resnet18", "folder:/data/cats/") == "resnet18-on-cats"
    assert track_name("timm:resnet50.a1_in1k", "hf:owner/pets") == "resnet50.a1_in1k-on-pets"
    assert track_name("timm:resnet18", "hf:/x/my data.parquet") == "resnet18-on-my-data"
    assert track_name("shapes-cnn", "shapes") == "shapes-cnn-on-shapes"
    assert split_component("hf:C:/x", "dataset") == ("hf", "C:/x")
    assert split_component("folder", "dataset") == ("folder", None)


def test_bad_tracks_raise_one_line(registry: object) -> None:
    with pytest.raises(XaibenchError, match="'arch' given twice"):
        adhoc_track("timm:resnet18", "folder:x", model_params={"arch": "resnet50"})
    with pytest.raises(XaibenchError, match="unknown dataset 'foldr'; did you mean 'folder'"):
        adhoc_track("timm:resnet18", "foldr:x")
    with pytest.raises(XaibenchError, match="target 'labels'"):
        adhoc_track("timm:resnet18", "folder:x", target="labels")
    with pytest.raises(XaibenchError, match="nothing after ':'"):
        adhoc_track("timm:", "folder:x")
    with pytest.raises(XaibenchError, match="track name 'a/b'"):
        adhoc_track("timm:resnet18", "folder:x", name="a/b")


def test_main_parameter_is_the_first_named_constructor_parameter() -> None:
    class Kwargs:
        def __init__(self, **params: object) -> None: ...

    class Positional:
        def __init__(self, root: str, split: str = "val") -> None: ...

    assert main_parameter(Kwargs) is None
    assert main_parameter(Positional) == "root"


def test_param_lists_split_at_commas_that_start_a_key() -> None:
    assert _split_pairs("a=1,b=2") == ["a=1", "b=2"]
    assert _split_pairs('label_names=["cat","dog"],root=/x,y') == ['label_names=["cat","dog"]', "root=/x,y"]


def test_given_tracks_replace_the_suites_and_are_filtered(registry: object) -> None:
    a = TrackSpec(name="a", dataset="folder", model="timm")
    b = TrackSpec(name="b", dataset="folder", model="timm")
    assert [t.name for t in resolve_tracks(registry, "mine", None, [a, b])] == ["a", "b"]  # type: ignore[arg-type]
    assert [t.name for t in resolve_tracks(registry, "mine", ["b"], [a, b])] == ["b"]  # type: ignore[arg-type]
    with pytest.raises(XaibenchError, match="suite 'mine' has no track 'c'; it has a, b"):
        resolve_tracks(registry, "mine", ["c"], [a, b])  # type: ignore[arg-type]
    with pytest.raises(XaibenchError, match="two tracks are named 'a'"):
        resolve_tracks(registry, "mine", None, [a, a])  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", [(), ("--wide",)])
def test_wide_reaches_the_terminal_leaderboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: tuple[str, ...]
) -> None:
    from xaibench.publish import writers

    seen: list[bool] = []
    monkeypatch.setattr(writers, "print_leaderboard", lambda board, console=None, *, wide=False: seen.append(wide))
    golden = Path(__file__).parent / "golden" / "submissions" / "v1-initial"
    main(["leaderboard", "build", "--submissions", str(golden), "--out", str(tmp_path / "board"), "--no-site", *flag])
    assert seen == [bool(flag)], capsys.readouterr()
