"""Throughput benchmark: controlled-agent steps per second (CASPS) of the full environment step.

CASPS = policy steps × controlled agents / wall second, where one step is the whole loop a learner
runs: batched policy inference (an rsl-rl actor of the training architecture), actions through the
engine, geometry, rewards, terminations, partial resets and observations. Controlled agents are
the valid agent slots of the worlds (finished agents waiting for their world to reset count, as
they do in SceneFactory's figure, which is read during training); ``active_fraction`` says how
many of those were still driving.

``baseline=True`` runs the non-vectorized reference on the same engine, scenes and time step: the
worlds are separate single-world environments stepped one after another in a Python loop, and
inside each world every agent's observation row is fed to its own policy call and its action put
together in Python — how a simulator without a tensor API is driven.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace
from typing import Any

import torch

from scenefactory.engines import DEFAULT_PHYSICS_HZ
from scenefactory.rl.ppo import PPOConfig, build_actor
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.pool import build_pool


def machine_info() -> dict[str, Any]:
    """What the figure was measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }


def bench_drive(
    engine: str,
    worlds: int,
    agents: int,
    baseline: bool = False,
    steps: int = 50,
    warmup: int = 5,
    seed: int = 0,
    num_scenes: int = 24,
    physics_hz: float = DEFAULT_PHYSICS_HZ,
    policy_hz: float = 10.0,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
) -> dict[str, Any]:
    """Measure CASPS; returns the JSON-ready result (see the module docstring)."""
    task = DrivingTaskConfig(num_worlds=worlds, agents_per_world=agents, dt_s=1.0 / policy_hz)
    scenes = procedural_scenes("train", num_scenes, agents, base_seed=seed)
    torch.manual_seed(seed)
    run = _bench_baseline if baseline else _bench_vectorized
    result = run(
        task, scenes, engine, steps, warmup, seed, physics_hz, dynamics_model, grounding, action_lag_steps
    )
    result.update(
        {
            "engine": engine,
            "worlds": worlds,
            "agents_per_world": agents,
            "baseline": baseline,
            "steps": steps,
            "dt_s": task.dt_s,
            "policy_hz": policy_hz,
            "physics_hz": physics_hz if engine == "mujoco" else None,
            "dynamics_model": dynamics_model if engine == "learned" else None,
            "grounding": grounding if engine == "grounded" else None,
            "action_lag_steps": action_lag_steps,
            "seed": seed,
            "num_scenes": num_scenes,
            "machine": machine_info(),
        }
    )
    return result


def _bench_vectorized(
    task: DrivingTaskConfig,
    scenes: list,
    engine: str,
    steps: int,
    warmup: int,
    seed: int,
    physics_hz: float,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
) -> dict[str, Any]:
    env = DrivingEnv(
        task,
        scenes,
        engine=engine,
        seed=seed,
        physics_hz=physics_hz,
        dynamics_model=dynamics_model,
        grounding=grounding,
        action_lag_steps=action_lag_steps,
    )
    actor = build_actor(env.obs_dim, PPOConfig())
    from tensordict import TensorDict

    n = env.num_worlds * env.agents_per_world
    obs = env.observations()
    active = 0
    slots = 0
    with torch.inference_mode():
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            td = TensorDict({"policy": obs.reshape(n, -1)}, batch_size=[n])
            actions = actor(td, stochastic_output=True).reshape(env.num_worlds, env.agents_per_world, 2)
            res = env.step(actions)
            obs = res.obs
            if i >= warmup:
                active += int(res.was_active.sum())
                slots += int(env.engine.state().valid.sum())
        wall = time.perf_counter() - t0
    return {
        "casps": slots / wall,
        "active_casps": active / wall,
        "active_fraction": active / max(slots, 1),
        "wall_s": wall,
    }


def _bench_baseline(
    task: DrivingTaskConfig,
    scenes: list,
    engine: str,
    steps: int,
    warmup: int,
    seed: int,
    physics_hz: float,
    dynamics_model: str | None = None,
    grounding: str | None = None,
    action_lag_steps: int = 0,
) -> dict[str, Any]:
    one = replace(task, num_worlds=1)
    pool = build_pool(
        scenes, task.agents_per_world, task.observations.road_point_spacing_m, torch.device("cpu")
    )
    envs = [
        DrivingEnv(
            one,
            scenes,
            engine=engine,
            seed=seed + w,
            pool=pool,
            physics_hz=physics_hz,
            dynamics_model=dynamics_model,
            grounding=grounding,
            action_lag_steps=action_lag_steps,
        )
        for w in range(task.num_worlds)
    ]
    actor = build_actor(envs[0].obs_dim, PPOConfig())
    from tensordict import TensorDict

    k = task.agents_per_world
    active = 0
    slots = 0
    with torch.inference_mode():
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            for env in envs:
                obs = env.observations()[0]
                per_agent = []
                for a in range(k):
                    td = TensorDict({"policy": obs[a : a + 1]}, batch_size=[1])
                    act = actor(td, stochastic_output=True)[0]
                    per_agent.append([float(act[0]), float(act[1])])
                res = env.step(torch.tensor([per_agent], dtype=torch.float32))
                if i >= warmup:
                    active += int(res.was_active.sum())
                    slots += int(env.engine.state().valid.sum())
        wall = time.perf_counter() - t0
    return {
        "casps": slots / wall,
        "active_casps": active / wall,
        "active_fraction": active / max(slots, 1),
        "wall_s": wall,
    }
