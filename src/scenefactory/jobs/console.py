"""Where the jobs talk: one ``rich`` console on stderr (stdout is the commands' results) and the
progress bar every long job shows."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
"""Status lines of the jobs; a run's results go to stdout (the CLI) and to files."""


def progress_bar() -> Progress:
    """A progress bar on :data:`console`: description, bar, done/total, a free ``info`` field,
    elapsed and remaining time. Jobs open it only once their inputs are read and checked, so that a
    bad input is one error line, not a started bar and then an error."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
