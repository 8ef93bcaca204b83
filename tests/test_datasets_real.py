"""Real-data loaders (issue 3): upstream layouts, ImageNet label mapping, data roots, the ``real`` suite.

The four real fixtures live in ``/work/shared/data`` (or ``$XAIBENCH_SHARED_DATA``); tests
that need one skip with the reason when it is absent. ``mohseni`` and ``saliency-bench``
have no shared fixture: their tests write tiny datasets in the upstream layout into
``tmp_path``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage as ndi
from scipy.io import savemat

from xaibench.datasets.io import read_mask
from xaibench.datasets.real import common as real_common
from xaibench.datasets.real.coco import CocoDataset, boxes_mask, rle_counts_from_string, rle_decode
from xaibench.datasets.real.common import (
    DataRootError,
    LayoutError,
    dataset_env_var,
    fingerprint,
    label_map,
)
from xaibench.datasets.real.human_attention import MAP_KINDS, HumanAttentionDataset, human_map_levels, load_map
from xaibench.datasets.real.mohseni import MohseniDataset
from xaibench.datasets.real.pets import PET_BREEDS, OxfordPetsDataset, parse_list
from xaibench.datasets.real.saliency_bench import SaliencyBenchDataset
from xaibench.datasets.real.voc import VOC_CLASSES, VOC2012SegDataset
from xaibench.imagenet import imagenet_label_names, imagenet_synsets
from xaibench.imaging import resize_bilinear
from xaibench.suites.real import REAL_DATASETS, RealSuite

SHARED = Path(os.environ.get("XAIBENCH_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
FIXTURES = {
    "human-attention": "human-attention-25",
    "voc2012-seg": "voc2012-seg-14",
    "oxford-pets": "oxford-pets-26",
    "coco": "coco-val2017-10",
}
CATS = set(range(281, 286))
DOGS = set(range(151, 269))
BIRDS = set(range(7, 25)) | set(range(80, 101)) | set(range(127, 147))


def shared(name: str) -> Path:
    path = SHARED / FIXTURES[name]
    if not path.is_dir():
        pytest.skip(f"shared real-data fixture {path} is absent (set XAIBENCH_SHARED_DATA)")
    return path


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No data-root variables leak in from the caller; the download cache is private."""
    for var in list(os.environ):
        if var.startswith("XAIBENCH_DATA_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XAIBENCH_DATA_CACHE", str(tmp_path / "cache"))


def _jpg(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, quality=95)


