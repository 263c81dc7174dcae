"""``experiment`` (reproduce a headline result) and ``seed-level`` (an experiment report's figures
with the training seed as the unit): their flags, and the one mapping of ``experiment``'s onto
:class:`~scenefactory.experiments.ExperimentArgs` (``--ray ADDRESS``: the trainings and
evaluations as tasks on a Ray cluster, :mod:`scenefactory.experiments.ray_backend`).

The experiments package is imported when a command runs, not with this module: it loads the whole
driving stack (rsl-rl, tensordict, matplotlib; 2 s and more), which ``scenefactory --help`` and a
refused flag do without. ``--help`` names the experiments from :data:`EXPERIMENT_NAMES`, which
``tests/cli/test_cli_flags.py`` holds equal to the registry's names.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenefactory.bounds import DRIVE_SEED, LAG_STEPS, MAX_BUDGET, MAX_POLICY_SEEDS, positive
from scenefactory.cli.argtypes import ITERATIONS, SCENES, out_path

EXPERIMENT_NAMES = (
    "transfer",
    "friction-change",
    "wet-road",
    "log-grounding",
    "grounding",
    "matrix",
    "go1-navigation",
)
"""The names of ``scenefactory.experiments.EXPERIMENTS``, in its order (for ``--help``)."""


def _kind_path(kind: str, example: str) -> Callable[[str], tuple[str, Path]]:
    """Argument type of a ``KIND=PATH`` pair (``kind``: what the key is, ``example``: a pair, both
    for the error message)."""

    def parse(text: str) -> tuple[str, Path]:
        key, sep, path = text.partition("=")
        if not sep or not key or not path:
            raise argparse.ArgumentTypeError(f"expected {kind}=PATH (e.g. {example}), got '{text}'")
        return key, Path(path)

    return parse


def add_commands(sub: Any) -> None:
    """Add ``experiment`` and ``seed-level``."""
    x = sub.add_parser("experiment", help="reproduce a headline result (writes a report folder)")
    x.add_argument("name", metavar="NAME", help="one of: " + ", ".join(EXPERIMENT_NAMES))
    x.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="KIND=PATH",
        type=_kind_path("TIER", "mujoco=runs/m/checkpoints/latest.pt"),
        help="a trained policy to use instead of training one (repeatable: one per seed)",
    )
    x.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of a few minutes")
    x.add_argument(
        "--seeds", type=positive(MAX_POLICY_SEEDS), default=None, help="training seeds per policy kind"
    )
    x.add_argument("--episodes", type=SCENES, default=None, help="held-out scenes per evaluation")
    x.add_argument("--iterations", type=ITERATIONS, default=None, help="PPO iterations of policies trained")
    x.add_argument("--scenes", type=Path, default=None, help="folder of scene JSON (log-grounding)")
    x.add_argument("--seed", type=DRIVE_SEED, default=0, help="first training seed, and the evaluation seed")
    x.add_argument(
        "--action-lag-steps",
        type=LAG_STEPS,
        default=None,
        help="grounding: the target's actuator lag in policy steps (default 3)",
    )
    x.add_argument(
        "--budget",
        type=positive(MAX_BUDGET),
        default=None,
        help="grounding: target transitions per grounding fit",
    )
    x.add_argument(
        "--dynamics-model",
        action="append",
        default=[],
        metavar="KIND=PATH",
        type=_kind_path("KIND", "gru=runs/fit_gru/model.pt"),
        help="matrix: a fit-dynamics model.pt to use instead of fitting that family (repeatable)",
    )
    x.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="run the trainings and evaluations as tasks on an existing Ray cluster (HOST:PORT, ray://HOST:PORT"
        " or auto); --out must be on storage every node mounts at the same path",
    )
    x.add_argument("--out", type=out_path, required=True)

    sl = sub.add_parser(
        "seed-level", help="an experiment report's figures with the training seed as the unit"
    )
    sl.add_argument("folder", type=Path, metavar="DIR", help="an experiment's report folder (results.json)")
    sl.add_argument(
        "--compare",
        nargs=2,
        action="append",
        default=[],
        metavar=("A", "B"),
        help="cells of results.json to compare, A − B (repeatable)",
    )
    sl.add_argument(
        "--paired", action="store_true", help="pair the cells' policies by training seed (same policies)"
    )


def experiment(args: argparse.Namespace) -> int:
    """``experiment NAME``: the report folder's ``report.md`` records the exact command line."""
    from scenefactory import experiments  # when the command runs: start-up time (module docstring)

    xargs = experiments.ExperimentArgs(
        out=args.out,
        quick=args.quick,
        seeds=args.seeds,
        seed=args.seed,
        checkpoints=tuple(args.checkpoint),
        episodes=args.episodes,
        iterations=args.iterations,
        scenes_dir=args.scenes,
        command=shlex.join(["scenefactory", *args.argv]),
        action_lag_steps=args.action_lag_steps,
        budget=args.budget,
        dynamics_models=tuple(args.dynamics_model),
        ray=args.ray,
    )
    experiments.run_experiment(args.name, xargs)
    print(f"report: {args.out / 'report.md'}")
    return 0


def seed_level_figures(args: argparse.Namespace) -> int:
    """``seed-level DIR``: writes ``seed_level.md`` into the report folder."""
    from scenefactory.experiments import seed_level  # when the command runs: start-up time (docstring)

    seed_level.write_seed_level(args.folder, [(a, b) for a, b in args.compare], args.paired)
    print(f"seed-level: {args.folder / 'seed_level.md'}")
    return 0


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("experiment", None): experiment,
    ("seed-level", None): seed_level_figures,
}
"""(command, task) → the function that runs it."""
