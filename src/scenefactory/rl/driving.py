"""PPO on the driving task: the VecEnv view of a :class:`DrivingEnv`, the run's spec, the
:class:`Trainer` (the shared :class:`~scenefactory.rl.runner.OnPolicyRunner` with driving's hooks),
and policy loading for evaluation.

Parameter sharing: every controlled agent of every world is one rsl-rl environment
(``num_envs = worlds × agents``) driven by the same actor and critic.

Masking finished agents: an agent that has finished waits, frozen, until its world resets. Those
waiting steps (and empty agent slots) are not decisions, so after rsl-rl computes returns we give
them zero advantage and a return equal to their value estimate, and normalize advantages over the
real decisions only; they then contribute no policy gradient and no value error. The step that
ends an agent's episode is reported as ``done`` (so nothing bootstraps across it), and a time-out
is reported in ``time_outs`` so rsl-rl bootstraps its value.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from scenefactory.checkpoint import LATEST, load_checkpoint, require_keys
from scenefactory.engines.spec import TIERS, EngineSpec
from scenefactory.errors import CheckpointError
from scenefactory.rl.checkpoints import checked_policy, load_actor_weights
from scenefactory.rl.distributed import SINGLE, Ranks, ranks_from_environ
from scenefactory.rl.distributed import setup as setup_ranks
from scenefactory.rl.driving_spec import (
    TrainSpec,
    engine_of_saved_spec,
    observation_dim_of,
    resume_checkpoint,
    spec_to_dict,
)
from scenefactory.rl.ppo import Algorithm, PPOConfig, VecEnv, build_actor, construct_ppo
from scenefactory.rl.runner import OnPolicyRunner, Rollout, RunnerHooks, RunSettings
from scenefactory.rl.seeding import seed_everything
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, task_config_from_dict, task_config_to_dict
from scenefactory.tasks.driving.env import DrivingEnv, StepResult
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize

TASK = "drive"
"""The checkpoint ``task`` of a driving policy."""


class DrivingVecEnv(VecEnv):
    """rsl-rl's view of a :class:`DrivingEnv`: ``num_envs = W·K`` agents, flat tensors."""

    def __init__(self, env: DrivingEnv) -> None:
        """Wrap ``env``; the last step's result stays available as ``last``."""
        self.env = env
        self.num_envs = env.num_worlds * env.agents_per_world
        self.num_actions = 2
        self.max_episode_length = env.cfg.max_steps
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=env.device)
        self.device = env.device
        self.cfg = task_config_to_dict(env.cfg)
        self.last: StepResult | None = None

    def get_observations(self) -> TensorDict:
        """Current observations as ``{"policy": (num_envs, D)}``."""
        return self._td(self.env.observations())

    def _td(self, obs: torch.Tensor) -> TensorDict:
        flat = obs.reshape(self.num_envs, -1)
        return TensorDict({"policy": flat}, batch_size=[self.num_envs], device=self.device)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step with flat actions (num_envs, 2); returns rsl-rl's (obs, rewards, dones, extras)."""
        e = self.env
        res = e.step(actions.reshape(e.num_worlds, e.agents_per_world, 2))
        self.last = res
        self.episode_length_buf = e.step_count.repeat_interleave(e.agents_per_world)
        extras = {"time_outs": res.time_out.reshape(-1).float()}
        return self._td(res.obs), res.reward.reshape(-1), res.done.reshape(-1).float(), extras


def mask_decisions(alg: Algorithm, valid: torch.Tensor, ranks: Ranks = SINGLE) -> None:
    """Zero the advantage of non-decision samples (``valid`` (T, N) false) and renormalize over
    the real ones (see the module doc); in a data-parallel run over every rank's real ones, as one
    process with all the worlds would."""
    st = alg.storage
    v = valid.unsqueeze(-1)
    raw = st.returns - st.values
    sel = raw[v]
    if ranks.distributed:
        mean, std = ranks.mean_std(sel)
    else:
        mean = sel.mean() if sel.numel() else raw.new_zeros(())
        std = sel.std() if sel.numel() > 1 else raw.new_ones(())
    st.advantages = torch.where(v, (raw - mean) / (std + 1e-8), torch.zeros_like(raw))
    st.returns = torch.where(v, st.returns, st.values)


EPISODE_SCALARS = ("goal_reach_rate", "collision_rate", "offroad_rate", "timeout_rate", "mean_peak_drac_mps2")
"""Episode metrics logged to TensorBoard when an iteration finished episodes."""


