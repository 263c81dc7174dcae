"""The learned and the grounded tiers: a history model run as a batched engine.

Both tiers step a :class:`~scenefactory.dynamics.history.HistoryModel`: the learned tier a fitted
dynamics model (``scenefactory fit-dynamics``, :func:`learned_engine`), the grounded tier the
kinematic bicycle corrected by a ``scenefactory ground`` artifact (:func:`grounded_engine`).

Each agent keeps the last H abstract states (x, y, yaw, speed, yaw rate, steering) and the last H
actions applied (H = the model's ``history_len``: 1 for the Markov models, the longest delay + 1
for domain randomization and system identification, the window of the history models), and each
world keeps its physical knobs (drawn anew at every reset for domain randomization, constants for
the other grounded methods, none for the learned tier), drawn with a generator seeded at
construction. A step appends the new action, asks the model for the next state and shifts the
histories; a reset fills the history with the spawn state (wheels straight) and zero actions — the
padding the fits train with. The model sees the world's road friction. There is no contact model:
the task tests box overlap, as on the kinematic tier. When the model estimates rewards (the
grounded ``history`` method), :attr:`HistoryEngine.predicted_reward` holds the estimate for the
last step (for analysis; the task computes its own reward).

The two tiers differ only in how the model's state is read (``bicycle``): the grounded models are
corrections of the kinematic bicycle, so a spawn speed is clamped to the car's range [0, v_max] and
the velocity points along the bicycle's slip angle β = atan(l_r / L · tan δ); a learned model gives
no side slip, so its velocity is along the heading, and the spawn speed is taken as given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from scenefactory.dynamics.artifact import load_grounding
from scenefactory.dynamics.history import HistoryModel, LearnedHistoryModel
from scenefactory.dynamics.model_file import load_dynamics_model
from scenefactory.engines.base import (
    VehicleState,
    check_actions,
    check_reset,
    load_tensors_state,
    tensors_state,
)
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams


class HistoryEngine:
    """A :class:`~scenefactory.dynamics.history.HistoryModel` behind the
    :class:`~scenefactory.engines.base.Engine` protocol (module docstring)."""

    def __init__(
        self,
        model: HistoryModel,
        num_worlds: int,
        agents_per_world: int,
        dt: float,
        params: VehicleParams,
        device: str | torch.device,
        *,
        name: str,
        source: str,
        bicycle: bool,
        seed: int,
    ) -> None:
        """Run ``model`` for ``num_worlds`` × ``agents_per_world`` agents as tier ``name``.

        ``source`` names the model in messages (e.g. ``"grounding runs/g"``); the model's step
        must be the task's policy step ``dt``. ``bicycle`` reads the state as the kinematic
        bicycle's (module docstring); ``seed`` seeds the generator of the knobs.
        """
        if not math.isclose(model.dt_s, dt, rel_tol=0.0, abs_tol=1e-9):
            raise UserError(f"{source} steps {model.dt_s} s, the task's policy step is {dt} s")
        if num_worlds < 1 or agents_per_world < 1:
            raise ValueError(f"need at least one world and one agent, got {num_worlds} x {agents_per_world}")
        self.model, self.name, self.source, self.bicycle = model, name, source, bicycle
        self.num_worlds, self.agents_per_world = num_worlds, agents_per_world
        self.dt, self.params, self.device = float(dt), params, torch.device(device)
        self.generator = torch.Generator().manual_seed(int(seed))
        h = model.history_len
        self._states = torch.zeros(num_worlds, agents_per_world, h, 6)
        self._actions = torch.zeros(num_worlds, agents_per_world, h, 2)  # the last H applied
        self.phys = model.physics(num_worlds, self.generator)
        self._accel = torch.zeros(num_worlds, agents_per_world)
        self._valid = torch.zeros(num_worlds, agents_per_world, dtype=torch.bool)
        self.friction = torch.ones(num_worlds)
        self.predicted_reward: torch.Tensor | None = None

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Fill the histories of ``world_ids`` with the spawn state and no actions; new knobs."""
        n, k = len(world_ids), self.agents_per_world
        check_reset(pose, speed_mps, valid, n, k)
        speed = speed_mps.float()
        s = torch.zeros(n, k, 6)
        s[..., 0:3] = pose.float()
        s[..., 3] = speed.clamp(0.0, self.params.max_speed_mps) if self.bicycle else speed
        self._states[world_ids] = s.unsqueeze(2).expand(-1, -1, self._states.shape[2], -1).clone()
        self._actions[world_ids] = 0.0
        self._accel[world_ids] = 0.0
        self._valid[world_ids] = valid.bool()
        self.phys[world_ids] = self.model.physics(n, self.generator)

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Road friction of worlds ``world_ids`` (an input of the model)."""
        self.friction[world_ids] = mu.float()

    @torch.no_grad()
    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """One model step for every live agent; others keep their state."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        w, k, h = self.num_worlds, self.agents_per_world, self._states.shape[2]
        live = active & self._valid
        acts = torch.cat((self._actions[:, :, 1:], actions.clamp(-1.0, 1.0).unsqueeze(2)), dim=2)
        friction = self.friction.view(w, 1).expand(w, k).reshape(-1)
        phys = self.phys.view(w, 1, -1).expand(w, k, -1).reshape(w * k, -1)
        nxt, reward = self.model.predict(
            self._states.reshape(w * k, h, 6), acts.reshape(w * k, h, 2), friction, phys
        )
        if reward is not None:
            self.predicted_reward = reward.reshape(w, k)
        nxt = nxt.reshape(w, k, 6)
        if not bool(torch.isfinite(nxt[live]).all()):
            raise FloatingPointError(
                f"the {self.name} tier's model ({self.source}) produced non-finite states"
            )
        current = self._states[:, :, -1]
        self._accel = torch.where(
            live, (nxt[..., 3] - current[..., 3]) / self.dt, torch.zeros_like(self._accel)
        )
        new_states = torch.cat((self._states[:, :, 1:], nxt.unsqueeze(2)), dim=2)
        keep = live.view(w, k, 1, 1)
        self._states = torch.where(keep, new_states, self._states)
        self._actions = torch.where(keep, acts, self._actions)
        return self.state()

    STATE = ("_states", "_actions", "_accel", "_valid", "friction", "phys", "generator")

    def state_dict(self) -> dict[str, Any]:
        """Copies of the dynamic state (see :meth:`Engine.state_dict`)."""
        return tensors_state(self, self.STATE)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (see :meth:`Engine.load_state_dict`)."""
        load_tensors_state(self, state, self.STATE)

    def collisions(self) -> None:
        """No contact model: the task tests box overlap."""
        return None

    def state(self) -> VehicleState:
        """Current batched state; the velocity's direction as ``bicycle`` says (module docstring)."""
        s = self._states[:, :, -1]
        yaw, speed, steer = s[..., 2], s[..., 3], s[..., 5]
        if self.bicycle:
            p = self.params
            beta = torch.atan(p.rear_axle_to_com_m / p.wheelbase_m * torch.tan(steer))
            heading = yaw + beta
            vel_xy = torch.stack((torch.cos(heading), torch.sin(heading)), dim=-1) * speed.unsqueeze(-1)
            vel_b = torch.stack((torch.cos(beta), torch.sin(beta)), dim=-1) * speed.unsqueeze(-1)
        else:
            vel_xy = torch.stack((torch.cos(yaw), torch.sin(yaw)), dim=-1) * speed.unsqueeze(-1)
            vel_b = torch.stack((speed, torch.zeros_like(speed)), dim=-1)
        return VehicleState(
            pos_xy=s[..., 0:2].clone(),
            yaw=yaw.clone(),
            vel_xy=vel_xy,
            vel_b=vel_b,
            speed=speed.clone(),
            yaw_rate=s[..., 4].clone(),
            steer=steer.clone(),
            accel=self._accel.clone(),
            valid=self._valid,
        )


