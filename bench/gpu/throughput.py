"""``throughput``: ``gradient``, ``gradcam`` and ``integrated-gradients`` through the harness's
explain path (``Explainer.explain``, as the runner's workers call it: input checks, seeding, the
maps' checks and their copy to the host) against the same library called directly (plain torch
autograd, pytorch-grad-cam's ``GradCAM``, Captum's ``IntegratedGradients`` with the plugin's
parameters), each ending with the maps on the host. A random-weight timm ``resnet50``
(``pretrained=False``), batch 64, 224 px. Goal per explainer: harness at least 0.9x the direct
call's throughput (direct seconds / harness seconds). Dry run: resnet18, batch 4, 64 px, CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .common import Config, goal, timed


def direct_calls(model: Any, x: torch.Tensor, targets: torch.Tensor) -> dict[str, Any]:
    from captum.attr import IntegratedGradients
    from pytorch_grad_cam import GradCAM
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    from xaibench.kit import forward_batch, resolve_target_layers

    module = model.module

    def gradient() -> np.ndarray:
        xg = x.clone().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(module(xg).gather(1, targets[:, None]).sum(), xg)
        return grad.abs().amax(dim=1).cpu().numpy()

    def gradcam() -> np.ndarray:
        cam = GradCAM(module, resolve_target_layers(model, "gradcam"))
        try:
            return cam(x.clone(), targets=[ClassifierOutputTarget(int(c)) for c in targets.tolist()])
        finally:
            cam.activations_and_grads.release()

    def integrated_gradients() -> np.ndarray:
        batch = max(int(x.shape[0]), forward_batch(int(x.shape[-1])))
        attributions = IntegratedGradients(module).attribute(
            x.clone(),
            baselines=torch.zeros_like(x),
            target=targets,
            n_steps=16,
            method="gausslegendre",
            internal_batch_size=batch,
        )
        return attributions.sum(dim=1).detach().cpu().numpy()

    return {"gradient": gradient, "gradcam": gradcam, "integrated-gradients": integrated_gradients}


def run(cfg: Config) -> dict[str, Any]:
    from xaibench.models.timm_model import TimmModel
    from xaibench.plugins.manager import Registry

    arch, batch, size = ("resnet18", 4, 64) if cfg.dry else ("resnet50", 64, 224)
    model = TimmModel(arch=arch, pretrained=False)
    model.module.to(cfg.device).eval()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, size, size, generator=generator).to(cfg.device)
    with torch.no_grad():
        targets = model.module(x).argmax(dim=1)
    registry = Registry()
    direct = direct_calls(model, x, targets)
    repeat = 5 if cfg.dry else 3
    figures: dict[str, float] = {}
    goals: dict[str, Any] = {}
    for name, fn in direct.items():
        explainer = registry.create("explainer", name, materialise=True)  # timed here, in this process

        def harness(explainer: Any = explainer) -> Any:
            return explainer.explain(model, x.clone(), targets, seed=0)

        for f in (harness, fn):
            timed(f, cfg.device)  # warm-up (cuDNN autotuning, library imports, hooks)
        harness_s = direct_s = float("inf")
        for _ in range(repeat):  # alternating, best of each: a busy machine hurts both alike
            seconds, maps = timed(harness, cfg.device)
            harness_s = min(harness_s, seconds)
            direct_s = min(direct_s, timed(fn, cfg.device)[0])
        figures[f"{name}_harness_s"] = harness_s
        figures[f"{name}_direct_s"] = direct_s
        figures[f"{name}_images_per_s"] = batch / harness_s
        figures[f"{name}_finite"] = float(np.isfinite(np.asarray(maps, dtype=np.float64)).all())
        goals[f"{name}_harness_over_direct"] = goal(direct_s / harness_s, ">=", 0.9)
    return {"setup": f"timm {arch} (random weights), batch {batch}, {size} px", "figures": figures, "goals": goals}
