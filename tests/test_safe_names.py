"""Names are names (issue: names become paths): a track, sample or component name that reaches a
path goes through :mod:`xaibench.safe_names`, so a suite plugin's track named ``../..`` or an
absolute path writes nothing outside the run's folders, overlays of odd sample ids and track
names get files of their own under ``assets/``, and plain names keep the file names they had."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from xaibench import hookimpl
from xaibench.api import Suite, TrackSpec
from xaibench.cli import main
from xaibench.errors import XaibenchError
from xaibench.plugins import manager
from xaibench.publish.examples import example_folder, render_examples
from xaibench.publish.submission import submission_filename
from xaibench.publish.validation import validate_file
from xaibench.runner.examples import Example, ExampleSet
from xaibench.runner.storage.cache import ExplanationCache
from xaibench.runner.storage.store import RecordStore, journals, track_journal
from xaibench.safe_names import MAX_LENGTH, checked_name, file_name, is_plain

# Names of the committed record, the shipped suites and datasets: their files keep their names.
PLAIN = [
    "shapes",
    "shapes-shortcut",
    "shapes-cbm",
    "photos",
    "ablationcam",
    "attention-rollout",
    "human-attention",
    "shapes-test-0001",
    "coco-val2017-000000000139",
    "resnet18-on-cats",
    "a+b_c.d",
    "99376f2eb8e0",
    "x" * MAX_LENGTH,
]
ODD = ["", ".", "..", "../..", "/etc/passwd", ".key", ".hidden", "a/b", "a\\b", "a@b", "a b", "café", "a\nb", "\ud800"]
ODD += ["x" * (MAX_LENGTH + 1), "é" * 200, "/" * 400, "a" * 148 + "/", "a" * 147 + "é", "a" + "/" * 99, "ab" + "/" * 99]
FILE_NAME = re.compile(r"[A-Za-z0-9_+@-][A-Za-z0-9_.+@-]*")  # the schema's overlay path components
ESCAPED = re.compile(r"(?:[A-Za-z0-9_.+-]|@[0-9A-F]{2})+(?:@@[0-9a-f]{16})?")  # kept, escaped, cut


# ----------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_name_is_its_own_file_name(name: str) -> None:
    assert is_plain(name) and file_name(name) == name and checked_name(name, kind="track") == name


@pytest.mark.parametrize("name", ODD)
def test_any_other_name_maps_to_one_file_name_in_its_folder(name: str, tmp_path: Path) -> None:
    out = file_name(name)
    assert not is_plain(name) and out != name
    assert FILE_NAME.fullmatch(out) and 0 < len(out) <= MAX_LENGTH and out not in (".", "..")
    assert out == "@" if name == "" else ESCAPED.fullmatch(out)  # never a partial escape where a name is cut
    assert file_name(name) == out  # deterministic
    assert (tmp_path / out).parent == tmp_path and (tmp_path / f"{out}.jsonl").parent == tmp_path
    with pytest.raises(XaibenchError) as refused:
        checked_name(name, kind="explainer")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("explainer ") and "not usable as a file name" in line


def test_the_map_is_injective_and_reads_back() -> None:
    names = PLAIN + ODD + ["a_b", "a@2Fb", "@2E", "a@40b", "x" * MAX_LENGTH + "y", "x" * MAX_LENGTH + "z"]
    names += [f"{'é' * 60}{i}" for i in range(20)] + [f"s/{i}" for i in range(20)] + [f"s_{i}" for i in range(20)]
    mapped = [file_name(n) for n in names]
    assert len(set(mapped)) == len(set(names))
    assert file_name("a/b") == "a@2Fb" and file_name("../..") == "@2E.@2F.." and file_name("") == "@"
    assert file_name("a@b") == "a@40b" and file_name(".key") == "@2Ekey" and file_name("café") == "caf@C3@A9"
    long = file_name("x" * 400)
    assert len(long) == MAX_LENGTH and long.endswith("@@" + hashlib.sha256(b"x" * 400).hexdigest()[:16])


def test_a_name_that_is_not_a_string_is_one_line() -> None:
    with pytest.raises(XaibenchError, match=r"^sample id 7: a name must be a string, not int$"):
        file_name(7, kind="sample id")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the places


def test_a_track_journal_stays_in_results(tmp_path: Path) -> None:
    results = tmp_path / "work" / "results"
    assert track_journal(results, "shapes-shortcut") == results / "shapes-shortcut.jsonl"  # existing records
    for name in ("../..", "../../escaped", str(tmp_path / "outside" / "evil"), ".key", ""):
        journal = track_journal(results, name)
        assert journal.parent == results and journal.name.endswith(".jsonl") and not journal.name.startswith(".")
        RecordStore(journal).append([{"key": f"k-{name}", "track": name, "value": 1.0}])
    assert {p.parent for p in tmp_path.rglob("*") if p.is_file()} == {results}
    assert len(journals(results)) == 5


def test_cache_entries_stay_in_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "cache"  # deep, so that a key escaping it still lands under tmp_path
    cache = ExplanationCache(root)
    value = np.ones((4, 4), dtype=np.float32)
    for key in ("../../evil", str(tmp_path / "outside" / "evil"), "k", "0123abcd" * 8):
        cache.put(key, value)
        assert np.array_equal(cache.get(key, shape=(4, 4)), value)  # type: ignore[arg-type]
    assert all(p.is_relative_to(root) for p in tmp_path.rglob("*") if p.is_file())
    assert (root / "01" / f"{'0123abcd' * 8}.npy").is_file()  # a digest key keeps its file name


def test_submission_file_names_refuse_names_that_are_not_plain() -> None:
    assert submission_filename("ablationcam", "", default_params=True) == "ablationcam.json"
    assert submission_filename("zennit-lrp", "99376f2eb8e0", default_params=False) == "zennit-lrp@99376f2eb8e0.json"
    with pytest.raises(XaibenchError, match=r"^explainer '\.\./x': not usable as a file name"):
        submission_filename("../x", "", default_params=True)
    with pytest.raises(XaibenchError, match=r"^explainer gradient: params digest '/tmp/x': not usable"):
        submission_filename("gradient", "/tmp/x", default_params=False)
    with pytest.raises(XaibenchError, match=r"^explainer 'a/b'"):
        example_folder({"name": "a/b", "params_digest": "0f"}, "shapes")


def _example_set(track: str, sample_ids: list[str], seed: int) -> ExampleSet:
    """Overlays that differ between sets (so a file one set overwrote fails the other's sha256)."""
    rng = np.random.default_rng(seed)
    image = np.full((16, 16, 3), 128, dtype=np.uint8)
    examples = [
        Example(sample_id=s, image=image, target=0, target_name="zero", explanation=rng.random((16, 16)))
        for s in sample_ids
    ]
    block = {"name": "gradient", "params_digest": "0123abcd"}
    return ExampleSet(track=track, explainer=block, kind="saliency", examples=examples)


def test_overlays_of_odd_tracks_and_sample_ids_get_files_of_their_own(tmp_path: Path) -> None:
    subs = tmp_path / "box" / "submissions"
    ids = ["../../../../escaped", "/abs/sample", "a/b", "shapes-test-0001"]
    sets = [_example_set("x/y", ids, 1), _example_set("x_y", ids, 2), _example_set("../..", ids, 3)]
    entries = [render_examples(s, subs) for s in sets]
    files = [e["jpeg"] for es in entries for e in es]
    assert len(set(files)) == len(files) == 12  # tracks x/y and x_y once shared a folder (one overwrote the other)
    assert entries[1][3]["jpeg"] == "assets/gradient@0123abcd/x_y/3-shapes-test-0001.jpg"  # plain names: as is
    for entry in (e for es in entries for e in es):
        path = (subs / entry["jpeg"]).resolve()
        assert path.is_relative_to(subs / "assets") and all(FILE_NAME.fullmatch(p) for p in entry["jpeg"].split("/"))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]  # each file is its own entry's
    assert all(p.is_relative_to(subs) for p in tmp_path.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- a run


class EvilSuite(Suite):
    """Three shapes tracks whose names are paths: up two levels, further up, and absolute."""

    name = "evil-names"
    version = "1.0.0"
    description = "track names that are paths"
    licence = "test"
    names: ClassVar[list[str]] = []

    def tracks(self) -> list[TrackSpec]:
        return [
            TrackSpec(name=n, dataset="shapes", model="shapes-cnn", model_params={"variant": "shapes"}, synthetic=True)
            for n in self.names
        ]


class EvilPlugin:
    @hookimpl
    def register_suites(self, register: Any) -> None:
        register(EvilSuite)


def test_a_suite_whose_track_names_are_paths_writes_only_inside_its_folders(
    tmp_path: Path, registry: manager.Registry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    monkeypatch.setattr(EvilSuite, "names", ["../..", "../../../escaped", str(outside / "evil")])
    registry.add_plugin(EvilPlugin(), name="evil-names")
    box = tmp_path / "box"
    monkeypatch.chdir(box.parent)
    args = ["run", "-q", "-e", "random", "--suite", "evil-names", "--limit", "2", "--metric", "iou"]
    args += ["--timeout", "120", "--output-path", str(box / "out")]
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    output = capsys.readouterr()
    assert code == 0, output.out + output.err
    strays = sorted(str(p) for p in tmp_path.rglob("*") if not p.is_relative_to(box / "out"))
    assert strays == [str(box)], "nothing is written outside the output path"
    results = box / "out" / ".xaibench" / "results"
    assert not any(p.suffix == ".jsonl" and p.parent != results for p in tmp_path.rglob("*"))
    stored = {r["track"] for j in journals(results) for r in RecordStore(j).records.values()}
    assert stored == set(EvilSuite.names)  # every track's records, under file names of their own
    submission = box / "out" / "submissions" / "random.json"
    assert set(json.loads(submission.read_text())["tracks"]) == set(EvilSuite.names)
    assert validate_file(submission) == []  # its overlays lie under assets/, as the schema wants
