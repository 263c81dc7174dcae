"""Driving throughput (CASPS) per engine and device, over a sweep of world counts, with memory per world.

CASPS: controlled-agent steps per second of the full environment step with batched policy
inference (``scenefactory bench drive``'s figure, ``evaluation.bench``): ``--worlds W ...`` ×
``--agents K`` agents, ``--physics-hz`` physics (mujoco tiers), ``--policy-hz`` policy. Writes one
JSON file (``--out``, by default ``benchmarks/results/drive_throughput_<tag>.json``) with, per engine
and world count:

- ``casps`` (and ``active_casps``, the bench's other figures);
- memory: on CUDA the peak of torch's allocator (``torch.cuda.max_memory_allocated``) plus Warp's
  memory pool high-water mark (MuJoCo Warp's arrays), and that per world; on the CPU the process's
  peak resident set growth since the start (ascending world counts: the largest so far), per world;
- ``compare`` (one engine at one CPU point, unless ``--no-compare``): torch 1 thread vs the
  default, the non-vectorized baseline, and a PPO iteration's collect/learn split (how torch's
  threads share the cores), written to ``drive_throughput_<engine>[_<rates>].json`` as before.

Several ``--engine`` values are measured one after another on the same scenes and rates, and their
ratios to the first are recorded (e.g. ``--engine mujoco mujoco-warp``: MuJoCo C vs MuJoCo Warp).

Usage::

    .venv/bin/python benchmarks/drive_throughput.py --engine mujoco --physics-hz 120 --policy-hz 30
    .venv/bin/python benchmarks/drive_throughput.py --engine mujoco mujoco-warp --worlds 16 --agents 4 \\
        --policy-hz 30
    .venv/bin/python benchmarks/drive_throughput.py --engine mujoco-warp --device cuda --policy-hz 30 \\
        --worlds 256 1024 4096 8192 --agents 16
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from scenefactory.engines.mjwarp import check_device
from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.bench import bench_drive, machine_info
from scenefactory.io import write_json
from scenefactory.rl.driving import Trainer
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig

FIGURES = ("casps", "active_casps", "active_slot_fraction", "wall_s")


def peak_rss_bytes() -> int:
    """The process's peak resident set size [bytes] (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def device_info(device: torch.device) -> dict[str, Any]:
    """The GPU's name, memory and driver (CUDA), beside ``machine_info``'s CPU description."""
    if device.type != "cuda":
        return {"device": "cpu"}
    props = torch.cuda.get_device_properties(device)
    return {
        "device": str(device),
        "gpu": props.name,
        "gpu_memory_bytes": props.total_memory,
        "cuda": torch.version.cuda,
        "capability": f"{props.major}.{props.minor}",
    }


def measure(
    engine: EngineSpec,
    worlds: int,
    agents: int,
    steps: int,
    warmup: int,
    policy_hz: float,
    device: torch.device,
) -> dict[str, Any]:
    """One bench point with its memory (module docstring)."""
    rss0 = peak_rss_bytes()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    r = bench_drive(engine, worlds, agents, steps=steps, warmup=warmup, policy_hz=policy_hz, device=device)
    point: dict[str, Any] = {k: r[k] for k in FIGURES}
    point["build_and_run_s"] = time.perf_counter() - t0
    point["load_average_1min_after"] = os.getloadavg()[0]
    if device.type == "cuda":
        torch_peak = torch.cuda.max_memory_allocated(device)
        warp_high = 0
        if engine.tier == "mujoco-warp":
            import warp as wp

            warp_high = int(wp.get_mempool_used_mem_high(str(device)))
        point["memory"] = {
            "torch_peak_bytes": torch_peak,
            "warp_mempool_high_bytes": warp_high,
            "bytes_per_world": (torch_peak + warp_high) / worlds,
            "note": "Warp's high-water mark never resets: with ascending world counts it is this point's",
        }
    else:
        grown = max(0, peak_rss_bytes() - START_RSS)
        point["memory"] = {
            "peak_rss_growth_bytes": grown,
            "bytes_per_world": grown / worlds,
            "peak_rss_bytes_before": rss0,
            "note": "peak RSS growth since the start of the run (ascending world counts: this point's); "
            "it holds the engine's fixed costs too (MuJoCo Warp: its runtime and compiled kernels, about "
            "300 MB), so it is a cost per world only at large world counts",
        }
    return point