def _rgb(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- label map


def test_label_map_entries_match_timm_synsets() -> None:
    """Every target index names the synset written next to it (guards against off-by-one indices)."""
    doc = json.loads(real_common._label_map_path().read_text())
    names, wnids = imagenet_label_names(), imagenet_synsets()
    seen = 0
    for ds, block in doc["datasets"].items():
        for cls, e in block["classes"].items():
            assert e["match"] in doc["match"], (ds, cls)
            assert e["note"], (ds, cls)
            assert all(0 <= c < 1000 for c in e["candidates"]), (ds, cls)
            if e["imagenet"] is None:
                assert e["match"] in ("category", "none"), (ds, cls)
                assert (e["match"] == "none") == (not e["candidates"]), (ds, cls)
                continue
            seen += 1
            assert e["match"] in ("exact", "closest"), (ds, cls)
            assert e["imagenet"] in e["candidates"], (ds, cls)
            assert wnids[e["imagenet"]] == e["wnid"], (ds, cls)
            assert names[e["imagenet"]].split(",")[0] == e["lemma"], (ds, cls)
    assert seen > 50


def test_label_map_covers_each_dataset_vocabulary() -> None:
    assert set(label_map("voc2012-seg")) == set(VOC_CLASSES[1:])
    assert set(label_map("oxford-pets")) == set(PET_BREEDS)
    coco = label_map("coco")
    assert len(coco) == 80 and len({e.coco_id for e in coco.values()}) == 80
    # inheritance: saliency-bench sees VOC classes and Pets breeds; mohseni sees VOC plus its own names
    assert label_map("saliency-bench")["aeroplane"].imagenet == 404
    assert label_map("saliency-bench")["Persian"].imagenet == 283
    assert label_map("mohseni")["zebra"].imagenet == 340
    assert label_map("mohseni")["sheep"].imagenet == 348


def test_semantics_of_key_mappings() -> None:
    """Hand-checked oracle: cats map to cats, dogs to dogs, VOC animals and vehicles to their ImageNet kin."""
    names = imagenet_label_names()
    pets = label_map("oxford-pets")
    for breed, e in pets.items():
        pool = CATS if breed[0].isupper() else DOGS
        assert set(e.candidates) <= pool and e.candidates, breed
        if e.imagenet is not None:
            assert e.imagenet in pool, breed
    assert names[pets["Persian"].imagenet].startswith("Persian cat")
    assert names[pets["great_pyrenees"].imagenet] == "Great Pyrenees"
    assert pets["Maine_Coon"].imagenet is None
    voc = label_map("voc2012-seg")
    expected = {"aeroplane": "airliner", "horse": "sorrel", "sheep": "ram", "cow": "ox", "bicycle": "mountain bike"}
    for cls, lemma in expected.items():
        assert names[voc[cls].imagenet].startswith(lemma), cls
    assert set(voc["bird"].candidates) == BIRDS and voc["bird"].imagenet is None
    assert set(voc["dog"].candidates) == DOGS and voc["person"].candidates == ()
    assert label_map("coco")["kite"].imagenet is None  # ImageNet's kite is a bird


# ----------------------------------------------------------------------------- human-attention


def test_human_attention_fixture_loads_every_kind() -> None:
    root = shared("human-attention")
    revisions = set()
    for kind in MAP_KINDS:
        ds = HumanAttentionDataset(root=root, map_kind=kind)
        assert len(ds) == 25
        revisions.add(ds.revision)
        s = next(ds.samples(1))
        assert s.id == "image_r_10" and s.image.shape == (405, 405, 3)
        lv = s.ground_truth.levels
        assert lv.shape == (405, 405) and lv.dtype == np.float32
        assert lv.min() >= 0 and lv.max() == pytest.approx(1.0)
        assert s.label is None and s.target is None and s.meta["target_source"] == "predicted"
        assert s.meta["map_kind"] == kind
    assert len(revisions) == len(MAP_KINDS)  # each kind reads different files


def test_human_attention_default_is_humanpc_and_negatives_are_clipped_and_noted() -> None:
    root = shared("human-attention")
    ds = HumanAttentionDataset(root=root)
    assert ds.map_kind == "humanPC"
    samples = list(ds.samples())
    assert [s.id for s in samples][:3] == ["image_r_10", "image_r_18", "image_r_24"]
    s = samples[0]
    raw = load_map(root / "human-maps" / "img10_humanPC.mat")
    assert raw.shape == (100, 100) and raw.min() < 0
    assert s.meta["negative_fraction"] > 0
    assert any("clipped" in n for n in s.ground_truth.notes)
    # oracle: resize, clip, divide by max
    ref = np.clip(resize_bilinear(raw, (405, 405)), 0, None)
    np.testing.assert_allclose(s.ground_truth.levels, ref / ref.max(), atol=1e-6)


def test_human_maps_keep_orientation_on_real_images() -> None:
    """The loaded maps correlate with an image-derived salient region (smoothed edge density)
    far better than their flipped or transposed versions: no flip happened on loading."""
    root = shared("human-attention")

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
        return float(a @ b / np.sqrt((a @ a) * (b @ b)))

    scores: dict[str, list[float]] = {"as loaded": [], "up-down": [], "left-right": [], "transposed": []}
    for s in HumanAttentionDataset(root=root, map_kind="humanPC").samples():
        grey = s.image.mean(axis=2)
        salient = ndi.gaussian_filter(np.hypot(ndi.sobel(grey, 0), ndi.sobel(grey, 1)), 15)
        m = s.ground_truth.levels
        for key, variant in (("as loaded", m), ("up-down", m[::-1]), ("left-right", m[:, ::-1]), ("transposed", m.T)):
            scores[key].append(corr(variant, salient))
    mean = {k: float(np.mean(v)) for k, v in scores.items()}
    for key in ("up-down", "left-right", "transposed"):
        assert mean["as loaded"] > mean[key] + 0.15, mean


def test_human_map_lands_in_the_right_corner(tmp_path: Path) -> None:
    """A synthetic non-square map with a hot spot near the top-left lands top-left of a
    differently sized image (no flip, no transpose, bilinear scaling)."""
    root = tmp_path / "human-attention"
    _jpg(root / "images" / "all" / "image_r_7.jpg", _rgb(60, 90))
    raw = np.zeros((20, 30))
    raw[3, 5] = 1.0  # row 3 of 20, column 5 of 30
    raw[15, 25] = -0.5  # a negative blob bottom-right
    (root / "human-maps").mkdir()
    savemat(root / "human-maps" / "img7_salFIX.mat", {"map": raw})
    s = next(HumanAttentionDataset(root=root, map_kind="salFIX").samples())
    lv = s.ground_truth.levels
    assert lv.shape == (60, 90)
    r, c = np.unravel_index(np.argmax(lv), lv.shape)
    # source pixel centre (3.5, 5.5) scales by 3 to (10.5, 16.5): the peak is pixel (10, 16)
    assert (r, c) == (10, 16)
    assert lv[45, 75] == 0.0  # negative region clipped
    assert s.meta["negative_fraction"] > 0


def test_human_map_levels_hand_oracle() -> None:
    levels, neg = human_map_levels(np.array([[-1.0, 2.0], [0.0, 4.0]]), (2, 2))
    np.testing.assert_allclose(levels, [[0.0, 0.5], [0.0, 1.0]])
    assert neg == 0.25


def test_human_attention_bad_inputs(tmp_path: Path) -> None:
    root = shared("human-attention")
    with pytest.raises(ValueError, match="map_kind"):
        HumanAttentionDataset(root=root, map_kind="fixations")
    bad = tmp_path / "bad.mat"
    savemat(bad, {"other": np.ones((3, 3))})
    with pytest.raises(ValueError, match=r"bad\.mat: no variable 'map'"):
        load_map(bad)


# ----------------------------------------------------------------------------- voc2012-seg


def test_voc_fixture_masks_and_targets_are_aligned() -> None:
    root = shared("voc2012-seg")
    ds = VOC2012SegDataset(root=root)
    assert len(ds) == 14 and ds.label_names == VOC_CLASSES
    names = imagenet_label_names()
    voc = root / "VOCdevkit" / "VOC2012"
    sources = {"mapped": 0, "predicted": 0}
    for s in ds.samples():
        seg = read_mask(voc / "SegmentationClass" / f"{s.id}.png")
        mask = s.ground_truth.mask
        assert mask.shape == seg.shape == s.image.shape[:2] == (513, 513)
        assert not (mask & (seg == 255)).any()  # void is never evidence
        assert s.meta["void_pixels"] == int((seg == 255).sum())
        cls = VOC_CLASSES[s.label]
        assert s.meta["class"] == cls and cls in s.meta["classes_present"]
        sources[s.meta["target_source"]] += 1
        if s.target is not None:
            np.testing.assert_array_equal(mask, seg == s.label)
            assert s.target == label_map("voc2012-seg")[cls].imagenet
            assert s.meta["target_name"] == names[s.target].split(",")[0]
            # the largest eligible class wins
            for other, n in s.meta["classes_present"].items():
                if label_map("voc2012-seg")[other].imagenet is not None:
                    assert n <= s.meta["classes_present"][cls]
        else:
            np.testing.assert_array_equal(mask, (seg >= 1) & (seg <= 20))
            assert all(label_map("voc2012-seg")[c].imagenet is None for c in s.meta["classes_present"])
    assert sources == {"mapped": 9, "predicted": 5}
    by_id = {s.id: s for s in ds.samples()}
    assert names[by_id["sample_0000"].target] == "airliner"
    assert names[by_id["sample_0008"].target] == "sorrel"
    assert set(by_id["sample_0060"].meta["target_candidates"]) == BIRDS
    # multi-class image: bicycle (mapped) wins over bottle (category)
    assert by_id["sample_0120"].meta["class"] == "bicycle" and by_id["sample_0120"].target == 671


def test_voc_root_variants_and_limit() -> None:
    root = shared("voc2012-seg")
    a = VOC2012SegDataset(root=root)
    b = VOC2012SegDataset(root=root / "VOCdevkit")
    c = VOC2012SegDataset(root=root / "VOCdevkit" / "VOC2012")
    assert a.revision == b.revision == c.revision
    assert [s.id for s in a.samples(3)] == ["sample_0000", "sample_0001", "sample_0008"]
    with pytest.raises(LayoutError, match=r"train\.txt"):
        VOC2012SegDataset(root=root, split="train")


# ----------------------------------------------------------------------------- oxford-pets


def test_pets_fixture_labels_masks_and_targets() -> None:
    root = shared("oxford-pets")
    ds = OxfordPetsDataset(root=root)
    assert len(ds) == 26 and ds.label_names == PET_BREEDS
    names = imagenet_label_names()
    for s in ds.samples():
        tri = read_mask(root / "annotations" / "trimaps" / f"{s.id}.png")
        assert tri.shape == s.image.shape[:2] == s.ground_truth.mask.shape
        np.testing.assert_array_equal(s.ground_truth.mask, tri == 1)
        breed = s.id.rsplit("_", 1)[0]
        assert PET_BREEDS[s.label] == breed == s.meta["breed"]
        assert s.meta["species"] == ("cat" if breed[0].isupper() else "dog")
        if s.meta["species"] == "cat":
            assert set(s.meta["target_candidates"]) == CATS
            assert s.target is None or s.target in CATS
        else:
            assert set(s.meta["target_candidates"]) == DOGS
        if breed == "great_pyrenees":
            assert names[s.target] == "Great Pyrenees" and s.meta["target_source"] == "mapped"
        if breed == "Maine_Coon":
            assert s.target is None and s.meta["target_source"] == "predicted"
    with_boundary = next(OxfordPetsDataset(root=root, include_boundary=True).samples(1))
    tri = read_mask(root / "annotations" / "trimaps" / "Abyssinian_1.png")
    np.testing.assert_array_equal(with_boundary.ground_truth.mask, (tri == 1) | (tri == 3))


def _pets_tree(root: Path, rows: list[str]) -> None:
    (root / "annotations" / "trimaps").mkdir(parents=True)
    for row in rows:
        name = row.split()[0]
        _jpg(root / "images" / f"{name}.jpg", _rgb(12, 16))
        tri = np.full((12, 16), 2, np.uint8)
        tri[3:9, 4:12] = 1
        tri[2, 4:12] = 3
        Image.fromarray(tri).save(root / "annotations" / "trimaps" / f"{name}.png")
    (root / "annotations" / "test.txt").write_text("#Image CLASS-ID SPECIES BREED ID\n" + "\n".join(rows) + "\n")


def test_pets_imagenet_breed_maps_to_its_class(tmp_path: Path) -> None:
    _pets_tree(tmp_path / "pets", ["Persian_1 24 1 8", "pug_3 26 2 17"])
    samples = list(OxfordPetsDataset(root=tmp_path / "pets").samples())
    names = imagenet_label_names()
    assert names[samples[0].target].startswith("Persian cat") and samples[0].target in CATS
    assert names[samples[1].target].startswith("pug") and samples[1].target in DOGS
    assert samples[0].ground_truth.mask.sum() == 6 * 8


def test_pets_list_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "test.txt"
    bad.write_text("Persian_1 25 1 8\n")
    with pytest.raises(ValueError, match=r"test\.txt:1: Persian_1 has class id 25"):
        parse_list(bad)


# ----------------------------------------------------------------------------- coco


def test_coco_fixture_masks_boxes_and_targets() -> None:
    root = shared("coco")
    ds = CocoDataset(root=root)
    assert len(ds) == 10 and ds.masks == "stuffthingmaps"
    doc = json.loads((root / "annotations" / "boxes_val2017_subset.json").read_text())
    cats = {c["id"]: c["name"] for c in doc["categories"]}
    names = imagenet_label_names()
    mapped = 0
    for s in ds.samples():
        seg = read_mask(root / "stuffthingmaps_val2017" / f"{s.id}.png")
        mask, boxes = s.ground_truth.mask, s.ground_truth.boxes
        assert mask.shape == seg.shape == s.image.shape[:2]
        assert (seg[mask] <= 90).all()  # only things, never stuff or unlabelled
        image_id = int(s.id)
        h, w = mask.shape
        assert boxes.ndim == 2 and boxes.shape[1] == 4
        assert (boxes[:, 0] < boxes[:, 2]).all() and (boxes[:, 1] < boxes[:, 3]).all()
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= w + 1).all() and (boxes[:, 3] <= h + 1).all()
        if s.target is not None:
            mapped += 1
            cid = s.label + 1
            np.testing.assert_array_equal(mask, seg == s.label)
            assert s.meta["class"] == cats[cid]
            assert s.target == label_map("coco")[cats[cid]].imagenet
            want = [a for a in doc["annotations"] if a["image_id"] == image_id and a["category_id"] == cid]
            assert len(boxes) == len(want)
            # the class's pixels lie inside its boxes
            inside = boxes_mask(boxes, mask.shape)
            assert (mask & inside).sum() >= 0.95 * mask.sum()
        else:
            np.testing.assert_array_equal(mask, seg <= 90)
    assert mapped == 4
    by_id = {s.id: s for s in ds.samples()}
    # the apple covers 0.13 % of its desk scene: below min_fraction (1 %), so not the explained class
    assert by_id["000000017182"].target is None
    assert next(CocoDataset(root=root, min_fraction=0.0).samples(3)).id == "000000004495"
    tiny = list(CocoDataset(root=root, min_fraction=0.0).samples(3))[2]
    assert tiny.meta["class"] == "apple" and names[tiny.target] == "Granny Smith"
    assert names[by_id["000000026564"].target].startswith("computer keyboard")  # keyboard beats the laptop by area
    assert names[by_id["000000004495"].target] == "studio couch, day bed"
    assert names[by_id["000000046804"].target].startswith("ram")
    assert by_id["000000007977"].meta["target_source"] == "predicted"  # person and skateboard


