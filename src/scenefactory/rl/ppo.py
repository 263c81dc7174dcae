"""The one module that imports rsl-rl (``rsl-rl-lib``, pinned): PPO hyper-parameters, actor
construction for loading a checkpoint, and rsl-rl's PPO and Distillation algorithms with their
saved training state. Task-free: nothing here reads a scene, a car or a task.

Parameter sharing: every controlled agent (or robot) of a task is one rsl-rl environment driven by
the same actor and critic; the task's VecEnv (:class:`VecEnv`) gives them as flat tensors.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import asdict, dataclass
from typing import Any, TypeAlias

import torch
from rsl_rl.algorithms import PPO, Distillation
from rsl_rl.env import VecEnv as VecEnv
from rsl_rl.models import MLPModel, RNNModel
from tensordict import TensorDict

from scenefactory.errors import warn

Algorithm: TypeAlias = PPO | Distillation
"""An on-policy algorithm the runner (:mod:`scenefactory.rl.runner`) trains."""

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


def construct_ppo(
    obs: TensorDict,
    vec: Any,
    ppo: PPOConfig,
    multi_gpu: dict[str, int] | None = None,
    device: str | torch.device = "cpu",
) -> PPO:
    """rsl-rl's PPO (actor, critic, storage, optimizer) for a VecEnv-like ``vec`` on ``device`` (the
    environment's); ``multi_gpu`` (:meth:`~scenefactory.rl.distributed.Ranks.rsl_multi_gpu`) makes it
    average gradients and the KL divergence over the ranks of a data-parallel run."""
    cfg = ppo.rsl_cfg()
    cfg["multi_gpu"] = multi_gpu
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model architectures
        return PPO.construct_algorithm(obs, vec, cfg, str(device))


DISTILL_EPOCHS = 2
"""Passes over each rollout when distilling (rsl-rl's ``num_learning_epochs``)."""
DISTILL_GRADIENT_LENGTH = 8
"""Rollout steps per distillation gradient step (the student's truncated-BPTT length)."""


def construct_distillation(
    obs: TensorDict,
    vec: Any,
    student: PPOConfig,
    teacher: PPOConfig,
    multi_gpu: dict[str, int] | None = None,
) -> Distillation:
    """rsl-rl's ``Distillation`` (student from ``student``'s actor, teacher from ``teacher``'s).

    Each reads its config's ``actor_obs_groups`` (a privileged teacher also reads ``params``); the
    teacher's weights are loaded by the caller. The student's
    sampled actions drive the environment (its ``init_noise_std`` is the exploration), the loss is
    the MSE to the teacher's mean action, ``student.learning_rate`` and ``max_grad_norm`` apply;
    ``multi_gpu`` as for :func:`construct_ppo`.
    """
    if student.num_steps_per_env % DISTILL_GRADIENT_LENGTH:
        raise ValueError(
            f"num_steps_per_env ({student.num_steps_per_env}) must be a multiple of the distillation "
            f"gradient length {DISTILL_GRADIENT_LENGTH}"
        )
    cfg = {
        "num_steps_per_env": student.num_steps_per_env,
        "obs_groups": {"student": list(student.actor_obs_groups), "teacher": list(teacher.actor_obs_groups)},
        "multi_gpu": multi_gpu,
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


def training_state(alg: Algorithm) -> dict[str, Any]:
    """What a checkpoint keeps of ``alg`` (networks, normalizers, optimizer); a distillation's
    student is also saved as ``actor_state_dict``, the run's actor that evaluation loads."""
    saved = alg.save()
    if "student_state_dict" in saved:
        saved["actor_state_dict"] = saved["student_state_dict"]
    return saved


def load_training_state(alg: Algorithm, data: dict[str, Any]) -> None:
    """Load :func:`training_state` into ``alg`` strictly (every network and the optimizer); raises
    ``RuntimeError``, ``KeyError`` or ``ValueError`` when the saved networks do not fit. A stage
    checkpoint (``rl.checkpoints.write_stage_checkpoint``: no optimizer state) loads the networks and
    the learning rate; the optimizer's moments start fresh."""
    if isinstance(alg, Distillation):
        alg.load(data, {"student": True, "teacher": True, "optimizer": True}, strict=True)
    elif data.get("stage_checkpoint") and "optimizer_state_dict" not in data:
        alg.load(data, {"actor": True, "critic": True}, strict=True)
        warn("a stage checkpoint: the optimizer's moments start fresh (networks and learning rate continue)")
        lr = float(data["learning_rate"])
        alg.learning_rate = lr
        for group in alg.optimizer.param_groups:
            group["lr"] = lr
    else:
        alg.load(data, None, strict=True)
