"""PASTA checkpoints: scoring networks per explanation kind plus JSON metadata (and a model card).

File format ``xaibench.pasta/1``, written with ``torch.save`` and read with
``torch.load(..., weights_only=True)`` (no pickled code): a dict with ``format`` (str), ``meta``
(a JSON string) and ``branches`` (``{"saliency" | "concept": state_dict}``). ``meta`` records the
label under which scores are shown, the questions, an optional fixed label vocabulary, and per
branch the encoder (name, params, identity), the render (name/version, size or top-k), the
network shape, the training settings and data, and held-out evaluation numbers. A model card
(``<name>.card.json`` and ``<name>.card.md``) sits beside the checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xaibench.files import write_bytes_atomic, write_json_atomic, write_text_atomic
from xaibench.pasta.network import QUESTIONS, ScoringNetwork

__all__ = [
    "DEFAULT_CHECKPOINT",
    "FORMAT",
    "PASTA_LABEL",
    "PROXY_LABEL",
    "Checkpoint",
    "load_checkpoint",
    "packaged_dir",
    "resolve_checkpoint",
    "save_checkpoint",
    "write_card",
]

FORMAT = "xaibench.pasta/1"
PROXY_LABEL = "PASTA (proxy, technique-level labels)"
PASTA_LABEL = "PASTA"
DEFAULT_CHECKPOINT = "proxy-v1"


def packaged_dir() -> Path:
    """Folder of the checkpoints shipped inside the package."""
    return Path(__file__).resolve().parent.parent / "data" / "pasta"


def resolve_checkpoint(name_or_path: str | Path) -> Path:
    """A checkpoint file: an existing path, else a packaged checkpoint name (e.g. ``proxy-v1``)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    packaged = packaged_dir() / f"{name_or_path}.pt"
    if packaged.is_file():
        return packaged
    shipped = sorted(p.stem for p in packaged_dir().glob("*.pt")) if packaged_dir().is_dir() else []
    raise FileNotFoundError(
        f"{name_or_path}: no such PASTA checkpoint file or packaged checkpoint "
        f"(packaged: {', '.join(shipped) or 'none'})"
    )