def test_coco_boxes_mode_rasterises_boxes() -> None:
    root = shared("coco")
    s = next(CocoDataset(root=root, masks="boxes").samples(1))
    np.testing.assert_array_equal(s.ground_truth.mask, boxes_mask(s.ground_truth.boxes, s.ground_truth.mask.shape))


def test_boxes_mask_pixel_centres() -> None:
    m = boxes_mask(np.array([[1.0, 2.0, 4.0, 3.0]]), (5, 6))
    expected = np.zeros((5, 6), bool)
    expected[2:3, 1:4] = True
    np.testing.assert_array_equal(m, expected)


def test_rle_string_decoding_hand_oracle() -> None:
    # single 6-bit chunks; from the 4th count on, values are deltas from the count two back
    assert rle_counts_from_string("325") == [3, 2, 5]
    assert rle_counts_from_string("3252") == [3, 2, 5, 4]
    assert rle_counts_from_string("365K") == [3, 6, 5, 1]  # 'K' = -5: 6 - 5
    m = rle_decode({"size": [3, 3], "counts": [1, 2, 3, 3]})  # column-major
    np.testing.assert_array_equal(m, [[0, 0, 1], [1, 0, 1], [1, 0, 1]])


def test_coco_polygons_and_rle_from_json(tmp_path: Path) -> None:
    root = tmp_path / "coco"
    _jpg(root / "val2017" / "000000000001.jpg", _rgb(10, 12))
    doc = {
        "images": [{"id": 1, "file_name": "000000000001.jpg", "width": 12, "height": 10}],
        "categories": [{"id": 20, "name": "sheep"}, {"id": 1, "name": "person"}, {"id": 149, "name": "road"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 20, "bbox": [2, 1, 4, 3], "area": 12, "iscrowd": 0,
             "segmentation": [[2, 1, 6, 1, 6, 4, 2, 4]]},
            {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 5, 2, 5], "area": 10, "iscrowd": 1,
             "segmentation": {"size": [10, 12], "counts": [5, 5, 5, 5, 100]}},
            {"id": 3, "image_id": 1, "category_id": 149, "bbox": [0, 0, 12, 10], "area": 120, "iscrowd": 0},
        ],
    }  # fmt: skip
    (root / "annotations").mkdir()
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(doc))
    s = next(CocoDataset(root=root).samples())
    expected = np.zeros((10, 12), bool)
    expected[1:4, 2:6] = True  # pixel centres inside the 4 x 3 rectangle
    assert s.target == 348 and s.meta["class"] == "sheep"
    np.testing.assert_array_equal(s.ground_truth.mask, expected)
    np.testing.assert_allclose(s.ground_truth.boxes, [[2, 1, 6, 4]])
    assert CocoDataset(root=root).label_names[s.label] == "sheep"


