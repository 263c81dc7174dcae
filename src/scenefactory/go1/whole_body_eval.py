"""The whole-body table of ``eval go1``: trunk height, pitch and roll tracking while walking.

For a policy with whole-body commands (``config.WholeBodyConfig.enabled``). Each row holds one
body command — one of height, pitch or roll off its nominal value, the other two nominal — and a
forward walking speed, exactly, for the whole episode; every row's episodes run in parallel with
the policy's mean action, in the worlds the velocity table uses (``go1.evaluation`` builds them:
episodes that differ in start state and world parameters, or the fixed protocol), or without an
environment builder on the nominal robot (or a given fixed condition).

Per episode, over the measuring window (after ``settle_s``): the mean of ``|h* − h|`` [m] (trunk
height), ``|θ* − θ|`` and ``|φ* − φ|`` [rad] (pitch and roll, ``rewards.pitch_roll``),
``‖v*_xy − v_xy‖`` [m/s] and ``|ω*_z − ω_z|`` [rad/s]; an episode that falls counts as a fall and
its errors are not averaged. Rows give the mean over episodes with a normal 95 % interval and the
fall rate with a Wilson interval. The summary gives, per commanded quantity, the largest row error
over that quantity's rows against its target (:data:`TARGETS`: 0.02 m, 0.05 rad, 0.05 rad).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from scenefactory.go1.config import Go1TaskConfig, RandomizationConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.rewards import pitch_roll
from scenefactory.go1.whole_body import nominal_body_command
from scenefactory.stats import mean_interval, wilson_interval

if TYPE_CHECKING:  # evaluation imports this module
    from scenefactory.go1.evaluation import Policy

AXES = ("height_m", "pitch_rad", "roll_rad")
"""The body commands, in the command vector's order (after vx, vy, yaw rate)."""
TARGETS = {"height_m": 0.02, "pitch_rad": 0.05, "roll_rad": 0.05}
"""Largest acceptable mean tracking error per quantity (the whole-body targets the shipped policy was
trained to; its model card on the docs site has the measured errors): 2 cm, 0.05 rad."""


