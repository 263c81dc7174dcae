"""The driving commands: ``demo``, ``validate vehicle`` and the ``drive`` task of ``train``,
``eval``, ``bench`` and ``render``. For each, its flags, and one function that checks what is the
command's own (its seed range, its engine), maps the flags onto its job's argument dataclass
(``scenefactory.jobs.drive``, ``jobs.demo``, ``jobs.vehicle``), runs the job and prints where the
results are.

The job modules are imported when a command runs, not with this module: they load rsl-rl,
tensordict and matplotlib (about 2 s), which ``scenefactory --help`` and a refused flag do without.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from scenefactory.bounds import (
    DRIVE_SEED,
    MAX_BENCH_STEPS,
    MAX_SCENES,
    MIN_ACTIVE_FRACTION,
    PHYSICS_HZ,
    POLICY_HZ,
    IntRange,
    check_scene_range,
    policy_steps,
    positive,
)
from scenefactory.cli.argtypes import (
    AGENTS_OR_AUTO,
    AUTO_HELP,
    ITERATIONS,
    RESET_HELP,
    SCENE_AGENTS_OR_AUTO,
    SCENES,
    SIGNALS_HELP,
    SPLIT_HELP,
    WORLDS,
    out_path,
)
from scenefactory.cli.engine import PHYSICS_HELP, add_engine_flags, engine_device, engine_spec
from scenefactory.cli.flags import ListAction
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ, EngineSpec
from scenefactory.errors import UserError
from scenefactory.scenes.friction import PRESETS
from scenefactory.scenes.library import SCENE_SPLITS

Handler = Callable[[argparse.Namespace], int]

EVAL_KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate", "episodes")
"""The figures ``eval drive`` prints (``metrics.json`` has all)."""
BENCH_KEYS = (
    "casps",
    "active_casps",
    "active_slot_fraction",
    "worlds",
    "agents_per_world",
    "engine",
    "baseline",
)
"""The figures ``bench drive`` prints (its JSON file has all)."""
RENDER_FORMATS = ("gif", "html", "both")
"""``render drive --format``: ``both`` writes the GIF and the HTML replay from one recording."""
BENCH_ACTIONS = ("policy", "random")
"""``bench drive --actions``: ``evaluation.bench.BENCH_ACTIONS`` (not imported: start-up time)."""


def add_commands(sub: Any) -> None:
    """Add ``demo`` and ``validate vehicle``."""
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


def add_task_parser(command: str, tasks: Any) -> None:
    """Add the ``drive`` task under ``command`` (train, eval, bench or render)."""
    t = tasks.add_parser("drive", help="multi-agent goal reaching on procedural scenes")
    add_engine_flags(t, default="kinematic")
    t.add_argument("--seed", type=DRIVE_SEED, default=0)
    _ADD_FLAGS[command](t)
    t.add_argument("--out", type=out_path, required=True)


TRAIN_FIELDS = {
    "worlds": "worlds",
    "agents": "agents",
    "min_active_fraction": "min_active_fraction",
    "iterations": "iterations",
    "train_scenes": "num_train_scenes",
    "scenes": "scenes_dir",
    "scene_split": "scene_split",
    "signals": "signals",
}
"""``train drive``'s flags (their dests) → the :class:`~scenefactory.jobs.drive.TrainArgs` field
each sets. They default to absent (``argparse.SUPPRESS``): the field's default, or ``--recipe``'s."""


def _train_flags(t: Any) -> None:
    absent = argparse.SUPPRESS
    t.add_argument("--worlds", type=WORLDS, default=absent, help="worlds run in parallel (default 128)")
    t.add_argument(
        "--agents", type=AGENTS_OR_AUTO, default=absent, help=f"agents per world (default 8), or {AUTO_HELP}"
    )
    t.add_argument("--min-active-fraction", type=MIN_ACTIVE_FRACTION, default=absent, help=RESET_HELP)
    t.add_argument("--iterations", type=ITERATIONS, default=absent, help="PPO iterations (default 150)")
    t.add_argument(
        "--train-scenes",
        type=IntRange(0, MAX_SCENES, SCENES.note),
        default=absent,
        help="procedural training scenes (default 120, or 0 with --scenes)",
    )
    t.add_argument("--scenes", type=Path, default=absent, help="folder of scene JSON files to train on")
    t.add_argument("--scene-split", choices=SCENE_SPLITS, default=absent, help=SPLIT_HELP)
    t.add_argument("--signals", action="store_true", default=absent, help=SIGNALS_HELP)
    t.add_argument(
        "--recipe",
        default=None,
        metavar="NAME",
        help="a named recipe (demo, real-format; --list-recipes); the flags given beside it replace "
        "its values",
    )
    t.add_argument(
        "--list-recipes", action=ListAction, listing=_recipe_listing, help="list the recipes and exit"
    )


def _recipe_listing() -> str:
    from scenefactory.jobs import recipes  # only when asked: it loads the driving jobs

    return recipes.listing()


def _eval_flags(t: Any) -> None:
    t.add_argument("--checkpoint", type=Path, default=None, help="policy to evaluate")
    t.add_argument(
        "--policy",
        choices=("checkpoint", "expert", "constant-velocity", "idm"),
        default="checkpoint",
        help="'expert' replays the scenes' driving logs via the kinematic inverse (needs --scenes);"
        " 'constant-velocity' (zero actions) and 'idm' (IDM speed along the route, pure-pursuit"
        " steering) are rule-based baselines, run beside the logged drivers (need --scenes)",
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
    t.add_argument(
        "--html-worlds",
        type=IntRange(0, 8),
        default=0,
        help="also write episodes.html, an HTML replay of the first N scenes (0-8; one more rollout of them)",
    )
    t.add_argument(
        "--control",
        choices=("all", "sdc", "tracks-to-predict"),
        default="all",
        help="who the policy drives on converted WOMD scenes; the other objects replay their logs, and the"
        " human baseline runs in the same mode (default all)",
    )
    t.add_argument(
        "--others",
        choices=("log", "idm"),
        default="log",
        help="what the objects the policy does not drive do: replay their logs (log, default) or, for"
        " vehicles, follow their logged paths with an IDM speed law and brake for the agents (idm);"
        " pedestrians and cyclists keep their logs; the human baseline runs in the same mode",
    )


def _bench_flags(t: Any) -> None:
    t.add_argument("--worlds", type=WORLDS, default=256)
    t.add_argument("--agents", type=AGENTS_OR_AUTO, default=16, help=f"agents per world, or {AUTO_HELP}")
    t.add_argument("--scenes", type=Path, default=None, help="bench on this folder of scene JSON files")
    t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)
    t.add_argument("--min-active-fraction", type=MIN_ACTIVE_FRACTION, default=0.0, help=RESET_HELP)
    t.add_argument("--steps", type=positive(MAX_BENCH_STEPS), default=30, help="timed steps after warm-up")
    t.add_argument(
        "--warmup",
        type=IntRange(0, MAX_BENCH_STEPS),
        default=5,
        help="untimed steps first (an episode's worth, 200, for a steady-state active fraction)",
    )
    t.add_argument("--baseline", action="store_true", help="non-vectorized reference")
    t.add_argument(
        "--actions",
        choices=BENCH_ACTIONS,
        default="policy",
        help="policy: the batched actor's inference in the loop, as in training; random: uniform random "
        "actions, the simulator alone (as native simulators report their figure)",
    )
    t.add_argument("--policy-hz", type=POLICY_HZ, default=10.0, help="policy (control) rate [Hz]")


def _render_flags(t: Any) -> None:
    t.add_argument("--checkpoint", type=Path, default=None)
    t.add_argument("--policy", choices=("checkpoint", "expert"), default="checkpoint")
    t.add_argument(
        "--agents",
        type=SCENE_AGENTS_OR_AUTO,
        default=8,
        help=f"agents per world for --policy expert, or {AUTO_HELP}",
    )
    t.add_argument(
        "--panels",
        type=IntRange(1, 8),
        default=4,
        help="scenes shown: side by side in a GIF (1-4), as selectable worlds in an HTML replay (1-8)",
    )
    t.add_argument(
        "--format",
        choices=RENDER_FORMATS,
        default="gif",
        help="gif (top-down GIF), html (a self-contained HTML replay: play, scrub, zoom, click an agent"
        " for its figures) or both (one recording; the .html beside the .gif)",
    )
    t.add_argument("--scenes", type=Path, default=None, help="render scenes of this folder")
    t.add_argument("--scene-split", choices=SCENE_SPLITS, default="all", help=SPLIT_HELP)


_ADD_FLAGS: dict[str, Callable[[Any], None]] = {
    "train": _train_flags,
    "eval": _eval_flags,
    "bench": _bench_flags,
    "render": _render_flags,
}


# ----------------------------------------------------------------------------------- the commands


def demo(args: argparse.Namespace) -> int:
    """``demo``: train, evaluate and render; print the report's path and the headline figures."""
    from scenefactory.jobs import demo as job  # when the command runs: start-up time (module docstring)

    given = {"iterations": args.iterations, "eval_scenes": args.eval_scenes}  # None: the demo's own
    metrics = job.demo(
        job.DemoArgs(out=args.out, signals=args.signals, **{k: v for k, v in given.items() if v is not None})
    )
    print(f"demo report: {args.out / 'report.md'}")
    print(json.dumps({k: metrics[k] for k in ("goal_reach_rate", "collision_rate", "episodes")}))
    return 0


