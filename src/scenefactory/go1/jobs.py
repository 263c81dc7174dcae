"""Go1 jobs behind the CLI: train (its recipe in ``go1.recipe``; a named recipe's chain of stages
is ``go1.chain``), evaluate, render, bench, export and deploy.

Each takes one frozen dataclass of its arguments (:class:`Go1TrainArgs`, :class:`Go1EvalArgs`,
...), which the CLI builds from its flags (``scenefactory.cli.go1``); when a checkpoint is
``None``, eval, render, export and deploy use the policy shipped in the package
(:data:`SHIPPED_POLICY`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from scenefactory.checkpoint import load_checkpoint, pack_stage, save_checkpoint, to_plain
from scenefactory.engines.mjwarp import PhysicsBackend
from scenefactory.errors import UserError
from scenefactory.go1 import evaluation as ev
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.deploy import check
from scenefactory.go1.deploy.check import FLOOR, TOLERANCE, sim2sim
from scenefactory.go1.deploy.export import export_go1
from scenefactory.go1.deploy.robot import SIM2SIM, TRAINING_SIM
from scenefactory.go1.deploy.runner import OnnxPolicyRunner
from scenefactory.go1.env import Go1Env
from scenefactory.go1.model_based import ModelBasedController
from scenefactory.go1.recipe import RecipeOptions, train_spec
from scenefactory.go1.render import TileWalk, render_go1
from scenefactory.go1.terrain_eval import terrain_eval_config, terrain_report, terrain_summary
from scenefactory.go1.train import Go1Policy, Go1Trainer, load_go1_policy
from scenefactory.go1.whole_body_eval import whole_body_report, whole_body_summary
from scenefactory.io import atomic_write_bytes, atomic_write_text, write_json
from scenefactory.rl.checkpoints import resume_path

SHIPPED_POLICY = Path(__file__).parent / "policies" / "go1_whole_body.pt"
"""The trained policy shipped with the package (its model card on the docs site, and the recipe
``train go1 --recipe whole-body``, say how it was made): the default of ``--checkpoint``."""
SHIPPED_POLICIES = {
    "whole-body": SHIPPED_POLICY,
    "rough": SHIPPED_POLICY.parent / "go1_rough.pt",
}
"""Name → the policies shipped with the package (``--checkpoint NAME`` when no such file exists):
``rough`` is the blind rough-terrain policy (``train go1 --recipe rough``, packed in float16)."""


@dataclass(frozen=True, kw_only=True)
class Go1TrainArgs:
    """Arguments of ``train go1``: ``envs`` robots in parallel, ``iterations`` PPO iterations (or
    distillation rounds, :attr:`RecipeOptions.teacher`), the ``recipe`` beyond size and seed, the
    worlds on ``physics`` (MuJoCo C, or MuJoCo Warp on a device; the task and PPO stay on the CPU)."""

    out: Path
    envs: int = 1024
    iterations: int = 1500
    seed: int = 0
    recipe: RecipeOptions = field(default_factory=RecipeOptions)
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)


def terrain_progress(row: dict[str, Any]) -> str:
    """The progress line's terrain part: the mean level and the kind lowest on the curriculum."""
    if "terrain_level" not in row:
        return ""
    kinds = {k.removeprefix("terrain_level_"): v for k, v in row.items() if k.startswith("terrain_level_")}
    lowest = min(kinds, key=kinds.__getitem__) if len(kinds) > 1 else None
    return f"  terrain level {row['terrain_level']:.2f}" + (
        f" (lowest {lowest} {kinds[lowest]:.2f})" if lowest is not None else ""
    )


