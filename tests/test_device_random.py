"""Counter-based random numbers made on the model's device (xaibench.device_random): the hash is
Wellons's lowbias32 bit for bit (checked against exact integer arithmetic in Python), slices of a
stream are the stream's values, the distributions are right, and a CUDA device draws the same bits
as the CPU (skipped without one)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from xaibench import device_random as dr

KEY = dr.stream_key(7, "sample-3", "test/purpose")


def lowbias32(x: int) -> int:
    """Wellons's lowbias32 on a Python int, exact (the reference for the int32 tensor version)."""
    mask = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & mask
    x ^= x >> 15
    x = (x * 0x846CA68B) & mask
    return x ^ (x >> 16)


def test_bits_are_the_hash_of_the_counter_bit_for_bit():
    got = dr.random_bits(KEY, 0, 3000, "cpu").numpy().astype(np.int64) & 0xFFFFFFFF
    expected = [lowbias32(lowbias32((i + KEY[0]) & 0xFFFFFFFF) ^ KEY[1]) for i in range(3000)]
    assert got.tolist() == expected
    # counters near the top of the stream wrap the same way
    top = dr.random_bits(KEY, 2**31 - 5, 2**31, "cpu").numpy().astype(np.int64) & 0xFFFFFFFF
    assert top.tolist() == [lowbias32(lowbias32((i + KEY[0]) & 0xFFFFFFFF) ^ KEY[1]) for i in range(2**31 - 5, 2**31)]


def test_streams_differ_by_seed_sample_and_purpose():
    keys = {
        dr.stream_key(0, "a", "p"),
        dr.stream_key(1, "a", "p"),
        dr.stream_key(0, "b", "p"),
        dr.stream_key(0, "a", "q"),
    }
    assert len(keys) == 4
    assert dr.stream_key(0, "a", "p") == dr.stream_key(0, "a", "p")
    draws = [dr.uniform(k, 0, 1000, "cpu") for k in keys]
    assert all(not torch.equal(draws[0], d) for d in draws[1:])


def test_a_slice_is_the_stream_s_values():
    for fn in (dr.uniform, dr.normal, dr.random_bits):
        whole = fn(KEY, 0, 1001, "cpu")
        for start, stop in ((0, 1), (1, 2), (499, 1001), (500, 777), (3, 3)):
            assert torch.equal(fn(KEY, start, stop, "cpu"), whole[start:stop]), (fn.__name__, start, stop)


def test_uniform_and_normal_distributions():
    u = dr.uniform(KEY, 0, 400_000, "cpu").numpy()
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert np.all(u * 2**24 == np.floor(u * 2**24))  # multiples of 2**-24: exact on every device
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    z = dr.normal(KEY, 0, 400_000, "cpu").numpy()
    assert np.all(np.isfinite(z))
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.01  # the pair's cos and sin are uncorrelated


def test_subset_masks_hold_exactly_size_items_drawn_uniformly():
    masks = dr.subset_masks(KEY, range(3, 4003), 50, 10, "cpu")
    assert masks.shape == (4000, 50) and masks.dtype == torch.bool
    assert masks.sum(dim=1).unique().tolist() == [10]
    freq = masks.double().mean(dim=0).numpy()  # each item in 1/5 of the subsets
    assert np.abs(freq - 0.2).max() < 0.03
    assert torch.equal(dr.subset_masks(KEY, range(10, 20), 50, 10, "cpu"), masks[7:17])
    assert dr.subset_masks(KEY, range(0, 2), 50, 50, "cpu").all()
    with pytest.raises(ValueError, match="subset size"):
        dr.subset_masks(KEY, range(0, 2), 50, 51, "cpu")


def test_a_stream_beyond_its_range_is_refused():
    with pytest.raises(ValueError, match="2\\*\\*31"):
        dr.random_bits(KEY, 0, 2**31 + 1, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_draws_the_cpu_s_values():
    assert torch.equal(dr.random_bits(KEY, 5, 100_005, "cuda").cpu(), dr.random_bits(KEY, 5, 100_005, "cpu"))
    assert torch.equal(dr.uniform(KEY, 0, 100_000, "cuda").cpu(), dr.uniform(KEY, 0, 100_000, "cpu"))
    assert torch.equal(
        dr.subset_masks(KEY, range(4), 5000, 77, "cuda").cpu(), dr.subset_masks(KEY, range(4), 5000, 77, "cpu")
    )
    torch.testing.assert_close(
        dr.normal(KEY, 0, 100_000, "cuda").cpu(), dr.normal(KEY, 0, 100_000, "cpu"), rtol=1e-5, atol=1e-6
    )
