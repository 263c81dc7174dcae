"""The driving jobs: train, evaluate (a checkpoint, or the scenes' logged drivers), render and
benchmark. Each takes one frozen dataclass of its arguments (:class:`TrainArgs`, :class:`EvalArgs`,
...), which the CLI builds from its flags (``scenefactory.cli.drive``) and a user or an experiment
can build directly; each writes its results as files (JSON, Markdown, PNG, GIF). The engine is an
:class:`~scenefactory.engines.spec.EngineSpec`, built once and passed whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scenefactory.bounds import AUTO, MAX_AGENTS
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.evaluation.bench import bench_drive
from scenefactory.evaluation.control import restrict_control, with_others
from scenefactory.evaluation.html_replay import write_html_replay
from scenefactory.evaluation.human import (
    agent_counts,
    describe_counts,
    human_baseline,
    replay_beyond,
    write_figures,
)
from scenefactory.evaluation.plots import plot_learning_curve, plot_metric_bars
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.render import render_episodes_gif
from scenefactory.evaluation.rollout import EXPERT, RULE_DRIVERS, record_episodes
from scenefactory.evaluation.rollout import evaluate as evaluate_policy
from scenefactory.io import write_json
from scenefactory.jobs.console import console, progress_bar
from scenefactory.jobs.scenes import (
    agents_left_out,
    check_policy_rate,
    eval_scenes,
    resolve_agents,
    scene_source,
    signal_cycle,
    training_scenes,
)
from scenefactory.rl.distributed import ranks_from_environ
from scenefactory.rl.driving import IterationStats, Trainer, load_policy
from scenefactory.rl.driving_spec import TrainSpec, resume_checkpoint
from scenefactory.rl.ppo import PPOConfig
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, with_traffic_signals
from scenefactory.tasks.driving.slots import DEFAULT_MIN_FILL

TRAIN_SCENES = 120
"""Procedural training scenes of ``train drive`` and the demo unless told otherwise."""
POLICY_HZ = 1.0 / DrivingTaskConfig().dt_s
"""The driving task's policy rate [Hz] (``--policy-hz`` on ``bench`` changes it there only)."""
BENCH_SCENES = 24
"""Procedural training scenes ``bench drive`` cycles through (from ``--seed``)."""
RENDER_SEED_OFFSET = 7
"""``render drive`` of a checkpoint shows evaluation scenes from ``--seed`` + this."""
RENDER_FORMATS = ("gif", "html")
"""What ``render drive`` writes: a GIF (up to :data:`GIF_PANELS` scenes side by side) and the HTML
replay (:mod:`~scenefactory.evaluation.html_replay`), both from one recording."""
GIF_PANELS = 4
"""The most scenes a GIF shows side by side."""
HTML_WORLDS = 8
"""The most scenes ``render drive`` and ``eval drive --html-worlds`` put in one HTML replay."""

METRIC_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "timeout_rate",
    "high_drac_rate",
    "near_miss_rate",
)
"""The rates of ``metrics.png`` (and of the demo report, with more)."""


def engine_record(engine: EngineSpec) -> dict[str, Any]:
    """The engine as ``metrics.json`` has recorded it: tier, grounding folder, actuator lag, and the
    physics rate where the tier has one (``None`` for the kinematic tier)."""
    return {
        "engine": engine.tier,
        "grounding": None if engine.grounding is None else str(engine.grounding),
        "action_lag_steps": engine.action_lag_steps,
        "physics_hz": engine.physics_hz if engine.tier != "kinematic" else None,
    }


# ------------------------------------------------------------------------------------------ train


@dataclass(frozen=True, kw_only=True)
class TrainArgs:
    """Arguments of ``train drive``.

    ``agents`` is K, or ``"auto"`` (:data:`~scenefactory.bounds.AUTO`): chosen from the
    ``scenes_dir`` folder by :func:`~scenefactory.jobs.scenes.resolve_agents` before the spec is
    made. ``num_train_scenes`` procedural scenes are added to those of ``scenes_dir`` (its
    ``scene_split``: all, or ``convert``'s train or eval split). ``signals``: traffic signals at the
    procedural junctions, observed and penalized; ``min_active_fraction``: reset a world once fewer
    than this fraction of its agents still drive. ``device``: where the environment, the engine (the
    torch tiers and mujoco-warp; MuJoCo C stays on the CPU) and PPO run, ``cpu`` or ``cuda[:N]``."""

    out: Path
    engine: EngineSpec = field(default_factory=EngineSpec)
    device: str = "cpu"
    worlds: int = 128
    agents: int | str = 8
    iterations: int = 150
    seed: int = 0
    num_train_scenes: int = TRAIN_SCENES
    scenes_dir: Path | None = None
    scene_split: str = "all"
    signals: bool = False
    min_active_fraction: float = 0.0


