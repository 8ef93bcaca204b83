"""The reply format of :mod:`xaibench.runner.isolation.wire`: every message a worker sends comes back as it
was (arrays bit-identical), and bytes the format does not allow are refused before the runner
allocates what they declare."""

from __future__ import annotations

import json
import math
import struct
import tracemalloc
from typing import Any

import numpy as np
import pytest

from xaibench.plugins import manager
from xaibench.runner.executors import ExplainerSpec, ExplainOutcome, ExplainTask, InProcessExecutor, encode_reply
from xaibench.runner.explain import track_model_spec
from xaibench.runner.isolation import scheduling, wire
from xaibench.runner.isolation.wire import MAGIC, MAX_DEPTH, WireError, decode, encode
from xaibench.runner.track import load_track


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down, arrays bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _frame(header: Any, payload: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(raw)) + raw + payload


rng = np.random.default_rng(0)
MESSAGES = [
    ("ready",),
    ("done", [rng.random((8, 8), dtype=np.float32), rng.random((1, 8, 8))], None, False),
    ("done", [rng.random((4, 4)).astype(np.float16), np.arange(6, dtype=np.int32).reshape(2, 3)], None, False),
    ("done", [{"stripes": 0.5, "dots": np.float32(-1.25), "big": np.float64(1e300)}, {"x": float("nan")}], None, False),
    ("done", [[[0.1 * i for i in range(20)]] * 2, [float("inf"), -float("inf"), 1e-310] * 6], None, False),
    ("done", None, "explainer raised ValueError: no", False),
    ("done", None, "timed out after 3 s", True),
    ("done", [np.zeros((0, 5), dtype=np.uint8), np.array(True), np.int64(-(2**62)), True, 10**40], None, False),
    ("described", ("ok", {"sigma": 0.25, "steps": 50, "sizes": (3, 5), "mode": None, "flags": [True, "a"]})),
    ("described", ("ok", {"$weird": {"$tuple": 1}, "nested": {1: "int key", (2, "b"): [None]}})),
    ("described", ("failed", "explainer constructor raised RuntimeError: no")),
    ("described", ("invalid", "sigma must be positive")),
]


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_every_message_shape_comes_back_as_it_was_sent(message: Any) -> None:
    back = decode(encode(message))
    assert _same(back, message), (back, message)
    outputs = back[1] if len(back) > 1 and isinstance(back[1], list) else []
    assert all(a.flags.writeable and a.flags.owndata for a in outputs if isinstance(a, np.ndarray))  # copies


def test_arrays_cross_in_little_endian_and_come_back_in_native_order() -> None:
    big = np.arange(6, dtype=">f8").reshape(2, 3)
    reply = encode(big)
    assert reply.endswith(np.arange(6, dtype="<f8").tobytes())
    back = decode(reply)
    assert back.dtype == np.dtype("float64") and back.dtype.isnative and np.array_equal(back, big)


def test_a_real_runs_maps_cross_bit_identical_and_the_scheduler_reads_them() -> None:
    registry = manager.get_registry()
    spec = next(t for t in registry.create("suite", "default").tracks() if t.name == "shapes")
    track = load_track(spec, registry, limit=2)
    task = ExplainTask(
        model=track_model_spec(track),
        explainer=ExplainerSpec("gradient", {}),
        inputs=track.inputs.detach().cpu().numpy(),
        targets=np.asarray(track.targets, dtype=np.int64),
        samples=list(track.samples),
        seed=0,
        batch_seed=1,
    )
    (outcome,) = InProcessExecutor(registry).run([task])
    assert outcome.error is None and outcome.outputs is not None and len(outcome.outputs) == 2
    job = scheduling.task_job(task, "g")
    message = decode(encode_reply(("done", outcome.outputs, None, False)), max_array_bytes=scheduling.reply_limit(job))
    answer = scheduling.parse_answer(message, "task")
    assert isinstance(answer, ExplainOutcome) and answer.outputs is not None
    assert _same(answer.outputs, outcome.outputs)


def test_the_shared_reference_bomb_cannot_be_expressed() -> None:
    bomb: list[Any] = []
    for _ in range(25):  # 2**25 values as a pickle of shared references, 208 bytes
        bomb = [bomb, bomb]
    with pytest.raises(WireError, match="at most about half a million values"):
        encode(("done", [bomb], None, False))  # the worker gives up after the first half million
    for _ in range(10):
        bomb = [bomb, bomb]
    with pytest.raises(WireError, match="nested deeper"):
        encode(bomb)
    shallow: list[Any] = [0] * 64
    shallow = [shallow] * 2**14  # a million values sharing one list
    with pytest.raises(WireError, match="half a million"):
        encode(("done", shallow, None, False))
    reply = encode_reply(("done", shallow, None, False))  # what a worker sends instead
    assert decode(reply)[2].startswith("explainer output cannot be sent: WireError: a reply may hold at most")


