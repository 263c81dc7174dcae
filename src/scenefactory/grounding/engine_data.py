"""Transition datasets from any engine on an open road: quick, controlled grounding targets.

:func:`record_engine` drives an :class:`~scenefactory.engines.base.Engine` without a task (no road
graph, no terminations): every world starts each episode with its agents on a grid 50 m apart at
random headings and speeds, on a road friction drawn per world, and every agent follows its own
smooth random actions (the Ornstein–Uhlenbeck process of :func:`~scenefactory.grounding.dataset.collect`).
The shards and ``meta.json`` are the :mod:`~scenefactory.grounding.dataset` format, so e.g. the
kinematic tier with a slower car or wrapped in a :class:`~scenefactory.engines.wrappers.LaggedEngine`
is a target the plain bicycle cannot match, with known answers for system identification.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import Engine
from scenefactory.grounding.dataset import DATASET_FORMAT, STATE_FIELDS, OrnsteinUhlenbeck, abstract_state
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.vehicles.params import VehicleParams


def record_engine(
    engine: Engine,
    out: Path,
    episodes: int = 4,
    episode_steps: int = 50,
    seed: int = 0,
    vehicle: VehicleParams | None = None,
    friction: tuple[float, float] = (0.1, 1.0),
    speed_mps: tuple[float, float] = (2.0, 14.0),
) -> dict[str, Any]:
    """Record ``episodes`` rounds of ``episode_steps`` steps of every agent of ``engine`` under ``out``.

    ``vehicle`` is the car the dataset claims (``meta["vehicle"]``, the nominal car the grounding
    corrects); default ``engine.params``. Returns the metadata written to ``meta.json``.
    """
    if min(episodes, episode_steps) < 1:
        raise ValueError(f"episodes and episode_steps must be positive, got {episodes}, {episode_steps}")
    w, k = engine.num_worlds, engine.agents_per_world
    g = torch.Generator().manual_seed(seed)
    cols = math.ceil(math.sqrt(k))
    grid = torch.tensor([[50.0 * (i % cols), 50.0 * (i // cols)] for i in range(k)])
    rows: dict[str, list[np.ndarray]] = {
        k_: [] for k_ in ("state", "action", "next_state", "friction", "episode", "step")
    }
    all_worlds = torch.arange(w)
    for ep in range(episodes):
        pose = torch.zeros(w, k, 3)
        pose[..., :2] = grid + 5.0 * torch.rand(w, k, 2, generator=g)
        pose[..., 2] = (torch.rand(w, k, generator=g) * 2.0 - 1.0) * math.pi
        speed = speed_mps[0] + (speed_mps[1] - speed_mps[0]) * torch.rand(w, k, generator=g)
        mu = friction[0] + (friction[1] - friction[0]) * torch.rand(w, generator=g)
        engine.reset(all_worlds, pose, speed, torch.ones(w, k, dtype=torch.bool))
        engine.set_friction(all_worlds, mu)
        ou = OrnsteinUhlenbeck((w, k, 2), g)
        active = torch.ones(w, k, dtype=torch.bool)
        with torch.no_grad():
            for t in range(episode_steps):
                before = abstract_state(engine.state()).clone()
                action = ou(engine.dt)
                after = abstract_state(engine.step(action, active))
                rows["state"].append(before.reshape(-1, 6).numpy().astype(np.float32))
                rows["action"].append(action.reshape(-1, 2).numpy().astype(np.float32))
                rows["next_state"].append(after.reshape(-1, 6).numpy().astype(np.float32))
                rows["friction"].append(mu.view(w, 1).expand(w, k).reshape(-1).numpy().astype(np.float32))
                rows["episode"].append(np.arange(w * k, dtype=np.int64) + ep * w * k)
                rows["step"].append(np.full(w * k, t, dtype=np.int32))
    data = {key: np.concatenate(v) for key, v in rows.items()}
    data["policy"] = np.full(len(data["step"]), 2, dtype=np.int8)  # "random"
    stream = io.BytesIO()
    np.savez_compressed(stream, **data)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "shard_00000.npz", stream.getvalue())
    meta = {
        "format": DATASET_FORMAT,
        "engine": engine.name,
        "physics_hz": None,
        "policy_dt_s": engine.dt,
        "vehicle": asdict(vehicle or engine.params),
        "state_fields": list(STATE_FIELDS),
        "policies": ["trained", "noisy", "random"],
        "policies_used": ["random"],
        "worlds": w,
        "agents_per_world": k,
        "steps": episodes * episode_steps,
        "seed": seed,
        "transitions": len(data["step"]),
        "shards": 1,
        "source": "open road (grounding.engine_data.record_engine)",
    }
    write_json(out / "meta.json", meta)
    return meta
