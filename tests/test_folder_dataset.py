"""The ``folder`` dataset (DESIGN 8) and the shared image readers in ``xaibench.datasets.io``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from xaibench.datasets.folder import FolderDataset, mask_to_ground_truth
from xaibench.datasets.io import read_mask, read_rgb

RNG = np.random.default_rng(0)


def _rgb(h: int, w: int) -> np.ndarray:
    return RNG.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def _save(path: Path, array: np.ndarray, mode: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode=mode).save(path) if mode else Image.fromarray(array).save(path)
    return path


def _folder(tmp_path: Path, ids: dict[str, tuple[int, int]], suffix: str = ".png") -> Path:
    root = tmp_path / "data"
    for key, (h, w) in ids.items():
        _save(root / "images" / f"{key}{suffix}", _rgb(h, w))
    return root


def _labels(root: Path, text: str) -> None:
    (root / "labels.csv").write_text(text, encoding="utf-8")


# ----------------------------------------------------------------------------- io helpers


def test_read_rgb_converts_modes_to_float_rgb(tmp_path: Path) -> None:
    grey = RNG.integers(0, 256, size=(5, 7), dtype=np.uint8)
    rgba = RNG.integers(0, 256, size=(5, 7, 4), dtype=np.uint8)
    out_grey = read_rgb(_save(tmp_path / "g.png", grey))
    out_rgba = read_rgb(_save(tmp_path / "a.png", rgba))
    assert out_grey.dtype == np.float32 and out_grey.shape == (5, 7, 3)
    np.testing.assert_array_equal(out_grey[..., 1], grey / np.float32(255))
    np.testing.assert_array_equal(out_rgba, rgba[..., :3] / np.float32(255))
    pal = Image.fromarray(np.array([[0, 1], [1, 0]], dtype=np.uint8), mode="P")
    pal.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    pal.save(tmp_path / "p.png")
    np.testing.assert_array_equal(read_rgb(tmp_path / "p.png")[0, 0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(read_rgb(tmp_path / "p.png")[0, 1], [0.0, 0.0, 1.0])


def test_read_rgb_16_bit_grey_is_scaled_by_its_range(tmp_path: Path) -> None:
    grey16 = np.array([[0, 32768, 65535]], dtype=np.uint16)
    Image.fromarray(grey16).save(tmp_path / "g16.png")
    np.testing.assert_allclose(read_rgb(tmp_path / "g16.png")[0, :, 0], [0.0, 32768 / 65535, 1.0], atol=1e-6)


def test_read_mask_keeps_palette_indices(tmp_path: Path) -> None:
    idx = np.array([[0, 15, 255], [1, 15, 0]], dtype=np.uint8)
    pal = Image.fromarray(idx, mode="P")
    pal.putpalette(list(range(256)) * 3)
    pal.save(tmp_path / "m.png")
    np.testing.assert_array_equal(read_mask(tmp_path / "m.png"), idx)


def test_read_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(ValueError, match=r"bad\.png: cannot read image"):
        read_rgb(bad)
    with pytest.raises(ValueError, match=r"missing\.png: file not found"):
        read_rgb(tmp_path / "missing.png")
    colour = _save(tmp_path / "colour.png", _rgb(4, 4))
    with pytest.raises(ValueError, match=r"colour\.png: mask must be single-channel"):
        read_mask(colour)


# ----------------------------------------------------------------------------- layout


def test_folder_reads_images_sorted_by_id(tmp_path: Path) -> None:
    root = tmp_path / "data"
    b = _save(root / "images" / "b.png", _rgb(6, 8))
    _save(root / "images" / "a.jpg", _rgb(10, 12))
    _save(root / "images" / "c.jpeg", _rgb(3, 4))
    (root / "images" / ".DS_Store").write_bytes(b"ignored hidden file")
    ds = FolderDataset(root=root)
    assert ds.ids == ["a", "b", "c"] and len(ds) == 3
    samples = list(ds.samples())
    assert [s.id for s in samples] == ["a", "b", "c"]
    assert [s.size for s in samples] == [(10, 12), (6, 8), (3, 4)]
    assert all(s.image.dtype == np.float32 and s.ground_truth is None and s.label is None for s in samples)
    np.testing.assert_array_equal(samples[1].image, np.asarray(Image.open(b)) / np.float32(255))
    assert samples[1].meta["image_file"] == "images/b.png"
    assert [s.id for s in ds.samples(limit=2)] == ["a", "b"]


def test_revision_follows_file_contents(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"x": (4, 4), "y": (4, 4)})
    first = FolderDataset(root=root).revision
    assert FolderDataset(root=root).revision == first and len(first) == 16
    _save(root / "images" / "y.png", _rgb(4, 4))
    second = FolderDataset(root=root).revision
    assert second != first
    _labels(root, "id,label\nx,1\n")
    assert FolderDataset(root=root).revision != second


# ----------------------------------------------------------------------------- masks


@pytest.mark.parametrize(
    ("values", "foreground"),
    [((0, 255), 255), ((0, 1), 1), ((3, 7), 7)],
)
def test_two_valued_mask_is_binary_foreground_is_larger_value(
    tmp_path: Path, values: tuple[int, int], foreground: int
) -> None:
    root = _folder(tmp_path, {"img": (6, 5)})
    mask = np.full((6, 5), values[0], dtype=np.uint8)
    mask[1:4, 2:5] = values[1]
    _save(root / "masks" / "img.png", mask)
    sample = next(FolderDataset(root=root).samples())
    gt = sample.ground_truth
    assert gt is not None and gt.levels is None and gt.mask.dtype == bool
    np.testing.assert_array_equal(gt.mask, mask == foreground)
    assert gt.mask.sum() == 9
    assert sample.meta["mask_kind"] == "binary" and sample.meta["mask_file"] == "masks/img.png"


def test_constant_masks(tmp_path: Path) -> None:
    gt, kind = mask_to_ground_truth(np.zeros((3, 3), dtype=np.uint8))
    assert kind == "binary" and not gt.mask.any()
    gt, kind = mask_to_ground_truth(np.full((3, 3), 255, dtype=np.uint8))
    assert kind == "binary" and gt.mask.all()


def test_many_valued_mask_is_multilevel_scaled_by_max(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"img": (2, 3)})
    mask = np.array([[0, 50, 100], [200, 0, 50]], dtype=np.uint8)
    _save(root / "masks" / "img.png", mask)
    sample = next(FolderDataset(root=root).samples())
    gt = sample.ground_truth
    assert gt is not None and gt.mask is None and sample.meta["mask_kind"] == "multilevel"
    np.testing.assert_allclose(gt.levels, [[0, 0.25, 0.5], [1.0, 0, 0.25]])
    np.testing.assert_array_equal(gt.binary(), mask > 0)


def test_mask_of_wrong_size_names_both_files(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"img": (6, 5)})
    _save(root / "masks" / "img.png", np.zeros((5, 6), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"masks/img\.png: mask is 5x6 \(HxW\) but its image images/img\.png is 6x5"):
        FolderDataset(root=root)


def test_mask_without_image(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"img": (4, 4)})
    _save(root / "masks" / "other.png", np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"masks/other\.png: mask has no matching image"):
        FolderDataset(root=root)


def test_colour_mask_is_rejected_when_read(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"img": (4, 4)})
    _save(root / "masks" / "img.png", _rgb(4, 4))
    ds = FolderDataset(root=root)
    with pytest.raises(ValueError, match=r"masks/img\.png: mask must be single-channel"):
        list(ds.samples())


# ----------------------------------------------------------------------------- bad layouts


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nowhere: folder dataset root not found"):
        FolderDataset(root=tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"file: folder dataset root is not a directory"):
        FolderDataset(root=tmp_path / "file")


def test_empty_folder(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(ValueError, match=r"data/images: missing"):
        FolderDataset(root=root)
    (root / "images").mkdir()
    with pytest.raises(ValueError, match=r"data/images: empty; no \.jpg/\.jpeg/\.png images found"):
        FolderDataset(root=root)


def test_corrupt_image_header_fails_at_construction(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"good": (4, 4)})
    (root / "images" / "broken.jpg").write_bytes(b"\x00garbage, not a jpeg")
    with pytest.raises(ValueError, match=r"images/broken\.jpg: cannot read image"):
        FolderDataset(root=root)


def test_truncated_image_fails_when_read_naming_the_file(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"good": (4, 4)})
    full = _save(tmp_path / "full.png", _rgb(64, 64)).read_bytes()
    (root / "images" / "cut.png").write_bytes(full[: len(full) // 2])
    ds = FolderDataset(root=root)  # the header is intact
    with pytest.raises(ValueError, match=r"images/cut\.png: cannot read image"):
        list(ds.samples())


def test_other_files_and_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4)})
    (root / "images" / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"images/notes\.txt: not an image file"):
        FolderDataset(root=root)
    (root / "images" / "notes.txt").unlink()
    _save(root / "images" / "a.jpg", _rgb(4, 4))
    with pytest.raises(ValueError, match=r"images/a\.png: id 'a' already has a\.jpg"):
        FolderDataset(root=root)
    (root / "images" / "a.png").unlink()
    _save(root / "masks" / "a.jpg", np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"masks/a\.jpg: not a mask file \(expected masks/<id> with suffix \.png\)"):
        FolderDataset(root=root)


# ----------------------------------------------------------------------------- labels


def test_integer_labels_are_indices_and_never_fix_the_target(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4), "b": (4, 4), "c": (4, 4)})
    _labels(root, "id,label\nb,7\na.png,281\n")
    ds = FolderDataset(root=root)
    got = {s.id: (s.label, s.target) for s in ds.samples()}
    assert got == {"a": (281, None), "b": (7, None), "c": (None, None)}  # the track's rule picks the class
    assert ds.label_names == ()


def test_class_names_without_label_names_become_the_dataset_classes(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4), "b": (4, 4), "c": (4, 4)})
    _labels(root, "\ufeffid,label\r\na,zebra\r\nb,ant\r\nc,zebra\r\n")
    ds = FolderDataset(root=root)
    assert ds.label_names == ("ant", "zebra")
    assert [(s.label, s.target) for s in ds.samples()] == [(1, None), (0, None), (1, None)]


def test_imagenet_names_and_synonyms(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4), "b": (4, 4), "c": (4, 4)})
    _labels(root, "id,label\na,tabby\nb,Espresso\nc,tabby cat\n")
    ds = FolderDataset(root=root, label_names="imagenet")
    assert len(ds.label_names) == 1000
    assert [(s.label, s.target) for s in ds.samples()] == [(281, None), (967, None), (281, None)]


def test_explicit_label_names(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4), "b": (4, 4)})
    _labels(root, "id,label\na,Dog\nb,0\n")
    ds = FolderDataset(root=root, label_names=["cat", "dog"])
    assert [s.label for s in ds.samples()] == [1, 0]


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("image,class\na,1\n", {}, r"labels\.csv: header must be 'id,label', got 'image,class'"),
        ("", {}, r"labels\.csv: header must be 'id,label', got 'an empty file'"),
        ("id,label\nzz,1\n", {}, r"labels\.csv line 2: unknown id 'zz'"),
        ("id,label\na,1\na,2\n", {}, r"labels\.csv line 3: id 'a' already labelled on line 2"),
        ("id,label\na,1,extra\n", {}, r"labels\.csv line 2: expected 2 columns"),
        ("id,label\na,\n", {}, r"labels\.csv line 2: empty label for id 'a'"),
        ("id,label\na,5\n", {"label_names": ["x", "y"]}, r"labels\.csv line 2: label index 5 out of range \(0\.\.1\)"),
        ("id,label\na,-1\n", {}, r"labels\.csv line 2: label index -1 out of range"),
        (
            "id,label\na,tabbby\n",
            {"label_names": "imagenet"},
            r"line 2: unknown class name 'tabbby'; did you mean 'tabby'",
        ),
        ("id,label\na,cat\nb,3\n", {}, r"labels\.csv line 3: labels mix integer indices and class names"),
    ],
)
def test_bad_labels_csv(tmp_path: Path, text: str, kwargs: dict, message: str) -> None:
    root = _folder(tmp_path, {"a": (4, 4), "b": (4, 4)})
    _labels(root, text)
    with pytest.raises(ValueError, match=message):
        FolderDataset(root=root, **kwargs)


def test_bad_label_names_parameter(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4)})
    with pytest.raises(ValueError, match=r"label_names must be 'imagenet' or a list"):
        FolderDataset(root=root, label_names="coco")


# ----------------------------------------------------------------------------- every problem at once


def test_every_bad_file_is_named_in_one_error(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (32, 32), "b": (32, 32), "c": (32, 32)})
    (root / "images" / "a.png").write_bytes(b"not a png")
    _save(root / "masks" / "b.png", np.zeros((10, 10), dtype=np.uint8))
    _labels(root, "id,label\nb,1\nc,2\nzz,3\n")
    with pytest.raises(ValueError) as info:
        FolderDataset(root=root)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"folder {root}: 3 problems: images/a.png (cannot read image")
    assert "masks/b.png (mask is 10x10 (HxW) but its image images/b.png is 32x32)" in message
    assert message.endswith("labels.csv line 4 (unknown id 'zz' (no images/zz.jpg or .png))")


def test_the_list_of_problems_is_capped(tmp_path: Path) -> None:
    root = _folder(tmp_path, {"a": (4, 4)})
    rows = "".join(f"x{i},1\n" for i in range(13))
    _labels(root, "id,label\n" + rows)
    (root / "images" / "notes.txt").write_text("x")
    with pytest.raises(ValueError) as info:
        FolderDataset(root=root)
    message = str(info.value)
    assert message.startswith(f"folder {root}: 14 problems: images/notes.txt (not an image file")
    assert message.count("unknown id") == 9 and "labels.csv line 10 (unknown id 'x8'" in message
    assert message.endswith(" and 4 more")
