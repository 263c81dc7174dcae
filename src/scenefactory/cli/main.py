"""``scenefactory`` command line: parses flags and calls the jobs in ``scenefactory.jobs.drive``.

User errors (bad flag values, unknown engines, missing or incompatible checkpoints, malformed
scene files) print one clear message and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from scenefactory.bounds import (
    DRIVE_SEED,
    EVAL_FRACTION,
    FRACTION,
    LAG_STEPS,
    MAX_AGENTS,
    MAX_BENCH_STEPS,
    MAX_BUDGET,
    MAX_EPOCHS,
    MAX_HISTORY,
    MAX_ITERATIONS,
    MAX_POLICY_SEEDS,
    MAX_SCENE_AGENTS,
    MAX_SCENES,
    MAX_SEED,
    MAX_STEPS,
    MAX_THREADS,
    MAX_WORKERS,
    MAX_WORLDS,
    MIN_ACTIVE_FRACTION,
    PHYSICS_HZ,
    POLICY_HZ,
    IntRange,
    OrAuto,
    positive,
)
from scenefactory.cli import go1 as go1_cli
from scenefactory.cli.argtypes import check_flags, out_path, train_scenes
from scenefactory.engines import DEFAULT_PHYSICS_HZ
from scenefactory.errors import UserError
from scenefactory.scenes.friction import PRESETS
from scenefactory.scenes.library import SCENE_SPLITS

ENGINE_HELP = (
    "engine: kinematic (bicycle), mujoco (articulated cars), learned (--dynamics-model) "
    "or grounded (--grounding)"
)
LAG_HELP = "actuator lag: apply each action this many policy steps late (any engine)"
PHYSICS_HELP = "mujoco physics rate [Hz]: a multiple of the policy rate, 100 to 1000"

WORLDS = positive(MAX_WORLDS)
AGENTS = positive(MAX_AGENTS, "procedural scenes place up to 32")
SCENE_AGENTS = positive(MAX_SCENE_AGENTS)
ITERATIONS = positive(MAX_ITERATIONS)
SCENES = positive(MAX_SCENES, "scenes are built up front, ~20 ms each")
AGENTS_OR_AUTO = OrAuto.of(AGENTS)
SCENE_AGENTS_OR_AUTO = OrAuto.of(SCENE_AGENTS)
AUTO_HELP = "'auto': the most that keeps worlds 90%% full on average over the --scenes folder"
RESET_HELP = (
    "reset a world once fewer than this fraction of the agents it started with are still driving; "
    "they end as time-outs (default 0: wait for the last one)"
)

SPLIT_HELP = "scenes of --scenes DIR: all, or those 'convert' put in its train or eval split (index.json)"


class UsageError(UserError):
    """A flag argparse refused: unknown, missing, or a value of the wrong kind."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: :meth:`error` raises :class:`UsageError` (``main``
    prints ``scenefactory: error: <message>`` and returns 2) instead of printing the usage and
    exiting. Every subcommand's parser is one too: ``add_subparsers`` makes them of this class."""

    def error(self, message: str) -> NoReturn:
        """Raise the message (which names the flag) on one line, with where to find the usage."""
        raise UsageError(f"{' '.join(message.split())} (see '{self.prog} --help')")


def _tier_path(text: str) -> tuple[str, Path]:
    tier, sep, path = text.partition("=")
    if not sep or not tier or not path:
        raise argparse.ArgumentTypeError(
            f"expected TIER=PATH (e.g. mujoco=runs/m/checkpoints/latest.pt), got '{text}'"
        )
    return tier, Path(path)


def _model_path(text: str) -> tuple[str, Path]:
    kind, sep, path = text.partition("=")
    if not sep or not kind or not path:
        raise argparse.ArgumentTypeError(f"expected KIND=PATH (e.g. gru=runs/fit_gru/model.pt), got '{text}'")
    return kind, Path(path)