def train(args: Go1TrainArgs) -> Go1Trainer:
    """Train (or resume) a Go1 policy into ``args.out``; one progress line per iteration."""
    iterations = args.iterations
    resuming = resume_path(args.out) is not None
    spec = train_spec(args.envs, iterations, args.seed, args.recipe, resuming=resuming)
    trainer = Go1Trainer(replace(spec, task=replace(spec.task, physics=args.physics)), args.out)
    if trainer.start_note is not None and trainer.ranks.main:
        print(f"train go1: {trainer.start_note}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    first = trainer.iteration

    def progress(row: dict[str, Any]) -> None:
        it = row["iteration"]
        done = it - first
        eta = (time.perf_counter() - start) / max(1, done) * (iterations - it)
        print(
            f"it {it}/{iterations}  return {row['mean_return']:.2f}  episode {row['mean_episode_s']:.1f}s  "
            f"falls {row['fall_fraction']:.2f}  track lin {row.get('term_track_lin_vel_xy', 0):.2f} "
            f"yaw {row.get('term_track_ang_vel_z', 0):.2f}  curriculum {row['curriculum_lin_fraction']:.2f}/"
            f"{row['curriculum_yaw_fraction']:.2f}  {row['steps_per_s']:.0f} steps/s  eta {eta / 60:.1f} min"
            + (f"  behaviour loss {row['loss_behavior']:.4f}" if "loss_behavior" in row else "")
            + "".join(
                f"  {k} {row[f'term_track_{k}']:.2f}"
                for k in ("base_height", "body_pitch", "body_roll")
                if f"term_track_{k}" in row
            )
            + terrain_progress(row),
            file=sys.stderr,
            flush=True,
        )

    trainer.run(progress if trainer.ranks.main else None)  # torchrun: rank 0 reports
    return trainer


def resolve_checkpoint(checkpoint: Path | None) -> Path:
    """``checkpoint``; a shipped policy's name (:data:`SHIPPED_POLICIES`) when no file or folder of
    that name exists; the shipped policy when it is ``None``."""
    if checkpoint is not None:
        if not checkpoint.exists() and str(checkpoint) in SHIPPED_POLICIES:
            return SHIPPED_POLICIES[str(checkpoint)]
        return checkpoint
    if not SHIPPED_POLICY.is_file():
        raise UserError(f"no --checkpoint given and the shipped policy {SHIPPED_POLICY} is missing")
    return SHIPPED_POLICY


TABLES = ("velocity", "push", "whole-body", "terrain")
"""The tables ``eval go1`` can run."""


def _eval_world(fixed: bool, tables: set[str], on_terrain: bool, task: Go1TaskConfig) -> str:
    """The report's world line: which ground each table ran on (the flat floor for the velocity,
    whole-body and push tables; the terrain table's height field), and the shared conditions."""
    start = "nominal robot" if fixed else "episodes that differ (below)"
    grounds = []
    flat = [t for t in TABLES if t in tables and t != "terrain"]
    if flat:
        floor = "flat floor (mu 1.0)" if fixed else "flat floor"
        grounds.append(f"{floor} for the {'/'.join(flat)} table{'s' if len(flat) > 1 else ''}")
    if on_terrain:
        spacing = task.terrain.horizontal_scale_m
        grounds.append(f"terrain height field every {spacing:g} m for the terrain table")
    return f"{start}, {', '.join(grounds)}, no noise, no random pushes; mean actions"


@dataclass(frozen=True, kw_only=True)
class Go1EvalArgs:
    """Arguments of ``eval go1``: the policy of ``checkpoint`` (``None``: the shipped one),
    ``episodes`` per table row, ``quick`` (short episodes, a smoke test), and one action latency
    [ms] and joint damping/friction scale in every robot (0 and 1: the nominal robot); ``terrain``
    (``"rough"`` or a tile kind) adds the terrain table of ``levels`` (``None``: every level)."""

    out: Path
    checkpoint: Path | None = None
    episodes: int = 64
    seed: int = 0
    quick: bool = False
    latency_ms: float = 0.0
    joint_scale: float = 1.0
    terrain: str | None = None
    levels: tuple[int, ...] | None = None
    controller: str = "policy"
    """``"policy"`` or ``"model-based"`` (the trot baseline of ``go1.model_based``; no checkpoint)."""
    fixed_episodes: bool = False
    """The earlier protocol (``evaluation.EvalConfig.fixed_episodes``): nominal robot, exact commands."""
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)
    """The evaluation's worlds: MuJoCo C, or MuJoCo Warp on a device (whatever the policy trained on)."""
    tables: tuple[str, ...] = TABLES
    """Which of :data:`TABLES` to run (the whole-body table needs a whole-body policy, the terrain
    table ``terrain``)."""
    terrain_spacing_m: float | None = None
    """The terrain table's height-field spacing (``None``: the policy's own, as it trained)."""


