"""Whole-body commands of the Go1 task: trunk height, pitch and roll beside the planar velocity.

:class:`~scenefactory.go1.config.WholeBodyConfig` holds the ranges; this module turns a
velocity-tracking task into a whole-body one (:func:`whole_body_task`) and draws and completes the
body commands for the environment. The command vector is then (vx, vy, yaw rate, height, pitch,
roll): 6 wide in the actor and critic frames (``observations.frame_layout``).

Rewards with whole-body commands (:func:`whole_body_task`), beside the velocity recipe:

=====================  ========================  =======  ====================================
term                   function                  weight   replaces
=====================  ========================  =======  ====================================
``track_base_height``  exp(−Δh²/0.05²)           1.0      —
``track_body_pitch``   exp(−Δθ²/0.15²)           0.5      —
``track_body_roll``    exp(−Δφ²/0.15²)           0.5      —
``attitude``           ‖g_xy − g*_xy‖²           −2.5     ``orientation`` (level trunk), same
                                                          weight, measured from the command
``stand_still_quiet``  Σ|q̇| when vx=vy=ω=0       −0.04    ``stand_still`` (Σ|q − q_home|, which
                                                          would fight a crouch or a tilt)
=====================  ========================  =======  ====================================

The tracking weights follow the velocity kernels' (1.5 linear, 1.0 yaw): 1.0 for the height and
1.0 for the attitude, split between pitch and roll. The task has no base-height penalty to relax.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scenefactory.go1 import rewards as r
from scenefactory.go1.config import Go1TaskConfig, RewardTerm, WholeBodyConfig

TRACKING_TERMS = (
    RewardTerm("track_base_height", r.track_base_height, 1.0),
    RewardTerm("track_body_pitch", r.track_body_pitch, 0.5),
    RewardTerm("track_body_roll", r.track_body_roll, 0.5),
)
REPLACED = {
    r.flat_orientation_sq: ("attitude", r.attitude_error_sq, None),
    r.stand_still: ("stand_still_quiet", r.stand_still_quiet, -0.04),
}
"""Velocity-task term function → (name, function, weight; ``None`` keeps the old weight)."""


def whole_body_task(cfg: Go1TaskConfig, whole_body: WholeBodyConfig | None = None) -> Go1TaskConfig:
    """``cfg`` with whole-body commands (``whole_body``, default :class:`WholeBodyConfig` enabled):
    the rewards of the module table (the tracking terms appended, the two replaced in place)."""
    wb = WholeBodyConfig(enabled=True) if whole_body is None else whole_body
    if not wb.enabled:
        raise ValueError("whole_body_task needs an enabled WholeBodyConfig")
    if cfg.whole_body.enabled:
        raise ValueError("the task already has whole-body commands")
    terms = []
    for t in cfg.rewards:
        if t.fn in REPLACED:
            name, fn, weight = REPLACED[t.fn]
            t = RewardTerm(name, fn, t.weight if weight is None else weight)
        terms.append(t)
    return replace(cfg, whole_body=wb, rewards=(*terms, *TRACKING_TERMS))


def nominal_body_command(wb: WholeBodyConfig) -> np.ndarray:
    """(3,) the nominal body command: nominal height, level trunk."""
    return np.array([wb.nominal_height_m, 0.0, 0.0])


def sample_body_commands(wb: WholeBodyConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 3) body commands (height m, pitch rad, roll rad): uniform in the ranges, a share
    ``nominal_prob`` at :func:`nominal_body_command`."""
    ranges = np.array([wb.height_m, wb.pitch_rad, wb.roll_rad])
    cmd = rng.uniform(ranges[:, 0], ranges[:, 1], (n, 3))
    cmd[rng.random(n) < wb.nominal_prob] = nominal_body_command(wb)
    return cmd


def full_commands(command: np.ndarray, wb: WholeBodyConfig, n: int) -> np.ndarray:
    """(n, 3) or (n, 6) commands for ``n`` robots from ``command`` (n, 3) velocity commands (or
    (n, 6) with whole-body ones): the nominal body command appended where the task has whole-body
    commands and ``command`` does not; ``ValueError`` for any other width."""
    cmd = np.asarray(command, dtype=np.float64)
    width = 6 if wb.enabled else 3
    if cmd.ndim != 2 or cmd.shape[0] != n or cmd.shape[1] not in (3, width):
        raise ValueError(f"commands must be ({n}, 3){f' or ({n}, 6)' if wb.enabled else ''}, got {cmd.shape}")
    if cmd.shape[1] == width:
        return cmd.copy()
    return np.concatenate([cmd, np.tile(nominal_body_command(wb), (n, 1))], axis=1)
