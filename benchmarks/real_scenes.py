"""Throughput and busy worlds on converted WOMD scenes, measured in one run (kinematic tier, one torch
thread, 256 worlds).

The project ships no Waymo data: the corpora are synthetic WOMD city scenarios
(:mod:`scenefactory.scenes.womd.synthetic`) written as TFRecord shards, converted by
``scenefactory.scenes.womd.batch.convert_files`` and loaded with ``load_scene_dir``, the path real
shards take. They are built once in ``benchmarks/.cache/real_scenes/`` (git-ignored) and reused
while their parameters are unchanged. Writes ``benchmarks/results/real_scenes.json``:

- ``map_size``: ``scenefactory bench drive --scenes DIR`` figures (CASPS over every W x K slot,
  active CASPS, road points per scene) on maps of about 1,000 and about 20,000 road points (3 m
  spacing) with the same vehicle counts, ``ratio_20k_over_1k`` of their CASPS, and the procedural
  figure beside them (``bench drive`` without ``--scenes``);
- ``busy_worlds``: on a corpus of 3 to 32 moving vehicles per scene, the active slot fraction
  (active agent-steps / (W · K · steps), after one episode of warm-up so that the worlds' episodes
  are out of step as in training) with K = 16, with ``--agents auto`` (K from the data,
  ``tasks.driving.slots``), with the reset policy (``--min-active-fraction``), with both, and with
  K auto and a milder policy (``--low-fraction``); under the benchmark's untrained policy and under
  the scenes' logged drivers (a policy that reaches its goals), with the agent-episodes that end as
  time-outs (with the logged drivers, exactly those the reset policy cuts short).

Usage: ``.venv/bin/python benchmarks/real_scenes.py [--map-scenes 48] [--varied-scenes 200]
[--min-active-fraction 0.5]``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.evaluation.bench import bench_drive, machine_info
from scenefactory.io import write_json
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.womd.batch import convert_files
from scenefactory.scenes.womd.synthetic import WOMD_MIX, fitting_scenario
from scenefactory.scenes.womd.tfrecord import write_records
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.slots import DEFAULT_MIN_FILL, agents_per_world_for, initial_fill

CACHE = Path("benchmarks/.cache/real_scenes")
WORLDS, AGENTS = 256, 16
EPISODE_STEPS = DrivingTaskConfig().max_steps


def corpus(name: str, n: int, seed: int, road_points: tuple[int, int], vehicles: tuple[int, int]) -> Path:
    """The converted scene folder of a synthetic corpus, built unless the cache holds it.

    Scenario ``i`` draws its road-point target and moving-vehicle count uniformly from the ranges and
    its background traffic (parked vehicles, pedestrians, cyclists, partly observed tracks) from
    ``WOMD_MIX``, WOMD's make-up; a map too small for its vehicles gets one vehicle fewer until they
    fit (``fitting_scenario``), so every corpus has ``n`` scenes."""
    folder = CACHE / name
    params = {
        "n": n,
        "seed": seed,
        "road_points": list(road_points),
        "vehicles": list(vehicles),
        "parked": WOMD_MIX.parked,
        "background": repr(WOMD_MIX),
    }
    stamp = folder / "params.json"
    scenes = folder / "out" / "json"
    if stamp.exists() and json.loads(stamp.read_text()) == params and scenes.is_dir():
        return scenes
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        target = int(rng.integers(road_points[0], road_points[1] + 1))
        count = int(rng.integers(vehicles[0], vehicles[1] + 1))
        sub = int(rng.integers(0, 2**31 - 1))
        bg = WOMD_MIX.background(rng)
        records.append(fitting_scenario(f"{name}-{i:05d}", sub, target, count, WOMD_MIX.parked, bg))
    per_shard = 100
    shards = []
    for k in range(math.ceil(n / per_shard)):
        shard = folder / "womd" / f"{name}.tfrecord-{k:05d}-of-{math.ceil(n / per_shard):05d}"
        shard.parent.mkdir(parents=True, exist_ok=True)
        write_records(shard, records[k * per_shard : (k + 1) * per_shard])
        shards.append(shard)
    summary = convert_files(shards, folder / "out", ("json",), workers=2, max_agents=32)
    if summary["converted"] != n:
        done, errors = summary["converted"], summary["errors"][:3]
        raise RuntimeError(f"{name}: converted {done} of {n} scenarios: {errors}")
    stamp.write_text(json.dumps(params))
    return scenes


def bench(scenes: list[Scene] | None, source: str, worlds: int, k: int, **kw: Any) -> dict[str, Any]:
    """``bench drive`` on ``scenes`` (procedural when None) with the policy of the benchmark."""
    r = bench_drive("kinematic", worlds, k, scenes=scenes, scene_source=source, **kw)
    r.pop("machine")
    return r


def expert_run(
    scenes: list[Scene], worlds: int, k: int, min_active: float, warmup: int, steps: int
) -> dict[str, Any]:
    """The active slot fraction when the scenes' logged drivers drive (closed loop)."""
    cfg = DrivingTaskConfig(num_worlds=worlds, agents_per_world=k, min_active_fraction=min_active)
    env = DrivingEnv(cfg, scenes, seed=0)
    active = ended = timed_out = 0
    with torch.inference_mode():
        for i in range(warmup + steps):
            res = env.step(env.expert_actions())
            if i >= warmup:
                active += int(res.was_active.sum())
                ended += int(res.done.sum())
                timed_out += int(res.time_out.sum())
    return {
        "active_slot_fraction": active / (worlds * k * steps),
        "agent_episodes_ended": ended,
        "agent_episodes_timed_out": timed_out,
    }


