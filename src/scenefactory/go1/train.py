"""PPO on the Go1 velocity-tracking task: the VecEnv view, the spec, the hooks into the shared
training loop (checkpoints, resume, curriculum), and policy loading.

rsl-rl itself is reached only through ``rl.ppo`` (``construct_ppo``, ``build_actor``), and the
loop is the shared :class:`~scenefactory.rl.runner.OnPolicyRunner` with :class:`Go1Hooks`. The actor
reads the ``policy`` observation group (what a real robot measures, with history), the critic the
``critic`` group (clean frame + privileged state): an asymmetric actor–critic.

With ``Go1TrainSpec.teacher`` set the same loop distils instead (rsl-rl's ``Distillation``,
DAgger-style: the student acts, the teacher's mean action on the same observations is the
target), typically into a recurrent student (``PPOConfig.actor_rnn_type``) that a PPO stage then
fine-tunes with ``init_from``.

Output folder: ``config.json``, ``history.json`` (one row per iteration), ``checkpoints/
model_<it>.pt`` and ``checkpoints/latest.pt`` (atomic writes; a crash leaves the last good one),
``tensorboard/``. Re-running the same command on the same folder resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from scenefactory.checkpoint import load_checkpoint, require_keys
from scenefactory.errors import CheckpointError
from scenefactory.go1.config import (
    Go1TaskConfig,
    TerrainConfig,
    WholeBodyConfig,
    task_config_from_dict,
    task_config_to_dict,
)
from scenefactory.go1.env import Go1Env, LocoStep
from scenefactory.go1.observations import frame_dim, params_start
from scenefactory.go1.terrain import column_kinds, scan_dim
from scenefactory.go1.widen import grow_history, widen_for_whole_body
from scenefactory.rl.checkpoints import (
    checked_policy,
    load_actor_weights,
    require_same_run,
    resume_path,
)
from scenefactory.rl.distributed import SINGLE, Ranks, ranks_from_environ
from scenefactory.rl.distributed import setup as setup_ranks
from scenefactory.rl.ppo import (
    Algorithm,
    PPOConfig,
    build_actor,
    construct_distillation,
    construct_ppo,
    load_training_state,
    saved_ppo_dict,
)
from scenefactory.rl.runner import OnPolicyRunner, Rollout, RunnerHooks, RunSettings
from scenefactory.rl.seeding import seed_everything

TASK = "go1"
RAMP_START_LR = 1e-5
"""Learning rate when the actor is unfrozen after a critic warm-up (rsl-rl's adaptive floor)."""


def go1_ppo_config() -> PPOConfig:
    """Isaac Lab's flat-velocity PPO recipe, with smaller networks so the policy ships (~300 KB)."""
    return PPOConfig(
        num_steps_per_env=24,
        num_learning_epochs=5,
        num_mini_batches=4,
        learning_rate=1e-3,
        entropy_coef=0.01,
        init_noise_std=1.0,
        actor_hidden_dims=(256, 128, 64),
        critic_hidden_dims=(256, 128, 64),
        save_interval=25,
        critic_obs_group="critic",
    )


class Go1VecEnv:
    """rsl-rl's view of a :class:`Go1Env` (``num_envs`` robots, 12 actions, auto-reset)."""

    def __init__(self, env: Go1Env) -> None:
        """Wrap ``env``; the last step stays available as ``last``."""
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = env.cfg.max_steps
        self.device = torch.device("cpu")
        self.cfg = task_config_to_dict(env.cfg)
        self.episode_length_buf = torch.from_numpy(env.step_count.copy())
        self.last: LocoStep | None = None

    def _td(self, actor: torch.Tensor, critic: torch.Tensor) -> TensorDict:
        start = params_start(self.env.cfg.whole_body.enabled)
        stop = critic.shape[1] - scan_dim(self.env.cfg.terrain)  # the height scan comes last
        groups = {"policy": actor, "critic": critic, "params": critic[:, start:stop]}
        return TensorDict(groups, batch_size=[self.num_envs])

    def get_observations(self) -> TensorDict:
        """``{"policy": (N, H·45), "critic": (N, 73), "params": (N, 20)}`` (74 / 21 with joint
        damping randomization)."""
        return self._td(*self.env.observations())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """rsl-rl's (obs, rewards, dones, extras); time-outs are bootstrapped."""
        res = self.env.step(actions)
        self.last = res
        self.episode_length_buf = torch.from_numpy(self.env.step_count.copy())
        extras = {"time_outs": res.time_out.float()}
        return self._td(res.actor_obs, res.critic_obs), res.reward, res.done.float(), extras


@dataclass(frozen=True)
class Go1TrainSpec:
    """Everything that defines a Go1 training run (``config.json``)."""

    task: Go1TaskConfig = field(default_factory=Go1TaskConfig)
    ppo: PPOConfig = field(default_factory=go1_ppo_config)
    iterations: int = 1000
    seed: int = 0
    init_from: str | None = None
    """A Go1 training checkpoint to start from (a fine-tuning stage): its actor, critic,
    normalizers, optimizer state and curriculum; iterations count from 0 in the new folder. A
    distilled checkpoint (no critic), or one whose critic reads another width (joint damping
    randomization adds a privileged value, terrain the height scan; needs ``critic_warmup``), gives
    the actor and curriculum; the critic and optimizer start fresh. An actor that gains inputs
    (whole-body commands, the height scan) keeps a critic of the same width; its optimizer starts
    fresh (a short ``critic_warmup`` then ramps the learning rate). On the same terrain tiles the
    robots keep the terrain levels the checkpoint's robots reached (:func:`carry_terrain_levels`)."""
    init_action_std: float | None = None
    """With ``init_from``: the actor's action noise (its Gaussian's standard deviation, every
    joint) restarts at this value instead of the saved one (``None``: kept). The noise of a
    fine-tuned policy drifts up under the entropy bonus; robots that act that noisily fail on
    terrain their mean action crosses, and the curriculum then keeps them off it."""
    teacher: str | None = None
    """Distil ``ppo``'s actor from this Go1 policy (checkpoint or shipped file) instead of PPO."""
    critic_warmup: int = 0
    """PPO iterations at the start in which only the critic learns (the actor frozen): a fresh
    critic's first advantages are noise, and unfrozen they undo a distilled actor. When the actor
    is unfrozen the learning rate restarts at :data:`RAMP_START_LR` and the adaptive schedule
    raises it: Adam's first steps move every weight by about the learning rate whatever its
    gradient, and at 1e-3 one iteration undid a distilled GRU student."""


def spec_to_dict(spec: Go1TrainSpec) -> dict[str, Any]:
    """JSON-ready form of a spec."""
    return {
        "task": task_config_to_dict(spec.task),
        "ppo": asdict(spec.ppo),
        "iterations": spec.iterations,
        "seed": spec.seed,
        "init_from": spec.init_from,
        "init_action_std": spec.init_action_std,
        "teacher": spec.teacher,
        "critic_warmup": spec.critic_warmup,
    }


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x))


