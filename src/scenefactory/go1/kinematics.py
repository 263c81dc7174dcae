"""Leg kinematics of the Go1 model in :mod:`scenefactory.go1.robot` (hip abduction about x, thigh
and knee about y, point feet at the calf tips): forward kinematics, foot Jacobians and inverse
kinematics in the trunk frame, batched in numpy, and the feet in the world frame from a trunk pose.
The model-based controller steers its feet with them; the env reads the feet's heights and speeds
for the foot-clearance reward. A test checks them against MuJoCo's sites."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from scenefactory.go1 import robot as go1
from scenefactory.go1.frames import body_to_world

Array = npt.NDArray[np.float64]


def _leg_constants() -> tuple[Array, Array]:
    """(4, 3) hip joint positions in the trunk frame and (4,) side (+1 left)."""
    hx, hy = go1.HIP_OFFSET_M
    front = np.array([1.0 if leg[0] == "F" else -1.0 for leg in go1.LEGS])
    side = np.array([1.0 if leg[1] == "L" else -1.0 for leg in go1.LEGS])
    return np.stack([front * hx, side * hy, np.zeros(4)], axis=1), side


HIP_POS_B, LEG_SIDE = _leg_constants()


def _leg_plane(q: Array) -> tuple[Array, Array, Array, Array, Array]:
    """Per leg of (..., 12): abduction ``q0``, the foot's ``x``, ``z`` in the leg plane, and
    ``q1``, ``q2``."""
    q = q.reshape(*q.shape[:-1], 4, 3)
    q0, q1, q2 = q[..., 0], q[..., 1], q[..., 2]
    l1, l2 = go1.THIGH_LENGTH_M, go1.CALF_LENGTH_M
    x = -l1 * np.sin(q1) - l2 * np.sin(q1 + q2)
    z = -l1 * np.cos(q1) - l2 * np.cos(q1 + q2)
    return q0, x, z, q1, q2


def foot_positions(q: Array) -> Array:
    """Forward kinematics: joint angles (..., 12) → foot centres (..., 4, 3) in the trunk frame.

    Per leg (side ``s``, thigh offset ``d``, links ``l1``, ``l2``): in the leg plane
    ``x = −l1·sin q1 − l2·sin(q1+q2)``, ``z = −l1·cos q1 − l2·cos(q1+q2)``; then the abduction
    turns ``(x, s·d, z)`` about x by ``q0``, from the hip joint."""
    q0, x, z, _, _ = _leg_plane(q)
    sd = LEG_SIDE * go1.THIGH_OFFSET_M
    c0, s0 = np.cos(q0), np.sin(q0)
    return HIP_POS_B + np.stack([x, sd * c0 - z * s0, sd * s0 + z * c0], axis=-1)


def foot_jacobians(q: Array) -> Array:
    """(..., 4, 3, 3) ``∂p_foot / ∂(q0, q1, q2)`` per leg (rows x, y, z), trunk frame."""
    q0, x, z, q1, q2 = _leg_plane(q)
    l2 = go1.CALF_LENGTH_M
    sd = LEG_SIDE * go1.THIGH_OFFSET_M
    c0, s0 = np.cos(q0), np.sin(q0)
    zero = np.zeros_like(x)
    dx = np.stack([zero, z, -l2 * np.cos(q1 + q2)], axis=-1)  # ∂x/∂(q0, q1, q2) in the leg plane
    dz = np.stack([zero, -x, l2 * np.sin(q1 + q2)], axis=-1)
    jac = np.stack([dx, -dz * s0[..., None], dz * c0[..., None]], axis=-2)
    jac[..., :, 0] = np.stack([zero, -sd * s0 - z * c0, sd * c0 - z * s0], axis=-1)  # ∂p/∂q0
    return jac


def leg_ik(p_b: Array) -> Array:
    """Inverse kinematics: foot targets (..., 4, 3) in the trunk frame → joint angles (..., 12).

    Abduction from the foot's (y, z) about the hip's x axis, then the planar two-link solution
    with the knee bent backward (``q2 < 0``). Targets beyond reach are pulled onto its boundary."""
    l1, l2, d = go1.THIGH_LENGTH_M, go1.CALF_LENGTH_M, go1.THIGH_OFFSET_M
    rel = p_b - HIP_POS_B
    px, py, pz = rel[..., 0], rel[..., 1], rel[..., 2]
    zleg = -np.sqrt(np.maximum(py**2 + pz**2 - d**2, 1e-6))
    q0 = np.arctan2(pz, py) - np.arctan2(zleg, LEG_SIDE * d)
    q0 = (q0 + math.pi) % (2 * math.pi) - math.pi
    reach = np.clip(np.hypot(px, zleg), abs(l1 - l2) + 0.02, l1 + l2 - 1e-3)
    q2 = -np.arccos(np.clip((reach**2 - l1**2 - l2**2) / (2 * l1 * l2), -1.0, 1.0))
    q1 = np.arctan2(-px, -zleg) - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2))
    return np.stack([q0, q1, q2], axis=-1).reshape(*p_b.shape[:-2], 12)


def feet_in_world(base_qpos: Array, q: Array) -> Array:
    """(N, 4, 3) foot centres in the world frame [m] of trunks at ``base_qpos`` (N, 7: position,
    quaternion w x y z) with joint angles ``q`` (N, 12)."""
    rot = body_to_world(base_qpos[:, 3:7])
    return base_qpos[:, None, 0:3] + np.einsum("nij,nlj->nli", rot, foot_positions(q))


def feet_velocity_in_world(base_qpos: Array, base_qvel: Array, q: Array, qd: Array) -> Array:
    """(N, 4, 3) foot-centre velocities in the world frame [m/s]: ``v + R·(ω × p + J(q)·q̇)`` of
    trunks at ``base_qpos`` (N, 7) moving at ``base_qvel`` (N, 6: MuJoCo's free joint, linear
    velocity in the world frame, angular velocity ``ω`` in the trunk frame), joints ``q``, ``qd``
    (N, 12)."""
    rot = body_to_world(base_qpos[:, 3:7])
    p_b = foot_positions(q)
    qd_leg = qd.reshape(-1, 4, 3)
    v_b = np.cross(base_qvel[:, None, 3:6], p_b) + np.einsum("nlij,nlj->nli", foot_jacobians(q), qd_leg)
    return base_qvel[:, None, 0:3] + np.einsum("nij,nlj->nli", rot, v_b)
