"""One on-policy training loop for every task: :class:`OnPolicyRunner` with :class:`RunnerHooks`.

The runner owns what every run does the same way: rollouts through a VecEnv (rsl-rl's ``act`` /
``process_env_step`` / ``compute_returns``), the algorithm's update (PPO or Distillation), the
iteration's timings, losses and finished episodes, ``history.json`` and TensorBoard, atomic
checkpoints every ``save_interval`` iterations and at the end (a crash leaves the last good
one), and exact resume: networks, optimizer, counters, the worlds' saved state and every random
generator. A task says where it differs through its hooks: what it records per step, a change to
the advantages after returns are computed (driving masks non-decisions), how it updates (Go1's
critic warm-up and learning-rate ramp), its statistics and TensorBoard scalars, and its own
checkpoint fields (the engine, a curriculum, its environment generator).

Output folder: ``config.json`` (the run's spec), ``history.json`` (one row per iteration),
``checkpoints/model_<it>.pt`` and ``checkpoints/latest.pt``, ``tensorboard/``.

Data-parallel (``torchrun``, :mod:`scenefactory.rl.distributed`): every rank runs this loop on its
own worlds; rank 0's parameters are broadcast before the first update, the algorithm averages
gradients over the ranks, the finished episodes of all ranks make the statistics (and
``env_steps`` counts every rank's steps), and only rank 0 writes. A checkpoint holds rank 0's
worlds and generators where a single run's are, and every other rank's in ``rank_states``, with
``world_size``: resumed by as many ranks, each continues its own worlds and generators exactly.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from torch.utils.tensorboard import SummaryWriter

from scenefactory.checkpoint import (
    CHECKPOINT_FORMAT,
    LATEST,
    require_finite_state,
    require_int,
    require_keys,
    save_iteration,
)
from scenefactory.errors import CheckpointError, warn
from scenefactory.io import write_json
from scenefactory.rl.checkpoints import restore_worlds, saved_sum
from scenefactory.rl.distributed import SINGLE, Ranks
from scenefactory.rl.ppo import Algorithm, PPOConfig, load_training_state, training_state
from scenefactory.rl.seeding import global_rng_state

RETURN_SUM = ("return_sum", "ret_sum")
"""Checkpoint field of the per-agent return so far (and the name Go1 checkpoints used before)."""
LENGTH_SUM = ("length_sum", "ep_len_sum")
"""Checkpoint field of the per-agent episode length so far [steps] (and Go1's former name)."""


@dataclass(frozen=True)
class RunSettings:
    """What the runner records of a run besides its environment and algorithm."""

    task: str
    """The checkpoint's ``task`` field (``drive``, ``go1``): what loads the policy back."""
    spec: dict[str, Any]
    """The run's spec in JSON form: ``config.json`` and the checkpoint's ``spec``."""
    task_cfg: dict[str, Any]
    """The task config in JSON form (the checkpoint's ``task_cfg``)."""
    ppo: PPOConfig
    obs_dim: int
    """Width of the actor's ``policy`` observations (the checkpoint's ``obs_dim``)."""
    seed: int
    iterations: int
    """Train until this many iterations are done (a resumed run continues towards it)."""


@dataclass(frozen=True)
class Rollout:
    """One iteration as the runner measured it; what every task's statistics start from."""

    iteration: int
    """Iterations done, this one included."""
    env_steps: int
    """Agent steps done, this iteration's included."""
    steps: int
    """Agent steps collected this iteration (``num_steps_per_env × num_envs × ranks``)."""
    collect_s: float
    learn_s: float
    """This rank's collection and learning times [s]."""
    losses: dict[str, float]
    """The update's mean losses (averaged over the ranks)."""
    returns: torch.Tensor
    """(E,) the returns of the E episodes that ended this iteration (on every rank)."""
    lengths: torch.Tensor
    """(E,) their lengths [policy steps]."""

    @property
    def steps_per_s(self) -> float:
        """Agent steps per second of collection and learning together."""
        return self.steps / (self.collect_s + self.learn_s)

    def mean_return(self) -> float:
        """Mean return of the episodes that ended (NaN when none did)."""
        return float(self.returns.mean()) if self.returns.numel() else float("nan")


S = TypeVar("S")


class RunnerHooks(ABC, Generic[S]):
    """Where a task's training differs from plain PPO. ``S`` is what the task makes of an iteration
    (its statistics): one row of ``history.json``, and what ``run(on_iteration)`` is called with.

    The optional points do nothing by default; a task's hooks hold its environment and VecEnv.
    """

    resume_hint: str = ""
    """Said when a resumed run's networks do not fit (a likely cause for this task)."""

    def begin_iteration(self, num_steps: int, num_envs: int) -> None:
        """Before a rollout of ``num_steps`` steps of ``num_envs`` environments."""

    def on_step(self, t: int, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """After rollout step ``t`` (rewards and dones (num_envs,)); the VecEnv holds the rest."""

    def after_returns(self, alg: Algorithm) -> None:
        """After the algorithm computed returns and advantages (in inference mode): a task may
        change them (driving zeroes the advantage of steps that were no decision)."""

    def update(self, alg: Algorithm, iteration: int) -> dict[str, float]:
        """The algorithm's update at ``iteration`` (iterations done before it); returns its losses."""
        return alg.update()

    @abstractmethod
    def stats(self, rollout: Rollout, alg: Algorithm) -> S:
        """The task's statistics of the iteration just learnt from."""

    @abstractmethod
    def row(self, stats: S) -> dict[str, Any]:
        """``stats`` as one JSON-ready row of ``history.json``."""

    @abstractmethod
    def scalars(self, stats: S, alg: Algorithm) -> dict[str, float]:
        """TensorBoard scalars of the iteration, by tag."""

    @abstractmethod
    def payload(self) -> dict[str, Any]:
        """The task's own checkpoint fields (its environment generator's state among them)."""

    @abstractmethod
    def restore_draws(self, path: Path, data: dict[str, Any]) -> None:
        """Resume from a checkpoint that predates exact resume: the worlds restart, but the task's
        generator (and curriculum) continue from ``data``; one line naming a missing field."""


class OnPolicyRunner(Generic[S]):
    """Train ``alg`` on ``vec`` (a VecEnv view of ``env``) until ``settings.iterations`` are done.

    ``env`` saves and restores its worlds (``state_dict`` / ``load_state_dict``) for an exact
    resume. Attributes a caller reads: ``iteration``, ``env_steps``, ``history`` (rows so far),
    ``out``, ``ckpt_dir`` and ``ranks`` (:data:`~scenefactory.rl.distributed.SINGLE` unless
    ``torchrun`` started the run: then ``env`` holds this rank's worlds and ``alg`` reduces over
    the ranks).
    """

    def __init__(
        self,
        settings: RunSettings,
        env: Any,
        vec: Any,
        alg: Algorithm,
        hooks: RunnerHooks[S],
        out_dir: str | os.PathLike[str],
        ranks: Ranks = SINGLE,
    ) -> None:
        """A fresh run at iteration 0; :meth:`resume` continues a saved one."""
        self.settings = settings
        self.ranks = ranks
        self.env, self.vec, self.alg, self.hooks = env, vec, alg, hooks
        self.out = Path(out_dir)
        self.ckpt_dir = self.out / "checkpoints"
        self.iteration = 0
        self.env_steps = 0
        self.history: list[dict[str, Any]] = []
        self.return_sum = torch.zeros(vec.num_envs)
        """(num_envs,) reward summed over each agent's episode so far."""
        self.length_sum = torch.zeros(vec.num_envs)
        """(num_envs,) steps of each agent's episode so far."""

    # ------------------------------------------------------------------------------ checkpoints

    def resume(self, path: Path, data: dict[str, Any]) -> None:
        """Continue the run saved in ``data`` (read from ``path`` and checked against this run's
        spec by the task): networks, optimizer, counters, history, and the saved worlds and
        generators; a checkpoint from before exact resume restarts the worlds and continues the
        generators (:meth:`RunnerHooks.restore_draws`). A data-parallel run resumes with as many
        ranks as saved it, each from its own saved worlds and generators."""
        saved_ranks = data.get("world_size", 1)
        if saved_ranks != self.ranks.world_size:
            how = f"torchrun --nproc_per_node {saved_ranks}"
            how = "one process (no torchrun)" if saved_ranks == 1 else how
            raise CheckpointError(
                f"{path}: cannot resume, it was saved by {saved_ranks} training process(es) and this run "
                f"has {self.ranks.world_size}: each rank continues its own worlds, so resume with {how} "
                "(or use another --out folder)"
            )
        data = self.ranks.own_state(path, data)
        require_finite_state(data.get("actor_state_dict"), path, "actor_state_dict")
        try:
            load_training_state(self.alg, data)
        except (RuntimeError, KeyError, ValueError) as exc:
            msg = " ".join(str(exc).split())[:200]
            raise CheckpointError(
                f"{path}: cannot resume, its networks do not fit this run's{self.hooks.resume_hint} ({msg})"
            ) from None
        self.iteration = require_int(data, path, "iteration")
        self.env_steps = require_int(data, path, "env_steps")
        self.history = list(data.get("history", []))
        if restore_worlds(path, data, self.env):
            self.return_sum = saved_sum(data, RETURN_SUM, self.return_sum)
            self.length_sum = saved_sum(data, LENGTH_SUM, self.length_sum)
        else:
            require_keys(data, path, ("torch_rng",))
            torch.set_rng_state(data["torch_rng"])
            self.hooks.restore_draws(path, data)

    def rank_state(self) -> dict[str, Any]:
        """What differs between the ranks of a data-parallel run: the worlds, every generator, the
        running episode sums and the task's own fields."""
        state = {
            "torch_rng": torch.get_rng_state(),
            "rng": global_rng_state(),
            "env_state": self.env.state_dict(),
            RETURN_SUM[0]: self.return_sum.clone(),
            LENGTH_SUM[0]: self.length_sum.clone(),
        }
        state.update(self.hooks.payload())
        return state

    def payload(self, rank_states: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Everything a checkpoint holds: the algorithm's state, the run's identity and counters,
        the worlds and every generator (plain data only), and the task's own fields; with
        ``rank_states`` (every rank's :meth:`rank_state`, rank 0 first), ``world_size`` and the
        other ranks' states too."""
        s = self.settings
        saved = training_state(self.alg)
        saved.update(
            {
                "format": CHECKPOINT_FORMAT,
                "task": s.task,
                "seed": s.seed,
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "obs_dim": s.obs_dim,
                "task_cfg": s.task_cfg,
                "ppo_cfg": asdict(s.ppo),
                "spec": json.loads(json.dumps(s.spec)),
                "history": self.history,
            }
        )
        if rank_states is None:
            saved.update(self.rank_state())
        else:
            saved.update(rank_states[0])
            saved.update(world_size=len(rank_states), rank_states=rank_states[1:])
        return saved

    def save(self) -> Path:
        """Write ``model_<it>.pt`` and ``latest.pt`` atomically; returns the latest path. Every rank
        calls it: rank 0 gathers the others' :meth:`rank_state` and alone writes."""
        if not self.ranks.distributed:
            return save_iteration(self.ckpt_dir, self.iteration, self.payload())
        states = self.ranks.gather_to_main(self.rank_state())
        if states is None:
            return self.ckpt_dir / LATEST
        return save_iteration(self.ckpt_dir, self.iteration, self.payload(states))

    # ------------------------------------------------------------------------------------- loop

    def run(self, on_iteration: Callable[[S], None] | None = None) -> list[dict[str, Any]]:
        """Train until ``settings.iterations`` iterations are done (continuing a resumed run),
        calling ``on_iteration`` with each iteration's statistics; returns the history rows. Only rank
        0 writes; rank 0's parameters are broadcast to the others first."""
        total, main = self.settings.iterations, self.ranks.main
        if self.iteration >= total:
            if self.iteration > total and main:
                warn(
                    f"{self.out} already holds {self.iteration} iterations, more than the "
                    f"{total} asked for: nothing trained, its config.json and checkpoints "
                    "are left as they are"
                )
            return self.history
        writer: SummaryWriter | None = None
        if main:
            self.out.mkdir(parents=True, exist_ok=True)
            write_json(self.out / "config.json", self.settings.spec)
            writer = SummaryWriter(log_dir=str(self.out / "tensorboard"), flush_secs=10)
        if self.ranks.distributed:
            self.alg.broadcast_parameters()  # fresh, resumed or initialized: rank 0's networks
        obs = self.vec.get_observations()
        self.alg.train_mode()
        try:
            while self.iteration < total:
                stats, obs = self._iteration(obs)
                self.history.append(self.hooks.row(stats))
                if writer is not None:
                    for tag, value in self.hooks.scalars(stats, self.alg).items():
                        writer.add_scalar(tag, value, self.iteration)
                    write_json(self.out / "history.json", self.history)
                if self.iteration % self.settings.ppo.save_interval == 0 or self.iteration == total:
                    self.save()
                if on_iteration is not None:
                    on_iteration(stats)
        finally:
            if writer is not None:
                writer.close()
        return self.history

    def _iteration(self, obs: Any) -> tuple[S, Any]:
        """One rollout and update; returns the task's statistics and the last observations."""
        alg, vec, hooks = self.alg, self.vec, self.hooks
        t_steps, n = self.settings.ppo.num_steps_per_env, vec.num_envs
        ret, length = self.return_sum, self.length_sum
        returns: list[torch.Tensor] = []
        lengths: list[torch.Tensor] = []
        t0 = time.perf_counter()
        hooks.begin_iteration(t_steps, n)
        with torch.inference_mode():
            for t in range(t_steps):
                actions = alg.act(obs)
                obs, rewards, dones, extras = vec.step(actions)
                alg.process_env_step(obs, rewards, dones, extras)
                hooks.on_step(t, rewards, dones)
                ret += rewards
                length += 1
                ended = dones.bool()
                if ended.any():
                    returns.append(ret[ended].clone())
                    lengths.append(length[ended].clone())
                    ret[ended] = 0.0
                    length[ended] = 0.0
            t1 = time.perf_counter()
            alg.compute_returns(obs)
            hooks.after_returns(alg)
        losses = hooks.update(alg, self.iteration)
        t2 = time.perf_counter()
        steps = t_steps * n * self.ranks.world_size
        self.iteration += 1
        self.env_steps += steps
        rollout = Rollout(
            iteration=self.iteration,
            env_steps=self.env_steps,
            steps=steps,
            collect_s=t1 - t0,
            learn_s=t2 - t1,
            losses=dict(zip(losses, self.ranks.mean([float(v) for v in losses.values()]), strict=True)),
            returns=self.ranks.cat(torch.cat(returns) if returns else torch.zeros(0)),
            lengths=self.ranks.cat(torch.cat(lengths) if lengths else torch.zeros(0)),
        )
        return hooks.stats(rollout, alg), obs
