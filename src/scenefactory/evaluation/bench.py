"""Throughput benchmark: controlled-agent steps per second (CASPS) of the full environment step.

CASPS = policy steps × controlled agents / wall second, where one step is the whole loop a learner
runs: batched policy inference (an rsl-rl actor of the training architecture), actions through the
engine, geometry, rewards, terminations, partial resets and observations. ``casps`` counts every
agent slot of the W × K worlds (padding and finished agents waiting for their world to reset
included, as SceneFactory's figure, which is read during training, does); the honest figures are
beside it:

- ``active_casps``: active agent-steps (agents still driving their episode) per wall second;
- ``active_slot_fraction`` = active agent-steps / (W · K · steps) = ``active_casps / casps``;
- ``valid_slot_fraction``: slots holding an agent of the scene (finished or not) / (W · K · steps);
  ``active_fraction_of_valid_slots`` = active agent-steps / valid slot-steps;
- ``agent_episodes_ended`` / ``agent_episodes_timed_out`` (vectorized runs): agent-episodes that
  ended during the timed steps, and how many of them as time-outs (the time limit, or survivors
  cut short by the reset policy ``min_active_fraction``: the price of the busier worlds).

On a scene folder (``scenes``) the result also describes the scenes: agents per scene (the
distribution), how many are controlled and replayed with K slots, the mean initial fill of a world
(``tasks.driving.slots``), road points per scene (mean, max), the logged objects each scene
replays (mean, max) and how many of them are observed per step (mean over scenes of the mean over
the log's steps).

``actions="random"`` replaces the policy by uniform random actions in [-1, 1] (drawn with a seeded
generator): the simulator alone, as native simulators report their throughput (PufferDrive's C
core, for one, steps random actions); ``"policy"`` (the default) is the learner's loop above.

``baseline=True`` runs the non-vectorized reference on the same engine, scenes and time step: the
worlds are separate single-world environments stepped one after another in a Python loop, and
inside each world every agent's observation row is fed to its own policy call and its action put
together in Python — how a simulator without a tensor API is driven.
"""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from tensordict import TensorDict

from scenefactory.engines.spec import EngineSpec
from scenefactory.rl.ppo import PPOConfig, build_actor
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.pool import beyond_slots, build_pool, road_points
from scenefactory.tasks.driving.slots import initial_fill


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


BENCH_ACTIONS = ("policy", "random")
"""What drives the agents in :func:`bench_drive` (module docstring)."""


BENCH_ACTIONS = ("policy", "random")
"""What drives the agents in :func:`bench_drive` (module docstring)."""


def bench_drive(
    engine: EngineSpec,
    worlds: int,
    agents: int,
    baseline: bool = False,
    steps: int = 50,
    warmup: int = 5,
    seed: int = 0,
    num_scenes: int = 24,
    policy_hz: float = 10.0,
    scenes: Sequence[Scene] | None = None,
    scene_source: str = "procedural",
    min_active_fraction: float = 0.0,
    device: str | torch.device = "cpu",
    native_kernels: bool = True,
    actions: str = "policy",
) -> dict[str, Any]:
    """Measure CASPS on ``engine`` with the environment and the policy on ``device``; returns the
    JSON-ready result (see the module docstring), with ``engine`` the tier, ``engine_spec`` the
    whole spec and ``device``. ``scenes`` (e.g. a converted folder,
    named by ``scene_source``) replace the ``num_scenes`` procedural ones; ``min_active_fraction``
    is the task's reset policy and ``native_kernels`` its CPU kernel switch (``DrivingTaskConfig``);
    ``actions`` ``"policy"`` or ``"random"`` (module docstring; vectorized runs only)."""
    if actions not in BENCH_ACTIONS:
        raise ValueError(f"actions must be one of {BENCH_ACTIONS}, got {actions!r}")
    if baseline and actions != "policy":
        raise ValueError("the non-vectorized baseline steps the policy (actions='policy')")
    task = DrivingTaskConfig(
        num_worlds=worlds,
        agents_per_world=agents,
        dt_s=1.0 / policy_hz,
        min_active_fraction=min_active_fraction,
        native_kernels=native_kernels,
    )
    if scenes is None:
        scenes = procedural_scenes("train", num_scenes, agents, base_seed=seed)
        scene_info: dict[str, Any] = {}
    else:
        scenes = list(scenes)
        scene_info = describe_scenes(scenes, agents, task.observations.road_point_spacing_m)
    torch.manual_seed(seed)
    if baseline:
        result = _bench_baseline(task, scenes, engine, steps, warmup, seed, torch.device(device))
    else:
        result = _bench_vectorized(task, scenes, engine, steps, warmup, seed, torch.device(device), actions)
    result.update(
        {
            "engine": engine.tier,
            "device": str(device),
            "engine_spec": engine.to_dict(),
            "worlds": worlds,
            "agents_per_world": agents,
            "baseline": baseline,
            "steps": steps,
            "warmup": warmup,
            "dt_s": task.dt_s,
            "policy_hz": policy_hz,
            "seed": seed,
            "num_scenes": len(scenes),
            "scene_source": scene_source,
            "min_active_fraction": min_active_fraction,
            "native_kernels": native_kernels,
            "actions": actions,
            "torch_threads": torch.get_num_threads(),
            **scene_info,
            "machine": machine_info(),
        }
    )
    return result


