"""The kinematic bicycle (the abstract simulator's dynamics): one batched step, its inverse on logs.

See :mod:`scenefactory.engines.kinematic` for the equations and the engine that runs them.
"""

from __future__ import annotations

import numpy as np
import torch

from scenefactory.vehicles.params import VehicleParams


def bicycle_step(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    speed: torch.Tensor,
    steer: torch.Tensor,
    steer_target: torch.Tensor,
    accel_cmd: torch.Tensor,
    params: VehicleParams,
    dt: float,
) -> tuple[torch.Tensor, ...]:
    """One kinematic-bicycle step (equations in the module docstring), any batch shape ``(...)``.

    Returns ``(pos_xy (..., 2), yaw, speed, steer, accel, yaw_rate, slip_beta)``.
    """
    max_dsteer = params.max_steer_rate_radps * dt
    new_steer = (steer + (steer_target - steer).clamp(-max_dsteer, max_dsteer)).clamp(
        -params.max_steer_rad, params.max_steer_rad
    )
    new_speed = (speed + accel_cmd * dt).clamp(0.0, params.max_speed_mps)
    accel = (new_speed - speed) / dt
    v_mid = 0.5 * (speed + new_speed)
    tan_d = torch.tan(new_steer)
    beta = torch.atan(params.rear_axle_to_com_m / params.wheelbase_m * tan_d)
    heading = yaw + beta
    new_pos = pos_xy + torch.stack((torch.cos(heading), torch.sin(heading)), dim=-1) * (v_mid * dt).unsqueeze(
        -1
    )
    yaw_rate = v_mid * torch.cos(beta) * tan_d / params.wheelbase_m
    new_yaw = wrap_angle(yaw + yaw_rate * dt)
    return new_pos, new_yaw, new_speed, new_steer, accel, yaw_rate, beta


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Wrap angles to [-π, π)."""
    return torch.remainder(angle + torch.pi, 2.0 * torch.pi) - torch.pi


def inverse_bicycle(
    yaw: np.ndarray, speed: np.ndarray, valid: np.ndarray, dt: float, params: VehicleParams
) -> tuple[np.ndarray, np.ndarray]:
    """Normalized ``[steer, accel]`` actions that drive the bicycle along logged states.

    ``yaw``/``speed``/``valid`` are (..., T) logged headings [rad], speeds [m/s] and validity at
    steps ``dt`` apart; the action at step t moves state t to t + 1 (the last step gets none).
    Acceleration a = Δv/dt, normalized by ``max_accel_mps2`` (a ≥ 0) or ``max_brake_mps2``; the
    steering angle inverts the yaw-rate equation of :func:`bicycle_step`: with r = Δψ/dt, mid-step
    speed v̄ and c = r·L/v̄, tan δ = c / √(1 − c²(l_r/L)²) (so that v̄·cos β·tan δ / L = r); below
    0.6 m/s the heading is too noisy to invert and δ = 0 (Waymax's convention). Returns
    ``(actions (..., T, 2) clipped to [-1, 1], valid (..., T))``.
    """
    v0, v1 = speed[..., :-1], speed[..., 1:]
    accel = (v1 - v0) / dt
    a_norm = np.where(accel >= 0, accel / params.max_accel_mps2, accel / params.max_brake_mps2)
    r = (np.remainder(yaw[..., 1:] - yaw[..., :-1] + np.pi, 2 * np.pi) - np.pi) / dt
    v_mid = 0.5 * (v0 + v1)
    moving = v_mid >= 0.6
    c = np.where(moving, r * params.wheelbase_m / np.maximum(v_mid, 0.6), 0.0)
    k = params.rear_axle_to_com_m / params.wheelbase_m
    tan_d = c / np.sqrt(np.clip(1.0 - (c * k) ** 2, 1e-6, None))
    steer = np.arctan(tan_d) / params.max_steer_rad
    pad = np.zeros((*speed.shape[:-1], 1))
    actions = np.stack(
        [np.concatenate([steer, pad], axis=-1), np.concatenate([a_norm, pad], axis=-1)], axis=-1
    )
    ok = np.concatenate([valid[..., :-1] & valid[..., 1:], np.zeros_like(pad, dtype=bool)], axis=-1)
    return np.clip(np.where(ok[..., None], actions, 0.0), -1.0, 1.0), ok
