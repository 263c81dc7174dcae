"""Simulation tiers behind one protocol (see ``engines.base``), and the one place that names them."""

from __future__ import annotations

from collections.abc import Callable

import torch

from scenefactory.engines.base import Engine, VehicleParams, VehicleState
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.errors import UserError

EngineFactory = Callable[[int, int, float, VehicleParams, torch.device, float], Engine]

DEFAULT_PHYSICS_HZ = 120.0
"""Physics rate of the mujoco tier unless told otherwise; ``validate vehicle`` passes at it."""


def _kinematic(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, physics_hz: float
) -> Engine:
    return KinematicEngine(worlds, agents, dt=dt, params=params, device=device)


def _mujoco(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, physics_hz: float
) -> Engine:
    from scenefactory.engines.mujoco_engine import MujocoEngine

    return MujocoEngine(worlds, agents, dt=dt, params=params, device=device, physics_hz=physics_hz)


ENGINES: dict[str, EngineFactory] = {"kinematic": _kinematic, "mujoco": _mujoco}
"""Engine name → factory (the kinematic tier ignores ``physics_hz``: it steps once per policy step)."""


def make_engine(
    name: str,
    num_worlds: int,
    agents_per_world: int,
    dt: float = 0.1,
    params: VehicleParams | None = None,
    device: str | torch.device = "cpu",
    physics_hz: float = DEFAULT_PHYSICS_HZ,
) -> Engine:
    """Build engine ``name``; an unknown name is a user error that lists the known ones."""
    if name not in ENGINES:
        raise UserError(f"unknown engine '{name}': expected one of {sorted(ENGINES)}")
    if not physics_hz > 0:
        raise UserError(f"physics rate must be positive, got {physics_hz} Hz")
    factory = ENGINES[name]
    return factory(
        num_worlds, agents_per_world, dt, params or VehicleParams(), torch.device(device), physics_hz
    )


__all__ = ["DEFAULT_PHYSICS_HZ", "ENGINES", "Engine", "VehicleParams", "VehicleState", "make_engine"]
