"""ferret-xai 0.4.2's ERASER evaluators for the parity test (tests/test_eraser_ferret.py), imported
without ferret's dependencies and driven by a duck-typed Hugging Face model and tokenizer around
one of our :class:`~xaibench.api.TextModel` s.

**Import.** ``make install`` puts ferret-xai into ``<venv>/ferret`` (``--no-deps``, never
site-packages: a plain ``import ferret`` pulls in seaborn, shap, lime, captum, spacy and
transformers). :func:`ferret_evaluators` registers an empty ``ferret`` package whose ``__path__`` is
the installed folder (so ``ferret/__init__.py`` never runs), stubs the one name ferret imports from
transformers (``transformers.tokenization_utils_base.BatchEncoding``, a type hint) for the length
of the import only, then imports ``ferret.evaluators.faithfulness_measures`` (numpy, scipy, tqdm).

**The pair.** A "text" is the token ids written out (``"12 7 0 5"``); :class:`IdTokenizer` reads it
back, and its ``mask_token_id`` is the model's padding id, so ferret's
``removal_args={"remove_tokens": False}`` (replace the rationale by the mask token) is exactly our
metrics' removal (the token's column zeroed: the padding token). There is no [CLS]/[SEP]: ferret is
called with ``remove_first_last=False``. :class:`IdClassifier` pads the ids to the model's
``max_tokens`` and runs ``model.preprocess`` and ``model.module``, as the runner does.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from xaibench.api import TextModel

FERRET_VERSION = "0.4.2"


def ferret_folder() -> Path:
    """Where ``make install`` puts ferret-xai: ``<venv>/ferret``."""
    return Path(sys.prefix) / "ferret"


def ferret_evaluators() -> tuple[type, type]:
    """ferret's ``(AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation)`` (module doc).
    Raises ``ModuleNotFoundError`` when ferret-xai is not in :func:`ferret_folder`."""
    package = ferret_folder() / "ferret"
    if not (package / "evaluators" / "faithfulness_measures.py").is_file():
        raise ModuleNotFoundError(f"ferret-xai is not installed in {ferret_folder()} (make install puts it there)")
    if "ferret" not in sys.modules:
        shell = types.ModuleType("ferret")
        shell.__path__ = [str(package)]
        sys.modules["ferret"] = shell
    stubs: list[str] = []
    try:
        import transformers.tokenization_utils_base  # noqa: F401  (the real one, where installed)
    except ModuleNotFoundError:
        for name in ("transformers", "transformers.tokenization_utils_base"):
            if name not in sys.modules:
                stub = types.ModuleType(name)
                stub.__path__ = []
                sys.modules[name] = stub
                stubs.append(name)
        sys.modules["transformers.tokenization_utils_base"].BatchEncoding = dict  # type: ignore[attr-defined]
    try:
        from ferret.evaluators.faithfulness_measures import (
            AOPC_Comprehensiveness_Evaluation,
            AOPC_Sufficiency_Evaluation,
        )
    finally:
        for name in stubs:  # other tests must not see a fake transformers
            sys.modules.pop(name, None)
    return AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation


def ferret_explanation(text: str, tokens: list[str], scores: np.ndarray, target: int) -> Any:
    """ferret's ``Explanation`` dataclass (imported after :func:`ferret_evaluators`)."""
    from ferret.explainers.explanation import Explanation

    return Explanation(text=text, tokens=tokens, scores=np.asarray(scores), explainer="xaibench", target=target)


def ids_text(ids: Any) -> str:
    """Token ids as the pair's text: the ids written out, separated by spaces."""
    return " ".join(str(int(i)) for i in ids)


class IdTokenizer:
    """What ferret's ERASER evaluators touch of a Hugging Face tokenizer (module doc); the mask
    token is the model's padding token, and there is no [CLS] or [SEP]."""

    cls_token = "[CLS]"  # never a token of ours: ferret then keeps every score
    model_max_length = 10**6

    def __init__(self, model: TextModel) -> None:
        self.pad_token_id = self.mask_token_id = int(model.pad_id)

    def __call__(self, text: str | list[str], return_tensors: str | None = None, **kwargs: Any) -> dict:
        texts = [text] if isinstance(text, str) else [str(t) for t in text]
        rows = [[int(t) for t in s.split()] for s in texts]
        width = max(1, max(len(r) for r in rows))
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):  # padding="longest"; the attention mask covers every written id
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask}

    def decode(self, ids: Any, **kwargs: Any) -> str:
        return ids_text(ids)

    def convert_ids_to_tokens(self, ids: Any, **kwargs: Any) -> list[str]:
        return [str(int(i)) for i in ids]


class IdClassifier(torch.nn.Module):
    """What ferret's ERASER evaluators touch of a Hugging Face classifier: ``model(input_ids=...,
    attention_mask=...).logits`` and ``model.device``. The ids are padded to ``max_tokens`` with the
    padding id and go through ``preprocess`` and ``module``, as the runner forwards a text sample."""

    def __init__(self, model: TextModel) -> None:
        super().__init__()
        self.text_model = model

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def forward(self, input_ids: torch.Tensor, attention_mask: Any = None, **kwargs: Any) -> SimpleNamespace:
        m = self.text_model
        ids = torch.full((input_ids.shape[0], int(m.max_tokens)), int(m.pad_id), dtype=torch.long)
        ids[:, : input_ids.shape[1]] = input_ids
        with torch.no_grad():
            logits = m.module(m.preprocess(list(ids.numpy())))
        return SimpleNamespace(logits=logits, hidden_states=None)