def make_spec(args: TrainArgs, ppo: PPOConfig | None = None) -> TrainSpec:
    """Map the arguments onto the typed configs (the one place that does); ``--agents auto`` must
    have been resolved (:func:`~scenefactory.jobs.scenes.resolve_agents`)."""
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
    if args.agents > MAX_AGENTS:
        raise UserError(
            f"--agents must be at most {MAX_AGENTS} (scenes place up to {MAX_AGENTS} controlled agents),"
            f" got {args.agents}"
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
        iterations=args.iterations,
        seed=args.seed,
        num_train_scenes=args.num_train_scenes,
        scene_source=scene_source(args.scenes_dir and Path(args.scenes_dir).resolve(), args.scene_split),
    )


def train(args: TrainArgs, ppo: PPOConfig | None = None) -> Trainer:
    """Train (or resume) a driving policy; writes checkpoints, history, TensorBoard and a curve.
    ``--agents auto`` reads the ``scenes_dir`` folder first, to choose K. Under ``torchrun`` each
    rank trains on its share of the worlds and only rank 0 prints and writes
    (:mod:`scenefactory.rl.distributed`)."""
    loaded: list[Scene] | None = None
    if args.agents == AUTO:
        loaded = load_scene_dir(args.scenes_dir, args.scene_split) if args.scenes_dir is not None else []
        args = replace(args, agents=resolve_agents(args.agents, loaded, args.scenes_dir, MAX_AGENTS))
    spec = make_spec(args, ppo)
    ranks = ranks_from_environ()
    ranks.share(spec.task.num_worlds, "the run's worlds (--worlds)")  # before any work
    resume = resume_checkpoint(spec, args.out)  # a foreign or unsafe checkpoint fails before any work
    # the --scenes folder is read (every file checked) before anything is printed: a bad one is a
    # one-line error, not a status line and then an error
    if loaded is None:
        loaded = load_scene_dir(args.scenes_dir, args.scene_split) if args.scenes_dir is not None else []
    agents_left_out(loaded, spec.task.agents_per_world, args.scenes_dir, "--agents")
    source = "" if args.scenes_dir is None else f" plus the {len(loaded)} scenes in {args.scenes_dir}"
    if ranks.main:
        console.print(
            f"building {spec.num_train_scenes} procedural training scenes{source} (seed {spec.seed}) ..."
        )
    scenes = training_scenes(spec.task, spec.num_train_scenes, spec.seed, loaded)
    trainer = Trainer(spec, scenes, args.out, checkpoint=resume, device=args.device)
    if not ranks.main:  # rank 0 reports for every rank
        trainer.run()
        return trainer
    if trainer.iteration:
        console.print(f"resuming {args.out} at iteration {trainer.iteration}/{spec.iterations}")
    with progress_bar() as bar:
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
        trainer.history, Path(args.out) / "learning_curve.png", title=f"train drive ({spec.engine.tier})"
    )
    return trainer


# ------------------------------------------------------------------------------------------- eval


@dataclass(frozen=True, kw_only=True)
class EvalArgs:
    """Arguments of ``eval drive`` of a checkpoint: its policy on ``episodes`` held-out scenes, in
    ``worlds`` parallel worlds (procedural ones from ``seed``'s evaluation range, or the first
    ``episodes`` of ``scenes_dir``'s ``scene_split``), the environment and the policy on ``device``;
    ``html_worlds`` > 0: also ``episodes.html``, the replay of the first ``html_worlds`` scenes (at
    most :data:`HTML_WORLDS`; one more rollout of those scenes, recorded step by step)."""

    checkpoint: Path
    out: Path
    engine: EngineSpec = field(default_factory=EngineSpec)
    device: str = "cpu"
    episodes: int = 100
    seed: int = 0
    worlds: int = 64
    scenes_dir: Path | None = None
    scene_split: str = "all"
    html_worlds: int = 0
    control: str = "all"
    """Who the policy drives (``evaluation.control``): ``all``, ``sdc`` or ``tracks-to-predict``."""
    others: str = "log"
    """What the other objects do (``evaluation.control``): ``log`` (replay) or ``idm`` (vehicles react)."""


