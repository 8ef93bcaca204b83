"""The ``hf`` dataset (issue 15, item 1): Hugging Face ``datasets`` imagefolder, parquet and arrow
read offline; Hub names fail fast under HF_HUB_OFFLINE=1; and `xaibench run --dataset
hf:FOLDER` scores an imagefolder with masks like a folder dataset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_adhoc_tracks import SIZE, assert_scored, checkpoint, image_array, mask_array, records, run_cli

from xaibench.datasets.hf import HFDataset

datasets = pytest.importorskip("datasets", reason="the hf dataset needs Hugging Face datasets: pip install datasets")

__all__ = ["checkpoint"]  # the session fixture, imported for the end-to-end test


@pytest.fixture(autouse=True)
def _offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, with an empty datasets cache of the test's own (nothing leaks into ~/.cache)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def make_imagefolder(root: Path, n: int = 3) -> Path:
    """An imagefolder: train/<class>/<id>.png, masks in train/masks/, metadata.jsonl naming both
    (``mask_file_name`` makes the ``mask`` image column) with an integer label."""
    split = root / "train"
    for folder in ("cat", "dog", "masks"):
        (split / folder).mkdir(parents=True)
    lines = []
    for i in range(n):
        cls = ("cat", "dog")[i % 2]
        Image.fromarray(image_array(i)).save(split / cls / f"s{i}.png")
        Image.fromarray(mask_array(i)).save(split / "masks" / f"s{i}.png")
        lines.append(json.dumps({"file_name": f"{cls}/s{i}.png", "mask_file_name": f"masks/s{i}.png", "label": i}))
    (split / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    return root


def table(n: int = 3) -> object:
    """An in-memory datasets.Dataset with an image column ``img``, a ClassLabel ``y`` and masks."""
    features = datasets.Features(
        {"img": datasets.Image(), "y": datasets.ClassLabel(names=["a", "b", "c"]), "mask": datasets.Image()}
    )
    data = {
        "img": [Image.fromarray(image_array(i)) for i in range(n)],
        "y": [i % 3 for i in range(n)],
        "mask": [Image.fromarray(mask_array(i)) for i in range(n)],
    }
    return datasets.Dataset.from_dict(data, features=features)


def test_imagefolder_gives_ids_images_labels_and_binary_masks(tmp_path: Path) -> None:
    ds = HFDataset(make_imagefolder(tmp_path / "pets"))
    assert (ds.split, ds.image_column, ds.label_column, ds.mask_column) == ("train", "image", "label", "mask")
    assert ds.ids == ["s0", "s1", "s2"] and len(ds) == 3
    samples = list(ds.samples(limit=2))
    assert [s.id for s in samples] == ["s0", "s1"]
    first = samples[0]
    assert first.image.shape == (SIZE, SIZE, 3) and first.image.dtype == np.float32
    assert np.allclose(first.image, image_array(0) / 255.0, atol=1e-6)  # PNG is lossless
    assert first.ground_truth is not None and first.ground_truth.mask is not None
    assert np.array_equal(first.ground_truth.mask, mask_array(0) == 255)
    assert (first.label, first.target, samples[1].label) == (0, None, 1)  # a label is not a model class
    assert len(ds.revision) == 16 and ds.revision == HFDataset(tmp_path / "pets").revision


def test_parquet_and_arrow_files_and_saved_folders_read_the_same_rows(tmp_path: Path) -> None:
    data = table()
    data.to_parquet(str(tmp_path / "set.parquet"))
    data.save_to_disk(str(tmp_path / "saved"))
    arrow = next((tmp_path / "saved").glob("*.arrow"))
    loaded = [
        HFDataset(tmp_path / "set.parquet", image_column="img", label_column="y"),
        HFDataset(arrow, image_column="img", label_column="y"),
        HFDataset(tmp_path / "saved", image_column="img", label_column="y"),
    ]
    for ds in loaded:
        assert ds.label_names == ("a", "b", "c")
        samples = list(ds.samples())
        assert [s.id for s in samples] == ["00000", "00001", "00002"]  # no file names in the table: row numbers
        assert [s.label for s in samples] == [0, 1, 2]
        assert np.allclose(samples[2].image, image_array(2) / 255.0, atol=1e-6)
        assert np.array_equal(samples[2].ground_truth.mask, mask_array(2) == 255)


def test_id_column_and_string_labels(tmp_path: Path) -> None:
    data = datasets.Dataset.from_dict(
        {
            "image": [Image.fromarray(image_array(i)) for i in range(3)],
            "name": ["x", "y", "z"],
            "kind": ["b", "a", "b"],
        },
        features=datasets.Features(
            {"image": datasets.Image(), "name": datasets.Value("string"), "kind": datasets.Value("string")}
        ),
    )
    data.to_parquet(str(tmp_path / "t.parquet"))
    ds = HFDataset(tmp_path / "t.parquet", id_column="name", label_column="kind")
    assert ds.ids == ["x", "y", "z"] and ds.label_names == ("a", "b")
    assert [s.label for s in ds.samples()] == [1, 0, 1]
    assert all(s.ground_truth is None for s in ds.samples())  # no mask column


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"image_column": "picture"}, "no column 'picture' (image_column); columns: img, y, mask"),
        ({"image_column": "y"}, "column 'y' is not an image column"),
        ({"image_column": "img", "label_column": "z"}, "no column 'z' (label_column)"),
        ({"image_column": "img", "split": "test"}, "no split 'test'; splits: train"),
        ({}, "image columns img, mask; name one with image_column=NAME"),
    ],
)
def test_bad_parameters_name_the_file_and_the_column(tmp_path: Path, params: dict, message: str) -> None:
    table().to_parquet(str(tmp_path / "set.parquet"))
    with pytest.raises(ValueError, match=r"set.parquet") as info:
        HFDataset(tmp_path / "set.parquet", **params)
    assert message in str(info.value)


def test_several_splits_need_split_and_a_mask_of_another_size_names_the_row(tmp_path: Path) -> None:
    root = make_imagefolder(tmp_path / "pets")
    (root / "train").rename(root / "test")
    make_imagefolder(tmp_path / "other")
    (tmp_path / "other" / "train").rename(root / "train")
    with pytest.raises(ValueError, match=r"has splits .*choose one with split=NAME"):
        HFDataset(root)
    Image.fromarray(np.zeros((SIZE, SIZE + 1), np.uint8)).save(root / "test" / "masks" / "s1.png")
    ds = HFDataset(root, split="test")
    with pytest.raises(
        ValueError, match=r"split 'test' row 1 column 'mask': mask is 40x41 \(HxW\) but its image is 40x40"
    ):
        list(ds.samples())


def test_hub_names_fail_fast_offline_and_missing_paths_are_not_hub_names(tmp_path: Path) -> None:
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"'someone/pets': not a local folder or file.*HF_HUB_OFFLINE=1"):
        HFDataset("someone/pets")
    assert time.perf_counter() - started < 5
    with pytest.raises(ValueError, match=r"missing.parquet: not found"):
        HFDataset(str(tmp_path / "missing.parquet"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"notes.txt: expected a .parquet or .arrow file"):
        HFDataset(tmp_path / "notes.txt")


def test_run_on_an_hf_imagefolder_scores_alignment_and_faithfulness(
    tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_imagefolder(tmp_path / "pets")
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
        f"hf:{data}",
        "--dataset-param",
        "split=train,mask_column=mask",
        "--limit",
        "2",
        "--metric",
        "iou,deletion",
    )
    assert code == 0, output
    rows = records(tmp_path / "work", "resnet18-on-pets")
    assert_scored(rows, {"s0", "s1"})
    assert {r["dataset"]["name"] for r in rows} == {"hf"}


def test_every_bad_row_is_named_in_one_error(tmp_path: Path) -> None:
    root = make_imagefolder(tmp_path / "pets", n=4)
    (root / "train" / "cat" / "s0.png").write_bytes(b"not a png")
    Image.fromarray(np.zeros((SIZE, SIZE + 1), np.uint8)).save(root / "train" / "masks" / "s1.png")
    (root / "train" / "masks" / "s2.png").write_bytes(b"not a png either")
    ds = HFDataset(root)
    with pytest.raises(ValueError) as info:
        list(ds.samples())
    message = str(info.value)
    assert message.startswith(f"{root} split 'train': 3 problems: row 0 column 'image' (cannot read image")
    assert "row 1 column 'mask' (mask is 40x41 (HxW) but its image is 40x40)" in message
    assert "row 2 column 'mask' (cannot read image" in message and "\n" not in message
    with pytest.raises(ValueError, match=r"split 'train' row 0 column 'image': cannot read image"):
        list(ds.samples(limit=1))  # the rows a run reads are checked: here one problem
