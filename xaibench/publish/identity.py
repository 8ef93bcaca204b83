"""Who a submission says it is: explainer names compared as a reader sees them, and one file per
explainer and parameters.

A board ranks explainers by name; a name that *looks* like another one (``gradсam`` with a
Cyrillic ``с``, ``gradcam`` with a zero-width space, ``ｇｒａｄｃａｍ`` in full-width letters,
``GradCAM``) would be read as that explainer. :func:`fold` maps a name to the form such names
share (its *skeleton*): Unicode NFKC normalisation (full-width and compatibility forms), format
and other invisible characters (zero-width spaces and joiners, bidi controls, soft hyphens) and
combining marks dropped, then every letter of :data:`CONFUSABLES` (Cyrillic, Greek and other
letters drawn like a Latin one) replaced by that Latin letter, then case folded. Two names with
the same skeleton that differ are *look-alikes*: :func:`lookalike_problem` refuses a name that
looks like another one but is not it (an installed explainer's, in validation; another
submission's, when a board is built). Two letters that differ only as Latin ``I`` and ``l`` do
not fold together (case folding keeps ``I`` and ``i`` together instead).

:func:`check_submissions` is what a board build runs on its submissions (one line naming both
files, as :class:`~xaibench.errors.XaibenchError`): two files for the same explainer name and
parameters are an error whatever their ``created`` dates (a file's date is its own claim, so it
cannot choose between them), and two names that look alike are an error.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from xaibench.errors import XaibenchError
from xaibench.publish.submission_files import Submission

CONFUSABLES: Mapping[str, str] = {
    # Cyrillic capitals and small letters drawn like Latin ones (Unicode confusables.txt, TR39)
    **dict(zip("АВЕЅІЈКМНОРСТХУԌԚԜ", "ABESIJKMHOPCTXYGQW", strict=True)),
    **dict(zip("аԁеһіјӏорԛсѕԝхуьԍ", "adehijlopqcswxybg", strict=True)),
    "ѵ": "v",
    "ӧ": "o",
    "ё": "e",
    "ї": "i",
    # Greek capitals and small letters drawn like Latin ones
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϜ", "ABEZHIKMNOPTYXF", strict=True)),
    **dict(zip("αοιυνκρχϲϳ", "aoiuvkpxcj", strict=True)),
    # Latin letters of other alphabets that read as plain ones
    "ı": "i",
    "ȷ": "j",
    "ɡ": "g",
    "ɑ": "a",
    "ɩ": "i",
    "ʟ": "L",
    "ᴄ": "c",
    "ᴏ": "o",
    "ᴠ": "v",
    "ᴡ": "w",
    "ᴢ": "z",
    "ꞓ": "e",
    "ℓ": "l",
    # Armenian and Cherokee letters drawn like Latin ones (a few of TR39's)
    "օ": "o",
    "ս": "u",
    "հ": "h",
    "ո": "n",
    "Ꭺ": "A",
    "Ꮯ": "C",
    "Ꭼ": "E",
    "Ꮋ": "H",
    "Ꮶ": "K",
    "Ꮇ": "M",
    "Ꮲ": "P",
    "Ꮪ": "S",
    "Ꭲ": "T",
}
"""Letters of other scripts drawn like a Latin letter -> that letter (a skeleton mapping of the
look-alikes of Latin letters among Cyrillic, Greek and a few other letters; Unicode TR39's
confusables list has them all, this module needs no package for it)."""

_DROPPED = frozenset({"Cf", "Mn", "Me", "Cc", "Zl", "Zp"})
"""Unicode categories dropped from a name's skeleton: format characters (zero-width, bidi
controls, soft hyphen), combining marks and control characters."""


def fold(name: str) -> str:
    """The skeleton of ``name`` (see the module doc): what two names that look alike share."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    kept = "".join(CONFUSABLES.get(c, c) for c in text if unicodedata.category(c) not in _DROPPED)
    return unicodedata.normalize("NFKC", kept.strip()).casefold()


def _differences(name: str) -> str:
    """The characters of ``name`` that are not plain ASCII, named (``U+0441 CYRILLIC SMALL
    LETTER ES``), for a message; at most three."""
    odd = [c for c in dict.fromkeys(name) if not (c.isascii() and c.isprintable())]
    shown = [f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed character')}" for c in odd[:3]]
    more = f" and {len(odd) - 3} more" if len(odd) > 3 else ""
    return ", ".join(shown) + more if shown else "it differs only in case, spaces or invisible characters"


def lookalike_problem(name: str, others: Iterable[str], *, whose: str = "") -> str | None:
    """Why ``name`` is refused as a look-alike of one of ``others`` (a name with the same
    :func:`fold` that is not equal to it), else ``None``; ``whose`` names the others in the
    message (``"the installed explainer"``)."""
    skeleton = fold(name)
    for other in sorted(set(others)):
        if other != name and fold(other) == skeleton:
            return (
                f"explainer name {name!a} looks like {whose + ' ' if whose else ''}{other!a} but is not it "
                f"({_differences(name)}); use the explainer's own name"
            )
    return None


def shown_path(path: object) -> str:
    """A file's path for a one-line message: characters that are not printable escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(path))


def params_key(params: object) -> str:
    """The parameters of an explainer block as one comparable string (canonical JSON)."""
    return json.dumps(params if params is not None else {}, sort_keys=True, separators=(",", ":"), default=str)


def check_submissions(submissions: Sequence[Submission]) -> None:
    """Raise :class:`XaibenchError` (one line naming both files) when two submissions are for
    the same explainer name and parameters, or when two explainer names look alike."""
    seen: dict[tuple[str, str], Submission] = {}
    by_skeleton: dict[str, Submission] = {}
    for sub in sorted(submissions, key=lambda s: (s.path.name, str(s.path))):
        block = sub.data["explainer"]
        name = str(block["name"])
        key = (name, params_key(block.get("params", {})))
        if key in seen:
            raise XaibenchError(
                f"two submissions for explainer {name!a} with the same parameters: {shown_path(seen[key].path)} and "
                f"{shown_path(sub.path)}; keep one (a file's own 'created' date does not choose between them)"
            )
        seen[key] = sub
        skeleton = fold(name)
        first = by_skeleton.setdefault(skeleton, sub)
        other = str(first.data["explainer"]["name"])
        if other != name:
            files = f"{other!a} ({shown_path(first.path)}) and {name!a} ({shown_path(sub.path)})"
            raise XaibenchError(
                f"explainer names {files} look alike ({_differences(name if not name.isascii() else other)}); "
                "one explainer, one name"
            )