def evaluate(args: EvalArgs) -> dict[str, Any]:
    """Evaluate a checkpoint; writes ``out/metrics.json``, ``metrics.md`` and a bar chart. A scene's
    agents beyond the checkpoint's K replay their logs (``metrics["agents"]`` counts what was
    controlled, replayed and left out, and why). On scenes from driving logs (``scenes_dir``), the
    logged drivers are run on the same scenes and engine and their figures written beside the
    policy's (``metrics["human_baseline"]``, ``metrics.md``)."""
    if args.episodes < 1:
        raise UserError(f"--episodes must be a positive integer, got {args.episodes}")
    if not 0 <= args.html_worlds <= HTML_WORLDS:
        raise UserError(f"--html-worlds must be between 0 and {HTML_WORLDS}, got {args.html_worlds}")
    engine, tier = args.engine, args.engine.tier
    policy = load_policy(args.checkpoint)
    if args.device != "cpu":  # the actor where the observations are (it loads on the CPU)
        policy.actor.to(args.device)
    task, others = with_others(policy.task_cfg, args.others)
    check_policy_rate(task, engine.physics_hz)
    if args.scenes_dir is None:
        console.print(f"building {args.episodes} held-out procedural scenes (seed {args.seed}) ...")
    scenes = eval_scenes(
        args.episodes, task.agents_per_world, args.seed, args.scenes_dir, signal_cycle(task), args.scene_split
    )
    scenes, control = restrict_control(scenes, args.control, args.scenes_dir)
    k = task.agents_per_world
    left_out = agents_left_out(scenes, k, args.scenes_dir, "the checkpoint's agents per world")
    fitted = [replay_beyond(sc, k) for sc in scenes]
    t0 = time.perf_counter()
    with progress_bar() as bar:
        job = bar.add_task(f"eval drive ({tier})", total=len(scenes), info="")
        metrics, _ = evaluate_policy(
            policy.act,
            task,
            fitted,
            engine=engine,
            num_worlds=args.worlds,
            seed=args.seed,
            progress=lambda done, total: bar.update(job, completed=done),
            device=args.device,
        )
    metrics.update(
        {
            **engine_record(engine),
            "device": args.device,
            "checkpoint": str(args.checkpoint),
            "trained_on": policy.meta.get("engine"),
            "trained_iterations": policy.meta.get("iteration"),
            "seed": args.seed,
            "scene_split": scene_source(args.scenes_dir, args.scene_split, procedural="eval"),
            "agents_per_world": task.agents_per_world,
            "agents_left_out": left_out,
            "agents": agent_counts(scenes, k),
            "control": control,
            "others": others,
            "wall_s": time.perf_counter() - t0,
        }
    )
    if args.scenes_dir is not None and any(sc.log is not None for sc in scenes):
        console.print(f"running the scenes' logged drivers on {tier} (human baseline) ...")
        metrics["human_baseline"] = human_baseline(
            task, fitted, engine=engine, num_worlds=args.worlds, seed=args.seed, device=args.device
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "metrics.json", metrics)
    write_figures(args.out / "metrics.md", metrics, metrics.get("human_baseline"), f"policy ({tier})")
    plot_metric_bars(
        {k: metrics[k] for k in METRIC_KEYS},
        {k: tuple(metrics[f"{k}_ci95"]) for k in METRIC_KEYS},
        args.out / "metrics.png",
        title=f"{metrics['episodes']} agent-episodes on {len(scenes)} scenes ({tier})",
    )
    if args.html_worlds:
        shown = fitted[: args.html_worlds]
        console.print(f"recording {len(shown)} scenes for episodes.html ...")
        records = record_episodes(policy.act, task, shown, engine=engine, seed=args.seed, device=args.device)
        baseline = None
        if any(sc.log is not None for sc in shown):
            baseline = _baseline_records(task, shown, engine, args.seed, args.device)
        info = {"policy": str(args.checkpoint), "engine": tier}
        write_episodes(records, args.out / "episodes.gif", ("html",), baseline, info)
    return metrics


