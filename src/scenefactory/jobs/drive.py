"""The driving jobs behind the CLI: train, evaluate, render, benchmark, and the demo pipeline.

The CLI only parses flags and calls these; each writes its results as files (JSON, PNG, GIF).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from scenefactory.bounds import AUTO, MAX_AGENTS, policy_steps
from scenefactory.engines import DEFAULT_PHYSICS_HZ
from scenefactory.errors import UserError, warn
from scenefactory.evaluation.bench import bench_drive
from scenefactory.evaluation.human import (
    agent_counts,
    describe_counts,
    human_baseline,
    replay_beyond,
    write_figures,
)
from scenefactory.evaluation.plots import plot_learning_curve, plot_metric_bars
from scenefactory.evaluation.render import render_episodes_gif
from scenefactory.evaluation.rollout import evaluate, record_episodes
from scenefactory.io import write_json
from scenefactory.rl.ppo import (
    IterationStats,
    PPOConfig,
    Trainer,
    TrainSpec,
    load_policy,
    resume_checkpoint,
    spec_to_dict,
)
from scenefactory.scenes.library import load_scene_dir, procedural_scenes
from scenefactory.scenes.procedural_params import DEFAULT_SIGNAL_CYCLE_S
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, with_traffic_signals
from scenefactory.tasks.driving.road_cache import warm as warm_road_cache
from scenefactory.tasks.driving.slots import DEFAULT_MIN_FILL, agents_per_world_for, initial_fill

console = Console(stderr=True)

TRAIN_SCENES = 120
"""Procedural training scenes of ``train drive`` and the demo unless told otherwise."""
POLICY_HZ = 1.0 / DrivingTaskConfig().dt_s
"""The driving task's policy rate [Hz] (``--policy-hz`` on ``bench`` changes it there only)."""
BENCH_SCENES = 24
"""Procedural training scenes ``bench drive`` cycles through (from ``--seed``)."""
COLLECT_SCENES = 60
"""Procedural training scenes ``collect drive`` records on (from ``--seed``)."""
RENDER_SEED_OFFSET = 7
"""``render drive`` of a checkpoint shows evaluation scenes from ``--seed`` + this."""

METRIC_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "timeout_rate",
    "high_drac_rate",
    "near_miss_rate",
)


def _progress() -> Progress:
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


@dataclass(frozen=True)
class TrainArgs:
    """Flags of ``train drive``."""

    out: Path
    engine: str = "kinematic"
    worlds: int = 128
    agents: int | str = 8
    """K, or ``"auto"`` (:data:`~scenefactory.bounds.AUTO`): chosen from the ``--scenes`` folder
    by :func:`resolve_agents` before the spec is made."""
    iterations: int = 150
    seed: int = 0
    num_train_scenes: int = TRAIN_SCENES
    physics_hz: float = DEFAULT_PHYSICS_HZ
    scenes_dir: Path | None = None
    scene_split: str = "all"
    """Which scenes of ``scenes_dir``: all, or ``convert``'s train or eval split (``--scene-split``)."""
    dynamics_model: str | None = None
    grounding: str | None = None
    action_lag_steps: int = 0
    signals: bool = False
    min_active_fraction: float = 0.0


def resolve_agents(
    agents: int | str, scenes: Sequence[Scene], source: Path | None, max_agents: int | None = None
) -> int:
    """``agents``, or for ``"auto"`` the agents per world the scenes' controlled-agent counts call
    for (:func:`~scenefactory.tasks.driving.slots.agents_per_world_for`: the largest K whose worlds
    start at least :data:`~scenefactory.tasks.driving.slots.DEFAULT_MIN_FILL` full on average, at
    most ``max_agents``), said on stderr. ``auto`` needs scenes from a folder (``source``):
    procedural scenes place as many agents as they are asked for, so there is nothing to choose from."""
    if agents != AUTO:
        return int(agents)
    if source is None or not scenes:
        raise UserError(
            "--agents auto chooses the agents per world from the scenes of --scenes DIR; procedural "
            "scenes place as many agents as --agents asks for, so give a number"
        )
    counts = [sc.num_agents for sc in scenes]
    k = agents_per_world_for(counts, DEFAULT_MIN_FILL, max_agents)
    console.print(
        f"--agents auto: {k} agents per world for the {len(scenes)} scenes of {source} "
        f"({min(counts)}-{max(counts)} agents each; worlds start {initial_fill(counts, k):.0%} full "
        f"on average, the agents beyond {k} replay their logs)"
    )
    return k


