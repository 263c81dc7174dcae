"""Engine wrappers: the same protocol with something added around any tier.

:class:`LaggedEngine` delays the actions by ``n`` policy steps — an actuator lag that none of the
tiers models, used to make a target the kinematic bicycle cannot match (``--action-lag-steps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from scenefactory.engines.base import Engine, VehicleState, check_actions, load_tensors_state


class LaggedEngine:
    """Actions reach the wrapped engine ``lag_steps`` policy steps late.

    The action sent at step t is applied at step t + n. After a world's reset its queue is empty:
    its first n steps apply the zero action (steer toward straight, no throttle or brake). The
    queue advances every step for every agent; an inactive agent's queued actions are discarded
    with it at the reset. Everything else is the wrapped engine's.
    """

    def __init__(self, inner: Engine, lag_steps: int) -> None:
        """Wrap ``inner`` with a delay of ``lag_steps`` ≥ 1 policy steps."""
        if isinstance(lag_steps, bool) or not isinstance(lag_steps, int) or lag_steps < 1:
            raise ValueError(f"lag_steps must be an integer >= 1, got {lag_steps!r}")
        self.inner, self.lag_steps = inner, lag_steps
        self.name = f"{inner.name}+lag{lag_steps}"
        self.num_worlds, self.agents_per_world = inner.num_worlds, inner.agents_per_world
        self.dt, self.device, self.params = inner.dt, inner.device, inner.params
        # (W, K, n, 2): oldest first; slot 0 is applied at the next step
        self._queue = torch.zeros(self.num_worlds, self.agents_per_world, lag_steps, 2, device=self.device)

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Reset the wrapped worlds and empty their action queues."""
        self.inner.reset(world_ids, pose, speed_mps, valid)
        self._queue[world_ids] = 0.0

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Passed through."""
        self.inner.set_friction(world_ids, mu)

    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """Queue ``actions`` (W, K, 2) and step the wrapped engine with the ones sent n steps ago."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        applied = self._queue[:, :, 0].clone()
        self._queue = torch.cat((self._queue[:, :, 1:], actions.to(self._queue).unsqueeze(2)), dim=2)
        return self.inner.step(applied, active)

    def state(self) -> VehicleState:
        """Passed through."""
        return self.inner.state()

    def collisions(self) -> torch.Tensor | None:
        """Passed through."""
        return self.inner.collisions()

    def state_dict(self) -> dict[str, Any]:
        """The action queue and the wrapped engine's state."""
        return {"queue": self._queue.detach().cpu().clone(), "inner": self.inner.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a state the wrapped engine refuses leaves the queue as it was."""
        if "inner" not in state:
            raise ValueError("LaggedEngine state lacks 'inner'")
        queue = self._queue
        load_tensors_state(self, {"_queue": state.get("queue")}, ("_queue",))
        try:
            self.inner.load_state_dict(state["inner"])
        except ValueError:
            self._queue = queue
            raise