# ----------------------------------------------------------------------------- mohseni


def _mohseni_tree(tmp_path: Path, spaced: bool = False) -> tuple[Path, Path]:
    root = tmp_path / "ML-Interpretability-Evaluation-Benchmark"
    mask_dir = "human attention mask" if spaced else "human_attention_mask"
    orig_dir = "original images" if spaced else "original_images"
    voc = tmp_path / "vocroot" / "VOCdevkit" / "VOC2012" / "JPEGImages"
    for cls, vid in (("aeroplane", "2008_000251"), ("dog", "2009_000001")):
        _jpg(voc / f"{vid}.jpg", _rgb(20, 30, seed=1))
        m = np.zeros((20, 30), np.uint8)
        m[5:15, 10:20] = 255
        m[8:12, 13:17] = 128
        _jpg(root / "Image" / "PASCAL_VOC_2012" / mask_dir / cls / f"{vid}.jpg", np.repeat(m[..., None], 3, 2))
    for stem in ("zebra2", "zebra10", "man1"):
        _jpg(root / "Image" / "ImageNet" / orig_dir / f"{stem}.jpg", _rgb(16, 16, seed=2))
        m = np.zeros((8, 8, 3), np.uint8)  # half resolution: resized to the image
        m[:4, :4] = 255
        _jpg(root / "Image" / "ImageNet" / mask_dir / f"{stem}.jpg", m)
    return root, tmp_path / "vocroot"