def describe_scenes(scenes: Sequence[Scene], k: int, spacing_m: float) -> dict[str, Any]:
    """What a scene folder holds for worlds of ``k`` agents (module docstring)."""
    counts = [sc.num_agents for sc in scenes]
    points = [len(road_points(sc, spacing_m)[0]) for sc in scenes]
    logged = [sc.replay.num_objects if sc.replay is not None else 0 for sc in scenes]
    seen = [float(sc.replay.valid.sum(0).mean()) if sc.replay is not None and logged[i] else 0.0
            for i, sc in enumerate(scenes)]  # fmt: skip
    return {
        "agents_per_scene": {
            "min": min(counts),
            "mean": sum(counts) / len(counts),
            "max": max(counts),
            "histogram": {str(n): c for n, c in sorted(Counter(counts).items())},
        },
        "initial_fill": initial_fill(counts, k),
        "agents_controlled": sum(int(sc.agent_valid[:k].sum()) for sc in scenes),
        "agents_replayed_beyond_k": sum(len(beyond_slots(sc, k)) for sc in scenes),
        "agents_left_out_beyond_k": sum(
            int(sc.agent_valid[k:].sum()) for sc in scenes if not len(beyond_slots(sc, k))
        ),
        "road_points_per_scene": {"mean": sum(points) / len(points), "max": max(points)},
        "logged_objects_per_scene": {"mean": sum(logged) / len(logged), "max": max(logged)},
        "logged_observed_per_step": sum(seen) / len(seen),
    }


def _bench_vectorized(
    task: DrivingTaskConfig,
    scenes: list,
    engine: EngineSpec,
    steps: int,
    warmup: int,
    seed: int,
    device: torch.device,
    actions: str = "policy",
) -> dict[str, Any]:
    env = DrivingEnv(task, scenes, engine=engine, seed=seed, device=device)
    actor = build_actor(env.obs_dim, PPOConfig(), device=device) if actions == "policy" else None
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (env.num_worlds, env.agents_per_world, 2)
    n = env.num_worlds * env.agents_per_world
    obs = env.observations()
    active = 0
    valid = 0
    ended = torch.zeros(2, dtype=torch.long)  # agent-episodes ended, of which time-outs
    with torch.inference_mode():
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            if actor is None:
                act = torch.rand(shape, generator=gen, device=device) * 2.0 - 1.0
            else:
                td = TensorDict({"policy": obs.reshape(n, -1)}, batch_size=[n])
                act = actor(td, stochastic_output=True).reshape(shape)
            res = env.step(act)
            obs = res.obs
            if i >= warmup:
                active += int(res.was_active.sum())
                valid += int(env.engine.state().valid.sum())
                ended += torch.stack((res.done.sum(), res.time_out.sum())).cpu()
        wall = time.perf_counter() - t0
    out = _figures(active, valid, n * steps, wall)
    out["agent_episodes_ended"], out["agent_episodes_timed_out"] = (int(x) for x in ended)
    return out


def _bench_baseline(
    task: DrivingTaskConfig,
    scenes: list,
    engine: EngineSpec,
    steps: int,
    warmup: int,
    seed: int,
    device: torch.device,
) -> dict[str, Any]:
    one = replace(task, num_worlds=1)
    oc = task.observations
    pool = build_pool(
        scenes,
        task.agents_per_world,
        oc.road_point_spacing_m,
        device,
        task.vehicle,
        task.dt_s,
        num_road_points=oc.num_road_points,
        road_point_range_m=oc.road_point_range_m,
    )
    envs = [
        DrivingEnv(one, scenes, engine=engine, seed=seed + w, pool=pool, device=device)
        for w in range(task.num_worlds)
    ]
    actor = build_actor(envs[0].obs_dim, PPOConfig(), device=device)
    k = task.agents_per_world
    active = 0
    valid = 0
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
                res = env.step(torch.tensor([per_agent], dtype=torch.float32, device=device))
                if i >= warmup:
                    active += int(res.was_active.sum())
                    valid += int(env.engine.state().valid.sum())
        wall = time.perf_counter() - t0
    return _figures(active, valid, task.num_worlds * k * steps, wall)


def _figures(active: int, valid: int, slots: int, wall: float) -> dict[str, Any]:
    """The throughput figures of the module docstring from agent-step counts over ``wall`` s."""
    return {
        "casps": slots / wall,
        "active_casps": active / wall,
        "active_slot_fraction": active / max(slots, 1),
        "valid_slot_fraction": valid / max(slots, 1),
        "active_fraction_of_valid_slots": active / max(valid, 1),
        "active_agent_steps": active,
        "slot_steps": slots,
        "wall_s": wall,
    }
