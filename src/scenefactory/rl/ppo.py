"""The one adapter to rsl-rl (``rsl-rl-lib``, pinned): PPO configs, the VecEnv view of a task,
the training loop with checkpoints, resume and TensorBoard, and policy loading for evaluation.

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

import contextlib
import io
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rsl_rl.algorithms import PPO, Distillation
from rsl_rl.env import VecEnv
from rsl_rl.models import MLPModel, RNNModel
from tensordict import TensorDict

from scenefactory.checkpoint import (
    CHECKPOINT_FORMAT,
    LATEST,
    config_from_checkpoint,
    iteration_files,
    load_checkpoint,
    require_finite_state,
    require_int,
    require_keys,
    save_iteration,
)
from scenefactory.engines import DEFAULT_PHYSICS_HZ
from scenefactory.errors import CheckpointError, UserError, warn
from scenefactory.io import write_json
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving import observations as obs_terms
from scenefactory.tasks.driving.config import DrivingTaskConfig, task_config_from_dict, task_config_to_dict
from scenefactory.tasks.driving.env import DrivingEnv, StepResult
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize

ACTIVATIONS = (
    "elu",
    "selu",
    "relu",
    "crelu",
    "lrelu",
    "tanh",
    "sigmoid",
    "softplus",
    "gelu",
    "swish",
    "mish",
    "identity",
)
"""Activation names rsl-rl's ``resolve_nn_activation`` accepts (checked here, not deep in rsl-rl)."""


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters and network sizes (rsl-rl's PPO with an MLP actor and critic)."""

    num_steps_per_env: int = 32
    num_learning_epochs: int = 4
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    learning_rate: float = 5e-4
    entropy_coef: float = 0.003
    value_loss_coef: float = 1.0
    max_grad_norm: float = 1.0
    desired_kl: float = 0.01
    schedule: str = "adaptive"
    actor_hidden_dims: tuple[int, ...] = (256, 128, 64)
    critic_hidden_dims: tuple[int, ...] = (256, 128, 64)
    activation: str = "elu"
    init_noise_std: float = 0.5
    save_interval: int = 10
    critic_obs_group: str = "policy"
    """Observation group the critic reads: ``policy`` (the actor's) or ``critic`` (privileged)."""
    actor_rnn_type: str | None = None
    """``None``: an MLP actor; ``"gru"`` or ``"lstm"``: a recurrent layer before the actor MLP
    (rsl-rl's ``RNNModel``; the actor then carries a hidden state between steps). Used by the Go1
    task, whose evaluation, export and runner reset that state; driving evaluation does not."""
    actor_rnn_hidden_dim: int = 64
    actor_obs_groups: tuple[str, ...] = ("policy",)
    """Observation groups the actor reads, concatenated in this order. ``("policy", "params")`` is
    a privileged Go1 teacher: it also reads the randomized parameters, which a robot cannot measure,
    so it is distilled (``--teacher``), never exported."""

    def __post_init__(self) -> None:
        """Validate values that rsl-rl would otherwise accept and misbehave on."""
        if self.num_steps_per_env < 1 or self.num_learning_epochs < 1 or self.num_mini_batches < 1:
            raise ValueError("num_steps_per_env, num_learning_epochs and num_mini_batches must be >= 1")
        if not 0 < self.gamma <= 1 or not 0 <= self.lam <= 1:
            raise ValueError(f"need 0 < gamma <= 1 and 0 <= lam <= 1, got {self.gamma}, {self.lam}")
        if self.schedule not in ("adaptive", "fixed"):
            raise ValueError(f"schedule must be 'adaptive' or 'fixed', got '{self.schedule}'")
        if self.save_interval < 1:
            raise ValueError(f"save_interval must be >= 1, got {self.save_interval}")
        if self.actor_rnn_type not in (None, "gru", "lstm"):
            raise ValueError(f"actor_rnn_type must be None, 'gru' or 'lstm', got '{self.actor_rnn_type}'")
        if not self.actor_obs_groups or self.actor_obs_groups[0] != "policy":
            raise ValueError(f"actor_obs_groups must start with 'policy', got {self.actor_obs_groups}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got '{self.activation}'")
        if self.actor_rnn_hidden_dim < 1:
            raise ValueError(f"actor_rnn_hidden_dim must be >= 1, got {self.actor_rnn_hidden_dim}")

    def actor_cfg(self) -> dict[str, Any]:
        """rsl-rl actor model config (``MLPModel``, or ``RNNModel`` when ``actor_rnn_type`` is set)."""
        cfg: dict[str, Any] = {
            "class_name": "MLPModel",
            "hidden_dims": list(self.actor_hidden_dims),
            "activation": self.activation,
            "obs_normalization": True,
            "distribution_cfg": {
                "class_name": "GaussianDistribution",
                "init_std": self.init_noise_std,
                "std_type": "log",
            },
        }
        if self.actor_rnn_type is not None:
            cfg.update(
                class_name="RNNModel",
                rnn_type=self.actor_rnn_type,
                rnn_hidden_dim=self.actor_rnn_hidden_dim,
                rnn_num_layers=1,
            )
        return cfg

    def rsl_cfg(self) -> dict[str, Any]:
        """The dict rsl-rl's ``PPO.construct_algorithm`` expects."""
        return {
            "num_steps_per_env": self.num_steps_per_env,
            "save_interval": self.save_interval,
            "obs_groups": {"actor": list(self.actor_obs_groups), "critic": [self.critic_obs_group]},
            "multi_gpu": None,
            "algorithm": {
                "class_name": "PPO",
                "num_learning_epochs": self.num_learning_epochs,
                "num_mini_batches": self.num_mini_batches,
                "clip_param": self.clip_param,
                "gamma": self.gamma,
                "lam": self.lam,
                "learning_rate": self.learning_rate,
                "entropy_coef": self.entropy_coef,
                "value_loss_coef": self.value_loss_coef,
                "max_grad_norm": self.max_grad_norm,
                "desired_kl": self.desired_kl,
                "schedule": self.schedule,
            },
            "actor": self.actor_cfg(),
            "critic": {
                "class_name": "MLPModel",
                "hidden_dims": list(self.critic_hidden_dims),
                "activation": self.activation,
                "obs_normalization": True,
            },
        }


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


def build_actor(
    obs_dim: int,
    ppo: PPOConfig,
    device: torch.device | str = "cpu",
    num_actions: int = 2,
    params_dim: int = 0,
) -> MLPModel:
    """An rsl-rl actor of the right shape (for loading a checkpoint without a PPO object); a
    privileged actor (``ppo.actor_obs_groups`` with ``params``) also reads ``params_dim`` values."""
    groups = list(ppo.actor_obs_groups)
    widths = {"policy": obs_dim, "params": params_dim}
    if set(groups) - set(widths) or ("params" in groups) != (params_dim > 0):
        raise ValueError(
            f"actor groups {groups} with params_dim {params_dim}: expected params_dim > 0 "
            f"exactly when the actor reads 'params'"
        )
    obs = TensorDict({g: torch.zeros(1, widths[g]) for g in groups}, batch_size=[1])
    kwargs = ppo.actor_cfg()
    cls = RNNModel if kwargs.pop("class_name") == "RNNModel" else MLPModel
    model = cls(obs, {"actor": groups}, "actor", num_actions, **kwargs)
    return model.to(device)


def construct_ppo(obs: TensorDict, vec: Any, ppo: PPOConfig) -> PPO:
    """rsl-rl's PPO (actor, critic, storage, optimizer) for a VecEnv-like ``vec`` on the CPU."""
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model architectures
        return PPO.construct_algorithm(obs, vec, ppo.rsl_cfg(), "cpu")


DISTILL_EPOCHS = 2
"""Passes over each rollout when distilling (rsl-rl's ``num_learning_epochs``)."""
DISTILL_GRADIENT_LENGTH = 8
"""Rollout steps per distillation gradient step (the student's truncated-BPTT length)."""


def construct_distillation(obs: TensorDict, vec: Any, student: PPOConfig, teacher: PPOConfig) -> Any:
    """rsl-rl's ``Distillation`` (student from ``student``'s actor, teacher from ``teacher``'s).

    Each reads its config's ``actor_obs_groups`` (a privileged teacher also reads ``params``); the
    teacher's weights are loaded by the caller. The student's
    sampled actions drive the environment (its ``init_noise_std`` is the exploration), the loss is
    the MSE to the teacher's mean action, ``student.learning_rate`` and ``max_grad_norm`` apply.
    """
    if student.num_steps_per_env % DISTILL_GRADIENT_LENGTH:
        raise ValueError(
            f"num_steps_per_env ({student.num_steps_per_env}) must be a multiple of the distillation "
            f"gradient length {DISTILL_GRADIENT_LENGTH}"
        )
    cfg = {
        "num_steps_per_env": student.num_steps_per_env,
        "obs_groups": {"student": list(student.actor_obs_groups), "teacher": list(teacher.actor_obs_groups)},
        "multi_gpu": None,
        "algorithm": {
            "class_name": "Distillation",
            "num_learning_epochs": DISTILL_EPOCHS,
            "gradient_length": DISTILL_GRADIENT_LENGTH,
            "learning_rate": student.learning_rate,
            "max_grad_norm": student.max_grad_norm,
            "loss_type": "mse",
        },
        "student": student.actor_cfg(),
        "teacher": teacher.actor_cfg(),
    }
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model architectures
        return Distillation.construct_algorithm(obs, vec, cfg, "cpu")


def _mask_decisions(alg: PPO, valid: torch.Tensor) -> None:
    """Zero the advantage of non-decision samples and renormalize over real ones (see module doc)."""
    st = alg.storage
    v = valid.unsqueeze(-1)
    raw = st.returns - st.values
    sel = raw[v]
    mean = sel.mean() if sel.numel() else raw.new_zeros(())
    std = sel.std() if sel.numel() > 1 else raw.new_ones(())
    st.advantages = torch.where(v, (raw - mean) / (std + 1e-8), torch.zeros_like(raw))
    st.returns = torch.where(v, st.returns, st.values)


@dataclass(frozen=True)
class LoadedPolicy:
    """A policy restored from a checkpoint: deterministic actions from observations."""

    actor: MLPModel
    task_cfg: DrivingTaskConfig
    ppo_cfg: PPOConfig
    meta: dict[str, Any]

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Mean action (..., 2) for observations (..., D)."""
        lead = obs.shape[:-1]
        flat = obs.reshape(-1, obs.shape[-1])
        td = TensorDict({"policy": flat}, batch_size=[flat.shape[0]])
        return self.actor(td).reshape(*lead, 2)


def ppo_config_from_dict(data: dict[str, Any]) -> PPOConfig:
    """Inverse of ``asdict(PPOConfig)``."""
    d = dict(data)
    for k in ("actor_hidden_dims", "critic_hidden_dims", "actor_obs_groups"):
        if k in d:
            d[k] = tuple(d[k])
    return PPOConfig(**d)


def saved_ppo_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's saved PPO config as today's JSON form: fields added since it was written take
    their defaults (which reproduce the old behaviour), so older runs still resume."""
    return json.loads(json.dumps(asdict(ppo_config_from_dict(data))))


def checked_policy(
    path: str | os.PathLike[str], data: dict[str, Any], task: str, task_from_dict: Callable[[Any], Any]
) -> tuple[Any, PPOConfig, int, dict[str, torch.Tensor]]:
    """A checkpoint's policy parts after checking them, each failure one line naming the field:
    ``(task config, PPO config, obs_dim, actor state)``; the actor weights must be finite."""
    if data.get("task") != task:
        raise CheckpointError(f"{path}: checkpoint is for task '{data.get('task')}', expected '{task}'")
    require_keys(data, path, ("task_cfg", "ppo_cfg", "obs_dim", "actor_state_dict"))
    task_cfg = config_from_checkpoint(data, path, "task_cfg", task_from_dict)
    ppo_cfg = config_from_checkpoint(data, path, "ppo_cfg", ppo_config_from_dict)
    obs_dim = require_int(data, path, "obs_dim", low=1)
    state = require_finite_state(data["actor_state_dict"], path, "actor_state_dict")
    return task_cfg, ppo_cfg, obs_dim, state


def load_actor_weights(path: str | os.PathLike[str], actor: torch.nn.Module, state: dict[str, Any]) -> None:
    """``actor.load_state_dict(state)`` with a mismatch (a wrong observation width, missing or extra
    layers) as one line naming the first differing entry."""
    mine = actor.state_dict()
    for name, value in state.items():
        if name in mine and tuple(mine[name].shape) != tuple(value.shape):
            raise CheckpointError(
                f"{path}: actor weight '{name}' has shape {tuple(value.shape)}, its saved config gives "
                f"{tuple(mine[name].shape)} (a wrong observation width or a hand-edited checkpoint)"
            )
    missing, extra = sorted(set(mine) - set(state)), sorted(set(state) - set(mine))
    if missing or extra:
        what = f"lacks '{missing[0]}'" if missing else f"has an unexpected '{extra[0]}'"
        raise CheckpointError(f"{path}: actor weights do not fit the saved config: it {what}")
    actor.load_state_dict(state)


def load_policy(path: str | os.PathLike[str], task: str = "drive") -> LoadedPolicy:
    """Restore the actor of a training checkpoint for task ``task`` (every field checked)."""
    data = load_checkpoint(path)
    task_cfg, ppo_cfg, obs_dim, state = checked_policy(path, data, task, task_config_from_dict)
    if task == "drive" and ppo_cfg.actor_rnn_type is not None:
        raise CheckpointError(
            f"{path}: a recurrent ({ppo_cfg.actor_rnn_type}) driving actor; driving evaluation keeps "
            "no hidden state between steps, expected an MLP actor"
        )
    expected = observation_dim_of(task_cfg)
    if obs_dim != expected:
        raise CheckpointError(
            f"{path}: checkpoint field 'obs_dim' is {obs_dim}, its task config gives {expected} observations"
        )
    from scenefactory.engines import ENGINES

    if "engine" in data and data["engine"] not in ENGINES:
        raise CheckpointError(
            f"{path}: checkpoint field 'engine' is {data['engine']!r}, expected one of {sorted(ENGINES)}"
        )
    actor = build_actor(obs_dim, ppo_cfg)
    load_actor_weights(path, actor, state)
    actor.eval()
    keys = ("iteration", "engine", "physics_hz", "seed", "obs_dim")
    meta: dict[str, Any] = {k: data[k] for k in keys if k in data}
    return LoadedPolicy(actor, task_cfg, ppo_cfg, meta)


def observation_dim_of(cfg: DrivingTaskConfig) -> int:
    """The observation width a driving task config produces."""
    oc = cfg.observations
    return obs_terms.observation_dim(
        len(oc.route_lookahead_m), oc.num_road_points, oc.num_neighbors, oc.friction_aware, oc.traffic_signals
    )


# -------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class TrainSpec:
    """Everything that defines a training run (written to ``config.json`` beside its results)."""

    task: DrivingTaskConfig
    ppo: PPOConfig = field(default_factory=PPOConfig)
    engine: str = "kinematic"
    physics_hz: float = DEFAULT_PHYSICS_HZ
    dynamics_model: str | None = None
    grounding: str | None = None
    """``--engine grounded``: the ``scenefactory ground`` folder the engine runs."""
    action_lag_steps: int = 0
    """Actuator lag of the training engine in policy steps (``engines.wrappers.LaggedEngine``)."""
    iterations: int = 100
    seed: int = 0
    num_train_scenes: int = 120
    scene_source: str = "procedural"

    def __post_init__(self) -> None:
        if self.ppo.actor_rnn_type is not None:
            raise ValueError(
                f"ppo.actor_rnn_type must be None for driving, got '{self.ppo.actor_rnn_type}': the "
                "driving rollouts and evaluation keep no hidden state between steps (recurrent "
                "actors are for the Go1 task)"
            )


def spec_to_dict(spec: TrainSpec) -> dict[str, Any]:
    """JSON-ready form of a training spec; ``grounding`` and ``action_lag_steps`` appear only when
    set, so the specs of runs without them read as they did before they existed."""
    out = {
        "task": task_config_to_dict(spec.task),
        "ppo": asdict(spec.ppo),
        "engine": spec.engine,
        "physics_hz": spec.physics_hz,
        "dynamics_model": spec.dynamics_model,
        "iterations": spec.iterations,
        "seed": spec.seed,
        "num_train_scenes": spec.num_train_scenes,
        "scene_source": spec.scene_source,
    }
    if spec.grounding is not None:
        out["grounding"] = spec.grounding
    if spec.action_lag_steps:
        out["action_lag_steps"] = spec.action_lag_steps
    return out


def restore_worlds(path: Path, data: dict[str, Any], env: Any) -> bool:
    """Exact resume: the checkpoint's saved worlds (``env.load_state_dict``) and global generators;
    ``False``, with a warning, for a checkpoint written before they were saved (the caller then
    continues from freshly reset worlds)."""
    if "env_state" not in data or "rng" not in data:
        warn(f"{path} predates exact resume: training continues from freshly reset worlds")
        return False
    try:
        env.load_state_dict(data["env_state"])
        set_global_rng_state(data["rng"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: cannot resume, its saved environment does not fit: {exc}") from None
    return True


def saved_sum(data: dict[str, Any], key: str, like: torch.Tensor) -> torch.Tensor:
    """A per-agent running sum saved under ``key`` (episode return, length), or ``like`` when the
    checkpoint has none of its shape."""
    saved = data.get(key)
    return saved.clone() if isinstance(saved, torch.Tensor) and saved.shape == like.shape else like


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def global_rng_state() -> dict[str, Any]:
    """The state of every global random generator (torch, numpy, python) as plain data."""
    np_state: Any = np.random.get_state()
    _, keys, pos, has_gauss, cached = np_state
    return {
        "torch": torch.get_rng_state(),
        "numpy": [torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "python": random.getstate(),
    }


def set_global_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    torch.set_rng_state(state["torch"])
    keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))


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


RESUME_KEYS = (
    "task",
    "ppo",
    "engine",
    "physics_hz",
    "dynamics_model",
    "grounding",
    "action_lag_steps",
    "seed",
    "num_train_scenes",
    "scene_source",
)
"""What a resumed run must share with the saved one (``iterations`` may grow)."""


def resume_checkpoint(spec: TrainSpec, out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint a run of ``spec`` in ``out_dir`` resumes from, or ``None`` for a fresh run; a
    run made with other settings is a :class:`CheckpointError` naming the first that differs. Cheap:
    callers check this before building any scene."""
    ckpt_dir = Path(out_dir) / "checkpoints"
    if ckpt_dir.exists() and not ckpt_dir.is_dir():
        raise CheckpointError(f"{ckpt_dir}: is a file, expected the run's checkpoints folder (or nothing)")
    if not ((ckpt_dir / LATEST).exists() or iteration_files(ckpt_dir)):
        return None
    path = ckpt_dir / LATEST
    data = load_checkpoint(path)
    saved = data.get("spec")
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: checkpoint lacks its run's 'spec' (not a training checkpoint?)")
    saved = dict(saved)
    if isinstance(saved.get("ppo"), dict):
        try:
            saved["ppo"] = saved_ppo_dict(saved["ppo"])
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: its run's 'spec.ppo' does not fit this version: {exc}") from None
    mine = json.loads(json.dumps(spec_to_dict(spec)))
    for key in RESUME_KEYS:
        if saved.get(key) != mine.get(key):
            raise CheckpointError(
                f"{path}: cannot resume, the saved run's '{key}' differs from this command's "
                f"(use another --out folder or the same settings)"
            )
    check_resume_payload(path, data, spec)
    return data


MAX_ABS_LOG_STD = 20.0
"""A saved log standard deviation beyond ±20 (std outside [2e-9, 5e8]) is a diverged run."""


def check_resume_payload(path: Path, data: dict[str, Any], spec: TrainSpec) -> None:
    """Everything a resume reads, checked before any scene is built: the policy fields (as for
    evaluation) agree with the run's spec, the networks and optimizer are finite, the counters are
    integers, and the saved generators and worlds have this run's shapes; one line naming the field."""
    require_keys(
        data, path, ("critic_state_dict", "optimizer_state_dict", "iteration", "env_steps", "torch_rng")
    )
    task_cfg, ppo_cfg, obs_dim, actor = checked_policy(path, data, "drive", task_config_from_dict)
    if task_config_to_dict(task_cfg) != task_config_to_dict(spec.task):
        raise CheckpointError(
            f"{path}: checkpoint field 'task_cfg' differs from its run's spec (hand-edited?)"
        )
    if asdict(ppo_cfg) != asdict(spec.ppo):
        raise CheckpointError(
            f"{path}: checkpoint field 'ppo_cfg' differs from its run's spec (hand-edited?)"
        )
    if obs_dim != observation_dim_of(spec.task):
        raise CheckpointError(
            f"{path}: checkpoint field 'obs_dim' is {obs_dim}, "
            f"this task gives {observation_dim_of(spec.task)}"
        )
    if data.get("engine", spec.engine) != spec.engine:
        raise CheckpointError(
            f"{path}: checkpoint field 'engine' is {data.get('engine')!r}, its spec {spec.engine!r}"
        )
    for name, value in actor.items():
        if "log_std" in name and bool((value.abs() > MAX_ABS_LOG_STD).any()):
            raise CheckpointError(
                f"{path}: 'actor_state_dict.{name}' is beyond ±{MAX_ABS_LOG_STD:g} (a diverged run: use an "
                "earlier model_<N>.pt)"
            )
    require_finite_state(data["critic_state_dict"], path, "critic_state_dict")
    _require_finite_optimizer(path, data["optimizer_state_dict"])
    require_int(data, path, "iteration")
    require_int(data, path, "env_steps")
    _require_generator_state(path, "torch_rng", data["torch_rng"])
    if "env_state" in data or "rng" in data:
        _check_saved_worlds(path, data, spec.task.num_worlds)


def _require_generator_state(path: Path, name: str, value: Any) -> None:
    """A torch CPU generator's state: a uint8 tensor of the size ``get_state`` gives."""
    size = torch.get_rng_state().numel()
    if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.numel() != size:
        raise CheckpointError(
            f"{path}: checkpoint field '{name}' is not a torch generator state ({size} bytes)"
        )


def _require_finite_optimizer(path: Path, opt: Any) -> None:
    state = opt.get("state") if isinstance(opt, dict) else None
    if not isinstance(state, dict) or not isinstance(opt.get("param_groups"), list):
        raise CheckpointError(f"{path}: checkpoint field 'optimizer_state_dict' is not an optimizer state")
    for key, entry in state.items():
        if isinstance(entry, dict):
            require_finite_state(entry, path, f"optimizer_state_dict.state.{key}", allow_empty=True)


def _check_saved_worlds(path: Path, data: dict[str, Any], num_worlds: int) -> None:
    env_state: Any = data.get("env_state")
    rng: Any = data.get("rng")
    episode = env_state.get("episode") if isinstance(env_state, dict) else None
    if not isinstance(episode, dict) or not isinstance(env_state.get("engine"), dict):
        raise CheckpointError(f"{path}: checkpoint field 'env_state' lacks its 'episode' or 'engine' state")
    for name, value in episode.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != num_worlds:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise CheckpointError(
                f"{path}: 'env_state.episode.{name}' is {shape}, expected {num_worlds} worlds first"
            )
    _require_generator_state(path, "env_state.generator", env_state.get("generator"))
    rng = rng if isinstance(rng, dict) else {}
    _require_generator_state(path, "rng.torch", rng.get("torch"))
    numpy_state, python_state = rng.get("numpy"), rng.get("python")
    ok = isinstance(rng.get("torch"), torch.Tensor)
    ok = ok and isinstance(numpy_state, list | tuple) and len(numpy_state) == 4
    ok = ok and isinstance(numpy_state[0], torch.Tensor) and numpy_state[0].numel() == 624
    ok = ok and isinstance(python_state, list | tuple) and len(python_state) == 3
    if not ok:
        raise CheckpointError(
            f"{path}: checkpoint field 'rng' is not the torch/numpy/python generator states"
        )


class Trainer:
    """PPO on a driving task with checkpoints, resume, TensorBoard and a history file.

    Output folder layout: ``config.json``, ``history.json`` (one row per iteration),
    ``checkpoints/model_<it>.pt`` and ``checkpoints/latest.pt`` (atomic), ``tensorboard/``.
    """

    def __init__(
        self,
        spec: TrainSpec,
        scenes: Sequence[Scene],
        out_dir: str | os.PathLike[str],
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """Build env and algorithm; resume from ``out_dir/checkpoints/latest.pt`` if it exists
        (or from ``checkpoint``, what :func:`resume_checkpoint` returned for this run)."""
        self.spec = spec
        self.out = Path(out_dir)
        self.ckpt_dir = self.out / "checkpoints"
        seed_everything(spec.seed)
        self.env = DrivingEnv(
            spec.task,
            scenes,
            engine=spec.engine,
            seed=spec.seed,
            physics_hz=spec.physics_hz,
            dynamics_model=spec.dynamics_model,
            grounding=spec.grounding,
            action_lag_steps=spec.action_lag_steps,
        )
        self.vec = DrivingVecEnv(self.env)
        self.alg = construct_ppo(self.vec.get_observations(), self.vec, spec.ppo)
        self.iteration = 0
        self.env_steps = 0
        self.history: list[dict[str, Any]] = []
        self._ret_sum = torch.zeros(self.vec.num_envs)
        """Reward summed over each agent's episode so far (``mean_reward`` of finished episodes)."""
        data = checkpoint if checkpoint is not None else resume_checkpoint(spec, self.out)
        if data is not None:
            self._resume(data)

    def _resume(self, data: dict[str, Any]) -> None:
        """Load ``data`` (checked by :func:`resume_checkpoint`) into the algorithm and the worlds."""
        path = self.ckpt_dir / LATEST
        try:
            self.alg.load(data, None, strict=True)
        except (RuntimeError, KeyError, ValueError) as exc:
            msg = " ".join(str(exc).split())[:200]
            raise CheckpointError(
                f"{path}: cannot resume, its networks do not fit this run's ({msg})"
            ) from None
        self.iteration, self.env_steps = int(data["iteration"]), int(data["env_steps"])
        self.history = list(data.get("history", []))
        if restore_worlds(path, data, self.env):
            self._ret_sum = saved_sum(data, "return_sum", self._ret_sum)
        else:  # the worlds restart, the draws continue
            require_keys(data, path, ("env_rng",))
            torch.set_rng_state(data["torch_rng"])
            self.env.generator.set_state(data["env_rng"])

    def _payload(self) -> dict[str, Any]:
        saved = self.alg.save()
        saved.update(
            {
                "format": CHECKPOINT_FORMAT,
                "task": "drive",
                "engine": self.spec.engine,
                "physics_hz": self.spec.physics_hz,
                "seed": self.spec.seed,
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "obs_dim": self.env.obs_dim,
                "task_cfg": task_config_to_dict(self.spec.task),
                "ppo_cfg": asdict(self.spec.ppo),
                "spec": json.loads(json.dumps(spec_to_dict(self.spec))),
                "history": self.history,
                "torch_rng": torch.get_rng_state(),
                "env_rng": self.env.generator.get_state(),
                "rng": global_rng_state(),
                "env_state": self.env.state_dict(),
                "return_sum": self._ret_sum.clone(),
            }
        )
        return saved

    def save(self) -> Path:
        """Write ``model_<it>.pt`` and ``latest.pt`` atomically; returns the latest path."""
        return save_iteration(self.ckpt_dir, self.iteration, self._payload())

    def run(self, on_iteration: Callable[[IterationStats], None] | None = None) -> list[dict[str, Any]]:
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
        episodes = EpisodeLog()
        ret_sum = self._ret_sum
        finished_returns: list[torch.Tensor] = []
        obs = vec.get_observations()
        alg.train_mode()
        try:
            while self.iteration < self.spec.iterations:
                t0 = time.perf_counter()
                valid = torch.zeros(t_steps, vec.num_envs, dtype=torch.bool)
                with torch.inference_mode():
                    for t in range(t_steps):
                        actions = alg.act(obs)
                        obs, rewards, dones, extras = vec.step(actions)
                        res = vec.last
                        assert res is not None
                        valid[t] = res.was_active.reshape(-1)
                        alg.process_env_step(obs, rewards, dones, extras)
                        ret_sum += rewards
                        ended = dones.bool()
                        if ended.any():
                            finished_returns.append(ret_sum[ended].clone())
                            ret_sum[ended] = 0.0
                        episodes.add(res.finished)
                    t1 = time.perf_counter()
                    alg.compute_returns(obs)
                    _mask_decisions(alg, valid)
                losses = alg.update()
                t2 = time.perf_counter()
                self.iteration += 1
                self.env_steps += t_steps * vec.num_envs
                metrics = summarize(episodes.cat()) if len(episodes) else {}
                returns = torch.cat(finished_returns) if finished_returns else torch.zeros(0)
                stats = IterationStats(
                    iteration=self.iteration,
                    env_steps=self.env_steps,
                    mean_reward=float(returns.mean()) if returns.numel() else float("nan"),
                    fps=t_steps * vec.num_envs / (t2 - t0),
                    collect_s=t1 - t0,
                    learn_s=t2 - t1,
                    losses={k: float(v) for k, v in losses.items()},
                    metrics=metrics,
                    active_slot_fraction=float(valid.float().mean()),
                )
                episodes.clear()
                finished_returns.clear()
                self.history.append(stats.row())
                self._log(writer, stats, alg)
                if (
                    self.iteration % self.spec.ppo.save_interval == 0
                    or self.iteration == self.spec.iterations
                ):
                    self.save()
                if on_iteration is not None:
                    on_iteration(stats)
        finally:
            writer.close()
        return self.history

    def _log(self, writer: Any, stats: IterationStats, alg: PPO) -> None:
        it = stats.iteration
        for k, v in stats.losses.items():
            writer.add_scalar(f"Loss/{k}", v, it)
        writer.add_scalar("Loss/learning_rate", alg.learning_rate, it)
        writer.add_scalar("Policy/mean_std", float(alg.get_policy().output_std.mean().detach()), it)
        writer.add_scalar("Perf/steps_per_s", stats.fps, it)
        writer.add_scalar("Perf/active_slot_fraction", stats.active_slot_fraction, it)
        writer.add_scalar("Train/mean_reward", stats.mean_reward, it)
        for k in ("goal_reach_rate", "collision_rate", "offroad_rate", "timeout_rate", "mean_peak_drac_mps2"):
            if k in stats.metrics:
                writer.add_scalar(f"Episode/{k}", stats.metrics[k], it)
        write_json(self.out / "history.json", self.history)


def require_positive(name: str, value: int) -> int:
    """A CLI integer that must be >= 1."""
    if value < 1:
        raise UserError(f"{name} must be a positive integer, got {value}")
    return value