def validate_vehicle(args: argparse.Namespace) -> int:
    """``validate vehicle``: exit status 1 when a check fails."""
    from scenefactory.jobs import vehicle  # when the command runs: start-up time (module docstring)

    policy_steps(args.physics_hz, vehicle.POLICY_HZ, f"the vehicle checks' {vehicle.POLICY_HZ:g} Hz policy")
    result = vehicle.validate(
        vehicle.ValidateArgs(
            out=args.out,
            conditions=tuple(args.surface or vehicle.DEFAULT_CONDITIONS),
            engine=EngineSpec("mujoco", physics_hz=args.physics_hz),
        )
    )
    verdict = "passed" if result["passed"] else "FAILED"
    print(f"vehicle validation {verdict}: {args.out / 'validation.json'}")
    return 0 if result["passed"] else 1


def train(args: argparse.Namespace) -> int:
    """``train drive``: the flags given over :class:`~scenefactory.jobs.drive.TrainArgs`' defaults
    or ``--recipe``'s values; procedural scenes (``--train-scenes``, by default 120, none with
    ``--scenes``) stay in the training seed range."""
    from scenefactory.jobs import drive, recipes  # when the command runs: start-up time (module docstring)

    recipe = None if args.recipe is None else recipes.drive_recipe(args.recipe)
    given = {field: getattr(args, dest) for dest, field in TRAIN_FIELDS.items() if hasattr(args, dest)}
    if "num_train_scenes" not in given and "scenes_dir" in given:
        given["num_train_scenes"] = 0  # --scenes alone: its scenes only
    base = drive.TrainArgs(out=args.out) if recipe is None else recipe.args
    if recipe is not None and recipe.needs_scenes and "scenes_dir" not in given:
        raise UserError(
            f"--recipe {recipe.name} trains on converted scenes: give --scenes DIR (the json folder "
            "'scenefactory convert' writes)"
        )
    engine = engine_spec(args, drive.POLICY_HZ, f"the {drive.POLICY_HZ:g} Hz policy")
    spec = replace(base, **given, out=args.out, engine=engine, device=engine_device(args), seed=args.seed)
    scenes = spec.num_train_scenes
    check_scene_range("train", args.seed, scenes, f"--seed {args.seed} with --train-scenes {scenes}")
    trainer = drive.train(spec)
    if trainer.ranks.main:  # torchrun: rank 0 reports
        print(f"checkpoint: {trainer.ckpt_dir / 'latest.pt'}")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """``eval drive``: a checkpoint's policy (held-out procedural scenes stay in the evaluation seed
    range), or with ``--policy expert`` the logged drivers of the ``--scenes`` folder."""
    from scenefactory.jobs import drive  # when the command runs: start-up time (module docstring)

    engine = engine_spec(args, drive.POLICY_HZ, f"the {drive.POLICY_HZ:g} Hz policy")
    m: dict[str, Any]
    if args.policy != "checkpoint":
        if args.scenes is None:
            raise UserError(f"--policy {args.policy} needs --scenes DIR (scenes converted from driving logs)")
        if args.html_worlds:
            raise UserError(
                "--html-worlds goes with a checkpoint; for the logged drivers' replay run "
                "'render drive --policy expert --scenes DIR --format html'"
            )
        m = drive.evaluate_expert(
            drive.ExpertEvalArgs(
                scenes_dir=args.scenes,
                out=args.out,
                engine=engine,
                device=engine_device(args),
                episodes=args.episodes,
                agents=args.agents,
                scene_split=args.scene_split,
                control=args.control,
                others=args.others,
                policy=args.policy,
            )
        )
    else:
        if args.scenes is None:
            where = f"--seed {args.seed} with --episodes {args.episodes}"
            check_scene_range("eval", args.seed, args.episodes, where)
        if args.checkpoint is None:
            raise UserError("eval drive needs --checkpoint PATH (or --policy expert with --scenes DIR)")
        m = drive.evaluate(
            drive.EvalArgs(
                checkpoint=args.checkpoint,
                out=args.out,
                engine=engine,
                device=engine_device(args),
                episodes=args.episodes,
                seed=args.seed,
                worlds=args.worlds,
                scenes_dir=args.scenes,
                scene_split=args.scene_split,
                html_worlds=args.html_worlds,
                control=args.control,
                others=args.others,
            )
        )
    print(json.dumps({k: m[k] for k in EVAL_KEYS}))
    if "human_baseline" in m:  # the logged drivers on the same scenes and engine
        print(json.dumps({"human_baseline": {k: m["human_baseline"][k] for k in EVAL_KEYS}}))
    if "agents" in m:
        print(json.dumps({"agents": m["agents"]}))
    print(f"metrics: {args.out / 'metrics.json'}")
    if args.html_worlds:
        print(f"replay: {args.out / 'episodes.html'}")
    return 0


