"""The sim-to-sim check: the same exported policy, through the same runner, on the training
simulator's settings and on MuJoCo configured differently (``deploy.robot.SIM2SIM``); torch-free.

Per command and robot: ``episodes`` runs of ``seconds`` from the home pose at a random heading, the
command held; errors (‖v*_xy − v_xy‖ [m/s], |ω*_z − ω_z| [rad/s], true body velocities) averaged
after ``settle_s``; a run that falls is a fall. The verdict per command (the project's decision; the
measurements behind it: docs/history/go1-training-log.md): no falls, and a sim-to-sim error of at
most ``max(TOLERANCE × the training simulator's error, FLOOR)`` — 1.5× or 0.10 m/s for linear
commands, 0.10 rad/s for pure turning, half the tracking tolerance. A ratio alone is the wrong test
against a near-zero baseline: at 0.02–0.05 rad/s training-simulator error, 1.5× asks for less than
0.08 rad/s, and a 10 ms delay doubles the yaw-rate ripple even for a policy that reads the delay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.go1 import robot as go1
from scenefactory.go1.deploy.robot import SIM2SIM, TRAINING_SIM, MujocoGo1, SimRobotConfig
from scenefactory.go1.deploy.runner import OnnxPolicyRunner

DEPLOY_COMMANDS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.0),
    (0.5, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (1.5, 0.0, 0.0),
    (2.0, 0.0, 0.0),
    (0.0, 0.0, 0.9),
    (0.0, 0.0, -0.9),
    (0.0, 0.0, 1.8),
    (0.0, 0.0, -1.8),
)
TOLERANCE = 1.5
"""Allowed ratio of sim-to-sim to training-simulator tracking error."""
FLOOR = 0.10
"""A sim-to-sim error up to this [m/s for linear, rad/s for turning commands] passes whatever the
ratio: half the tracking tolerance (0.2 m/s, 0.2 rad/s)."""
SWEEP_DELAYS_MS: tuple[float, ...] = (5.0, 10.0, 15.0, 20.0)
"""Actuator delays of :func:`delay_sweep` (the default recipe trains with latencies from U(0, 20) ms)."""


def _mean_ci(x: list[float]) -> tuple[float, float]:
    if not x:
        return math.nan, math.nan
    a = np.asarray(x)
    half = 1.959963984540054 * a.std(ddof=1) / math.sqrt(a.size) if a.size > 1 else 0.0
    return float(a.mean()), float(half)


def require_simulable(runner: OnnxPolicyRunner, robots: Sequence[SimRobotConfig]) -> None:
    """Refuse (:class:`~scenefactory.errors.UserError`, before any work) a policy the simulated
    Go1s cannot run as its sidecar says: joints in another order than the model's, or a control
    period that is not a whole number of a robot's physics steps."""
    where = runner.sidecar_path
    if runner.joint_names != list(go1.JOINT_NAMES):
        raise UserError(
            f"{where}: field 'joint_names' lists {runner.joint_names}; the simulated Go1 expects "
            f"{list(go1.JOINT_NAMES)} (this order)"
        )
    for cfg in robots:
        dt = cfg.solver.timestep_s
        steps = round(1.0 / (runner.control_hz * dt))
        if steps < 1 or not math.isclose(steps * dt * runner.control_hz, 1.0, rel_tol=1e-6):
            raise UserError(
                f"{where}: field 'control_hz' {runner.control_hz:g}: a control period must be a whole "
                f"number of the simulated robot's {dt:g} s physics steps (e.g. 50 Hz)"
            )


def track(
    runner: OnnxPolicyRunner,
    cfg: SimRobotConfig,
    commands: Sequence[tuple[float, float, float]],
    episodes: int,
    seconds: float,
    settle_s: float,
    seed: int,
) -> list[dict[str, Any]]:
    """Tracking rows of ``runner`` on a robot simulated with ``cfg`` (ticking at the sidecar's rate)."""
    robot = MujocoGo1(replace(cfg, control_hz=runner.control_hz), seed=seed)
    rng = np.random.default_rng(seed)
    ticks = round(seconds * runner.control_hz)
    first = round(min(settle_s, seconds / 2) * runner.control_hz)
    rows = []
    for cmd in commands:
        c = np.asarray(cmd, dtype=np.float64)
        lin, yaw, yaw_signed, falls = [], [], [], 0
        for _ in range(episodes):
            robot.reset(yaw=float(rng.uniform(-math.pi, math.pi)))
            runner.reset()
            el, ey, es, fell = [], [], [], False
            for t in range(ticks):
                runner.step(robot, c)
                if robot.fallen():
                    fell = True
                    break
                if t >= first:
                    v, w = robot.body_velocity()
                    el.append(float(np.linalg.norm(v - c[:2])))
                    ey.append(abs(w - c[2]))
                    es.append(w - c[2])
            if fell:
                falls += 1
            else:
                lin.append(float(np.mean(el)))
                yaw.append(float(np.mean(ey)))
                yaw_signed.append(float(np.mean(es)))
        lm, lh = _mean_ci(lin)
        ym, yh = _mean_ci(yaw)
        rows.append(
            {
                "command": {"vx_mps": cmd[0], "vy_mps": cmd[1], "yaw_radps": cmd[2]},
                "episodes": episodes,
                "lin_vel_error_mps": lm,
                "lin_vel_error_ci95_half": lh,
                "yaw_rate_error_radps": ym,
                "yaw_rate_error_ci95_half": yh,
                "yaw_rate_bias_radps": _mean_ci(yaw_signed)[0],
                "falls": falls,
            }
        )
    return rows


