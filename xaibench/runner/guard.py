"""Guards around third-party explainer calls: a per-call timeout, and the output checks.

The output checks (:func:`check_saliency`, :func:`check_concepts`) live in :mod:`xaibench.kit`, so
plugin tests (:mod:`xaibench.testing`) and the runner apply the same code; they are re-exported here.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from xaibench.kit import check_concepts, check_saliency

__all__ = ["ExplainerTimeout", "call_with_limit", "check_concepts", "check_saliency", "time_limit"]

T = TypeVar("T")


class ExplainerTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`ExplainerTimeout` in the main thread after ``seconds``.

    Uses ``SIGALRM`` (Unix, main thread), which stops Python-level work; elsewhere it
    is a no-op.
    """
    usable = (
        seconds is not None
        and seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise ExplainerTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_with_limit(fn: Callable[[], T], seconds: float | None) -> T:
    with time_limit(seconds):
        return fn()