def test_mohseni_layout_targets_and_levels(tmp_path: Path) -> None:
    root, vocroot = _mohseni_tree(tmp_path)
    ds = MohseniDataset(root=root, voc_root=vocroot)
    samples = list(ds.samples())
    ids = [s.id for s in samples]
    assert ids == [
        "pascal-aeroplane-2008_000251",
        "pascal-dog-2009_000001",
        "imagenet-man1",
        "imagenet-zebra2",
        "imagenet-zebra10",
    ]
    by = dict(zip(ids, samples, strict=True))
    assert by["pascal-aeroplane-2008_000251"].target == 404
    assert by["pascal-dog-2009_000001"].target is None
    assert set(by["pascal-dog-2009_000001"].meta["target_candidates"]) == DOGS
    assert by["imagenet-zebra2"].target == 340 and by["imagenet-zebra2"].meta["target_source"] == "mapped"
    assert by["imagenet-man1"].target is None
    assert ds.label_names[by["imagenet-zebra10"].label] == "zebra"
    lv = by["pascal-aeroplane-2008_000251"].ground_truth.levels
    assert lv.shape == (20, 30) and lv.max() == pytest.approx(1.0)
    assert lv[10, 15] == pytest.approx(128 / 255, abs=0.06)  # the inner, half-strength level
    assert lv[0, 0] == 0.0 and lv[:5].max() == 0.0  # JPEG noise below the floor is zero
    z = by["imagenet-zebra2"].ground_truth.levels
    assert z.shape == (16, 16) and z[2, 2] > 0.9 and z[12, 12] == 0.0  # top-left stays top-left


