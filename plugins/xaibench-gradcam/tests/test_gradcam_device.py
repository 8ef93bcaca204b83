"""Score-CAM (``ScoreCAMTopK``) on an accelerator: its upsampled activation masks are made on the
CPU (the library hands activations over as host arrays) and must go to the inputs' device before
they multiply the image. Checked on the CPU with ``OnDevice``, a tensor that refuses, as a CUDA
tensor does, to be multiplied by a host tensor (and to become a NumPy array without ``.cpu()``)."""

from __future__ import annotations

import numpy as np
import torch

from xaibench.testing.tiny import tiny_track

MULTIPLY = {torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__}


class OnDevice(torch.Tensor):
    """A CPU tensor standing in for one on a GPU: multiplying it by a plain tensor with elements
    (not a parameter) raises, ``.numpy()`` raises, ``.cpu()`` gives a plain tensor back, and every
    other op keeps the subclass (results of device tensors stay on the device)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.numpy:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first")
        if func in MULTIPLY and any(
            type(a) is torch.Tensor and a.dim() > 0 and not isinstance(a, torch.nn.Parameter) for a in args
        ):
            raise RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu")
        out = super().__torch_function__(func, types, args, kwargs or {})
        if func is torch.Tensor.cpu:
            return out.as_subclass(torch.Tensor)
        return out


def test_on_device_refuses_host_operands() -> None:
    t = torch.ones(2, 2).as_subclass(OnDevice)
    for bad in (lambda: t * torch.ones(2, 2), lambda: (t * 2).numpy()):
        try:
            bad()
        except (RuntimeError, TypeError):
            pass
        else:
            raise AssertionError("OnDevice should refuse")
    assert type(t * torch.ones(2, 2).to(t)) is OnDevice and isinstance((t * 2).cpu().numpy(), np.ndarray)


def test_scorecam_masks_go_to_the_inputs_device(builtin_registry) -> None:
    from xaibench_gradcam.cams import ScoreCAM

    model = builtin_registry.create("model", "shapes-cnn", variant="shapes")
    track = tiny_track(2, model=model, dataset=builtin_registry.create("dataset", "shapes"))
    explainer = ScoreCAM(max_channels=4)
    on_cpu = explainer.explain(track.model, track.inputs.clone(), track.targets, seed=0)
    on_device = explainer.explain(track.model, track.inputs.clone().as_subclass(OnDevice), track.targets, seed=0)
    np.testing.assert_array_equal(on_device, on_cpu)  # the CPU behaviour is unchanged