@dataclass(frozen=True, kw_only=True)
class ExpertEvalArgs:
    """Arguments of ``eval drive --policy expert``: the logged drivers of the first ``episodes``
    scenes of ``scenes_dir`` (its ``scene_split``), ``agents`` per world (``None``: the most any
    scene controls, so that none is left out; ``"auto"``: chosen from the scenes' agent counts);
    ``device`` as for :class:`TrainArgs`."""

    scenes_dir: Path
    out: Path
    engine: EngineSpec = field(default_factory=EngineSpec)
    device: str = "cpu"
    episodes: int = 100
    agents: int | str | None = None
    scene_split: str = "all"
    control: str = "all"
    """Which logged drivers drive (``evaluation.control``); the others replay their logs."""
    others: str = "log"
    """What the other objects do (``evaluation.control``): ``log`` (replay) or ``idm`` (vehicles react)."""
    policy: str = EXPERT
    """Who drives: the logged drivers (``expert``) or a rule-based driver of
    :data:`~scenefactory.evaluation.rollout.RULE_DRIVERS` (``constant-velocity``, ``idm``; then the
    logged drivers run beside it, as beside a checkpoint)."""


def evaluate_expert(args: ExpertEvalArgs) -> dict[str, Any]:
    """Drive the scenes' logged agents closed loop (the human baseline, ``evaluation.human``);
    writes ``metrics.json`` (goal reach, collision, off-road, ..., ``log_divergence_m``: how far the
    engine's drivers drift from their logs, and ``agents``: what was controlled, replayed and left
    out, and why) and ``metrics.md``. A K smaller than some scene's agents is said, and the agents
    beyond it replay."""
    scenes = load_scene_dir(args.scenes_dir, args.scene_split, args.episodes)
    scenes, control = restrict_control(scenes, args.control, args.scenes_dir)
    if not any(sc.log is not None for sc in scenes):
        raise UserError(
            f"no scene in {args.scenes_dir} carries a driving log: nothing for --policy expert to replay"
        )
    most = max(1, max(sc.num_agents for sc in scenes))
    k = resolve_agents(args.agents, scenes, args.scenes_dir) if args.agents is not None else most
    agents_left_out(scenes, k, args.scenes_dir, "--agents")
    task, others = with_others(DrivingTaskConfig(num_worlds=len(scenes), agents_per_world=k), args.others)
    fitted = [replay_beyond(sc, k) for sc in scenes]
    if args.policy not in (EXPERT, *RULE_DRIVERS):
        raise UserError(f"--policy must be one of {', '.join((EXPERT, *RULE_DRIVERS))}, got {args.policy!r}")
    human = human_baseline(task, fitted, engine=args.engine, device=args.device)
    if args.policy == EXPERT:
        metrics = human
    else:
        metrics, _ = evaluate_policy(args.policy, task, fitted, engine=args.engine, device=args.device)
        metrics["policy"] = args.policy
        metrics["human_baseline"] = human
    counts = agent_counts(scenes, k)
    record = engine_record(args.engine)
    metrics.update(
        {
            "engine": record["engine"],
            "physics_hz": record["physics_hz"],
            "scene_split": scene_source(args.scenes_dir, args.scene_split),
            "agents_per_world": k,
            "agents": counts,
            "control": control,
            "others": others,
        }
    )
    console.print(describe_counts(counts))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "metrics.json", metrics)
    if args.policy == EXPERT:
        write_figures(args.out / "metrics.md", None, metrics, args.engine.tier)
    else:
        write_figures(args.out / "metrics.md", metrics, human, f"{args.policy} ({args.engine.tier})")
    return metrics


# ----------------------------------------------------------------------------------------- render