def make_spec(args: TrainArgs, ppo: PPOConfig | None = None) -> TrainSpec:
    """Map flags onto the typed configs (the one place that does); ``--agents auto`` must have been
    resolved (:func:`resolve_agents`)."""
    if not isinstance(args.agents, int):
        raise ValueError(f"make_spec needs a number of agents, got {args.agents!r}: see resolve_agents")
    for name in ("worlds", "agents", "iterations"):
        if getattr(args, name) < 1:
            raise UserError(
                f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}"
            )
    if args.num_train_scenes < 0 or (args.num_train_scenes == 0 and args.scenes_dir is None):
        raise UserError(
            f"--train-scenes must be positive (or 0 with --scenes DIR), got {args.num_train_scenes}"
        )
    if args.agents > 32:
        raise UserError(
            f"--agents must be at most 32 (scenes place up to 32 controlled agents), got {args.agents}"
        )
    task = DrivingTaskConfig(
        num_worlds=args.worlds,
        agents_per_world=int(args.agents),
        min_active_fraction=args.min_active_fraction,
    )
    if args.signals:
        task = with_traffic_signals(task)
    return TrainSpec(
        task=task,
        ppo=ppo or PPOConfig(),
        engine=args.engine,
        physics_hz=args.physics_hz,
        dynamics_model=args.dynamics_model,
        grounding=args.grounding,
        action_lag_steps=args.action_lag_steps,
        iterations=args.iterations,
        seed=args.seed,
        num_train_scenes=args.num_train_scenes,
        scene_source=scene_source(args.scenes_dir and Path(args.scenes_dir).resolve(), args.scene_split),
    )


def scene_source(scenes_dir: Path | None, split: str = "all", procedural: str = "procedural") -> str:
    """Where scenes come from, as metrics and specs record it: ``procedural`` (or the given name),
    ``dir:PATH``, or ``dir:PATH split=train|eval`` for one split of a converted folder."""
    if scenes_dir is None:
        return procedural
    return f"dir:{scenes_dir}" + ("" if split == "all" else f" split={split}")


def training_scenes(
    spec: TrainSpec, scenes_dir: Path | None, loaded: list[Scene] | None = None, scene_split: str = "all"
) -> list[Scene]:
    """Scenes from ``scenes_dir`` (if any, its ``scene_split``; or the ``loaded`` ones) followed by
    ``spec.num_train_scenes`` procedural ones."""
    scenes = list(loaded or []) + (load_scene_dir(scenes_dir, scene_split) if scenes_dir is not None else [])
    if spec.num_train_scenes:
        scenes += procedural_scenes(
            "train",
            spec.num_train_scenes,
            spec.task.agents_per_world,
            base_seed=spec.seed,
            signal_cycle_s=signal_cycle(spec.task),
        )
    return scenes


def signal_cycle(task: DrivingTaskConfig) -> float:
    """The signal cycle of procedural junctions for ``task`` [s]: signalled when the task observes
    traffic signals (``--signals``), else 0 (none)."""
    return DEFAULT_SIGNAL_CYCLE_S if task.observations.traffic_signals else 0.0