CONTROLLERS = ("policy", "model-based")
"""What ``eval go1 --controller`` measures."""


def eval_controller(
    controller: str, checkpoint: Path | None
) -> tuple[Path | None, Go1Policy | ModelBasedController]:
    """The checkpoint (``None`` for the baseline) and controller ``eval go1`` measures: the policy
    of ``checkpoint`` (``None``: the shipped one), or the model-based trot on the shipped policy's
    task (so that both run in the same worlds with the same commands; the default task without it)."""
    if controller not in CONTROLLERS:
        raise UserError(f"eval go1 --controller {controller}: expected one of {', '.join(CONTROLLERS)}")
    if controller == "model-based":
        if checkpoint is not None:
            raise UserError("eval go1 --controller model-based takes no --checkpoint (it has no weights)")
        task = load_go1_policy(SHIPPED_POLICY).task_cfg if SHIPPED_POLICY.is_file() else Go1TaskConfig()
        return None, ModelBasedController(task)
    path = resolve_checkpoint(checkpoint)
    return path, load_go1_policy(path, privileged=True)


def on_physics(
    policy: Go1Policy | ModelBasedController, physics: PhysicsBackend
) -> Go1Policy | ModelBasedController:
    """``policy`` whose task (from which evaluation and rendering build their worlds) runs on
    ``physics`` instead of what its checkpoint recorded."""
    return _on_task(policy, replace(policy.task_cfg, physics=physics))


def _on_task(
    policy: Go1Policy | ModelBasedController, task: Go1TaskConfig
) -> Go1Policy | ModelBasedController:
    """``policy`` acting on ``task`` (a copy of a learned policy; the baseline controller, in place)."""
    if isinstance(policy, Go1Policy):
        return replace(policy, task_cfg=task)
    policy.task_cfg = task
    return policy


def on_terrain_spacing(
    policy: Go1Policy | ModelBasedController, spacing_m: float | None
) -> Go1Policy | ModelBasedController:
    """``policy`` whose terrain (the one the terrain table builds its tiles from) samples its height
    field every ``spacing_m`` [m] (``None``: unchanged); a UserError names a spacing the tiles refuse."""
    if spacing_m is None:
        return policy
    try:
        terrain = replace(policy.task_cfg.terrain, horizontal_scale_m=spacing_m)
    except ValueError as exc:
        raise UserError(f"eval go1 --terrain-spacing: {exc}") from exc
    return _on_task(policy, replace(policy.task_cfg, terrain=terrain))