@dataclass(frozen=True, kw_only=True)
class RenderArgs:
    """Arguments of ``render drive``: a GIF (``out``) of ``panels`` scenes side by side, driven by
    the policy of ``checkpoint`` (on held-out scenes from ``seed`` + :data:`RENDER_SEED_OFFSET`, or
    those of ``scenes_dir``), or with no checkpoint by the logged drivers of ``scenes_dir``'s scenes
    (``agents`` per world, or ``"auto"``); ``device`` as for :class:`TrainArgs`. ``formats``: any of
    :data:`RENDER_FORMATS`, each written to ``out`` with its suffix (``.gif``, ``.html``) from the
    same recording; a GIF shows the first :data:`GIF_PANELS` scenes, the HTML replay up to
    :data:`HTML_WORLDS` (with the logged drivers' run beside a policy's on scenes with logs)."""

    out: Path
    engine: EngineSpec = field(default_factory=EngineSpec)
    device: str = "cpu"
    checkpoint: Path | None = None
    seed: int = 0
    panels: int = 4
    scenes_dir: Path | None = None
    agents: int | str = 8
    scene_split: str = "all"
    formats: tuple[str, ...] = ("gif",)


def render(args: RenderArgs) -> list[Path]:
    """Top-down GIF and/or HTML replay of the policy (or the logged drivers) on the scenes, from one
    recording; returns the paths written."""
    bad = [f for f in args.formats if f not in RENDER_FORMATS]
    if bad or not args.formats:
        raise UserError(f"--format must be one or more of {', '.join(RENDER_FORMATS)}, got {args.formats}")
    most = GIF_PANELS if tuple(args.formats) == ("gif",) else HTML_WORLDS
    if not 1 <= args.panels <= most:
        raise UserError(
            f"--panels must be between 1 and {most} for --format {'+'.join(args.formats)}"
            f" (a GIF shows up to {GIF_PANELS}, an HTML replay up to {HTML_WORLDS}), got {args.panels}"
        )
    if args.out.suffix.lower() not in (".gif", ".html"):
        raise UserError(f"--out must name a .gif or .html file, got '{args.out}'")
    baseline: list[EpisodeRecord | None] | None = None
    if args.checkpoint is None:
        if args.scenes_dir is None:
            raise UserError("render drive needs --checkpoint PATH, or --policy expert with --scenes DIR")
        scenes = eval_scenes(args.panels, 1, args.seed, args.scenes_dir, scene_split=args.scene_split)
        k = resolve_agents(args.agents, scenes, args.scenes_dir)
        task = DrivingTaskConfig(agents_per_world=k)
        agents_left_out(scenes, k, args.scenes_dir, "--agents")
        scenes = [replay_beyond(sc, k) for sc in scenes]  # as the pool plays them: drawn as logged
        records = record_episodes(
            EXPERT, task, scenes, engine=args.engine, seed=args.seed, device=args.device
        )
    else:
        policy = load_policy(args.checkpoint)
        if args.device != "cpu":  # the actor where the observations are (it loads on the CPU)
            policy.actor.to(args.device)
        check_policy_rate(policy.task_cfg, args.engine.physics_hz)
        k = policy.task_cfg.agents_per_world
        first = args.seed + RENDER_SEED_OFFSET
        cycle = signal_cycle(policy.task_cfg)
        scenes = eval_scenes(args.panels, k, first, args.scenes_dir, cycle, args.scene_split)
        agents_left_out(scenes, k, args.scenes_dir, "the checkpoint's agents per world")
        scenes = [replay_beyond(sc, k) for sc in scenes]  # as the pool plays them: drawn as logged
        records = record_episodes(
            policy.act, policy.task_cfg, scenes, engine=args.engine, seed=args.seed, device=args.device
        )
        if "html" in args.formats and any(sc.log is not None for sc in scenes):
            baseline = _baseline_records(policy.task_cfg, scenes, args.engine, args.seed, args.device)
    records = [replace(r, title=f"{r.title} ({args.engine.tier})") for r in records]
    who = "logged drivers (expert)" if args.checkpoint is None else f"policy {args.checkpoint}"
    return write_episodes(
        records, args.out, args.formats, baseline, {"policy": who, "engine": args.engine.tier}
    )


def _baseline_records(
    task: DrivingTaskConfig, scenes: list[Scene], engine: EngineSpec, seed: int, device: str
) -> list[EpisodeRecord | None]:
    """The logged drivers' run of each scene (``None`` for a scene without a log), for the replay."""
    records = record_episodes(EXPERT, task, scenes, engine=engine, seed=seed, device=device)
    return [r if sc.log is not None else None for r, sc in zip(records, scenes, strict=True)]


