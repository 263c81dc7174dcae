"""Go1 task throughput: how MuJoCo's and torch's threads share the cores, one run, ratios.

Measures (a) environment steps per second of the training task (physics at 200 Hz + task terms,
random actions, no learning) with 1 and with 2 threads for both MuJoCo's batch and torch, and
(b) a PPO iteration's split between collection and learning for the same settings, so the README's
training wall time can be read against it.

Usage: ``.venv/bin/python benchmarks/go1_throughput.py [--envs 1024] [--steps 40]`` →
``benchmarks/results/go1_throughput.json``. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import torch

from scenefactory.evaluation.bench import machine_info
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.env import Go1Env
from scenefactory.go1.train import Go1Trainer, Go1TrainSpec
from scenefactory.io import write_json


def env_rate(envs: int, steps: int, threads: int) -> float:
    """Environment steps per second with ``threads`` MuJoCo and torch threads."""
    torch.set_num_threads(threads)
    env = Go1Env(Go1TaskConfig(num_envs=envs), seed=0, nthread=threads)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(0.3 * torch.randn(envs, 12, generator=gen))
    return envs * steps / (time.perf_counter() - t0)


def ppo_split(envs: int, threads: int) -> dict[str, float]:
    """Seconds of collection and of learning in one PPO iteration (the second of two)."""
    torch.set_num_threads(threads)
    spec = Go1TrainSpec(task=Go1TaskConfig(num_envs=envs), iterations=2)
    spec = replace(spec, ppo=replace(spec.ppo, save_interval=100))
    with TemporaryDirectory() as tmp:
        hist = Go1Trainer(spec, tmp, nthread=threads).run()
    row = hist[-1]
    return {"collect_s": row["collect_s"], "learn_s": row["learn_s"], "steps_per_s": row["steps_per_s"]}


def main() -> None:
    """Measure and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/go1_throughput.json"))
    a = p.parse_args()
    rates = {t: env_rate(a.envs, a.steps, t) for t in (1, 2)}
    split = {t: ppo_split(a.envs, t) for t in (1, 2)}
    for t in (1, 2):
        print(f"{t} thread(s): {rates[t]:,.0f} env steps/s; PPO iteration {split[t]}")
    write_json(
        a.out,
        {
            "envs": a.envs,
            "physics_hz": 200.0,
            "policy_hz": 50.0,
            "env_steps_per_s": {str(t): r for t, r in rates.items()},
            "two_over_one_threads": rates[2] / rates[1],
            "ppo_iteration": {str(t): s for t, s in split.items()},
            "machine": machine_info(),
        },
    )


if __name__ == "__main__":
    main()
