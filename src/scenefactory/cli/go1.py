"""The ``go1`` commands (``train/eval/render/bench go1``, ``export go1``, ``deploy go1``): their flags
(``cli.main`` calls :func:`add_task_parser` and :func:`add_commands`; ``train go1``'s are generated
from its config dataclass in ``cli.go1_train_flags``), and for each the one mapping of them onto its
job's argument dataclass (``scenefactory.go1.jobs``; ``go1.chain`` for ``train go1 --recipe``).

When ``--checkpoint`` is omitted, eval, render and export (and deploy, without ``--policy``) use the
policy shipped in the package (``scenefactory/go1/policies/go1_whole_body.pt``); ``--checkpoint
rough`` names the shipped rough-terrain policy (``go1.jobs.SHIPPED_POLICIES``).

The job module is imported when a command runs, not with this module: it loads the Go1 stack
(MuJoCo models, rsl-rl, ONNX), which ``scenefactory --help`` and a refused flag do without.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenefactory.bounds import (
    MAX_BENCH_STEPS,
    MAX_EPISODES,
    MAX_RENDER_S,
    MAX_RUN_S,
    MAX_SEED,
    FloatRange,
    IntRange,
    positive,
)
from scenefactory.cli.argtypes import out_path
from scenefactory.cli.flags import given_fields
from scenefactory.cli.go1_train_flags import (
    ENVS,
    LATENCY_MS,
    RECIPE_FLAGS,
    SCALE,
    SPACING,
    TILE_KINDS,
    add_train_flags,
)
from scenefactory.errors import UserError
from scenefactory.go1.options import RecipeOptions
from scenefactory.go1.recipes import check_start, go1_recipe, overridden, stage_index

SEED = IntRange(0, MAX_SEED)
EPISODES = positive(MAX_EPISODES)
EVAL_TABLES = ("velocity", "push", "whole-body", "terrain")
"""``go1.jobs.TABLES``, spelled out so that ``--help`` loads no Go1 stack (a test checks they agree)."""
LEVEL = IntRange(0, 99)
TARGET_LEVELS = (3, 4, 5, 7)
"""Terrain levels ``eval go1`` runs by default: those of the terrain traversal targets (docs results)."""
CHECKPOINT_HELP = (
    "policy: a checkpoint file or run folder, or a shipped policy's name (whole-body, rough) "
    "(default: the shipped whole-body policy)"
)
"""``--checkpoint``'s help; the names are ``go1.jobs.SHIPPED_POLICIES``'s (a test checks they agree)."""
GO1_ENGINE_HELP = "physics of the worlds: mujoco (MuJoCo C on CPU threads; default) or mujoco-warp"
GO1_DEVICE_HELP = (
    "where MuJoCo Warp's worlds run: cpu (default) or cuda[:N] (the Go1 task and its policy run on the "
    "CPU: on a GPU the state is copied to the host every physics step)"
)


def physics(args: argparse.Namespace) -> Any:
    """``--engine`` and ``--device`` as a :class:`~scenefactory.engines.mjwarp.PhysicsBackend`, the
    device checked (a :class:`~scenefactory.errors.UserError` names what does not fit)."""
    from scenefactory.engines.mjwarp import PhysicsBackend, check_device

    device = str(check_device(args.device))
    try:
        return PhysicsBackend(args.engine, device)
    except ValueError as exc:
        raise UserError(f"--engine {args.engine} --device {args.device}: {exc}") from exc


def add_task_parser(command: str, tasks: Any) -> None:
    """Add the ``go1`` task under ``command`` (train, eval, bench or render)."""
    helps = {
        "train": "train a Go1 velocity-tracking policy (PPO, asymmetric actor-critic)",
        "eval": "tracking and push-recovery tables of a Go1 policy -> metrics.json",
        "bench": "Go1 environment steps per second (physics + task, no learning)",
        "render": "MP4 of a Go1 policy walking through a command sequence",
    }
    t = tasks.add_parser("go1", help=helps[command])
    if command == "train":  # a recipe may set it: absent, not 0 (given_fields)
        t.add_argument("--seed", type=SEED, default=argparse.SUPPRESS, help="(default 0, or the recipe's)")
    else:
        t.add_argument("--seed", type=SEED, default=0)
    t.add_argument("--out", type=out_path, required=True)
    t.add_argument("--engine", choices=("mujoco", "mujoco-warp"), default="mujoco", help=GO1_ENGINE_HELP)
    t.add_argument("--device", default="cpu", help=GO1_DEVICE_HELP)
    if command == "train":
        add_train_flags(t)
    elif command == "bench":
        t.add_argument("--envs", type=ENVS, default=1024)
        t.add_argument("--steps", type=positive(MAX_BENCH_STEPS), default=50)
    else:
        t.add_argument("--checkpoint", type=Path, default=None, help=CHECKPOINT_HELP)
        if command == "eval":
            t.add_argument("--episodes", type=EPISODES, default=64, help="episodes per table row")
            t.add_argument("--quick", action="store_true", help="short episodes, a smoke test")
            t.add_argument(
                "--latency-ms",
                type=LATENCY_MS,
                default=0.0,
                help="action latency in every robot [ms], whole 5 ms physics steps up to 20 (default 0)",
            )
            t.add_argument(
                "--joint-scale",
                type=SCALE,
                default=1.0,
                help="joint damping and dry friction x this in every robot (default 1)",
            )
            t.add_argument(
                "--terrain",
                choices=("rough", *TILE_KINDS, "none"),
                default="rough",
                help="the terrain table: traversal success, falls and tracking at 0.5 and 1.0 m/s on "
                "each tile kind (rough, the default: all of them) and level; none: no terrain table",
            )
            t.add_argument(
                "--level",
                type=LEVEL,
                nargs="+",
                default=None,
                help="terrain levels to evaluate (default: "
                + " ".join(map(str, TARGET_LEVELS))
                + ": random ground of +-5 cm is level 4, 10 cm stairs 3, 15 cm stairs 5, 20 deg slopes 7)",
            )
            t.add_argument(
                "--terrain-spacing",
                type=SPACING,
                default=None,
                metavar="M",
                help="the terrain table's height-field spacing (default: the policy's own; 0.1 m "
                "makes a 10 cm riser a 45 degree ramp, 0.05 m 72 degrees)",
            )
            t.add_argument(
                "--tables",
                choices=EVAL_TABLES,
                nargs="+",
                default=list(EVAL_TABLES),
                help="which tables to run (default: all; whole-body needs a whole-body policy), e.g. "
                "--tables terrain to follow a terrain run's checkpoints",
            )
            t.add_argument(
                "--controller",
                choices=("policy", "model-based"),
                default="policy",
                help="what to evaluate: the policy (default) or the model-based trot baseline "
                "(no --checkpoint)",
            )
            t.add_argument(
                "--fixed-episodes",
                action="store_true",
                help="the earlier protocol: nominal robot and each row's exact command in every episode "
                "(default: worlds, commands within the row's cell and start states differ)",
            )
        if command == "render":
            t.add_argument(
                "--seconds",
                type=FloatRange(0.1, MAX_RENDER_S, what="a length in s", note="frames are held in memory"),
                default=16.0,
            )
            t.add_argument(
                "--terrain",
                choices=TILE_KINDS,
                default=None,
                help="cross one tile of this kind (needs --level) as the terrain evaluation does, "
                "commanded straight ahead at --speed, instead of the command sequence",
            )
            t.add_argument("--level", type=LEVEL, default=None, help="the tile's level (with --terrain)")
            t.add_argument(
                "--speed",
                type=FloatRange(-2.0, 2.0, what="a forward command in m/s"),
                default=0.5,
                help="forward command on the tile [m/s] (default 0.5)",
            )


def add_commands(sub: Any) -> None:
    """Add ``export go1`` and ``deploy go1``."""
    e = sub.add_parser("export", help="export a policy for deployment (ONNX + JSON sidecar)")
    et = e.add_subparsers(dest="task", required=True)
    eg = et.add_parser("go1", help="ONNX with normalization and action scaling inside, plus go1_policy.json")
    eg.add_argument("--checkpoint", type=Path, default=None, help=CHECKPOINT_HELP)
    eg.add_argument("--out", type=out_path, required=True)
    eg.add_argument(
        "--half-precision",
        action="store_true",
        help="policy.pt with its weight matrices in float16, LZMA-compressed (a 25-frame actor: 1.34 MB "
        "-> 0.58 MB); the ONNX is exported from the same rounded weights",
    )
    d = sub.add_parser("deploy", help="run an exported policy on a robot interface with onnxruntime")
    dt = d.add_subparsers(dest="task", required=True)
    dg = dt.add_parser("go1", help="sim-to-sim check: MuJoCo configured unlike training, 50 Hz ONNX control")
    dg.add_argument(
        "--policy", type=Path, default=None, help="folder written by 'export go1' (default: export now)"
    )
    dg.add_argument("--episodes", type=EPISODES, default=8, help="runs per command")
    dg.add_argument(
        "--seconds",
        type=FloatRange(0.1, MAX_RUN_S, what="a length in s"),
        default=10.0,
        help="length of each run",
    )
    dg.add_argument("--seed", type=SEED, default=0)
    dg.add_argument(
        "--decompose",
        action="store_true",
        help="also compare the training sim with each single change of the target (which one breaks it)",
    )
    dg.add_argument(
        "--delay-sweep",
        action="store_true",
        help="also run the training sim with only an actuator delay of 5, 10, 15 and 20 ms",
    )
    dg.add_argument("--out", type=out_path, required=True)


# ----------------------------------------------------------------------------------- the commands


def train(args: argparse.Namespace) -> int:
    """``train go1``: the flags given over the base recipe (:class:`RecipeOptions` defaults), or
    with ``--recipe NAME`` over that named recipe's stages (``go1.recipes.overridden``)."""
    options = given_fields(args, RECIPE_FLAGS)
    sizes = {k: getattr(args, k) for k in ("envs", "iterations", "seed") if hasattr(args, k)}
    if args.recipe is None and (args.from_stage is not None or args.stage_checkpoint is not None):
        raise UserError("--from-stage names a stage of --recipe NAME: give the recipe")
    if args.recipe is not None:
        named = go1_recipe(args.recipe)  # before the Go1 stack loads: a wrong name is refused at once
        first = 0 if args.from_stage is None else stage_index(named, args.from_stage)
        init = options.pop("init_from", None) if args.from_stage is not None else None
        if args.stage_checkpoint is not None and (args.from_stage is None or init is not None):
            raise UserError("--stage-checkpoint FILE resumes the --from-stage stage: give no --init-from")
        if args.stage_checkpoint is None:
            check_start(named, first, init)
        elif not args.stage_checkpoint.is_file():
            raise UserError(f"--stage-checkpoint {args.stage_checkpoint}: file not found")
        from scenefactory.go1 import chain  # when the command runs: start-up time (module docstring)

        recipe = overridden(named, options, **sizes)
        run = chain.Go1RecipeArgs(
            out=args.out,
            recipe=recipe,
            physics=physics(args),
            first_stage=first,
            init_from=init,
            stage_checkpoint=args.stage_checkpoint,
        )
        print(f"checkpoint: {chain.train_recipe(run)}")
        return 0
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    trainer = jobs.train(
        jobs.Go1TrainArgs(out=args.out, recipe=RecipeOptions(**options), physics=physics(args), **sizes)
    )
    if trainer.ranks.main:  # torchrun: rank 0 reports
        print(f"checkpoint: {trainer.ckpt_dir / 'latest.pt'}")
    return 0


