"""One rule for the explained class (DESIGN 1, issue 24 item 5): the model's prediction on the
clean image, unless the track says ``target = "label"``. ``folder`` and ``hf`` follow it alike:
the same labelled data read either way gives the same records under both rules; the built-in
tracks whose datasets map their labels onto the model's classes (photos, the real suite) say
``target = "label"`` so their numbers stay those of the golden run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_adhoc_tracks import checkpoint, image_array, mask_array, records, run_cli

from xaibench.api import Sample
from xaibench.errors import XaibenchError
from xaibench.runner.track import resolve_targets
from xaibench.suites.embedded import DefaultSuite, FullSuite

__all__ = ["checkpoint"]  # the session fixture, imported for the end-to-end test

LABELS = (281, 7, 404)  # ImageNet indices: model classes of the resnet18 checkpoint


def _sample(i: int, *, label: int | None = None, target: int | None = None, **meta: object) -> Sample:
    return Sample(id=f"s{i}", image=np.zeros((2, 2, 3), np.float32), label=label, target=target, meta=dict(meta))


PROBS = np.array(
    [
        [0.1, 0.6, 0.2, 0.1],
        [0.1, 0.2, 0.3, 0.4],
        [0.5, 0.1, 0.3, 0.1],
        [0.1, 0.1, 0.1, 0.7],
        [0.7, 0.1, 0.1, 0.1],
    ]
)
SAMPLES = [
    _sample(0, label=3, target=2, target_source="mapped"),  # a dataset's label mapped onto the model
    _sample(1, label=0, target_candidates=[0, 2], target_source="predicted"),  # spans model classes 0 and 2
    _sample(2, label=3),  # a label taken as a model class (folder, hf)
    _sample(3, label=1, target_source="predicted"),  # the dataset says: no model class for this label
    _sample(4),  # no label at all
]


def test_predicted_rule_ignores_every_label() -> None:
    targets, sources = resolve_targets(SAMPLES, PROBS, "predicted")
    assert targets.tolist() == [1, 3, 0, 3, 0] and sources == ["predicted"] * 5


def test_label_rule_takes_mapped_targets_candidates_then_labels() -> None:
    targets, sources = resolve_targets(SAMPLES, PROBS, "label")
    assert targets.tolist() == [2, 2, 3, 3, 0]
    assert sources == ["mapped", "mapped-candidate", "label", "predicted", "predicted"]


def test_without_a_model_only_labels_give_a_class() -> None:
    targets, sources = resolve_targets(SAMPLES, None, "label")
    assert targets.tolist() == [2, -1, 3, -1, -1] and sources == ["mapped", "unknown", "label", "unknown", "unknown"]
    targets, sources = resolve_targets(SAMPLES, None, "predicted")
    assert targets.tolist() == [-1] * 5 and sources == ["unknown"] * 5
    with pytest.raises(XaibenchError, match="target rule must be 'predicted' or 'label', got 'gold'"):
        resolve_targets(SAMPLES, PROBS, "gold")


def test_photos_tracks_say_label_the_shapes_tracks_the_prediction() -> None:
    for suite in (DefaultSuite(), FullSuite()):
        rules = {t.name: t.target for t in suite.tracks()}
        assert rules == {"shapes": "predicted", "shapes-shortcut": "predicted", "photos": "label"}


# ----------------------------------------------------------------------------- folder and hf alike


def _folder(root: Path) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    rows = ["id,label"]
    for i, label in enumerate(LABELS):
        Image.fromarray(image_array(i)).save(root / "images" / f"s{i}.png")
        Image.fromarray(mask_array(i)).save(root / "masks" / f"s{i}.png")
        rows.append(f"s{i},{label}")
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    return root


def _imagefolder(root: Path) -> Path:
    split = root / "train"
    (split / "masks").mkdir(parents=True)
    lines = []
    for i, label in enumerate(LABELS):
        Image.fromarray(image_array(i)).save(split / f"s{i}.png")
        Image.fromarray(mask_array(i)).save(split / "masks" / f"s{i}.png")
        lines.append(json.dumps({"file_name": f"s{i}.png", "mask_file_name": f"masks/s{i}.png", "label": label}))
    (split / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], checkpoint: Path, dataset: str, rule: str) -> dict:
    """``(sample, metric) -> (class, source, value)`` of one run of ``dataset`` under ``rule``."""
    work = tmp_path / f"{dataset.split(':')[0]}-{rule}"
    model = ("--model", "timm:resnet18", "--model-param", f"checkpoint={checkpoint}")
    code, output = run_cli(
        capsys, work, "-e", "gradient", *model, "--dataset", dataset, "--target", rule, "--metric", "iou,deletion"
    )
    assert code == 0, output
    rows = records(work / "work", "resnet18-on-data")
    assert len(rows) == 2 * len(LABELS)
    return {(r["sample_id"], r["metric"]): (r["target"]["class"], r["target"]["source"], r["value"]) for r in rows}


def test_folder_and_hf_give_the_same_records_under_both_rules(
    tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets", reason="the hf dataset needs Hugging Face datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    folder = f"folder:{_folder(tmp_path / 'f' / 'data')}"
    hf = f"hf:{_imagefolder(tmp_path / 'h' / 'data')}"
    by_rule = {}
    for rule in ("predicted", "label"):
        got_folder = _run(tmp_path, capsys, checkpoint, folder, rule)
        got_hf = _run(tmp_path, capsys, checkpoint, hf, rule)
        assert got_folder == got_hf, rule
        by_rule[rule] = got_folder
    labelled = {key: (cls, source) for key, (cls, source, _) in by_rule["label"].items()}
    assert labelled == {(f"s{i}", m): (label, "label") for i, label in enumerate(LABELS) for m in ("iou", "deletion")}
    predicted = {key: (cls, source) for key, (cls, source, _) in by_rule["predicted"].items()}
    assert {source for _, source in predicted.values()} == {"predicted"}
    assert predicted != {key: (cls, "predicted") for key, (cls, _) in labelled.items()}  # the rules differ here
