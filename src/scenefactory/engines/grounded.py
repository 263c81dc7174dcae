"""The grounded tier: the kinematic bicycle corrected by a ``scenefactory ground`` artifact.

Each agent keeps the last H abstract states and actions the method reads (H = the model's
``history_len``: 1 for the Markov methods, the longest delay + 1 for domain randomization and
system identification, the GRU's window for ``history``), and each world keeps its physical knobs
(``GroundedModel.physics``: drawn anew at every reset for domain randomization, constants
otherwise). A step writes the new action into the newest slot, asks the model for the next state
and shifts the history; a reset fills the history with the spawn state and zero actions, the
padding the fit used. There is no contact model: the task tests box overlap, as on the kinematic
tier. With the ``history`` method, :attr:`GroundedEngine.predicted_reward` holds the reward head's
estimate for the last step (for analysis; the task computes its own reward).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from scenefactory.engines.base import VehicleState, check_actions, load_tensors_state, tensors_state
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams


class GroundedEngine:
    """A grounding artifact run as a batched engine (:class:`~scenefactory.engines.base.Engine`)."""

    name = "grounded"

    def __init__(
        self,
        num_worlds: int,
        agents_per_world: int,
        dt: float,
        params: VehicleParams,
        device: torch.device,
        artifact: str | Path,
        seed: int | None = None,
    ) -> None:
        """Load the artifact folder; its step and vehicle must be the task's. Domain-randomized knobs
        are drawn from a generator seeded with ``seed`` (default: the artifact's fit seed)."""
        from scenefactory.dynamics.artifact import load_grounding
        from scenefactory.dynamics.correctors import HistoryCorrection

        self.model, self.config = load_grounding(Path(artifact))
        if not math.isclose(self.model.dt_s, dt, rel_tol=0.0, abs_tol=1e-9):
            raise UserError(
                f"grounding {artifact} steps {self.model.dt_s} s, the task's policy step is {dt} s"
            )
        if self.model.vehicle != params:
            raise UserError(
                f"grounding {artifact} was fitted for vehicle {asdict(self.model.vehicle)}, "
                f"the task drives {asdict(params)}"
            )
        if num_worlds < 1 or agents_per_world < 1:
            raise ValueError(f"need at least one world and one agent, got {num_worlds} x {agents_per_world}")
        self.method = self.model.method
        self.num_worlds, self.agents_per_world = num_worlds, agents_per_world
        self.dt, self.params, self.device = float(dt), params, torch.device(device)
        self.generator = torch.Generator().manual_seed(
            int(self.config.get("seed", 0) if seed is None else seed)
        )
        h = self.model.history_len
        self._states = torch.zeros(num_worlds, agents_per_world, h, 6)
        self._actions = torch.zeros(num_worlds, agents_per_world, h, 2)
        self.phys = self.model.physics(num_worlds, self.generator)
        self._accel = torch.zeros(num_worlds, agents_per_world)
        self._valid = torch.zeros(num_worlds, agents_per_world, dtype=torch.bool)
        self.friction = torch.ones(num_worlds)
        self._history = self.model if isinstance(self.model, HistoryCorrection) else None
        self.predicted_reward: torch.Tensor | None = None

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Fill the histories of ``world_ids`` with the spawn state and no actions; new knobs."""
        n, k = len(world_ids), self.agents_per_world
        if tuple(pose.shape) != (n, k, 3) or tuple(speed_mps.shape) != (n, k) or tuple(valid.shape) != (n, k):
            raise ValueError(
                f"reset expects pose ({n}, {k}, 3), speed ({n}, {k}), valid ({n}, {k}); got "
                f"{tuple(pose.shape)}, {tuple(speed_mps.shape)}, {tuple(valid.shape)}"
            )
        s = torch.zeros(n, k, 6)
        s[..., 0:3] = pose.float()
        s[..., 3] = speed_mps.float().clamp(0.0, self.params.max_speed_mps)
        self._states[world_ids] = s.unsqueeze(2).expand(-1, -1, self._states.shape[2], -1).clone()
        self._actions[world_ids] = 0.0
        self._accel[world_ids] = 0.0
        self._valid[world_ids] = valid.bool()
        self.phys[world_ids] = self.model.physics(n, self.generator)

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Road friction of worlds ``world_ids`` (an input of every method)."""
        self.friction[world_ids] = mu.float()

    @torch.no_grad()
    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """One grounded step for every live agent; others keep their state."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        w, k, h = self.num_worlds, self.agents_per_world, self._states.shape[2]
        live = active & self._valid
        acts = torch.cat((self._actions[:, :, 1:], actions.clamp(-1.0, 1.0).unsqueeze(2)), dim=2)
        states = self._states.reshape(w * k, h, 6)
        flat_acts = acts.reshape(w * k, h, 2)
        friction = self.friction.view(w, 1).expand(w, k).reshape(-1)
        phys = self.phys.view(w, 1, -1).expand(w, k, -1).reshape(w * k, -1)
        if self._history is not None:
            nxt, reward = self._history.predict_with_reward(states, flat_acts, friction)
            self.predicted_reward = reward.reshape(w, k)
        else:
            nxt = self.model.predict_next(states, flat_acts, friction, phys)
        nxt = nxt.reshape(w, k, 6)
        if not bool(torch.isfinite(nxt[live]).all()):
            raise FloatingPointError(f"the grounded model ({self.method.value}) produced non-finite states")
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
        """Current batched state; velocity at the bicycle's slip angle β = atan(l_r / L · tan δ)."""
        s = self._states[:, :, -1]
        yaw, speed, steer = s[..., 2], s[..., 3], s[..., 5]
        p = self.params
        beta = torch.atan(p.rear_axle_to_com_m / p.wheelbase_m * torch.tan(steer))
        heading = yaw + beta
        return VehicleState(
            pos_xy=s[..., 0:2].clone(),
            yaw=yaw.clone(),
            vel_xy=torch.stack((torch.cos(heading), torch.sin(heading)), dim=-1) * speed.unsqueeze(-1),
            vel_b=torch.stack((torch.cos(beta), torch.sin(beta)), dim=-1) * speed.unsqueeze(-1),
            speed=speed.clone(),
            yaw_rate=s[..., 4].clone(),
            steer=steer.clone(),
            accel=self._accel.clone(),
            valid=self._valid,
        )