def train(args: TrainArgs, ppo: PPOConfig | None = None) -> Trainer:
    """Train (or resume) a driving policy; writes checkpoints, history, TensorBoard and a curve.
    ``--agents auto`` reads the ``--scenes`` folder first, to choose K (:func:`resolve_agents`)."""
    loaded: list[Scene] | None = None
    if args.agents == AUTO:
        loaded = load_scene_dir(args.scenes_dir, args.scene_split) if args.scenes_dir is not None else []
        args = replace(args, agents=resolve_agents(args.agents, loaded, args.scenes_dir, MAX_AGENTS))
    spec = make_spec(args, ppo)
    resume = resume_checkpoint(spec, args.out)  # a foreign or unsafe checkpoint fails before any work
    # the --scenes folder is read (every file checked) before anything is printed: a bad one is a
    # one-line error, not a status line and then an error
    if loaded is None:
        loaded = load_scene_dir(args.scenes_dir, args.scene_split) if args.scenes_dir is not None else []
    agents_left_out(loaded, spec.task.agents_per_world, args.scenes_dir, "--agents")
    source = "" if args.scenes_dir is None else f" plus the {len(loaded)} scenes in {args.scenes_dir}"
    console.print(
        f"building {spec.num_train_scenes} procedural training scenes{source} (seed {spec.seed}) ..."
    )
    scenes = training_scenes(spec, None, loaded)
    trainer = Trainer(spec, scenes, args.out, checkpoint=resume)
    if trainer.iteration:
        console.print(f"resuming {args.out} at iteration {trainer.iteration}/{spec.iterations}")
    with _progress() as bar:
        job = bar.add_task("train drive", total=spec.iterations, completed=trainer.iteration, info="")

        def on_iteration(s: IterationStats) -> None:
            m = s.metrics
            info = (
                f"reward {s.mean_reward:6.2f}  goal {m.get('goal_reach_rate', float('nan')):.2f}  "
                f"coll {m.get('collision_rate', float('nan')):.2f}  {s.fps:,.0f} steps/s"
            )
            bar.update(job, completed=s.iteration, info=info)
            if not console.is_terminal and s.iteration % 10 == 0:  # no live bar in logs: print a line
                console.print(f"iteration {s.iteration}/{spec.iterations}: {info}")

        trainer.run(on_iteration)
    plot_learning_curve(
        trainer.history, Path(args.out) / "learning_curve.png", title=f"train drive ({spec.engine})"
    )
    return trainer


def check_policy_rate(task: DrivingTaskConfig, physics_hz: float) -> None:
    """``UserError`` unless the checkpoint's policy step is a whole number of physics steps."""
    hz = 1.0 / task.dt_s
    policy_steps(physics_hz, hz, f"the checkpoint's {hz:g} Hz policy")


def agents_left_out(scenes: Sequence[Scene], k: int, source: Path | None, flag: str) -> int:
    """Warn (one line on stderr) when scenes hold more controlled agents than the ``k`` slots of a
    world, and return how many agents are beyond them: only each scene's first ``k`` are driven and
    scored. The others are replayed from their scene's log, as replayed vehicles the driven agents
    see and can hit (``tasks.driving.pool``; ``evaluation.human.replay_beyond`` for evaluation);
    those of a scene without a log (procedural) are left out. ``flag`` says where ``k`` comes from
    (the checkpoint's agents per world, ``--agents``)."""
    over = [sc for sc in scenes if sc.num_agents > k]
    if not over:
        return 0
    beyond = sum(sc.num_agents - k for sc in over)
    replayed = sum(sc.num_agents - k for sc in over if sc.log is not None)
    most = max(sc.num_agents for sc in over)
    fate = [f"the other {replayed} replay their logs (replayed vehicles the driven ones see and can hit)"]
    fate = fate if replayed else []
    if beyond - replayed:
        fate.append(f"{beyond - replayed} agents of scenes without a log are left out")
    warn(
        f"{len(over)} of {len(scenes)} scenes in {source} hold more controlled agents than {flag} "
        f"({k}), up to {most}: only the first {k} of each are driven and scored, {', '.join(fate)}"
    )
    return beyond


def eval_scenes(
    num: int,
    agents: int,
    seed: int,
    scenes_dir: Path | None = None,
    signal_cycle_s: float = 0.0,
    scene_split: str = "all",
) -> list[Scene]:
    """The first ``num`` scenes of ``scenes_dir`` (of its ``scene_split``), or held-out procedural
    scenes (seeds from the eval range, disjoint from every training seed; junctions signalled with
    ``signal_cycle_s``)."""
    if scenes_dir is not None:
        return load_scene_dir(scenes_dir, scene_split, num)
    return procedural_scenes("eval", num, agents, base_seed=seed, signal_cycle_s=signal_cycle_s)


