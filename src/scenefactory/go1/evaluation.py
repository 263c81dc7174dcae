"""Evaluation of Go1 policies: a velocity-tracking table and a push-recovery table.

Both run on the nominal robot (no randomization, no sensor noise, no random pushes), with the
policy's mean action, each command held for the whole episode, every row's episodes in parallel.
``EvalConfig.latency_ms`` and ``joint_scale`` set one known action latency and joint damping/dry
friction scale in every world instead (``config.fixed_conditions``); a privileged teacher is given
the parameters of its world.

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
from dataclasses import dataclass, replace
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

    def __post_init__(self) -> None:
        """Validate the condition (the latency is checked against the task's rates in the env)."""
        if not self.latency_ms >= 0 or not self.joint_scale >= 0:
            raise ValueError(
                f"latency_ms and joint_scale must be >= 0, got {self.latency_ms} and {self.joint_scale}"
            )

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


def _eval_env(task: Go1TaskConfig, n: int, seconds: float, seed: int, cond: EvalConfig) -> Go1Env:
    cfg = replace(nominal(task), num_envs=n, episode_length_s=seconds + 1.0)
    return Go1Env(replace(cfg, randomization=condition(task, cond)), seed=seed)


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
    params = None
    if policy.params_dim:  # a teacher reads its world's parameters (fixed for the whole run)
        with_joint = policy.params_dim == env.randomizer.privileged(joint_scale=False).shape[1] + 1
        params = torch.as_tensor(env.randomizer.privileged(joint_scale=with_joint), dtype=torch.float32)
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
    cmds = np.repeat(np.array(cfg.commands, dtype=np.float64), e, axis=0)  # (C·E, 3)
    env = _eval_env(task, len(cmds), cfg.episode_s, seed, cfg)
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
    env = _eval_env(task, n, cfg.push_at_s + cfg.recover_s, seed, cfg)
    env.hold_commands(np.tile(np.array(cfg.push_command), (n, 1)))
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
    falls = sum(r["falls"] for r in moving)
    eps = sum(r["episodes"] for r in moving)
    out["fall_rate_moving"] = falls / eps if eps else math.nan
    p15 = [p for p in pushes if p["push_mps"] == 1.5]
    if p15:
        out["push_1.5_recovery_rate"] = p15[0]["recovery_rate"]
    return out