def write_episodes(
    records: list[EpisodeRecord],
    out: Path,
    formats: tuple[str, ...],
    baseline: list[EpisodeRecord | None] | None = None,
    info: dict[str, Any] | None = None,
) -> list[Path]:
    """Write one recording as ``out`` with each format's suffix: the GIF of its first
    :data:`GIF_PANELS` episodes, the HTML replay of all (with ``baseline`` ghosts and ``info``)."""
    paths = []
    if "gif" in formats:
        paths.append(render_episodes_gif(records[:GIF_PANELS], out.with_suffix(".gif")))
    if "html" in formats:
        title = f"scenefactory replay: {out.with_suffix('').name}"
        paths.append(write_html_replay(records, out.with_suffix(".html"), baseline, title=title, info=info))
    return paths


# ------------------------------------------------------------------------------------------ bench


@dataclass(frozen=True, kw_only=True)
class BenchArgs:
    """Arguments of ``bench drive``: ``worlds`` x ``agents`` agents (or ``"auto"`` from the
    ``scenes_dir`` folder) stepped ``steps`` times after ``warmup`` untimed steps, at ``policy_hz``,
    on :data:`BENCH_SCENES` procedural scenes from ``seed`` or on the scenes of ``scenes_dir``;
    ``baseline``: the non-vectorized reference; ``device`` as for :class:`TrainArgs`. The result is
    written to the file ``out``."""

    out: Path
    engine: EngineSpec = field(default_factory=EngineSpec)
    device: str = "cpu"
    worlds: int = 256
    agents: int | str = 16
    baseline: bool = False
    steps: int = 30
    warmup: int = 5
    seed: int = 0
    policy_hz: float = 10.0
    scenes_dir: Path | None = None
    scene_split: str = "all"
    min_active_fraction: float = 0.0
    actions: str = "policy"
    """``policy`` (the batched actor's inference in the loop) or ``random`` (the simulator alone)."""


def bench(args: BenchArgs) -> dict[str, Any]:
    """Run the CASPS benchmark and write its JSON; returns it."""
    scenes = load_scene_dir(args.scenes_dir, args.scene_split) if args.scenes_dir is not None else None
    auto = args.agents == AUTO
    k = resolve_agents(args.agents, scenes or [], args.scenes_dir)
    for name, v in (("worlds", args.worlds), ("agents", k), ("steps", args.steps)):
        if v < 1:
            raise UserError(f"--{name} must be a positive integer, got {v}")
    if scenes is not None:
        logs = {sc.log.dt_s for sc in scenes if sc.log is not None}
        logs |= {sc.replay.dt_s for sc in scenes if sc.replay is not None}
        if any(abs(dt * args.policy_hz - 1.0) > 1e-6 for dt in logs):
            hz = ", ".join(f"{1 / dt:g}" for dt in sorted(logs))
            raise UserError(
                f"--policy-hz {args.policy_hz:g}: the logs of the scenes in {args.scenes_dir} run at {hz} Hz;"
                " expected the same policy rate"
            )
        agents_left_out(scenes, k, args.scenes_dir, "--agents")
    where = "procedural scenes" if scenes is None else f"the {len(scenes)} scenes of {args.scenes_dir}"
    console.print(
        f"bench drive ({args.engine.tier}{', baseline' if args.baseline else ''}): {args.worlds} worlds x "
        f"{k} agents on {where}, timing {args.steps} steps after {args.warmup} warm-up steps ..."
    )
    result = bench_drive(
        engine=args.engine,
        worlds=args.worlds,
        agents=k,
        baseline=args.baseline,
        steps=args.steps,
        warmup=args.warmup,
        seed=args.seed,
        num_scenes=BENCH_SCENES,
        policy_hz=args.policy_hz,
        scenes=scenes,
        scene_source=scene_source(args.scenes_dir, args.scene_split),
        min_active_fraction=args.min_active_fraction,
        device=args.device,
        actions=args.actions,
    )
    result["agents_auto"] = auto
    if auto:
        result["agents_auto_min_fill"] = DEFAULT_MIN_FILL
    write_json(args.out, result)
    return result
