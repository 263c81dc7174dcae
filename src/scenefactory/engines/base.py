"""The engine protocol every simulation tier implements, and the typed batched vehicle state.

Every engine simulates ``num_worlds`` worlds of ``agents_per_world`` vehicles. The task never knows
which engine runs: it sends normalized actions ``[num_worlds, agents_per_world, 2]`` = ``[steer,
accel]`` in [-1, 1] and reads a :class:`VehicleState`. The meaning of an action is fixed here, in
:func:`actions_to_controls`, so it is the same on every tier:

- ``steer`` → target front-wheel angle ``δ* = steer · max_steer_rad``; the wheel angle moves toward
  it no faster than ``max_steer_rate_radps``.
- ``accel`` ≥ 0 → longitudinal acceleration ``accel · max_accel_mps2``; ``accel`` < 0 → braking,
  deceleration ``-accel · max_brake_mps2``, which stops the car (no reverse gear).

Inactive agents (finished, crashed, off-road, or padding) are removed from the dynamics: they do not
move and the task ignores them until their world resets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from scenefactory.vehicles.params import VehicleParams


@dataclass(frozen=True)
class VehicleState:
    """Batched vehicle state, every field ``[num_worlds, agents_per_world, ...]`` (float32 unless noted).

    - ``pos_xy``    (W, K, 2) centre of mass in the world frame [m].
    - ``yaw``       (W, K) heading, counter-clockwise from +x [rad].
    - ``vel_xy``    (W, K, 2) velocity in the world frame [m/s].
    - ``vel_b``     (W, K, 2) velocity in the body frame (x forward, y left) [m/s].
    - ``speed``     (W, K) speed of the centre of mass, ≥ 0 when moving forward [m/s].
    - ``yaw_rate``  (W, K) [rad/s].
    - ``steer``     (W, K) front road-wheel angle [rad].
    - ``accel``     (W, K) longitudinal acceleration over the last step [m/s²].
    - ``valid``     (W, K) bool, the agent exists in this world.
    """

    pos_xy: torch.Tensor
    yaw: torch.Tensor
    vel_xy: torch.Tensor
    vel_b: torch.Tensor
    speed: torch.Tensor
    yaw_rate: torch.Tensor
    steer: torch.Tensor
    accel: torch.Tensor
    valid: torch.Tensor


@runtime_checkable
class Engine(Protocol):
    """What every tier (kinematic, mujoco, learned) provides."""

    name: str
    num_worlds: int
    agents_per_world: int
    dt: float
    device: torch.device
    params: VehicleParams

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Place the agents of worlds ``world_ids`` (n,) at ``pose`` (n, K, 3: x, y, yaw) with
        forward speed ``speed_mps`` (n, K), wheels straight; ``valid`` (n, K) marks agents that exist."""
        ...

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Set the road friction coefficient ``mu`` (n,) of worlds ``world_ids`` (n,)."""
        ...

    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """Advance every world by ``dt`` under normalized ``actions`` (W, K, 2); agents with
        ``active`` (W, K) False do not move. Returns the new state."""
        ...

    def state(self) -> VehicleState:
        """The current state without stepping."""
        ...

    def collisions(self) -> torch.Tensor | None:
        """(W, K) bool vehicle–vehicle contacts during the last step, from the engine's own contact
        model; ``None`` when the engine has none (the task then tests box overlap itself)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The engine's complete dynamic state as plain data (tensors, nested dicts), copied: after
        :meth:`load_state_dict` of it, an engine built with the same arguments steps bit for bit
        as this one would have (what a checkpoint needs for an exact resume)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; ``ValueError`` names a missing entry or a wrong shape."""
        ...


def tensors_state(obj: object, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Copies of the tensor (or ``torch.Generator``: its state) attributes ``names`` of ``obj``."""
    out = {}
    for name in names:
        value = getattr(obj, name)
        out[name] = value.get_state() if isinstance(value, torch.Generator) else value.detach().cpu().clone()
    return out


def load_tensors_state(obj: object, state: Mapping[str, Any], names: tuple[str, ...]) -> None:
    """Set the attributes ``names`` of ``obj`` from :func:`tensors_state`, checking every entry first
    (shape and dtype as allocated), so a bad state changes nothing."""
    owner = type(obj).__name__
    for name in names:
        if name not in state or not isinstance(state[name], torch.Tensor):
            raise ValueError(f"{owner} state lacks the tensor '{name}'")
        current = getattr(obj, name)
        if isinstance(current, torch.Generator):
            continue
        value = state[name]
        if tuple(value.shape) != tuple(current.shape) or value.dtype != current.dtype:
            raise ValueError(
                f"{owner} state '{name}' is {value.dtype}{tuple(value.shape)}, this engine holds "
                f"{current.dtype}{tuple(current.shape)} (another number of worlds or agents?)"
            )
    for name in names:
        current = getattr(obj, name)
        if isinstance(current, torch.Generator):
            current.set_state(state[name])
        else:
            setattr(obj, name, state[name].to(current.device).clone())


def check_actions(actions: torch.Tensor, num_worlds: int, agents_per_world: int) -> None:
    """Fail loudly on a wrong action shape or NaN/inf actions (never step on garbage)."""
    expected = (num_worlds, agents_per_world, 2)
    if tuple(actions.shape) != expected:
        raise ValueError(
            f"actions have shape {tuple(actions.shape)}, expected {expected} (worlds, agents, 2)"
        )
    if not bool(torch.isfinite(actions).all()):
        bad = (~torch.isfinite(actions)).nonzero()[0].tolist()
        raise FloatingPointError(f"non-finite action at [world, agent, channel] = {bad}")


def check_reset(
    pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor, n: int, agents: int
) -> None:
    """Fail loudly unless a reset of ``n`` worlds of ``agents`` agents got ``pose`` (n, K, 3),
    ``speed_mps`` (n, K) and ``valid`` (n, K)."""
    k = agents
    if tuple(pose.shape) != (n, k, 3) or tuple(speed_mps.shape) != (n, k) or tuple(valid.shape) != (n, k):
        raise ValueError(
            f"reset expects pose ({n}, {k}, 3), speed ({n}, {k}), valid ({n}, {k}); got "
            f"{tuple(pose.shape)}, {tuple(speed_mps.shape)}, {tuple(valid.shape)}"
        )
