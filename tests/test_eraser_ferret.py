"""``eraser_comprehensiveness`` and ``eraser_sufficiency`` equal ferret-xai 0.4.2's AOPC
comprehensiveness and sufficiency (issue 46), per sample within 1e-6: the same model, inputs,
targets, explanations and thresholds, and the same removal.

ferret runs its own evaluators (``AOPC_Comprehensiveness_Evaluation``,
``AOPC_Sufficiency_Evaluation``) on a duck-typed Hugging Face pair around our model
(``tests/_ferret.py``) whose mask token is the padding token, with ``removal_args={"remove_tokens":
False}`` (the rationale replaced by the mask token, not deleted and re-tokenised) and
``remove_first_last=False`` (our models have no [CLS]/[SEP]); ours run as the runner runs them, on
the ``(B, D + 1, 1, L)`` input with ``(1, L)`` maps. Thresholds: ours (1, 5, 10, 20, 50 %) and
ferret's default (10, 20, ..., 100 %). Explanations: random normal (mixed signs), the gradient
(ties on planted-tokens), input x gradient (signed) and an all-negative map (no rationale: ferret's
defaults 0 and 1). Skipped where ferret-xai is not in ``<venv>/ferret`` (``make install``).

A model is a parameter: ``MODELS`` maps its name to the token id sequences it is checked on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
import torch

from tests import _ferret
from xaibench.api import MetricInput, Sample, TextModel
from xaibench.metrics.faithfulness import formulas as fm
from xaibench.metrics.faithfulness.eraser import EraserComprehensiveness, EraserSufficiency
from xaibench.plugins import manager

try:
    COMPREHENSIVENESS, SUFFICIENCY = _ferret.ferret_evaluators()
except ModuleNotFoundError as exc:
    pytest.skip(f"{exc}: the ERASER parity test needs ferret-xai {_ferret.FERRET_VERSION}", allow_module_level=True)

FERRET_THRESHOLDS = np.arange(0.1, 1.1, 0.1)  # ferret's default "perc" thresholds, as it builds them


def _planted() -> tuple[TextModel, list[np.ndarray]]:
    from xaibench.datasets.planted_tokens import PlantedTokensDataset
    from xaibench.models.planted_tokens import PlantedTokensModel
    from xaibench.tokens import tokenized

    model = PlantedTokensModel()
    return model, [tokenized(model, s).image for s in PlantedTokensDataset(n=6).samples()]


def _imdb_cnn() -> tuple[TextModel, list[np.ndarray]]:
    """Two sentences and random vocabulary words of 40, 130 and 256 tokens (the last unpadded):
    n >= 100 makes the 1 % threshold a rationale."""
    from xaibench.models.imdb_cnn import ImdbCNN

    model = ImdbCNN()
    sentences = [
        "this movie was absolutely wonderful and i loved the acting",
        "the plot was boring and the ending was a terrible mess not worth it",
    ]
    rng = np.random.default_rng(46)
    token_lists = [list(model.tokenize(text.split()).ids) for text in sentences]
    token_lists += [rng.integers(2, len(model.embeddings), n).tolist() for n in (40, 130, model.max_tokens)]
    out = []
    for ids in token_lists:
        row = np.full(model.max_tokens, model.pad_id, dtype=np.int64)
        row[: len(ids)] = ids
        out.append(row)
    return model, out


def _minilm() -> tuple[TextModel, list[np.ndarray]]:
    """MiniLM with its head (the transformer the issue names; [CLS] is inside the module, so the
    explained tokens are the review's own): two sentences and 60 random vocabulary words (a 1 %
    threshold is no rationale below 100 tokens; the 256-token cost of a transformer is kept out)."""
    from xaibench.errors import XaibenchError
    from xaibench.models.minilm_imdb import MiniLMImdb

    try:
        model = MiniLMImdb()
    except XaibenchError as exc:
        pytest.skip(f"minilm-imdb cannot load: {exc}")
    sentences = [
        "this movie was absolutely wonderful and i loved the acting",
        "the plot was boring and the ending was a terrible mess , not worth it",
    ]
    token_lists = [list(model.tokenize(text.split()).ids) for text in sentences]
    rng = np.random.default_rng(46)
    token_lists.append(rng.integers(1000, len(model.embeddings), 60).tolist())
    out = []
    for ids in token_lists:
        row = np.full(model.max_tokens, model.pad_id, dtype=np.int64)
        row[: len(ids)] = ids
        out.append(row)
    return model, out


MODELS: dict[str, Callable[[], tuple[TextModel, list[np.ndarray]]]] = {
    "planted-tokens": _planted,
    "imdb-cnn": _imdb_cnn,
    "minilm-imdb": _minilm,
}


def _maps(name: str, model: TextModel, x: torch.Tensor, targets: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``(B, 1, L)`` maps of kind ``name`` (module doc)."""
    if name == "randn":
        maps = np.random.default_rng(0).standard_normal((x.shape[0], 1, x.shape[-1]))
    elif name == "negative":
        maps = -np.abs(np.random.default_rng(1).standard_normal((x.shape[0], 1, x.shape[-1]))) - 0.1
    else:
        explainer = manager.get_registry().create("explainer", name, materialise=True)
        maps = np.asarray(explainer.explain(model, x.clone(), torch.as_tensor(targets)), dtype=np.float64)
    return np.where(present[:, None, :], maps, 0.0)


