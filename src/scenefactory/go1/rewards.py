"""Reward terms of the velocity-tracking task: pure functions ``f(state) -> (N,)``.

Each returns an unweighted per-robot quantity; the task multiplies it by its weight and by the
policy step (so weights follow Isaac Lab / legged_gym's per-second convention). The tracking
kernels are ``exp(−e²/σ)`` with σ = 0.25 (m/s)² or (rad/s)², as in both recipes; the optional
fine yaw kernel (σ = 0.01 (rad/s)²) keeps a gradient where the coarse one is flat (errors below
0.1 rad/s), which is what holds a turn's rate when the dynamics change.

Whole-body commands (``config.WholeBodyConfig``; ``state.command`` is then (N, 6): vx, vy, yaw
rate, trunk height [m], pitch [rad], roll [rad]) are tracked with kernels ``exp(−e²/σ²)``, σ =
:data:`HEIGHT_SIGMA_M` for the height and :data:`ATTITUDE_SIGMA_RAD` for pitch and roll, and
:func:`attitude_error_sq` replaces the flat-orientation penalty (it is that penalty measured from
the commanded attitude instead of from level). Pitch and roll are the Z-Y-X Euler angles of the
trunk, read from the projected gravity ``g_b`` (so independent of yaw): pitch
``θ = atan2(g_x, √(g_y² + g_z²))``, positive nose down; roll ``φ = atan2(−g_y, −g_z)``, positive
right side down; inversely ``g_b = (sin θ, −sin φ cos θ, −cos φ cos θ)``.
"""

from __future__ import annotations

import torch

from scenefactory.go1.state import LocoState

TRACKING_SIGMA = 0.25
FINE_YAW_SIGMA = 0.01
HEIGHT_SIGMA_M = 0.05
"""Width of the height kernel: 0.85 at a 0.02 m error, 0.08 at 0.08 m (the nominal 0.28 m against 0.20)."""
ATTITUDE_SIGMA_RAD = 0.15
"""Width of the pitch and roll kernels: 0.89 at a 0.05 rad error, 0.02 at 0.3 rad."""


def track_lin_vel_xy(s: LocoState) -> torch.Tensor:
    """``exp(−‖v*_xy − v_xy‖² / σ)``: 1 when the planar body velocity matches the command."""
    err = (s.command[:, :2] - s.lin_vel_b[:, :2]).square().sum(-1)
    return torch.exp(-err / TRACKING_SIGMA)


def track_ang_vel_z(s: LocoState) -> torch.Tensor:
    """``exp(−(ω*_z − ω_z)² / σ)``: 1 when the yaw rate matches the command."""
    return torch.exp(-(s.command[:, 2] - s.ang_vel_b[:, 2]).square() / TRACKING_SIGMA)


def track_ang_vel_z_fine(s: LocoState) -> torch.Tensor:
    """``exp(−(ω*_z − ω_z)² / 0.01)``: the yaw kernel sharpened (0.37 at a 0.1 rad/s error)."""
    return torch.exp(-(s.command[:, 2] - s.ang_vel_b[:, 2]).square() / FINE_YAW_SIGMA)


def lin_vel_z_sq(s: LocoState) -> torch.Tensor:
    """Vertical trunk velocity squared [(m/s)²] (bouncing)."""
    return s.lin_vel_b[:, 2].square()


def ang_vel_xy_sq(s: LocoState) -> torch.Tensor:
    """Roll and pitch rates squared [(rad/s)²] (wobbling)."""
    return s.ang_vel_b[:, :2].square().sum(-1)


def flat_orientation_sq(s: LocoState) -> torch.Tensor:
    """Squared xy of the body-frame gravity: 0 when the trunk is level."""
    return s.gravity_b[:, :2].square().sum(-1)


def torques_sq(s: LocoState) -> torch.Tensor:
    """Sum of squared joint torques [(N·m)²] (energy proxy)."""
    return s.torque.square().sum(-1)


def joint_acc_sq(s: LocoState) -> torch.Tensor:
    """Sum of squared joint accelerations [(rad/s²)²] (smoothness)."""
    return s.joint_acc.square().sum(-1)


def action_rate_sq(s: LocoState) -> torch.Tensor:
    """Squared change of the action since the last step (jitter; what makes hardware vibrate)."""
    return (s.actions - s.prev_actions).square().sum(-1)


def feet_air_time(s: LocoState) -> torch.Tensor:
    """Σ over feet touching down this step of (air time − threshold) [s]; only when commanded to move.

    Rewards long steps (a clear gait instead of shuffling); zero for a standing command."""
    gain = ((s.air_time_s - s.air_time_threshold_s) * s.first_contact.float()).sum(-1)
    moving = s.command[:, :2].norm(dim=-1) + s.command[:, 2].abs() > 0.1
    return gain * moving.float()


def foot_clearance(s: LocoState) -> torch.Tensor:
    """``Σ_feet (h − h*)²·‖v_xy‖`` [m²·m/s] (DreamWaQ's foot-clearance term, weighted negative):
    a foot moving horizontally should travel at ``h* = s.foot_clearance_target_m`` (the task's
    ``foot_clearance_target_m``, 8 cm by default) over the ground under it; feet in stance
    (speed ≈ 0) cost nothing. What a blind robot needs to lift its feet over stairs it cannot see
    (a shuffling trot stubs on the first riser)."""
    return ((s.foot_height_m - s.foot_clearance_target_m).square() * s.foot_speed_xy).sum(-1)


