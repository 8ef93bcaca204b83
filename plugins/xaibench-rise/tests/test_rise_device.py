"""RISE on an accelerator: its masks go to the inputs' device and its maps come back with
``.cpu()`` before ``.numpy()``. Checked on the CPU with ``OnDevice``, a tensor that refuses
``.numpy()`` the way a CUDA tensor does (``.cpu()`` gives a plain tensor back)."""

from __future__ import annotations

import numpy as np
import torch
from xaibench_rise.rise import Rise

from xaibench.testing.tiny import tiny_track


class OnDevice(torch.Tensor):
    """A CPU tensor standing in for one on a GPU: ``.numpy()`` raises; ``.cpu()`` returns a plain
    tensor; every other op keeps the subclass (as results of device tensors stay on the device)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.numpy:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first")
        out = super().__torch_function__(func, types, args, kwargs or {})
        if func is torch.Tensor.cpu:
            return out.as_subclass(torch.Tensor)
        return out


def test_on_device_stands_in_for_a_gpu_tensor() -> None:
    t = torch.ones(2, 2).as_subclass(OnDevice)
    assert type(t * 2) is OnDevice
    try:
        (t * 2).numpy()
    except TypeError as exc:
        assert "Tensor.cpu()" in str(exc)
    else:
        raise AssertionError("OnDevice.numpy() should refuse")
    assert isinstance((t * 2).cpu().numpy(), np.ndarray)


def test_maps_come_back_from_the_device() -> None:
    track = tiny_track(n=2)
    explainer = Rise(n_masks=16)
    on_cpu = explainer.explain(track.model, track.inputs.clone(), track.targets, seed=0)
    on_device = explainer.explain(track.model, track.inputs.clone().as_subclass(OnDevice), track.targets, seed=0)
    assert isinstance(on_device, np.ndarray)
    np.testing.assert_array_equal(on_device, on_cpu)  # the CPU behaviour is unchanged