@dataclass
class IterationStats:
    """Per-iteration training record (one row of ``history.json``)."""

    iteration: int
    env_steps: int
    mean_reward: float
    fps: float
    collect_s: float
    learn_s: float
    losses: dict[str, float]
    metrics: dict[str, Any]
    active_slot_fraction: float = float("nan")
    """Share of the iteration's agent-slot steps that were real decisions (the rest, padding slots
    and finished agents waiting for their world, are masked out of the update)."""

    def row(self) -> dict[str, Any]:
        """Flat dict for the history file and the learning curve."""
        out = {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "mean_reward": self.mean_reward,
            "steps_per_s": self.fps,
            "collect_s": self.collect_s,
            "learn_s": self.learn_s,
            "active_slot_fraction": self.active_slot_fraction,
        }
        out.update({f"loss_{k}": v for k, v in self.losses.items()})
        for k in ("goal_reach_rate", "collision_rate", "offroad_rate", "timeout_rate", "episodes"):
            out[k] = self.metrics.get(k, float("nan"))
        return out


class DrivingHooks(RunnerHooks[IterationStats]):
    """Driving's part of the loop: which agent steps were decisions (masked out of the update
    otherwise), the finished episodes' metrics, and the engine and scene draws in checkpoints.
    In a data-parallel run the advantages are normalized and the metrics taken over all ranks."""

    def __init__(
        self, env: DrivingEnv, vec: DrivingVecEnv, engine: EngineSpec, ranks: Ranks = SINGLE
    ) -> None:
        """Hooks for training on ``env`` through ``vec``, whose engine ``engine`` describes."""
        self.env, self.vec, self.engine, self.ranks = env, vec, engine, ranks
        self.episodes = EpisodeLog()
        self.valid = torch.zeros(0, vec.num_envs, dtype=torch.bool)
        """(T, N) whether each rollout step of each agent slot was a decision."""

    def begin_iteration(self, num_steps: int, num_envs: int) -> None:
        """A fresh decision mask for the rollout."""
        self.valid = torch.zeros(num_steps, num_envs, dtype=torch.bool, device=self.env.device)

    def on_step(self, t: int, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """Record which slots decided at step ``t`` and the episodes that finished."""
        res = self.vec.last
        assert res is not None, "on_step runs after a VecEnv step"
        self.valid[t] = res.was_active.reshape(-1)
        self.episodes.add(res.finished)

    def after_returns(self, alg: Algorithm) -> None:
        """Non-decisions get no advantage and no value error (:func:`mask_decisions`)."""
        mask_decisions(alg, self.valid, self.ranks)

    def stats(self, rollout: Rollout, alg: Algorithm) -> IterationStats:
        """The iteration's rewards, losses, timings and finished-episode metrics (of every rank)."""
        if self.ranks.distributed:
            self.episodes.parts = [p for parts in self.ranks.all_gather(self.episodes.parts) for p in parts]
        metrics = summarize(self.episodes.cat()) if len(self.episodes) else {}
        self.episodes.clear()
        [active] = self.ranks.mean([float(self.valid.float().mean())])
        return IterationStats(
            iteration=rollout.iteration,
            env_steps=rollout.env_steps,
            mean_reward=rollout.mean_return(),
            fps=rollout.steps_per_s,
            collect_s=rollout.collect_s,
            learn_s=rollout.learn_s,
            losses=rollout.losses,
            metrics=metrics,
            active_slot_fraction=active,
        )

    def row(self, stats: IterationStats) -> dict[str, Any]:
        """:meth:`IterationStats.row`."""
        return stats.row()

    def scalars(self, stats: IterationStats, alg: Algorithm) -> dict[str, float]:
        """Losses, learning rate, policy spread, speed, reward and the episode rates."""
        out = {f"Loss/{k}": v for k, v in stats.losses.items()}
        out["Loss/learning_rate"] = float(alg.learning_rate)
        out["Policy/mean_std"] = float(alg.get_policy().output_std.mean().detach())
        out["Perf/steps_per_s"] = stats.fps
        out["Perf/active_slot_fraction"] = stats.active_slot_fraction
        out["Train/mean_reward"] = stats.mean_reward
        out.update({f"Episode/{k}": stats.metrics[k] for k in EPISODE_SCALARS if k in stats.metrics})
        return out

    def payload(self) -> dict[str, Any]:
        """The engine's tier and rate (what evaluation reports the policy was trained on) and the
        scene draws' generator."""
        return {
            "engine": self.engine.tier,
            "physics_hz": self.engine.physics_hz,
            "env_rng": self.env.generator.get_state(),
        }

    def restore_draws(self, path: Path, data: dict[str, Any]) -> None:
        """The scene draws continue from the saved generator."""
        require_keys(data, path, ("env_rng",))
        self.env.generator.set_state(data["env_rng"])


class Trainer(OnPolicyRunner[IterationStats]):
    """PPO on a driving task with checkpoints, resume, TensorBoard and a history file.

    Output folder layout: ``config.json``, ``history.json`` (one row per iteration),
    ``checkpoints/model_<it>.pt`` and ``checkpoints/latest.pt`` (atomic), ``tensorboard/``.

    Started by ``torchrun`` (:mod:`scenefactory.rl.distributed`), each of the N ranks simulates
    ``spec.task.num_worlds / N`` of the worlds with seed ``spec.seed + rank``, and only rank 0
    writes; rank 0 alone is exactly the one-process run of the same seed (its draws, its network
    initialization).
    """

    def __init__(
        self,
        spec: TrainSpec,
        scenes: Sequence[Scene],
        out_dir: str | os.PathLike[str],
        checkpoint: dict[str, Any] | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        """Build env and algorithm on ``device`` (under ``torchrun`` on CUDA: this rank's GPU); resume
        from ``out_dir/checkpoints/latest.pt`` if it exists (or from ``checkpoint``, what
        :func:`resume_checkpoint` returned for this run)."""
        self.spec = spec
        worlds = ranks_from_environ().share(spec.task.num_worlds, "the run's worlds (--worlds)")  # first
        ranks = setup_ranks(device)
        device = ranks.device(device)
        seed = ranks.seed(spec.seed)
        seed_everything(seed)
        task = replace(spec.task, num_worlds=worlds)
        env = DrivingEnv(task, scenes, engine=spec.engine, seed=seed, device=device)
        vec = DrivingVecEnv(env)
        alg = construct_ppo(vec.get_observations(), vec, spec.ppo, ranks.rsl_multi_gpu(), device)
        settings = RunSettings(
            task=TASK,
            spec=spec_to_dict(spec),
            task_cfg=task_config_to_dict(spec.task),
            ppo=spec.ppo,
            obs_dim=env.obs_dim,
            seed=spec.seed,
            iterations=spec.iterations,
        )
        hooks = DrivingHooks(env, vec, spec.engine, ranks)
        super().__init__(settings, env, vec, alg, hooks, out_dir, ranks)
        data = checkpoint if checkpoint is not None else resume_checkpoint(spec, self.out)
        if data is not None:
            self.resume(self.ckpt_dir / LATEST, data)


@dataclass(frozen=True)
class LoadedPolicy:
    """A policy restored from a checkpoint: deterministic actions from observations."""

    actor: Any
    task_cfg: DrivingTaskConfig
    ppo_cfg: PPOConfig
    meta: dict[str, Any]
    """``iteration``, ``engine`` (the tier trained on), ``physics_hz``, ``seed``, ``obs_dim``."""
    engine: EngineSpec | None = None
    """The engine the policy was trained on, from its run's spec (``None``: a checkpoint without one)."""

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Mean action (..., 2) for observations (..., D)."""
        lead = obs.shape[:-1]
        flat = obs.reshape(-1, obs.shape[-1])
        td = TensorDict({"policy": flat}, batch_size=[flat.shape[0]])
        return self.actor(td).reshape(*lead, 2)

    @torch.no_grad()
    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """Action (..., 2) sampled from the actor's Gaussian for observations (..., D), with torch's
        global generator (seed it with ``torch.manual_seed``): the stochastic policy, e.g. for the 32
        rollouts of WOSAC."""
        lead = obs.shape[:-1]
        flat = obs.reshape(-1, obs.shape[-1])
        td = TensorDict({"policy": flat}, batch_size=[flat.shape[0]])
        return self.actor(td, stochastic_output=True).reshape(*lead, 2)


def load_policy(path: str | os.PathLike[str]) -> LoadedPolicy:
    """Restore the actor of a driving training checkpoint (every field checked, one line naming
    the first that does not fit); its run's spec may be of either engine form
    (:func:`~scenefactory.rl.driving_spec.engine_of_saved_spec`)."""
    data = load_checkpoint(path)
    task_cfg, ppo_cfg, obs_dim, state = checked_policy(path, data, TASK, task_config_from_dict)
    if ppo_cfg.actor_rnn_type is not None:
        raise CheckpointError(
            f"{path}: a recurrent ({ppo_cfg.actor_rnn_type}) driving actor; driving evaluation keeps "
            "no hidden state between steps, expected an MLP actor"
        )
    expected = observation_dim_of(task_cfg)
    if obs_dim != expected:
        raise CheckpointError(
            f"{path}: checkpoint field 'obs_dim' is {obs_dim}, its task config gives {expected} observations"
        )
    engine = engine_of_saved_spec(path, data["spec"]) if "spec" in data else None
    tier = data.get("engine", engine and engine.tier)
    if tier is not None and tier not in TIERS:
        raise CheckpointError(
            f"{path}: checkpoint field 'engine' is {tier!r}, expected one of {sorted(TIERS)}"
        )
    if engine is not None and tier != engine.tier:
        raise CheckpointError(
            f"{path}: checkpoint field 'engine' is {tier!r}, its run's spec says '{engine.tier}' "
            "(hand-edited?)"
        )
    actor = build_actor(obs_dim, ppo_cfg)
    load_actor_weights(path, actor, state)
    actor.eval()
    keys = ("iteration", "engine", "physics_hz", "seed", "obs_dim")
    meta: dict[str, Any] = {k: data[k] for k in keys if k in data}
    return LoadedPolicy(actor, task_cfg, ppo_cfg, meta, engine)