def evaluate_checkpoint(
    checkpoint: str | Path,
    engine: str,
    episodes: int,
    seed: int,
    out: Path,
    worlds: int = 64,
    physics_hz: float = DEFAULT_PHYSICS_HZ,
    scenes_dir: Path | None = None,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
    scene_split: str = "all",
) -> dict[str, Any]:
    """Evaluate a checkpoint on ``episodes`` held-out scenes (of ``scenes_dir``: its ``scene_split``);
    writes ``out/metrics.json``, ``metrics.md`` and a bar chart. A scene's agents beyond the
    checkpoint's K replay their logs (``metrics["agents"]`` counts what was controlled, replayed and
    left out, and why). On scenes from driving logs (``scenes_dir``), the logged drivers are run on
    the same scenes and engine and their figures written beside the policy's
    (``metrics["human_baseline"]``, ``metrics.md``)."""
    if episodes < 1:
        raise UserError(f"--episodes must be a positive integer, got {episodes}")
    policy = load_policy(checkpoint)
    task = policy.task_cfg
    check_policy_rate(task, physics_hz)
    if scenes_dir is None:
        console.print(f"building {episodes} held-out procedural scenes (seed {seed}) ...")
    scenes = eval_scenes(episodes, task.agents_per_world, seed, scenes_dir, signal_cycle(task), scene_split)
    k = task.agents_per_world
    left_out = agents_left_out(scenes, k, scenes_dir, "the checkpoint's agents per world")
    fitted = [replay_beyond(sc, k) for sc in scenes]
    t0 = time.perf_counter()
    with _progress() as bar:
        job = bar.add_task(f"eval drive ({engine})", total=len(scenes), info="")
        metrics, _ = evaluate(
            policy.act,
            task,
            fitted,
            engine=engine,
            num_worlds=worlds,
            seed=seed,
            progress=lambda done, total: bar.update(job, completed=done),
            physics_hz=physics_hz,
            dynamics_model=dynamics_model,
            grounding=grounding,
            action_lag_steps=action_lag_steps,
        )
    metrics.update(
        {
            "engine": engine,
            "grounding": grounding,
            "action_lag_steps": action_lag_steps,
            "physics_hz": physics_hz if engine != "kinematic" else None,
            "checkpoint": str(checkpoint),
            "trained_on": policy.meta.get("engine"),
            "trained_iterations": policy.meta.get("iteration"),
            "seed": seed,
            "scene_split": scene_source(scenes_dir, scene_split, procedural="eval"),
            "agents_per_world": task.agents_per_world,
            "agents_left_out": left_out,
            "agents": agent_counts(scenes, k),
            "wall_s": time.perf_counter() - t0,
        }
    )
    if scenes_dir is not None and any(sc.log is not None for sc in scenes):
        console.print(f"running the scenes' logged drivers on {engine} (human baseline) ...")
        metrics["human_baseline"] = human_baseline(
            task,
            fitted,
            engine,
            worlds,
            seed,
            physics_hz,
            dynamics_model,
            grounding,
            action_lag_steps,
        )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", metrics)
    write_figures(out / "metrics.md", metrics, metrics.get("human_baseline"), f"policy ({engine})")
    plot_metric_bars(
        {k: metrics[k] for k in METRIC_KEYS},
        {k: tuple(metrics[f"{k}_ci95"]) for k in METRIC_KEYS},
        out / "metrics.png",
        title=f"{metrics['episodes']} agent-episodes on {len(scenes)} scenes ({engine})",
    )
    return metrics


