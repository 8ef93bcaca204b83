"""BERT's uncased tokenisation of words into WordPiece tokens (Devlin et al. 2019), in pure Python.

A word is first split as BERT's basic tokenizer splits text: control characters dropped,
Chinese/Japanese/Korean ideographs and punctuation made tokens of their own, lower case, accents
stripped (Unicode NFD, combining marks removed). Each piece is then cut greedily into the longest
vocabulary entries from its start, a continuation written ``##...``; a piece with no such cut, or
longer than 100 characters, is ``[UNK]``. This is what ``BertTokenizer(do_lower_case=True)``
does, word by word, so every token knows the word it came from (:meth:`WordPiece.tokenize`).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from pathlib import Path

from xaibench.errors import XaibenchError

__all__ = ["WordPiece", "basic_split"]

MAX_CHARS = 100
"""A piece longer than this many characters is ``[UNK]`` (BERT's ``max_input_chars_per_word``)."""


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:  # ASCII non-alphanumerics
        return True
    return unicodedata.category(ch).startswith("P")


def _is_ideograph(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Cn", "Co", "Cs")


def basic_split(text: str) -> list[str]:
    """BERT's basic uncased tokenizer: ``text`` as lower-case, accent-free pieces, each run of
    punctuation character by character (``"Don't!"`` -> ``["don", "'", "t", "!"]``)."""
    chars: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            chars.append(" ")
        elif _is_ideograph(cp):
            chars.extend((" ", ch, " "))
        else:
            chars.append(ch)
    pieces: list[str] = []
    for chunk in "".join(chars).split():
        chunk = unicodedata.normalize("NFD", chunk.lower())
        current = ""
        for ch in chunk:
            if unicodedata.category(ch) == "Mn":
                continue
            if _is_punctuation(ch):
                if current:
                    pieces.append(current)
                pieces.append(ch)
                current = ""
            else:
                current += ch
        if current:
            pieces.append(current)
    return pieces


class WordPiece:
    """A WordPiece vocabulary (one entry a line, the line number its id) and its tokenizer."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary
        self.index = {token: i for i, token in enumerate(vocabulary)}
        for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
            if special not in self.index:
                raise XaibenchError(f"WordPiece vocabulary has no {special} entry")
        self.pad_id = self.index["[PAD]"]
        self.unk_id = self.index["[UNK]"]
        self.cls_id = self.index["[CLS]"]
        self.sep_id = self.index["[SEP]"]
        self._pieces = lru_cache(maxsize=200_000)(self._wordpiece)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """Read ``vocab.txt`` (UTF-8, one token a line)."""
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except OSError as exc:
            raise XaibenchError(f"{path}: cannot read the WordPiece vocabulary ({exc.strerror})") from None
        if lines and lines[-1] == "":
            lines.pop()
        return cls(lines)

    def _wordpiece(self, piece: str) -> tuple[int, ...]:
        if len(piece) > MAX_CHARS:
            return (self.unk_id,)
        ids: list[int] = []
        start = 0
        while start < len(piece):
            end = len(piece)
            found = None
            while start < end:
                candidate = piece[start:end] if start == 0 else "##" + piece[start:end]
                found = self.index.get(candidate)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk_id,)
            ids.append(found)
            start = end
        return tuple(ids)

    def tokenize(self, words: list[str]) -> tuple[list[int], list[int]]:
        """``(ids, word_of)``: the token ids of ``words`` in order (no ``[CLS]``/``[SEP]``) and,
        for each token, the index of the word it came from. A word with no token (only control
        characters, say) contributes none."""
        ids: list[int] = []
        word_of: list[int] = []
        for w, word in enumerate(words):
            for piece in basic_split(word):
                found = self._pieces(piece)
                ids.extend(found)
                word_of.extend([w] * len(found))
        return ids, word_of
