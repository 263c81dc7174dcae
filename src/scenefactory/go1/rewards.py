"""Reward terms of the velocity-tracking task: pure functions ``f(state) -> (N,)``.

Each returns an unweighted per-robot quantity; the task multiplies it by its weight and by the
policy step (so weights follow Isaac Lab / legged_gym's per-second convention). The tracking
kernels are ``exp(−e²/σ)`` with σ = 0.25 (m/s)² or (rad/s)², as in both recipes; the optional
fine yaw kernel (σ = 0.01 (rad/s)²) keeps a gradient where the coarse one is flat (errors below
0.1 rad/s), which is what holds a turn's rate when the dynamics change.
"""

from __future__ import annotations

import torch

from scenefactory.go1.state import LocoState

TRACKING_SIGMA = 0.25
FINE_YAW_SIGMA = 0.01


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
        joint_limit_violation,
        stand_still,
        fallen,
    )
}
"""Term function name → function: how a saved config names its terms."""
