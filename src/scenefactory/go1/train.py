"""PPO on the Go1 velocity-tracking task: the VecEnv view, training loop, checkpoints and resume.

rsl-rl itself is reached only through ``rl.ppo`` (``construct_ppo``, ``build_actor``). The actor
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
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from scenefactory.checkpoint import (
    CHECKPOINT_FORMAT,
    LATEST,
    iteration_files,
    load_checkpoint,
    require_finite_state,
    require_int,
    require_keys,
    save_iteration,
)
from scenefactory.errors import CheckpointError, warn
from scenefactory.go1.config import Go1TaskConfig, task_config_from_dict, task_config_to_dict
from scenefactory.go1.env import Go1Env, LocoStep
from scenefactory.go1.observations import FRAME_DIM, PARAMS_START
from scenefactory.io import write_json
from scenefactory.rl.ppo import (
    PPOConfig,
    build_actor,
    checked_policy,
    construct_distillation,
    construct_ppo,
    global_rng_state,
    load_actor_weights,
    restore_worlds,
    saved_ppo_dict,
    saved_sum,
    seed_everything,
)

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
        groups = {"policy": actor, "critic": critic, "params": critic[:, PARAMS_START:]}
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
    randomization adds a privileged value; needs ``critic_warmup``), gives the actor and curriculum;
    the critic and optimizer start fresh."""
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
    obs_dim = spec.task.history * FRAME_DIM
    if saved_obs != obs_dim:
        raise CheckpointError(
            f"{teacher}: the teacher reads {saved_obs} observations, this task gives {obs_dim} "
            f"(use the teacher's --history)"
        )
    return ppo_cfg