def _engine(text: str) -> str:
    from scenefactory.engines import ENGINES

    if text not in ENGINES:
        raise argparse.ArgumentTypeError(f"unknown engine '{text}', expected one of {sorted(ENGINES)}")
    return text


SIGNALS_HELP = (
    "traffic signals: signal cycles at the procedural junctions, the signal"
    " observation and the red-light and stop-sign penalties"
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (names are a contract relied on by docs and tools)."""
    p = Parser(prog="scenefactory", description="Batched driving simulation for RL.")
    p.add_argument(
        "--threads",
        type=positive(MAX_THREADS),
        default=None,
        help="torch CPU threads (default: torch's choice)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train, evaluate and render on the embedded default scenes")
    d.add_argument("--out", type=out_path, default=Path("runs/demo"))
    d.add_argument("--iterations", type=ITERATIONS, default=None, help="override the demo's PPO iterations")
    d.add_argument("--eval-scenes", type=SCENES, default=None, help="override the held-out scene count")
    d.add_argument("--signals", action="store_true", help=SIGNALS_HELP)

    v = sub.add_parser("validate", help="physics checks of a model")
    vt = v.add_subparsers(dest="task", required=True)
    vv = vt.add_parser("vehicle", help="braking, acceleration and circle manoeuvres per road condition")
    vv.add_argument(
        "--surface",
        action="append",
        choices=sorted(PRESETS),
        help="road condition preset (repeatable; default: dry, wet, ice)",
    )
    vv.add_argument("--physics-hz", type=PHYSICS_HZ, default=DEFAULT_PHYSICS_HZ, help=PHYSICS_HELP)
    vv.add_argument("--out", type=out_path, required=True)

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

    col = sub.add_parser("collect", help="record transition datasets for learned dynamics")
    colt = col.add_subparsers(dest="task", required=True)
    cd = colt.add_parser("drive", help="transitions of driving agents under a policy mix")
    cd.add_argument("--engine", type=_engine, default="mujoco", help=ENGINE_HELP)
    cd.add_argument("--worlds", type=WORLDS, default=32)
    cd.add_argument("--agents", type=AGENTS, default=4)
    cd.add_argument("--steps", type=positive(MAX_STEPS), default=200, help="policy steps to record")
    cd.add_argument("--checkpoint", type=Path, default=None, help="trained policy for the mix (optional)")
    cd.add_argument("--seed", type=DRIVE_SEED, default=0)
    cd.add_argument("--physics-hz", type=PHYSICS_HZ, default=DEFAULT_PHYSICS_HZ, help=PHYSICS_HELP)
    cd.add_argument("--action-lag-steps", type=LAG_STEPS, default=0, help=LAG_HELP)
    cd.add_argument("--dynamics-model", default=None, help="model.pt of 'fit-dynamics' for --engine learned")
    cd.add_argument("--grounding", default=None, help="folder of 'scenefactory ground' for --engine grounded")
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

    x = sub.add_parser("experiment", help="reproduce a headline result (writes a report folder)")
    from scenefactory.experiments import EXPERIMENTS

    x.add_argument("name", metavar="NAME", help="one of: " + ", ".join(EXPERIMENTS))
    x.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="KIND=PATH",
        type=_tier_path,
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
        type=_model_path,
        help="matrix: a fit-dynamics model.pt to use instead of fitting that family (repeatable)",
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

    for name, helptext in (
        ("train", "train a policy with PPO"),
        ("eval", "evaluate a checkpoint → metrics.json"),
        ("bench", "measure controlled-agent steps per second"),
        ("render", "top-down GIF of a policy"),
    ):
        cmd = sub.add_parser(name, help=helptext)
        tasks = cmd.add_subparsers(dest="task", required=True)
        go1_cli.add_task_parser(name, tasks)
        t = tasks.add_parser("drive", help="multi-agent goal reaching on procedural scenes")
        t.add_argument("--engine", type=_engine, default="kinematic", help=ENGINE_HELP)
        t.add_argument("--seed", type=DRIVE_SEED, default=0)
        t.add_argument("--physics-hz", type=PHYSICS_HZ, default=DEFAULT_PHYSICS_HZ, help=PHYSICS_HELP)
        t.add_argument(
            "--dynamics-model", default=None, help="model.pt of 'fit-dynamics' for --engine learned"
        )
        t.add_argument(
            "--grounding", default=None, help="folder of 'scenefactory ground' for --engine grounded"
        )
        t.add_argument("--action-lag-steps", type=LAG_STEPS, default=0, help=LAG_HELP)
        if name == "train":
            t.add_argument("--worlds", type=WORLDS, default=128)
            t.add_argument(
                "--agents", type=AGENTS_OR_AUTO, default=8, help=f"agents per world, or {AUTO_HELP}"
            )
            t.add_argument("--min-active-fraction", type=MIN_ACTIVE_FRACTION, default=0.0, help=RESET_HELP)
            t.add_argument("--iterations", type=ITERATIONS, default=150)
            t.add_argument(
                "--train-scenes",
                type=IntRange(0, MAX_SCENES, SCENES.note),
                default=None,
                help="procedural training scenes (default 120, or 0 with --scenes)",
            )
            t.add_argument("--scenes", type=Path, default=None, help="folder of scene JSON files to train on")
            t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
            t.add_argument("--signals", action="store_true", help=SIGNALS_HELP)
            t.add_argument("--out", type=out_path, required=True)
        elif name == "eval":
            t.add_argument("--checkpoint", type=Path, default=None, help="policy to evaluate")
            t.add_argument(
                "--policy",
                choices=("checkpoint", "expert"),
                default="checkpoint",
                help="'expert' replays the scenes' driving logs via the kinematic inverse (needs --scenes)",
            )
            t.add_argument(
                "--agents",
                type=SCENE_AGENTS_OR_AUTO,
                default=None,
                help="agents per world for --policy expert (default: the most agents any scene controls;"
                f" {AUTO_HELP})",
            )
            t.add_argument("--episodes", type=SCENES, default=100, help="held-out scenes to play")
            t.add_argument("--scenes", type=Path, default=None, help="evaluate on this folder of scene JSON")
            t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
            t.add_argument("--worlds", type=WORLDS, default=64, help="worlds run in parallel")
            t.add_argument("--out", type=out_path, required=True)
        elif name == "bench":
            t.add_argument("--worlds", type=WORLDS, default=256)
            t.add_argument(
                "--agents", type=AGENTS_OR_AUTO, default=16, help=f"agents per world, or {AUTO_HELP}"
            )
            t.add_argument(
                "--scenes", type=Path, default=None, help="bench on this folder of scene JSON files"
            )
            t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
            t.add_argument("--min-active-fraction", type=MIN_ACTIVE_FRACTION, default=0.0, help=RESET_HELP)
            t.add_argument(
                "--steps", type=positive(MAX_BENCH_STEPS), default=30, help="timed steps after warm-up"
            )
            t.add_argument(
                "--warmup",
                type=IntRange(0, MAX_BENCH_STEPS),
                default=5,
                help="untimed steps first (an episode's worth, 200, for a steady-state active fraction)",
            )
            t.add_argument("--baseline", action="store_true", help="non-vectorized reference")
            t.add_argument("--policy-hz", type=POLICY_HZ, default=10.0, help="policy (control) rate [Hz]")
            t.add_argument("--out", type=out_path, required=True)
        else:
            t.add_argument("--checkpoint", type=Path, default=None)
            t.add_argument("--policy", choices=("checkpoint", "expert"), default="checkpoint")
            t.add_argument(
                "--agents",
                type=SCENE_AGENTS_OR_AUTO,
                default=8,
                help=f"agents per world for --policy expert, or {AUTO_HELP}",
            )
            t.add_argument("--panels", type=IntRange(1, 4), default=4, help="scenes shown side by side (1-4)")
            t.add_argument("--scenes", type=Path, default=None, help="render scenes of this folder")
            t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
            t.add_argument("--out", type=out_path, required=True)
    go1_cli.add_commands(sub)
    return p


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, check the flags (:func:`check_flags`) and run the command; raises
    :class:`UserError` on bad input, before any work."""
    args, unknown = build_parser().parse_known_args(argv)
    _Running.command = args.command
    if unknown:
        where = " ".join(
            ["scenefactory", args.command, *([args.task] if getattr(args, "task", None) else [])]
        )
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)} (see '{where} --help')")
    import torch

    from scenefactory.jobs import drive

    check_flags(args)

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if getattr(args, "task", None) == "go1":
        return go1_cli.run(args)

    if args.command == "demo":
        metrics = drive.demo(
            args.out,
            iterations=args.iterations,
            eval_scenes_n=args.eval_scenes or drive.DEMO_EVAL_SCENES,
            signals=args.signals,
        )
        print(f"demo report: {args.out / 'report.md'}")
        print(json.dumps({k: metrics[k] for k in ("goal_reach_rate", "collision_rate", "episodes")}))
    elif args.command == "train":
        targs = drive.TrainArgs(
            out=args.out,
            engine=args.engine,
            worlds=args.worlds,
            agents=args.agents,
            iterations=args.iterations,
            seed=args.seed,
            num_train_scenes=train_scenes(args),
            physics_hz=args.physics_hz,
            scenes_dir=args.scenes,
            scene_split=args.scene_split,
            dynamics_model=args.dynamics_model,
            grounding=args.grounding,
            action_lag_steps=args.action_lag_steps,
            signals=args.signals,
            min_active_fraction=args.min_active_fraction,
        )
        trainer = drive.train(targs)
        print(f"checkpoint: {trainer.ckpt_dir / 'latest.pt'}")
    elif args.command == "eval":
        if args.policy == "expert":
            m = drive.evaluate_expert(
                args.scenes,
                args.engine,
                args.episodes,
                args.agents,
                args.out,
                args.physics_hz,
                scene_split=args.scene_split,
            )
        else:
            if args.checkpoint is None:
                raise UserError("eval drive needs --checkpoint PATH (or --policy expert with --scenes DIR)")
            m = drive.evaluate_checkpoint(
                args.checkpoint,
                args.engine,
                args.episodes,
                args.seed,
                args.out,
                args.worlds,
                args.physics_hz,
                args.scenes,
                args.dynamics_model,
                grounding=args.grounding,
                action_lag_steps=args.action_lag_steps,
                scene_split=args.scene_split,
            )
        print(
            json.dumps({k: m[k] for k in ("goal_reach_rate", "collision_rate", "offroad_rate", "episodes")})
        )
        if "human_baseline" in m:  # the logged drivers on the same scenes and engine
            human = m["human_baseline"]
            keys = ("goal_reach_rate", "collision_rate", "offroad_rate", "episodes")
            print(json.dumps({"human_baseline": {k: human[k] for k in keys}}))
        if "agents" in m:
            print(json.dumps({"agents": m["agents"]}))
        print(f"metrics: {args.out / 'metrics.json'}")
    elif args.command == "bench":
        r = drive.bench(
            args.engine,
            args.worlds,
            args.agents,
            args.baseline,
            args.steps,
            args.out,
            args.seed,
            physics_hz=args.physics_hz,
            policy_hz=args.policy_hz,
            dynamics_model=args.dynamics_model,
            grounding=args.grounding,
            action_lag_steps=args.action_lag_steps,
            scenes_dir=args.scenes,
            min_active_fraction=args.min_active_fraction,
            warmup=args.warmup,
            scene_split=args.scene_split,
        )
        bench_keys = ("casps", "active_casps", "active_slot_fraction", "worlds", "agents_per_world")
        print(json.dumps({k: r[k] for k in (*bench_keys, "engine", "baseline")}))
    elif args.command == "convert":
        from scenefactory.errors import warn
        from scenefactory.scenes.womd.batch import ConvertInterrupted

        try:
            summary = drive.convert(
                args.inputs,
                args.out,
                args.format,
                args.workers,
                args.max_agents,
                args.ray,
                eval_fraction=args.eval_fraction,
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
        shown = 20  # the rest are in summary.json
        for problem in errors[:shown]:
            print(f"scenefactory: bad input: {problem['error']}", file=sys.stderr)
        if len(errors) > shown:
            print(f"scenefactory: ... and {len(errors) - shown} more errors in summary.json", file=sys.stderr)
        return 1 if errors and not args.skip_bad else 0
    elif args.command == "collect":
        if args.task == "logs":
            meta = drive.collect_logs(args.scenes, args.out, args.scene_split)
        else:
            meta = drive.collect(args)
        print(json.dumps({k: meta[k] for k in ("engine", "transitions", "shards", "policies_used")}))
    elif args.command == "fit-dynamics":
        metrics = drive.fit_dynamics_cmd(
            args.data, args.model, args.history, args.epochs, args.seed, args.out
        )
        print(json.dumps({"model": metrics["model"], "kinematic_bicycle": metrics["kinematic_bicycle"]}))
        print(f"model: {args.out / 'model.pt'}  metrics: {args.out / 'metrics.json'}")
    elif args.command == "ground":
        from scenefactory.dynamics.correctors import method_from_name
        from scenefactory.grounding.ground import GroundConfig

        gcfg = GroundConfig(
            method=method_from_name(args.method),
            budget=args.budget,
            seed=args.seed,
            train_steps=args.steps,
            gat_alpha=args.alpha,
            history_len=args.history,
        )
        config = drive.ground_cmd(args.data, args.out, gcfg)
        print(json.dumps({"budget_transitions": config["budget_transitions"], **config["heldout"]}))
        print(f"grounding: {args.out}  (use --engine grounded --grounding {args.out})")
    elif args.command == "experiment":
        from scenefactory.experiments import ExperimentArgs, run_experiment

        command = shlex.join(["scenefactory", *(sys.argv[1:] if argv is None else argv)])
        xargs = ExperimentArgs(
            out=args.out,
            quick=args.quick,
            seeds=args.seeds,
            seed=args.seed,
            checkpoints=tuple(args.checkpoint),
            episodes=args.episodes,
            iterations=args.iterations,
            scenes_dir=args.scenes,
            command=command,
            action_lag_steps=args.action_lag_steps,
            budget=args.budget,
            dynamics_models=tuple(args.dynamics_model),
        )
        run_experiment(args.name, xargs)
        print(f"report: {args.out / 'report.md'}")
    elif args.command == "seed-level":
        from scenefactory.experiments.seed_level import write_seed_level

        write_seed_level(args.folder, [tuple(c) for c in args.compare], args.paired)
        print(f"seed-level: {args.folder / 'seed_level.md'}")
    elif args.command == "validate":
        result = drive.validate(args.surface, args.physics_hz, args.out)
        print(
            f"vehicle validation {'passed' if result['passed'] else 'FAILED'}: {args.out / 'validation.json'}"
        )
        return 0 if result["passed"] else 1
    elif args.command == "render":
        if args.policy == "checkpoint" and args.checkpoint is None:
            raise UserError("render drive needs --checkpoint PATH (or --policy expert with --scenes DIR)")
        ckpt = None if args.policy == "expert" else args.checkpoint
        path = drive.render(
            ckpt,
            args.engine,
            args.out,
            args.seed,
            args.panels,
            args.physics_hz,
            args.scenes,
            args.agents,
            args.dynamics_model,
            grounding=args.grounding,
            action_lag_steps=args.action_lag_steps,
            scene_split=args.scene_split,
        )
        print(f"video: {path}")
    return 0


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
