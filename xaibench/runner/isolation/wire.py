"""The binary format of a worker's reply to the runner: plain data and numpy arrays, no pickle.

A reply is ``MAGIC``, a 4-byte little-endian header length, a UTF-8 JSON header, then the raw
bytes of its arrays, one after the other. The header is ``{"value": V, "arrays": [[dtype,
shape], ...]}``; ``V`` is JSON (``None``, ``bool``, ``int``, finite ``float``, ``str``, lists,
dicts with string keys) with tagged objects (one ``"$"`` key) for what JSON lacks:

- ``{"$tuple": [...]}`` a tuple; ``{"$dict": {...}}`` a dict whose one key starts with ``$``;
  ``{"$pairs": [[k, v], ...]}`` a dict with other keys than strings;
- ``{"$float": "nan" | "inf" | "-inf"}`` a non-finite float;
- ``{"$array": i}`` a numpy array, ``{"$scalar": i}`` a numpy scalar (a 0-d entry),
  ``{"$floats": i}`` a list of Python floats (a 1-d float64 entry: a map sent as nested lists),
  ``i`` indexing ``arrays``; every entry is used exactly once.

What the runner may be sent is bounded before anything is built: a header of at most
``MAX_HEADER_BYTES``, nested at most ``MAX_DEPTH`` deep (counted on the bytes, before
``json.loads``); JSON is a tree, so a reply holds no shared references and cannot expand;
arrays of an allowed dtype (:data:`DTYPES`), at most ``MAX_NDIM`` dimensions, whose declared
bytes are at most the receiver's ``max_array_bytes`` and exactly the bytes that follow the
header. Each array is copied once, from the received bytes into its own native-order array.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

MAGIC = b"XBR1"
MAX_HEADER_BYTES = 1 << 20  # 1 MiB of JSON: at most about half a million values
MAX_DEPTH = 32  # JSON nesting ([ and {) of a header
MAX_NDIM = 4
MAX_ARRAY_BYTES = 512 << 20  # all arrays of one reply, unless the receiver allows less
MAX_REPLY_BYTES = len(MAGIC) + 4 + MAX_HEADER_BYTES + MAX_ARRAY_BYTES  # what a transport reads at most
MIN_PACKED_FLOATS = 16  # shorter lists of floats stay JSON
DTYPES = {
    name: np.dtype(name).newbyteorder("<")
    for name in (
        "bool",
        "uint8",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
}
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class WireError(ValueError):
    """A value that cannot be encoded, or bytes that are not a reply this format allows."""


@dataclass(frozen=True)
class Refused:
    """What a transport hands over instead of a reply it refused to read (``reason``: why)."""

    reason: str


# ---------------------------------------------------------------------------------------- encode


class _Encoder:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.budget = MAX_HEADER_BYTES // 2  # every JSON value takes at least two bytes

    def _array(self, tag: str, array: np.ndarray) -> dict[str, int]:
        name = array.dtype.name
        if name not in DTYPES or array.dtype.hasobject:
            raise WireError(f"a reply may not contain arrays of dtype {array.dtype}")
        if array.ndim > MAX_NDIM:
            raise WireError(f"a reply may not contain arrays of more than {MAX_NDIM} dimensions")
        self.arrays.append(np.asarray(array, dtype=DTYPES[name], order="C"))
        return {tag: len(self.arrays) - 1}

    def value(self, value: Any, depth: int = 0) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise WireError("a reply may hold at most about half a million values")
        if depth > MAX_DEPTH:
            raise WireError(f"a reply may not be nested deeper than {MAX_DEPTH}")
        if isinstance(value, np.ndarray):
            return self._array("$array", value)
        if isinstance(value, np.generic) and value.dtype.name in DTYPES:
            return self._array("$scalar", np.asarray(value))
        if value is None or isinstance(value, bool):
            return None if value is None else bool(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            value = float(value)
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, str):
            return str(value)
        if isinstance(value, tuple):
            return {"$tuple": [self.value(v, depth + 1) for v in value]}
        if isinstance(value, list):
            if len(value) >= MIN_PACKED_FLOATS and all(type(v) is float for v in value):
                return self._array("$floats", np.array(value, dtype=np.float64))
            return [self.value(v, depth + 1) for v in value]
        if isinstance(value, dict):
            if not all(type(k) is str for k in value):
                return {"$pairs": [[self.value(k, depth + 2), self.value(v, depth + 2)] for k, v in value.items()]}
            plain = {k: self.value(v, depth + 1) for k, v in value.items()}
            return {"$dict": plain} if len(plain) == 1 and next(iter(plain)).startswith("$") else plain
        raise WireError(f"a reply may not contain an object of type {type(value).__name__}")


def encode(message: Any) -> bytes:
    """``message`` as reply bytes; raises :class:`WireError` for what the format cannot hold."""
    encoder = _Encoder()
    value = encoder.value(message)
    table = [[a.dtype.name, list(a.shape)] for a in encoder.arrays]
    try:
        header = json.dumps({"value": value, "arrays": table}, allow_nan=False, separators=(",", ":")).encode()
    except (ValueError, RecursionError) as exc:  # e.g. an int of more than 4300 digits
        raise WireError(f"a reply cannot be written as JSON: {exc}") from None
    if len(header) > MAX_HEADER_BYTES:
        raise WireError(f"a reply's header may not exceed {MAX_HEADER_BYTES} bytes")
    _check_depth(header)
    return b"".join([MAGIC, struct.pack("<I", len(header)), header, *(a.tobytes() for a in encoder.arrays)])


# ---------------------------------------------------------------------------------------- decode


def _check_depth(header: bytes) -> None:
    """Reject a header nested deeper than ``MAX_DEPTH`` (counted on its bytes, strings left out)."""
    skeleton = np.frombuffer(_STRINGS.sub(b"", header), dtype=np.uint8)
    steps = np.isin(skeleton, (ord("["), ord("{"))).astype(np.int8) - np.isin(skeleton, (ord("]"), ord("}")))
    if steps.size and int(np.cumsum(steps, dtype=np.int32).max()) > MAX_DEPTH:
        raise WireError(f"a reply's header may not be nested deeper than {MAX_DEPTH}")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireError("a reply's header may not hold a number out of float range")
    return value


def _parse_constant(name: str) -> float:
    raise WireError(f"a reply's header may not hold {name} (non-finite floats are tagged)")


def _shape(entry: Any, max_bytes: int) -> tuple[np.dtype, tuple[int, ...], int]:
    """The dtype, shape and byte count an array entry declares (checked, nothing allocated)."""
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
        raise WireError("a reply's array entry must be [dtype, shape]")
    name, shape = entry
    if not isinstance(name, str) or name not in DTYPES:
        raise WireError(f"a reply may not contain arrays of dtype {str(name)[:40]}")
    if len(shape) > MAX_NDIM:
        raise WireError(f"a reply may not contain arrays of more than {MAX_NDIM} dimensions")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise WireError("a reply's array shape must be non-negative integers")
    nbytes = math.prod(shape) * DTYPES[name].itemsize
    if nbytes > max_bytes:
        raise WireError(f"a reply's arrays may not exceed {max_bytes} bytes")
    return DTYPES[name], tuple(shape), nbytes


class _Decoder:
    def __init__(self, data: bytes, offset: int, table: list[Any], max_bytes: int) -> None:
        declared = [_shape(entry, max_bytes) for entry in table]
        total = sum(nbytes for _, _, nbytes in declared)
        if total > max_bytes:
            raise WireError(f"a reply's arrays may not exceed {max_bytes} bytes")
        if total != len(data) - offset:
            raise WireError(f"a reply declares {total} bytes of arrays and holds {len(data) - offset}")
        self.data, self.used = data, [False] * len(declared)
        self.entries = []
        for dtype, shape, nbytes in declared:
            self.entries.append((dtype, shape, offset))
            offset += nbytes

    def _array(self, index: Any) -> np.ndarray:
        if type(index) is not int or not 0 <= index < len(self.entries) or self.used[index]:
            raise WireError("a reply's array references must name each array once")
        self.used[index] = True
        dtype, shape, offset = self.entries[index]
        view = np.frombuffer(self.data, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
        if dtype.kind == "b" and view.view(np.uint8).max(initial=0) > 1:
            raise WireError("a reply's boolean array holds bytes other than 0 and 1")
        return view.astype(dtype.newbyteorder("="), copy=True)

    def value(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1 or not next(iter(value)).startswith("$"):
            return {k: self.value(v) for k, v in value.items()}
        ((tag, inner),) = value.items()
        if tag == "$array":
            return self._array(inner)
        if tag == "$scalar":
            array = self._array(inner)
            if array.ndim != 0:
                raise WireError("a reply's scalar must be a 0-d array")
            return array[()]
        if tag == "$floats":
            array = self._array(inner)
            if array.ndim != 1 or array.dtype != np.float64:
                raise WireError("a reply's packed floats must be a 1-d float64 array")
            return array.tolist()
        if tag == "$tuple" and isinstance(inner, list):
            return tuple(self.value(v) for v in inner)
        if tag == "$dict" and isinstance(inner, dict):
            return {k: self.value(v) for k, v in inner.items()}
        if tag == "$pairs" and isinstance(inner, list) and all(isinstance(p, list) and len(p) == 2 for p in inner):
            try:
                return {self.value(k): self.value(v) for k, v in inner}
            except TypeError:
                raise WireError("a reply's dict key must be hashable") from None
        if tag == "$float" and inner in _NON_FINITE:
            return _NON_FINITE[inner]
        raise WireError(f"a reply may not contain the tag {tag[:40]!r} with that value")


def decode(data: Any, *, max_array_bytes: int = MAX_ARRAY_BYTES) -> Any:
    """The message in reply ``data``; raises :class:`WireError` (one line) for anything this
    format does not allow, before allocating more than the header's values and the arrays it
    declares (at most ``max_array_bytes`` in all)."""
    if isinstance(data, Refused):
        raise WireError(data.reason)
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise WireError("a worker's reply must be bytes")
    start = len(MAGIC) + 4
    if len(data) < start or not data.startswith(MAGIC):
        raise WireError("a reply must start with the reply format's magic bytes")
    (size,) = struct.unpack_from("<I", data, len(MAGIC))
    if size > MAX_HEADER_BYTES:
        raise WireError(f"a reply's header may not exceed {MAX_HEADER_BYTES} bytes")
    if size > len(data) - start:
        raise WireError("a reply is shorter than its header")
    header = data[start : start + size]
    _check_depth(header)
    try:
        parsed = json.loads(header.decode("utf-8"), parse_float=_parse_float, parse_constant=_parse_constant)
    except RecursionError:
        raise WireError("a reply's header is nested too deep") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"a reply's header is not JSON: {str(exc).splitlines()[0][:80]}") from None
    except WireError:
        raise
    except ValueError as exc:  # e.g. an int of more than 4300 digits
        raise WireError(f"a reply's header is not allowed: {str(exc).splitlines()[0][:80]}") from None
    if not (isinstance(parsed, dict) and set(parsed) == {"value", "arrays"} and isinstance(parsed["arrays"], list)):
        raise WireError('a reply\'s header must be {"value": ..., "arrays": [...]}')
    decoder = _Decoder(data, start + size, parsed["arrays"], max_array_bytes)
    value = decoder.value(parsed["value"])
    if not all(decoder.used):
        raise WireError("a reply's array references must name each array once")
    return value
