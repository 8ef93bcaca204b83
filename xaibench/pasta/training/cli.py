"""``xaibench pasta``: train and evaluate PASTA scoring networks (DESIGN 5; docs/pasta.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from xaibench.params import parse_value

__all__ = ["pasta"]


def _kv(items: tuple[str, ...], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint=what)
        key, raw = item.split("=", 1)
        try:
            out[key] = parse_value(raw)
        except ValueError as exc:
            shown = item if len(item) <= 60 else item[:57] + "..."
            raise click.BadParameter(f"{shown!r}: the value {exc}", param_hint=f"'{what}'") from None
    return out


def _command(ctx: click.Context) -> str:
    """The command line that reproduces this invocation (options given explicitly, in declaration order;
    ``--workdir`` and ``--quiet`` change no number and are left out)."""
    words = ["xaibench", "pasta", ctx.info_name or ""]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name is None or param.name in ("workdir", "quiet"):
            continue
        if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(param.name)
        flag = max(param.opts, key=len)
        if param.is_flag:
            words.append(flag if value else (param.secondary_opts or [flag])[0])
        elif param.multiple:
            for v in value:
                words += [flag, str(v)]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _log(quiet: bool) -> Any:
    return None if quiet else (lambda m: click.echo(m, err=True))


def _registry() -> Any:
    from xaibench.plugins.manager import get_registry

    return get_registry()


def _eval_config(protocols: tuple[str, ...], k: int, image_folds: int) -> Any:
    from xaibench.pasta.training.train import EvalConfig

    return EvalConfig(tuple(protocols) or ("loto", "kfold"), k, image_folds)


@click.group()
def pasta() -> None:
    """The PASTA perceptual score: train and evaluate scoring networks (docs/pasta.md)."""


_source_options = [
    click.option(
        "--from-table",
        "table",
        type=click.Path(path_type=Path, exists=True, dir_okay=False),
        help="Technique-level ratings CSV (format of pasta-paper/human_ratings_by_technique.csv): a proxy.",
    ),
    click.option(
        "--from-pasta",
        "release",
        type=click.Path(path_type=Path, exists=True),
        help="PASTA-dataset release: human_annotations.json or the folder holding it.",
    ),
]


def _sources(f: Any) -> Any:
    for option in reversed(_source_options):
        f = option(f)
    return f


@pasta.command("train")
@_sources
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="Checkpoint file (.pt).")
@click.option("--name", help="Checkpoint name in its card (default: the file stem).")
@click.option(
    "--saliency-backbone",
    "saliency_backbones",
    multiple=True,
    default=("ResNet50",),
    show_default=True,
    help="Table rows of these backbones train the saliency branch.",
)
@click.option(
    "--concept-backbone",
    "concept_backbones",
    multiple=True,
    default=("ConceptBottleneck",),
    show_default=True,
    help="Table rows of these backbones train the concept branch; 'none' leaves it untrained.",
)
@click.option("--no-concept-reason", default="", help="Recorded reason when --concept-backbone none.")
@click.option("--saliency-model", default="efficientnet-lite0", show_default=True)
@click.option("--saliency-dataset", default="photos", show_default=True)
@click.option("--saliency-dataset-param", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--saliency-limit", type=click.IntRange(min=1), help="At most this many images for saliency explanations."
)
@click.option("--concept-model", default="shapes-cbm", show_default=True)
@click.option("--concept-dataset", default="shapes", show_default=True)
@click.option(
    "--concept-dataset-param",
    multiple=True,
    metavar="KEY=VALUE",
    default=("split=test", "n=16"),
    show_default=True,
)
@click.option("--map", "mappings", multiple=True, metavar="TECHNIQUE=EXPLAINER", help="Override a technique mapping.")
@click.option("--image-encoder", default="efficientnet-lite0-features", show_default=True)
@click.option("--image-encoder-param", multiple=True, metavar="KEY=VALUE", help="e.g. pretrained=/path/to/weights.bin")
@click.option("--text-encoder", default="minilm-l6", show_default=True)
@click.option("--text-encoder-param", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--head",
    type=click.Choice(["auto", "mlp", "ridge"]),
    default="auto",
    show_default=True,
    help=(
        "auto: choose the head (ridge, PCA + MLP, MLP), its weight decay and epochs on a validation split "
        "disjoint in images and techniques; mlp / ridge: that head with the options below."
    ),
)
@click.option(
    "--alpha",
    default=100.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Ridge penalty (--head ridge).",
)
@click.option(
    "--epochs", default=500, show_default=True, type=click.IntRange(min=1), help="Training epochs (--head mlp)."
)
@click.option("--batch-size", default=128, show_default=True, type=click.IntRange(min=1))
@click.option("--lr", default=1e-3, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--loss-weights", default="1,0.01,0.1", show_default=True, help="a,b,c: cosine, MSE, ranking hinge.")
@click.option(
    "--hidden",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Hidden units per question head (--head mlp).",
)
@click.option("--dropout", default=0.1, show_default=True, type=click.FloatRange(0, 1, max_open=True))
@click.option(
    "--pca",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Whitened principal components of the embeddings (0: off; --head mlp).",
)
@click.option(
    "--weight-decay", default=0.0, show_default=True, type=click.FloatRange(min=0), help="L2 penalty (--head mlp)."
)
@click.option("--seed", default=0, show_default=True)
@click.option("--protocol", "protocols", multiple=True, type=click.Choice(["loto", "kfold"]), help="Default: both.")
@click.option("--k", default=3, show_default=True, type=click.IntRange(min=1), help="Folds per axis for kfold.")
@click.option("--image-folds", default=3, show_default=True, type=click.IntRange(min=1), help="Image folds for loto.")
@click.option("--note", "notes", multiple=True, help="A caveat to add to the model card (repeatable).")
@click.option("--render-size", default=224, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--top-k", default=20, show_default=True, type=click.IntRange(min=1), help="Concepts in a concept sentence."
)
@click.option("--workdir", type=click.Path(path_type=Path), default=Path(".xaibench"), show_default=True)
@click.option("--quiet", "-q", is_flag=True)
@click.pass_context
def train_cmd(ctx: click.Context, **opts: Any) -> None:
    """Train a scoring network, evaluate it held-out and write the checkpoint and its model card."""
    from xaibench.pasta.network import TrainSettings
    from xaibench.pasta.training.generate import TrackChoice
    from xaibench.pasta.training.train import (
        DEFAULT_CONCEPT,
        DEFAULT_SALIENCY,
        BranchConfig,
        train_from_release,
        train_from_table,
    )

    if bool(opts["table"]) == bool(opts["release"]):
        raise click.UsageError("give exactly one of --from-table and --from-pasta")
    try:
        a, b, c = (float(x) for x in opts["loss_weights"].split(","))
    except ValueError:
        raise click.BadParameter("expected three numbers a,b,c", param_hint="--loss-weights") from None
    settings = TrainSettings(
        epochs=opts["epochs"],
        batch_size=opts["batch_size"],
        lr=opts["lr"],
        weight_decay=opts["weight_decay"],
        a=a,
        b=b,
        c=c,
        hidden=opts["hidden"],
        dropout=opts["dropout"],
        pca=opts["pca"],
        seed=opts["seed"],
        head=opts["head"],
        alpha=opts["alpha"],
    )
    ev = _eval_config(opts["protocols"], opts["k"], opts["image_folds"])
    command = _command(ctx)
    log = _log(opts["quiet"])
    image_params = _kv(opts["image_encoder_param"], "--image-encoder-param")
    text_params = _kv(opts["text_encoder_param"], "--text-encoder-param")
    if opts["release"]:
        card = train_from_release(
            opts["release"],
            opts["out"],
            image_encoder=(opts["image_encoder"], image_params),
            text_encoder=(opts["text_encoder"], text_params),
            settings=settings,
            ev=ev,
            workdir=opts["workdir"],
            command=command,
            name=opts["name"],
            render_size=opts["render_size"],
            log=log,
        )
    else:
        overrides = _kv(opts["mappings"], "--map")
        branches = [
            BranchConfig(
                kind="saliency",
                backbones=tuple(opts["saliency_backbones"]),
                choice=TrackChoice(
                    dataset=opts["saliency_dataset"],
                    model=opts["saliency_model"],
                    dataset_params=_kv(opts["saliency_dataset_param"], "--saliency-dataset-param"),
                    limit=opts["saliency_limit"],
                ),
                encoder=opts["image_encoder"],
                encoder_params=image_params,
                mapping={**DEFAULT_SALIENCY.mapping, **{k: str(v) for k, v in overrides.items()}},
            )
        ]
        untrained = {}
        if [x.lower() for x in opts["concept_backbones"]] == ["none"]:
            untrained["concept"] = opts["no_concept_reason"] or "not trained (--concept-backbone none)"
        else:
            branches.append(
                BranchConfig(
                    kind="concept",
                    backbones=tuple(opts["concept_backbones"]),
                    choice=TrackChoice(
                        dataset=opts["concept_dataset"],
                        model=opts["concept_model"],
                        dataset_params=_kv(opts["concept_dataset_param"], "--concept-dataset-param"),
                    ),
                    encoder=opts["text_encoder"],
                    encoder_params=text_params,
                    mapping={**DEFAULT_CONCEPT.mapping, **{k: str(v) for k, v in overrides.items()}},
                )
            )
        card = train_from_table(
            opts["table"],
            opts["out"],
            branches=branches,
            registry=_registry(),
            settings=settings,
            ev=ev,
            workdir=opts["workdir"],
            command=command,
            name=opts["name"],
            render_size=opts["render_size"],
            top_k=opts["top_k"],
            untrained=untrained,
            notes=list(opts["notes"]),
            log=log,
        )
    _print_card_numbers(card)
    click.echo(f"wrote {opts['out']} and its model card ({Path(opts['out']).with_suffix('.card.md')})")


def _print_card_numbers(card: dict[str, Any]) -> None:
    for kind, branch in card.get("branches", {}).items():
        if not branch.get("trained", True):
            click.echo(f"{kind}: not trained ({branch.get('reason')})")
            continue
        for protocol, result in branch.get("evaluation", {}).items():
            click.echo(_table(f"{kind} / {protocol}", result["questions"]))


def _table(title: str, questions: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = [title, f"{'question':<9}{'n':>5}{'MSE':>8}{'QWK':>8}{'rho':>8}{'rho(tech)':>11}"]
    for q, r in questions.items():
        lines.append(
            f"{q:<9}{r['n']:>5}{f(r['mse']):>8}{f(r['qwk']):>8}{f(r['spearman']):>8}"
            f"{f(r.get('technique_spearman')):>11}"
        )
    return "\n".join(lines)


@pasta.command("evaluate")
@_sources
@click.option("--checkpoint", default="proxy-v1", show_default=True, help="Packaged checkpoint name or file.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Make the training items anew from --from-table/--from-pasta (explain and embed here) instead of "
    "re-training on the items shipped beside the checkpoint; figures may then move with the CPU.",
)
@click.option("--workdir", type=click.Path(path_type=Path), default=Path(".xaibench"), show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--quiet", "-q", is_flag=True)
def evaluate_cmd(
    table: Path | None,
    release: Path | None,
    checkpoint: str,
    rebuild: bool,
    workdir: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Rerun a checkpoint's recorded held-out evaluation and say whether it matches its model card.

    Re-trains on the training items shipped beside the checkpoint (the same numbers on every CPU);
    --rebuild makes them anew from the table or release it was trained on.
    """
    from xaibench.pasta.training.train import evaluate_checkpoint

    if table and release:
        raise click.UsageError("give at most one of --from-table and --from-pasta")
    source = table or release
    if rebuild and source is None:
        raise click.UsageError("--rebuild needs --from-table or --from-pasta")
    registry = _registry() if rebuild or source is not None else None
    results = evaluate_checkpoint(
        checkpoint, source, registry=registry, workdir=workdir, rebuild=rebuild, log=_log(quiet)
    )
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for kind, result in results.items():
        for protocol, r in result["evaluation"].items():
            click.echo(_table(f"{kind} / {protocol}", r["questions"]))
        verdict = "matches" if result["matches"] else "DIFFERS FROM"
        click.echo(
            f"{kind}: {verdict} the model card (items {result['items']}; "
            f"largest difference {result['largest_difference']:.4f})"
        )


@pasta.command("card")
@click.option("--checkpoint", default="proxy-v1", show_default=True, help="Packaged checkpoint name or file.")
def card_cmd(checkpoint: str) -> None:
    """Print a checkpoint's model card (Markdown)."""
    from xaibench.pasta.checkpoint import resolve_checkpoint

    path = resolve_checkpoint(checkpoint).with_suffix(".card.md")
    if not path.is_file():
        raise click.ClickException(f"{path}: no model card beside the checkpoint")
    click.echo(path.read_text(encoding="utf-8"))
