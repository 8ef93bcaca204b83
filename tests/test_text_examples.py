"""Text examples (issue 46, DESIGN 12): a text explanation kept in its submission as highlighted
tokens (``xaibench-token-highlight/1``: tokens, one value per token in [0, 1], the ground-truth
positions), validated, and drawn on the explainer page as escaped ``<span>`` tokens whose class
encodes the value (the site's CSP forbids inline styles).

Oracles: the highlight's values by hand; the validator's findings on entries broken one way each;
the page's spans, classes and escaping read back from the HTML; a run of the ``planted-tokens``
track whose strong evidence tokens must be the brightest and underlined."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _site_data import submission, write_submissions

from xaibench.pasta.highlight import MAX_EXAMPLES, MAX_TOKEN_CHARS, MAX_TOKENS, highlight_id, token_highlight
from xaibench.publish.examples import render_examples
from xaibench.publish.validation import validate_file, validate_text
from xaibench.runner.examples import Example, ExampleSet
from xaibench.site import build_site
from xaibench.site.views.tokens import highlight_bin, is_text_example, token_views

HOSTILE = ("<script>", '"onmouseover=alert(1)', "&amp;", "plain")


def test_the_highlight_is_the_maps_positive_part_min_max_scaled_over_the_real_tokens() -> None:
    explanation = np.array([[-1.0, 0.0, 1.0, 3.0, 2.0, 99.0]])  # the last value is padding
    shown = token_highlight(explanation, ["a", "b", "c", "d", "e"], np.array([[0, 0, 1, 1, 0, 1]]))
    # positive part [0, 0, 1, 3, 2], min 0, max 3
    assert shown.values == [0.0, 0.0, 0.333, 1.0, 0.667]
    assert shown.tokens == ["a", "b", "c", "d", "e"] and shown.truth == [2, 3]
    flat = token_highlight(np.full((1, 4), 0.7), ["a", "b", "c"])
    assert flat.values == [0.0, 0.0, 0.0] and flat.truth is None  # a constant map: all zeros
    long = token_highlight(np.arange(MAX_TOKENS + 5, dtype=float)[None], ["x" * 100] * (MAX_TOKENS + 5))
    assert len(long.values) == len(long.tokens) == MAX_TOKENS
    assert len(long.tokens[0]) == MAX_TOKEN_CHARS and long.tokens[0].endswith("…")
    with pytest.raises(ValueError, match="NaN or inf"):
        token_highlight(np.array([[1.0, np.nan]]), ["a", "b"])
    with pytest.raises(ValueError, match="3 tokens but a map of 2 values"):
        token_highlight(np.array([[1.0, 2.0]]), ["a", "b", "c"])


def test_a_text_example_set_becomes_entries_with_data_and_no_file(tmp_path: Path) -> None:
    examples = ExampleSet(
        track="planted-tokens",
        explainer={"name": "gradient", "params_digest": "abc"},
        kind="saliency",
        modality="text",
        examples=[
            Example(
                "s0",
                np.array([3, 4, 0]),
                1,
                "positive",
                np.array([[0.0, 2.0, 5.0]]),
                tokens=("<script>", "good"),
                truth=np.array([[False, True, False]]),
            ),
            Example("s1", np.array([3, 0, 0]), 0, "negative", None, na_reason="explainer raised"),
        ],
    )
    entries = render_examples(examples, tmp_path)
    assert entries == [
        {
            "sample_id": "s0",
            "target": 1,
            "target_name": "positive",
            "render": "xaibench-token-highlight/1",
            "tokens": ["<script>", "good"],
            "values": [0.0, 1.0],  # the padding's 5.0 is left out before scaling
            "truth": [1],
        },
        {
            "sample_id": "s1",
            "target": 0,
            "target_name": "negative",
            "render": "xaibench-token-highlight/1",
            "na_reason": "explainer raised",
        },
    ]
    assert not any(tmp_path.iterdir())  # no file
    many = ExampleSet("t", {"name": "g", "params_digest": "abc"}, "saliency", [examples.examples[0]] * 70, "text")
    assert len(render_examples(many, tmp_path)) == MAX_EXAMPLES


def _with_text_examples(data: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out["tracks"]["synth-a"]["examples"] = [
        {
            "sample_id": "s0",
            "target": 1,
            "target_name": "positive",
            "render": highlight_id(),
            "tokens": list(HOSTILE),
            "values": [1.0, 0.55, 0.05, 0.0],
            "truth": [0, 3],
        },
        {"sample_id": "s1", "target": 0, "render": highlight_id(), "na_reason": "explainer raised <b>"},
    ]
    return out


def _issues(data: dict[str, Any], folder: Path) -> set[tuple[str, str]]:
    return {(i.pointer, i.message) for i in validate_text(json.dumps(data, indent=2), "x.json", folder)}


def test_text_examples_validate_and_each_broken_entry_is_found(tmp_path: Path) -> None:
    data = _with_text_examples(submission("alpha", tmp_path))
    assert _issues(data, tmp_path) == set()
    ptr = "/tracks/synth-a/examples/0"

    def broken(**change: Any) -> set[tuple[str, str]]:
        bad = copy.deepcopy(data)
        bad["tracks"]["synth-a"]["examples"][0].update(change)
        return _issues(bad, tmp_path)

    assert broken(values=[1.0, 0.5]) == {(f"{ptr}/values", "2 values for 4 tokens (one per token)")}
    assert broken(truth=[3, 0]) == {(f"{ptr}/truth", "the ground-truth positions must increase")}
    assert broken(truth=[0, 4]) == {(f"{ptr}/truth", "ground-truth position 4 is beyond the 4 tokens")}
    assert broken(sentence="s") == {(f"{ptr}/sentence", "a text example (tokens) has no sentence")}
    assert broken(render="xaibench-jet-overlay/1") == {
        (f"{ptr}/render", "a text example's render is xaibench-token-highlight, not 'xaibench-jet-overlay/1'")
    }
    out_of_range = broken(values=[1.5, 0.5, 0.0, 0.0])
    assert [p for p, _ in out_of_range] == [f"{ptr}/values/0"]
    assert "greater than the maximum of 1" in next(iter(out_of_range))[1]
    assert {p for p, _ in broken(tokens=["x" * (MAX_TOKEN_CHARS + 1)] * 4)} == {f"{ptr}/tokens/{k}" for k in range(4)}
    assert any(p == f"{ptr}/tokens" for p, _ in broken(tokens=["x"] * (MAX_TOKENS + 1), values=[0.0] * 4))
    no_values = copy.deepcopy(data)
    del no_values["tracks"]["synth-a"]["examples"][0]["values"]
    assert [p for p, _ in _issues(no_values, tmp_path)] == [ptr]  # tokens need values
    crowded = copy.deepcopy(data)
    crowded["tracks"]["synth-a"]["examples"] = [data["tracks"]["synth-a"]["examples"][0]] * (MAX_EXAMPLES + 1)
    assert _issues(crowded, tmp_path) == {
        ("/tracks/synth-a/examples", f"{MAX_EXAMPLES + 1} text examples: at most {MAX_EXAMPLES} per track")
    }


def test_the_explainer_page_draws_escaped_tokens_with_bins_ground_truth_and_a_legend(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    data = json.loads((subs / "gamma.json").read_text())
    (subs / "gamma.json").write_text(json.dumps(_with_text_examples(data)))
    assert validate_file(subs / "gamma.json") == []
    build_site(subs, tmp_path / "site")
    html = (tmp_path / "site" / "explainers" / "gamma.html").read_text()
    text_track = html.split('<section class="track"')[1]
    spans = re.findall(r'<p class="tokens">(.*?)</p>', text_track)
    assert len(spans) == 1
    assert spans[0] == (
        '<span class="tok hl-9 gt" title="1.000">&lt;script&gt;</span> '
        '<span class="tok hl-5" title="0.550">&#34;onmouseover=alert(1)</span> '
        '<span class="tok hl-0" title="0.050">&amp;amp;</span> '
        '<span class="tok hl-0 gt" title="0.000">plain</span> '
    )
    assert "<script>" not in text_track and '"onmouseover' not in text_track
    assert "explainer raised &lt;b&gt;" in text_track  # the n/a example, escaped
    assert text_track.count('class="tok hl-') == 4 + 10  # the tokens and the legend's ten swatches
    assert '<span class="tok gt">ground truth</span>' in text_track
    assert "Canonical token highlights (xaibench-token-highlight/1)" in text_track
    assert "style=" not in html  # the CSP forbids inline styles
    image_track = html.split('<section class="track"')[2]  # the other track keeps its overlays
    assert image_track.count('<img src="../assets/overlays/') == 2 and 'class="tok' not in image_track
    css = (tmp_path / "site" / "assets" / "site.css").read_text()
    assert all(f".hl-{b} {{" in css for b in range(10)) and ".tok.gt {" in css


def test_bins_and_views_of_entries_that_are_not_text() -> None:
    assert [highlight_bin(v) for v in (0.0, 0.099, 0.1, 0.55, 0.9, 1.0, 7.0, -1.0, float("nan"))] == [
        0,
        0,
        1,
        5,
        9,
        9,
        9,
        0,
        0,
    ]
    assert token_views({"sample_id": "s", "jpeg": "assets/x.jpg"}) is None
    assert token_views({"tokens": ["a", "b"], "values": [1.0]}) is None  # unpaired: not drawn
    assert is_text_example({"render": "xaibench-token-highlight/1", "na_reason": "explainer raised"})
    assert not is_text_example({"render": "xaibench-jet-overlay/1", "na_reason": "explainer raised"})


def test_a_text_track_whose_examples_all_failed_says_so_as_text(tmp_path: Path) -> None:
    subs = write_submissions(tmp_path / "subs", ("alpha", "beta", "gamma"))
    data = json.loads((subs / "gamma.json").read_text())
    data["tracks"]["synth-a"]["examples"] = [{"sample_id": "s0", "render": highlight_id(), "na_reason": "no map"}]
    (subs / "gamma.json").write_text(json.dumps(data))
    build_site(subs, tmp_path / "site")
    track = (tmp_path / "site" / "explainers" / "gamma.html").read_text().split('<section class="track"')[1]
    assert '<div class="noimg">no map</div>' in track and "Canonical token highlights" in track
    assert "Canonical overlays" not in track and '<p class="tokens">' not in track


@pytest.mark.slow
def test_a_planted_tokens_run_keeps_highlighted_examples_that_validate_and_show(tmp_path: Path) -> None:
    """End to end: the integrated-gradients map of a planted sample is exact (2 per strong word, 1
    per weak one), so its strong words get 1.0 and its weak ones 0.5, every evidence word is
    underlined, and a filler is 0."""
    from xaibench.python_api import run

    results = run(
        "integrated-gradients,random",
        suite="text",
        tracks="planted-tokens",
        metrics="iou",
        limit=3,
        output_path=tmp_path,
        progress=False,
    )
    sub = results.submissions_dir / "integrated-gradients.json"
    assert validate_file(sub) == []
    examples = json.loads(sub.read_text())["tracks"]["planted-tokens"]["examples"]
    assert [e["render"] for e in examples] == [highlight_id()] * 3
    for e in examples:
        assert len(e["tokens"]) == len(e["values"]) == 32
        strong = [k for k, v in enumerate(e["values"]) if v == 1.0]
        weak = [k for k, v in enumerate(e["values"]) if v == 0.5]
        assert len(strong) == len(weak) == 2 and e["truth"] == sorted(strong + weak)
        assert all(v == 0.0 for k, v in enumerate(e["values"]) if k not in e["truth"])
    assert results.site_dir is not None
    page = (results.site_dir / "explainers" / "integrated-gradients.html").read_text()
    assert page.count('<p class="tokens">') == 3 and page.count("hl-9 gt") == 6
