"""What a reward or observation term may read: one step of the batched quadruped, as tensors.

Frames: ``_b`` is the trunk (body) frame, x forward, y left, z up; ``_w`` the world frame.
Shapes: ``N`` environments (one robot each), 12 joints in ``go1.robot.JOINT_NAMES`` order,
4 feet in ``go1.robot.LEGS`` order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LocoState:
    """One policy step of N robots (all float32 unless noted)."""

    command: torch.Tensor
    """(N, 3) commanded vx, vy [m/s] and yaw rate [rad/s], body frame."""
    lin_vel_b: torch.Tensor
    """(N, 3) trunk linear velocity [m/s] (privileged: no real sensor measures it)."""
    ang_vel_b: torch.Tensor
    """(N, 3) trunk angular velocity [rad/s] (the gyro)."""
    gravity_b: torch.Tensor
    """(N, 3) unit gravity direction in the body frame ((0, 0, −1) when level)."""
    height_m: torch.Tensor
    """(N,) trunk height above the floor."""
    joint_pos: torch.Tensor
    """(N, 12) joint angles [rad]."""
    joint_vel: torch.Tensor
    """(N, 12) joint velocities [rad/s]."""
    joint_acc: torch.Tensor
    """(N, 12) finite-difference joint accelerations over the policy step [rad/s²]."""
    default_joint_pos: torch.Tensor
    """(12,) home pose [rad]."""
    joint_limits: torch.Tensor
    """(12, 2) soft joint limits [rad] (90 % of the hard range about its middle)."""
    torque: torch.Tensor
    """(N, 12) last applied joint torques [N·m]."""
    actions: torch.Tensor
    """(N, 12) this step's (clipped) actions."""
    prev_actions: torch.Tensor
    """(N, 12) the previous step's actions."""
    foot_contact: torch.Tensor
    """(N, 4) bool: foot touching the ground now."""
    leg_contact: torch.Tensor
    """(N, 8) bool: each thigh and calf (leg by leg, thigh first) touching the ground now."""
    first_contact: torch.Tensor
    """(N, 4) bool: foot touched down during this step after being in the air."""
    air_time_s: torch.Tensor
    """(N, 4) time the foot had been in the air when it touched down (0 elsewhere)."""
    foot_height_m: torch.Tensor
    """(N, 4) height of each foot's lowest point above the ground straight under it [m] (0 on the
    ground; read through the leg kinematics and the terrain's heights)."""
    foot_speed_xy: torch.Tensor
    """(N, 4) horizontal speed of each foot in the world frame [m/s] (≈ 0 in stance)."""
    fallen: torch.Tensor
    """(N,) bool: trunk on the ground or tilted past the fall angle."""
    air_time_threshold_s: float
    foot_clearance_target_m: float
    dt: float