@functools.cache
def _setup(model_name: str) -> tuple[TextModel, np.ndarray, torch.Tensor, np.ndarray, np.ndarray]:
    model, rows = MODELS[model_name]()
    ids = np.stack(rows)
    x = model.preprocess(list(ids))
    with torch.no_grad():
        targets = model.module(x).argmax(dim=1).numpy()  # the predicted class, ferret's default target
    return model, ids, x, targets, ids != model.pad_id


def _ours(model: TextModel, ids: np.ndarray, x: torch.Tensor, targets: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """Both our metrics' per-sample values, ``(2, B)``, as the runner scores a batch."""
    samples = [Sample(id=f"s{i}", image=row) for i, row in enumerate(ids)]
    batch = MetricInput(saliency=maps, concepts=None, samples=samples, targets=targets, inputs=x, model=model)
    return np.stack([metric().score(batch).values for metric in (EraserComprehensiveness, EraserSufficiency)])


def _ferrets(model: TextModel, ids: np.ndarray, targets: np.ndarray, maps: np.ndarray, thresholds) -> np.ndarray:
    """ferret's two evaluators on the same samples, ``(2, B)``."""
    pair = (_ferret.IdClassifier(model), _ferret.IdTokenizer(model))
    evaluators = (COMPREHENSIVENESS(*pair), SUFFICIENCY(*pair))
    removal = {"remove_tokens": False, "based_on": "perc", "thresholds": thresholds}
    out = np.zeros((2, len(ids)))
    for b, row in enumerate(ids):
        present = row != model.pad_id
        text = _ferret.ids_text(row[present])
        explanation = _ferret.ferret_explanation(text, text.split(), maps[b, 0][present], int(targets[b]))
        for m, evaluator in enumerate(evaluators):
            result = evaluator.compute_evaluation(
                explanation, int(targets[b]), remove_first_last=False, only_pos=True, removal_args=removal
            )
            out[m, b] = float(result.score)
    return out


@pytest.mark.parametrize("thresholds", ["ours", "ferret"])
@pytest.mark.parametrize("explanation", ["randn", "gradient", "input-x-gradient", "negative"])
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_eraser_equals_ferret_per_sample(
    model_name: str, explanation: str, thresholds: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, ids, x, targets, present = _setup(model_name)
    maps = _maps(explanation, model, x, targets, present)
    fractions = fm.ERASER_FRACTIONS if thresholds == "ours" else FERRET_THRESHOLDS
    if thresholds == "ferret":  # our metrics read their fractions from the formula's default
        monkeypatch.setattr(fm, "eraser_rationales", functools.partial(fm.eraser_rationales, fractions=fractions))
    ours = _ours(model, ids, x, targets, maps)
    theirs = _ferrets(model, ids, targets, maps, list(fractions))
    assert np.isfinite(ours).all()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    if explanation == "negative":  # no rationale: ferret's defaults
        assert ours[0].tolist() == [0.0] * len(ids) and ours[1].tolist() == [1.0] * len(ids)
    else:  # the comparison is not vacuous: the metrics moved the probabilities
        assert np.abs(ours[0]).max() > 1e-3