def evaluate(args: Go1EvalArgs) -> dict[str, Any]:
    """Tracking and push-recovery tables of a policy → ``out/metrics.json`` and ``out/report.md``;
    on the nominal robot, or with one action latency and joint damping/friction scale everywhere
    (a privileged teacher is given its world's parameters)."""
    episodes, seed, out = args.episodes, args.seed, args.out
    latency_ms, joint_scale = args.latency_ms, args.joint_scale
    path, policy = eval_controller(args.controller, args.checkpoint)
    policy = on_physics(policy, args.physics)
    if args.terrain_spacing_m is not None and (args.terrain is None or "terrain" not in args.tables):
        raise UserError(
            "eval go1 --terrain-spacing: the terrain table is not asked for (--terrain, --tables)"
        )
    policy = on_terrain_spacing(policy, args.terrain_spacing_m)
    try:
        cfg = ev.EvalConfig(
            episodes=episodes,
            latency_ms=latency_ms,
            joint_scale=joint_scale,
            fixed_episodes=args.fixed_episodes,
        )
        ev.condition(policy.task_cfg, cfg)
    except ValueError as exc:
        raise UserError(f"eval go1 --latency-ms {latency_ms:g} --joint-scale {joint_scale:g}: {exc}") from exc
    if args.quick:
        cfg = ev.quick(cfg)
    tables = set(args.tables)
    if not tables or not tables <= set(TABLES):
        raise UserError(f"eval go1 --tables {' '.join(args.tables)}: expected some of {', '.join(TABLES)}")
    if "terrain" not in tables and args.levels is not None:
        raise UserError(
            f"eval go1 --level {' '.join(map(str, args.levels))}: the terrain table is not in --tables"
        )
    terrain_name = args.terrain if "terrain" in tables else None
    try:
        terrain = terrain_eval_config(terrain_name, args.levels, policy.task_cfg, episodes, args.quick)
    except ValueError as exc:
        raise UserError(f"eval go1 --terrain/--level: {exc}") from exc
    world = _eval_world(cfg.fixed_episodes, tables, terrain is not None, policy.task_cfg)
    if args.controller == "model-based":
        world += "; the model-based trot controller (go1.model_based) through the same actuator path"
    if not cfg.nominal:
        world += (
            f"; action latency {latency_ms:g} ms and joint damping/friction x{joint_scale:g} in every world"
        )
    if policy.params_dim:
        world += f"; a privileged actor, given its world's {policy.params_dim} parameters"
    t0 = time.perf_counter()
    tracking = ev.tracking_table(policy.task_cfg, policy, cfg, seed) if "velocity" in tables else []
    pushes = ev.push_table(policy.task_cfg, policy, cfg, seed) if "push" in tables else []
    whole_body = None  # None: not asked for, or a velocity-only policy
    if "whole-body" in tables:
        whole_body = ev.whole_body_rows(policy.task_cfg, policy, cfg, seed)
    summary = ev.summarize_go1(tracking, pushes)
    if whole_body is not None:
        summary.update(whole_body_summary(whole_body))
    terrain_rows = ev.terrain_rows(policy.task_cfg, policy, cfg, terrain, seed)  # None: no --terrain
    if terrain_rows is not None:
        summary.update(terrain_summary(terrain_rows))
    result = {
        "checkpoint": None if path is None else str(path),
        "controller": args.controller,
        "policy": policy.meta,
        "seed": seed,
        "tables": [t for t in TABLES if t in tables],
        "eval_config": asdict(cfg),
        "world": world,
        "episodes": ev.variation(policy.task_cfg, cfg),
        "tracking": tracking,
        "push_recovery": pushes,
        "summary": summary,
        "wall_s": time.perf_counter() - t0,
    }
    if whole_body is not None:
        result["whole_body"] = whole_body
    if terrain_rows is not None:
        result["terrain"] = terrain_rows
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "metrics.json", result)
    atomic_write_text(out / "report.md", go1_report(result))
    return result


def _ci(lo_hi: list[float]) -> str:
    return f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]"