def test_a_deeply_nested_header_is_refused_before_json_loads() -> None:
    with pytest.raises(WireError, match=f"nested deeper than {MAX_DEPTH}"):
        decode(_frame(b"[" * 5000 + b"]" * 5000))
    deep: Any = 1
    for _ in range(MAX_DEPTH - 1):  # with the header's object: MAX_DEPTH deep
        deep = [deep]
    assert decode(_frame({"value": deep, "arrays": []})) == deep
    with pytest.raises(WireError, match="nested deeper"):
        decode(_frame({"value": [deep], "arrays": []}))
    assert decode(_frame({"value": "[[[[" * 100, "arrays": []})) == "[[[[" * 100  # brackets in strings


def test_a_huge_array_with_a_short_payload_is_refused_before_allocation() -> None:
    header = {"value": {"$array": 0}, "arrays": [["float64", [8, 8000, 8000]]]}
    tracemalloc.start()
    try:
        for limit in (wire.MAX_ARRAY_BYTES, 10**12):
            with pytest.raises(WireError, match=r"may not exceed|declares"):
                decode(_frame(header, b"\0" * 64), max_array_bytes=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20


def test_the_job_sizes_what_a_reply_may_hold() -> None:
    task = ExplainTask(None, None, np.zeros((8, 3, 256, 256), np.float32), np.zeros(8), None, 0, 0)  # type: ignore[arg-type]
    limit = scheduling.reply_limit(scheduling.task_job(task, "g"))
    assert limit == max(scheduling.SMALL_REPLY_BYTES, 8 * 256 * 256 * scheduling.REPLY_BYTES_PER_PIXEL)
    assert scheduling.reply_limit(None) == scheduling.SMALL_REPLY_BYTES
    fits = encode(("done", [np.zeros((4, 256, 256))] * 8, None, False))
    assert len(decode(fits, max_array_bytes=limit)[1]) == 8
    with pytest.raises(WireError, match=f"may not exceed {limit} bytes"):
        decode(encode(("done", [np.zeros((5, 256, 256))] * 8, None, False)), max_array_bytes=limit)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_frame({"value": {"$array": 0}, "arrays": [["complex128", [1]]]}, b"\0" * 16), "dtype complex128"),
        (_frame({"value": {"$array": 0}, "arrays": [["object", [1]]]}, b"\0" * 8), "dtype object"),
        (
            _frame({"value": {"$array": 0}, "arrays": [["uint8", [2]]]}, b"\0" * 3),
            "declares 2 bytes of arrays and holds 3",
        ),
        (encode(("ready",)) + b"\0", "declares 0 bytes of arrays and holds 1"),
        (_frame({"value": {"$array": 0}, "arrays": [["uint8", [-1, -1]]]}), "non-negative"),
        (_frame({"value": {"$array": 0}, "arrays": [["uint8", [1] * 5]]}, b"\0"), "more than 4 dimensions"),
        (_frame({"value": [{"$array": 0}] * 2, "arrays": [["uint8", [1]]]}, b"\0"), "each array once"),
        (_frame({"value": 1, "arrays": [["uint8", [1]]]}, b"\0"), "each array once"),
        (_frame({"value": {"$array": 0}, "arrays": [["bool", [1]]]}, b"\2"), "other than 0 and 1"),
        (_frame({"value": {"$eval": "x"}, "arrays": []}), "tag '$eval'"),
        (_frame(b'{"value": NaN, "arrays": []}'), "NaN"),
        (_frame(b'{"value": 1e999, "arrays": []}'), "out of float range"),
        (_frame(b'{"value": [1, "arrays": []}'), "not JSON"),
        (_frame({"value": 1}), "must be"),
        (_frame({"value": {"$pairs": [[[1], 2]]}, "arrays": []}), "hashable"),
        (MAGIC + struct.pack("<I", 2**31) + b"{}", "header may not exceed"),
        (MAGIC + struct.pack("<I", 100) + b"{}", "shorter than its header"),
        (b"\x80\x05N.", "magic bytes"),
        ("not bytes", "must be bytes"),
        (wire.Refused("a reply may not exceed 9 bytes"), "may not exceed 9 bytes"),
    ],
)
def test_bytes_the_format_does_not_allow_are_refused(data: Any, reason: str) -> None:
    with pytest.raises(WireError, match=reason.replace("$", r"\$").replace("(", r"\(")):
        decode(data)


def test_what_cannot_be_encoded_becomes_the_jobs_failure() -> None:
    class Payload:
        pass

    assert decode(encode_reply(("done", [Payload()], None, False))) == (
        "done",
        None,
        "explainer output cannot be sent: WireError: a reply may not contain an object of type Payload",
        False,
    )
    assert decode(encode_reply(("described", ("ok", {"p": Payload()})))) == (
        "described",
        ("failed", "explainer parameters cannot be sent: WireError: a reply may not contain an object of type Payload"),
    )
    with pytest.raises(WireError, match="dtype complex64"):
        encode(np.zeros(2, np.complex64))
