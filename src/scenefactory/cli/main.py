"""``scenefactory`` command line: the global flags, the parser assembled from the command groups
(``cli.drive``, ``cli.scenes``, ``cli.grounding``, ``cli.experiment``, ``cli.go1``), dispatch to
the command's function, and error handling.

A command's function maps its flags onto its job's argument dataclass (``scenefactory.jobs``,
``scenefactory.go1.jobs``) and runs the job. User errors (bad flag values, unknown engines, missing
or incompatible checkpoints, malformed scene files) print one clear message and exit with status 2,
without a traceback; Ctrl-C says what the command leaves behind and exits with status 130.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import torch

from scenefactory.bounds import MAX_THREADS, positive
from scenefactory.cli import benchmark, drive, experiment, go1, grounding, scenes
from scenefactory.cli import view as view_cli
from scenefactory.cli.argtypes import FILE_OUTPUTS, check_flags
from scenefactory.cli.out_lock import out_lock
from scenefactory.errors import UserError
from scenefactory.rl import distributed

COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    **drive.COMMANDS,
    **view_cli.COMMANDS,
    **scenes.COMMANDS,
    **grounding.COMMANDS,
    **experiment.COMMANDS,
    **go1.COMMANDS,
    **benchmark.COMMANDS,
}
"""(command, task or ``None``) → the function that runs it (and returns the exit status)."""

TASK_COMMANDS = (
    ("train", "train a policy with PPO"),
    ("eval", "evaluate a checkpoint → metrics.json"),
    ("bench", "measure controlled-agent steps per second"),
    ("render", "top-down GIF of a policy"),
)
"""The commands whose task (``drive`` or ``go1``) comes next: ``scenefactory train drive ...``."""


class UsageError(UserError):
    """A flag argparse refused: unknown, missing, or a value of the wrong kind."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: :meth:`error` raises :class:`UsageError` (``main``
    prints ``scenefactory: error: <message>`` and returns 2) instead of printing the usage and
    exiting. Every subcommand's parser is one too: ``add_subparsers`` makes them of this class."""

    def error(self, message: str) -> NoReturn:
        """Raise the message (which names the flag) on one line, with where to find the usage."""
        raise UsageError(f"{' '.join(message.split())} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (names are a contract relied on by docs and tools)."""
    p = Parser(prog="scenefactory", description="Batched driving simulation for RL.")
    p.add_argument(
        "--threads",
        type=positive(MAX_THREADS),
        default=None,
        help="torch CPU threads, also MuJoCo's and numba's (default: torch's choice); idle threads sleep "
        "unless OMP_WAIT_POLICY is set (docs: concepts/performance)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    drive.add_commands(sub)
    scenes.add_commands(sub)
    benchmark.add_commands(sub)
    grounding.add_commands(sub)
    experiment.add_commands(sub)
    for name, helptext in TASK_COMMANDS:
        tasks = sub.add_parser(name, help=helptext).add_subparsers(dest="task", required=True)
        go1.add_task_parser(name, tasks)
        drive.add_task_parser(name, tasks)
    go1.add_commands(sub)
    view_cli.add_commands(sub)
    return p


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments), check the flags every command shares
    (:func:`~scenefactory.cli.argtypes.check_flags`) and run the command, which checks its own
    before any work; raises :class:`UserError` on bad input."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = build_parser().parse_known_args(argv)
    _Running.command = args.command
    task = getattr(args, "task", None)
    if unknown:
        where = " ".join(["scenefactory", args.command, *([task] if task else [])])
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)} (see '{where} --help')")
    args.argv = argv  # the command line as given, for the reports that record it (experiment)
    check_flags(args)
    if distributed.ranks_from_environ().distributed and args.command != "train":
        raise UserError(
            f"'{args.command}' runs in one process: torchrun (WORLD_SIZE > 1) starts 'train drive' "
            "and 'train go1' only"
        )
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        rank, folder = distributed.ranks_from_environ().rank, (args.command, task) not in FILE_OUTPUTS
        with out_lock(getattr(args, "out", None), folder, rank):  # one run per --out folder (cli.out_lock)
            return COMMANDS[(args.command, task)](args)
    finally:
        distributed.shutdown()  # a data-parallel training run leaves its process group


INTERRUPTED = {
    "train": "the last checkpoint written, if any, is intact; rerun the same command to resume from it",
    "demo": "the last checkpoint written, if any, is intact; rerun the same command to resume training"
    " from it and redo the evaluation",
    "experiment": "finished stages and the last checkpoints written are intact; rerun the same command"
    " to resume",
    "collect": "the dataset is unfinished: its meta.json is written last, the shards written are"
    " complete files; rerun the same command to redo it",
}
"""What a Ctrl-C leaves behind, per command that checkpoints or writes as it goes."""
INTERRUPTED_OTHER = (
    "every file written is complete (files are written whole); rerun the same command to redo it"
)
"""What a Ctrl-C leaves behind for the other commands."""


class _Running:
    """The command being run, for :func:`main`'s message on Ctrl-C (``None`` before parsing)."""

    command: str | None = None


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: user errors become one line on stderr and exit status 2; Ctrl-C one line
    saying what the command leaves behind (:data:`INTERRUPTED`), exit status 130."""
    _Running.command = None
    try:
        return run(argv)
    except UserError as exc:
        print(f"scenefactory: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        note = INTERRUPTED.get(_Running.command or "", INTERRUPTED_OTHER)
        print(f"scenefactory: interrupted ({note})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
