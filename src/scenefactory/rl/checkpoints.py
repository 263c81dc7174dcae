"""Training checkpoints, task-free: where a run resumes from, the checks a policy or a resumed run
must pass (each failure one line naming the checkpoint field), and the restore of saved worlds.

A run's folder holds ``checkpoints/model_<it>.pt`` and ``checkpoints/latest.pt`` (atomic writes,
:func:`scenefactory.checkpoint.save_iteration`); a damaged ``latest.pt`` falls back to the newest
readable ``model_<it>.pt`` (:func:`scenefactory.checkpoint.load_checkpoint`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from scenefactory.checkpoint import (
    LATEST,
    config_from_checkpoint,
    iteration_files,
    load_checkpoint,
    pack_stage,
    require_finite_state,
    require_int,
    require_keys,
)
from scenefactory.errors import CheckpointError, warn
from scenefactory.io import atomic_write_bytes
from scenefactory.rl.ppo import PPOConfig, ppo_config_from_dict
from scenefactory.rl.seeding import set_global_rng_state

MAX_ABS_LOG_STD = 20.0
"""A saved log standard deviation beyond ±20 (std outside [2e-9, 5e8]) is a diverged run."""


def resume_path(out_dir: str | os.PathLike[str]) -> Path | None:
    """``out_dir/checkpoints/latest.pt`` when the run in ``out_dir`` saved a checkpoint (``latest.pt``
    or a ``model_<it>.pt``, which loading falls back to), else ``None`` (a fresh run); a file where
    the checkpoints folder belongs is a :class:`CheckpointError`."""
    ckpt_dir = Path(out_dir) / "checkpoints"
    if ckpt_dir.exists() and not ckpt_dir.is_dir():
        raise CheckpointError(f"{ckpt_dir}: is a file, expected the run's checkpoints folder (or nothing)")
    if not ((ckpt_dir / LATEST).exists() or iteration_files(ckpt_dir)):
        return None
    return ckpt_dir / LATEST


def require_same_run(
    path: str | os.PathLike[str], saved: Mapping[str, Any], mine: Mapping[str, Any], keys: Sequence[str]
) -> None:
    """A :class:`CheckpointError` naming the first of ``keys`` where the saved run's spec (JSON
    form) differs from this command's."""
    for key in keys:
        if saved.get(key) != mine.get(key):
            raise CheckpointError(
                f"{path}: cannot resume, the saved run's '{key}' differs from this command's "
                f"(use another --out folder or the same settings)"
            )


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


def require_sane_log_std(path: str | os.PathLike[str], actor: Mapping[str, torch.Tensor]) -> None:
    """A :class:`CheckpointError` when an actor's log standard deviation is beyond
    :data:`MAX_ABS_LOG_STD` (finite, but a run that diverged)."""
    for name, value in actor.items():
        if "log_std" in name and bool((value.abs() > MAX_ABS_LOG_STD).any()):
            raise CheckpointError(
                f"{path}: 'actor_state_dict.{name}' is beyond ±{MAX_ABS_LOG_STD:g} (a diverged run: use an "
                "earlier model_<N>.pt)"
            )


def require_finite_optimizer(path: str | os.PathLike[str], opt: Any) -> None:
    """A saved optimizer state (``state`` and ``param_groups``) whose tensors are all finite."""
    state = opt.get("state") if isinstance(opt, dict) else None
    if not isinstance(state, dict) or not isinstance(opt.get("param_groups"), list):
        raise CheckpointError(f"{path}: checkpoint field 'optimizer_state_dict' is not an optimizer state")
    for key, entry in state.items():
        if isinstance(entry, dict):
            require_finite_state(entry, path, f"optimizer_state_dict.state.{key}", allow_empty=True)


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


