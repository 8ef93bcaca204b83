"""``mohseni-text``: the text half of the human-attention benchmark of Mohseni, Block and Ragan
(IUI 2021), read from its repository's layout (github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark)
beside the original texts::

    Text/IMDB/human_attention/<neg|pos>/<id>.json                {"<word number>": [word, share], ...}
    Text/IMDB/org_reviews/<neg|pos>_val/<id>.txt                 the review (or org_reviews/<neg|pos>/<id>.txt)
    Text/20news_group/human_attention/<group>/<id>.json          sci.electronics, sci.med
    Text/20news_group/org_texts/<group>/<id>.txt                 the post (not upstream: the user's copy)

A JSON file numbers the whitespace-separated words of its text from 1; each entry is the word and
the share of annotators who selected it (in [0, 1]). Every file is checked against its text: its
``agreement`` is the share of its entries whose word is the text's word at that number. A file
below ``min_agreement`` (default 0.95), without its text, or unreadable is left out, one line each
in :attr:`MohseniTextDataset.notes` (checked upstream: none of the 124 IMDB files agrees with a
review; they mix words of several). The 20 Newsgroups posts are not upstream: a user who has them
puts each beside its annotation as above.

A sample is the text's words (``Sample.image``: a 1-D array of strings, DESIGN 12) with
``GroundTruth(levels=(1, n) shares, mask=levels > 0)``, labelled "annotators' word selections";
a model's tokeniser spreads a word's value to the word's tokens. Classes: ``neg``/``pos`` and the
two newsgroups, ``label`` indexing the sorted class names of the subset. Ids:
``imdb-<neg|pos>-<id>``, ``20news-<group>-<id>``. ``subset``: ``all`` (default), ``imdb``, ``20news``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xaibench.api import GroundTruth, Sample
from xaibench.datasets.real.common import LayoutError, RealDataset

SUBSETS = ("all", "imdb", "20news")
DEFAULT_MIN_AGREEMENT = 0.95
TRUTH_NOTE = "annotators' word selections (share of annotators per word; Mohseni et al. 2021)"
CORPORA = {"imdb": "IMDB", "20news": "20news_group"}  # sample id prefix -> folder under Text/
_TEXT_DIRS = {"imdb": ("org_reviews",), "20news": ("org_texts",)}


def text_dir(root: Path) -> Path:
    """The folder holding ``IMDB/`` and/or ``20news_group/`` (``<root>/Text`` or the root)."""
    for cand in (root / "Text", root):
        if any((cand / folder / "human_attention").is_dir() for folder in CORPORA.values()):
            return cand
    raise LayoutError("missing Text/IMDB/human_attention/ or Text/20news_group/human_attention/")


def read_annotation(path: Path) -> dict[int, tuple[str, float]]:
    """``{word number: (word, share)}`` of one annotation file; ``ValueError`` naming what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not readable JSON ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object of word numbers")
    out: dict[int, tuple[str, float]] = {}
    for key, value in raw.items():
        ok = isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
        share = value[1] if ok else None
        if not (ok and str(key).isdigit() and int(key) >= 1 and isinstance(share, int | float) and 0 <= share <= 1):
            raise ValueError(f"entry {key!r} is not a word number >= 1 with [word, share in [0, 1]]")
        out[int(key)] = (value[0], float(share))
    return out


def agreement(entries: dict[int, tuple[str, float]], words: list[str]) -> float:
    """The share of ``entries`` whose word is ``words[number - 1]`` (0 for no entry)."""
    if not entries:
        return 0.0
    same = sum(1 for n, (word, _) in entries.items() if n <= len(words) and words[n - 1] == word)
    return same / len(entries)