def go1_report(result: dict[str, Any]) -> str:
    """Markdown tables of an evaluation result."""
    lines = [
        "# Go1 evaluation",
        "",
        f"Policy: `{result['checkpoint']}` ({result['policy']}); seed {result['seed']}; {result['world']}."
        if result.get("controller", "policy") == "policy"
        else f"Controller: model-based trot ({result['policy']}); seed {result['seed']}; {result['world']}.",
        *ev.variation_report(result.get("episodes")),
    ]
    if result["tracking"]:
        lines += [
            "",
            "| vx m/s | vy m/s | yaw rad/s | episodes | lin. error m/s [95% CI] | yaw error rad/s [95% CI] "
            "| achieved vx / vy / yaw | fall rate [95% CI] |",
            "|---|---|---|---|---|---|---|---|",
        ]
    for r in result["tracking"]:
        c = r["command"]
        lines.append(
            f"| {c['vx_mps']:.1f} | {c['vy_mps']:.1f} | {c['yaw_radps']:.1f} | {r['episodes']} "
            f"| {r['lin_vel_error_mps']:.3f} {_ci(r['lin_vel_error_ci95'])} "
            f"| {r['yaw_rate_error_radps']:.3f} {_ci(r['yaw_rate_error_ci95'])} "
            f"| {r['achieved_vx_mps']:.2f} / {r['achieved_vy_mps']:.2f} / {r['achieved_yaw_radps']:.2f} "
            f"| {r['fall_rate']:.3f} {_ci(r['fall_rate_ci95'])} |"
        )
    cfg = result["eval_config"]
    if result["push_recovery"]:
        lines += [
            "",
            f"Push recovery: walking at {tuple(cfg['push_command'])}, kicked at {cfg['push_at_s']} s in a "
            f"random horizontal direction; recovered = not fallen {cfg['recover_s']} s later.",
            "",
            "| push m/s | trials | recovered | recovery rate [95% CI] |",
            "|---|---|---|---|",
        ]
    for p in result["push_recovery"]:
        lines.append(
            f"| {p['push_mps']:.1f} | {p['trials']} | {p['recovered']} "
            f"| {p['recovery_rate']:.3f} {_ci(p['recovery_rate_ci95'])} |"
        )
    lines += whole_body_report(result.get("whole_body", []))
    lines += terrain_report(result.get("terrain", []))
    lines += ["", "Summary: " + ", ".join(f"{k} = {v:.3f}" for k, v in result["summary"].items()), ""]
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Go1ExportArgs:
    """Arguments of ``export go1``: the policy of ``checkpoint`` (``None``: the shipped one)."""

    out: Path
    checkpoint: Path | None = None
    half_precision: bool = False
    """Write ``policy.pt`` packed (:func:`scenefactory.checkpoint.pack_stage`: weight matrices in
    float16, LZMA-compressed) and export the ONNX from those rounded weights, so both files hold the
    same policy: a 25-frame actor's 1.34 MB becomes 0.58 MB (``benchmarks/half_precision.py``)."""


def export(args: Go1ExportArgs) -> dict[str, Path]:
    """ONNX + sidecar for deployment, and ``policy.pt`` (actor only, the shippable checkpoint),
    written first: the ONNX is exported from it as read back."""
    path = resolve_checkpoint(args.checkpoint)
    if load_go1_policy(path).task_cfg.terrain.height_scan_actor:
        raise UserError(f"{path}: its actor reads a height scan, which the ONNX runner's robot cannot give")
    small = save_actor_only(path, args.out / "policy.pt", half_precision=args.half_precision)
    paths = export_go1(load_go1_policy(small), args.out)
    paths["policy"] = small
    return paths


@dataclass(frozen=True, kw_only=True)
class Go1DeployArgs:
    """Arguments of ``deploy go1``: the folder ``policy_dir`` written by ``export go1`` (``None``:
    export the shipped policy into ``out/policy`` first), ``episodes`` runs of ``seconds`` per
    command; ``decompose`` adds the comparison against each single change of the target,
    ``delay_sweep`` against the training simulator with only an actuator delay of each of
    :data:`~scenefactory.go1.deploy.check.SWEEP_DELAYS_MS`."""

    out: Path
    policy_dir: Path | None = None
    episodes: int = 8
    seconds: float = 10.0
    seed: int = 0
    decompose: bool = False
    delay_sweep: bool = False


