"""What defines a driving training run (:class:`TrainSpec`), its JSON form, and the checks a run
makes before resuming from a checkpoint (cheap: before any scene is built).

A spec's engine is one :class:`~scenefactory.engines.spec.EngineSpec`, written as
``"engine": {"tier": ..., "physics_hz": ..., ...}``. Runs written before it held the engine flat
(``"engine": "mujoco", "physics_hz": 120.0, "dynamics_model": ..., "grounding": ...,
"action_lag_steps": ...``, the last two only when set); :func:`engine_of_saved_spec` reads both,
so those runs still resume and their checkpoints still evaluate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from scenefactory.checkpoint import load_checkpoint, require_finite_state, require_int, require_keys
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import CheckpointError, UserError
from scenefactory.rl.checkpoints import (
    checked_policy,
    require_finite_optimizer,
    require_same_run,
    require_sane_log_std,
    resume_path,
)
from scenefactory.rl.ppo import PPOConfig, saved_ppo_dict
from scenefactory.rl.seeding import require_generator_state, require_global_rng_state
from scenefactory.tasks.driving import observations as obs_terms
from scenefactory.tasks.driving.config import DrivingTaskConfig, task_config_from_dict, task_config_to_dict


@dataclass(frozen=True)
class TrainSpec:
    """Everything that defines a training run (written to ``config.json`` beside its results)."""

    task: DrivingTaskConfig
    ppo: PPOConfig = field(default_factory=PPOConfig)
    engine: EngineSpec = field(default_factory=EngineSpec)
    """The engine the policy trains on (tier, physics rate, model or grounding, actuator lag)."""
    iterations: int = 100
    seed: int = 0
    num_train_scenes: int = 120
    scene_source: str = "procedural"

    def __post_init__(self) -> None:
        """A driving actor is an MLP, and the engine a described one (not a name)."""
        if self.ppo.actor_rnn_type is not None:
            raise ValueError(
                f"ppo.actor_rnn_type must be None for driving, got '{self.ppo.actor_rnn_type}': the "
                "driving rollouts and evaluation keep no hidden state between steps (recurrent "
                "actors are for the Go1 task)"
            )
        if not isinstance(self.engine, EngineSpec):
            raise TypeError(
                f"TrainSpec.engine must be an EngineSpec, got {self.engine!r} "
                f"(use EngineSpec(tier={self.engine!r}))"
            )


def spec_to_dict(spec: TrainSpec) -> dict[str, Any]:
    """JSON-ready form of a training spec."""
    return {
        "task": task_config_to_dict(spec.task),
        "ppo": asdict(spec.ppo),
        "engine": spec.engine.to_dict(),
        "iterations": spec.iterations,
        "seed": spec.seed,
        "num_train_scenes": spec.num_train_scenes,
        "scene_source": spec.scene_source,
    }


FLAT_ENGINE_KEYS = tuple(f.name for f in fields(EngineSpec) if f.name != "tier")
"""The engine settings an older spec held beside its ``"engine": "<tier>"`` (the spec's fields but
the tier, as :meth:`EngineSpec.from_flat` reads them)."""


def engine_of_saved_spec(path: str | os.PathLike[str], saved: Any) -> EngineSpec:
    """The engine of a saved run's spec (a checkpoint's ``spec`` or a ``config.json``), in the
    ``"engine": {...}`` form or the older flat one; a :class:`CheckpointError` naming ``path`` when
    it is neither or does not check."""
    if not isinstance(saved, Mapping):
        raise CheckpointError(f"{path}: the run's 'spec' is {type(saved).__name__}, expected a dict")
    engine = saved.get("engine")
    try:
        if isinstance(engine, Mapping):
            return EngineSpec.from_dict(engine)
        if isinstance(engine, str):
            return EngineSpec.from_flat(saved)
    except UserError as exc:
        raise CheckpointError(f"{path}: the run's 'spec.engine' does not check: {exc}") from None
    raise CheckpointError(
        f"{path}: the run's 'spec.engine' is {engine!r}, expected an engine spec (or an engine name)"
    )


def saved_spec_dict(path: str | os.PathLike[str], saved: Any) -> dict[str, Any]:
    """A saved run's spec in today's JSON form: the engine as one ``engine`` entry (either saved
    form), and the PPO config with the fields added since it was written at their defaults (which
    reproduce the old behaviour)."""
    engine = engine_of_saved_spec(path, saved)
    out = {k: v for k, v in saved.items() if k not in FLAT_ENGINE_KEYS}
    out["engine"] = engine.to_dict()
    if isinstance(out.get("ppo"), dict):
        try:
            out["ppo"] = saved_ppo_dict(out["ppo"])
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: its run's 'spec.ppo' does not fit this version: {exc}") from None
    return json.loads(json.dumps(out))


def observation_dim_of(cfg: DrivingTaskConfig) -> int:
    """The observation width a driving task config produces."""
    oc = cfg.observations
    return obs_terms.observation_dim(
        len(oc.route_lookahead_m), oc.num_road_points, oc.num_neighbors, oc.friction_aware, oc.traffic_signals
    )


RESUME_KEYS = ("task", "ppo", "engine", "seed", "num_train_scenes", "scene_source")
"""What a resumed run must share with the saved one (``iterations`` may grow)."""


def resume_checkpoint(spec: TrainSpec, out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint a run of ``spec`` in ``out_dir`` resumes from, or ``None`` for a fresh run; a
    run made with other settings is a :class:`CheckpointError` naming the first that differs. Cheap:
    callers check this before building any scene."""
    path = resume_path(out_dir)
    if path is None:
        return None
    data = load_checkpoint(path)
    if not isinstance(data.get("spec"), dict):
        raise CheckpointError(f"{path}: checkpoint lacks its run's 'spec' (not a training checkpoint?)")
    saved = saved_spec_dict(path, data["spec"])
    require_same_run(path, saved, json.loads(json.dumps(spec_to_dict(spec))), RESUME_KEYS)
    check_resume_payload(path, data, spec)
    return data


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
    if data.get("engine", spec.engine.tier) != spec.engine.tier:
        raise CheckpointError(
            f"{path}: checkpoint field 'engine' is {data.get('engine')!r}, its spec's '{spec.engine.tier}'"
        )
    require_sane_log_std(path, actor)
    require_finite_state(data["critic_state_dict"], path, "critic_state_dict")
    require_finite_optimizer(path, data["optimizer_state_dict"])
    require_int(data, path, "iteration")
    require_int(data, path, "env_steps")
    require_generator_state(path, "torch_rng", data["torch_rng"])
    if "env_state" in data or "rng" in data:  # a data-parallel run's ranks saved their share each
        ranks = require_int(data, path, "world_size", low=1) if "world_size" in data else 1
        _check_saved_worlds(path, data, spec.task.num_worlds // ranks)


def _check_saved_worlds(path: Path, data: dict[str, Any], num_worlds: int) -> None:
    """The saved worlds (``env_state``: ``num_worlds`` first in every episode tensor, an engine
    state, the scene draws' generator) and the global generators (``rng``)."""
    env_state: Any = data.get("env_state")
    episode = env_state.get("episode") if isinstance(env_state, dict) else None
    if not isinstance(episode, dict) or not isinstance(env_state.get("engine"), dict):
        raise CheckpointError(f"{path}: checkpoint field 'env_state' lacks its 'episode' or 'engine' state")
    for name, value in episode.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != num_worlds:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise CheckpointError(
                f"{path}: 'env_state.episode.{name}' is {shape}, expected {num_worlds} worlds first"
            )
    require_generator_state(path, "env_state.generator", env_state.get("generator"))
    require_global_rng_state(path, "rng", data.get("rng"))
