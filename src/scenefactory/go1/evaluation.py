"""Evaluation of Go1 policies: a velocity-tracking table and a push-recovery table.

Both run without sensor noise or random pushes, with the policy's mean action (or any controller
with the same interface, :class:`Policy`: the model-based baseline ``go1.model_based``), each
command held for the whole episode, every row's episodes in parallel. A privileged teacher is
given the parameters of its world.

**Episodes that differ** (the default): every episode starts from its own state (heading
U(−π, π), joint angles home ± 0.1 rad, base velocity U(−0.3, 0.3) m/s in world x and y: the env's
reset, :data:`START_STATE`), holds its own command drawn in the row's cell (each non-zero component
of the row's command ± ``command_cell``, within the task's command ranges; zero components stay
zero, so standing stays standing and turning on the spot stays on the spot), and walks in its own
world: floor friction, link and trunk masses, trunk centre of mass, motor strength and PD gain
scales drawn from ``world_ranges`` (the training ranges, ``config.RandomizationConfig``). The action
latency and joint damping/friction scale are the evaluation's condition (``latency_ms``,
``joint_scale``: 0 ms and × 1 unless set), the same in every world. Intervals are over these
episodes. :func:`variation` says what varied, and ``metrics.json`` keeps it.

**Fixed episodes** (``fixed_episodes``, the protocol of every table made before): the nominal robot
(floor μ 1.0, nominal masses, motors and gains) in every world, the row's exact command; only the
start state differs. ``latency_ms`` and ``joint_scale`` set one condition in every world
(``config.fixed_conditions``). Seeded alike, a run reproduces the earlier tables number for number.

Tracking: per episode, the mean over the measuring window (after ``settle_s``) of the planar
velocity error ``‖v*_xy − v_xy‖`` [m/s] and the yaw-rate error ``|ω*_z − ω_z|`` [rad/s], body
frame; an episode that falls counts as a fall and its errors are not averaged. Rows report the
mean over episodes with a normal 95 % interval and the fall rate with a Wilson interval.

Push recovery: robots walk at ``push_command`` and, at ``push_at_s``, get a base velocity kick of
the row's magnitude in a random horizontal direction; a trial recovers when the robot has not
fallen ``recover_s`` later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import torch

from scenefactory.go1.config import (
    Go1TaskConfig,
    RandomizationConfig,
    fixed_conditions,
    nominal,
)
from scenefactory.go1.env import Go1Env
from scenefactory.go1.terrain_eval import TerrainEvalConfig, terrain_table
from scenefactory.go1.whole_body_eval import WholeBodyEvalConfig, whole_body_table
from scenefactory.stats import mean_interval, wilson_interval


class Policy(Protocol):
    """What evaluation needs of a Go1 policy (:class:`~scenefactory.go1.train.Go1Policy`)."""

    @property
    def params_dim(self) -> int:
        """Randomized parameters the actor also reads (a privileged teacher), else 0."""
        ...

    def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
        """Actor observations (N, H·45) (and parameters (N, ``params_dim``)) → mean actions (N, 12)."""
        ...

    def reset(self, done: torch.Tensor | None = None) -> None:
        """Forget the memory of robots where ``done`` (N,) is true, or of all (``None``)."""
        ...


TRACKING_COMMANDS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.0),
    (0.5, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (1.5, 0.0, 0.0),
    (2.0, 0.0, 0.0),
    (-1.0, 0.0, 0.0),
    (0.0, 0.5, 0.0),
    (0.0, 0.0, 0.9),
    (0.0, 0.0, -0.9),
    (0.0, 0.0, 1.8),
    (0.0, 0.0, -1.8),
    (1.0, 0.0, 0.9),
)
"""(vx m/s, vy m/s, yaw rate rad/s) rows of the tracking table."""

PUSH_MAGNITUDES_MPS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)

START_STATE = {
    "heading_rad": [-math.pi, math.pi],
    "joint_offset_rad": [-0.1, 0.1],
    "base_velocity_xy_mps": [-0.3, 0.3],
}
"""The start state every episode draws (``Go1Env.reset``; both protocols): heading, each joint's
offset from the home pose, and the base's world-frame x and y velocity, uniform in these ranges."""