def sim2sim(
    runner: OnnxPolicyRunner,
    episodes: int = 8,
    seconds: float = 10.0,
    settle_s: float = 2.0,
    seed: int = 0,
    commands: Sequence[tuple[float, float, float]] = DEPLOY_COMMANDS,
) -> dict[str, Any]:
    """Both robots, the comparison per command, and an overall verdict."""
    require_simulable(runner, (TRAINING_SIM, SIM2SIM))
    train_rows = track(runner, TRAINING_SIM, commands, episodes, seconds, settle_s, seed)
    s2s_rows = track(runner, SIM2SIM, commands, episodes, seconds, settle_s, seed)
    comparison = compare(train_rows, s2s_rows)
    return {
        "training_sim": train_rows,
        "sim2sim": s2s_rows,
        "comparison": comparison,
        "summary": {
            "passed": all(c["passed"] for c in comparison),
            "max_ratio": max(c["ratio"] for c in comparison),
            "failed_commands": [c["command"] for c in comparison if not c["passed"]],
            "sim2sim_falls": sum(c["sim2sim_falls"] for c in comparison),
            "episodes_per_command": episodes,
        },
    }


def compare(train_rows: list[dict[str, Any]], other_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per command: the primary error on both robots, ratio, increase, the error allowed
    (``max(TOLERANCE × training-sim error, FLOOR)``), the other's falls, verdict."""
    comparison = []
    for a, b in zip(train_rows, other_rows, strict=True):
        # the primary error of a command: linear for translation commands, yaw for pure turning
        key = (
            "yaw_rate_error_radps"
            if a["command"]["yaw_radps"] != 0 and a["command"]["vx_mps"] == 0
            else "lin_vel_error_mps"
        )
        ratio = b[key] / a[key] if a[key] > 0 else math.nan
        allowed = max(TOLERANCE * a[key], FLOOR)
        comparison.append(
            {
                "command": a["command"],
                "metric": key,
                "training_sim": a[key],
                "sim2sim": b[key],
                "ratio": ratio,
                "sim2sim_falls": b["falls"],
                "increase": b[key] - a[key],
                "allowed": allowed,
                "passed": bool(b["falls"] == 0 and b[key] <= allowed),
            }
        )
    return comparison


def single_changes() -> dict[str, SimRobotConfig]:
    """The training simulator with one of the sim-to-sim target's changes at a time."""
    t, s = TRAINING_SIM, SIM2SIM
    return {
        "solver (1 ms, Euler, CG, elliptic)": replace(t, solver=s.solver),
        "actuator delay": replace(t, actuator_delay_s=s.actuator_delay_s),
        "sensor noise": replace(
            t,
            gyro_noise_radps=s.gyro_noise_radps,
            joint_pos_noise_rad=s.joint_pos_noise_rad,
            joint_vel_noise_radps=s.joint_vel_noise_radps,
        ),
        "joint damping and friction": replace(
            t, joint_damping_scale=s.joint_damping_scale, joint_friction_scale=s.joint_friction_scale
        ),
        "trunk mass": replace(t, trunk_added_mass_kg=s.trunk_added_mass_kg),
        "floor friction": replace(t, floor_friction=s.floor_friction),
    }


def against(
    runner: OnnxPolicyRunner,
    train_rows: list[dict[str, Any]],
    robots: dict[str, SimRobotConfig],
    episodes: int,
    seconds: float,
    settle_s: float,
    seed: int,
    commands: Sequence[tuple[float, float, float]] = DEPLOY_COMMANDS,
) -> dict[str, list[dict[str, Any]]]:
    """Name → :func:`compare` of the training simulator (``train_rows``: its rows for ``commands``)
    against each of ``robots``."""
    require_simulable(runner, list(robots.values()))
    return {
        name: compare(train_rows, track(runner, cfg, commands, episodes, seconds, settle_s, seed))
        for name, cfg in robots.items()
    }


def delayed(delays_ms: Sequence[float] = SWEEP_DELAYS_MS) -> dict[str, SimRobotConfig]:
    """The training simulator with only an actuator delay, one robot per delay [ms] (named by it):
    how the policy's tracking degrades with the delay alone."""
    return {f"{ms:g}": replace(TRAINING_SIM, actuator_delay_s=ms / 1000.0) for ms in delays_ms}
