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

import torch

from scenefactory.dynamics.bicycle import bicycle_step
from scenefactory.engines.base import (
    VehicleState,
    check_actions,
    check_reset,
    load_tensors_state,
    tensors_state,
)
from scenefactory.vehicles.params import VehicleParams, actions_to_controls


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
        check_reset(pose, speed_mps, valid, n, k)
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
