"""Integrity tags: HMAC-SHA256 under a secret key that only the runner creates.

What a run reads back from its own stores (records, explanation cache entries, trained weights,
PASTA embeddings) carries a tag computed with the key of that store's folder, ``<folder>/.key``
(32 random bytes, hex, mode ``0600``, created once, never overwritten). A record line carries its
tag in the line; a file (a cache entry, weights) has it in a tag file beside it, ``<file>.tag``
(:func:`write_tagged`, :func:`file_verified`), which binds the file's name and bytes. A process
that can write or append to the folder but cannot read the key cannot make a valid tag; one that
can read the key (the same user without a sandbox, or a Landlock worker, which may read
everywhere) can. docs/results.md states this threat model.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from xaibench.files import write_bytes_atomic

KEY_NAME = ".key"
TAG_SUFFIX = ".tag"
_KEY_HEX = 64


def secret(folder: Path, *, create: bool = False) -> bytes | None:
    """The key of ``folder``; ``None`` when it has none (or an unreadable or malformed one) and
    ``create`` is false. With ``create``, a missing or malformed key is made (mode ``0600``)."""
    path = folder / KEY_NAME
    key = _read(path)
    if key is not None or not create:
        return key
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_hex(_KEY_HEX // 2).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():  # malformed: replaced (whatever it signed fails its check anyway)
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):  # another process made one first: use it
                os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    key = _read(path)
    if key is None:
        raise OSError(f"{path}: cannot read the integrity key just written")
    return key


def _read(path: Path) -> bytes | None:
    try:
        text = path.read_bytes().strip()
    except OSError:
        return None
    if len(text) != _KEY_HEX or not all(c in b"0123456789abcdef" for c in text):
        return None
    return bytes.fromhex(text.decode())


def sign(key: bytes, *parts: bytes) -> str:
    """The tag of ``parts`` (each length-prefixed, so no two sequences share a tag) under ``key``."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


def verify(key: bytes | None, tag: str | None, *parts: bytes) -> bool:
    """Whether ``tag`` is the tag of ``parts`` under ``key`` (false without a key or a tag)."""
    if key is None or not isinstance(tag, str):
        return False
    return hmac.compare_digest(sign(key, *parts), tag)


def tag_path(path: Path) -> Path:
    """The tag file of ``path``: ``<path>.tag``."""
    return path.with_name(path.name + TAG_SUFFIX)


def write_tagged(path: Path, raw: bytes, key: bytes) -> None:
    """Write ``raw`` to ``path`` atomically, then its tag (:func:`write_tag`): a reader that finds
    the new bytes before the new tag sees a mismatch, never a wrong file accepted."""
    write_bytes_atomic(path, raw)
    write_tag(path, raw, key)


def write_tag(path: Path, raw: bytes, key: bytes) -> None:
    """Write the tag of the file ``path`` holding ``raw`` (its name and bytes) beside it, atomically."""
    write_bytes_atomic(tag_path(path), sign(key, path.name.encode(), raw).encode())


def file_verified(path: Path, raw: bytes, key: bytes | None) -> bool:
    """Whether ``raw``, read from ``path``, matches the tag beside it under ``key`` (false when the
    tag file is missing or unreadable, or there is no key)."""
    try:
        tag = tag_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return verify(key, tag, path.name.encode(), raw)
