"""xaibench-gradcam: discovered through its entry point, runs on the shapes CNN and on
EfficientNet-Lite0, meets the explainer contract, checks its parameters, and its lean and
capped CAMs match pytorch-grad-cam."""

from __future__ import annotations

import contextlib
import io
import os

import numpy as np
import pytest
import torch
from scipy.ndimage import distance_transform_edt
from xaibench_gradcam import cams
from xaibench_gradcam.reshape import vit_reshape

from xaibench.testing.contract import assert_explainer_contract, model_state
from xaibench.testing.tiny import TinyCNN, TinyTrack, tiny_track

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXPLAINERS = {cls.name: cls for cls in cams.EXPLAINERS}
NAMES = sorted(EXPLAINERS)
FAST = {"scorecam": {"max_channels": 4}, "ablationcam": {"max_channels": 4}}
"""Cheap settings for the 224 px EfficientNet test (the defaults are timed in bench/)."""


@pytest.fixture(scope="module")
def tiny() -> TinyTrack:
    return tiny_track(n=4)


@pytest.fixture(scope="module")
def shapes(builtin_registry) -> TinyTrack:
    model = builtin_registry.create("model", "shapes-cnn", variant="shapes")
    return tiny_track(64, model=model, dataset=builtin_registry.create("dataset", "shapes"))


@pytest.fixture(scope="module")
def shapes_vit(builtin_registry) -> TinyTrack:
    """Eight test-split ``shapes`` images (two of each class) on the shipped ``shapes-vit``: token
    activations ``(B, 65, 64)`` at its target layer, a class token and an 8 x 8 patch grid."""
    model = builtin_registry.create("model", "shapes-vit")
    return tiny_track(8, model=model, dataset=builtin_registry.create("dataset", "shapes", split="test", n=8))


@pytest.fixture(scope="module")
def photos(builtin_registry) -> TinyTrack:
    dataset = builtin_registry.create("dataset", "photos", ids=["chelsea", "coffee"])
    if len(dataset) < 2:
        pytest.skip(f"photos not available: {getattr(dataset, 'skipped', {})}")
    return tiny_track(2, model=builtin_registry.create("model", "efficientnet-lite0"), dataset=dataset)


# ----------------------------------------------------------------------------- discovery


def test_registers_through_its_entry_point(installed_registry) -> None:
    registry = installed_registry
    status = registry.plugins.get("gradcam")
    assert status is not None, "xaibench-gradcam is not installed: pip install -e plugins/xaibench-gradcam"
    assert status.ok, status.error
    assert (status.distribution, status.version) == ("xaibench-gradcam", "0.1.0")
    assert sorted(status.components) == [f"explainer:{n}" for n in NAMES]
    for name in NAMES:
        info = registry.info("explainer", name)
        assert (info.distribution, info.distribution_version, info.plugin) == ("xaibench-gradcam", "0.1.0", "gradcam")
        assert info.licence == "Apache-2.0" and info.description
        assert EXPLAINERS[name].default_params == EXPLAINERS[name]().params, f"{name}: defaults must validate unchanged"


# ----------------------------------------------------------------------------- real tracks


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_the_shapes_cnn(name: str, shapes: TinyTrack) -> None:
    before = model_state(shapes.model.module)
    maps = shapes.select(slice(0, 2)).run(EXPLAINERS[name]())
    assert maps.shape == (2, 64, 64)
    assert model_state(shapes.model.module) == before, f"{name} changed the model"


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_efficientnet_lite0(name: str, photos: TinyTrack) -> None:
    before = model_state(photos.model.module)
    maps = photos.run(EXPLAINERS[name](**FAST.get(name, {})))
    assert maps.shape == (2, 224, 224)
    assert model_state(photos.model.module) == before, f"{name} changed the model"


def _pointing_hits(maps: np.ndarray, track: TinyTrack) -> np.ndarray:
    """DESIGN 2: hit when the first maximum (raster order) lies within 15 px at 224 px
    (scaled to the mask's size) of the mask."""
    hits = []
    for saliency, sample in zip(maps, track.samples, strict=True):
        mask = sample.ground_truth.binary()
        assert saliency.shape == mask.shape, "shapes images are 64 px, like the model input"
        y, x = np.unravel_index(np.argmax(saliency), saliency.shape)
        hits.append(distance_transform_edt(~mask)[y, x] <= 15.0 * mask.shape[0] / 224)
    return np.asarray(hits, dtype=float)