def training_probe(engine: EngineSpec, device: torch.device, iterations: int = 4) -> dict[str, float]:
    """Mean collect / learn seconds per PPO iteration on 128 worlds × 8 agents (first iteration
    dropped as warm-up)."""
    task = DrivingTaskConfig(num_worlds=128, agents_per_world=8)
    scenes = procedural_scenes("train", 24, 8)
    with tempfile.TemporaryDirectory() as tmp:
        spec = TrainSpec(task=task, engine=engine, iterations=iterations)
        history = Trainer(spec, scenes, tmp, device=device).run()[1:]
    return {
        "collect_s": statistics.mean(r["collect_s"] for r in history),
        "learn_s": statistics.mean(r["learn_s"] for r in history),
        "steps_per_s": statistics.mean(r["steps_per_s"] for r in history),
    }


def compare(engine: EngineSpec, a: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Torch threads 1 vs default, the non-vectorized baseline and the training probe (one point)."""
    rates = {"policy_hz": a.policy_hz, "device": device}
    default_threads = torch.get_num_threads()
    casps: dict[str, float] = {}
    training: dict[str, dict[str, float]] = {}
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        r = bench_drive(engine, a.worlds[0], a.agents, steps=a.steps, **rates)
        casps[f"vectorized_threads_{threads}"] = r["casps"]
        training[f"threads_{threads}"] = training_probe(engine, device)
        print(f"  threads {threads}: {r['casps']:,.0f} CASPS; training {training[f'threads_{threads}']}")
    torch.set_num_threads(default_threads)
    base = bench_drive(engine, a.worlds[0], a.agents, baseline=True, steps=a.baseline_steps, **rates)
    casps["baseline"] = base["casps"]
    vec = casps[f"vectorized_threads_{default_threads}"]
    ratios = {
        "vectorized_over_baseline": vec / base["casps"],
        "threads_default_over_1": vec / casps["vectorized_threads_1"],
    }
    return {"casps": casps, "ratios": ratios, "training": training}


START_RSS = peak_rss_bytes()


def main() -> None:
    """Measure every engine at every world count; write the JSON after each point (a run cut short
    keeps what it measured)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", nargs="+", default=["kinematic"], help="tiers to measure, in order")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--worlds", type=int, nargs="+", default=[256], help="world counts (ascending)")
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--baseline-steps", type=int, default=10)
    p.add_argument("--physics-hz", type=float, default=120.0)
    p.add_argument("--policy-hz", type=float, default=10.0)
    p.add_argument(
        "--compare",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="threads, baseline and training (default: with one engine at one CPU point)",
    )
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    device = check_device(a.device)
    worlds = sorted(a.worlds)
    one_point = len(worlds) == 1 and len(a.engine) == 1 and device.type == "cpu"
    if a.compare is None:
        a.compare = one_point
    if a.compare and not one_point:
        p.error("--compare measures one engine at one CPU point: one --engine, one --worlds, --device cpu")
    rates = f"{a.physics_hz:g}hz_policy{a.policy_hz:g}hz"
    tag = "_vs_".join(a.engine) + ("" if a.engine == ["kinematic"] else f"_{rates}")
    if not a.compare:  # the comparison keeps its earlier file name
        tag += f"_{device.type}" + (f"_{worlds[0]}x{a.agents}" if len(worlds) == 1 else "_sweep")
    out = a.out or Path(f"benchmarks/results/drive_throughput_{tag}.json")
    result: dict[str, Any] = {
        "engines": a.engine,
        "device": device_info(device),
        "worlds": worlds,
        "agents_per_world": a.agents,
        "physics_hz": a.physics_hz,
        "policy_hz": a.policy_hz,
        "steps": a.steps,
        "warmup": a.warmup,
        "results": {},
        "machine": machine_info(),
        "load_average_1min_before": os.getloadavg()[0],
        "note": "CASPS on a shared machine: compare engines within one file, and read the load averages",
    }
    for tier in a.engine:
        engine = EngineSpec(tier, physics_hz=a.physics_hz)
        points: dict[str, Any] = {}
        result["results"][tier] = points
        for w in worlds:
            points[str(w)] = measure(engine, w, a.agents, a.steps, a.warmup, a.policy_hz, device)
            mem = points[str(w)]["memory"]["bytes_per_world"]
            print(f"{tier} {w} x {a.agents}: {points[str(w)]['casps']:,.0f} CASPS, {mem / 1e6:.2f} MB/world")
            write_json(out, result)
        if a.compare:
            result["compare"] = {tier: compare(engine, a, device)}
            write_json(out, result)
    first = a.engine[0]
    result["ratios_to_first"] = {
        tier: {w: result["results"][tier][w]["casps"] / result["results"][first][w]["casps"] for w in points}
        for tier in a.engine[1:]
    }
    write_json(out, result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