def learned_engine(
    num_worlds: int,
    agents_per_world: int,
    dt: float,
    params: VehicleParams,
    device: str | torch.device,
    model_path: Path,
) -> HistoryEngine:
    """The learned tier: the model at ``model_path``, whose step must be the policy step ``dt``.

    A missing or foreign file is a :class:`~scenefactory.errors.CheckpointError` naming it.
    """
    model, _ = load_dynamics_model(Path(model_path))
    return HistoryEngine(
        LearnedHistoryModel(model),
        num_worlds,
        agents_per_world,
        dt,
        params,
        device,
        name="learned",
        source=f"dynamics model {model_path}",
        bicycle=False,
        seed=0,
    )


def grounded_engine(
    num_worlds: int,
    agents_per_world: int,
    dt: float,
    params: VehicleParams,
    device: str | torch.device,
    artifact: Path,
    seed: int | None = None,
) -> HistoryEngine:
    """The grounded tier: the artifact folder ``artifact``, fitted for this step ``dt`` and car
    ``params``. Domain-randomized knobs are drawn from a generator seeded with ``seed`` (default:
    the artifact's fit seed)."""
    model, config = load_grounding(Path(artifact))
    source = f"grounding {artifact}"
    if model.vehicle != params:  # (the step is checked by HistoryEngine)
        raise UserError(
            f"{source} was fitted for vehicle {asdict(model.vehicle)}, the task drives {asdict(params)}"
        )
    return HistoryEngine(
        model,
        num_worlds,
        agents_per_world,
        dt,
        params,
        device,
        name="grounded",
        source=source,
        bicycle=True,
        seed=int(config.get("seed", 0) if seed is None else seed),
    )