def eval_levels(terrain: str, levels: list[int] | None) -> tuple[int, ...] | None:
    """The terrain levels of ``eval go1 --terrain T --level L ...``: :data:`TARGET_LEVELS` when
    none are given (``--level`` with ``--terrain none`` is refused by
    ``terrain_eval.terrain_eval_config``)."""
    if levels is not None:
        return tuple(levels)
    return None if terrain == "none" else TARGET_LEVELS


def evaluate(args: argparse.Namespace) -> int:
    """``eval go1``: prints the summary (``metrics.json`` has the tables)."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    result = jobs.evaluate(
        jobs.Go1EvalArgs(
            out=args.out,
            checkpoint=args.checkpoint,
            episodes=args.episodes,
            seed=args.seed,
            quick=args.quick,
            latency_ms=args.latency_ms,
            joint_scale=args.joint_scale,
            terrain=None if args.terrain == "none" else args.terrain,
            levels=eval_levels(args.terrain if "terrain" in args.tables else "none", args.level),
            tables=tuple(args.tables),
            controller=args.controller,
            fixed_episodes=args.fixed_episodes,
            physics=physics(args),
            terrain_spacing_m=args.terrain_spacing,
        )
    )
    print(json.dumps(result["summary"]))
    return 0


def bench(args: argparse.Namespace) -> int:
    """``bench go1``."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    print(
        json.dumps(
            jobs.bench(
                jobs.Go1BenchArgs(
                    out=args.out, envs=args.envs, steps=args.steps, seed=args.seed, physics=physics(args)
                )
            )
        )
    )
    return 0


