"""The ``vit`` suite: one offline track with a small randomly initialised timm ViT.

timm's ``test_vit`` (6 blocks, 64-dim tokens, 2 heads, 16 px patches at 160 px: a 10 x 10 grid
and a class token; 0.37 M parameters) with seeded random weights, so it runs on a fresh machine
without downloads, on 8 synthetic ``shapes`` images (the fewest a metric ranks on). The model is
untrained: the track checks that transformer explainers run and are scored end to end (rollout,
CAMs on token maps), not which explainer is best on a real ViT. CAMs target the last block's
``norm1``: with class-token pooling the patch tokens after the last block do not reach the
logits, so their gradients are zero there.
"""

from __future__ import annotations

from xaibench.kit import Suite, TrackSpec

ARCH = "test_vit"
CAM_LAYER = "blocks.5.norm1"
METRICS: tuple[str, ...] = ("family:alignment", "deletion", "insertion", "sparseness")
N_CLASSES = 4
"""The shapes classes: circle, square, triangle, cross."""


class VitSuite(Suite):
    """Offline vision-transformer suite: `shapes` on a random-weight timm ViT."""

    name = "vit"
    version = "1.0.0"
    description = "Offline ViT suite: 8 synthetic shapes on timm's test_vit with seeded random weights."
    licence = "Apache-2.0"

    def tracks(self) -> list[TrackSpec]:
        return [
            TrackSpec(
                name="vit-shapes",
                dataset="shapes",
                model="timm",
                model_params={
                    "arch": ARCH,
                    "pretrained": False,
                    "num_classes": N_CLASSES,
                    "seed": 0,
                    "target_layers": [CAM_LAYER],
                },
                synthetic=True,
                limit=8,
                metrics=METRICS,
                metric_params={"deletion": {"steps": 10}, "insertion": {"steps": 10}},
                description="Synthetic shapes; timm test_vit (random weights, 160 px, 10 x 10 patches).",
            )
        ]

    def status(self) -> str:
        return "offline; 8 synthetic shapes on a random-weight timm ViT (plumbing, not a ranking of real ViTs)"