@dataclass(frozen=True)
class EvalConfig:
    """Sizes and timings of a Go1 evaluation."""

    episodes: int = 64
    episode_s: float = 10.0
    settle_s: float = 2.0
    push_command: tuple[float, float, float] = (0.5, 0.0, 0.0)
    push_at_s: float = 2.0
    recover_s: float = 3.0
    commands: tuple[tuple[float, float, float], ...] = TRACKING_COMMANDS
    push_magnitudes_mps: tuple[float, ...] = PUSH_MAGNITUDES_MPS
    latency_ms: float = 0.0
    """Action latency in every world [ms]: whole physics steps, at most one policy period."""
    joint_scale: float = 1.0
    """Joint damping and dry friction × this in every world."""
    fixed_episodes: bool = False
    """The earlier protocol: the nominal robot and each row's exact command (module docstring)."""
    command_cell: tuple[float, float, float] = (0.1, 0.1, 0.1)
    """Half-widths of a row's command cell: vx, vy [m/s], yaw rate [rad/s] (episodes that differ)."""
    world_ranges: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Ranges of the world each episode draws (episodes that differ; its latency and joint
    damping/friction ranges are replaced by the condition, ``latency_ms`` and ``joint_scale``)."""

    def __post_init__(self) -> None:
        """Validate the condition (the latency is checked against the task's rates in the env)."""
        if not self.latency_ms >= 0 or not self.joint_scale >= 0:
            raise ValueError(
                f"latency_ms and joint_scale must be >= 0, got {self.latency_ms} and {self.joint_scale}"
            )
        if len(self.command_cell) != 3 or not all(w >= 0 for w in self.command_cell):
            raise ValueError(f"command_cell must be three half-widths >= 0, got {self.command_cell}")

    @property
    def nominal(self) -> bool:
        """Whether this is the nominal robot (no latency, joints as modelled)."""
        return self.latency_ms == 0.0 and self.joint_scale == 1.0


def quick(cfg: EvalConfig) -> EvalConfig:
    """A smoke-test size of ``cfg``: few, short episodes."""
    return replace(
        cfg, episodes=min(cfg.episodes, 4), episode_s=2.0, settle_s=0.5, push_at_s=0.5, recover_s=1.0
    )


def condition(task: Go1TaskConfig, cond: EvalConfig) -> RandomizationConfig | None:
    """The fixed condition of ``cond`` for ``task``'s robots (``None``: the nominal robot); a
    ValueError names a latency that is not a whole number of physics steps within one policy period."""
    if cond.nominal:
        return None
    steps = cond.latency_ms / 1000.0 * task.physics_hz
    if abs(steps - round(steps)) > 1e-6 or round(steps) > task.decimation:
        raise ValueError(
            f"latency_ms {cond.latency_ms}: must be a whole number of {1000.0 / task.physics_hz:g} ms "
            f"physics steps and at most one policy period ({1000.0 / task.policy_hz:g} ms)"
        )
    return fixed_conditions(cond.latency_ms / 1000.0, cond.joint_scale)


def episode_world(task: Go1TaskConfig, cond: EvalConfig) -> RandomizationConfig | None:
    """The worlds of ``cond``'s episodes: its fixed condition (``None``: the nominal robot) with
    ``fixed_episodes``, else ``world_ranges`` with the condition's latency and joint scale as
    single points (a ValueError names a latency :func:`condition` refuses)."""
    fixed = condition(task, cond)
    if cond.fixed_episodes:
        return fixed
    lat, scale = cond.latency_ms / 1000.0, cond.joint_scale
    return replace(cond.world_ranges, latency_s=(lat, lat), joint_friction_scale=(scale, scale))


def _eval_env(
    task: Go1TaskConfig, n: int, seconds: float, seed: int, cond: EvalConfig, vary: bool = False
) -> Go1Env:
    """``n`` robots for ``seconds`` in ``cond``'s fixed condition, or (``vary``) in the worlds of
    :func:`episode_world`."""
    cfg = replace(nominal(task), num_envs=n, episode_length_s=seconds + 1.0)
    cfg = replace(cfg, terrain=replace(task.terrain, kind="flat"))  # a terrain policy too: flat ground
    world = episode_world(task, cond) if vary else condition(task, cond)
    return Go1Env(replace(cfg, randomization=world), seed=seed)


def command_cells(task: Go1TaskConfig, centres: np.ndarray, cond: EvalConfig) -> np.ndarray:
    """Per row of ``centres`` (C, 3), the (C, 3, 2) low and high bounds of its command cell: each
    non-zero component ± its ``command_cell`` half-width within the task's command range, zero
    components (and every component with ``fixed_episodes``) a single point."""
    c = task.commands
    ranges = np.array([c.vx_mps, c.vy_mps, c.yaw_radps], dtype=np.float64)  # (3, 2)
    width = np.zeros(3) if cond.fixed_episodes else np.asarray(cond.command_cell, dtype=np.float64)
    half = np.where(centres != 0.0, width, 0.0)
    lo = np.maximum(centres - half, np.minimum(centres, ranges[:, 0]))
    hi = np.minimum(centres + half, np.maximum(centres, ranges[:, 1]))
    return np.stack([lo, hi], axis=-1)


def draw_commands(
    task: Go1TaskConfig, centres: np.ndarray, cond: EvalConfig, episodes: int, seed: int
) -> np.ndarray:
    """(C·E, 3) the held command of every episode, row by row: uniform in the row's cell
    (:func:`command_cells`) from a generator of ``seed``; the rows' exact commands with
    ``fixed_episodes``."""
    bounds = command_cells(task, centres, cond)
    lo = np.repeat(bounds[..., 0], episodes, axis=0)
    hi = np.repeat(bounds[..., 1], episodes, axis=0)
    if cond.fixed_episodes:
        return lo
    return np.random.default_rng([seed, 2]).uniform(lo, hi)


def variation(task: Go1TaskConfig, cond: EvalConfig) -> dict[str, Any]:
    """What differs between the episodes of the tracking and push tables and within which ranges
    (for ``metrics.json`` and the report)."""
    world = episode_world(task, cond)
    return {
        "protocol": "fixed" if cond.fixed_episodes else "varied",
        "tables": ["tracking", "push_recovery"],
        "start_state": dict(START_STATE),
        "command_cell_half_width": [0.0, 0.0, 0.0] if cond.fixed_episodes else list(cond.command_cell),
        "world": None if world is None else asdict(world),
    }


def variation_report(var: dict[str, Any] | None) -> list[str]:
    """Markdown lines saying what differed between episodes (none for a result without it)."""
    if var is None:
        return []
    s = var["start_state"]
    lines = [
        "",
        f"Episodes of the tracking and push tables ({var['protocol']} protocol): each starts at heading "
        f"U({s['heading_rad'][0]:.2f}, {s['heading_rad'][1]:.2f}) rad, joints home "
        f"+ U({s['joint_offset_rad'][0]:g}, {s['joint_offset_rad'][1]:g}) rad, base velocity "
        f"U({s['base_velocity_xy_mps'][0]:g}, {s['base_velocity_xy_mps'][1]:g}) m/s in x and y.",
    ]
    if var["protocol"] == "fixed":
        cond = "the nominal robot" if var["world"] is None else "one fixed condition"
        return [*lines, f"Every episode holds its row's exact command, in {cond} (floor mu 1.0)."]
    w = var["world"]
    vx, vy, yaw = var["command_cell_half_width"]

    def rng(name: str) -> str:
        lo, hi = w[name]
        return f"{lo:g}" if lo == hi else f"U({lo:g}, {hi:g})"

    lines += [
        f"Commands: each non-zero component of the row's command +- ({vx:g} m/s, {vy:g} m/s, "
        f"{yaw:g} rad/s), uniform, within the task's command ranges.",
        f"World per episode: floor friction {rng('floor_friction')}, link masses x {rng('link_mass_scale')}, "
        f"trunk mass + {rng('trunk_added_mass_kg')} kg, trunk CoM +- {w['trunk_com_offset_m']:g} m per axis, "
        f"motor strength x {rng('motor_strength')} per joint, Kp and Kd x {rng('pd_gain_scale')}, "
        f"action latency {rng('latency_s')} s, joint damping/friction x {rng('joint_friction_scale')}.",
    ]
    return lines


def _run(
    env: Go1Env,
    policy: Policy,
    steps: int,
    on_step: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roll ``steps`` policy steps; returns per-step body velocity (T, N, 3), yaw rate (T, N)
    and the step each robot first fell (N,), ``steps`` if never."""
    obs, _ = env.observations()
    vel = np.zeros((steps, env.num_envs, 3))
    yaw = np.zeros((steps, env.num_envs))
    fell_at = np.full(env.num_envs, steps)
    params = env.teacher_params(policy.params_dim)  # a privileged teacher reads its world's parameters
    policy.reset()
    for t in range(steps):
        if on_step is not None:
            on_step(t)
        res = env.step(policy.act(obs, params))
        policy.reset(res.done)
        obs = res.actor_obs
        vel[t] = res.state.lin_vel_b.numpy()
        yaw[t] = res.state.ang_vel_b[:, 2].numpy()
        newly = res.terminated.numpy() & (fell_at == steps)
        fell_at[newly] = t
    return vel, yaw, fell_at


def tracking_table(
    task: Go1TaskConfig, policy: Policy, cfg: EvalConfig, seed: int = 0
) -> list[dict[str, Any]]:
    """One row per command of ``cfg.commands`` (module docstring)."""
    e, rows = cfg.episodes, []
    centres = np.array(cfg.commands, dtype=np.float64)
    cmds = draw_commands(task, centres, cfg, e, seed)  # (C·E, 3)
    cells = command_cells(task, centres, cfg)
    env = _eval_env(task, len(cmds), cfg.episode_s, seed, cfg, vary=True)
    env.hold_commands(cmds)
    steps = round(cfg.episode_s / task.dt)
    first = round(cfg.settle_s / task.dt)
    vel, yaw, fell_at = _run(env, policy, steps)
    lin_err = np.linalg.norm(vel[first:, :, :2] - cmds[None, :, :2], axis=-1).mean(axis=0)
    yaw_err = np.abs(yaw[first:] - cmds[None, :, 2]).mean(axis=0)
    fell = fell_at < steps
    for c, cmd in enumerate(cfg.commands):
        sl = slice(c * e, (c + 1) * e)
        ok = ~fell[sl]
        lm = mean_interval(torch.from_numpy(lin_err[sl][ok]))
        ym = mean_interval(torch.from_numpy(yaw_err[sl][ok]))
        falls = int(fell[sl].sum())
        rows.append(
            {
                "command": {"vx_mps": cmd[0], "vy_mps": cmd[1], "yaw_radps": cmd[2]},
                "command_cell": {
                    k: [float(lo), float(hi)]
                    for k, (lo, hi) in zip(("vx_mps", "vy_mps", "yaw_radps"), cells[c], strict=True)
                },
                "episodes": e,
                "lin_vel_error_mps": lm[0],
                "lin_vel_error_ci95": [lm[1], lm[2]],
                "yaw_rate_error_radps": ym[0],
                "yaw_rate_error_ci95": [ym[1], ym[2]],
                "achieved_vx_mps": float(vel[first:, sl, 0][:, ok].mean()) if ok.any() else math.nan,
                "achieved_vy_mps": float(vel[first:, sl, 1][:, ok].mean()) if ok.any() else math.nan,
                "achieved_yaw_radps": float(yaw[first:, sl][:, ok].mean()) if ok.any() else math.nan,
                "falls": falls,
                "fall_rate": falls / e,
                "fall_rate_ci95": list(wilson_interval(falls, e)),
            }
        )
    return rows


def push_table(task: Go1TaskConfig, policy: Policy, cfg: EvalConfig, seed: int = 0) -> list[dict[str, Any]]:
    """One row per push magnitude: recovery rate with a Wilson interval (module docstring)."""
    e = cfg.episodes
    mags = np.repeat(np.array(cfg.push_magnitudes_mps), e)
    n = mags.size
    env = _eval_env(task, n, cfg.push_at_s + cfg.recover_s, seed, cfg, vary=True)
    env.hold_commands(draw_commands(task, np.array([cfg.push_command], dtype=np.float64), cfg, n, seed + 1))
    rng = np.random.default_rng(seed + 1)
    ang = rng.uniform(-math.pi, math.pi, n)
    kick = np.stack([np.cos(ang), np.sin(ang)], axis=1) * mags[:, None]
    push_step = round(cfg.push_at_s / task.dt)
    steps = push_step + round(cfg.recover_s / task.dt)

    def on_step(t: int) -> None:
        if t == push_step:
            env.push(np.arange(n), kick)

    _, _, fell_at = _run(env, policy, steps, on_step)
    rows = []
    for i, m in enumerate(cfg.push_magnitudes_mps):
        sl = slice(i * e, (i + 1) * e)
        before = int((fell_at[sl] < push_step).sum())
        trials = e - before
        recovered = int((fell_at[sl] == steps).sum())
        rows.append(
            {
                "push_mps": m,
                "trials": trials,
                "fell_before_push": before,
                "recovered": recovered,
                "recovery_rate": recovered / trials if trials else math.nan,
                "recovery_rate_ci95": list(wilson_interval(recovered, trials)),
            }
        )
    return rows


def whole_body_rows(
    task: Go1TaskConfig, policy: Policy, cfg: EvalConfig, seed: int = 0
) -> list[dict[str, Any]] | None:
    """The whole-body table (``go1.whole_body_eval``) in the worlds and sizes of ``cfg`` for a
    policy with whole-body commands; ``None`` for a velocity-only one."""
    if not task.whole_body.enabled:
        return None
    sizes = WholeBodyEvalConfig(episodes=cfg.episodes, episode_s=cfg.episode_s, settle_s=cfg.settle_s)
    return whole_body_table(task, policy, sizes, lambda n, s: _eval_env(task, n, s, seed, cfg, vary=True))


def terrain_rows(
    task: Go1TaskConfig, policy: Policy, cfg: EvalConfig, terrain: TerrainEvalConfig | None, seed: int = 0
) -> list[dict[str, Any]] | None:
    """The terrain table (``go1.terrain_eval``) of the kinds and levels in ``terrain`` under
    ``cfg``'s condition; ``None`` when no terrain is asked for."""
    if terrain is None:
        return None
    return terrain_table(task, policy, terrain, condition(task, cfg), seed)


def summarize_go1(tracking: Sequence[dict[str, Any]], pushes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Headline figures: the done-when checks of the Go1 issue, from the two tables."""

    def row(vx: float, yaw: float) -> dict[str, Any] | None:
        for r in tracking:
            c = r["command"]
            if c["vx_mps"] == vx and c["vy_mps"] == 0.0 and c["yaw_radps"] == yaw:
                return r
        return None

    out: dict[str, Any] = {}
    r2 = row(2.0, 0.0)
    if r2:
        out["vx_2.0_lin_error_mps"] = r2["lin_vel_error_mps"]
    yaw_rows = [r for r in (row(0.0, 1.8), row(0.0, -1.8)) if r]
    if yaw_rows:
        out["yaw_1.8_error_radps"] = float(np.mean([r["yaw_rate_error_radps"] for r in yaw_rows]))
    moving = [r for r in tracking if any(v != 0.0 for v in r["command"].values())]
    if moving:  # none: the velocity table was not run
        out["fall_rate_moving"] = sum(r["falls"] for r in moving) / sum(r["episodes"] for r in moving)
    p15 = [p for p in pushes if p["push_mps"] == 1.5]
    if p15:
        out["push_1.5_recovery_rate"] = p15[0]["recovery_rate"]
    return out
