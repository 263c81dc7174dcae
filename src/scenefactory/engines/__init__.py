"""Simulation tiers behind one protocol (see ``engines.base``), and the one place that names them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from scenefactory.engines.base import Engine, VehicleState
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams

DEFAULT_PHYSICS_HZ = 120.0
"""Physics rate of the mujoco tier unless told otherwise; ``validate vehicle`` passes at it."""


@dataclass(frozen=True)
class EngineOptions:
    """Tier-specific settings: ``physics_hz`` (mujoco), ``dynamics_model`` (learned: a model.pt),
    ``grounding`` (grounded: a ``scenefactory ground`` folder), and ``action_lag_steps`` (any tier:
    actions applied that many policy steps late, :class:`~scenefactory.engines.wrappers.LaggedEngine`)."""

    physics_hz: float = DEFAULT_PHYSICS_HZ
    dynamics_model: str | None = None
    grounding: str | None = None
    action_lag_steps: int = 0


EngineFactory = Callable[[int, int, float, VehicleParams, torch.device, EngineOptions], Engine]


def _kinematic(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, opts: EngineOptions
) -> Engine:
    return KinematicEngine(worlds, agents, dt=dt, params=params, device=device)


def _mujoco(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, opts: EngineOptions
) -> Engine:
    from scenefactory.engines.mujoco_engine import MujocoEngine

    return MujocoEngine(worlds, agents, dt=dt, params=params, device=device, physics_hz=opts.physics_hz)


def _learned(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, opts: EngineOptions
) -> Engine:
    from scenefactory.engines.learned import LearnedEngine

    if opts.dynamics_model is None:
        raise UserError(
            "--engine learned needs --dynamics-model PATH (a model.pt from 'scenefactory fit-dynamics')"
        )
    return LearnedEngine(worlds, agents, dt, params, device, opts.dynamics_model)


def _grounded(
    worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device, opts: EngineOptions
) -> Engine:
    from scenefactory.engines.grounded import GroundedEngine

    if opts.grounding is None:
        raise UserError("--engine grounded needs --grounding PATH (a folder from 'scenefactory ground')")
    return GroundedEngine(worlds, agents, dt, params, device, opts.grounding)


ENGINES: dict[str, EngineFactory] = {
    "kinematic": _kinematic,
    "mujoco": _mujoco,
    "learned": _learned,
    "grounded": _grounded,
}
"""Engine name → factory (the kinematic tier ignores ``physics_hz``: it steps once per policy step)."""


def make_engine(
    name: str,
    num_worlds: int,
    agents_per_world: int,
    dt: float = 0.1,
    params: VehicleParams | None = None,
    device: str | torch.device = "cpu",
    physics_hz: float = DEFAULT_PHYSICS_HZ,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
) -> Engine:
    """Build engine ``name``; an unknown name is a user error that lists the known ones.

    ``action_lag_steps`` > 0 wraps the engine in a :class:`~scenefactory.engines.wrappers.LaggedEngine`.
    """
    if name not in ENGINES:
        raise UserError(f"unknown engine '{name}': expected one of {sorted(ENGINES)}")
    if not physics_hz > 0:
        raise UserError(f"physics rate must be positive, got {physics_hz} Hz")
    if isinstance(action_lag_steps, bool) or not isinstance(action_lag_steps, int) or action_lag_steps < 0:
        raise UserError(f"--action-lag-steps must be an integer >= 0, got {action_lag_steps!r}")
    if grounding is not None and name != "grounded":
        raise UserError(f"--grounding applies to --engine grounded, not to --engine {name}")
    opts = EngineOptions(
        physics_hz=physics_hz,
        dynamics_model=dynamics_model,
        grounding=grounding,
        action_lag_steps=action_lag_steps,
    )
    engine = ENGINES[name](
        num_worlds, agents_per_world, dt, params or VehicleParams(), torch.device(device), opts
    )
    if opts.action_lag_steps:
        from scenefactory.engines.wrappers import LaggedEngine

        engine = LaggedEngine(engine, opts.action_lag_steps)
    return engine


__all__ = [
    "DEFAULT_PHYSICS_HZ",
    "ENGINES",
    "Engine",
    "EngineOptions",
    "VehicleParams",
    "VehicleState",
    "make_engine",
]