def main() -> None:
    """Build (or reuse) the corpora and run every measurement in this process; write one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--map-scenes", type=int, default=48, help="scenes per map-size corpus")
    p.add_argument("--varied-scenes", type=int, default=200, help="scenes of the varied-agents corpus")
    p.add_argument("--steps", type=int, default=30, help="timed steps of the CASPS runs")
    p.add_argument("--busy-steps", type=int, default=400, help="timed steps of the active-fraction runs")
    p.add_argument("--min-active-fraction", type=float, default=0.5, help="the reset policy measured")
    p.add_argument("--low-fraction", type=float, default=0.25, help="a milder one, with K auto")
    p.add_argument("--worlds", type=int, default=WORLDS)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/real_scenes.json"))
    a = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    small = corpus("map_1k", a.map_scenes, 1, (900, 1100), (12, 12))
    large = corpus("map_20k", a.map_scenes, 2, (19000, 21000), (12, 12))
    varied = corpus("varied_agents", a.varied_scenes, 3, (2000, 8000), (3, 32))
    build_s = time.perf_counter() - t0

    runs: dict[str, dict[str, Any]] = {}
    for label, folder in (("map_1k", small), ("map_20k", large)):
        runs[label] = bench(load_scene_dir(folder), f"dir:{folder}", a.worlds, AGENTS, steps=a.steps)
        print(f"{label}: {runs[label]['casps']:,.0f} CASPS, {runs[label]['road_points_per_scene']}")
    runs["procedural"] = bench(None, "procedural", a.worlds, AGENTS, steps=a.steps)
    print(f"procedural: {runs['procedural']['casps']:,.0f} CASPS")

    scenes = load_scene_dir(varied)
    counts = [sc.num_agents for sc in scenes]
    auto = agents_per_world_for(counts, DEFAULT_MIN_FILL)
    f = a.min_active_fraction
    settings = {
        "k16": (AGENTS, 0.0),
        "k_auto": (auto, 0.0),
        "k16_reset": (AGENTS, f),
        "k_auto_reset": (auto, f),
        "k_auto_reset_low": (auto, a.low_fraction),
    }
    busy: dict[str, Any] = {}
    for label, (k, frac) in settings.items():
        kw = {"steps": a.busy_steps, "warmup": EPISODE_STEPS, "min_active_fraction": frac}
        r = bench(scenes, f"dir:{varied}", a.worlds, k, **kw)
        logged = expert_run(scenes, a.worlds, k, frac, EPISODE_STEPS, a.busy_steps)
        busy[label] = {**r, "logged_drivers": logged}
        print(
            f"{label} (K {k}, min_active_fraction {frac:g}): active slot fraction "
            f"{r['active_slot_fraction']:.3f} (logged drivers {logged['active_slot_fraction']:.3f})"
        )

    ratio = runs["map_20k"]["casps"] / runs["map_1k"]["casps"]
    result: dict[str, Any] = {
        "engine": "kinematic",
        "worlds": a.worlds,
        "torch_threads": torch.get_num_threads(),
        "map_size": {
            **runs,
            "ratio_20k_over_1k": ratio,
        },
        "busy_worlds": {
            "scenes": len(scenes),
            "agents_auto": auto,
            "agents_auto_min_fill": DEFAULT_MIN_FILL,
            "initial_fill": {"k16": initial_fill(counts, AGENTS), "k_auto": initial_fill(counts, auto)},
            "min_active_fraction": f,
            "warmup_steps": EPISODE_STEPS,
            "timed_steps": a.busy_steps,
            **busy,
        },
        "corpus_build_s": build_s,
        "wall_s": time.perf_counter() - t0,
        "machine": machine_info(),
    }
    write_json(a.out, result)
    print(f"20k / 1k CASPS = {ratio:.2f} -> {a.out}")


if __name__ == "__main__":
    main()