def test_gradcam_beats_random_on_the_pointing_game(builtin_registry, shapes: TinyTrack) -> None:
    rates = {}
    for name, make in (("gradcam", cams.GradCAM), ("random", lambda: builtin_registry.create("explainer", "random"))):
        maps = np.concatenate([shapes.select(slice(i, i + 16)).run(make()) for i in (0, 16, 32, 48)])
        rates[name] = _pointing_hits(maps, shapes).mean()
    assert len(shapes.samples) == 64
    assert rates["gradcam"] >= 0.5, rates
    assert rates["gradcam"] >= rates["random"] + 0.3, rates


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("name", NAMES)
def test_leaves_no_trace_and_is_deterministic(name: str, tiny: TinyTrack) -> None:
    assert_explainer_contract(EXPLAINERS[name], tiny)


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("scorecam", {"max_channels": 0}, r"'max_channels' must be an integer in \[1, 100000\] or null"),
        ("scorecam", {"max_channels": 2.5}, "max_channels"),
        ("gradcam", {"reshape": "square"}, r"'reshape' must be one of 'model', 'none', 'vit'"),
        ("gradcam", {"aug_smooth": 1}, "'aug_smooth' must be a boolean"),
        ("gradcam", {"layer": "x"}, r"unknown parameter\(s\) \['layer'\]"),
        ("hirescam", {"eigen_smooth": True}, r"unknown parameter\(s\) \['eigen_smooth'\]"),
        ("dff", {"n_components": 65}, "n_components"),
    ],
)
def test_bad_parameters_give_clear_errors(name: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EXPLAINERS[name](**params)


def test_parameters_are_coerced_to_one_canonical_form() -> None:
    assert cams.GradCAM(aug_smooth="true").params["aug_smooth"] is True
    assert cams.ScoreCAM(max_channels=None).params["max_channels"] is None
    assert cams.ScoreCAM(max_channels="8").params["max_channels"] == 8


# ----------------------------------------------------------------------------- library equivalence


def test_lean_and_capped_cams_match_the_library(tiny: TinyTrack) -> None:
    import pytorch_grad_cam as lib
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    module = tiny.model.module
    layer = module.get_submodule(tiny.model.target_layers[0])
    targets = [ClassifierOutputTarget(int(t)) for t in tiny.targets]
    ours = {
        "scorecam": tiny.run(cams.ScoreCAM(max_channels=None)),
        "ablationcam": tiny.run(cams.AblationCAM(max_channels=None)),
        "fullgrad": tiny.run(cams.FullGrad()),
        "eigencam": tiny.run(cams.EigenCAM()),
        "eigengradcam": tiny.run(cams.EigenGradCAM()),
    }
    # the library's Eigen-CAMs with its own projection, its arbitrary sign set by our convention
    conventional = _conventional_library_projection()
    with contextlib.redirect_stderr(io.StringIO()), _patched_projection(conventional):  # progress bars
        reference = {
            "scorecam": lib.ScoreCAM(module, [layer])(tiny.inputs.clone(), targets),
            "ablationcam": lib.AblationCAM(module, [layer])(tiny.inputs.clone(), targets),
            "fullgrad": lib.FullGrad(module, [])(tiny.inputs.clone(), targets),
            "eigencam": lib.EigenCAM(module, [layer])(tiny.inputs.clone(), targets),
            "eigengradcam": lib.EigenGradCAM(module, [layer])(tiny.inputs.clone(), targets),
        }
    module.zero_grad(set_to_none=True)  # the library's backward() left gradients on the model
    for name, maps in ours.items():
        np.testing.assert_allclose(maps, reference[name], atol=1e-5, err_msg=name)


def _conventional_library_projection():
    """The library's ``get_2d_projection``, each image's projection signed by our convention."""
    from pytorch_grad_cam.utils.svd_on_activations import get_2d_projection
    from xaibench_gradcam._lib import signed_by_largest_entry

    return lambda batch: np.float32([signed_by_largest_entry(p) for p in get_2d_projection(batch)])


@contextlib.contextmanager
def _patched_projection(projection):
    """The library's Eigen-CAM modules calling ``projection`` instead of their ``get_2d_projection``."""
    import pytorch_grad_cam.eigen_cam as eigen
    import pytorch_grad_cam.eigen_grad_cam as eigen_grad

    saved = eigen.get_2d_projection, eigen_grad.get_2d_projection
    eigen.get_2d_projection = eigen_grad.get_2d_projection = projection
    try:
        yield
    finally:
        eigen.get_2d_projection, eigen_grad.get_2d_projection = saved


def test_the_principal_component_sign_is_the_same_whatever_lapack_returns() -> None:
    """LAPACK may return either sign of a singular vector; the projection is the same for both:
    its entry of largest magnitude positive. Hand-made: rank one activations along (1, 2) with
    spatial profile (3, -1, -2, 0), mean zero; the projection is that profile times |(1, 2)|, or
    its negative, and the convention keeps the sign whose largest entry (3) is positive."""
    from xaibench_gradcam._lib import first_component_projection, signed_by_largest_entry

    profile = np.array([3.0, -1.0, -2.0, 0.0])
    for sign in (1.0, -1.0):
        acts = (sign * np.outer([1.0, 2.0], profile)).reshape(1, 2, 2, 2).astype(np.float32)
        np.testing.assert_allclose(first_component_projection(acts)[0].reshape(-1), profile * np.sqrt(5), rtol=1e-5)
    assert signed_by_largest_entry(np.array([1.0, -4.0, 2.0])).tolist() == [-1.0, 4.0, -2.0]
    assert signed_by_largest_entry(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]


ABLATIONCAM_SHAPES_CNN = [
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.315, 0.4777, 0.2533, 0.0189], [0.6001, 0.9424, 0.676, 0.1626]],
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.2956, 0.077], [0.0, 0.0384, 0.7252, 0.5252], [0.0, 0.0, 0.0161, 0.0]],
]
"""``ablationcam`` (default ``max_channels=32`` of 64) on the first two ``shapes`` images on the shapes
CNN, every 16th pixel, as computed before the ablation layer learned token activations."""