def render(
    checkpoint: str | Path | None,
    engine: str,
    out: Path,
    seed: int,
    panels: int = 4,
    physics_hz: float = DEFAULT_PHYSICS_HZ,
    scenes_dir: Path | None = None,
    agents: int | str = 8,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
    scene_split: str = "all",
) -> Path:
    """Top-down GIF of the policy on ``panels`` held-out scenes (one of each kind first); with no
    checkpoint, the scenes' logged drivers (expert actions) drive, to check a converted scene
    (``agents`` per world, or ``"auto"``: chosen from the scenes shown, :func:`resolve_agents`)."""
    if not 1 <= panels <= 4:
        raise UserError(f"--panels must be between 1 and 4, got {panels}")
    if out.suffix.lower() != ".gif":
        raise UserError(f"--out must name a .gif file, got '{out}'")
    if checkpoint is None:
        from scenefactory.evaluation.rollout import EXPERT

        if scenes_dir is None:
            raise UserError("render drive needs --checkpoint PATH, or --policy expert with --scenes DIR")
        scenes = eval_scenes(panels, 1, seed, scenes_dir, scene_split=scene_split)
        k = resolve_agents(agents, scenes, scenes_dir)
        task = DrivingTaskConfig(agents_per_world=k)
        agents_left_out(scenes, k, scenes_dir, "--agents")
        records = record_episodes(
            EXPERT,
            task,
            scenes,
            engine=engine,
            seed=seed,
            physics_hz=physics_hz,
            dynamics_model=dynamics_model,
            grounding=grounding,
            action_lag_steps=action_lag_steps,
        )
    else:
        policy = load_policy(checkpoint)
        check_policy_rate(policy.task_cfg, physics_hz)
        k = policy.task_cfg.agents_per_world
        cycle = signal_cycle(policy.task_cfg)
        scenes = eval_scenes(panels, k, seed + RENDER_SEED_OFFSET, scenes_dir, cycle, scene_split)
        agents_left_out(scenes, k, scenes_dir, "the checkpoint's agents per world")
        records = record_episodes(
            policy.act,
            policy.task_cfg,
            scenes,
            engine=engine,
            seed=seed,
            physics_hz=physics_hz,
            dynamics_model=dynamics_model,
            grounding=grounding,
            action_lag_steps=action_lag_steps,
        )
    records = [replace(r, title=f"{r.title} ({engine})") for r in records]
    return render_episodes_gif(records, out)


def bench(
    engine: str,
    worlds: int,
    agents: int | str,
    baseline: bool,
    steps: int,
    out: Path,
    seed: int,
    physics_hz: float = DEFAULT_PHYSICS_HZ,
    policy_hz: float = 10.0,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
    scenes_dir: Path | None = None,
    min_active_fraction: float = 0.0,
    warmup: int = 5,
    scene_split: str = "all",
) -> dict:
    """Run the CASPS benchmark and write its JSON: on procedural scenes, or on the scenes of
    ``scenes_dir`` (``--agents auto`` chooses K from them, :func:`resolve_agents`)."""
    scenes = load_scene_dir(scenes_dir, scene_split) if scenes_dir is not None else None
    auto = agents == AUTO
    k = resolve_agents(agents, scenes or [], scenes_dir)
    for name, v in (("worlds", worlds), ("agents", k), ("steps", steps)):
        if v < 1:
            raise UserError(f"--{name} must be a positive integer, got {v}")
    if scenes is not None:
        logs = {sc.log.dt_s for sc in scenes if sc.log is not None}
        logs |= {sc.replay.dt_s for sc in scenes if sc.replay is not None}
        if any(abs(dt * policy_hz - 1.0) > 1e-6 for dt in logs):
            hz = ", ".join(f"{1 / dt:g}" for dt in sorted(logs))
            raise UserError(
                f"--policy-hz {policy_hz:g}: the logs of the scenes in {scenes_dir} run at {hz} Hz; "
                "expected the same policy rate"
            )
        agents_left_out(scenes, k, scenes_dir, "--agents")
    where = "procedural scenes" if scenes_dir is None else f"the {len(scenes or [])} scenes of {scenes_dir}"
    console.print(
        f"bench drive ({engine}{', baseline' if baseline else ''}): {worlds} worlds x {k} agents on "
        f"{where}, timing {steps} steps after {warmup} warm-up steps ..."
    )
    result = bench_drive(
        engine,
        worlds,
        k,
        baseline=baseline,
        steps=steps,
        warmup=warmup,
        seed=seed,
        num_scenes=BENCH_SCENES,
        physics_hz=physics_hz,
        policy_hz=policy_hz,
        dynamics_model=dynamics_model,
        grounding=grounding,
        action_lag_steps=action_lag_steps,
        scenes=scenes,
        scene_source=scene_source(scenes_dir, scene_split),
        min_active_fraction=min_active_fraction,
    )
    result["agents_auto"] = auto
    if auto:
        result["agents_auto_min_fill"] = DEFAULT_MIN_FILL
    write_json(out, result)
    return result


