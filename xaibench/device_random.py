"""Counter-based random numbers made on any torch device, the same bits on every device.

A stream is named by ``(seed, sample id, purpose)``, like :func:`xaibench.seeds.sample_rng`; value
``i`` of a stream is a hash of ``i`` and the stream's two keys (Wellons's ``lowbias32`` applied
twice, in 32-bit integer arithmetic that wraps the same way on a CPU and a GPU). So:

- a perturbation is drawn where the model runs, with nothing copied from the host;
- any slice of a stream can be drawn alone (value ``i`` does not depend on the values before it),
  so images are drawn batch by batch as they are forwarded;
- integer outputs (:func:`random_bits`, :func:`subset_masks`) are bit-identical on every device;
  float outputs are exact up to the device's float32 ``log``/``cos`` (:func:`normal`: within a few
  units in the last place).

Used where NumPy's generators would put the host on a GPU run's critical path (drawing, then
copying, tens of megabytes per sample): infidelity's Gaussian perturbations, sensitivity-n's random
subsets, monotonicity correlation's uniform noise.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch

_MUL1 = 0x7FEB352D
_MUL2 = 0x846CA68B - (1 << 32)  # the same 32 bits as a signed int32
_LIMIT = 1 << 31


def stream_key(seed: int, sample_id: str, purpose: str) -> tuple[int, int]:
    """Two 31-bit keys of the stream ``(seed, sample id, purpose)`` (sha256; stable across processes)."""
    digest = hashlib.sha256(f"{int(seed)}\x00{sample_id}\x00{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1, int.from_bytes(digest[4:8], "little") >> 1


def _lowbias32(x: torch.Tensor) -> torch.Tensor:
    """Wellons's ``lowbias32`` hash of an int32 tensor holding uint32 bits, in place (logical
    shifts by masking)."""
    t = (x >> 16).bitwise_and_(0xFFFF)
    x.bitwise_xor_(t).mul_(_MUL1)
    torch.bitwise_right_shift(x, 15, out=t).bitwise_and_(0x1FFFF)
    x.bitwise_xor_(t).mul_(_MUL2)
    torch.bitwise_right_shift(x, 16, out=t).bitwise_and_(0xFFFF)
    return x.bitwise_xor_(t)


def random_bits(key: tuple[int, int], start: int, stop: int, device: Any) -> torch.Tensor:
    """Values ``start..stop-1`` of the stream ``key``: ``(stop - start,)`` int32 holding 32 random bits
    each, identical on every device."""
    if not 0 <= start <= stop <= _LIMIT:
        raise ValueError(f"random_bits: a stream holds values 0..2**31-1, asked for {start}..{stop}")
    counter = torch.arange(start, stop, dtype=torch.int32, device=device)
    return _lowbias32(_lowbias32(counter.add_(key[0])).bitwise_xor_(key[1]))


def uniform(key: tuple[int, int], start: int, stop: int, device: Any) -> torch.Tensor:
    """``(stop - start,)`` float32 in [0, 1): values ``start..stop-1`` of the stream, multiples of
    2**-24 (exact, so identical on every device)."""
    bits = random_bits(key, start, stop, device)
    return bits.bitwise_right_shift_(8).bitwise_and_(0xFFFFFF).to(torch.float32).mul_(2.0**-24)


def normal(key: tuple[int, int], start: int, stop: int, device: Any) -> torch.Tensor:
    """``(stop - start,)`` float32 standard normal values ``start..stop-1`` of the stream (Box-Muller:
    values ``2i`` and ``2i + 1`` are ``r cos t`` and ``r sin t`` of the uniform pair at ``2i``, ``2i + 1``,
    the first shifted into (0, 1])."""
    first, last = start // 2, -(-stop // 2)
    pair = uniform(key, 2 * first, 2 * last, device).view(-1, 2)
    radius = pair[:, 0].add(2.0**-24).log_().mul_(-2.0).sqrt_()
    angle = pair[:, 1].mul(2.0 * math.pi)
    out = torch.stack((radius * torch.cos(angle), radius.mul_(torch.sin_(angle))), dim=1).view(-1)
    return out[start - 2 * first : stop - 2 * first]


def subset_masks(key: tuple[int, int], runs: range, n: int, size: int, device: Any) -> torch.Tensor:
    """``(len(runs), n)`` bool: row r holds ``size`` of the ``n`` items, a uniformly random subset
    drawn without replacement for run ``runs[r]`` (the items with the ``size`` smallest random keys;
    a key is 32 random bits then the item's index, so keys never tie). Bit-identical on every device."""
    if not 1 <= size <= n:
        raise ValueError(f"subset_masks: subset size must be in [1, {n}], got {size}")
    if runs.step != 1:
        raise ValueError("subset_masks: runs must be consecutive")
    bits = random_bits(key, runs.start * n, runs.stop * n, device).view(len(runs), n)
    keys = ((bits.to(torch.int64) & 0xFFFFFFFF) << max(1, (n - 1).bit_length())) | torch.arange(
        n, dtype=torch.int64, device=device
    )
    kth = torch.kthvalue(keys, size, dim=1, keepdim=True).values
    return keys <= kth