def restore_worlds(path: str | os.PathLike[str], data: dict[str, Any], env: Any) -> bool:
    """Exact resume: the checkpoint's saved worlds (``env.load_state_dict``) and global generators;
    ``False``, with a warning, for a checkpoint written before they were saved (the caller then
    continues from freshly reset worlds)."""
    if "env_state" not in data or "rng" not in data:
        why = "is a stage checkpoint" if data.get("stage_checkpoint") else "predates exact resume"
        warn(f"{path} {why}: training continues from freshly reset worlds")
        return False
    try:
        env.load_state_dict(data["env_state"])
        set_global_rng_state(data["rng"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: cannot resume, its saved environment does not fit: {exc}") from None
    return True


def saved_sum(data: dict[str, Any], keys: Sequence[str], like: torch.Tensor) -> torch.Tensor:
    """A per-agent running sum (episode return, length) saved under the first of ``keys`` the
    checkpoint has, or ``like`` when it has none of ``like``'s shape."""
    saved = next((data[k] for k in keys if k in data), None)
    return saved.clone() if isinstance(saved, torch.Tensor) and saved.shape == like.shape else like


STAGE_KEEPS = (
    "format", "task", "seed", "iteration", "env_steps", "obs_dim", "task_cfg", "ppo_cfg", "spec",
    "history", "curriculum", "actor_state_dict", "critic_state_dict", "world_size", "torch_rng",
    "env_rng",
)  # fmt: skip
"""What a stage checkpoint keeps of a training checkpoint: the networks, the counters, the configs,
the history, the curriculum, torch's and the environment's generators; not the optimizer's moments,
the saved worlds or the global generators saved with them."""
STAGE_WORLD_KEEPS = (("terrain", "levels"),)
"""The parts of the saved worlds (``env_state``) a stage checkpoint keeps: the slow-growing ones a
fresh start would take hundreds of iterations to regrow (Go1's terrain curriculum, one level per
robot). A stage's ``env_state`` holds only these, and no ``rng``: it restores no worlds."""
MAX_STAGE_BYTES = 1_000_000
"""A stage checkpoint must fit the repository's limit for committed checkpoints (1 MB)."""


def write_stage_checkpoint(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """Write the stage checkpoint of training checkpoint ``src`` to ``dst`` (atomically) and return
    its size in bytes: a long chain's stage committed to the repository so that a later session
    resumes it (``train go1 --recipe NAME --from-stage STAGE --stage-checkpoint FILE``): the
    networks, counters, history, curriculum, learning rate and :data:`STAGE_WORLD_KEEPS` of the
    worlds continue; the optimizer's moments and the rest of the worlds start fresh, each with a
    warning. The weight matrices are stored in float16 and the file compressed
    (:func:`scenefactory.checkpoint.pack_stage`; reading restores float32), so the run resumes from
    weights rounded by at most 2^-11 of their size. A :class:`CheckpointError` when ``src`` lacks
    what a resume needs or the result is over :data:`MAX_STAGE_BYTES`."""
    data = load_checkpoint(Path(src))
    require_keys(data, src, ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iteration"))
    opt = data["optimizer_state_dict"]
    groups = opt.get("param_groups") if isinstance(opt, dict) else None
    if not groups or "lr" not in groups[0]:
        raise CheckpointError(f"{src}: checkpoint field 'optimizer_state_dict' has no learning rate")
    stage = {k: data[k] for k in STAGE_KEEPS if k in data}
    stage["stage_checkpoint"] = True
    stage["learning_rate"] = float(groups[0]["lr"])
    worlds: dict[str, Any] = {}
    for part, name in STAGE_WORLD_KEEPS:
        saved = data.get("env_state", {}).get(part)
        if isinstance(saved, dict) and name in saved:
            worlds.setdefault(part, {})[name] = saved[name]
    if worlds:
        stage["env_state"] = worlds
    blob = pack_stage(stage)
    if len(blob) > MAX_STAGE_BYTES:
        raise CheckpointError(f"{src}: its stage checkpoint is {len(blob):,} bytes, over {MAX_STAGE_BYTES:,}")
    atomic_write_bytes(dst, blob)
    return len(blob)