def deploy(args: Go1DeployArgs) -> dict[str, Any]:
    """Sim-to-sim check of an exported policy → ``out/sim2sim.json`` and ``out/report.md``."""
    episodes, seconds, seed, out = args.episodes, args.seconds, args.seed, args.out
    policy_dir = args.policy_dir
    if policy_dir is None:
        policy_dir = out / "policy"
        export(Go1ExportArgs(out=policy_dir))
    try:
        runner = OnnxPolicyRunner(policy_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    t0 = time.perf_counter()
    result = sim2sim(runner, episodes=episodes, seconds=seconds, seed=seed)
    for key, wanted, robots in (
        ("decomposition", args.decompose, check.single_changes),
        ("delay_sweep", args.delay_sweep, check.delayed),
    ):
        if wanted:
            result[key] = check.against(
                runner, result["training_sim"], robots(), episodes, seconds, settle_s=2.0, seed=seed
            )
    result.update(
        {"policy_dir": str(policy_dir), "seed": seed, "seconds": seconds, "wall_s": time.perf_counter() - t0}
    )
    result["robots"] = {"training_sim": asdict(TRAINING_SIM), "sim2sim": asdict(SIM2SIM)}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "sim2sim.json", result)
    atomic_write_text(out / "report.md", deploy_report(result))
    return result


def deploy_report(result: dict[str, Any]) -> str:
    """Markdown table of a sim-to-sim check."""
    lines = [
        "# Go1 sim-to-sim check",
        "",
        f"Policy: `{result['policy_dir']}`; {result['summary']['episodes_per_command']} runs of "
        f"{result['seconds']} s per command; seed {result['seed']}.",
        f"Sim-to-sim robot: {result['robots']['sim2sim']}",
        "",
        f"Pass: no falls and sim-to-sim error <= max({TOLERANCE} x the training simulator's, {FLOOR:.2f}) "
        "(m/s for linear commands, rad/s for pure turning).",
        "",
        "| vx | vy | yaw | metric | training sim | sim-to-sim | ratio | increase | allowed "
        "| sim-to-sim falls "
        "| pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["comparison"]:
        k = c["command"]
        lines.append(
            f"| {k['vx_mps']:.1f} | {k['vy_mps']:.1f} | {k['yaw_radps']:.1f} | {c['metric']} "
            f"| {c['training_sim']:.3f} | {c['sim2sim']:.3f} | {c['ratio']:.2f} | {c['increase']:+.3f} "
            f"| {c['allowed']:.3f} | {c['sim2sim_falls']} "
            f"| {'yes' if c['passed'] else 'NO'} |"
        )
    s = result["summary"]
    failed = ", ".join(
        f"({c['vx_mps']:g}, {c['vy_mps']:g}, {c['yaw_radps']:g})" for c in s["failed_commands"]
    )
    verdict = "passed" if s["passed"] else f"FAILED at {failed}"
    lines += ["", f"Verdict: {verdict} (max ratio {s['max_ratio']:.2f}).", ""]
    lines += [
        "Yaw-rate bias (mean signed error, rad/s) on the training sim / sim-to-sim: "
        + ", ".join(
            f"{a['command']['yaw_radps']:+.1f}: "
            f"{a['yaw_rate_bias_radps']:+.3f} / {b['yaw_rate_bias_radps']:+.3f}"
            for a, b in zip(result["training_sim"], result["sim2sim"], strict=True)
            if a["command"]["yaw_radps"] != 0
        ),
        "",
    ]
    cmds = [c["command"] for c in result["comparison"]]
    head = " | ".join(f"({c['vx_mps']:g}, {c['vy_mps']:g}, {c['yaw_radps']:g})" for c in cmds)
    if "decomposition" in result:
        lines += [
            "## One change at a time",
            "",
            "Ratio of each command's primary error to the training simulator's, with only that change "
            "of the sim-to-sim robot applied (* = fails the rule).",
            "",
            f"| change | {head} |",
            "|---|" + "---|" * len(cmds),
        ]
        for name, rows in result["decomposition"].items():
            cells = " | ".join(f"{c['ratio']:.2f}{'' if c['passed'] else '*'}" for c in rows)
            lines.append(f"| {name} | {cells} |")
        lines.append("")
    if "delay_sweep" in result:
        lines += [
            "## Actuator delay alone",
            "",
            "Each command's primary error (m/s or rad/s) on the training simulator with only an actuator "
            "delay added (the default recipe trains with latencies from U(0, 20) ms), and its ratio to "
            "no delay (* = fails the rule).",
            "",
            f"| delay | {head} |",
            "|---|" + "---|" * len(cmds),
            "| 0 ms | " + " | ".join(f"{c['training_sim']:.3f}" for c in result["comparison"]) + " |",
        ]
        for ms, rows in result["delay_sweep"].items():
            cells = " | ".join(
                f"{c['sim2sim']:.3f} ({c['ratio']:.2f}{'' if c['passed'] else '*'})" for c in rows
            )
            lines.append(f"| {ms} ms | {cells} |")
        lines.append("")
    return "\n".join(lines)


def save_actor_only(checkpoint: Path, dest: Path, *, half_precision: bool = False) -> Path:
    """A checkpoint with only what acting needs (actor weights + configs), a few hundred KB;
    ``half_precision``: packed (:func:`scenefactory.checkpoint.pack_stage`, written atomically)."""
    data = load_checkpoint(checkpoint)
    keep = (
        "format",
        "task",
        "seed",
        "iteration",
        "env_steps",
        "obs_dim",
        "task_cfg",
        "ppo_cfg",
        "actor_state_dict",
    )
    small = {k: data[k] for k in keep if k in data}
    if half_precision:
        atomic_write_bytes(dest, pack_stage(to_plain(small)))
    else:
        save_checkpoint(dest, small)
    return dest


@dataclass(frozen=True, kw_only=True)
class Go1BenchArgs:
    """Arguments of ``bench go1``: ``envs`` robots stepped ``steps`` times after a warm-up, on
    ``physics`` (MuJoCo C, or MuJoCo Warp on a device)."""

    out: Path
    envs: int = 1024
    steps: int = 50
    seed: int = 0
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)