def render(args: argparse.Namespace) -> int:
    """``render go1``."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    video = jobs.render(
        jobs.Go1RenderArgs(
            out=args.out,
            checkpoint=args.checkpoint,
            seconds=args.seconds,
            seed=args.seed,
            physics=physics(args),
            terrain=args.terrain,
            level=args.level,
            speed_mps=args.speed,
        )
    )
    print(json.dumps({"video": str(video)}))
    return 0


def export(args: argparse.Namespace) -> int:
    """``export go1``."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    paths = jobs.export(
        jobs.Go1ExportArgs(out=args.out, checkpoint=args.checkpoint, half_precision=args.half_precision)
    )
    print(json.dumps({k: str(v) for k, v in paths.items()}))
    return 0


def deploy(args: argparse.Namespace) -> int:
    """``deploy go1``: prints the summary (``sim2sim.json`` has the comparison); exits 1 when the
    sim-to-sim check fails, so a script or CI step that runs it stops there."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)

    result = jobs.deploy(
        jobs.Go1DeployArgs(
            out=args.out,
            policy_dir=args.policy,
            episodes=args.episodes,
            seconds=args.seconds,
            seed=args.seed,
            decompose=args.decompose,
            delay_sweep=args.delay_sweep,
        )
    )
    print(json.dumps(result["summary"]))
    if not result["summary"]["passed"]:
        failed = ", ".join(str(tuple(c.values())) for c in result["summary"]["failed_commands"])
        print(f"sim-to-sim check FAILED at commands {failed} (see {args.out / 'report.md'})", file=sys.stderr)
        return 1
    return 0


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("train", "go1"): train,
    ("eval", "go1"): evaluate,
    ("bench", "go1"): bench,
    ("render", "go1"): render,
    ("export", "go1"): export,
    ("deploy", "go1"): deploy,
}
"""(command, task) → the function that runs it."""