def leg_contacts(s: LocoState) -> torch.Tensor:
    """Thighs and calves touching the ground (legged_gym's ``collision`` term on them, weighted
    negative): a shin resting on a stair's edge stops a blind robot as surely as a fall."""
    return s.leg_contact.float().sum(-1)


def joint_limit_violation(s: LocoState) -> torch.Tensor:
    """Radians beyond the soft joint limits, summed over joints."""
    lo, hi = s.joint_limits[:, 0], s.joint_limits[:, 1]
    return ((lo - s.joint_pos).clamp(min=0) + (s.joint_pos - hi).clamp(min=0)).sum(-1)


def stand_still(s: LocoState) -> torch.Tensor:
    """Σ|q − q_home| when the command is zero (stand quietly instead of stepping in place)."""
    idle = s.command[:, :2].norm(dim=-1) + s.command[:, 2].abs() < 0.1
    return (s.joint_pos - s.default_joint_pos).abs().sum(-1) * idle.float()


def fallen(s: LocoState) -> torch.Tensor:
    """1 on the step the robot falls (trunk on the ground or tilted past the fall angle)."""
    return s.fallen.float()


def pitch_roll(gravity_b: torch.Tensor) -> torch.Tensor:
    """(..., 2) trunk pitch and roll [rad] (module docstring) from the projected gravity (..., 3)."""
    gx, gy, gz = gravity_b[..., 0], gravity_b[..., 1], gravity_b[..., 2]
    pitch = torch.atan2(gx, torch.hypot(gy, gz))
    roll = torch.atan2(-gy, -gz)
    return torch.stack([pitch, roll], dim=-1)


def gravity_from_pitch_roll(pitch_roll: torch.Tensor) -> torch.Tensor:
    """(..., 3) the projected gravity of a trunk at pitch and roll (..., 2) [rad]: the inverse of
    :func:`pitch_roll`."""
    p, r = pitch_roll[..., 0], pitch_roll[..., 1]
    return torch.stack([torch.sin(p), -torch.sin(r) * torch.cos(p), -torch.cos(r) * torch.cos(p)], dim=-1)


def _body_command(s: LocoState) -> torch.Tensor:
    if s.command.shape[-1] != 6:
        raise ValueError(
            f"a whole-body reward term needs (N, 6) commands (vx, vy, yaw, height, pitch, roll), "
            f"got {tuple(s.command.shape)}: enable WholeBodyConfig"
        )
    return s.command[:, 3:6]


def track_base_height(s: LocoState) -> torch.Tensor:
    """``exp(−(h* − h)² / σ²)``, σ = 0.05 m: 1 when the trunk height matches the command."""
    return torch.exp(-(_body_command(s)[:, 0] - s.height_m).square() / HEIGHT_SIGMA_M**2)


def track_body_pitch(s: LocoState) -> torch.Tensor:
    """``exp(−(θ* − θ)² / σ²)``, σ = 0.15 rad: 1 when the trunk pitch matches the command."""
    err = _body_command(s)[:, 1] - pitch_roll(s.gravity_b)[:, 0]
    return torch.exp(-err.square() / ATTITUDE_SIGMA_RAD**2)


def track_body_roll(s: LocoState) -> torch.Tensor:
    """``exp(−(φ* − φ)² / σ²)``, σ = 0.15 rad: 1 when the trunk roll matches the command."""
    err = _body_command(s)[:, 2] - pitch_roll(s.gravity_b)[:, 1]
    return torch.exp(-err.square() / ATTITUDE_SIGMA_RAD**2)


def attitude_error_sq(s: LocoState) -> torch.Tensor:
    """Squared xy distance of the body-frame gravity from the commanded attitude's:
    :func:`flat_orientation_sq` when the command is level (≈ Δθ² + Δφ² for small errors)."""
    want = gravity_from_pitch_roll(_body_command(s)[:, 1:3])
    return (s.gravity_b[:, :2] - want[:, :2]).square().sum(-1)


def stand_still_quiet(s: LocoState) -> torch.Tensor:
    """Σ|q̇| [rad/s] when the velocity command is zero: stand without stepping, in whatever posture
    the whole-body command asks for (:func:`stand_still` pulls toward the home pose instead)."""
    idle = s.command[:, :2].norm(dim=-1) + s.command[:, 2].abs() < 0.1
    return s.joint_vel.abs().sum(-1) * idle.float()


REWARD_FUNCTIONS = {
    f.__name__: f
    for f in (
        track_lin_vel_xy,
        track_ang_vel_z,
        track_ang_vel_z_fine,
        lin_vel_z_sq,
        ang_vel_xy_sq,
        flat_orientation_sq,
        torques_sq,
        joint_acc_sq,
        action_rate_sq,
        feet_air_time,
        foot_clearance,
        leg_contacts,
        joint_limit_violation,
        stand_still,
        fallen,
        track_base_height,
        track_body_pitch,
        track_body_roll,
        attitude_error_sq,
        stand_still_quiet,
    )
}
"""Term function name → function: how a saved config names its terms."""
WHOLE_BODY_FUNCTIONS = frozenset({track_base_height, track_body_pitch, track_body_roll, attitude_error_sq})
"""Terms that read the whole-body commands: only in a task with ``WholeBodyConfig.enabled``."""
OPTIONAL_FUNCTIONS = frozenset({foot_clearance, leg_contacts})
"""Terms in no default recipe: a run adds one by giving it a weight (``--reward-weight NAME=W``)."""
