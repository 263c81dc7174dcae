"""``view``: the live 3D viewer in the browser (``scenefactory.jobs.view``, viser: the optional
``viewer`` extra); its flags and the one mapping of them onto :class:`~scenefactory.jobs.view.ViewArgs`.

The job module is imported when the command runs, not with this module (it loads the driving or
the Go1 stack, and viser).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenefactory.bounds import DRIVE_SEED, FloatRange, IntRange
from scenefactory.scenes.library import SCENE_SPLITS

Handler = Callable[[argparse.Namespace], int]


def add_commands(sub: Any) -> None:
    """Add ``view``."""
    v = sub.add_parser(
        "view",
        help="live 3D viewer in the browser (127.0.0.1): scenes, a running evaluation or a Go1 policy",
    )
    v.add_argument(
        "--scenes", type=Path, default=None, help="a folder of scene JSON (their logged drivers drive)"
    )
    v.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help="which of the folder's scenes")
    v.add_argument("--checkpoint", type=Path, default=None, help="a driving policy: a running evaluation")
    v.add_argument("--go1", default=None, metavar="CHECKPOINT", help="a Go1 checkpoint, or 'shipped'")
    v.add_argument("--worlds", type=IntRange(1, 8), default=4, help="driving scenes run together (1-8)")
    v.add_argument("--seed", type=DRIVE_SEED, default=0)
    v.add_argument("--port", type=IntRange(1, 65535), default=8080, help="port on 127.0.0.1 (default 8080)")
    v.add_argument(
        "--max-seconds",
        type=FloatRange(0.0, 86400.0, low_open=True),
        default=None,
        help="stop by itself after this long (default: until Ctrl-C)",
    )


def view(args: argparse.Namespace) -> int:
    """``view``: serve until Ctrl-C or ``--max-seconds``."""
    from scenefactory.jobs import view as job  # when the command runs (module docstring)

    job.view(
        job.ViewArgs(
            scenes_dir=args.scenes,
            scene_split=args.scene_split,
            checkpoint=args.checkpoint,
            go1=args.go1,
            worlds=args.worlds,
            seed=args.seed,
            port=args.port,
            max_seconds=args.max_seconds,
        ),
        ready=lambda url: print(f"viewer: {url} (Ctrl-C to stop)", flush=True),
    )
    return 0


COMMANDS: dict[tuple[str, str | None], Handler] = {("view", None): view}
"""(command, task) → the function that runs it."""