# ------------------------------------------------------------------------------------------ demo

DEMO = TrainArgs(
    out=Path("runs/demo"), worlds=128, agents=8, iterations=200, seed=0, num_train_scenes=TRAIN_SCENES
)
DEMO_EVAL_SCENES = 120


def demo(
    out: Path, iterations: int | None = None, eval_scenes_n: int = DEMO_EVAL_SCENES, signals: bool = False
) -> dict[str, Any]:
    """The main job on the embedded default scenes: train on procedural scenes, evaluate on held-out
    ones, plot, render, and write ``report.md``; ``signals`` trains and evaluates with traffic signals
    (``train drive --signals``)."""
    t0 = time.perf_counter()
    args = replace(DEMO, out=out / "train", iterations=iterations or DEMO.iterations, signals=signals)
    trainer = train(args)
    ckpt = out / "train" / "checkpoints" / "latest.pt"
    metrics = evaluate_checkpoint(ckpt, args.engine, eval_scenes_n, seed=0, out=out)
    gif = render(ckpt, args.engine, out / "episodes.gif", seed=0)
    curve = out / "learning_curve.png"
    plot_learning_curve(trainer.history, curve, title="demo: PPO on procedural scenes (kinematic)")
    wall = time.perf_counter() - t0
    _write_report(out, trainer, metrics, gif, wall)
    return metrics


def _write_report(out: Path, trainer: Trainer, metrics: dict[str, Any], gif: Path, wall: float) -> None:
    from scenefactory.io import atomic_write_text

    spec = spec_to_dict(trainer.spec)

    def row(label: str, key: str) -> str:
        lo, hi = metrics[f"{key}_ci95"]
        return f"| {label} | {metrics[key]:.3f} | [{lo:.3f}, {hi:.3f}] |"

    keys: tuple[str, ...] = (*METRIC_KEYS, "mean_peak_drac_mps2", "route_progress")
    if trainer.spec.task.observations.traffic_signals:
        keys += ("red_light_violation_rate", "stop_sign_violation_rate")
    rows = "\n".join(row(k, k) for k in keys)
    task = spec["task"]
    text = f"""# scenefactory demo report

Trained PPO (rsl-rl) on {spec["num_train_scenes"]} procedural training scenes, kinematic engine,
{task["num_worlds"]} worlds × {task["agents_per_world"]} agents, {spec["iterations"]} iterations
({trainer.env_steps:,} agent steps), seed {spec["seed"]}; evaluated on {metrics["scenes"]} held-out
procedural scenes (eval seed range, disjoint from training) = {metrics["episodes"]} agent-episodes.
Total wall time {wall / 60:.1f} min on {torch.get_num_threads()} torch threads.

| metric | value | 95 % CI |
|---|---|---|
{rows}

Files: `metrics.json`, `metrics.png`, `learning_curve.png`, `{gif.name}` (top-down video),
`train/` (checkpoints, `config.json`, `history.json`, TensorBoard logs in `train/tensorboard`).
Reproduce: `scenefactory demo --out {out}`.
"""
    atomic_write_text(out / "report.md", text)


def validate(conditions: list[str] | None, physics_hz: float, out: Path) -> dict[str, Any]:
    """Run the vehicle manoeuvres; writes ``validation.json`` and ``validation.png`` into ``out``."""
    from scenefactory.evaluation.vehicle import DEFAULT_CONDITIONS, plot_validation, validate_vehicle

    result = validate_vehicle(tuple(conditions or DEFAULT_CONDITIONS), physics_hz=physics_hz)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "validation.json", result)
    plot_validation(result, out / "validation.png")
    for name, c in result["conditions"].items():
        console.print(
            f"{name:>10}: mu {c['mu']:.3f}  braking {c['braking_distance_m']:.1f} m "
            f"(v²/2μg {c['braking_predicted_m']:.1f} m)  lateral max {c['max_lateral_accel_mps2']:.2f} m/s²  "
            f"top speed {c['top_speed_mps']:.1f} m/s  {'ok' if all(c['checks'].values()) else 'FAIL'}"
        )
    return result


