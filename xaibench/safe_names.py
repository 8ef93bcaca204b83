"""Names that become file names: the one rule, in one place.

Track names, sample ids and component names come from plugins and data; where one becomes part
of a path (``results/<track>.jsonl``, ``assets/<explainer>@<digest>/<track>/<k>-<sample id>.jpg``,
``<explainer>.json``, cache entries) it goes through this module, so a name is always one file
name inside the folder it is meant for, never a path (``../..``, ``/etc``) and never a hidden file.

Two ways, chosen per place:

- :func:`file_name` *maps* any name to a file name. A plain name (:func:`is_plain`) maps to
  itself, so the files of ordinary names (``shapes-shortcut``, ``coco-val2017-000000000139``)
  keep their names; any other character becomes ``@XX`` per byte of its UTF-8 encoding (a
  leading ``.`` too), and a name whose result would exceed :data:`MAX_LENGTH` characters is cut
  and ends in ``@@`` and 16 hex digits of its sha256. The map is deterministic and injective:
  ``@`` is never kept, so an escaped name can be read back, and only cut names hold ``@@``.
  Used for track names and sample ids (data: any string is a valid name).
- :func:`checked_name` *validates*: a name that is not plain is refused with one line naming
  its kind and the name (:class:`~xaibench.errors.XaibenchError`). Used for component names and
  parameter digests, which registration already restricts (a component's name matches
  ``[A-Za-z][A-Za-z0-9_.-]{0,63}``) and which other code reads back from file names
  (``<explainer>@<params digest>.json``).

The escape character is ``@`` rather than ``%``: the submission schema allows overlay paths of
``[A-Za-z0-9_.+@-]`` only, and ``%`` means something in the URLs those paths end up in.
"""

from __future__ import annotations

import hashlib
import re

from xaibench.errors import XaibenchError

MAX_LENGTH = 150
"""The longest file name :func:`file_name` returns: leaves room, under the usual 255-byte limit,
for what is added to it (``.part-000001.parquet.tag``, a temporary file's ``.<pid>.<hex>.tmp``)."""
ESCAPE = "@"
DIGEST_CHARS = 16
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-")
_PLAIN = re.compile(rf"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{{0,{MAX_LENGTH - 1}}}")
_SHOWN = 60  # characters of a refused name that its error line shows


def is_plain(name: str) -> bool:
    """Whether ``name`` is its own file name: 1 to :data:`MAX_LENGTH` letters, digits and
    ``_.+-``, not starting with ``.`` (so never ``.``, ``..`` or a hidden file)."""
    return isinstance(name, str) and _PLAIN.fullmatch(name) is not None


def _text(name: object, kind: str) -> str:
    if not isinstance(name, str):
        raise XaibenchError(f"{kind} {_shown(name)}: a name must be a string, not {type(name).__name__}")
    return name


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _escape(char: str) -> str:
    return "".join(f"{ESCAPE}{b:02X}" for b in char.encode("utf-8", "surrogatepass"))


def file_name(name: str, *, kind: str = "name") -> str:
    """The file name of ``name`` (see the module doc): ``name`` itself when it is plain, else
    its escaped form; never empty, never ``.`` or ``..``, never starting with ``.``, never
    holding ``/``, at most :data:`MAX_LENGTH` characters. ``kind`` (``track``, ``sample id``)
    names it in the error raised for a name that is not a string."""
    name = _text(name, kind)
    if is_plain(name):
        return name
    if not name:
        return ESCAPE
    out = "".join(c if c in _KEPT and not (i == 0 and c == ".") else _escape(c) for i, c in enumerate(name))
    if len(out) <= MAX_LENGTH:
        return out
    cut = out[: MAX_LENGTH - len(ESCAPE) * 2 - DIGEST_CHARS]
    if ESCAPE in cut[-2:]:  # do not end on a partial escape
        cut = cut[: cut.rindex(ESCAPE, len(cut) - 2)]
    tail = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{cut}{ESCAPE * 2}{tail}"


def checked_name(name: str, *, kind: str) -> str:
    """``name`` when it is plain (:func:`is_plain`); otherwise :class:`XaibenchError`, one line
    naming ``kind`` (``explainer``, ``params digest``) and the name."""
    name = _text(name, kind)
    if not is_plain(name):
        raise XaibenchError(
            f"{kind} {_shown(name)}: not usable as a file name; a name is 1 to {MAX_LENGTH} letters, "
            "digits and '_.+-', not starting with '.'"
        )
    return name
