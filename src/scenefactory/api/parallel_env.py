"""A PettingZoo ``ParallelEnv`` of one driving world (``pip install scenefactory[adapters]``).

One world, not W: PettingZoo steps one environment's agents together and resets it on its own,
while a :class:`~scenefactory.tasks.driving.env.DrivingEnv` steps all its worlds in one call. So
the view wraps an environment of ``num_worlds == 1``; for batched training use
:class:`~scenefactory.api.gym_vector.DrivingVectorEnv`, which keeps every world.

Agents are ``"agent_0" .. "agent_{K-1}"`` (``possible_agents``), slot ``k`` of the world. After
:meth:`DrivingParallelEnv.reset`, ``agents`` holds those the scene places (a scene may fill fewer
than K slots). An agent's episode ends on goal, collision or off-road (``terminations``) or at the
time-out (``truncations``, also for agents cut short by ``cfg.min_active_fraction``); the step
that ends it is its last: PettingZoo removes it from ``agents`` (in the task it waits, frozen and
invisible to the others, for the rest of the world's episode). When the last one has finished,
``agents`` is empty and the episode is over: call ``reset()``. The final step's observation of that
last agent (or of every agent, at a time-out) comes from the world's next scene, which the
environment has already started; :meth:`reset` then draws a new one. ``infos[agent]["outcome"]``
names how an ended agent's episode ended (``"goal"``, ``"collision"``, ``"offroad"``,
``"timeout"``). Observations are numpy views of the environment's CPU tensors (no copies).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from scenefactory.api.arrays import check_seed, export, import_actions
from scenefactory.tasks.driving.env import DrivingEnv, StepResult
from scenefactory.tasks.driving.status import AgentStatus


class DrivingParallelEnv(ParallelEnv[str, np.ndarray, np.ndarray]):
    """The K agents of a one-world :class:`DrivingEnv` as a PettingZoo parallel environment.

    Spaces (the same objects for every agent): observations ``Box(-inf, inf, (D,), float32)``,
    actions ``Box(-1, 1, (2,), float32)`` (steer, accel). ``last`` is the latest
    :class:`StepResult`, for the task's finished-episode records.
    """

    def __init__(self, env: DrivingEnv) -> None:
        """View ``env``, which must have exactly one world (module doc); it is reset by :meth:`reset`."""
        if env.num_worlds != 1:
            raise ValueError(
                f"DrivingParallelEnv views one world; the environment has {env.num_worlds} "
                "(build it with num_worlds=1, or use DrivingVectorEnv for batches of worlds)"
            )
        if env.device.type != "cpu":
            raise ValueError(
                f"DrivingParallelEnv hands out numpy views: the environment must be on cpu, not {env.device}"
            )
        self.env = env
        self.metadata = {"name": "scenefactory_driving", "render_modes": []}
        self.render_mode = None
        self.possible_agents = [f"agent_{k}" for k in range(env.agents_per_world)]
        self._slot = {a: k for k, a in enumerate(self.possible_agents)}
        obs_space = spaces.Box(-np.inf, np.inf, (env.obs_dim,), np.float32)
        act_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, obs_space)
        self.action_spaces = dict.fromkeys(self.possible_agents, act_space)
        self.agents: list[str] = []
        self.last: StepResult | None = None

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The observation space of ``agent`` (one object shared by all)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """The action space of ``agent`` (one object shared by all)."""
        return self.action_spaces[agent]

    def _live(self) -> list[str]:
        active = self.env.active[0].tolist()
        return [a for a, on in zip(self.possible_agents, active, strict=True) if on]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start a new episode on a scene drawn from ``seed`` (when given). No options are defined;
        ``options`` is accepted and not read (PettingZoo's API test passes one). ``seed`` is in the
        CLI's bounds, [0, 2**32 - 1] (``ArgumentError`` naming it otherwise)."""
        seed = check_seed(seed)
        if seed is not None:
            self.env.generator.manual_seed(seed)
        obs = export(self.env.reset()[0], "numpy")
        self.last = None
        self.agents = self._live()
        return {a: obs[self._slot[a]] for a in self.agents}, {a: {} for a in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Step the world with one action (2,) for each agent in ``agents``; the dictionaries
        returned are keyed by those agents (module doc for the ones whose episode ends)."""
        live = self.agents
        if not live:
            raise ValueError("every agent of this episode has finished: call reset() first")
        missing, unknown = set(live) - set(actions), set(actions) - set(live)
        if missing or unknown:
            raise ValueError(
                f"actions must name exactly the live agents {live}; "
                f"missing {sorted(missing)}, not live {sorted(unknown)}"
            )
        e = self.env
        a = torch.zeros(1, e.agents_per_world, 2, device=e.device)
        for agent, act in actions.items():
            a[0, self._slot[agent]] = import_actions(act, (2,), e.device, f"actions[{agent!r}]")
        res = e.step(a)
        self.last = res
        obs = export(res.obs[0], "numpy")
        reward, done, time_out = (t[0].tolist() for t in (res.reward, res.done, res.time_out))
        status = dict(zip(res.finished.agent.tolist(), res.finished.outcome.tolist(), strict=True))
        slots = [self._slot[a] for a in live]
        self.agents = [a for a, k in zip(live, slots, strict=True) if not done[k]]
        if res.reset_worlds.numel() and self.agents:
            raise RuntimeError(f"the world restarted while agents {self.agents} were still driving")
        return (
            {a: obs[k] for a, k in zip(live, slots, strict=True)},
            {a: float(reward[k]) for a, k in zip(live, slots, strict=True)},
            {a: bool(done[k] and not time_out[k]) for a, k in zip(live, slots, strict=True)},
            {a: bool(time_out[k]) for a, k in zip(live, slots, strict=True)},
            {
                a: {"outcome": AgentStatus(status[k]).name.lower()} if k in status else {}
                for a, k in zip(live, slots, strict=True)
            },
        )
