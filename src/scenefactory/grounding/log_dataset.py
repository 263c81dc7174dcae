"""Driving logs as a transition dataset: the real-world side of grounding.

Scenes converted from driving logs (WOMD, ``scenefactory convert``) carry each controlled agent's
logged trajectory (:class:`~scenefactory.scenes.scene.AgentLog`: position, heading, speed, valid,
one row per ``dt_s``). :func:`log_transitions` turns them into the transition format of
:mod:`scenefactory.grounding.dataset` (same keys, shapes and ``meta.json``), so everything that
fits or grounds dynamics on simulator data reads real driving the same way.

Per agent, over the logged steps t → t + 1 that are both valid:

- ``state`` / ``next_state`` (N, 6) in :data:`~scenefactory.grounding.dataset.STATE_FIELDS` order:
  x, y, yaw and speed straight from the log; the yaw rate is the backward difference
  wrap(ψ_t − ψ_{t−1}) / dt, and the road-wheel angle is the steering angle the kinematic inverse
  infers for the step t − 1 → t (both describe the motion that led into the state, as an engine's
  state does). At the first step of a valid run there is no step before it, and the forward step
  t → t + 1 stands in.
- ``action`` (N, 2) the normalized ``[steer, accel]`` of the kinematic tier's inverse
  (:func:`~scenefactory.engines.kinematic.inverse_bicycle`: a = Δv/dt, steering from the yaw
  rate, δ = 0 below 0.6 m/s), clipped to [-1, 1] — the action the abstract simulator would have
  to take; the next state is what the real car did.
- ``friction`` (N,) the scene's road friction; ``episode`` (N,) one id per agent and unbroken run
  of valid steps (an unobserved step splits a track, since a history must not bridge a gap);
  ``step`` (N,) the log step t; ``policy`` (N,) 0 (``meta["policies"] == ["log"]``); and
  ``scene`` (N,) int32 index into ``meta["scenes"]`` (to split by scene).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.errors import UserError
from scenefactory.grounding.dataset import DATASET_FORMAT, STATE_FIELDS
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.scenes.scene import Scene
from scenefactory.vehicles.params import VehicleParams

LOG_POLICIES = ("log",)
KEYS = ("state", "action", "next_state", "friction", "episode", "step", "policy", "scene")


def _wrap(angle: np.ndarray) -> np.ndarray:
    return np.remainder(angle + np.pi, 2 * np.pi) - np.pi


def scene_log_transitions(
    scene: Scene, scene_index: int, first_episode: int, params: VehicleParams
) -> dict[str, np.ndarray]:
    """The transitions of one scene's log (keys :data:`KEYS`; see the module docstring).

    Episode ids run from ``first_episode`` up; a scene without a log gives empty arrays.
    """
    empty = {k: np.zeros((0, 6) if k in ("state", "next_state") else (0,)) for k in KEYS}
    empty["action"] = np.zeros((0, 2))
    log = scene.log
    if log is None or log.num_steps < 2:
        return _typed(empty)
    k = min(scene.max_agents, log.valid.shape[0])
    valid = log.valid[:k] & scene.agent_valid[:k, None]
    xy, yaw, speed, dt = log.xy[:k], log.yaw[:k], log.speed[:k], log.dt_s
    actions, ok = inverse_bicycle(yaw, speed, valid, dt, params)  # (k, T, 2), (k, T): t -> t+1
    steer_fwd = actions[..., 0] * params.max_steer_rad  # angle of step t -> t+1
    rate_fwd = np.zeros_like(yaw)
    rate_fwd[:, :-1] = _wrap(yaw[:, 1:] - yaw[:, :-1]) / dt
    # backward values (the step that led into t), the forward ones where no step led into t
    into = np.zeros_like(valid)
    into[:, 1:] = ok[:, :-1]
    steer = np.where(into, np.roll(steer_fwd, 1, axis=1), steer_fwd)
    rate = np.where(into, np.roll(rate_fwd, 1, axis=1), rate_fwd)
    state = np.concatenate((xy, yaw[..., None], speed[..., None], rate[..., None], steer[..., None]), -1)
    # one episode per unbroken run of transitions: a new one wherever a run starts
    starts = ok & ~into
    run_id = np.cumsum(starts.reshape(-1)).reshape(ok.shape) - 1
    a_idx, t_idx = np.nonzero(ok)
    n = len(a_idx)
    next_state = state[a_idx, t_idx + 1].copy()
    # the next state's yaw rate and wheel angle come from the step just taken
    next_state[:, 4] = rate_fwd[a_idx, t_idx]
    next_state[:, 5] = steer_fwd[a_idx, t_idx]
    return _typed(
        {
            "state": state[a_idx, t_idx],
            "action": actions[a_idx, t_idx],
            "next_state": next_state,
            "friction": np.full(n, scene.friction),
            "episode": first_episode + run_id[a_idx, t_idx],
            "step": t_idx,
            "policy": np.zeros(n),
            "scene": np.full(n, scene_index),
        }
    )


def _typed(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    dtypes = {"episode": np.int64, "step": np.int32, "policy": np.int8, "scene": np.int32}
    return {k: np.asarray(v, dtype=dtypes.get(k, np.float32)) for k, v in d.items()}


def log_transitions(scenes: Sequence[Scene], params: VehicleParams | None = None) -> dict[str, np.ndarray]:
    """Every scene's logged transitions, concatenated (scene ``i`` has ``scene == i``); episode ids
    are unique across scenes. ``params`` (the abstract tier's vehicle) sets the action scale."""
    params = params or VehicleParams()
    parts, next_episode = [], 0
    for i, sc in enumerate(scenes):
        part = scene_log_transitions(sc, i, next_episode, params)
        if len(part["episode"]):
            next_episode = int(part["episode"].max()) + 1
        parts.append(part)
    if not parts:
        return _typed({k: np.zeros((0, 6) if k in ("state", "next_state") else (0,)) for k in KEYS})
    return {k: np.concatenate([p[k] for p in parts]) for k in KEYS}


def write_log_dataset(
    scenes: Sequence[Scene],
    out: Path,
    source: str = "",
    params: VehicleParams | None = None,
    shard_size: int = 50_000,
) -> dict[str, Any]:
    """Write the scenes' logged transitions as a transition dataset folder (shards + ``meta.json``,
    readable by :func:`~scenefactory.grounding.dataset.load_transitions`); returns the metadata.

    Raises ``UserError`` when no scene carries a log with at least one valid transition.
    """
    if shard_size < 1:
        raise UserError(f"shard size must be positive, got {shard_size}")
    params = params or VehicleParams()
    logged = [sc for sc in scenes if sc.log is not None]
    if not logged:
        raise UserError(
            f"no scene{' in ' + source if source else ''} carries a driving log "
            "(convert WOMD scenarios with 'scenefactory convert' first)"
        )
    dts = {sc.log.dt_s for sc in logged if sc.log is not None}
    if len(dts) > 1:
        raise UserError(f"the scenes' logs have different time steps {sorted(dts)}; expected one")
    data = log_transitions(scenes, params)
    total = len(data["episode"])
    if total == 0:
        raise UserError(f"the logs{' in ' + source if source else ''} hold no two consecutive valid steps")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("shard_*.npz"):  # a rewrite must not leave stale shards behind
        old.unlink()
    shards = 0
    for lo in range(0, total, shard_size):
        stream = io.BytesIO()
        chunk = {k: v[lo : lo + shard_size] for k, v in data.items()}
        np.savez_compressed(stream, **chunk)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle
        atomic_write_bytes(out / f"shard_{shards:05d}.npz", stream.getvalue())
        shards += 1
    meta = {
        "format": DATASET_FORMAT,
        "engine": "log",
        "physics_hz": None,
        "policy_dt_s": float(dts.pop()),
        "vehicle": asdict(params),
        "state_fields": list(STATE_FIELDS),
        "policies": list(LOG_POLICIES),
        "policies_used": list(LOG_POLICIES),
        "checkpoint": None,
        "source": source,
        "scenes": [sc.name for sc in scenes],
        "scenes_with_log": len(logged),
        "episodes": len(np.unique(data["episode"])),
        "transitions": total,
        "shards": shards,
    }
    write_json(out / "meta.json", meta)
    return meta
