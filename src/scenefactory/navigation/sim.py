"""Playing navigation policies in a (grounded) abstract simulator, batched over episodes.

Order of one step: the policy's command from the current abstract state; the command clipped to
the limits and pushed into the command history; the model's next state from the state and command
histories and each episode's knobs (drawn at the start); the task terms on the new state (goal
reached, collision); an episode's outcome is fixed at its first event or at its time limit, and a
finished episode keeps stepping with its outcome frozen (the batch stays whole).

Episodes start at the origin at rest, heading the task's start yaw ± ``yaw_jitter_rad`` (uniform),
the history padded with the start state and zero commands (as the fits pad segment starts).
"""

from __future__ import annotations

import math

import torch

from scenefactory.navigation.engine import CommandLimits
from scenefactory.navigation.grounded import NavModel
from scenefactory.navigation.policy import Outcomes, follower_command
from scenefactory.navigation.tasks import TaskBatch, collided, reached, route_length, route_progress

YAW_JITTER_RAD = 0.2
"""Start headings are the task's ± this, uniform (on both engines)."""


def start_yaw(batch: TaskBatch, generator: torch.Generator) -> torch.Tensor:
    """(E,) start headings [rad]."""
    return batch.start_yaw + YAW_JITTER_RAD * (2.0 * torch.rand(batch.size, generator=generator) - 1.0)


class OutcomeTracker:
    """Fixes each episode's outcome at its first event (see the module docstring)."""

    def __init__(self, batch: TaskBatch) -> None:
        """All episodes running."""
        e = batch.size
        self.batch = batch
        self.done = torch.zeros(e, dtype=torch.bool)
        self.success = torch.zeros(e, dtype=torch.bool)
        self.collided = torch.zeros(e, dtype=torch.bool)
        self.fell = torch.zeros(e, dtype=torch.bool)
        self.time_s = torch.full((e,), math.nan)
        self.progress = torch.zeros(e)

    def update(self, pos: torch.Tensor, t_s: float, fell: torch.Tensor | None = None) -> None:
        """Record the events of positions ``pos`` (E, 2) at time ``t_s`` (and Go1 falls (E,))."""
        live = ~self.done
        hit = reached(pos, self.batch) & live
        crash = collided(pos, self.batch) & live & ~hit
        down = (fell & live & ~hit & ~crash) if fell is not None else torch.zeros_like(hit)
        self.success |= hit
        self.collided |= crash
        self.fell |= down
        self.time_s = torch.where(hit, torch.full_like(self.time_s, t_s), self.time_s)
        prog = route_progress(pos, self.batch.route) / route_length(self.batch.route)
        self.progress = torch.where(live, torch.where(hit, torch.ones_like(prog), prog), self.progress)
        self.done |= hit | crash | down | (t_s >= self.batch.time_limit_s - 1e-6)

    def outcomes(self) -> Outcomes:
        """The episodes' outcomes."""
        return Outcomes(self.success, self.time_s, self.collided, self.fell, self.progress)


@torch.no_grad()
def rollout_abstract(
    model: NavModel, limits: CommandLimits, batch: TaskBatch, theta: torch.Tensor, generator: torch.Generator
) -> Outcomes:
    """Play parameters ``theta`` (E, 6) on ``batch`` in ``model`` (module docstring)."""
    e, h = batch.size, model.history_len
    knobs = model.physics(e, generator)
    state = torch.zeros(e, 6)
    state[:, 2] = start_yaw(batch, generator)
    states = state[:, None, :].repeat(1, h, 1)
    actions = torch.zeros(e, h, 3)
    track = OutcomeTracker(batch)
    steps = math.ceil(float(batch.time_limit_s.max()) / model.dt_s - 1e-9)
    for k in range(steps):
        cmd = follower_command(states[:, -1], batch, theta, limits)
        actions = torch.cat((actions[:, 1:], cmd[:, None]), dim=1)
        nxt = model.predict_next(states, actions, knobs)
        states = torch.cat((states[:, 1:], nxt[:, None]), dim=1)
        track.update(nxt[:, :2], (k + 1) * model.dt_s)
        if bool(track.done.all()):
            break
    return track.outcomes()