def test_mohseni_spaced_folders_and_subsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, vocroot = _mohseni_tree(tmp_path, spaced=True)
    assert len(MohseniDataset(root=root, subset="imagenet")) == 3
    with pytest.raises(LayoutError, match="voc_root"):
        MohseniDataset(root=root)  # the PASCAL part needs VOC images
    monkeypatch.setenv(dataset_env_var("voc2012-seg"), str(vocroot))
    assert len(MohseniDataset(root=root, subset="pascal")) == 2


# ----------------------------------------------------------------------------- saliency-bench


def _bench(base: Path, name: str, rows: dict[str, np.ndarray], classes: dict[str, list[str]]) -> Path:
    bench = base / "Benchmarks" / name
    for cls, files in classes.items():
        for f in files:
            _jpg(bench / "image" / cls / f, _rgb(20, 20))
    (bench / "attention_label").mkdir(parents=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["img_idx", "attention"])
    for k, v in rows.items():
        w.writerow([k, json.dumps(v.tolist())])
    (bench / "attention_label" / "labels.csv").write_text(buf.getvalue())
    return bench


def test_saliency_bench_csv_masks(tmp_path: Path) -> None:
    binary = np.zeros((10, 10))
    binary[:5, :5] = 1  # top-left quarter, half resolution
    levels = np.zeros((20, 20))
    levels[10:, 10:] = 0.5
    levels[15:, 15:] = 1.0
    _bench(
        tmp_path,
        "pascal",
        {"a1.jpg": binary, "d1.jpg": levels},
        {"aeroplane": ["a1.jpg", "a2.jpg"], "dog": ["d1.jpg"]},
    )
    ds = SaliencyBenchDataset(root=tmp_path)
    assert ds.label_names == ("aeroplane", "dog") and ds.skipped == ["aeroplane/a2.jpg"]
    a, d = list(ds.samples())
    assert a.id == "aeroplane-a1" and a.target == 404 and a.label == 0
    expected = np.zeros((20, 20), bool)
    expected[:10, :10] = True
    np.testing.assert_array_equal(a.ground_truth.mask, expected)
    assert a.ground_truth.levels is None
    assert d.target is None and set(d.meta["target_candidates"]) == DOGS
    np.testing.assert_allclose(d.ground_truth.levels, levels)
    kept = SaliencyBenchDataset(root=tmp_path / "Benchmarks" / "pascal", missing="keep")
    assert len(kept) == 3
    assert [s.ground_truth is None for s in kept.samples()] == [False, True, False]