def _first_layer(state: dict[str, Any]) -> str | None:
    """The key of the weight (out, inputs) that reads an actor's inputs: its recurrent layer's
    input weight, else its MLP's first layer."""
    for key in ("rnn.rnn.weight_ih_l0", "mlp.0.weight"):
        if key in state:
            return key
    return None


def _widened(state: dict[str, torch.Tensor], inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """An actor's weights for the inputs ``inputs`` (B, D) when the saved actor read fewer (the
    leading ones): the new inputs get zero first-layer weights, so the actor acts exactly as before
    until training uses them, and normalizer statistics from ``inputs`` (the saved count would
    otherwise freeze them at mean 0, variance 1 — and a 0–20 ms latency would be invisible).
    ``state`` itself when the widths agree."""
    mean = state.get("obs_normalizer._mean")
    old, width = (None if mean is None else int(mean.shape[-1])), int(inputs.shape[-1])
    if old is None or old >= width:
        return state
    new = inputs[:, old:].to(torch.float32)
    var = new.var(dim=0, unbiased=False, keepdim=True)
    stats = {"obs_normalizer._mean": new.mean(dim=0, keepdim=True), "obs_normalizer._var": var}
    stats["obs_normalizer._std"] = var.sqrt()
    out = dict(state)
    for key, value in stats.items():
        out[key] = torch.cat([state[key], value], dim=-1)
    first = _first_layer(state)
    if first is None:
        raise CheckpointError("the saved actor has no first layer to widen")
    w = state[first]
    out[first] = torch.cat([w, w.new_zeros(w.shape[0], width - old)], dim=1)
    return out


def _checked(teacher: Path, spec: Go1TrainSpec) -> PPOConfig:
    """The teacher's PPO config, after checking it is a Go1 policy reading this task's observations."""
    if spec.init_from is not None:
        raise CheckpointError(f"{teacher}: a distillation run starts from its teacher, not from init_from")
    data = load_checkpoint(teacher)
    _, ppo_cfg, saved_obs, _ = checked_policy(teacher, data, TASK, task_config_from_dict)
    obs_dim = actor_obs_dim(spec.task)
    if saved_obs != obs_dim:
        raise CheckpointError(
            f"{teacher}: the teacher reads {saved_obs} observations, this task gives {obs_dim} "
            f"(use the teacher's --history)"
        )
    return ppo_cfg


class Go1Hooks(RunnerHooks[dict[str, Any]]):
    """Go1's part of the loop: reward terms, falls and time-outs per iteration, the critic
    warm-up and learning-rate ramp (:attr:`Go1TrainSpec.critic_warmup`), the command curriculum
    after each update, and the curriculum and robot draws in checkpoints. Its statistics are the
    history row itself. In a data-parallel run the statistics are of every rank's robots, and the
    curriculum advances on every rank's finished episodes (so it stays the same on all ranks)."""

    resume_hint = " (a run with --joint-friction-dr made before its critic saw the joint damping scale?)"

    def __init__(self, env: Go1Env, vec: Go1VecEnv, spec: Go1TrainSpec, ranks: Ranks = SINGLE) -> None:
        """Hooks for training ``spec`` on ``env`` through ``vec``."""
        self.env, self.vec, self.spec, self.ranks = env, vec, spec, ranks
        self.term_sums: dict[str, float] = {}
        """Each reward term's mean over the robots, summed over the rollout's steps."""
        self.falls = 0
        self.timeouts = 0
        self.num_steps = 0

    def begin_iteration(self, num_steps: int, num_envs: int) -> None:
        """Zero the rollout's counts."""
        self.term_sums, self.falls, self.timeouts, self.num_steps = {}, 0, 0, num_steps

    def on_step(self, t: int, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """Add the step's reward terms, falls and time-outs."""
        res = self.vec.last
        assert res is not None, "on_step runs after a VecEnv step"
        for k, v in res.terms.items():
            self.term_sums[k] = self.term_sums.get(k, 0.0) + float(v.mean())
        if dones.bool().any():
            self.falls += int(res.terminated.sum())
            self.timeouts += int(res.time_out.sum())

    def update(self, alg: Algorithm, iteration: int) -> dict[str, float]:
        """PPO's update with the actor frozen during the critic warm-up; when it is unfrozen the
        adaptive learning rate restarts at :data:`RAMP_START_LR`."""
        spec = self.spec
        warmup = iteration < spec.critic_warmup and spec.teacher is None
        actor = alg.get_policy()
        if warmup:
            actor.requires_grad_(False)
        elif iteration == spec.critic_warmup > 0 and spec.ppo.schedule == "adaptive":
            alg.learning_rate = RAMP_START_LR
            for group in alg.optimizer.param_groups:
                group["lr"] = RAMP_START_LR
        try:
            return alg.update()
        finally:
            actor.requires_grad_(True)

    def stats(self, rollout: Rollout, alg: Algorithm) -> dict[str, Any]:
        """Advance the command curriculum; the iteration's history row."""
        if self.ranks.distributed:
            self._pool_curriculum()
        curriculum = self.env.update_curriculum()
        ln, t_steps = rollout.lengths, self.num_steps
        if self.ranks.distributed:
            self.falls, self.timeouts = (int(x) for x in self.ranks.sum([self.falls, self.timeouts]))
            names = list(self.term_sums)  # the same terms, in the same order, on every rank
            means = self.ranks.mean([self.term_sums[k] for k in names])
            self.term_sums = dict(zip(names, means, strict=True))
        return {
            "iteration": rollout.iteration,
            "env_steps": rollout.env_steps,
            "mean_return": rollout.mean_return(),
            "mean_episode_s": float(ln.mean()) * self.env.cfg.dt if ln.numel() else float("nan"),
            "fall_fraction": self.falls / max(1, self.falls + self.timeouts),
            "steps_per_s": rollout.steps_per_s,
            "collect_s": rollout.collect_s,
            "learn_s": rollout.learn_s,
            "action_std": float(alg.get_policy().output_std.mean().detach()),
            **{f"loss_{k}": v for k, v in rollout.losses.items()},
            **{f"term_{k}": v / t_steps for k, v in self.term_sums.items()},
            **{f"curriculum_{k}": v for k, v in curriculum.items()},
            **self._terrain_levels(),
        }

    def _terrain_levels(self) -> dict[str, float]:
        """The curriculum's mean level, overall and per tile kind (none on flat ground)."""
        cur = self.env.curriculum
        if cur is None:
            return {}
        kinds = cur.mean_levels_by_kind(column_kinds(self.env.cfg.terrain))
        return {"terrain_level": cur.mean_level, **{f"terrain_level_{k}": v for k, v in kinds.items()}}

    def _pool_curriculum(self) -> None:
        """Every rank's tracking of the episodes ended since the curriculum last advanced, pooled
        (their mean, weighted by episodes), in place of this rank's own."""
        ended = self.env._ended_track  # (n_i, 2) blocks the curriculum averages
        local = np.concatenate(ended) if ended else np.zeros((0, 2))
        n, lin, yaw = self.ranks.sum([local.shape[0], *local.sum(axis=0)])
        ended.clear()
        if n:
            ended.append(np.array([[lin / n, yaw / n]]))

    def row(self, stats: dict[str, Any]) -> dict[str, Any]:
        """The statistics are the row."""
        return stats

    def scalars(self, stats: dict[str, Any], alg: Algorithm) -> dict[str, float]:
        """Every finite number of the row, under its own name."""
        return {
            k: v for k, v in stats.items() if k != "iteration" and isinstance(v, float) and np.isfinite(v)
        }

    def payload(self) -> dict[str, Any]:
        """The command curriculum and the robots' generator."""
        return {
            "curriculum": {"lin_fraction": self.env.lin_fraction, "yaw_fraction": self.env.yaw_fraction},
            "env_rng": self.env.rng.bit_generator.state,
        }

    def restore_draws(self, path: Path, data: dict[str, Any]) -> None:
        """The robots' draws and the curriculum continue; from a stage checkpoint the robots also
        take up their saved terrain levels (``rl.checkpoints.STAGE_WORLD_KEEPS``)."""
        require_keys(data, path, ("env_rng", "curriculum"))
        self.env.rng.bit_generator.state = data["env_rng"]
        load_curriculum(self.env, data)
        if data.get("stage_checkpoint"):
            note = carry_terrain_levels(self.env, self.spec.task.terrain, data)
            if note is not None and self.ranks.main:
                print(f"train go1: {note}", file=sys.stderr, flush=True)


def load_curriculum(env: Go1Env, data: dict[str, Any]) -> None:
    """A checkpoint's command curriculum (the full command ranges when it saved none)."""
    cur = data.get("curriculum") or {"lin_fraction": 1.0, "yaw_fraction": 1.0}
    env.lin_fraction = float(cur["lin_fraction"])
    env.yaw_fraction = float(cur["yaw_fraction"])


LEVEL_FREE_FIELDS = frozenset(
    {"height_scan_actor", "scan_size_m", "scan_spacing_m", "scan_clip_m", "scan_noise_m"}
)
"""The :class:`TerrainConfig` fields (the height scan's) that leave the tiles and the curriculum as
they were: a fine-tune that changes only these keeps its robots' terrain levels."""


def carry_terrain_levels(env: Go1Env, saved: TerrainConfig, data: dict[str, Any]) -> str | None:
    """A fine-tune's robots take up the terrain levels the checkpoint's robots had reached (its
    saved ``env_state.terrain.levels``, robot for robot: columns are dealt out by robot index) when
    the tiles are the same (every :class:`TerrainConfig` field but :data:`LEVEL_FREE_FIELDS`) and
    the robot count too, so that a fine-tune does not spend its first hundred iterations climbing
    back from the initial levels. The robots restart on their tiles (their episodes' randomized
    starting steps kept). A data-parallel checkpoint's rank-0 levels go to every rank. The line
    saying what was done (``None`` off terrain)."""
    cur, terrain = env.curriculum, env.cfg.terrain
    if cur is None:
        return None
    differ = sorted(
        f for f in asdict(terrain) if f not in LEVEL_FREE_FIELDS and getattr(saved, f) != getattr(terrain, f)
    )
    env_state = data.get("env_state")
    saved_terrain = env_state.get("terrain") if isinstance(env_state, dict) else None
    levels = saved_terrain.get("levels") if isinstance(saved_terrain, dict) else None
    fresh = f"terrain levels start afresh (0 … {terrain.max_init_level})"
    if saved.kind == "flat":
        return f"{fresh}: the checkpoint trained on flat ground"
    if differ:
        return f"{fresh}: the checkpoint's terrain differs in {', '.join(differ)}"
    if not isinstance(levels, torch.Tensor) or tuple(levels.shape) != cur.levels.shape:
        got = tuple(levels.shape) if isinstance(levels, torch.Tensor) else "none"
        return f"{fresh}: the checkpoint saved levels of {got} robots, this run has {cur.levels.shape[0]}"
    values = levels.numpy().astype(np.int64)
    if values.min(initial=0) < 0 or values.max(initial=0) >= cur.num_levels:
        return f"{fresh}: the checkpoint's levels are outside 0 … {cur.num_levels - 1}"
    cur.levels[...] = values
    steps = env.step_count.copy()
    env.reset(np.arange(env.num_envs))
    env.step_count[...] = steps
    return f"terrain levels carried from the checkpoint (mean {cur.mean_level:.2f})"


def set_action_std(actor: Any, std: float) -> None:
    """Set an rsl-rl actor's Gaussian action noise to ``std`` on every joint (its learnt parameter,
    log or scalar form); a ValueError when ``std`` is not positive or the actor has no such noise."""
    if not std > 0:
        raise ValueError(f"an action standard deviation must be positive, got {std}")
    dist: Any = getattr(actor, "distribution", None)
    with torch.no_grad():
        if hasattr(dist, "log_std_param"):
            dist.log_std_param.fill_(math.log(std))
        elif hasattr(dist, "std_param"):
            dist.std_param.fill_(std)
        else:
            raise ValueError("this actor has no learnt Gaussian action noise to set")


RESUME_KEYS = ("task", "ppo", "seed", "init_from", "init_action_std", "teacher", "critic_warmup")
"""What a resumed Go1 run must share with the saved one (``iterations`` may grow)."""


class Go1Trainer(OnPolicyRunner[dict[str, Any]]):
    """PPO (or distillation) on :class:`Go1Env` with curriculum, checkpoints, resume, TensorBoard
    and history: the shared :class:`~scenefactory.rl.runner.OnPolicyRunner` with :class:`Go1Hooks`.
    Started by ``torchrun``, each of the N ranks simulates ``spec.task.num_envs / N`` robots with
    seed ``spec.seed + rank`` (:mod:`scenefactory.rl.distributed`); only rank 0 writes."""

    def __init__(
        self, spec: Go1TrainSpec, out_dir: str | os.PathLike[str], nthread: int | None = None
    ) -> None:
        """Build env and algorithm; resume from ``out_dir/checkpoints/latest.pt`` if it exists,
        else start from ``spec.init_from`` or ``spec.teacher`` when given."""
        self.spec = spec
        robots = ranks_from_environ().share(spec.task.num_envs, "the run's robots (--envs)")  # first
        ranks = setup_ranks("cpu")
        seed = ranks.seed(spec.seed)
        seed_everything(seed)
        task = replace(spec.task, num_envs=robots)
        env = Go1Env(task, seed=seed, nthread=nthread, randomize_episode_start=True)
        vec = Go1VecEnv(env)
        obs = vec.get_observations()
        alg: Algorithm
        multi = ranks.rsl_multi_gpu()
        if spec.teacher is None:
            alg = construct_ppo(obs, vec, spec.ppo, multi)
        else:
            alg = construct_distillation(obs, vec, spec.ppo, _checked(Path(spec.teacher), spec), multi)
        settings = RunSettings(
            task=TASK,
            spec=spec_to_dict(spec),
            task_cfg=task_config_to_dict(spec.task),
            ppo=spec.ppo,
            obs_dim=actor_obs_dim(spec.task),
            seed=spec.seed,
            iterations=spec.iterations,
        )
        super().__init__(settings, env, vec, alg, Go1Hooks(env, vec, spec, ranks), out_dir, ranks)
        self.env: Go1Env = env
        self.vec: Go1VecEnv = vec
        self.start_note: str | None = None
        """What a fine-tune kept of its checkpoint's terrain levels (:func:`carry_terrain_levels`)."""
        latest = resume_path(self.out)
        if latest is not None:
            self._resume(latest)
        elif spec.init_from is not None:
            self._init_from(Path(spec.init_from))
        elif spec.teacher is not None:
            self._init_student(Path(spec.teacher))

    def _init_student(self, path: Path) -> None:
        """The teacher's weights and curriculum; the student starts from the teacher's observation
        normalization of the ``policy`` group they share."""
        data = load_checkpoint(path)
        alg: Any = self.alg  # a Distillation
        try:
            alg.load(data, {"teacher": True}, strict=True)
        except (RuntimeError, KeyError) as exc:
            raise CheckpointError(f"{path}: teacher weights do not fit its saved config ({exc})") from exc
        student, teacher = alg.get_policy(), alg.teacher
        width = int(student.obs_dim)  # the ``policy`` group leads both (a teacher may read more)
        stats = {k: v[..., :width] if v.ndim else v for k, v in teacher.obs_normalizer.state_dict().items()}
        student.obs_normalizer.load_state_dict(stats)
        load_curriculum(self.env, data)

    def _init_from(self, path: Path) -> None:
        data = load_checkpoint(path)
        saved_task, _, saved_obs, _ = checked_policy(path, data, TASK, task_config_from_dict)
        alg: Any = self.alg  # a PPO
        actor = alg.get_policy()
        obs = self.vec.get_observations()
        inputs = torch.cat([obs[g] for g in self.spec.ppo.actor_obs_groups], dim=-1)
        task = self.spec.task
        grown = False  # the actor gained older frames: its optimizer state no longer fits
        if saved_task.whole_body.enabled != task.whole_body.enabled:
            if saved_task.whole_body.enabled:
                raise CheckpointError(f"{path}: its policy reads whole-body commands: fine-tune it with them")
            if saved_task.history != task.history:
                raise CheckpointError(
                    f"{path}: its actor reads {saved_task.history} frames, this task's {task.history}"
                )
            # the new command inputs start at zero weight (go1.widen): the fine-tune starts as the old policy
            group = self.spec.ppo.critic_obs_group
            frames = task.history if group == "policy" else 1
            data = widen_for_whole_body(data, task.history, inputs, obs[group], frames, alg)
            saved_obs = actor_obs_dim(task)
        elif saved_task.history < task.history:  # the older frames start at zero weight
            width = frame_dim(task.whole_body.enabled)
            grow = grow_history(data["actor_state_dict"], saved_task.history, task.history, width)
            data = {**data, "actor_state_dict": grow}
            saved_obs, grown = actor_obs_dim(task), True
        elif saved_task.history > task.history:
            raise CheckpointError(
                f"{path}: its actor reads {saved_task.history} frames, this task's {task.history} "
                "(a fine-tune may add frames, not drop them)"
            )
        obs_dim = actor_obs_dim(task)
        scans = task.terrain.height_scan_actor and not saved_task.terrain.height_scan_actor
        gained = scan_dim(task.terrain) if scans else 0
        if gained and saved_obs == obs_dim - gained:  # a blind actor gains the height scan at zero weight
            saved_obs = obs_dim
        if saved_obs != obs_dim:
            raise CheckpointError(
                f"{path}: actor observations are {saved_obs} wide, this task's are {obs_dim}"
            )
        actor_state = _widened(data["actor_state_dict"], inputs)
        critic = data.get("critic_state_dict")
        width = int(alg.critic.obs_dim)
        saved_width: int | None = None
        if critic is not None:  # without a normalizer to read it from, the strict load decides
            mean = critic.get("obs_normalizer._mean")
            saved_width = width if mean is None else int(mean.shape[-1])
        same_critic = critic is not None and saved_width == width
        full = same_critic and actor_state is data["actor_state_dict"] and not grown
        if critic is not None and not same_critic and self.spec.critic_warmup == 0:
            raise CheckpointError(
                f"{path}: its critic cannot be kept (it reads {saved_width} values, this task's "
                f"{width}: the joint damping/friction scale is privileged when randomized; the height "
                f"scan on terrain): start a fresh critic with --critic-warmup N"
            )
        try:
            if full:
                load_training_state(alg, data)  # a stage checkpoint: fresh optimizer moments
            else:  # a distilled student, another critic or actor width: the actor, a fresh optimizer
                actor.load_state_dict(actor_state, strict=True)
                if same_critic:  # the actor gained inputs (the height scan): the critic is kept
                    alg.critic.load_state_dict(critic, strict=True)
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"{path}: networks do not fit this run's PPO config ({exc})") from exc
        if self.spec.init_action_std is not None:
            set_action_std(actor, self.spec.init_action_std)
        load_curriculum(self.env, data)
        self.start_note = carry_terrain_levels(self.env, saved_task.terrain, data)

    def _resume(self, path: Path) -> None:
        """Check the saved run is this one (its spec, with fields added since at their defaults),
        then continue it."""
        data = load_checkpoint(path)
        spec = data.get("spec")
        saved: dict[str, Any] = {"init_from": None, "init_action_std": None, "teacher": None}
        saved["critic_warmup"] = 0
        saved.update(spec if isinstance(spec, dict) else {})
        if "ppo" in saved:
            try:
                saved["ppo"] = saved_ppo_dict(saved["ppo"])
            except (TypeError, ValueError) as exc:
                raise CheckpointError(
                    f"{path}: its run's 'spec.ppo' does not fit this version: {exc}"
                ) from None
        if isinstance(saved.get("task"), dict) and "whole_body" not in saved["task"]:  # saved before it
            saved["task"] = {**saved["task"], "whole_body": _jsonable(asdict(WholeBodyConfig()))}
        if isinstance(saved.get("task"), dict) and "terrain" not in saved["task"]:  # saved before terrain
            saved["task"] = {**saved["task"], "terrain": _jsonable(asdict(TerrainConfig()))}
        require_same_run(path, saved, _jsonable(spec_to_dict(self.spec)), RESUME_KEYS)
        self.resume(path, data)


@dataclass(frozen=True)
class Go1Policy:
    """A Go1 actor restored from a checkpoint: deterministic actions from actor observations (and,
    for a privileged teacher, the randomized parameters)."""

    actor: Any
    task_cfg: Go1TaskConfig
    ppo_cfg: PPOConfig
    meta: dict[str, Any]
    params_dim: int = 0
    """Randomized parameters the actor reads besides its observations (0: a deployable policy)."""

    @property
    def recurrent(self) -> bool:
        """Whether the actor carries a hidden state between steps (then call :meth:`reset`)."""
        return bool(getattr(self.actor, "is_recurrent", False))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
        """Mean action (N, 12) for actor observations (N, H·45) and, for a privileged actor, the
        parameters (N, ``params_dim``); a recurrent actor advances its state."""
        groups = {"policy": obs}
        if self.params_dim:
            if params is None or params.shape[-1] != self.params_dim:
                got = None if params is None else tuple(params.shape)
                raise ValueError(
                    f"this privileged actor reads ({obs.shape[0]}, {self.params_dim}) parameters, got {got}"
                )
            groups["params"] = params
        return self.actor(TensorDict(groups, batch_size=[obs.shape[0]]))

    def reset(self, done: torch.Tensor | None = None) -> None:
        """Zero the hidden state of the robots where ``done`` (N,) is true, or all of it (``None``:
        before a new batch); nothing to do for a feed-forward actor."""
        if self.recurrent:
            self.actor.reset(None if done is None else done.to(torch.float32))


def actor_obs_dim(task: Go1TaskConfig) -> int:
    """Width of the actor's ``policy`` observations: ``history`` frames of 45 (48 with whole-body
    commands)."""
    scan = scan_dim(task.terrain) if task.terrain.height_scan_actor else 0  # the height scan, last
    return task.history * frame_dim(task.whole_body.enabled) + scan


def _input_width(path: str | os.PathLike[str], state: dict[str, Any]) -> int:
    """All the values an actor's first layer reads, from its saved weights."""
    for key in ("obs_normalizer._mean", _first_layer(state) or ""):
        if key in state:
            return int(state[key].shape[-1])
    raise CheckpointError(f"{path}: cannot tell the actor's input width (no normalizer or first layer)")


def load_go1_policy(path: str | os.PathLike[str], privileged: bool = False) -> Go1Policy:
    """Restore the actor of a Go1 checkpoint (a training checkpoint or the shipped policy file);
    a privileged teacher only with ``privileged`` (evaluation: it needs parameters a robot cannot
    measure, so it is never exported)."""
    data = load_checkpoint(path)
    task_cfg, ppo_cfg, obs_dim, state = checked_policy(path, data, TASK, task_config_from_dict)
    params_dim = 0
    if obs_dim != actor_obs_dim(task_cfg):
        width = frame_dim(task_cfg.whole_body.enabled)
        raise CheckpointError(
            f"{path}: checkpoint field 'obs_dim' is {obs_dim}, its task config gives "
            f"{actor_obs_dim(task_cfg)} observations ({task_cfg.history} frames of {width})"
        )
    if ppo_cfg.actor_obs_groups != ("policy",):
        if not privileged:
            raise CheckpointError(
                f"{path}: a privileged teacher (its actor reads {list(ppo_cfg.actor_obs_groups)}, parameters "
                f"a robot cannot measure); distil it into a student with 'train go1 --teacher' first"
            )
        params_dim = _input_width(path, state) - obs_dim
        if params_dim < 1:
            raise CheckpointError(f"{path}: a privileged actor whose first layer reads no parameters")
    actor = build_actor(obs_dim, ppo_cfg, num_actions=12, params_dim=params_dim)
    load_actor_weights(path, actor, state)
    actor.eval()
    meta: dict[str, Any] = {k: data[k] for k in ("iteration", "env_steps", "seed", "obs_dim") if k in data}
    return Go1Policy(actor, task_cfg, ppo_cfg, meta, params_dim)
