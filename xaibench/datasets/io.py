"""Image and mask file reading shared by the dataset loaders.

Images become ``H x W x 3`` float32 arrays in [0, 1] (DESIGN 2); masks are
returned as stored (palette PNGs keep their palette indices). Every failure
raises ``ValueError`` naming the file and the problem, a decompression bomb (an image over
PIL's ``Image.MAX_IMAGE_PIXELS``, warning and error level alike) included.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = ["digest_files", "image_size", "read_mask", "read_rgb"]


_READ_ERRORS = (
    UnidentifiedImageError,
    OSError,
    SyntaxError,
    ValueError,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)


def _failure(path: Path, exc: BaseException) -> ValueError:
    if isinstance(exc, Image.DecompressionBombError | Image.DecompressionBombWarning):
        size = str(exc).split(", could be")[0].rstrip(".")  # "Image size (N pixels) exceeds limit of M pixels"
        return ValueError(f"{path}: {size}; refused as a possible decompression bomb")
    return ValueError(f"{path}: cannot read image ({type(exc).__name__}: {exc})")


def _open(path: Path, decode: bool = True) -> Image.Image:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    image = None
    try:
        with warnings.catch_warnings():
            # PIL only warns between MAX_IMAGE_PIXELS and twice that: refuse those too.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)
            if decode:
                image.load()  # decode now so truncated/corrupt files fail here, not later
    except _READ_ERRORS as exc:
        if image is not None:
            image.close()
        raise _failure(path, exc) from exc
    return image


def image_size(path: Path) -> tuple[int, int]:
    """``(height, width)`` from the file header, without decoding the pixels.

    Raises ``ValueError`` with the path, like :func:`read_rgb`, for a file that cannot be read
    or whose size is over PIL's decompression-bomb limit (it could never be decoded).
    """
    with _open(path, decode=False) as image:
        width, height = image.size
    return int(height), int(width)


def read_rgb(path: Path) -> np.ndarray:
    """Read an image file as ``H x W x 3`` float32 RGB in [0, 1] (see :func:`rgb_array`).
    Raises ``ValueError`` with the path when the file is missing or cannot be decoded."""
    return rgb_array(_open(path))


def rgb_array(image: Image.Image) -> np.ndarray:
    """A decoded image as ``H x W x 3`` float32 RGB in [0, 1].

    Grey, grey+alpha, palette, RGBA, CMYK and 16-bit images are converted to
    RGB (alpha is dropped, not composited).
    """
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit grey: scale by the type's range rather than clipping to 8 bits.
        arr = np.asarray(image, dtype=np.float32)
        top = 65535.0 if image.mode.startswith("I;16") or arr.max(initial=0) > 255 else 255.0
        grey = np.clip(arr / top, 0.0, 1.0)
        return np.repeat(grey[..., None], 3, axis=2).astype(np.float32)
    if image.mode == "F":
        grey = np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)
        return np.repeat(grey[..., None], 3, axis=2)
    rgb = np.asarray(image.convert("RGB"), dtype=np.float32)
    return rgb / np.float32(255.0)


def read_mask(path: Path) -> np.ndarray:
    """Read a mask file as a 2-D integer array with the values as stored (see :func:`mask_array`).
    Raises ``ValueError`` with the path when the file is missing, cannot be decoded or is a true
    colour image."""
    return mask_array(_open(path), str(path))


def mask_array(image: Image.Image, where: str) -> np.ndarray:
    """A decoded mask as a 2-D integer array with the values as stored.

    Palette ("P") PNGs keep their palette indices (e.g. VOC class ids and 255
    for "void"); grey images keep their grey values; an RGB(A) mask whose
    channels are equal is read as grey. ``where`` (a path, a row) starts the
    ``ValueError`` for a true colour image or an unsupported mode.
    """
    if image.mode in ("P", "L", "1", "I", "I;16", "I;16B", "I;16L"):
        arr = np.asarray(image)
        if arr.dtype == bool:
            arr = arr.astype(np.uint8)
        return arr
    if image.mode in ("LA", "PA"):
        return np.asarray(image)[..., 0]
    if image.mode in ("RGB", "RGBA"):
        arr = np.asarray(image)[..., :3]
        if np.array_equal(arr[..., 0], arr[..., 1]) and np.array_equal(arr[..., 0], arr[..., 2]):
            return arr[..., 0].copy()
        raise ValueError(f"{where}: mask must be single-channel (grey or palette), got a colour {image.mode} image")
    raise ValueError(f"{where}: unsupported mask image mode {image.mode!r}")


def digest_files(paths: Iterable[Path], root: Path | None = None, length: int = 16) -> str:
    """SHA-256 over the names (relative to ``root``) and bytes of ``paths``, in the
    given order; a cheap content revision for file-backed datasets."""
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        name = p.relative_to(root).as_posix() if root is not None else p.name
        h.update(name.encode())
        h.update(b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:length]