def evaluate_expert(
    scenes_dir: Path | None,
    engine: str,
    episodes: int,
    agents: int | str | None,
    out: Path,
    physics_hz: float,
    scene_split: str = "all",
) -> dict[str, Any]:
    """Drive the scenes' logged agents closed loop (the human baseline, ``evaluation.human``);
    writes ``metrics.json`` (goal reach, collision, off-road, ..., ``log_divergence_m``: how far the
    engine's drivers drift from their logs, and ``agents``: what was controlled, replayed and left
    out, and why) and ``metrics.md``. ``agents`` (K) defaults to the most controlled agents of any
    scene, so that none is left out (``"auto"``: chosen from the scenes' agent counts,
    :func:`resolve_agents`); a smaller one is said, and the agents beyond it replay."""
    if scenes_dir is None:
        raise UserError("--policy expert needs --scenes DIR (scenes converted from driving logs)")
    scenes = load_scene_dir(scenes_dir, scene_split, episodes)
    if not any(sc.log is not None for sc in scenes):
        raise UserError(
            f"no scene in {scenes_dir} carries a driving log: nothing for --policy expert to replay"
        )
    most = max(1, max(sc.num_agents for sc in scenes))
    k = resolve_agents(agents, scenes, scenes_dir) if agents is not None else most
    agents_left_out(scenes, k, scenes_dir, "--agents")
    task = DrivingTaskConfig(num_worlds=len(scenes), agents_per_world=k)
    metrics = human_baseline(task, [replay_beyond(sc, k) for sc in scenes], engine, physics_hz=physics_hz)
    counts = agent_counts(scenes, k)
    metrics.update(
        {
            "engine": engine,
            "physics_hz": physics_hz if engine != "kinematic" else None,
            "scene_split": scene_source(scenes_dir, scene_split),
            "agents_per_world": k,
            "agents": counts,
        }
    )
    console.print(describe_counts(counts))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", metrics)
    write_figures(out / "metrics.md", None, metrics, engine)
    return metrics


def convert(
    inputs: list[str],
    out: Path,
    formats: str,
    workers: int,
    max_agents: int,
    ray_address: str | None = None,
    eval_fraction: float = 0.1,
) -> dict[str, Any]:
    """``scenefactory convert``: WOMD shards → scene files, with a progress bar over shards; each
    scene goes to the eval split with probability ``eval_fraction``, by its scenario id.

    Raises ``UserError`` before converting anything for bad arguments, and
    :class:`~scenefactory.scenes.womd.batch.ConvertInterrupted` on SIGINT/SIGTERM once the workers
    have ended and ``summary.json``/``index.json`` are written (see ``scenes.womd.batch``).
    """
    from scenefactory.scenes.womd.batch import check_ray_address, convert_files, parse_formats, prepare

    fmts = parse_formats(formats)
    files = prepare(inputs, out)  # user errors surface here, before the progress bar starts
    if ray_address is not None:
        check_ray_address(ray_address)  # an unreachable cluster: one line, not minutes of retries
    total = len(files)
    with _progress() as bar:
        job = bar.add_task("convert", total=total, info="")
        done = [0, 0, 0]

        def on_shard(rep: dict[str, Any]) -> None:
            done[0] += 1
            done[1] += len(rep["converted"])
            done[2] += len(rep["errors"])
            bar.update(job, completed=done[0], info=f"{done[1]} scenes, {done[2]} errors")

        return convert_files(
            files,
            out,
            fmts,
            workers,
            max_agents,
            on_shard,
            ray_address,
            eval_fraction,
            prepare_scene=warm_road_cache if "json" in fmts else None,
        )