def test_ablationcam_on_the_shapes_cnn_is_unchanged_by_token_support(shapes: TinyTrack) -> None:
    maps = shapes.select(slice(0, 2)).run(cams.AblationCAM())
    np.testing.assert_allclose(maps[:, ::16, ::16], ABLATIONCAM_SHAPES_CNN, atol=1e-4)
    np.testing.assert_allclose(maps.sum(axis=(1, 2)), [972.4606, 430.5725], rtol=1e-4)


def test_ablationcam_on_token_activations_matches_the_library_vit_layer(shapes_vit: TinyTrack) -> None:
    """All channels ablated (``max_channels=None``): the library's ``AblationLayerVit`` maps."""
    import pytorch_grad_cam as lib
    from pytorch_grad_cam.ablation_layer import AblationLayerVit
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    track = shapes_vit.select(slice(0, 2))
    module = track.model.module
    layer = module.get_submodule(track.model.target_layers[0])
    targets = [ClassifierOutputTarget(int(t)) for t in track.targets]
    ours = track.run(cams.AblationCAM(max_channels=None))
    cam = lib.AblationCAM(module, [layer], vit_reshape(1), ablation_layer=AblationLayerVit())
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # the library's progress bars
            reference = cam(track.inputs.clone(), targets)
    finally:
        cam.activations_and_grads.release()  # the library leaves its hooks on the model
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_ablationcam_on_the_shapes_vit_finds_the_shape(shapes_vit: TinyTrack) -> None:
    """Token activations are ablated (the default 32 of 64 channels, in every token) and the maps
    put their mass on the shape: measured 0.52 of it on 0.098 of the pixels on average, and more
    than the shape's area fraction (a uniform map's share) on each of the eight images."""
    before = model_state(shapes_vit.model.module)
    maps = shapes_vit.run(cams.AblationCAM())
    assert model_state(shapes_vit.model.module) == before, "ablationcam changed the model"
    assert maps.shape == (8, 64, 64) and np.isfinite(maps).all()
    assert (maps.std(axis=(1, 2)) > 0.05).all(), maps.std(axis=(1, 2))
    masks = np.stack([sample.ground_truth.binary() for sample in shapes_vit.samples])
    mass = (maps * masks).sum(axis=(1, 2)) / maps.sum(axis=(1, 2))
    chance = masks.mean(axis=(1, 2))
    assert mass.mean() >= 3 * chance.mean(), (mass, chance)
    assert (mass > chance).sum() >= 7, (mass, chance)


def test_channel_caps_pick_top_variance_channels(tiny: TinyTrack) -> None:
    from xaibench_gradcam._lib import _top_variance_channels

    acts = torch.zeros(5, 2, 2)
    acts[1] = torch.tensor([[0.0, 3.0], [0.0, 3.0]])  # variance 2.25
    acts[3] = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # 0.25
    acts[4] = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # 0.25, ties with 3: the lower index wins
    assert _top_variance_channels(acts, 2).tolist() == [1, 3]
    channels = tiny.model.module.get_submodule(tiny.model.target_layers[0]).out_channels
    uncapped = tiny.run(cams.ScoreCAM(max_channels=None))
    np.testing.assert_array_equal(tiny.run(cams.ScoreCAM(max_channels=channels)), uncapped)
    assert not np.array_equal(tiny.run(cams.ScoreCAM(max_channels=2)), uncapped)


# ----------------------------------------------------------------------------- model requirements