def bench(args: Go1BenchArgs) -> dict[str, Any]:
    """Environment steps per second of the training task (random actions, no learning) →
    ``out/bench.json``."""
    envs, steps, seed, out = args.envs, args.steps, args.seed, args.out
    print(f"bench go1: {envs} robots, timing {steps} steps after a warm-up ...", file=sys.stderr)
    env = Go1Env(Go1TaskConfig(num_envs=envs, physics=args.physics), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(5):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    wall = time.perf_counter() - t0
    result = {
        "task": "go1",
        "envs": envs,
        "steps": steps,
        "physics_hz": env.cfg.physics_hz,
        "policy_hz": env.cfg.policy_hz,
        "threads": torch.get_num_threads(),
        "physics": asdict(args.physics),
        "env_steps_per_s": envs * steps / wall,
        "physics_steps_per_s": envs * steps * env.cfg.decimation / wall,
        "seed": seed,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench.json", result)
    return result


@dataclass(frozen=True, kw_only=True)
class Go1RenderArgs:
    """Arguments of ``render go1``: the policy of ``checkpoint`` (``None``: the shipped one) walking
    ``seconds`` through a command sequence, on ``physics``; or, with ``terrain`` (a tile kind) and
    ``level``, across that tile at ``speed_mps`` (``render.TileWalk``)."""

    out: Path
    checkpoint: Path | None = None
    seconds: float = 16.0
    seed: int = 0
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)
    terrain: str | None = None
    level: int | None = None
    speed_mps: float = 0.5


def render(args: Go1RenderArgs) -> Path:
    """MP4 of the policy following a command sequence (MuJoCo's offscreen renderer) →
    ``out/go1.mp4``."""
    if (args.terrain is None) != (args.level is None):
        raise UserError("render go1: --terrain KIND and --level L go together")
    try:
        tile = None if args.terrain is None else TileWalk(args.terrain, int(args.level or 0), args.speed_mps)
    except ValueError as exc:
        raise UserError(f"render go1 --terrain/--level: {exc}") from exc
    policy = load_go1_policy(resolve_checkpoint(args.checkpoint))
    policy = replace(policy, task_cfg=replace(policy.task_cfg, physics=args.physics))
    return render_go1(policy, args.out / "go1.mp4", seconds=args.seconds, seed=args.seed, tile=tile)
