"""Errors meant for the user: each carries one clear line naming the file or option and the problem.

The command line prints ``str(error)`` and exits non-zero; it never shows a traceback for these.
"""

from __future__ import annotations


class XaibenchError(Exception):
    """An error with a one-line message meant for the user."""


class UnknownComponentError(XaibenchError, KeyError):
    """A component name that no installed plugin registered (the message suggests close matches)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class RegistrationError(XaibenchError):
    """A plugin registered something invalid, or two plugins registered one name."""