def test_cam_without_target_layers_names_the_problem(tiny: TinyTrack) -> None:
    model = TinyCNN()
    model.target_layers = ()
    with pytest.raises(ValueError, match="declares no target_layers"):
        cams.GradCAM().explain(model, tiny.inputs, tiny.targets)
    model.target_layers = ("features.9",)
    with pytest.raises(ValueError, match=r"'features\.9'.*is not a submodule"):
        cams.GradCAM().explain(model, tiny.inputs, tiny.targets)


class _TokenNet(torch.nn.Module):
    """A minimal ViT-shaped network: 8 px patches, a class token, one token-wise layer."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 6, 8, stride=8)
        self.cls = torch.nn.Parameter(torch.randn(1, 1, 6))
        self.block = torch.nn.Linear(6, 6)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], dim=1)
        return self.head(torch.relu(self.block(tokens)).mean(dim=1))


def test_vit_reshape(tiny: TinyTrack) -> None:
    tokens = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    grid = vit_reshape(1)(tokens)
    assert grid.shape == (2, 3, 2, 2)
    assert torch.equal(grid[1, :, 1, 0], tokens[1, 3])  # token 1 + (row 1 * 2 + col 0)
    with pytest.raises(ValueError, match="square grid"):
        vit_reshape(0)(tokens)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = TinyCNN()
        model.module = _TokenNet().eval()
    model.target_layers = ("block",)
    with pytest.raises(ValueError, match=r"outputs tokens.*reshape='vit'"):
        cams.GradCAM().explain(model, tiny.inputs, tiny.targets)
    maps = cams.GradCAM(reshape="vit").explain(model, tiny.inputs, tiny.targets)
    # plumbing only: the random token net's CAM may be flat (all zero) for some images
    assert maps.shape == (4, 32, 32) and np.isfinite(maps).all() and maps.std() > 0
    model.reshape_transform = vit_reshape(1)  # the model-provided reshape, used by reshape="model"
    np.testing.assert_array_equal(cams.GradCAM().explain(model, tiny.inputs, tiny.targets), maps)


def test_timm_vit_token_maps_reshape_without_a_setting(builtin_registry, tiny: TinyTrack) -> None:
    # timm's ViTs declare num_prefix_tokens: reshape="model" folds their tokens with no setting
    model = builtin_registry.create(
        "model", "timm", arch="test_vit", pretrained=False, num_classes=3, target_layers=["blocks.5.norm1"]
    )
    track = tiny_track(2, model=model, dataset=tiny.dataset)
    before = model_state(model.module)
    maps = track.run(cams.GradCAM())
    assert maps.shape == (2, 160, 160)  # a 10 x 10 patch grid behind the class token, resized
    np.testing.assert_array_equal(maps, track.run(cams.GradCAM(reshape="vit")))
    assert model_state(model.module) == before


def test_dff_maps_do_not_move_with_the_last_bits_of_a_narrow_layers_activations(
    builtin_registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism model's CAM layer has 2 channels. Factorised into the default 5 concepts its
    activations have no unique NMF, and activations moved by 1e-6 (float32 rounding of another
    CPU's kernels) changed some maps wholesale; at most 2 concepts, as dff 1.1 takes, they move by
    rounding only."""
    from pytorch_grad_cam.feature_factorization import deep_feature_factorization as library
    from xaibench_gradcam import _lib

    model = builtin_registry.create("model", "mechanism", mechanism="interaction")
    data = builtin_registry.create("dataset", "mechanisms", mechanism="interaction", n=40)
    x = model.preprocess([data.sample(i).image for i in range(40)])
    targets = model.module(x).argmax(1).tolist()
    rng = np.random.default_rng(0)

    def moved(activations: np.ndarray, n_components: int = 5) -> tuple[np.ndarray, np.ndarray]:
        noise = 1 + 1e-6 * rng.standard_normal(activations.shape)
        return library.dff((activations * noise).astype(activations.dtype), n_components=n_components)

    def change(n_components: int) -> np.ndarray:
        a = _lib.class_dff(model.module, model.module.detect, None, x, targets, n_components)
        with monkeypatch.context() as m:
            m.setattr(_lib, "dff", moved)
            b = _lib.class_dff(model.module, model.module.detect, None, x, targets, n_components)
        scale = np.abs(a).reshape(len(a), -1).max(axis=1) + 1e-30
        return np.abs(a - b).reshape(len(a), -1).max(axis=1) / scale

    assert change(5).max() < 1e-4  # capped at the layer's 2 channels
    monkeypatch.setattr(_lib, "min", lambda a, b: a, raising=False)  # the cap undone: 5 concepts
    assert change(5).max() > 0.1
