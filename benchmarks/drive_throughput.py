"""Driving throughput, compared as ratios in one run: vectorized vs non-vectorized, 1 vs 2 torch threads.

Writes ``benchmarks/results/drive_throughput.json`` with:

- ``casps``: the full environment step with batched policy inference (``scenefactory bench``'s
  figure) for each torch thread count, and the non-vectorized baseline (``--baseline``);
- ``ratios``: vectorized / baseline, and 2 threads / 1 thread;
- ``training``: seconds per PPO iteration split into rollout (collect) and update (learn) for each
  thread count, on the demo's world and agent counts — how torch's threads share the two cores
  between simulation and learning.

Usage: ``.venv/bin/python benchmarks/drive_throughput.py [--engine kinematic|mujoco] [--worlds 256]
[--agents 16] [--physics-hz 120] [--policy-hz 10]``; the output file is named after the engine and rates.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch

from scenefactory.evaluation.bench import bench_drive, machine_info
from scenefactory.io import write_json
from scenefactory.rl.ppo import Trainer, TrainSpec
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig


def training_probe(engine: str, physics_hz: float, iterations: int = 4) -> dict[str, float]:
    """Mean collect / learn seconds per PPO iteration (first iteration dropped as warm-up)."""
    task = DrivingTaskConfig(num_worlds=128, agents_per_world=8)
    scenes = procedural_scenes("train", 24, 8)
    with tempfile.TemporaryDirectory() as tmp:
        spec = TrainSpec(task=task, engine=engine, physics_hz=physics_hz, iterations=iterations)
        trainer = Trainer(spec, scenes, tmp)
        history = trainer.run()[1:]
    return {
        "collect_s": statistics.mean(r["collect_s"] for r in history),
        "learn_s": statistics.mean(r["learn_s"] for r in history),
        "steps_per_s": statistics.mean(r["steps_per_s"] for r in history),
    }


def main() -> None:
    """Run every measurement in this process and write one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", default="kinematic")
    p.add_argument("--worlds", type=int, default=256)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--baseline-steps", type=int, default=10)
    p.add_argument("--physics-hz", type=float, default=120.0)
    p.add_argument("--policy-hz", type=float, default=10.0)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    rates = {"physics_hz": a.physics_hz, "policy_hz": a.policy_hz}
    tag = a.engine if a.engine == "kinematic" else f"{a.engine}_{a.physics_hz:g}hz_policy{a.policy_hz:g}hz"
    out = a.out or Path(f"benchmarks/results/drive_throughput_{tag}.json")
    default_threads = torch.get_num_threads()
    casps: dict[str, float] = {}
    training: dict[str, dict[str, float]] = {}
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        r = bench_drive(a.engine, a.worlds, a.agents, steps=a.steps, **rates)
        casps[f"vectorized_threads_{threads}"] = r["casps"]
        training[f"threads_{threads}"] = training_probe(a.engine, a.physics_hz)
        print(f"threads {threads}: {r['casps']:,.0f} CASPS; training {training[f'threads_{threads}']}")
    torch.set_num_threads(default_threads)
    base = bench_drive(a.engine, a.worlds, a.agents, baseline=True, steps=a.baseline_steps, **rates)
    casps["baseline"] = base["casps"]
    vec = casps[f"vectorized_threads_{default_threads}"]
    result = {
        "engine": a.engine,
        "worlds": a.worlds,
        "agents_per_world": a.agents,
        **rates,
        "casps": casps,
        "ratios": {
            "vectorized_over_baseline": vec / base["casps"],
            "threads_default_over_1": vec / casps["vectorized_threads_1"],
        },
        "training": training,
        "machine": machine_info(),
    }
    write_json(out, result)
    print(f"vectorized / baseline = {result['ratios']['vectorized_over_baseline']:.1f}x -> {out}")


if __name__ == "__main__":
    main()
