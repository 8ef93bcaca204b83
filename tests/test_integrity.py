"""What a run reads back (explanation cache entries, records, trained weights, PASTA embeddings) is checked against
tags only the runner makes; an entry another process wrote is reported, recomputed, never published."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from xaibench import integrity
from xaibench.api import Encoder
from xaibench.files import write_bytes_atomic
from xaibench.pasta.encoders import EmbeddingCache, embed_images
from xaibench.plugins import manager
from xaibench.runner.run import RunConfig, run
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.storage.store import RecordStore

METRICS = ["iou", "pointing_game"]
LIMIT = 4
GOOD = np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)


def _config(workdir: Path, progress: bool = False) -> RunConfig:
    return RunConfig(
        explainers=["gradient"],
        tracks=["shapes"],
        metrics=METRICS,
        limit=LIMIT,
        workdir=workdir,
        progress=progress,
        examples=0,
    )


def _npy(value: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=False)
    return buf.getvalue()


def _metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The published metric summaries (timings left out)."""
    return summary["tracks"]["shapes"]["explainers"]["gradient"]["metrics"]


def _values(workdir: Path) -> dict[str, Any]:
    return {k: r["value"] for k, r in RecordStore(workdir / "results" / "shapes.jsonl").records.items()}


def test_the_key_is_made_once_with_mode_0600_and_tags_depend_on_it(tmp_path: Path) -> None:
    assert integrity.secret(tmp_path) is None
    key = integrity.secret(tmp_path, create=True)
    assert key is not None and len(key) == 32
    assert (tmp_path / ".key").stat().st_mode & 0o777 == 0o600
    assert integrity.secret(tmp_path, create=True) == key  # never overwritten
    tag = integrity.sign(key, b"a", b"bc")
    assert integrity.verify(key, tag, b"a", b"bc")
    assert not integrity.verify(key, tag, b"ab", b"c")  # parts are length-prefixed
    assert not integrity.verify(b"x" * 32, tag, b"a", b"bc")
    assert not integrity.verify(None, tag, b"a", b"bc")


def test_a_rewritten_cache_entry_is_a_digest_mismatch(tmp_path: Path) -> None:
    cache = ExplanationCache(tmp_path)
    cache.put("k", GOOD)
    assert np.array_equal(cache.get("k", shape=(64, 64)), GOOD)  # type: ignore[arg-type]
    path = next(tmp_path.rglob("*.npy"))
    path.write_bytes(_npy(np.ones((64, 64), dtype=np.float32)))  # another valid map
    assert cache.get("k", shape=(64, 64)) is None
    assert cache.rejected == {"digest mismatch": 1} and not path.exists()
    cache.put("k", {"round": 0.5})
    next(tmp_path.rglob("*.json.tag")).unlink()  # a missing tag is a mismatch too
    assert cache.get("k", kind="concept") is None and cache.rejected["digest mismatch"] == 2


def test_a_rewritten_cache_entry_is_recomputed_in_a_run(tmp_path: Path, registry: manager.Registry) -> None:
    clean = run(_config(tmp_path / "clean"), registry).summary
    work = tmp_path / "w"
    run(_config(work), registry)
    entries = sorted((work / "cache" / "explanations").rglob("*.npy"))
    assert len(entries) == LIMIT
    forged = np.zeros((64, 64), dtype=np.float32)
    forged[0, 0] = 1.0  # points at a corner: another pointing-game answer
    entries[0].write_bytes(_npy(forged))
    (work / "results" / "shapes.jsonl").unlink()  # score again from the cache
    second = run(_config(work), registry).summary
    assert second["run"]["repairs"]["cache_rejected_reasons"] == {"digest mismatch": 1}
    assert second["tracks"]["shapes"]["explainers"]["gradient"]["explained"] == {
        "computed": 1,
        "cached": LIMIT - 1,
        "failed": 0,
    }
    assert _metrics(second) == _metrics(clean)
    assert _values(work) == _values(tmp_path / "clean")


