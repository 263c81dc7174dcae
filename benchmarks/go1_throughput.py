"""Go1 task throughput on MuJoCo C (how its and torch's threads share the cores) or on MuJoCo Warp.

``--engine mujoco`` (the default) measures (a) environment steps per second of the training task
(physics at 200 Hz + task terms, random actions, no learning) with 1 and with 2 threads for both
MuJoCo's batch and torch, and (b) a PPO iteration's split between collection and learning for the
same settings, so the training wall times of the Go1 recipes can be read against it →
``benchmarks/results/go1_throughput.json``. ``--scan`` measures the same on the rough-terrain task of
the height-scan recipe, ``rough-scan`` (every tile kind in its columns, the curriculum, the height scan in
the actor and the critic, 25 frames of history: ``train go1 --terrain rough --height-scan-actor
--history 25``'s task and networks) → ``benchmarks/results/go1_throughput_scan.json``.

``--engine mujoco-warp --device cpu|cuda`` measures, for each ``--envs`` count, (a) environment steps
per second of the same task with its worlds on MuJoCo Warp (the task itself is numpy on the CPU: on
a GPU every physics step copies the state to the host and back, ``engines.mjwarp``), and (b) the
physics alone: the same worlds stepped by their recorded graph (``decimation`` substeps per policy
step, the PD torques held), the ceiling a task written in torch on the device could reach →
``benchmarks/results/go1_throughput_mujoco-warp_<device>.json``.

Usage: ``.venv/bin/python benchmarks/go1_throughput.py [--envs 1024] [--steps 40] [--scan]``;
``... --engine mujoco-warp --device cuda --envs 4096 16384``. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import torch

from scenefactory.engines.mjwarp import PhysicsBackend, WarpSim, check_device
from scenefactory.evaluation.bench import machine_info
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.env import Go1Env
from scenefactory.go1.recipe import RecipeOptions, train_spec
from scenefactory.go1.train import Go1Trainer, Go1TrainSpec
from scenefactory.io import write_json

SCAN_RECIPE = RecipeOptions(terrain="rough", height_scan_actor=True, history=25)
"""The task and networks of the height-scan recipe's runs (``--scan``)."""


def spec_for(envs: int, scan: bool) -> Go1TrainSpec:
    """A two-iteration spec of the default task, or of the height-scan recipe's with ``scan``."""
    if scan:
        spec = train_spec(envs, 2, 0, SCAN_RECIPE)
    else:
        spec = Go1TrainSpec(task=Go1TaskConfig(num_envs=envs), iterations=2)
    return replace(spec, ppo=replace(spec.ppo, save_interval=100))


def env_rate(
    envs: int, steps: int, threads: int, physics: PhysicsBackend | None = None, scan: bool = False
) -> float:
    """Environment steps per second with ``threads`` MuJoCo and torch threads, on ``physics``
    (``None``: MuJoCo C), of the default task or (``scan``) the height-scan recipe's."""
    torch.set_num_threads(threads)
    task = replace(spec_for(envs, scan).task, physics=physics or PhysicsBackend())
    env = Go1Env(task, seed=0, nthread=threads)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    return envs * steps / (time.perf_counter() - t0)


def physics_rate(envs: int, steps: int, physics: PhysicsBackend) -> float:
    """Policy steps per second of the Go1 worlds' physics alone on MuJoCo Warp (module docstring)."""
    task = Go1TaskConfig(num_envs=envs, physics=physics)
    env = Go1Env(task, seed=0)  # the worlds as the task builds them (a home pose, the PD torques)
    sim = env.sim
    assert isinstance(sim, WarpSim)
    for _ in range(3):
        sim.step(task.decimation)
    if sim.device.type == "cuda":
        torch.cuda.synchronize(sim.device)
    t0 = time.perf_counter()
    for _ in range(steps):
        sim.step(task.decimation)
    if sim.device.type == "cuda":
        torch.cuda.synchronize(sim.device)
    wall = time.perf_counter() - t0
    sim.check_health("the benchmark's held torques")
    return envs * steps / wall


def ppo_split(envs: int, threads: int, scan: bool = False) -> dict[str, float]:
    """Seconds of collection and of learning in one PPO iteration (the second of two)."""
    torch.set_num_threads(threads)
    with TemporaryDirectory() as tmp:
        hist = Go1Trainer(spec_for(envs, scan), tmp, nthread=threads).run()
    row = hist[-1]
    return {"collect_s": row["collect_s"], "learn_s": row["learn_s"], "steps_per_s": row["steps_per_s"]}


def mujoco_c(a: argparse.Namespace) -> dict[str, Any]:
    """The threads comparison and PPO split on MuJoCo C (module docstring)."""
    envs = a.envs[0]
    rates = {t: env_rate(envs, a.steps, t, scan=a.scan) for t in (1, 2)}
    split = {t: ppo_split(envs, t, a.scan) for t in (1, 2)}
    for t in (1, 2):
        print(f"{t} thread(s): {rates[t]:,.0f} env steps/s; PPO iteration {split[t]}")
    task = spec_for(envs, a.scan).task
    return {
        "envs": envs,
        "task": "rough terrain, height scan in the actor, 25 frames" if a.scan else "flat (default)",
        "history": task.history,
        "physics_hz": 200.0,
        "policy_hz": 50.0,
        "env_steps_per_s": {str(t): r for t, r in rates.items()},
        "two_over_one_threads": rates[2] / rates[1],
        "ppo_iteration": {str(t): s for t, s in split.items()},
        "machine": machine_info(),
    }


def mujoco_warp(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Task and physics-only rates on MuJoCo Warp per world count, written after each point."""
    device = check_device(a.device)
    physics = PhysicsBackend("mujoco-warp", str(device))
    result: dict[str, Any] = {
        "engine": "mujoco-warp",
        "device": str(device),
        "physics_hz": 200.0,
        "policy_hz": 50.0,
        "steps": a.steps,
        "points": {},
        "machine": machine_info(),
        "load_average_1min_before": os.getloadavg()[0],
    }
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    for envs in sorted(a.envs):
        point = {
            "env_steps_per_s": env_rate(envs, a.steps, torch.get_num_threads(), physics),
            "physics_only_policy_steps_per_s": physics_rate(envs, a.steps, physics),
        }
        result["points"][str(envs)] = point
        print(f"{envs} robots on mujoco-warp ({device}): {point}")
        write_json(out, result)
    return result


def main() -> None:
    """Measure and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=("mujoco", "mujoco-warp"), default="mujoco")
    p.add_argument("--device", default="cpu", help="MuJoCo Warp's device: cpu or cuda[:N]")
    p.add_argument("--envs", type=int, nargs="+", default=[1024])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--scan", action="store_true", help="the height-scan recipe's task (module docstring)")
    a = p.parse_args()
    if a.engine == "mujoco":
        if a.device != "cpu" or len(a.envs) > 1:
            p.error("--engine mujoco measures one --envs count on the CPU")
        name = "go1_throughput_scan.json" if a.scan else "go1_throughput.json"
        write_json(a.out or Path("benchmarks/results") / name, mujoco_c(a))
        return
    if a.scan:
        p.error("--scan is measured on --engine mujoco")
    kind = check_device(a.device).type
    mujoco_warp(a, a.out or Path(f"benchmarks/results/go1_throughput_mujoco-warp_{kind}.json"))


if __name__ == "__main__":
    main()
