"""Gymnasium vector-environment views of the batched environments (``pip install scenefactory[adapters]``).

:class:`DrivingVectorEnv` shares one policy among every agent (parameter sharing): sub-environment
``i = w·K + k`` is agent slot ``k`` of world ``w``, so ``num_envs = W·K``. :class:`Go1VectorEnv` has
one sub-environment per robot. Both step the whole batch at once; none runs a Python loop over
sub-environments. Arrays are views of the environment's tensors (:mod:`scenefactory.api.arrays`).

Autoreset: ``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``: the environments restart
an episode inside the step that ends it, and that step returns the new episode's first observation.
They do not keep the last observation of an ended episode, so ``info`` has no ``"final_obs"``;
bootstrap a truncated episode from the value of the observation it was truncated after (the one
the step was taken from), as rsl-rl does.

Driving semantics (the task's own, see :mod:`scenefactory.tasks.driving.env`): an agent's episode
ends on goal, collision or off-road (``terminated``) or at the world's time-out (``truncated``),
reported once, on the step it happens. The agent then waits, frozen and invisible to the others,
until every agent of its world has finished; then the world resets and every slot of it starts a
new episode. While it waits, its slot returns reward 0, ``terminated = truncated = False``, the
observation of the frozen car, and ``info["was_active"] = False``; its actions are ignored. Empty
slots (a scene with fewer agents than K) behave the same from the start. These samples are not
decisions: mask them out of learning with ``info["was_active"]`` (what the transition just
returned was), and ``info["active"]`` tells which slots' next actions count. Consequently the
episode length that ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` counts for a slot
includes the steps it waited before its episode began; its returns are exact (waiting earns 0).
The task's own per-episode records are in ``vector_env.last.finished``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from scenefactory.api.arrays import ArrayKind, check_array_kind, check_seed, export, import_actions
from scenefactory.go1.env import Go1Env, LocoStep
from scenefactory.tasks.driving.env import DrivingEnv, StepResult

Step = tuple[Any, Any, Any, Any, dict[str, Any]]


def _reset_seed_only(options: dict[str, Any] | None) -> None:
    if options:
        raise ValueError(f"these environments define no reset options, got {sorted(options)}")


class DrivingVectorEnv(VectorEnv):
    """``num_envs = W·K`` agents of a :class:`DrivingEnv`, one policy for all (see the module doc).

    Spaces: observations ``Box(-inf, inf, (D,), float32)`` per agent (``(W·K, D)`` batched),
    actions ``Box(-1, 1, (2,), float32)`` (steer, accel; values outside are clipped). Rewards are
    float32, ``terminated``/``truncated`` bool, all ``(W·K,)``. ``info`` holds ``(W·K,)`` arrays:
    ``was_active``, ``active`` (module doc), ``world_reset`` (the slot's world restarted in this
    step: its observation is the new episode's first) and ``outcome`` (the
    :class:`~scenefactory.tasks.driving.status.AgentStatus` code of an episode that ended this step,
    0 elsewhere). ``last`` is the latest :class:`StepResult`, for the finished-episode records.
    """

    def __init__(self, env: DrivingEnv, arrays: str = "numpy") -> None:
        """View ``env``; ``arrays`` is ``"numpy"`` (views of CPU tensors) or ``"torch"`` (the tensors)."""
        self.env = env
        self.arrays: ArrayKind = check_array_kind(arrays)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
        self.num_envs = env.num_worlds * env.agents_per_world
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (env.obs_dim,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.last: StepResult | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Restart every world (new scenes, drawn from ``seed`` when given); no options are defined."""
        _reset_seed_only(options)
        seed = check_seed(seed)
        super().reset(seed=seed)
        if seed is not None:
            self.env.generator.manual_seed(seed)
        obs = self.env.reset()
        self.last = None
        return export(obs.reshape(self.num_envs, -1), self.arrays), {
            "active": export(self.env.active.reshape(-1), self.arrays)
        }

    def step(self, actions: Any) -> Step:
        """Step every world with ``actions`` (W·K, 2); returns (obs, reward, terminated, truncated, info)."""
        e = self.env
        a = import_actions(actions, (self.num_envs, 2), e.device)
        res = e.step(a.view(e.num_worlds, e.agents_per_world, 2))
        self.last = res
        outcome = torch.zeros_like(e.status)
        outcome[res.finished.world, res.finished.agent] = res.finished.outcome
        world_reset = torch.zeros(e.num_worlds, dtype=torch.bool, device=e.device)
        world_reset[res.reset_worlds] = True
        info = {
            "was_active": res.was_active.reshape(-1),
            "active": e.active.reshape(-1),
            "world_reset": world_reset.repeat_interleave(e.agents_per_world),
            "outcome": outcome.reshape(-1),
        }
        return (
            export(res.obs.reshape(self.num_envs, -1), self.arrays),
            export(res.reward.reshape(-1), self.arrays),
            export((res.done & ~res.time_out).reshape(-1), self.arrays),
            export(res.time_out.reshape(-1), self.arrays),
            {k: export(v, self.arrays) for k, v in info.items()},
        )


class Go1VectorEnv(VectorEnv):
    """One sub-environment per robot of a :class:`Go1Env`.

    Observations are the actor's (``history·45`` float32, noisy when ``cfg.noise`` is set); actions
    ``Box(-action_clip, action_clip, (12,), float32)``, joint-target offsets scaled by
    ``cfg.action_scale``. ``terminated``: the robot fell; ``truncated``: its episode reached
    ``episode_length_s``; either way it restarts in the same step (module doc).
    ``info["critic_obs"]`` is the critic's clean, privileged observation ``(N, 73)``.
    """

    def __init__(self, env: Go1Env, arrays: str = "numpy") -> None:
        """View ``env``; ``arrays`` as for :class:`DrivingVectorEnv`."""
        self.env = env
        self.arrays: ArrayKind = check_array_kind(arrays)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
        self.num_envs = env.num_envs
        actor, _ = env.observations()
        clip = env.cfg.action_clip
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (actor.shape[1],), np.float32)
        self.single_action_space = spaces.Box(-clip, clip, (env.num_actions,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.last: LocoStep | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Restart every robot (re-randomized; from ``seed`` when given); no options are defined."""
        _reset_seed_only(options)
        seed = check_seed(seed)
        super().reset(seed=seed)
        if seed is not None:
            self.env.rng = np.random.default_rng(seed)
        self.env.reset(np.arange(self.num_envs))
        actor, critic = self.env.observations()
        self.last = None
        return export(actor, self.arrays), {"critic_obs": export(critic, self.arrays)}

    def step(self, actions: Any) -> Step:
        """Step every robot with ``actions`` (N, 12); returns (obs, reward, terminated, truncated, info)."""
        a = import_actions(actions, (self.num_envs, self.env.num_actions), torch.device("cpu"))
        res = self.env.step(a)
        self.last = res
        return (
            export(res.actor_obs, self.arrays),
            export(res.reward, self.arrays),
            export(res.terminated, self.arrays),
            export(res.time_out, self.arrays),
            {"critic_obs": export(res.critic_obs, self.arrays)},
        )