def collect(args: Any) -> dict[str, Any]:
    """``scenefactory collect drive``: a transition dataset (see ``grounding.dataset``)."""
    from scenefactory.grounding.dataset import collect as collect_transitions

    if args.checkpoint is not None:
        load_policy(args.checkpoint)  # a foreign or unsafe checkpoint fails before any work
    with _progress() as bar:
        job = bar.add_task(f"collect ({args.engine})", total=args.steps, info="")
        return collect_transitions(
            args.out,
            engine=args.engine,
            worlds=args.worlds,
            agents=args.agents,
            steps=args.steps,
            seed=args.seed,
            checkpoint=args.checkpoint,
            num_scenes=COLLECT_SCENES,
            physics_hz=args.physics_hz,
            progress=lambda done, total: bar.update(job, completed=done),
            action_lag_steps=args.action_lag_steps,
            dynamics_model=args.dynamics_model,
            grounding=args.grounding,
        )


def collect_logs(scenes_dir: Path, out: Path, scene_split: str = "all") -> dict[str, Any]:
    """``scenefactory collect logs``: converted scenes' logged trajectories as a transition dataset
    (see ``grounding.log_dataset``)."""
    from scenefactory.grounding.log_dataset import write_log_dataset

    source = str(scenes_dir) + ("" if scene_split == "all" else f" split={scene_split}")
    return write_log_dataset(load_scene_dir(scenes_dir, scene_split), out, source=source)


def fit_dynamics_cmd(
    data: Path, kind: str, history: int | None, epochs: int, seed: int, out: Path
) -> dict[str, Any]:
    """``scenefactory fit-dynamics``: train a dynamics model, report held-out errors vs the bicycle."""
    from scenefactory.dynamics.models import DynamicsModelConfig, model_kind
    from scenefactory.grounding.dataset import load_transitions
    from scenefactory.grounding.fit import fit_dynamics

    cfg = DynamicsModelConfig(kind=model_kind(kind), history_len=history)
    dataset = load_transitions(data, min_episodes=2)  # read and checked once, before the progress bar
    with _progress() as bar:
        job = bar.add_task(f"fit-dynamics ({kind})", total=epochs, info="")
        result = fit_dynamics(
            data,
            cfg,
            out,
            epochs=epochs,
            seed=seed,
            progress=lambda e, n, loss: bar.update(job, completed=e, info=f"loss {loss:.4f}"),
            dataset=dataset,
        )
    return result.metrics


def ground_cmd(data: Path, out: Path, cfg: Any) -> dict[str, Any]:
    """``scenefactory ground``: fit one grounding method (a ``GroundConfig``) on target data and
    print its held-out errors next to the uncorrected bicycle's."""
    from scenefactory.grounding.ground import ground, load_target

    dataset = load_target(data, cfg)  # read and checked once, before the progress bar
    with _progress() as bar:
        job = bar.add_task(f"ground ({cfg.method.value})", total=None, info="")

        def on_progress(done: int, total: int, info: str) -> None:
            bar.update(job, completed=done, total=total, info=info)

        result = ground(data, cfg, out, progress=on_progress, dataset=dataset)
    held = result.config["heldout"]
    rows = [
        (f"grounded ({cfg.method.value})", held["grounded"]),
        ("kinematic bicycle", held["kinematic_bicycle"]),
    ]
    console.print(
        f"held-out errors on {held['episodes']} episodes ({held['transitions']} transitions); "
        f"budget {result.config['budget_transitions']} target transitions"
    )
    console.print(
        f"{'model':<22} {'1-step m':>9} {'yaw rad':>8} {'speed m/s':>9} {'10-step m':>9} {'20-step m':>9}"
    )
    for label, m in rows:
        console.print(
            f"{label:<22} {m['pos_err_m']:>9.4f} {m['yaw_err_rad']:>8.4f} {m['speed_err_mps']:>9.4f} "
            f"{m['rollout10_pos_err_m']:>9.3f} {m['rollout20_pos_err_m']:>9.3f}"
        )
    if "fitted" in result.config["fit"]:
        console.print(f"fitted knobs: {result.config['fit']['fitted']}")
    return result.config