def test_a_forged_record_is_reported_ignored_and_recomputed(
    tmp_path: Path, registry: manager.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = run(_config(tmp_path / "clean"), registry).summary
    work = tmp_path / "w"
    run(_config(work), registry)
    path = work / "results" / "shapes.jsonl"
    lines = path.read_text().splitlines()
    genuine = json.loads(lines[0])
    forged = {**genuine, "value": 0.999}  # the same key, another value, the genuine line's tag
    untagged = {k: v for k, v in genuine.items() if k != "integrity"} | {"value": 0.999}
    with path.open("a") as fh:
        fh.write(json.dumps(forged) + "\n" + json.dumps(untagged) + "\n")
    capsys.readouterr()
    second = run(_config(work, progress=True), registry).summary
    err = capsys.readouterr().err.replace("\n", "")
    assert err.count("fail their integrity check") == 1 and "2 records fail" in err and str(path) in err
    assert second["tracks"]["shapes"]["unverified_records"] == 2
    assert _metrics(second) == _metrics(clean)
    assert _values(work) == _values(tmp_path / "clean")
    assert 0.999 not in _values(work).values()
    # the records frame leaves the two lines out too, and says so naming the file
    from xaibench.results import records

    with pytest.warns(UserWarning, match="2 records fail their integrity check") as caught:
        frame = records(work)
    assert str(path) in str(caught[0].message) and 0.999 not in set(frame["value"])
    assert caught[0].filename == __file__  # the warning points at the caller of records()


def test_records_of_a_workdir_whose_key_changed_are_not_reused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    RecordStore(path).append([{"key": "a", "key_version": 2, "value": 1}])
    assert RecordStore(path).records == {"a": {"key": "a", "key_version": 2, "value": 1}}
    (tmp_path / ".key").unlink()
    store = RecordStore(path)
    assert store.records == {} and store.unverified == 1


def test_rewritten_trained_weights_are_detected_and_retrained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from safetensors.torch import load, save

    from xaibench.models.shapes_cnn import ShapesCNN, TrainConfig

    tiny = TrainConfig(n_train=64, epochs=1, batch_size=32)
    first = ShapesCNN(cache_dir=tmp_path, train_config=tiny, weights="train")
    assert first.trained_now and first.weights_path.suffix == ".safetensors"
    assert not ShapesCNN(cache_dir=tmp_path, train_config=tiny, weights="train").trained_now
    state = load(first.weights_path.read_bytes())
    first.weights_path.write_bytes(save({k: torch.zeros_like(v) for k, v in state.items()}))  # valid, other weights
    capsys.readouterr()
    again = ShapesCNN(cache_dir=tmp_path, train_config=tiny, weights="train")
    err = capsys.readouterr().err
    assert again.trained_now and again.identity == first.identity
    assert err.count("fail their integrity check") == 1 and str(first.weights_path) in err
    assert all(torch.equal(load(first.weights_path.read_bytes())[k], v) for k, v in state.items())


class _CountingEncoder(Encoder):
    """Deterministic image embeddings (per-channel means and maxima); counts the images it embeds."""

    name: ClassVar[str] = "counting-image"
    version: ClassVar[str] = "1.0.0"
    modalities: ClassVar[tuple[str, ...]] = ("image",)

    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    @property
    def identity(self) -> str:
        return "counting-image/1"

    def encode_images(self, images: np.ndarray) -> np.ndarray:
        self.embedded += len(images)
        x = np.asarray(images, dtype=np.float32) / 255.0
        return np.concatenate([x.mean(axis=(1, 2)), x.max(axis=(1, 2))], axis=1)


RENDERS = np.random.default_rng(0).integers(0, 256, (4, 8, 8, 3), dtype=np.uint8)


def _embedded(root: Path) -> tuple[np.ndarray, _CountingEncoder, EmbeddingCache]:
    encoder, cache = _CountingEncoder(), EmbeddingCache(root)
    return embed_images(encoder, RENDERS, cache), encoder, cache


def test_a_rewritten_cached_embedding_is_reported_and_recomputed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean, _, _ = _embedded(tmp_path / "clean")
    first, _, _ = _embedded(tmp_path / "cache")
    entries = sorted((tmp_path / "cache").rglob("*.npy"))
    assert len(entries) == len(RENDERS) and all(integrity.tag_path(p).is_file() for p in entries)
    genuine = entries[0].read_bytes()
    entries[0].write_bytes(_npy(np.zeros(6, dtype=np.float32)))  # a valid embedding, another value
    capsys.readouterr()
    again, encoder, cache = _embedded(tmp_path / "cache")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "1 cached embedding fails its integrity check" in lines[0], lines
    assert lines[0].startswith(f"warning: {entries[0].parent.parent}")
    assert encoder.embedded == 1 and cache.rejected == 1  # the rewritten entry only, recomputed
    assert np.array_equal(again, clean) and np.array_equal(first, clean)
    assert entries[0].read_bytes() == genuine  # stored again, with a valid tag
    _, encoder, cache = _embedded(tmp_path / "cache")
    assert encoder.embedded == 0 and cache.rejected == 0


def test_an_untagged_cached_embedding_is_recomputed_like_an_old_cache_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries from before tags are misses, as in the explanation cache (a missing tag is a digest
    mismatch): named in the warning, deleted, recomputed and stored again with a tag."""
    clean, _, _ = _embedded(tmp_path / "clean")
    for path in sorted((tmp_path / "clean").rglob("*.npy")):  # the same files, as the old cache wrote them
        old = tmp_path / "old" / path.relative_to(tmp_path / "clean")
        write_bytes_atomic(old, path.read_bytes())
    assert not list((tmp_path / "old").rglob("*.tag")) and not (tmp_path / "old" / ".key").exists()
    capsys.readouterr()
    again, encoder, cache = _embedded(tmp_path / "old")
    assert f"{len(RENDERS)} cached embeddings fail their integrity check" in capsys.readouterr().err
    assert encoder.embedded == len(RENDERS) and cache.rejected == len(RENDERS)
    assert np.array_equal(again, clean)
    assert len(list((tmp_path / "old").rglob("*.npy.tag"))) == len(RENDERS)
    _, encoder, _ = _embedded(tmp_path / "old")
    assert encoder.embedded == 0