def test_saliency_bench_several_benchmarks_need_a_name(tmp_path: Path) -> None:
    _bench(tmp_path, "pascal", {"a.jpg": np.ones((4, 4))}, {"cat": ["a.jpg"]})
    _bench(tmp_path, "scene", {"b.jpg": np.ones((4, 4))}, {"urban": ["b.jpg"]})
    with pytest.raises(LayoutError, match="several benchmarks"):
        SaliencyBenchDataset(root=tmp_path)
    assert len(SaliencyBenchDataset(root=tmp_path, benchmark="scene")) == 1


# ----------------------------------------------------------------------------- roots and errors


@pytest.mark.parametrize("cls", REAL_DATASETS, ids=lambda c: c.name)
def test_missing_root_names_layout_and_source(cls: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(tmp_path / "empty"))
    with pytest.raises(DataRootError) as err:
        cls()
    msg = str(err.value)
    assert f"dataset {cls.name!r}: no data root found" in msg
    assert "Expected layout" in msg and cls.layout.strip().splitlines()[0] in msg
    assert cls.get_from in msg and dataset_env_var(cls.name) in msg


def test_explicit_root_with_wrong_layout_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "images").mkdir()
    with pytest.raises(DataRootError, match=r"missing annotations/trimaps/"):
        OxfordPetsDataset(root=tmp_path)
    monkeypatch.setenv("XAIBENCH_DATA_VOC2012_SEG", str(tmp_path))
    with pytest.raises(DataRootError, match="XAIBENCH_DATA_VOC2012_SEG"):
        VOC2012SegDataset()


def test_data_dir_finds_shared_fixtures_by_conventional_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FIXTURES:
        shared(name)
    monkeypatch.setenv("XAIBENCH_DATA_DIR", os.pathsep.join(["/nonexistent", str(SHARED)]))
    for cls in REAL_DATASETS:
        root, _ = cls.find_root()
        if cls.name in FIXTURES:
            assert root == SHARED / FIXTURES[cls.name]
        else:
            assert root is None


def test_dataset_variable_wins_over_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pets_tree(tmp_path / "mypets", ["pug_1 26 2 17"])
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED))
    monkeypatch.setenv("XAIBENCH_DATA_OXFORD_PETS", str(tmp_path / "mypets"))
    assert len(OxfordPetsDataset()) == 1


def test_revision_tracks_content(tmp_path: Path) -> None:
    _pets_tree(tmp_path / "p", ["pug_1 26 2 17", "pug_2 26 2 17"])
    r1 = OxfordPetsDataset(root=tmp_path / "p").revision
    assert OxfordPetsDataset(root=tmp_path / "p").revision == r1
    tri = tmp_path / "p" / "annotations" / "trimaps" / "pug_2.png"
    Image.fromarray(np.full((12, 16), 2, np.uint8)).save(tri)
    assert OxfordPetsDataset(root=tmp_path / "p").revision != r1


