"""The ``go1`` commands (``train/eval/render/bench go1``, ``export go1``, ``deploy go1``): their flags
(``cli.main`` calls :func:`add_task_parser` and :func:`add_commands`), and for each the one mapping
of them onto its job's argument dataclass (``scenefactory.go1.jobs``).

When ``--checkpoint`` is omitted, eval, render, export and deploy use the policy shipped in the
package (``scenefactory/go1/policies/go1_whole_body.pt``).

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
    MAX_ENVS,
    MAX_EPISODES,
    MAX_HIDDEN,
    MAX_HISTORY,
    MAX_ITERATIONS,
    MAX_LATENCY_MS,
    MAX_RENDER_S,
    MAX_RUN_S,
    MAX_SCALE,
    MAX_SEED,
    MAX_WEIGHT,
    PROBABILITY,
    FloatRange,
    IntRange,
    positive,
)
from scenefactory.cli.argtypes import out_path
from scenefactory.errors import UserError

SEED = IntRange(0, MAX_SEED)
ENVS = positive(MAX_ENVS)
EPISODES = positive(MAX_EPISODES)
SHARE = FloatRange(0.0, 100.0, what="a share")
LATENCY_MS = FloatRange(0.0, MAX_LATENCY_MS, what="a latency in ms")
SCALE = FloatRange(0.0, MAX_SCALE, what="a scale")
SPACING = FloatRange(0.0, 1.0, low_open=True, what="a height-field spacing in m")
WEIGHT = FloatRange(-MAX_WEIGHT, MAX_WEIGHT, what="a weight")
TILE_KINDS = ("random", "slope_up", "slope_down", "stairs_up", "stairs_down", "steps")
"""``go1.config.TERRAIN_KINDS``, spelled out so that ``--help`` loads no Go1 stack (a test checks
they agree)."""
EVAL_TABLES = ("velocity", "push", "whole-body", "terrain")
"""``go1.jobs.TABLES``, spelled out for the same reason (a test checks they agree)."""
LEVEL = IntRange(0, 99)
TARGET_LEVELS = (3, 4, 5, 7)
"""Terrain levels ``eval go1`` runs by default: those of the README's traversal targets."""
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


