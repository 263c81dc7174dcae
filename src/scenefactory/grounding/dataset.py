"""Transition datasets: what learned dynamics models and grounding methods train on.

A dataset is a folder of shards ``shard_00000.npz`` … plus ``meta.json`` (engine, rates, vehicle,
seed, policy mix, counts). Every shard holds N transitions of single agents, flat:

- ``state``       (N, 6) abstract state before the step: x [m], y [m], yaw [rad], speed [m/s],
  yaw rate [rad/s], road-wheel angle [rad] (:data:`STATE_FIELDS`);
- ``action``      (N, 2) the normalized ``[steer, accel]`` applied;
- ``next_state``  (N, 6) the state one policy step later;
- ``friction``    (N,) road friction μ of the world;
- ``episode``     (N,) int64 agent-episode id (unique in the dataset), ``step`` (N,) its step index —
  sort by (episode, step) to rebuild histories;
- ``policy``      (N,) int8 index into ``meta.json``'s ``policies``;
- ``reward``      (N,) float32 the task's reward of the step (optional: :func:`collect` writes it,
  datasets from other sources may lack it).

Collection (:func:`collect`) drives the task's worlds with a mix of policies — a trained one (if a
checkpoint is given), the same with Gaussian action noise, and a smooth random one (an
Ornstein–Uhlenbeck process) — each world keeping one policy kind, over road conditions drawn per
world reset (``water_film_randomization_mm``) on the scenes' surfaces. ``action_lag_steps`` wraps the
engine in :class:`~scenefactory.engines.wrappers.LaggedEngine` (an actuator lag; the recorded
action is the one the policy sent).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import VehicleState
from scenefactory.errors import UserError
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv

STATE_FIELDS = ("x_m", "y_m", "yaw_rad", "speed_mps", "yaw_rate_radps", "steer_rad")
POLICY_KINDS = ("trained", "noisy", "random")
DATASET_FORMAT = "scenefactory.transitions/1"


def abstract_state(st: VehicleState) -> torch.Tensor:
    """(W, K, 6) abstract state in :data:`STATE_FIELDS` order."""
    return torch.stack(
        (st.pos_xy[..., 0], st.pos_xy[..., 1], st.yaw, st.speed, st.yaw_rate, st.steer), dim=-1
    )


class _OrnsteinUhlenbeck:
    """Smooth random actions in [-1, 1]: a' = a + θ(μ − a)·dt + σ·√dt·ε, clipped."""

    def __init__(
        self, shape: tuple[int, ...], generator: torch.Generator, theta: float = 1.0, sigma: float = 0.8
    ):
        self.a = torch.zeros(shape)
        self.g, self.theta, self.sigma = generator, theta, sigma

    def __call__(self, dt: float) -> torch.Tensor:
        noise = torch.randn(self.a.shape, generator=self.g)
        self.a = (self.a - self.theta * self.a * dt + self.sigma * dt**0.5 * noise).clamp(-1.0, 1.0)
        return self.a.clone()