@dataclass(frozen=True)
class WholeBodyEvalConfig:
    """Sizes, timings and the grid of the whole-body table: every speed × every off-nominal value
    of each quantity (the default values span the training ranges, 0.20–0.34 m, ±0.3 and ±0.2 rad)."""

    episodes: int = 64
    episode_s: float = 10.0
    settle_s: float = 2.0
    speeds_mps: tuple[float, ...] = (0.5, 1.0)
    heights_m: tuple[float, ...] = (0.20, 0.24, 0.32, 0.34)
    pitches_rad: tuple[float, ...] = (-0.3, -0.15, 0.15, 0.3)
    rolls_rad: tuple[float, ...] = (-0.2, -0.1, 0.1, 0.2)

    def __post_init__(self) -> None:
        """Validate sizes and timings."""
        if self.episodes < 1 or not 0 <= self.settle_s < self.episode_s:
            raise ValueError(
                f"need episodes >= 1 and 0 <= settle_s < episode_s, got {self.episodes}, "
                f"{self.settle_s}, {self.episode_s}"
            )

    def cells(self, nominal_body: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """(varied quantity, command (6,)) per row: speed-major, then height, pitch, roll values."""
        out = []
        for v in self.speeds_mps:
            for axis, values in zip(AXES, (self.heights_m, self.pitches_rad, self.rolls_rad), strict=True):
                for value in values:
                    body = nominal_body.copy()
                    body[AXES.index(axis)] = value
                    out.append((axis, np.concatenate([[v, 0.0, 0.0], body])))
        return out


def _rollout(
    env: Go1Env, policy: Policy, steps: int, first: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Roll ``steps`` policy steps; per robot the window means (from step ``first``) of |body
    command error| (N, 3), planar velocity error (N,), yaw-rate error (N,), and whether it fell (N,)."""
    obs, _ = env.observations()
    n = env.num_envs
    body_err, lin_err, yaw_err = np.zeros((n, 3)), np.zeros(n), np.zeros(n)
    fell = np.zeros(n, dtype=bool)
    params = env.teacher_params(policy.params_dim)  # a privileged teacher reads its world's parameters
    policy.reset()
    for t in range(steps):
        res = env.step(policy.act(obs, params))
        policy.reset(res.done)
        obs = res.actor_obs
        fell |= res.terminated.numpy()
        if t < first:
            continue
        s = res.state
        cmd = s.command.numpy()
        achieved = np.concatenate([s.height_m.numpy()[:, None], pitch_roll(s.gravity_b).numpy()], axis=1)
        body_err += np.abs(achieved - cmd[:, 3:6])
        lin_err += np.linalg.norm(s.lin_vel_b[:, :2].numpy() - cmd[:, :2], axis=1)
        yaw_err += np.abs(s.ang_vel_b[:, 2].numpy() - cmd[:, 2])
    k = max(1, steps - first)
    return body_err / k, lin_err / k, yaw_err / k, fell


def _stat(values: np.ndarray) -> tuple[float, list[float]]:
    mean, lo, hi = mean_interval(torch.from_numpy(values))
    return mean, [lo, hi]


def whole_body_table(
    task: Go1TaskConfig,
    policy: Policy,
    cfg: WholeBodyEvalConfig,
    make_env: Callable[[int, float], Go1Env] | None = None,
    randomization: RandomizationConfig | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per cell of ``cfg`` (module docstring) for a policy of the whole-body ``task``, in
    ``make_env(robots, seconds)``'s worlds, or (``None``) on the nominal robot or the fixed
    condition ``randomization``."""
    wb = task.whole_body
    if not wb.enabled:
        raise ValueError("the whole-body table needs a policy trained with whole-body commands")
    cells = cfg.cells(nominal_body_command(wb))
    e = cfg.episodes
    cmds = np.repeat(np.stack([c for _, c in cells]), e, axis=0)  # (C·E, 6)
    if make_env is None:
        env_cfg = replace(nominal(task), num_envs=len(cmds), episode_length_s=cfg.episode_s + 1.0)
        env = Go1Env(replace(env_cfg, randomization=randomization), seed=seed)
    else:
        env = make_env(len(cmds), cfg.episode_s)
    env.hold_commands(cmds)
    steps = round(cfg.episode_s / task.dt)
    body_err, lin_err, yaw_err, fell = _rollout(env, policy, steps, round(cfg.settle_s / task.dt))
    rows = []
    for c, (axis, cmd) in enumerate(cells):
        sl = slice(c * e, (c + 1) * e)
        ok = ~fell[sl]
        falls = int(fell[sl].sum())
        row: dict[str, Any] = {
            "varied": axis,
            "command": dict(zip(("vx_mps", "vy_mps", "yaw_radps", *AXES), map(float, cmd), strict=True)),
            "episodes": e,
        }
        for k, name in enumerate(AXES):
            row[f"{name}_error"], row[f"{name}_error_ci95"] = _stat(body_err[sl, k][ok])
        row["lin_vel_error_mps"], row["lin_vel_error_ci95"] = _stat(lin_err[sl][ok])
        row["yaw_rate_error_radps"], row["yaw_rate_error_ci95"] = _stat(yaw_err[sl][ok])
        row.update(falls=falls, fall_rate=falls / e, fall_rate_ci95=list(wilson_interval(falls, e)))
        rows.append(row)
    return rows


def whole_body_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per quantity, the largest mean error over the rows that vary it and whether it meets its
    target; the largest planar velocity error and the fall rate over all rows."""
    out: dict[str, Any] = {}
    for axis in AXES:
        errs = [r[f"{axis}_error"] for r in rows if r["varied"] == axis]
        worst = max(errs, default=math.nan)
        out[f"whole_body_{axis}_max_error"] = worst
        out[f"whole_body_{axis}_within_target"] = bool(worst <= TARGETS[axis])
    out["whole_body_lin_vel_max_error_mps"] = max((r["lin_vel_error_mps"] for r in rows), default=math.nan)
    eps = sum(r["episodes"] for r in rows)
    out["whole_body_fall_rate"] = sum(r["falls"] for r in rows) / eps if eps else math.nan
    return out


def whole_body_report(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the whole-body table (none without rows: a velocity-only policy)."""
    if not rows:
        return []

    def ci(lo_hi: list[float]) -> str:
        return f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]"

    lines = [
        "",
        "Whole-body commands while walking forward (one quantity off nominal per row; targets: height "
        f"within {TARGETS['height_m']} m, pitch and roll within {TARGETS['pitch_rad']} rad).",
        "",
        "| vx m/s | height m | pitch rad | roll rad | episodes | height error m [95% CI] "
        "| pitch error rad [95% CI] | roll error rad [95% CI] | lin. error m/s [95% CI] | fall rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["command"]
        lines.append(
            f"| {c['vx_mps']:.1f} | {c['height_m']:.2f} | {c['pitch_rad']:+.2f} | {c['roll_rad']:+.2f} "
            f"| {r['episodes']} "
            + " ".join(f"| {r[f'{a}_error']:.3f} {ci(r[f'{a}_error_ci95'])}" for a in AXES)
            + f" | {r['lin_vel_error_mps']:.3f} {ci(r['lin_vel_error_ci95'])} | {r['fall_rate']:.3f} |"
        )
    return lines
