"""Training data for the PASTA scoring network: the two input formats (DESIGN 5).

(a) The PASTA-dataset release: ``human_annotations.json``, a list of entries with ``img`` and
    ``explication`` paths (relative to the JSON file's folder, or absolute), ``GTclass``,
    ``predictedclass`` and ``Annotation``, a list of per-annotator ``{"Q1": 1..5, ..., "Q6": 1..5}``.
    The label of a question is the **mode** of its votes (ties: the tied value closest to the
    votes' mean, then the lower one). Explanation file names carry ``<dataset>_<image id>_<xai id>``:
    the first ``_``-separated field is the dataset, the last the XAI method, the fields between
    them the image id (used to keep images and methods disjoint in splits). An explanation that is
    an image (``.png``/``.jpg``/...) is the render shown to the raters and is embedded as is
    (resized to the render size); a ``.txt`` explanation is a sentence for the text encoder.

(b) A technique-level ratings table (the format of ``pasta-paper/human_ratings_by_technique.csv``):
    columns ``technique, backbone, explanation_type, fidelity_q1, complexity_q2_q3,
    objectivity_q4, robustness_q5_q6``. Grouped columns are spread onto the questions they average:
    Q1 = fidelity, Q2 = Q3 = complexity, Q4 = objectivity, Q5 = Q6 = robustness. Training from it
    generates explanations with the mapped explainers (:data:`SALIENCY_TECHNIQUES`,
    :data:`CONCEPT_TECHNIQUES`) on a chosen model and image set and labels every explanation with
    its technique's mean rating.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.files import write_bytes_atomic
from xaibench.pasta.network import QUESTIONS

__all__ = [
    "CONCEPT_TECHNIQUES",
    "SALIENCY_TECHNIQUES",
    "TABLE_COLUMNS",
    "Items",
    "ReleaseEntry",
    "TableRow",
    "file_sha256",
    "items_path",
    "load_items",
    "load_release",
    "load_table",
    "mode_rating",
    "parse_explanation_name",
    "save_items",
]

SALIENCY_TECHNIQUES: dict[str, str] = {
    "GradCAM": "gradcam",
    "GradCAMPlusPlus": "gradcampp",
    "XGradCAM": "xgradcam",
    "HiResCAM": "hirescam",
    "GradCAMElementWise": "gradcam-elementwise",
    "EigenCAM": "eigencam",
    "EigenGradCAM": "eigengradcam",
    "AblationCAM": "ablationcam",
    "ScoreCAM": "scorecam",
    "FullGrad": "fullgrad",
    "DeepFeatureFactorization": "dff",
    "LIME": "lime",
    "SHAP": "kernel-shap",
}
"""Table technique -> xaibench explainer (saliency). ``BCos`` needs a B-cos network: no mapping."""

CONCEPT_TECHNIQUES: dict[str, str] = {
    "LIME-CBM": "concept-lime",
    "SHAP-CBM": "concept-shap",
    "RISE-CBM": "concept-rise",
    "CLIP-Linear-sample": "concept-linear",
}
"""Table technique -> xaibench concept explainer. CLIP-QDA-sample and X-NeSyL have no counterpart."""

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "fidelity_q1": ("Q1",),
    "complexity_q2_q3": ("Q2", "Q3"),
    "objectivity_q4": ("Q4",),
    "robustness_q5_q6": ("Q5", "Q6"),
}


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class Items:
    """Labelled explanations ready for training: embeddings and ratings (NaN = no label)."""

    embeddings: np.ndarray  # (N, D) float32
    labels: np.ndarray  # (N, Q) float64 in [1, 5]
    images: list[str]
    techniques: list[str]
    kind: str  # "saliency" or "concept"
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.images)


# ----------------------------------------------------------------------------- items beside a checkpoint

ITEMS_SUFFIX = ".items.npz"


def items_path(checkpoint: Path) -> Path:
    """The training items shipped beside a checkpoint: ``<name>.items.npz``."""
    return Path(checkpoint).with_suffix(ITEMS_SUFFIX)


def save_items(path: Path, branches: Sequence[Items]) -> str:
    """Write the branches' items (embeddings, labels, image ids, techniques) to one ``.npz`` file,
    atomically and without pickles; returns its sha256.

    Evaluation re-trains on exactly these numbers, so a model card's held-out figures do not
    depend on the CPU that re-explains and re-embeds the training images (DESIGN 6).
    """
    arrays: dict[str, np.ndarray] = {}
    for items in branches:
        arrays[f"{items.kind}.embeddings"] = np.asarray(items.embeddings, dtype=np.float32)
        arrays[f"{items.kind}.labels"] = np.asarray(items.labels, dtype=np.float64)
        arrays[f"{items.kind}.images"] = np.asarray(items.images, dtype=str)
        arrays[f"{items.kind}.techniques"] = np.asarray(items.techniques, dtype=str)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    data = buf.getvalue()
    write_bytes_atomic(Path(path), data)
    return hashlib.sha256(data).hexdigest()


def load_items(path: Path) -> dict[str, Items]:
    """The items saved by :func:`save_items`, per branch kind (read with ``allow_pickle=False``)."""
    with np.load(Path(path), allow_pickle=False) as data:
        kinds = sorted({name.split(".", 1)[0] for name in data.files})
        return {
            kind: Items(
                embeddings=data[f"{kind}.embeddings"],
                labels=data[f"{kind}.labels"],
                images=[str(x) for x in data[f"{kind}.images"]],
                techniques=[str(x) for x in data[f"{kind}.techniques"]],
                kind=kind,
            )
            for kind in kinds
        }


# ----------------------------------------------------------------------------- (a) release format


def mode_rating(votes: Sequence[float]) -> float:
    """The most frequent vote; ties go to the tied value closest to the mean, then the lower one."""
    values = np.asarray([v for v in votes if v is not None], dtype=np.float64)
    if len(values) == 0:
        return float("nan")
    uniq, counts = np.unique(values, return_counts=True)
    tied = uniq[counts == counts.max()]
    mean = values.mean()
    return float(sorted(tied, key=lambda v: (abs(v - mean), v))[0])


def parse_explanation_name(path: str) -> tuple[str, str, str]:
    """``(dataset, image id, xai id)`` from ``<dataset>_<image id>_<xai id>.<ext>``."""
    stem = Path(path).stem
    parts = stem.split("_")
    if len(parts) < 3:
        raise ValueError(f"{path}: explanation file name is not <dataset>_<image id>_<xai id>")
    return parts[0], "_".join(parts[1:-1]), parts[-1]


@dataclass(frozen=True)
class ReleaseEntry:
    image: Path
    explanation: Path
    dataset: str
    image_id: str
    xai: str
    gt_class: str
    predicted_class: str
    labels: tuple[float, ...]  # mode per question
    n_votes: int


def _release_entry(entry: Any, where: str, root: Path) -> ReleaseEntry:
    """One entry of ``human_annotations.json``; ``where`` names the file and entry in errors."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: not an object")
    missing = [k for k in ("img", "explication", "Annotation") if k not in entry]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    for key in ("img", "explication"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise ValueError(f"{where}: {key} must be a file path (a non-empty string), got {_brief(entry[key])}")
    votes = entry["Annotation"]
    if not isinstance(votes, list) or not votes or not all(isinstance(v, dict) for v in votes):
        raise ValueError(f"{where}: Annotation must be a non-empty list of {{'Q1': 1..5, ...}} objects")
    labels = []
    for q in QUESTIONS:
        qv = [v.get(q) for v in votes if v.get(q) is not None]
        bad = [x for x in qv if isinstance(x, bool) or not isinstance(x, int | float) or not 1 <= x <= 5]
        if bad:
            raise ValueError(f"{where}: {q} votes must be in 1..5, got {[_brief(x) for x in bad[:3]]}")
        labels.append(mode_rating(qv))
    for key in ("GTclass", "predictedclass"):
        if isinstance(entry.get(key), dict | list):
            raise ValueError(f"{where}: {key} must be a class name or index, got {_brief(entry[key])}")
    dataset, image_id, xai = parse_explanation_name(entry["explication"])
    img = Path(entry["img"]) if Path(entry["img"]).is_absolute() else root / entry["img"]
    exp = Path(entry["explication"]) if Path(entry["explication"]).is_absolute() else root / entry["explication"]
    return ReleaseEntry(
        image=img,
        explanation=exp,
        dataset=dataset,
        image_id=f"{dataset}_{image_id}",
        xai=xai,
        gt_class=str(entry.get("GTclass", "")),
        predicted_class=str(entry.get("predictedclass", "")),
        labels=tuple(labels),
        n_votes=len(votes),
    )


def _brief(value: Any) -> str:
    """A short description of a JSON value for an error message (never a deep or huge repr)."""
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "an array"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a huge integer"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load_release(path: Path) -> list[ReleaseEntry]:
    """Read ``human_annotations.json`` (a file, or a folder holding it) of the PASTA-dataset release."""
    path = Path(path)
    if path.is_dir():
        path = path / "human_annotations.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: PASTA annotations file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except ValueError as exc:  # an integer over Python's int conversion limit (4,300 digits)
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of entries, got {type(data).__name__}")
    try:
        out = [_release_entry(entry, f"{path}: entry {n}", path.parent) for n, entry in enumerate(data)]
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    if not out:
        raise ValueError(f"{path}: no entries")
    return out


def release_items(
    entries: Sequence[ReleaseEntry],
    *,
    image_embed: Callable[[np.ndarray], np.ndarray] | None,
    text_embed: Callable[[list[str]], np.ndarray] | None,
    render_size: int = 224,
    kind: str = "saliency",
) -> Items:
    """Embed the release's explanations of one kind (image files: saliency; ``.txt``: concept)."""
    from xaibench.datasets.io import read_rgb
    from xaibench.pasta.render import resize_square

    chosen = [e for e in entries if (e.explanation.suffix.lower() == ".txt") == (kind == "concept")]
    if not chosen:
        raise ValueError(f"no {kind} explanations in the release (images: saliency, .txt files: concept)")
    if kind == "concept":
        if text_embed is None:
            raise ValueError("concept explanations need a text encoder")
        texts = []
        for e in chosen:
            if not e.explanation.is_file():
                raise FileNotFoundError(f"{e.explanation}: explanation file not found")
            texts.append(e.explanation.read_text(encoding="utf-8").strip())
        emb = text_embed(texts)
    else:
        if image_embed is None:
            raise ValueError("saliency explanations need an image encoder")
        renders = []
        for e in chosen:
            if not e.explanation.is_file():
                raise FileNotFoundError(f"{e.explanation}: explanation file not found")
            img = read_rgb(e.explanation)
            renders.append(np.rint(np.clip(resize_square(img, render_size), 0, 1) * 255).astype(np.uint8))
        emb = np.concatenate([image_embed(np.stack(renders[i : i + 64])) for i in range(0, len(renders), 64)])
    return Items(
        embeddings=np.asarray(emb, dtype=np.float32),
        labels=np.array([e.labels for e in chosen], dtype=np.float64),
        images=[e.image_id for e in chosen],
        techniques=[e.xai for e in chosen],
        kind=kind,
        info={"source": "pasta-release", "n_entries": len(chosen), "render": "release images (as shown to raters)"},
    )


# ----------------------------------------------------------------------------- (b) technique table


@dataclass(frozen=True)
class TableRow:
    technique: str
    backbone: str
    explanation_type: str  # "saliency" or "concepts"
    ratings: tuple[float, ...]  # Q1..Q6
    note: str = ""


def load_table(path: Path) -> list[TableRow]:
    """Read a technique-level ratings table; grouped columns are spread onto Q1..Q6."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: ratings table not found")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = set(reader.fieldnames or [])
        need = {"technique", "backbone", "explanation_type", *TABLE_COLUMNS}
        if not need <= header:
            raise ValueError(f"{path}: missing column(s) {sorted(need - header)}")
        rows = []
        for n, raw in enumerate(reader, start=2):
            ratings: dict[str, float] = {}
            for column, questions in TABLE_COLUMNS.items():
                try:
                    value = float(raw[column])
                except (TypeError, ValueError):
                    raise ValueError(f"{path}: line {n}: {column} is not a number: {raw[column]!r}") from None
                if not 1.0 <= value <= 5.0:
                    raise ValueError(f"{path}: line {n}: {column} = {value} is outside 1..5")
                for q in questions:
                    ratings[q] = value
            rows.append(
                TableRow(
                    technique=raw["technique"].strip(),
                    backbone=raw["backbone"].strip(),
                    explanation_type=raw["explanation_type"].strip(),
                    ratings=tuple(ratings[q] for q in QUESTIONS),
                    note=(raw.get("transcription_note") or "").strip(),
                )
            )
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def select_rows(
    rows: Sequence[TableRow], backbones: Sequence[str], kind: str, mapping: Mapping[str, str]
) -> tuple[list[TableRow], list[str]]:
    """Rows of the wanted backbones and kind that map to an explainer; plus the reasons others were left out."""
    wanted_type = "saliency" if kind == "saliency" else "concepts"
    chosen, skipped = [], []
    for row in rows:
        if row.explanation_type != wanted_type:
            continue
        if row.backbone not in backbones:
            continue
        if row.technique not in mapping:
            skipped.append(f"{row.technique} ({row.backbone}): no xaibench explainer for it")
            continue
        chosen.append(row)
    techniques = [r.technique for r in chosen]
    dupes = sorted({t for t in techniques if techniques.count(t) > 1})
    if dupes:
        raise ValueError(f"technique(s) {dupes} appear for several chosen backbones {list(backbones)}; choose one")
    return chosen, skipped