class MohseniTextDataset(RealDataset):
    """Mohseni et al.'s IMDB and 20 Newsgroups word-level human annotations beside their texts."""

    name: ClassVar[str] = "mohseni-text"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Mohseni et al. text annotations (annotators' word selections) beside their texts"
    licence: ClassVar[str] = "see the upstream repository"
    modalities: ClassVar[tuple[str, ...]] = ("text",)
    source: ClassVar[str] = "mohseni"
    folder_names: ClassVar[tuple[str, ...]] = ("mohseni", "ML-Interpretability-Evaluation-Benchmark")
    layout: ClassVar[str] = """
Text/IMDB/human_attention/<neg|pos>/<id>.json       {"<word number>": [word, share], ...}
Text/IMDB/org_reviews/<neg|pos>_val/<id>.txt        the reviews
Text/20news_group/human_attention/<group>/<id>.json
Text/20news_group/org_texts/<group>/<id>.txt        the posts (your copy)
"""
    get_from: ClassVar[str] = "https://github.com/SinaMohseni/ML-Interpretability-Evaluation-Benchmark"

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        subset: str = "all",
        min_agreement: float = DEFAULT_MIN_AGREEMENT,
        download: bool = False,
    ) -> None:
        if subset not in SUBSETS:
            raise ValueError(f"mohseni-text: subset must be one of {SUBSETS}, got {subset!r}")
        if not 0.0 <= float(min_agreement) <= 1.0:
            raise ValueError(f"mohseni-text: min_agreement must be in [0, 1], got {min_agreement!r}")
        super().__init__(root, download=download)
        self.subset = subset
        self.min_agreement = float(min_agreement)
        self.left_out: dict[str, str] = {}
        base = text_dir(self.root)
        found: list[tuple[str, str, Path, Path]] = []
        for corpus, folder in CORPORA.items():
            if subset not in ("all", corpus) or not (base / folder / "human_attention").is_dir():
                continue
            found += self._pairs(base / folder, corpus)
        self.label_names = tuple(sorted({cls for _, cls, _, _ in found}))
        self._items: list[Any] = []
        for sample_id, cls, annotation, text in found:
            item = self._checked(sample_id, cls, annotation, text, base)
            if item is not None:
                self._items.append(item)
        self._files = [p for *_, annotation, text in found for p in (annotation, text) if p.is_file()]
        self._revision_base = base

    @classmethod
    def check_root(cls, root: Path) -> Path:
        text_dir(root)
        return root

    @staticmethod
    def _pairs(folder: Path, corpus: str) -> list[tuple[str, str, Path, Path]]:
        """(sample id, class, annotation file, text file) for every annotation of ``folder``."""
        out = []
        for class_dir in sorted(p for p in (folder / "human_attention").iterdir() if p.is_dir()):
            for annotation in sorted(class_dir.glob("*.json")):
                texts = [
                    folder / name / sub / f"{annotation.stem}.txt"
                    for name in _TEXT_DIRS[corpus]
                    for sub in (f"{class_dir.name}_val", class_dir.name)
                ]
                text = next((t for t in texts if t.is_file()), texts[0])
                out.append((f"{corpus}-{class_dir.name}-{annotation.stem}", class_dir.name, annotation, text))
        return out

    def _checked(self, sample_id: str, cls: str, annotation: Path, text: Path, base: Path) -> Any:
        """The item of an annotation that agrees with its text, else ``None`` with the reason noted."""
        where = annotation.relative_to(base).as_posix()
        if not text.is_file():
            self.left_out[where] = f"no text at {text.relative_to(base).as_posix()}"
            return None
        try:
            entries = read_annotation(annotation)
        except ValueError as exc:
            self.left_out[where] = str(exc)
            return None
        words = text.read_text(encoding="utf-8", errors="replace").split()
        share = agreement(entries, words)
        if share < self.min_agreement:
            self.left_out[where] = (
                f"{share:.0%} of its {len(entries)} words agree with {text.relative_to(base).as_posix()} "
                f"(below {self.min_agreement:.0%})"
            )
            return None
        return (sample_id, cls, entries, words)

    @property
    def notes(self) -> list[str]:
        """One line per annotation file left out, naming it and why."""
        return [f"mohseni-text: {where} left out: {why}" for where, why in sorted(self.left_out.items())]

    def _load(self, item: Any) -> Sample:
        sample_id, cls, entries, words = item
        levels = np.zeros((1, len(words)), dtype=np.float32)
        for number, (_, share) in entries.items():
            if number <= len(words):
                levels[0, number - 1] = share
        truth = GroundTruth(mask=levels > 0, levels=levels, notes=(TRUTH_NOTE,))
        return Sample(
            id=sample_id,
            image=np.asarray(words, dtype=str),
            label=self.label_names.index(cls),
            ground_truth=truth,
            meta={"text": " ".join(words), "class": cls},
        )
