"""Simulation tiers behind one protocol (see ``engines.base``), and the one place that names them."""

from __future__ import annotations

from collections.abc import Callable

import torch

from scenefactory.engines.base import Engine, VehicleParams, VehicleState
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.errors import UserError

EngineFactory = Callable[[int, int, float, VehicleParams, torch.device], Engine]


def _kinematic(worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device) -> Engine:
    return KinematicEngine(worlds, agents, dt=dt, params=params, device=device)


ENGINES: dict[str, EngineFactory] = {"kinematic": _kinematic}
"""Engine name → factory. The physics tier adds ``mujoco`` here."""


def make_engine(
    name: str,
    num_worlds: int,
    agents_per_world: int,
    dt: float = 0.1,
    params: VehicleParams | None = None,
    device: str | torch.device = "cpu",
) -> Engine:
    """Build engine ``name``; an unknown name is a user error that lists the known ones."""
    if name not in ENGINES:
        raise UserError(f"unknown engine '{name}': expected one of {sorted(ENGINES)}")
    return ENGINES[name](num_worlds, agents_per_world, dt, params or VehicleParams(), torch.device(device))


__all__ = ["ENGINES", "Engine", "VehicleParams", "VehicleState", "make_engine"]
