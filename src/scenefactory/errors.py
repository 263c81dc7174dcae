"""User-facing errors: the CLI prints their message (no traceback) and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a wrong flag value, a malformed file, a missing checkpoint.

    The message names what was wrong (file, field or value) and what was expected.
    """


class SceneFormatError(UserError):
    """A scene file that cannot be read: names the file and field, and what was expected."""


class CheckpointError(UserError):
    """A checkpoint that is missing or does not fit the requested task or engine."""


def warn(message: str) -> None:
    """Tell the user about something recovered from (one line on stderr, the run goes on)."""
    import sys

    print(f"scenefactory: warning: {message}", file=sys.stderr)