def collect(
    out: Path,
    engine: str = "mujoco",
    worlds: int = 32,
    agents: int = 4,
    steps: int = 200,
    seed: int = 0,
    checkpoint: str | Path | None = None,
    water_film_mm: tuple[float, float] = (0.0, 5.0),
    shard_size: int = 50_000,
    physics_hz: float = 120.0,
    noise_std: float = 0.3,
    num_scenes: int = 60,
    progress: Callable[[int, int], None] | None = None,
    action_lag_steps: int = 0,
) -> dict[str, Any]:
    """Record ``steps`` policy steps of ``worlds × agents`` agents into shards under ``out``."""
    if min(worlds, agents, steps, shard_size) < 1:
        raise UserError("--worlds, --agents, --steps and the shard size must be positive")
    if action_lag_steps < 0:
        raise UserError(f"--action-lag-steps must be >= 0, got {action_lag_steps}")
    policy_fn = None
    kinds = ("noisy", "random") if checkpoint is None else POLICY_KINDS
    if checkpoint is not None:
        from scenefactory.rl.ppo import load_policy

        loaded = load_policy(checkpoint)
        policy_fn = loaded.act
        task = replace(loaded.task_cfg, num_worlds=worlds, agents_per_world=agents)
    else:
        task = DrivingTaskConfig(num_worlds=worlds, agents_per_world=agents)
    task = replace(task, water_film_randomization_mm=water_film_mm)
    scenes = procedural_scenes("train", num_scenes, agents, base_seed=seed)
    env = DrivingEnv(
        task, scenes, engine=engine, seed=seed, physics_hz=physics_hz, action_lag_steps=action_lag_steps
    )
    g = torch.Generator().manual_seed(seed)
    world_kind = torch.tensor([POLICY_KINDS.index(kinds[w % len(kinds)]) for w in range(worlds)])
    ou = _OrnsteinUhlenbeck((worlds, agents, 2), g)
    out.mkdir(parents=True, exist_ok=True)
    buf: dict[str, list[np.ndarray]] = {
        k: [] for k in ("state", "action", "next_state", "friction", "episode", "step", "policy", "reward")
    }
    shards, total, obs = 0, 0, env.observations()

    def flush() -> None:
        nonlocal shards, buf
        if not buf["state"]:
            return
        data = {k: np.concatenate(v) for k, v in buf.items()}
        stream = io.BytesIO()
        np.savez_compressed(stream, **data)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle
        atomic_write_bytes(out / f"shard_{shards:05d}.npz", stream.getvalue())
        shards += 1
        buf = {k: [] for k in buf}

    with torch.inference_mode():
        for t in range(steps):
            before = abstract_state(env.engine.state()).clone()
            friction = env.friction.clone()
            serial = env.serial.clone()
            steps_in = env.step_count.clone()
            random_a = ou(task.dt_s)
            if policy_fn is not None:
                trained = policy_fn(obs)
                noisy = (trained + noise_std * torch.randn(trained.shape, generator=g)).clamp(-1, 1)
            else:
                noisy = (random_a + noise_std * torch.randn(random_a.shape, generator=g)).clamp(-1, 1)
                trained = noisy
            kind = world_kind.view(-1, 1, 1)
            action = torch.where(kind == 0, trained, torch.where(kind == 1, noisy, random_a))
            res = env.step(action)
            obs = res.obs
            after = abstract_state(res.state)
            sel = res.was_active
            w_idx, a_idx = sel.nonzero(as_tuple=True)
            buf["state"].append(before[sel].numpy().astype(np.float32))
            buf["action"].append(action[sel].numpy().astype(np.float32))
            buf["next_state"].append(after[sel].numpy().astype(np.float32))
            buf["friction"].append(friction[w_idx].numpy().astype(np.float32))
            buf["episode"].append((serial[w_idx] * agents + a_idx).numpy().astype(np.int64))
            buf["step"].append(steps_in[w_idx].numpy().astype(np.int32))
            buf["policy"].append(world_kind[w_idx].numpy().astype(np.int8))
            buf["reward"].append(res.reward[sel].numpy().astype(np.float32))
            total += int(sel.sum())
            if sum(len(x) for x in buf["state"]) >= shard_size:
                flush()
            if progress is not None:
                progress(t + 1, steps)
    flush()
    meta = {
        "format": DATASET_FORMAT,
        "engine": engine,
        "physics_hz": physics_hz if engine != "kinematic" else None,
        "action_lag_steps": action_lag_steps,
        "policy_dt_s": task.dt_s,
        "vehicle": asdict(task.vehicle),
        "state_fields": list(STATE_FIELDS),
        "policies": list(POLICY_KINDS),
        "policies_used": list(kinds),
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
        "water_film_mm": list(water_film_mm),
        "worlds": worlds,
        "agents_per_world": agents,
        "steps": steps,
        "seed": seed,
        "transitions": total,
        "shards": shards,
    }
    write_json(out / "meta.json", meta)
    return meta


def _read_shard(path: Path) -> dict[str, np.ndarray]:
    """One ``.npz`` shard of plain arrays (``allow_pickle=False``: object arrays are refused)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise UserError(f"{path}: not a readable dataset shard ({type(exc).__name__}: {msg})") from None


def load_transitions(folder: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """All shards of a dataset folder concatenated, and its metadata; clear errors if malformed."""
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise UserError(
            f"{folder}: not a transition dataset (no meta.json; make one with 'scenefactory collect')"
        )
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != DATASET_FORMAT:
        raise UserError(f"{meta_path}: format {meta.get('format')!r}, expected {DATASET_FORMAT!r}")
    files = sorted(folder.glob("shard_*.npz"))
    if len(files) != meta["shards"]:
        raise UserError(f"{folder}: {len(files)} shard files, meta.json says {meta['shards']}")
    parts = [_read_shard(f) for f in files]
    data = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}
    return data, meta
