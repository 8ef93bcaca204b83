"""Training and evaluating PASTA checkpoints from either input format (DESIGN 5).

``train_from_table`` (technique-level labels, a *proxy*) and ``train_from_release`` (the
PASTA-dataset) build labelled items per branch, evaluate them with held-out splits, fit the final
network on all items and write the checkpoint and its model card. ``evaluate_checkpoint``
rebuilds the same items from what the checkpoint recorded and reruns the same evaluation, so it
reproduces the card's numbers.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xaibench.errors import XaibenchError
from xaibench.pasta.checkpoint import PASTA_LABEL, PROXY_LABEL, load_checkpoint, save_checkpoint, write_card
from xaibench.pasta.network import QUESTIONS, TrainSettings
from xaibench.pasta.training.data import (
    CONCEPT_TECHNIQUES,
    SALIENCY_TECHNIQUES,
    Items,
    file_sha256,
    items_path,
    load_items,
    load_release,
    load_table,
    release_items,
    save_items,
    select_rows,
)
from xaibench.pasta.training.evaluation import Selection, configuration, cross_validate, fit_model, summarise
from xaibench.pasta.training.generate import TrackChoice, generate_items
from xaibench.plugins.manager import Registry
from xaibench.version import __version__

__all__ = [
    "DEFAULT_CONCEPT",
    "DEFAULT_SALIENCY",
    "BranchConfig",
    "EvalConfig",
    "build_table_items",
    "evaluate_checkpoint",
    "evaluate_items",
    "train_from_release",
    "train_from_table",
]

Log = Callable[[str], None] | None

PAPER_REFERENCE = [
    "Q1, CLIP variant: MSE 0.990, QWK 0.450, Spearman 0.484; SigLIP variant: MSE 0.989, QWK 0.471, Spearman 0.501",
    "humans vs the mode of 5 votes: QWK 0.849, Spearman 0.844",
]


@dataclass(frozen=True)
class BranchConfig:
    """Which table rows feed a branch and how its training explanations are made and embedded."""

    kind: str
    backbones: tuple[str, ...]
    choice: TrackChoice
    encoder: str
    encoder_params: dict[str, Any] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "backbones": list(self.backbones),
            "track": self.choice.to_dict(),
            "encoder": self.encoder,
            "encoder_params": dict(self.encoder_params),
            "mapping": dict(self.mapping),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BranchConfig:
        return cls(
            kind=d["kind"],
            backbones=tuple(d["backbones"]),
            choice=TrackChoice(**d["track"]),
            encoder=d["encoder"],
            encoder_params=dict(d.get("encoder_params") or {}),
            mapping=dict(d["mapping"]),
        )


@dataclass(frozen=True)
class EvalConfig:
    """Held-out protocols run at training time and by ``xaibench pasta evaluate``."""

    protocols: tuple[str, ...] = ("loto", "kfold")
    k: int = 3
    image_folds: int = 3

    def to_dict(self) -> dict[str, Any]:
        return {"protocols": list(self.protocols), "k": self.k, "image_folds": self.image_folds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalConfig:
        return cls(tuple(d.get("protocols", ("loto", "kfold"))), int(d.get("k", 3)), int(d.get("image_folds", 3)))


DEFAULT_SALIENCY = BranchConfig(
    kind="saliency",
    backbones=("ResNet50",),
    choice=TrackChoice(dataset="photos", model="efficientnet-lite0"),
    encoder="efficientnet-lite0-features",
    mapping=dict(SALIENCY_TECHNIQUES),
)
DEFAULT_CONCEPT = BranchConfig(
    kind="concept",
    backbones=("ConceptBottleneck",),
    choice=TrackChoice(dataset="shapes", model="shapes-cbm", dataset_params={"split": "test", "n": 16}),
    encoder="minilm-l6",
    mapping=dict(CONCEPT_TECHNIQUES),
)


def _protocol_text(protocol: str, ev: EvalConfig, technique_level: bool) -> str:
    if protocol == "loto":
        text = (
            f"leave one technique out x {ev.image_folds} image folds: every item predicted once by a network "
            "trained without its technique and without its image"
        )
    else:
        text = f"{ev.k} x {ev.k} grid of technique folds x image folds (images and techniques disjoint)"
    if technique_level:
        text += "; technique-level Spearman = Spearman between each technique's mean prediction and its table rating"
    return text


def evaluate_items(
    items: Items, settings: TrainSettings, ev: EvalConfig, *, technique_level: bool, log: Log = None
) -> dict[str, Any]:
    """Run each protocol of ``ev``; returns ``{protocol: {description, n_splits, questions}}``."""
    out: dict[str, Any] = {}
    for protocol in ev.protocols:
        preds, splits = cross_validate(
            items.embeddings,
            items.labels,
            items.images,
            items.techniques,
            settings,
            protocol=protocol,
            k=ev.k,
            image_folds=ev.image_folds,
        )
        out[protocol] = {
            "description": _protocol_text(protocol, ev, technique_level),
            "n_splits": len(splits),
            "questions": _rounded(summarise(preds, items.labels, items.techniques, QUESTIONS, technique_level)),
        }
        if log is not None:
            q1 = out[protocol]["questions"]["Q1"]
            log(
                f"{items.kind} {protocol}: Q1 MSE {q1['mse']} QWK {q1['qwk']} Spearman {q1['spearman']}"
                + (f" technique Spearman {q1.get('technique_spearman')}" if technique_level else "")
            )
    return out


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if obj != obj else round(obj, 4)
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def build_table_items(
    table: Path,
    config: BranchConfig,
    *,
    registry: Registry,
    workdir: Path,
    seed: int = 0,
    render_size: int = 224,
    top_k: int = 20,
    log: Log = None,
) -> tuple[Items, list[str]]:
    """Items of one branch from a ratings table (rows of the branch's backbones that map to an explainer)."""
    from xaibench.pasta.scorer import make_encoder

    rows, skipped = select_rows(load_table(table), config.backbones, config.kind, config.mapping)
    if len(rows) < 2:
        raise XaibenchError(
            f"{table}: only {len(rows)} {config.kind} technique(s) for backbone(s) {list(config.backbones)} "
            "map to an xaibench explainer; need at least 2"
        )
    missing = [
        config.mapping[r.technique] for r in rows if config.mapping[r.technique] not in registry.names("explainer")
    ]
    if missing:
        raise XaibenchError(f"explainer(s) {missing} are not installed (see `xaibench list explainers`)")
    encoder = make_encoder(config.encoder, dict(config.encoder_params))
    items = generate_items(
        rows,
        config.mapping,
        kind=config.kind,
        choice=config.choice,
        encoder=encoder,
        registry=registry,
        workdir=workdir,
        seed=seed,
        render_size=render_size,
        top_k=top_k,
        log=log,
    )
    items.info["encoder"] = {
        "name": config.encoder,
        "params": dict(config.encoder_params),
        "identity": encoder.identity,
    }
    items.info["rows"] = {r.technique: list(r.ratings) for r in rows}
    items.info["notes"] = {r.technique: r.note for r in rows if r.note}
    return items, skipped


def _fit_final(items: Items, settings: TrainSettings) -> tuple[Any, list[float], Selection | None]:
    """The network shipped in the checkpoint: fitted on all items (with ``head="auto"``, the configuration is
    first chosen on a validation split of all items, disjoint in images and techniques)."""
    return fit_model(items.embeddings, items.labels, items.images, items.techniques, settings)


def _chosen(settings: TrainSettings, selection: Selection | None) -> dict[str, Any]:
    """What a card records as the configuration of the shipped network."""
    if selection is not None:
        return selection.to_dict()
    return {
        "chosen": configuration(settings),
        "criterion": "fixed by the settings (no model selection)",
        "candidates": [],
    }


def _branch_card(
    items: Items,
    settings: TrainSettings,
    evaluation: dict[str, Any],
    skipped: list[str],
    selection: Selection | None = None,
) -> dict[str, Any]:
    return {
        "trained": True,
        "encoder": items.info["encoder"],
        "render": items.info.get("render"),
        "render_size": items.info.get("render_size"),
        "top_k": items.info.get("top_k"),
        "n_items": len(items),
        "n_images": len(set(items.images)),
        "techniques": sorted(set(items.techniques)),
        "settings": settings.to_dict(),
        "model_selection": _chosen(settings, selection),
        "skipped": skipped,
        "evaluation": evaluation,
    }


def _ship_items(out: Path, items: Sequence[Items]) -> dict[str, Any]:
    """Write the training items beside the checkpoint; what its metadata and card record of them."""
    path = items_path(out)
    sha = save_items(path, items)
    return {
        "file": path.name,
        "sha256": sha,
        "description": (
            "the embeddings, labels, image ids and techniques this checkpoint was trained and evaluated on; "
            "`xaibench pasta evaluate` re-trains on them, so the card's figures do not depend on the CPU that "
            "explains and embeds the training images (`--rebuild` makes them anew)"
        ),
    }


def train_from_table(
    table: Path,
    out: Path,
    *,
    branches: Sequence[BranchConfig],
    registry: Registry,
    settings: TrainSettings,
    ev: EvalConfig,
    workdir: Path,
    command: str,
    name: str | None = None,
    render_size: int = 224,
    top_k: int = 20,
    untrained: dict[str, str] | None = None,
    notes: Sequence[str] = (),
    log: Log = None,
) -> dict[str, Any]:
    """Train a proxy checkpoint from a technique-level ratings table; returns its card."""
    table = Path(table)
    name = name or Path(out).stem
    meta: dict[str, Any] = {
        "name": name,
        "label": PROXY_LABEL,
        "questions": list(QUESTIONS),
        "label_vocabulary": None,
        "source": {"kind": "table", "file": table.name, "sha256": file_sha256(table)},
        "settings": settings.to_dict(),
        "evaluation_config": ev.to_dict(),
        "render_size": render_size,
        "top_k": top_k,
        "branches": {},
    }
    card_branches: dict[str, Any] = {}
    networks = {}
    all_items: list[Items] = []
    for config in branches:
        items, skipped = build_table_items(
            table,
            config,
            registry=registry,
            workdir=workdir,
            seed=settings.seed,
            render_size=render_size,
            top_k=top_k,
            log=log,
        )
        all_items.append(items)
        evaluation = evaluate_items(items, settings, ev, technique_level=True, log=log)
        net, history, selection = _fit_final(items, settings)
        networks[config.kind] = net
        meta["branches"][config.kind] = {
            "config": config.to_dict(),
            "encoder": items.info["encoder"],
            "render": items.info["render"],
            "render_size": items.info["render_size"],
            "top_k": items.info["top_k"],
            "n_items": len(items),
            "final_loss": round(history[-1], 6),
            "model_selection": _chosen(settings, selection)["chosen"],
            "evaluation": evaluation,
        }
        card = _branch_card(items, settings, evaluation, skipped, selection)
        dataset_params = " " + json.dumps(config.choice.dataset_params) if config.choice.dataset_params else ""
        card["data_summary"] = (
            f"table {table.name} rows of backbone(s) {', '.join(config.backbones)}; explanations generated with the "
            f"mapped explainers on model {config.choice.model} ({items.info['model_identity']}) and dataset "
            f"{config.choice.dataset}{dataset_params} "
            f"({items.info['n_images']} images); each "
            "explanation labelled with its technique's mean rating (Q1 fidelity, Q2=Q3 complexity, Q4 objectivity, "
            "Q5=Q6 robustness)"
        )
        card["table_rows"] = items.info["rows"]
        card["explainers"] = items.info["explainers"]
        card["transcription_notes"] = items.info["notes"]
        card["explanation_failures"] = items.info["failures"]
        card["final_training_loss"] = round(history[-1], 6)
        card_branches[config.kind] = card
    for kind, reason in (untrained or {}).items():
        meta["branches"][kind] = {"reason": reason}
        card_branches[kind] = {"trained": False, "reason": reason}
    meta["items"] = _ship_items(Path(out), all_items)
    sha = save_checkpoint(Path(out), meta, networks)
    headline = {}
    loto = card_branches.get("saliency", {}).get("evaluation", {}).get("loto")
    if loto:
        rho = loto["questions"]["Q1"].get("technique_spearman")
        headline = {
            "saliency_loto_q1_technique_spearman": rho,
            "goal": 0.5,
            "goal_met": bool(rho is not None and rho >= 0.5),
            "n_techniques": len(card_branches["saliency"]["techniques"]),
        }
    card = {
        "name": name,
        "label": PROXY_LABEL,
        "headline": headline,
        "format": "xaibench.pasta/1",
        "checkpoint": Path(out).name,
        "checkpoint_sha256": sha,
        "xaibench": __version__,
        "created": dt.date.today().isoformat(),
        "command": command,
        "summary": (
            "A proxy of the PASTA score, NOT trained on the PASTA-dataset: its labels are per-technique mean "
            "human ratings transcribed from the PASTA paper, so every explanation of one technique gets the same "
            "label. It can only learn what distinguishes techniques' renders, not per-image human judgement. "
            "Scores are shown as 'PASTA (proxy, technique-level labels)'."
        ),
        "training_table": {"file": table.name, "sha256": meta["source"]["sha256"]},
        "training_items": meta["items"],
        "branches": card_branches,
        "caveats": [
            "Technique-level labels: within a technique all items share one label, so item-level QWK/Spearman mostly "
            "measure whether the technique is recognised; the technique-level Spearman is the meaningful number.",
            "The table's ratings were collected on other backbones (ResNet50 rows are used for the CNN branch); "
            "explanations here are generated on the bundled model, whose maps differ.",
            "Q2 and Q3 share the table's complexity column and Q5 and Q6 its robustness column.",
            "Few techniques: held-out Spearman over a dozen points has a wide sampling spread.",
            *notes,
        ],
        "reference": PAPER_REFERENCE,
    }
    write_card(Path(out), card)
    return card


def train_from_release(
    release: Path,
    out: Path,
    *,
    image_encoder: tuple[str, dict[str, Any]] | None,
    text_encoder: tuple[str, dict[str, Any]] | None,
    settings: TrainSettings,
    ev: EvalConfig,
    workdir: Path,
    command: str,
    name: str | None = None,
    render_size: int = 224,
    log: Log = None,
) -> dict[str, Any]:
    """Train on the PASTA-dataset release format; label ``PASTA``."""
    from xaibench.pasta.encoders import EmbeddingCache, embed_images, embed_texts
    from xaibench.pasta.scorer import make_encoder

    entries = load_release(Path(release))
    cache = EmbeddingCache(Path(workdir) / "cache" / "embeddings")
    name = name or Path(out).stem
    release_file = Path(release) / "human_annotations.json" if Path(release).is_dir() else Path(release)
    meta: dict[str, Any] = {
        "name": name,
        "label": PASTA_LABEL,
        "questions": list(QUESTIONS),
        "label_vocabulary": None,
        "source": {"kind": "pasta-release", "file": release_file.name, "sha256": file_sha256(release_file)},
        "settings": settings.to_dict(),
        "evaluation_config": ev.to_dict(),
        "branches": {},
    }
    networks, card_branches = {}, {}
    all_items: list[Items] = []
    for kind, spec in (("saliency", image_encoder), ("concept", text_encoder)):
        has_kind = any((e.explanation.suffix.lower() == ".txt") == (kind == "concept") for e in entries)
        if not has_kind:
            continue
        if spec is None:
            raise XaibenchError(f"the release has {kind} explanations but no encoder was given for them")
        enc = make_encoder(spec[0], dict(spec[1]))
        reason = enc.unavailable()
        if reason:
            raise XaibenchError(reason)
        items = release_items(
            entries,
            image_embed=(lambda x, enc=enc: embed_images(enc, x, cache)) if kind == "saliency" else None,
            text_embed=(lambda t, enc=enc: embed_texts(enc, t, cache)) if kind == "concept" else None,
            render_size=render_size,
            kind=kind,
        )
        items.info["encoder"] = {"name": spec[0], "params": dict(spec[1]), "identity": enc.identity}
        items.info["render"] = "pasta-release-images"
        items.info["render_size"] = render_size if kind == "saliency" else None
        all_items.append(items)
        evaluation = evaluate_items(items, settings, ev, technique_level=False, log=log)
        net, history, selection = _fit_final(items, settings)
        networks[kind] = net
        meta["branches"][kind] = {
            "config": {"kind": kind, "encoder": spec[0], "encoder_params": dict(spec[1])},
            "encoder": items.info["encoder"],
            "render": items.info["render"],
            "render_size": items.info["render_size"],
            "top_k": 20 if kind == "concept" else None,
            "n_items": len(items),
            "final_loss": round(history[-1], 6),
            "model_selection": _chosen(settings, selection)["chosen"],
            "evaluation": evaluation,
        }
        card = _branch_card(items, settings, evaluation, [], selection)
        card["data_summary"] = f"PASTA-dataset release {release_file.name}: {len(items)} rated explanations"
        card_branches[kind] = card
    if not networks:
        raise XaibenchError(f"{release}: no explanations to train on")
    meta["items"] = _ship_items(Path(out), all_items)
    sha = save_checkpoint(Path(out), meta, networks)
    card = {
        "name": name,
        "label": PASTA_LABEL,
        "format": "xaibench.pasta/1",
        "checkpoint": Path(out).name,
        "checkpoint_sha256": sha,
        "xaibench": __version__,
        "created": dt.date.today().isoformat(),
        "command": command,
        "summary": "Trained on the PASTA-dataset (human ratings per explanation, mode of the votes).",
        "training_release": meta["source"],
        "training_items": meta["items"],
        "branches": card_branches,
        "caveats": [
            "The release's explanation images are the renders shown to its raters; xaibench scores its own "
            "overlay render, which may differ in colormap and blend.",
        ],
        "reference": PAPER_REFERENCE,
    }
    write_card(Path(out), card)
    return card


def evaluate_checkpoint(
    checkpoint: str | Path,
    source: Path | None = None,
    *,
    registry: Registry | None = None,
    workdir: Path = Path(".xaibench"),
    rebuild: bool = False,
    log: Log = None,
) -> dict[str, Any]:
    """Rerun a checkpoint's recorded held-out evaluation and compare it with its model card.

    By default the evaluation re-trains on the training items shipped beside the checkpoint
    (``<name>.items.npz``, checked against the sha256 its metadata records), so it reproduces the
    card on any CPU. With ``rebuild`` (or for a checkpoint without items) the items are made anew
    from ``source`` (the ratings table or release it was trained on): explained, rendered and
    embedded here, so figures can move with the CPU's kernels. Returns
    ``{kind: {"evaluation", "recorded", "matches", "largest_difference", "items"}}``.
    """
    ckpt = load_checkpoint(checkpoint)
    meta = ckpt.meta
    src = meta.get("source", {})
    source_file = None
    if source is not None:
        source_file = Path(source) / "human_annotations.json" if Path(source).is_dir() else Path(source)
        if src.get("sha256") and file_sha256(source_file) != src["sha256"]:
            raise XaibenchError(f"{source_file}: not the file checkpoint {ckpt.name} was trained on (sha256 differs)")
    shipped = _shipped_items(ckpt) if not rebuild else None
    if shipped is None and source_file is None:
        why = "--rebuild needs" if rebuild else f"checkpoint {ckpt.name} ships no training items; give"
        raise XaibenchError(f"{why} the ratings table (--from-table) or release (--from-pasta) it was trained on")
    settings = TrainSettings.from_dict(meta["settings"])
    ev = EvalConfig.from_dict(meta.get("evaluation_config", {}))
    results: dict[str, Any] = {}
    for kind, branch in meta.get("branches", {}).items():
        if kind not in ckpt.networks:
            continue
        technique_level = src.get("kind") == "table"
        if shipped is not None:
            items = shipped[kind]
        else:
            assert source_file is not None
            items = _rebuilt_items(meta, kind, branch, source_file, registry, workdir, settings, log)
        evaluation = evaluate_items(items, settings, ev, technique_level=technique_level, log=log)
        recorded = branch.get("evaluation", {})
        results[kind] = {
            "evaluation": evaluation,
            "recorded": recorded,
            "matches": _close(evaluation, recorded),
            "largest_difference": _largest_difference(evaluation, recorded),
            "items": "shipped" if shipped is not None else "rebuilt",
        }
    return results


def _shipped_items(ckpt: Any) -> dict[str, Items] | None:
    """The checkpoint's shipped training items, checked against its metadata; None when it has none."""
    recorded = ckpt.meta.get("items")
    if not recorded or ckpt.path is None:
        return None
    path = items_path(ckpt.path)
    if not path.is_file():
        raise XaibenchError(f"{path}: the training items of checkpoint {ckpt.name} are missing")
    if file_sha256(path) != recorded.get("sha256"):
        raise XaibenchError(f"{path}: sha256 differs from what checkpoint {ckpt.name} records; the items were changed")
    return load_items(path)


def _rebuilt_items(
    meta: dict[str, Any],
    kind: str,
    branch: dict[str, Any],
    source_file: Path,
    registry: Registry | None,
    workdir: Path,
    settings: TrainSettings,
    log: Log,
) -> Items:
    """A branch's training items made anew from the table or release (explained and embedded here)."""
    if meta.get("source", {}).get("kind") == "table":
        if registry is None:
            raise XaibenchError("rebuilding items from a table needs the plugin registry")
        items, _ = build_table_items(
            source_file,
            BranchConfig.from_dict(branch["config"]),
            registry=registry,
            workdir=workdir,
            seed=settings.seed,
            render_size=int(meta.get("render_size", 224)),
            top_k=int(meta.get("top_k", 20)),
            log=log,
        )
        return items
    from xaibench.pasta.encoders import EmbeddingCache, embed_images, embed_texts
    from xaibench.pasta.scorer import make_encoder

    cfg = branch["config"]
    enc = make_encoder(cfg["encoder"], dict(cfg.get("encoder_params") or {}))
    cache = EmbeddingCache(Path(workdir) / "cache" / "embeddings")
    return release_items(
        load_release(source_file),
        image_embed=lambda x: embed_images(enc, x, cache),
        text_embed=lambda t: embed_texts(enc, t, cache),
        render_size=int(branch.get("render_size") or 224),
        kind=kind,
    )


def _largest_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between matching numbers of two nested results (0 if none)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return max((_largest_difference(a[k], b[k]) for k in a.keys() & b.keys()), default=0.0)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(float(a) - float(b))
    return 0.0


def _close(a: Any, b: Any, tol: float = 1e-3) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return bool(np.isclose(a, b, atol=tol, rtol=0))
    return a == b