@dataclass
class Checkpoint:
    """A loaded checkpoint: metadata, one network per branch, file path and digest."""

    meta: dict[str, Any]
    networks: dict[str, ScoringNetwork]
    path: Path | None = None
    sha256: str = ""

    @property
    def label(self) -> str:
        return str(self.meta.get("label", PROXY_LABEL))

    @property
    def name(self) -> str:
        return str(self.meta.get("name", self.path.stem if self.path else "unnamed"))

    def branch(self, kind: str) -> dict[str, Any] | None:
        return self.meta.get("branches", {}).get(kind)

    def card(self) -> dict[str, Any] | None:
        """The model card beside the checkpoint file (``<name>.card.json``), when it exists, is a
        JSON object and names this checkpoint's sha256 (a stale card is not this checkpoint's)."""
        if self.path is None:
            return None
        try:
            card = json.loads(self.path.with_suffix(".card.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(card, dict) or card.get("checkpoint_sha256") not in (None, self.sha256):
            return None
        return card

    def heldout_q1_spearman(self) -> float | None:
        """The held-out technique-level Spearman on Q1 its model card reports (``headline``:
        ``q1_technique_spearman``, or ``<branch>_..._q1_technique_spearman``, saliency first), or
        None. The leaderboard ranks the perceptual family only from 0.3 up (DESIGN 7)."""
        headline = (self.card() or {}).get("headline")
        if not isinstance(headline, dict):
            return None
        keys = sorted(
            (k for k in headline if str(k).endswith("q1_technique_spearman")),
            key=lambda k: not k.startswith("saliency"),
        )
        for key in keys:
            value = headline[key]
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        return None


def save_checkpoint(path: Path, meta: dict[str, Any], networks: dict[str, ScoringNetwork]) -> str:
    """Write the checkpoint atomically; returns its sha256."""
    for kind, net in networks.items():
        branch = meta.setdefault("branches", {}).setdefault(kind, {})
        branch["network"] = {
            "dim": net.dim,
            "hidden": net.hidden,
            "n_questions": net.n_questions,
            "dropout": net.dropout_p,
            "pca": net.pca,
            "head": net.head,
        }
    meta.setdefault("questions", list(QUESTIONS))
    payload = {
        "format": FORMAT,
        "meta": json.dumps(meta, sort_keys=True),
        "branches": {
            k: {n: t.detach().cpu().float().contiguous() for n, t in net.state_dict().items()}
            for k, net in networks.items()
        },
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    data = buf.getvalue()
    write_bytes_atomic(Path(path), data)
    Path(path).chmod(0o644)  # the atomic write's temporary file is private; checkpoints are shipped data
    return hashlib.sha256(data).hexdigest()


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint with ``weights_only=True``; raises ``ValueError`` naming the file on bad content."""
    path = resolve_checkpoint(path)
    data = path.read_bytes()
    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path}: not a readable PASTA checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not a PASTA checkpoint of format {FORMAT}")
    try:
        meta = json.loads(payload["meta"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: checkpoint metadata is not JSON ({exc})") from exc
    networks = {}
    for kind, state in dict(payload.get("branches", {})).items():
        shape = meta.get("branches", {}).get(kind, {}).get("network")
        if not shape:
            raise ValueError(f"{path}: branch {kind!r} has no network shape in its metadata")
        net = ScoringNetwork(
            shape["dim"],
            shape["hidden"],
            shape["n_questions"],
            shape.get("dropout", 0.0),
            shape.get("pca", 0),
            head=shape.get("head", "mlp"),
        )
        try:
            net.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ValueError(
                f"{path}: branch {kind!r} weights do not match its shape ({str(exc).splitlines()[0]})"
            ) from exc
        networks[kind] = net.eval()
    return Checkpoint(meta=meta, networks=networks, path=path, sha256=hashlib.sha256(data).hexdigest())


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return "n/a" if value != value else f"{value:.3f}"
    return str(value)


def write_card(path_pt: Path, card: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``<name>.card.json`` and a readable ``<name>.card.md`` beside the checkpoint."""
    base = Path(path_pt).with_suffix("")
    json_path, md_path = base.with_suffix(".card.json"), base.with_suffix(".card.md")
    write_json_atomic(json_path, card)
    lines = [f"# PASTA checkpoint `{card['name']}`", "", f"**Label wherever its scores appear:** {card['label']}", ""]
    lines += [card.get("summary", ""), ""]
    head = card.get("headline") or {}
    if head:
        lines += [
            f"**Leave-one-technique-out Spearman for Q1 (saliency, {head.get('n_techniques')} techniques, technique "
            f"means vs the table): {_fmt(head.get('saliency_loto_q1_technique_spearman'))}** "
            f"(goal {head.get('goal')}: {'met' if head.get('goal_met') else 'not met'}).",
            "",
        ]
    lines += [f"- reproduce: `{card.get('command', '')}`"]
    items = card.get("training_items")
    if isinstance(items, dict):
        lines += [
            f"- training items: `{items.get('file')}` (sha256 `{items.get('sha256')}`); "
            f"`xaibench pasta evaluate --checkpoint {card['name']}` re-trains on them and reproduces the "
            "figures below on any CPU"
        ]
    for note in card.get("reproducibility") or []:
        lines += [f"- reproducibility: {note}"]
    lines += [
        f"- checkpoint sha256: `{card.get('checkpoint_sha256', '')}`",
        f"- xaibench {card.get('xaibench', '')}",
        "",
    ]
    for kind, branch in card.get("branches", {}).items():
        lines += [f"## {kind} branch", ""]
        if not branch.get("trained", True):
            lines += [f"Not trained: {branch.get('reason', '')}", ""]
            continue
        enc = branch.get("encoder", {})
        lines += [
            f"- encoder: `{enc.get('name')}` ({enc.get('identity')}), params {json.dumps(enc.get('params', {}))}",
            f"- render: `{branch.get('render')}`"
            + (f", {branch['render_size']} px" if branch.get("render_size") else "")
            + (f", top {branch['top_k']} concepts" if branch.get("top_k") else ""),
            f"- training data: {branch.get('data_summary', '')}",
            f"- items: {branch.get('n_items')}, techniques: {', '.join(branch.get('techniques', []))}",
            f"- settings: {json.dumps(branch.get('settings', {}))}",
        ]
        selection = branch.get("model_selection")
        if isinstance(selection, dict) and selection.get("chosen"):
            lines.append(
                f"- configuration of the shipped network: {json.dumps(selection['chosen'])} "
                f"({selection.get('criterion', '')})"
            )
        if branch.get("skipped"):
            lines.append(f"- left out: {'; '.join(branch['skipped'])}")
        lines.append("")
        for protocol, result in branch.get("evaluation", {}).items():
            lines += [f"### Held-out evaluation: {protocol}", "", result.get("description", ""), ""]
            lines += [
                "| question | n | MSE | QWK | Spearman (items) | Spearman (techniques) |",
                "|---|---|---|---|---|---|",
            ]
            for q in QUESTIONS:
                r = result.get("questions", {}).get(q)
                if r:
                    lines.append(
                        f"| {q} | {r['n']} | {_fmt(r['mse'])} | {_fmt(r['qwk'])} | {_fmt(r['spearman'])} | "
                        f"{_fmt(r.get('technique_spearman', float('nan')))} |"
                    )
            lines.append("")
    if card.get("caveats"):
        lines += ["## Caveats", ""] + [f"- {c}" for c in card["caveats"]] + [""]
    if card.get("reference"):
        lines += ["## Reference figures (the paper, PASTA-dataset, held-out images and methods)", ""]
        lines += [f"- {c}" for c in card["reference"]] + [""]
    write_text_atomic(md_path, "\n".join(lines))
    for path in (json_path, md_path):
        path.chmod(0o644)
    return json_path, md_path