def test_fingerprint_reads_both_ends_of_large_files(tmp_path: Path) -> None:
    f = tmp_path / "big.bin"
    data = bytearray(300_000)
    f.write_bytes(bytes(data))
    a = fingerprint([f], tmp_path)
    data[-1] = 1
    f.write_bytes(bytes(data))
    assert fingerprint([f], tmp_path) != a


# ----------------------------------------------------------------------------- downloads


def test_download_fails_fast_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(OxfordPetsDataset, "downloads", (("http://203.0.113.1/never.tar.gz", ""),))
    with pytest.raises(DataRootError, match=r"offline \(HF_HUB_OFFLINE=1\); no network attempt"):
        OxfordPetsDataset(download=True)


def test_download_extracts_archive_into_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in real_common.OFFLINE_ENVS:
        monkeypatch.delenv(var, raising=False)
    src = tmp_path / "src"
    _pets_tree(src, ["pug_1 26 2 17"])
    archive = tmp_path / "pets.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src / "images", arcname="images")
        tf.add(src / "annotations", arcname="annotations")
    monkeypatch.setattr(OxfordPetsDataset, "downloads", ((archive.as_uri(), ""),))
    ds = OxfordPetsDataset(download=True)
    assert ds.root == tmp_path / "cache" / "oxford-pets" and len(ds) == 1
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tf:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(real_common.XaibenchError, match="escapes the destination"):
        real_common.download_into(tmp_path / "dest", [(evil.as_uri(), "")], "test")
    assert not (tmp_path / "escape.txt").exists()


# ----------------------------------------------------------------------------- the real suite


def test_real_suite_tracks_found_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FIXTURES:
        shared(name)
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(SHARED))
    suite = RealSuite()
    tracks = suite.tracks()
    assert [t.name for t in tracks] == ["human-attention", "voc2012-seg", "oxford-pets", "coco"]
    for t in tracks:
        assert t.model == "efficientnet-lite0" and t.dataset == t.name and t.target == "label"  # mapped classes
        assert Path(t.dataset_params["root"]) == SHARED / FIXTURES[t.name]
    status = suite.status()
    assert "found: human-attention" in status and "missing: mohseni, saliency-bench" in status


def test_real_suite_without_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIBENCH_DATA_DIR", str(tmp_path))
    assert RealSuite().tracks() == []
    assert RealSuite().status().startswith("found: none")
    monkeypatch.setenv("XAIBENCH_DATA_COCO", str(tmp_path))
    assert "errors: coco" in RealSuite().status()
    with pytest.raises(DataRootError):
        RealSuite().tracks()


def test_real_suite_mohseni_without_voc_uses_imagenet_subset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = _mohseni_tree(tmp_path)
    monkeypatch.setenv("XAIBENCH_DATA_MOHSENI", str(root))
    (track,) = RealSuite().tracks()
    assert track.dataset == "mohseni" and track.dataset_params["subset"] == "imagenet"


def test_centre_prior_no_longer_hits_every_human_attention_image() -> None:
    """DESIGN 2: the pointing game on multi-level maps uses A = M >= 0.5. Under A = M > 0 (35-50 %
    of each picture) the model-free centre prior hit 25 of 25 images."""
    from xaibench.api import MetricInput
    from xaibench.metrics.plugin import METRICS

    root = shared("human-attention")
    samples = list(HumanAttentionDataset(root=str(root)).samples())
    assert len(samples) == 25
    metric = next(m for m in METRICS if m.name == "pointing_game")()
    hits = []
    for sample in samples:
        h, w = sample.size
        yy, xx = np.mgrid[0:h, 0:w]
        centre = np.exp(-((yy - (h - 1) / 2) ** 2 + (xx - (w - 1) / 2) ** 2) / (h * w)).astype(np.float32)
        batch = MetricInput(saliency=centre[None], concepts=None, samples=[sample], targets=np.zeros(1, int))
        hits.append(metric.score(batch).values[0])
    assert all(v in (0.0, 1.0) for v in hits)
    assert 0 < sum(hits) < 25, sum(hits)