def _term_weight(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected TERM=WEIGHT, e.g. action_rate=-0.03, got {text!r}")
    try:
        return name, WEIGHT(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"TERM=WEIGHT {name}: {exc}") from None


def _kind_share(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or name not in TILE_KINDS:
        raise argparse.ArgumentTypeError(
            f"expected KIND=SHARE with KIND one of {', '.join(TILE_KINDS)}, e.g. stairs_up=0.4, got {text!r}"
        )
    try:
        return name, SHARE(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"KIND=SHARE {name}: {exc}") from None


def add_task_parser(command: str, tasks: Any) -> None:
    """Add the ``go1`` task under ``command`` (train, eval, bench or render)."""
    helps = {
        "train": "train a Go1 velocity-tracking policy (PPO, asymmetric actor-critic)",
        "eval": "tracking and push-recovery tables of a Go1 policy -> metrics.json",
        "bench": "Go1 environment steps per second (physics + task, no learning)",
        "render": "MP4 of a Go1 policy walking through a command sequence",
    }
    t = tasks.add_parser("go1", help=helps[command])
    t.add_argument("--seed", type=SEED, default=0)
    t.add_argument("--out", type=out_path, required=True)
    t.add_argument("--engine", choices=("mujoco", "mujoco-warp"), default="mujoco", help=GO1_ENGINE_HELP)
    t.add_argument("--device", default="cpu", help=GO1_DEVICE_HELP)
    if command == "train":
        t.add_argument("--envs", type=ENVS, default=1024, help="robots simulated in parallel")
        t.add_argument("--iterations", type=positive(MAX_ITERATIONS), default=1500)
        t.add_argument(
            "--no-robustness",
            action="store_true",
            help="train without domain randomization, pushes and sensor noise (the ablation)",
        )
        t.add_argument(
            "--pure-turn-prob",
            type=PROBABILITY,
            default=0.0,
            help="share of commands that turn on the spot (default 0: uniform commands)",
        )
        t.add_argument(
            "--entropy-coef",
            type=FloatRange(0.0, 1.0, what="an entropy coefficient"),
            default=None,
            help="PPO's entropy bonus (default 0.01; 0 lets the action noise shrink, to polish a "
            "fine-tuned policy)",
        )
        t.add_argument(
            "--heading-prob",
            type=FloatRange(0.0, 1.0, what="a share"),
            default=0.0,
            help="share of commands that steer to a random heading, the yaw rate following the "
            "heading error (default 0: yaw-rate commands; Isaac Lab's rough terrain: 1)",
        )
        t.add_argument(
            "--command-limits",
            type=FloatRange(0.0, 10.0, what="a command limit"),
            nargs=3,
            default=None,
            metavar=("VX", "VY", "YAW"),
            help="narrow the command ranges to at most +-VX, +-VY m/s and +-YAW rad/s (default: vx -1..2, "
            "vy +-0.8, yaw +-1.8; Isaac Lab's rough terrain: 1 1 1)",
        )
        t.add_argument(
            "--action-std",
            type=FloatRange(0.0, 2.0, low_open=True, what="an action standard deviation"),
            default=None,
            metavar="S",
            help="with --init-from: restart the action noise at this standard deviation (default: "
            "the checkpoint's; the entropy bonus lets it drift up, and noisy robots fail on terrain "
            "the mean action crosses)",
        )
        t.add_argument(
            "--forward-only",
            action="store_true",
            help="forward-speed commands from 0 up (no walking backward): for a terrain policy judged "
            "walking forward, which then never trains climbing stairs backward",
        )
        t.add_argument(
            "--min-forward-speed",
            type=FloatRange(0.0, 10.0, what="a forward speed in m/s"),
            default=None,
            metavar="VX",
            help="forward-speed commands from VX up (implies --forward-only): more training at the "
            "speeds a policy is judged at; standing commands are still drawn, and the command "
            "curriculum scales VX by its fraction until that reaches 1",
        )
        t.add_argument(
            "--terrain-spacing",
            type=SPACING,
            default=None,
            metavar="M",
            help="sample spacing of the terrain's height field (default 0.1 m: a 10 cm riser is a 45 "
            "degree ramp one cell wide; 0.05 m makes it 72 degrees at about 1.4x the physics cost)",
        )
        t.add_argument(
            "--foot-clearance-target",
            type=FloatRange(0.0, 0.5, low_open=True, high_open=True, what="a swing height in m"),
            default=None,
            metavar="M",
            help="swing height the foot_clearance term asks for, over the ground under each foot "
            "(default 0.08 m; needs --reward-weight foot_clearance=W)",
        )
        t.add_argument(
            "--yaw-precision-weight",
            type=FloatRange(0.0, MAX_WEIGHT, what="a weight"),
            default=0.0,
            help="weight of the fine yaw-tracking kernel, sigma 0.01 (default 0: off)",
        )
        t.add_argument(
            "--joint-friction-dr",
            type=SCALE,
            nargs=2,
            default=(1.0, 1.0),
            metavar=("LOW", "HIGH"),
            help="scale joint damping and dry friction by U(LOW, HIGH) per episode (default 1 1: off)",
        )
        t.add_argument(
            "--latency-ms",
            type=LATENCY_MS,
            nargs=2,
            default=None,
            metavar=("LOW", "HIGH"),
            help="action latency range drawn per episode (default 0 20)",
        )
        t.add_argument(
            "--reward-weight",
            type=_term_weight,
            action="append",
            default=[],
            metavar="TERM=W",
            help=(
                "replace a reward term's weight (repeatable), e.g. action_rate=-0.03; an optional "
                "term (foot_clearance, leg_contacts) is added with its weight"
            ),
        )
        t.add_argument(
            "--history",
            type=positive(MAX_HISTORY),
            default=None,
            help="frames stacked in the actor's observation (default 3; the exported policy follows; "
            "with --init-from, frames beyond the checkpoint's start at zero weight)",
        )
        t.add_argument(
            "--init-from",
            type=Path,
            default=None,
            help="fine-tune: start from this Go1 training checkpoint (or a distilled student); on the "
            "same terrain tiles its robots' terrain levels are kept",
        )
        t.add_argument(
            "--rnn",
            choices=("gru", "lstm"),
            default=None,
            help="a recurrent actor: this layer before the actor MLP (default: feed-forward)",
        )
        t.add_argument(
            "--rnn-hidden", type=positive(MAX_HIDDEN), default=64, help="hidden width of --rnn (default 64)"
        )
        t.add_argument(
            "--critic-warmup",
            type=IntRange(0, MAX_ITERATIONS),
            default=0,
            help="first N PPO iterations train only the critic (use when --init-from gives a distilled "
            "actor and no critic)",
        )
        t.add_argument(
            "--privileged-actor",
            action="store_true",
            help="the actor also reads the randomized parameters: a teacher for --teacher, not deployable "
            "(with --init-from a deployable policy, the new inputs start at zero weight)",
        )
        t.add_argument(
            "--teacher",
            type=Path,
            default=None,
            help="distil the actor from this Go1 policy (DAgger: the student acts, the teacher labels) "
            "instead of PPO; fine-tune the result with --init-from",
        )
        t.add_argument(
            "--whole-body",
            action="store_true",
            help="also command trunk height 0.20-0.34 m, pitch +-0.3 rad and roll +-0.2 rad (with "
            "--init-from a velocity-only policy, the new inputs start at zero weight)",
        )
        t.add_argument(
            "--terrain",
            choices=("flat", "rough", *TILE_KINDS),
            default="flat",
            help="ground: flat (default), rough (a grid of every tile kind with a level curriculum) or one "
            "tile kind; the critic reads a height scan (--init-from a flat policy needs --critic-warmup N)",
        )
        t.add_argument(
            "--terrain-proportions",
            type=_kind_share,
            nargs="+",
            default=None,
            metavar="KIND=SHARE",
            help="with --terrain rough: the tile kinds' shares of the grid's columns (normalized; "
            "default random=0.2 slope_up=0.1 slope_down=0.1 stairs_up=0.2 stairs_down=0.2 steps=0.2)",
        )
        t.add_argument(
            "--height-scan-actor",
            action="store_true",
            help="the actor reads the height scan too (with --init-from a blind policy, at zero weight)",
        )
    elif command == "bench":
        t.add_argument("--envs", type=ENVS, default=1024)
        t.add_argument("--steps", type=positive(MAX_BENCH_STEPS), default=50)
    else:
        t.add_argument("--checkpoint", type=Path, default=None, help="policy (default: the shipped one)")
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
    eg.add_argument("--checkpoint", type=Path, default=None, help="policy (default: the shipped one)")
    eg.add_argument("--out", type=out_path, required=True)
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


def _three(values: list[float]) -> tuple[float, float, float]:
    return (values[0], values[1], values[2])


def train(args: argparse.Namespace) -> int:
    """``train go1``."""
    from scenefactory.go1 import jobs  # when the command runs: start-up time (module docstring)
    from scenefactory.go1.recipe import RecipeOptions

    recipe = RecipeOptions(
        robust=not args.no_robustness,
        pure_turn_prob=args.pure_turn_prob,
        yaw_precision_weight=args.yaw_precision_weight,
        joint_friction_scale=(args.joint_friction_dr[0], args.joint_friction_dr[1]),
        latency_ms=None if args.latency_ms is None else (args.latency_ms[0], args.latency_ms[1]),
        reward_weights=tuple(args.reward_weight),
        history=args.history,
        init_from=args.init_from,
        rnn=args.rnn,
        rnn_hidden=args.rnn_hidden,
        teacher=args.teacher,
        critic_warmup=args.critic_warmup,
        privileged_actor=args.privileged_actor,
        whole_body=args.whole_body,
        terrain=args.terrain,
        height_scan_actor=args.height_scan_actor,
        command_limits=None if args.command_limits is None else _three(args.command_limits),
        foot_clearance_target_m=args.foot_clearance_target,
        heading_prob=args.heading_prob,
        terrain_proportions=None if args.terrain_proportions is None else tuple(args.terrain_proportions),
        entropy_coef=args.entropy_coef,
        forward_only=args.forward_only,
        min_forward_mps=args.min_forward_speed,
        terrain_spacing_m=args.terrain_spacing,
        init_action_std=args.action_std,
    )
    trainer = jobs.train(
        jobs.Go1TrainArgs(
            out=args.out,
            envs=args.envs,
            iterations=args.iterations,
            seed=args.seed,
            recipe=recipe,
            physics=physics(args),
        )
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

    paths = jobs.export(jobs.Go1ExportArgs(out=args.out, checkpoint=args.checkpoint))
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
