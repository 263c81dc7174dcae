"""The learned tier: a fitted dynamics model (``grounding.models``) run as a batched engine.

Each agent keeps the last H abstract states (x, y, yaw, speed, yaw rate, steering) and actions the
model was trained on; a step writes the new action into the newest slot, asks the model for the
next state (``predict_next``), and shifts the history. A reset fills the history with the spawn
state and zero actions — the padding ``fit_dynamics`` trains with. The model sees the world's road
friction. There is no contact model: the task tests box overlap, as on the kinematic tier.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from scenefactory.engines.base import VehicleState, check_actions, load_tensors_state, tensors_state
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams


class LearnedEngine:
    """Batched learned dynamics behind the :class:`~scenefactory.engines.base.Engine` protocol."""

    name = "learned"

    def __init__(
        self,
        num_worlds: int,
        agents_per_world: int,
        dt: float,
        params: VehicleParams,
        device: torch.device,
        model_path: str | Path,
    ) -> None:
        """Load the model at ``model_path``; its time step must equal the policy step ``dt``."""
        from scenefactory.dynamics.model_file import load_dynamics_model

        self.model, self.fit_metrics = load_dynamics_model(Path(model_path))
        self.model.eval()
        model_dt = self.model.cfg.dt_s
        if model_dt is None or abs(float(model_dt) - dt) > 1e-9:
            raise UserError(
                f"dynamics model {model_path} steps {model_dt} s, the task's policy step is {dt} s"
            )
        self.num_worlds, self.agents_per_world = num_worlds, agents_per_world
        self.dt, self.params, self.device = float(dt), params, torch.device(device)
        h = self.model.history_len
        self._states = torch.zeros(num_worlds, agents_per_world, h, 6)
        self._actions = torch.zeros(num_worlds, agents_per_world, h, 2)
        self._accel = torch.zeros(num_worlds, agents_per_world)
        self._valid = torch.zeros(num_worlds, agents_per_world, dtype=torch.bool)
        self.friction = torch.ones(num_worlds)

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Fill the histories of ``world_ids`` with the spawn state (wheels straight) and no actions."""
        s = torch.zeros(len(world_ids), self.agents_per_world, 6)
        s[..., 0:3] = pose.float()
        s[..., 3] = speed_mps.float()
        self._states[world_ids] = s.unsqueeze(2).expand(-1, -1, self._states.shape[2], -1).clone()
        self._actions[world_ids] = 0.0
        self._accel[world_ids] = 0.0
        self._valid[world_ids] = valid.bool()

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Road friction of worlds ``world_ids`` (an input of the model)."""
        self.friction[world_ids] = mu.float()

    @torch.no_grad()
    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """One model step for every live agent; others keep their state."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        w, k, h = self.num_worlds, self.agents_per_world, self._states.shape[2]
        live = active & self._valid
        acts = self._actions.clone()
        acts[:, :, -1] = actions.clamp(-1.0, 1.0)
        friction = self.friction.view(w, 1).expand(w, k).reshape(-1)
        nxt = self.model.predict_next(self._states.reshape(w * k, h, 6), acts.reshape(w * k, h, 2), friction)
        nxt = nxt.reshape(w, k, 6)
        if not bool(torch.isfinite(nxt[live]).all()):
            raise FloatingPointError("the learned dynamics model produced non-finite states")
        current = self._states[:, :, -1]
        self._accel = torch.where(
            live, (nxt[..., 3] - current[..., 3]) / self.dt, torch.zeros_like(self._accel)
        )
        new_states = torch.cat((self._states[:, :, 1:], nxt.unsqueeze(2)), dim=2)
        new_actions = torch.cat((acts[:, :, 1:], torch.zeros(w, k, 1, 2)), dim=2)
        keep = live.view(w, k, 1, 1)
        self._states = torch.where(keep, new_states, self._states)
        self._actions = torch.where(keep, new_actions, self._actions)
        return self.state()

    STATE = ("_states", "_actions", "_accel", "_valid", "friction")

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
        """Current batched state; the model gives no side slip, so velocity is along the heading."""
        s = self._states[:, :, -1]
        yaw, speed = s[..., 2], s[..., 3]
        heading = torch.stack((torch.cos(yaw), torch.sin(yaw)), dim=-1)
        return VehicleState(
            pos_xy=s[..., 0:2].clone(),
            yaw=yaw.clone(),
            vel_xy=heading * speed.unsqueeze(-1),
            vel_b=torch.stack((speed, torch.zeros_like(speed)), dim=-1),
            speed=speed.clone(),
            yaw_rate=s[..., 4].clone(),
            steer=s[..., 5].clone(),
            accel=self._accel.clone(),
            valid=self._valid,
        )
