"""The kinematic tier: a batched kinematic bicycle model in torch (the abstract simulator).

State per agent: centre-of-mass position (x, y), heading ψ, forward speed v, road-wheel angle δ.
One step of length ``dt`` under commands (δ*, a*) from :func:`actions_to_controls`:

    δ'  = clip(δ + clip(δ* − δ, −δ̇_max·dt, +δ̇_max·dt), −δ_max, +δ_max)      steering-rate limit
    v'  = clip(v + a*·dt, 0, v_max)                                          no reverse gear
    a   = (v' − v) / dt                                                      acceleration achieved
    v̄   = (v + v') / 2                                                       mid-step speed
    β   = atan( l_r / L · tan δ' )                                           slip angle at the CoM
    x'  = x + v̄ · cos(ψ + β) · dt
    y'  = y + v̄ · sin(ψ + β) · dt
    ψ'  = ψ + v̄ · cos β · tan δ' / L · dt        (= v̄ / l_r · sin β · dt)
    r   = v̄ · cos β · tan δ' / L                                             yaw rate

with wheelbase L and CoM-to-rear-axle distance l_r (Rajamani, *Vehicle Dynamics and Control*,
§2.2). The tyres never slip beyond β, so road friction does not limit this tier: it stores the
per-world friction it is given (so tasks can observe it) but its motion ignores it. That is the
gap the physics tier and grounding measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import (
    VehicleParams,
    VehicleState,
    actions_to_controls,
    check_actions,
    load_tensors_state,
    tensors_state,
)


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


class KinematicEngine:
    """Batched kinematic bicycle behind the :class:`~scenefactory.engines.base.Engine` protocol."""

    name = "kinematic"

    def __init__(
        self,
        num_worlds: int,
        agents_per_world: int,
        dt: float = 0.1,
        params: VehicleParams | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        """Allocate state for ``num_worlds × agents_per_world`` vehicles, all invalid until reset."""
        if num_worlds < 1 or agents_per_world < 1:
            raise ValueError(f"need at least one world and one agent, got {num_worlds} x {agents_per_world}")
        if not dt > 0.0:
            raise ValueError(f"dt must be positive, got {dt}")
        self.num_worlds = num_worlds
        self.agents_per_world = agents_per_world
        self.dt = float(dt)
        self.params = params or VehicleParams()
        self.device = torch.device(device)
        shape = (num_worlds, agents_per_world)
        z = torch.zeros(shape, device=self.device)
        self._pos = torch.zeros((*shape, 2), device=self.device)
        self._yaw = z.clone()
        self._speed = z.clone()
        self._steer = z.clone()
        self._accel = z.clone()
        self._yaw_rate = z.clone()
        self._beta = z.clone()
        self._valid = torch.zeros(shape, dtype=torch.bool, device=self.device)
        self.friction = torch.ones(num_worlds, device=self.device)

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Place agents of ``world_ids`` at ``pose`` (n, K, 3) with ``speed_mps`` (n, K), wheels straight."""
        k = self.agents_per_world
        n = int(world_ids.numel())
        if tuple(pose.shape) != (n, k, 3) or tuple(speed_mps.shape) != (n, k) or tuple(valid.shape) != (n, k):
            raise ValueError(
                f"reset expects pose ({n}, {k}, 3), speed ({n}, {k}), valid ({n}, {k}); got "
                f"{tuple(pose.shape)}, {tuple(speed_mps.shape)}, {tuple(valid.shape)}"
            )
        self._pos[world_ids] = pose[..., :2].float()
        self._yaw[world_ids] = pose[..., 2].float()
        self._speed[world_ids] = speed_mps.float().clamp(0.0, self.params.max_speed_mps)
        for buf in (self._steer, self._accel, self._yaw_rate, self._beta):
            buf[world_ids] = 0.0
        self._valid[world_ids] = valid.bool()

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Store per-world friction (observable by tasks; the kinematic motion ignores it)."""
        self.friction[world_ids] = mu.float()

    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """Advance all worlds by ``dt``; inactive or invalid agents are frozen with zero speed."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        steer_target, accel_cmd = actions_to_controls(actions, self.params)
        pos, yaw, speed, steer, accel, yaw_rate, beta = bicycle_step(
            self._pos, self._yaw, self._speed, self._steer, steer_target, accel_cmd, self.params, self.dt
        )
        live = active & self._valid
        live2 = live.unsqueeze(-1)
        self._pos = torch.where(live2, pos, self._pos)
        self._yaw = torch.where(live, yaw, self._yaw)
        zero = torch.zeros_like(speed)
        self._speed = torch.where(live, speed, zero)
        self._steer = torch.where(live, steer, self._steer)
        self._accel = torch.where(live, accel, zero)
        self._yaw_rate = torch.where(live, yaw_rate, zero)
        self._beta = torch.where(live, beta, zero)
        return self.state()

    STATE = ("_pos", "_yaw", "_speed", "_steer", "_accel", "_yaw_rate", "_beta", "_valid", "friction")

    def state_dict(self) -> dict[str, Any]:
        """Copies of the dynamic state (see :meth:`Engine.state_dict`)."""
        return tensors_state(self, self.STATE)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (see :meth:`Engine.load_state_dict`)."""
        load_tensors_state(self, state, self.STATE)

    def collisions(self) -> None:
        """The kinematic tier has no contact model: the task tests box overlap."""
        return None

    def state(self) -> VehicleState:
        """Current batched state (see :class:`VehicleState`)."""
        heading = self._yaw + self._beta
        vel_xy = torch.stack((torch.cos(heading), torch.sin(heading)), dim=-1) * self._speed.unsqueeze(-1)
        vel_b = torch.stack((torch.cos(self._beta), torch.sin(self._beta)), dim=-1) * self._speed.unsqueeze(
            -1
        )
        return VehicleState(
            pos_xy=self._pos,
            yaw=self._yaw,
            vel_xy=vel_xy,
            vel_b=vel_b,
            speed=self._speed,
            yaw_rate=self._yaw_rate,
            steer=self._steer,
            accel=self._accel,
            valid=self._valid,
        )


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
