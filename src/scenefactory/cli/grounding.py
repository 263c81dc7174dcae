"""The grounding commands: ``collect drive`` and ``collect logs`` (transition datasets),
``fit-dynamics`` (a learned dynamics model) and ``ground`` (a grounding correction); their flags,
and for each the one mapping of them onto its job's arguments (``scenefactory.jobs.data``).

The job module is imported when a command runs, not with this module: it loads rsl-rl and the
grounding methods (about 2 s), which ``scenefactory --help`` and a refused flag do without.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenefactory.bounds import (
    DRIVE_SEED,
    FRACTION,
    MAX_BUDGET,
    MAX_EPOCHS,
    MAX_HISTORY,
    MAX_SEED,
    MAX_STEPS,
    IntRange,
    check_scene_range,
    positive,
)
from scenefactory.cli.argtypes import AGENTS, SPLIT_HELP, WORLDS, out_path
from scenefactory.cli.engine import add_engine_flags, engine_device, engine_spec
from scenefactory.errors import UserError
from scenefactory.scenes.library import SCENE_SPLITS


def add_commands(sub: Any) -> None:
    """Add ``collect drive``, ``collect logs``, ``fit-dynamics`` and ``ground``."""
    col = sub.add_parser("collect", help="record transition datasets for learned dynamics")
    colt = col.add_subparsers(dest="task", required=True)
    cd = colt.add_parser("drive", help="transitions of driving agents under a policy mix")
    add_engine_flags(cd, default="mujoco")
    cd.add_argument("--worlds", type=WORLDS, default=32)
    cd.add_argument("--agents", type=AGENTS, default=4)
    cd.add_argument("--steps", type=positive(MAX_STEPS), default=200, help="policy steps to record")
    cd.add_argument("--checkpoint", type=Path, default=None, help="trained policy for the mix (optional)")
    cd.add_argument("--seed", type=DRIVE_SEED, default=0)
    cd.add_argument("--out", type=out_path, required=True)
    cl = colt.add_parser("logs", help="transitions of the logged drivers of converted scenes (WOMD)")
    cl.add_argument("--scenes", type=Path, required=True, help="folder of converted scene JSON files")
    cl.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
    cl.add_argument("--out", type=out_path, required=True)

    fd = sub.add_parser("fit-dynamics", help="fit a learned dynamics model to a transition dataset")
    fd.add_argument("--data", type=Path, required=True, help="folder written by 'collect drive'")
    fd.add_argument("--model", default="mlp", help="mlp | gru | transformer | residual")
    fd.add_argument(
        "--history", type=positive(MAX_HISTORY), default=None, help="history length (default per model)"
    )
    fd.add_argument("--epochs", type=positive(MAX_EPOCHS), default=10)
    fd.add_argument("--seed", type=IntRange(0, MAX_SEED), default=0)
    fd.add_argument("--out", type=out_path, required=True)

    gr = sub.add_parser("ground", help="correct the kinematic tier toward target transitions")
    gr.add_argument("--method", required=True, help="none | dr | sysid | markov | gat | history")
    gr.add_argument("--data", type=Path, required=True, help="target transition dataset ('collect')")
    gr.add_argument(
        "--budget", type=positive(MAX_BUDGET), default=None, help="target transitions to use (default all)"
    )
    gr.add_argument("--seed", type=IntRange(0, MAX_SEED), default=0)
    gr.add_argument("--steps", type=positive(MAX_STEPS), default=2000, help="training steps of the networks")
    gr.add_argument("--alpha", type=FRACTION, default=0.5, help="gat: ã = (1-α)a + α·g(s, a)")
    gr.add_argument("--history", type=positive(MAX_HISTORY), default=8, help="history: steps the GRU reads")
    gr.add_argument("--out", type=out_path, required=True)


DATASET_KEYS = ("engine", "transitions", "shards", "policies_used")
"""The figures ``collect`` prints (``meta.json`` has all)."""


def collect_drive(args: argparse.Namespace) -> int:
    """``collect drive``: its procedural scenes stay in the training seed range."""
    from scenefactory.jobs import data  # when the command runs: start-up time (module docstring)

    engine = engine_spec(args, data.POLICY_HZ, f"the {data.POLICY_HZ:g} Hz policy")
    if engine_device(args) != "cpu":
        raise UserError(
            f"collect drive records its transitions on the CPU (numpy shards): --device {args.device} is "
            "not supported here; use --device cpu (any --engine, mujoco-warp included)"
        )
    check_scene_range("train", args.seed, data.COLLECT_SCENES, f"--seed {args.seed}")
    meta = data.collect(
        data.CollectArgs(
            out=args.out,
            engine=engine,
            worlds=args.worlds,
            agents=args.agents,
            steps=args.steps,
            seed=args.seed,
            checkpoint=args.checkpoint,
        )
    )
    print(json.dumps({k: meta[k] for k in DATASET_KEYS}))
    return 0


def collect_logs(args: argparse.Namespace) -> int:
    """``collect logs``."""
    from scenefactory.jobs import data  # when the command runs: start-up time (module docstring)

    meta = data.collect_logs(
        data.CollectLogsArgs(scenes_dir=args.scenes, out=args.out, scene_split=args.scene_split)
    )
    print(json.dumps({k: meta[k] for k in DATASET_KEYS}))
    return 0


def fit_dynamics(args: argparse.Namespace) -> int:
    """``fit-dynamics``: prints the model's held-out errors beside the kinematic bicycle's."""
    from scenefactory.jobs import data  # when the command runs: start-up time (module docstring)

    metrics = data.fit_dynamics(
        data.FitDynamicsArgs(
            data=args.data,
            out=args.out,
            model=args.model,
            history=args.history,
            epochs=args.epochs,
            seed=args.seed,
        )
    )
    print(json.dumps({"model": metrics["model"], "kinematic_bicycle": metrics["kinematic_bicycle"]}))
    print(f"model: {args.out / 'model.pt'}  metrics: {args.out / 'metrics.json'}")
    return 0


def ground(args: argparse.Namespace) -> int:
    """``ground``: prints the held-out errors and how to use the grounding."""
    from scenefactory.jobs import data  # when the command runs: start-up time (module docstring)

    config = data.ground(
        data.GroundArgs(
            method=args.method,
            data=args.data,
            out=args.out,
            budget=args.budget,
            seed=args.seed,
            steps=args.steps,
            alpha=args.alpha,
            history=args.history,
        )
    )
    print(json.dumps({"budget_transitions": config["budget_transitions"], **config["heldout"]}))
    print(f"grounding: {args.out}  (use --engine grounded --grounding {args.out})")
    return 0


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("collect", "drive"): collect_drive,
    ("collect", "logs"): collect_logs,
    ("fit-dynamics", None): fit_dynamics,
    ("ground", None): ground,
}
"""(command, task) → the function that runs it."""
