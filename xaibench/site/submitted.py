"""The submissions as the site shows them: a safe page name, the file's digest and bytes, the
board's display label, and the example overlays that could be verified.

File names on the site are generated (slugs from the file stem, overlay names from their
sha256), never taken from a submission. An overlay is shown only when its path stays under the
submissions folder's ``assets/``, the file is of the format its key names (``jpeg``, or ``png`` in
older submissions: :data:`~xaibench.publish.validation.OVERLAY_FORMATS`) and its sha256 is the
recorded one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xaibench.publish.board import Leaderboard
from xaibench.publish.shapes import Disclosure, SubmissionData
from xaibench.publish.submission_files import Submission
from xaibench.publish.validation import OVERLAY_FORMATS, overlay_key


@dataclass
class Submitted:
    """One submission file as the site sees it."""

    key: str
    """The leaderboard's explainer id (the file stem)."""
    slug: str
    """Safe page name."""
    path: Path
    data: SubmissionData
    raw: bytes = field(repr=False)
    """The file's bytes as read (the site's download copy)."""
    sha256: str
    overlays: dict[tuple[str, int], str] = field(default_factory=dict)
    """(track, k) -> site-relative path of the k-th example's overlay."""
    label: str = ""
    """The board's display label (a parameter variant with its short parameters), "" when it has none."""
    href: str = ""
    """Where the site links the submission file, relative to the site's root: its own copy
    (``data/submissions/<slug>.json``) unless the site links the submissions folder in place."""

    @property
    def download(self) -> str:
        """The site-relative link of the submission file."""
        return self.href or f"data/submissions/{self.slug}.json"

    @property
    def name(self) -> str:
        """What the site shows: the board's label (``zennit-lrp (epsilon=0.25)``), else the explainer's name."""
        return self.label or str(self.data["explainer"].get("name", self.key))

    @property
    def disclosure(self) -> Disclosure:
        d = self.data.get("disclosure", {})
        return d if isinstance(d, dict) else {}

    @property
    def tuned(self) -> bool:
        return self.disclosure.get("tuned_on_benchmark") is True

    @property
    def reference(self) -> bool:
        return self.disclosure.get("reference_only") is True or self.data["explainer"].get("reference_only") is True


def submitted(
    subs: Sequence[Submission], board: Leaderboard, submissions_dir: Path, linked: str | None = None
) -> tuple[list[Submitted], dict[str, bytes]]:
    """The site's view of each submission (page slugs unique, case-insensitively) with its board
    label and verified overlays, and the overlay files to write (site-relative path -> JPEG or PNG bytes).
    ``linked``: the submissions folder's URL relative to the site's root (e.g. ``../../submissions/``
    for the record's site): the site then links the files and overlays there instead of copying them."""
    out: list[Submitted] = []
    files: dict[str, bytes] = {}
    used: set[str] = set()
    for sub in subs:
        base = re.sub(r"[^A-Za-z0-9_-]", "_", sub.key)[:60] or "explainer"
        slug, k = base, 2
        while slug.lower() in used:
            slug, k = f"{base}-{k}", k + 1
        used.add(slug.lower())
        raw = sub.raw if sub.raw is not None else sub.path.read_bytes()
        info = board.explainers.get(sub.key)
        label = info.get("label") if isinstance(info, dict) else None
        digest = hashlib.sha256(raw).hexdigest()
        shown = Submitted(sub.key, slug, sub.path, sub.data, raw, digest, label=label if isinstance(label, str) else "")
        if linked is not None:
            shown.href = f"{linked}{sub.path.name}"
        files.update(_overlays(shown, submissions_dir, linked))
        out.append(shown)
    return out, files


def _overlays(sub: Submitted, submissions_dir: Path, linked: str | None = None) -> dict[str, bytes]:
    """Each example overlay whose path stays under ``assets/``, whose file is of its key's format
    and whose sha256 matches, by its site path
    (recorded in ``sub.overlays``); ``linked``: linked in the submissions folder, not copied."""
    files: dict[str, bytes] = {}
    root = submissions_dir.resolve()
    for track_name, track in sub.data["tracks"].items():
        for k, example in enumerate(track.get("examples", []) if isinstance(track, dict) else []):
            key = overlay_key(example)
            if key is None:
                continue
            signature, _, suffix = OVERLAY_FORMATS[key]
            rel, digest = example.get(key), example.get("sha256")
            if not isinstance(rel, str) or not isinstance(digest, str):
                continue
            path = (root / rel).resolve()
            if not path.is_relative_to(root / "assets") or not path.is_file():
                continue
            data = path.read_bytes()
            if not data.startswith(signature) or hashlib.sha256(data).hexdigest() != digest:
                continue
            if linked is not None:
                sub.overlays[(track_name, k)] = f"{linked}{path.relative_to(root).as_posix()}"
                continue
            name = f"assets/overlays/{digest[:24]}{suffix}"
            files[name] = data
            sub.overlays[(track_name, k)] = name
    return files