def bench(args: argparse.Namespace) -> int:
    """``bench drive``: the procedural scenes stay in the training seed range."""
    from scenefactory.jobs import drive  # when the command runs: start-up time (module docstring)

    engine = engine_spec(args, args.policy_hz, f"--policy-hz {args.policy_hz:g}")
    if args.baseline and args.actions != "policy":
        raise UserError(
            f"--baseline steps the policy agent by agent; --actions {args.actions} is for the vectorized run"
        )
    if args.scenes is None:
        check_scene_range("train", args.seed, drive.BENCH_SCENES, f"--seed {args.seed}")
    r = drive.bench(
        drive.BenchArgs(
            out=args.out,
            engine=engine,
            device=engine_device(args),
            worlds=args.worlds,
            agents=args.agents,
            baseline=args.baseline,
            steps=args.steps,
            warmup=args.warmup,
            seed=args.seed,
            policy_hz=args.policy_hz,
            scenes_dir=args.scenes,
            scene_split=args.scene_split,
            min_active_fraction=args.min_active_fraction,
            actions=args.actions,
        )
    )
    print(json.dumps({k: r[k] for k in BENCH_KEYS}))
    return 0


def render(args: argparse.Namespace) -> int:
    """``render drive``: a checkpoint's held-out procedural scenes stay in the evaluation seed range."""
    if args.format == "gif" and args.panels > 4:
        raise UserError(
            f"--panels must be between 1 and 4 for a GIF (up to 8 with --format html), got {args.panels}"
        )
    from scenefactory.jobs import drive  # when the command runs: start-up time (module docstring)

    engine = engine_spec(args, drive.POLICY_HZ, f"the {drive.POLICY_HZ:g} Hz policy")
    if args.scenes is None:
        first = args.seed + drive.RENDER_SEED_OFFSET
        check_scene_range("eval", first, args.panels, f"--seed {args.seed} with --panels {args.panels}")
    if args.policy == "checkpoint" and args.checkpoint is None:
        raise UserError("render drive needs --checkpoint PATH (or --policy expert with --scenes DIR)")
    paths = drive.render(
        drive.RenderArgs(
            out=args.out,
            engine=engine,
            device=engine_device(args),
            checkpoint=None if args.policy == "expert" else args.checkpoint,
            seed=args.seed,
            panels=args.panels,
            scenes_dir=args.scenes,
            agents=args.agents,
            scene_split=args.scene_split,
            formats=("gif", "html") if args.format == "both" else (args.format,),
        )
    )
    for path in paths:
        print(f"{'replay' if path.suffix == '.html' else 'video'}: {path}")
    return 0


COMMANDS: dict[tuple[str, str | None], Handler] = {
    ("demo", None): demo,
    ("validate", "vehicle"): validate_vehicle,
    ("train", "drive"): train,
    ("eval", "drive"): evaluate,
    ("bench", "drive"): bench,
    ("render", "drive"): render,
}
"""(command, task) → the function that runs it."""