class Go1Trainer:
    """PPO on :class:`Go1Env` with curriculum, checkpoints, resume, TensorBoard and history."""

    def __init__(
        self, spec: Go1TrainSpec, out_dir: str | os.PathLike[str], nthread: int | None = None
    ) -> None:
        """Build env and algorithm; resume from ``out_dir/checkpoints/latest.pt`` if it exists."""
        self.spec = spec
        self.out = Path(out_dir)
        self.ckpt_dir = self.out / "checkpoints"
        seed_everything(spec.seed)
        self.env = Go1Env(spec.task, seed=spec.seed, nthread=nthread, randomize_episode_start=True)
        self.vec = Go1VecEnv(self.env)
        obs = self.vec.get_observations()
        self.alg: Any
        if spec.teacher is None:
            self.alg = construct_ppo(obs, self.vec, spec.ppo)
        else:
            self.alg = construct_distillation(obs, self.vec, spec.ppo, _checked(Path(spec.teacher), spec))
        self.iteration = 0
        self.env_steps = 0
        self.history: list[dict[str, Any]] = []
        self._ret = torch.zeros(self.vec.num_envs)
        """Return and length of each robot's episode so far (the ``mean_return`` of ended ones)."""
        self._ep_len = torch.zeros(self.vec.num_envs)
        latest = self.ckpt_dir / LATEST
        if latest.exists() or iteration_files(self.ckpt_dir):
            self._resume(latest)
        elif spec.init_from is not None:
            self._init_from(Path(spec.init_from))
        elif spec.teacher is not None:
            self._init_student(Path(spec.teacher))

    def _init_student(self, path: Path) -> None:
        """The teacher's weights and curriculum; the student starts from the teacher's observation
        normalization of the ``policy`` group they share."""
        data = load_checkpoint(path)
        try:
            self.alg.load(data, {"teacher": True}, strict=True)
        except (RuntimeError, KeyError) as exc:
            raise CheckpointError(f"{path}: teacher weights do not fit its saved config ({exc})") from exc
        student, teacher = self.alg.get_policy(), self.alg.teacher
        width = int(student.obs_dim)  # the ``policy`` group leads both (a teacher may read more)
        stats = {k: v[..., :width] if v.ndim else v for k, v in teacher.obs_normalizer.state_dict().items()}
        student.obs_normalizer.load_state_dict(stats)
        self._load_curriculum(data)

    def _load_curriculum(self, data: dict[str, Any]) -> None:
        cur = data.get("curriculum") or {"lin_fraction": 1.0, "yaw_fraction": 1.0}
        self.env.lin_fraction = float(cur["lin_fraction"])
        self.env.yaw_fraction = float(cur["yaw_fraction"])

    def _init_from(self, path: Path) -> None:
        data = load_checkpoint(path)
        _, _, saved_obs, _ = checked_policy(path, data, TASK, task_config_from_dict)
        obs_dim = self.spec.task.history * FRAME_DIM
        if saved_obs != obs_dim:
            raise CheckpointError(
                f"{path}: actor observations are {saved_obs} wide, this task's are {obs_dim}"
            )
        actor = self.alg.get_policy()
        obs = self.vec.get_observations()
        inputs = torch.cat([obs[g] for g in self.spec.ppo.actor_obs_groups], dim=-1)
        actor_state = _widened(data["actor_state_dict"], inputs)
        critic = data.get("critic_state_dict")
        width = int(self.alg.critic.obs_dim)
        saved_width: int | None = None
        if critic is not None:  # without a normalizer to read it from, the strict load decides
            mean = critic.get("obs_normalizer._mean")
            saved_width = width if mean is None else int(mean.shape[-1])
        full = critic is not None and saved_width == width and actor_state is data["actor_state_dict"]
        if critic is not None and not full and self.spec.critic_warmup == 0:
            raise CheckpointError(
                f"{path}: its critic and optimizer cannot be kept (the critic reads {saved_width} values, "
                f"this task's {width}: the joint damping/friction scale is privileged when randomized; or "
                f"the actor gained inputs): start a fresh critic with --critic-warmup N"
            )
        try:
            if full:
                self.alg.load(data, None, strict=True)
            else:  # a distilled student, another critic or actor width: the actor only, a fresh critic
                actor.load_state_dict(actor_state, strict=True)
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"{path}: networks do not fit this run's PPO config ({exc})") from exc
        self._load_curriculum(data)

    def _resume(self, path: Path) -> None:
        data = load_checkpoint(path)
        saved, mine = data.get("spec") or {}, _jsonable(spec_to_dict(self.spec))
        saved.setdefault("init_from", None)
        saved.setdefault("teacher", None)
        saved.setdefault("critic_warmup", 0)
        if "ppo" in saved:
            saved["ppo"] = saved_ppo_dict(saved["ppo"])
        for key in ("task", "ppo", "seed", "init_from", "teacher", "critic_warmup"):
            if saved.get(key) != mine[key]:
                raise CheckpointError(
                    f"{path}: cannot resume, the saved run's '{key}' differs from this command's "
                    f"(use another --out folder or the same settings)"
                )
        try:
            if self.spec.teacher is None:
                self.alg.load(data, None, strict=True)
            else:
                self.alg.load(data, {"student": True, "teacher": True, "optimizer": True}, strict=True)
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(
                f"{path}: cannot resume, its networks do not fit this run's (a run with "
                f"--joint-friction-dr made before its critic saw the joint damping scale?): {exc}"
            ) from exc
        require_finite_state(data.get("actor_state_dict"), path, "actor_state_dict")
        self.iteration = require_int(data, path, "iteration")
        self.env_steps = require_int(data, path, "env_steps")
        self.history = list(data.get("history", []))
        if restore_worlds(path, data, self.env):
            self._ret = saved_sum(data, "ret_sum", self._ret)
            self._ep_len = saved_sum(data, "ep_len_sum", self._ep_len)
            return
        # the robots restart, the draws and the curriculum continue
        require_keys(data, path, ("torch_rng", "env_rng", "curriculum"))
        torch.set_rng_state(data["torch_rng"])
        self.env.rng.bit_generator.state = data["env_rng"]
        self.env.lin_fraction = float(data["curriculum"]["lin_fraction"])
        self.env.yaw_fraction = float(data["curriculum"]["yaw_fraction"])

    def _payload(self) -> dict[str, Any]:
        saved = self.alg.save()
        if "student_state_dict" in saved:  # distillation: the student is this run's actor
            saved["actor_state_dict"] = saved["student_state_dict"]
        saved.update(
            {
                "format": CHECKPOINT_FORMAT,
                "task": TASK,
                "seed": self.spec.seed,
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "obs_dim": self.spec.task.history * FRAME_DIM,
                "task_cfg": task_config_to_dict(self.spec.task),
                "ppo_cfg": asdict(self.spec.ppo),
                "spec": _jsonable(spec_to_dict(self.spec)),
                "history": self.history,
                "curriculum": {"lin_fraction": self.env.lin_fraction, "yaw_fraction": self.env.yaw_fraction},
                "torch_rng": torch.get_rng_state(),
                "env_rng": self.env.rng.bit_generator.state,
                "rng": global_rng_state(),
                "env_state": self.env.state_dict(),
                "ret_sum": self._ret.clone(),
                "ep_len_sum": self._ep_len.clone(),
            }
        )
        return saved

    def save(self) -> Path:
        """Write ``model_<it>.pt`` and ``latest.pt`` atomically; returns the latest path."""
        return save_iteration(self.ckpt_dir, self.iteration, self._payload())

    def run(self, on_iteration: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Train until ``spec.iterations`` iterations are done (continuing a resumed run)."""
        from torch.utils.tensorboard import SummaryWriter

        if self.iteration >= self.spec.iterations:
            if self.iteration > self.spec.iterations:
                warn(
                    f"{self.out} already holds {self.iteration} iterations, more than the "
                    f"{self.spec.iterations} asked for: nothing trained, its config.json and checkpoints "
                    "are left as they are"
                )
            return self.history
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "config.json", spec_to_dict(self.spec))
        writer = SummaryWriter(log_dir=str(self.out / "tensorboard"), flush_secs=10)
        alg, vec, t_steps = self.alg, self.vec, self.spec.ppo.num_steps_per_env
        n = vec.num_envs
        ret, ep_len = self._ret, self._ep_len
        obs = vec.get_observations()
        alg.train_mode()
        try:
            while self.iteration < self.spec.iterations:
                t0 = time.perf_counter()
                returns, lengths, falls, timeouts = [], [], 0, 0
                term_sums: dict[str, float] = {}
                with torch.inference_mode():
                    for _ in range(t_steps):
                        actions = alg.act(obs)
                        obs, rewards, dones, extras = vec.step(actions)
                        alg.process_env_step(obs, rewards, dones, extras)
                        res = vec.last
                        assert res is not None
                        for k, v in res.terms.items():
                            term_sums[k] = term_sums.get(k, 0.0) + float(v.mean())
                        ret += rewards
                        ep_len += 1
                        ended = dones.bool()
                        if ended.any():
                            returns.append(ret[ended].clone())
                            lengths.append(ep_len[ended].clone())
                            falls += int(res.terminated.sum())
                            timeouts += int(res.time_out.sum())
                            ret[ended] = 0.0
                            ep_len[ended] = 0.0
                    t1 = time.perf_counter()
                    alg.compute_returns(obs)
                warmup = self.iteration < self.spec.critic_warmup and self.spec.teacher is None
                actor = alg.get_policy()
                if warmup:
                    actor.requires_grad_(False)
                elif self.iteration == self.spec.critic_warmup > 0 and self.spec.ppo.schedule == "adaptive":
                    alg.learning_rate = RAMP_START_LR
                    for group in alg.optimizer.param_groups:
                        group["lr"] = RAMP_START_LR
                try:
                    losses = alg.update()
                finally:
                    actor.requires_grad_(True)
                t2 = time.perf_counter()
                curriculum = self.env.update_curriculum()
                self.iteration += 1
                self.env_steps += t_steps * n
                r = torch.cat(returns) if returns else torch.zeros(0)
                ln = torch.cat(lengths) if lengths else torch.zeros(0)
                row: dict[str, Any] = {
                    "iteration": self.iteration,
                    "env_steps": self.env_steps,
                    "mean_return": float(r.mean()) if r.numel() else float("nan"),
                    "mean_episode_s": float(ln.mean()) * self.env.cfg.dt if ln.numel() else float("nan"),
                    "fall_fraction": falls / max(1, falls + timeouts),
                    "steps_per_s": t_steps * n / (t2 - t0),
                    "collect_s": t1 - t0,
                    "learn_s": t2 - t1,
                    "action_std": float(alg.get_policy().output_std.mean().detach()),
                    **{f"loss_{k}": float(v) for k, v in losses.items()},
                    **{f"term_{k}": v / t_steps for k, v in term_sums.items()},
                    **{f"curriculum_{k}": v for k, v in curriculum.items()},
                }
                self.history.append(row)
                for k, v in row.items():
                    if k != "iteration" and isinstance(v, float) and np.isfinite(v):
                        writer.add_scalar(k, v, self.iteration)
                if (
                    self.iteration % self.spec.ppo.save_interval == 0
                    or self.iteration == self.spec.iterations
                ):
                    self.save()
                    write_json(self.out / "history.json", self.history)
                if on_iteration is not None:
                    on_iteration(row)
        finally:
            writer.close()
        return self.history


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
    if obs_dim != task_cfg.history * FRAME_DIM:
        raise CheckpointError(
            f"{path}: checkpoint field 'obs_dim' is {obs_dim}, its task config gives "
            f"{task_cfg.history * FRAME_DIM} observations ({task_cfg.history} frames of {FRAME_DIM})"
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
