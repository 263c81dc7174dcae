"""``convert``: driving logs (WOMD scenario shards) to scene files; its flags, and the one mapping
of them onto :class:`~scenefactory.jobs.data.ConvertArgs`.

The job module is imported when the command runs, not with this module: it loads the driving
stack (torch models, the road cache), which ``scenefactory --help`` and a refused flag do without.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from scenefactory.bounds import EVAL_FRACTION, MAX_WORKERS, positive
from scenefactory.cli.argtypes import SCENE_AGENTS, out_path
from scenefactory.errors import warn

SHOWN_ERRORS = 20
"""Bad records ``convert`` prints on stderr; the rest are in ``summary.json``."""


def add_commands(sub: Any) -> None:
    """Add ``convert``."""
    c = sub.add_parser("convert", help="WOMD scenario shards -> scene files (JSON, MJCF, USD)")
    c.add_argument("inputs", nargs="+", help="scenario TFRecord files or globs")
    c.add_argument("--out", type=out_path, required=True)
    c.add_argument("--format", default="json", help="comma-separated: json,mjcf,usd (default json)")
    c.add_argument(
        "--workers", type=positive(MAX_WORKERS), default=1, help="worker processes (one shard each)"
    )
    c.add_argument("--max-agents", type=SCENE_AGENTS, default=32, help="controlled agents per scene")
    c.add_argument(
        "--skip-bad",
        action="store_true",
        help="exit 0 even if some records or scenarios were bad (listed in summary.json)",
    )
    c.add_argument("--ray", default=None, metavar="ADDRESS", help="run on an existing Ray cluster")
    c.add_argument(
        "--eval-fraction",
        type=EVAL_FRACTION,
        default=0.1,
        help="share of scenes put in the eval split, by a hash of their scenario id (default 0.1)",
    )


def convert(args: argparse.Namespace) -> int:
    """``convert``: prints the counts and the first bad records; exit status 1 when a record was bad
    (unless ``--skip-bad``), 128 + the signal when interrupted."""
    # when the command runs: start-up time (module docstring)
    from scenefactory.jobs import data
    from scenefactory.scenes.womd.batch import ConvertInterrupted

    try:
        summary = data.convert(
            data.ConvertArgs(
                inputs=tuple(args.inputs),
                out=args.out,
                formats=args.format,
                workers=args.workers,
                max_agents=args.max_agents,
                ray_address=args.ray,
                eval_fraction=args.eval_fraction,
            )
        )
    except ConvertInterrupted as stop:
        print(
            f"scenefactory: convert {stop}: workers ended; what was written is listed in"
            f" {args.out / 'summary.json'} and index.json",
            file=sys.stderr,
        )
        return 128 + stop.signum
    print(json.dumps({k: summary[k] for k in ("files", "scenarios_read", "converted", "splits")}))
    agents = summary["agents"]
    why = ", ".join(f"{r} {n}" for r, n in agents["by_reason"].items() if n)
    print(
        f"agents: {agents['controlled']} controlled, {agents['replayed']} replayed"
        + (f" ({why})" if why else "")
        + f", {agents['left_out']} left out"
    )
    errors = summary["errors"]
    print(f"skipped {len(summary['skipped'])}, errors {len(errors)}: {args.out / 'summary.json'}")
    for message in summary["warnings"]:
        warn(message)
    for problem in errors[:SHOWN_ERRORS]:
        print(f"scenefactory: bad input: {problem['error']}", file=sys.stderr)
    if len(errors) > SHOWN_ERRORS:
        print(
            f"scenefactory: ... and {len(errors) - SHOWN_ERRORS} more errors in summary.json", file=sys.stderr
        )
    return 1 if errors and not args.skip_bad else 0


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {("convert", None): convert}
"""(command, task) → the function that runs it."""
