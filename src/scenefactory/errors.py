"""User-facing errors: the CLI prints their message (no traceback) and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a wrong flag value, a malformed file, a missing checkpoint.

    The message names what was wrong (file, field or value) and what was expected.
    """


class SceneFormatError(UserError):
    """A scene file that cannot be read: names the file and field, and what was expected."""


class ArgumentError(UserError, ValueError, TypeError):
    """A Python API argument or config field out of its bounds or of the wrong type: names the
    argument (and the CLI flag that sets it), the value and what was expected.

    It is a ``UserError`` (the CLI prints it on one line) and also a ``ValueError`` and a
    ``TypeError``, the exceptions Python code expects from a bad argument.
    """


class CheckpointError(UserError):
    """A checkpoint that is missing or does not fit the requested task or engine."""


def warn(message: str) -> None:
    """Tell the user about something recovered from (one line on stderr, the run goes on)."""
    import sys

    print(f"scenefactory: warning: {message}", file=sys.stderr)
