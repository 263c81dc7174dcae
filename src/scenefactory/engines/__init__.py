"""Simulation tiers behind one protocol (see ``engines.base``), and the one place that names them.

An :class:`~scenefactory.engines.spec.EngineSpec` says which tier with what settings;
:func:`make_engine` builds it for a number of worlds through :data:`ENGINES`, the registry of
tier → factory.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from scenefactory.engines.base import Engine, VehicleState
from scenefactory.engines.history import grounded_engine, learned_engine
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.engines.mujoco_engine import MujocoEngine
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ, EngineSpec
from scenefactory.engines.wrappers import LaggedEngine
from scenefactory.vehicles.params import VehicleParams

EngineFactory = Callable[[EngineSpec, int, int, float, VehicleParams, torch.device], Engine]
"""``(spec, num_worlds, agents_per_world, dt, params, device)`` → the tier's engine, unwrapped."""


def _kinematic(
    spec: EngineSpec, worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device
) -> Engine:
    return KinematicEngine(worlds, agents, dt=dt, params=params, device=device)


def _mujoco(
    spec: EngineSpec, worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device
) -> Engine:
    return MujocoEngine(worlds, agents, dt=dt, params=params, device=device, physics_hz=spec.physics_hz)


def _mujoco_warp(
    spec: EngineSpec, worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device
) -> Engine:
    from scenefactory.engines.mjwarp import require_warp

    require_warp()  # the optional extra: a clear error when it is missing
    from scenefactory.engines.warp_engine import WarpEngine  # imports Warp: only for this tier

    return WarpEngine(worlds, agents, dt=dt, params=params, device=device, physics_hz=spec.physics_hz)


def _learned(
    spec: EngineSpec, worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device
) -> Engine:
    assert spec.dynamics_model is not None  # EngineSpec requires it for this tier
    return learned_engine(worlds, agents, dt, params, device, spec.dynamics_model)


def _grounded(
    spec: EngineSpec, worlds: int, agents: int, dt: float, params: VehicleParams, device: torch.device
) -> Engine:
    assert spec.grounding is not None  # EngineSpec requires it for this tier
    return grounded_engine(worlds, agents, dt, params, device, spec.grounding)


ENGINES: dict[str, EngineFactory] = {
    "kinematic": _kinematic,
    "mujoco": _mujoco,
    "learned": _learned,
    "grounded": _grounded,
    "mujoco-warp": _mujoco_warp,
}
"""Tier → factory, one entry per :data:`~scenefactory.engines.spec.TIERS` (the kinematic, learned
and grounded tiers step once per policy step and ignore ``physics_hz``; ``mujoco-warp`` builds on
``device``, the CPU or a CUDA device)."""


def make_engine(
    spec: EngineSpec,
    num_worlds: int,
    agents_per_world: int,
    dt: float = 0.1,
    params: VehicleParams | None = None,
    device: str | torch.device = "cpu",
) -> Engine:
    """Build ``spec``'s engine for ``num_worlds`` × ``agents_per_world`` agents stepping ``dt`` s.

    ``spec.action_lag_steps`` > 0 wraps it in a :class:`~scenefactory.engines.wrappers.LaggedEngine`.
    A spec is checked when it is made; a model file or grounding folder that is missing or foreign
    is a :class:`~scenefactory.errors.CheckpointError` naming it, and one made for another policy
    step or car a :class:`~scenefactory.errors.UserError`.
    """
    if not isinstance(spec, EngineSpec):
        raise TypeError(f"make_engine takes an EngineSpec, got {spec!r} (e.g. EngineSpec(tier='kinematic'))")
    engine = ENGINES[spec.tier](
        spec, num_worlds, agents_per_world, dt, params or VehicleParams(), torch.device(device)
    )
    if spec.action_lag_steps:
        engine = LaggedEngine(engine, spec.action_lag_steps)
    return engine


__all__ = [
    "DEFAULT_PHYSICS_HZ",
    "ENGINES",
    "Engine",
    "EngineSpec",
    "VehicleParams",
    "VehicleState",
    "make_engine",
]
