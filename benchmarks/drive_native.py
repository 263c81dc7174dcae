"""Driving throughput on real-format scenes with WOMD's logged traffic against procedural scenes, in
one run: kinematic and mujoco, the fused CPU kernels against the torch path, one and two threads, the
active slot share with varied agent counts (on ``--busy-worlds`` worlds after one episode of
warm-up, so their episodes are out of step as in training), PPO training steps/s and a profile of a step.

The real-format corpus is synthetic WOMD city scenarios with WOMD's make-up of logged traffic
(``scenes.womd.synthetic.WOMD_MIX``: parked vehicles, pedestrians, cyclists, objects observed over part
of the log, up to 128 per scenario), written as TFRecord shards and converted as real shards are
(``benchmarks/real_scenes.py``'s ``corpus``, cached in ``benchmarks/.cache/real_scenes/``). Every
figure is ``scenefactory bench drive``'s (``evaluation.bench.bench_drive``: CASPS over every W x K slot,
the batched policy's inference included, or with ``_random`` random actions: the simulator alone, as
native simulators report theirs) at 256 worlds x 16 agents unless said; the machine's load
average is recorded beside each run (other processes share the cores: compare ratios within one run).

Writes ``benchmarks/results/drive_native.json``. Usage::

    .venv/bin/python benchmarks/drive_native.py [--scenes 48] [--steps 30] [--mujoco-steps 10]
        [--train-iterations 3] [--threads 2] [--busy-worlds 64] [--busy-steps 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from real_scenes import corpus  # a sibling script

from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.bench import bench_drive, machine_info
from scenefactory.io import write_json
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.slots import DEFAULT_MIN_FILL, agents_per_world_for

WORLDS, AGENTS = 256, 16


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages now."""
    return [round(x, 2) for x in os.getloadavg()]


def bench(tier: str, scenes: list[Scene] | None, source: str, **kw: Any) -> dict[str, Any]:
    """``bench drive`` with the load beside it (machine details once, at the top level)."""
    before = load()
    r = bench_drive(EngineSpec(tier=tier), kw.pop("worlds", WORLDS), kw.pop("agents", AGENTS),
                    scenes=scenes, scene_source=source, **kw)  # fmt: skip
    r.pop("machine")
    r["load_before"], r["load_after"] = before, load()
    line = f"{tier:9s} {source[:40]:40s} {r['casps']:>9,.0f} CASPS  active {r['active_slot_fraction']:.2f}"
    print(
        f"{line}  native {r['native_kernels']}  threads {torch.get_num_threads()}  load {r['load_after'][0]}"
    )
    return r


def train(scenes_dir: Path | None, iterations: int, out: Path) -> dict[str, Any]:
    """``scenefactory train drive`` (PPO, kinematic, 256 x 16) for a few iterations: steps/s, collection
    and learning seconds of the iterations after the first (which compiles and warms up)."""
    cmd = [sys.executable, "-m", "scenefactory", "--threads", str(torch.get_num_threads()),
           "train", "drive", "--engine", "kinematic",
           "--worlds", str(WORLDS), "--agents", str(AGENTS), "--iterations", str(iterations),
           "--out", str(out)]  # fmt: skip
    if scenes_dir is not None:
        cmd += ["--scenes", str(scenes_dir)]
    before = load()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = json.loads((out / "history.json").read_text())[1:]
    keys = ("steps_per_s", "collect_s", "learn_s")
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in keys}
    result = {
        "command": " ".join(cmd[1:]).replace(str(out), "OUT"),
        **mean,
        "casps_collection": mean["steps_per_s"],
        "iterations_timed": len(rows),
        "wall_s": time.perf_counter() - t0,
        "load_before": before,
        "load_after": load(),
    }
    print(f"train {'real' if scenes_dir else 'procedural'}: {mean['steps_per_s']:,.0f} steps/s, "
          f"collect {mean['collect_s']:.2f} s, learn {mean['learn_s']:.2f} s per iteration")  # fmt: skip
    return result


def profile(scenes: list[Scene], steps: int) -> dict[str, Any]:
    """Where a kinematic env step's time goes on the real-format scenes (random actions, cProfile)."""
    env = DrivingEnv(DrivingTaskConfig(num_worlds=WORLDS, agents_per_world=AGENTS), scenes, seed=0)
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for _ in range(3):
            env.step(torch.rand(WORLDS, AGENTS, 2, generator=gen) * 2 - 1)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        for _ in range(steps):
            env.step(torch.rand(WORLDS, AGENTS, 2, generator=gen) * 2 - 1)
        prof.disable()
        wall = time.perf_counter() - t0
    st = pstats.Stats(prof)
    rows = []
    for (file, line, name), (_, calls, tottime, cumtime, _) in st.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({name})", "calls": calls,
                     "tottime_s": tottime, "cumtime_s": cumtime})  # fmt: skip
    top = sorted(rows, key=lambda r: -r["cumtime_s"])
    interesting = [r for r in top if r["function"].split(":")[0] in
                   {"env.py", "pairs.py", "native.py", "observations.py", "road_index.py", "kinematic.py",
                    "geometry.py", "drivable.py", "signals.py", "bicycle.py"}][:25]  # fmt: skip
    return {"steps": steps, "wall_s": wall, "casps": steps * WORLDS * AGENTS / wall,
            "by_cumulative_time": interesting}  # fmt: skip


def main() -> None:
    """Every measurement of the module docstring in this process; one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=int, default=48, help="scenes of the real-format corpus")
    p.add_argument("--steps", type=int, default=30, help="timed steps of the kinematic runs")
    p.add_argument("--mujoco-steps", type=int, default=10, help="timed steps of the mujoco runs")
    p.add_argument("--train-iterations", type=int, default=3, help="PPO iterations (the first untimed)")
    p.add_argument("--threads", type=int, default=2, help="torch (and numba) threads of the main runs")
    p.add_argument("--busy-worlds", type=int, default=64, help="worlds of the active-slot-share runs")
    p.add_argument("--busy-steps", type=int, default=100, help="their timed steps, after an episode")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds of the main kinematic runs")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/drive_native.json"))
    a = p.parse_args()
    t0 = time.perf_counter()
    folder = corpus("womd_mix", a.scenes, 7, (2000, 8000), (3, 32))
    real = load_scene_dir(folder)
    src = f"dir:{folder}"
    torch.set_num_threads(a.threads)
    kin = {"steps": a.steps}
    runs: dict[str, Any] = {}
    # the kinematic runs a ratio is taken of: ``--repeats`` rounds, interleaved, each figure the
    # median round's (a shared machine's speed drifts by tens of percent within minutes)
    main_runs = {
        "kinematic_procedural": ("kinematic", None, "procedural", {}),
        "kinematic_real": ("kinematic", real, src, {}),
        # the simulator alone (random actions), as native simulators report their figure
        "kinematic_procedural_random": ("kinematic", None, "procedural", {"actions": "random"}),
        "kinematic_real_random": ("kinematic", real, src, {"actions": "random"}),
        "kinematic_procedural_torch": ("kinematic", None, "procedural", {"native_kernels": False}),
        "kinematic_real_torch": ("kinematic", real, src, {"native_kernels": False}),
    }
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in main_runs}
    for _ in range(a.repeats):
        for name, (tier, scenes, source, extra) in main_runs.items():
            rounds[name].append(bench(tier, scenes, source, **extra, **kin))
    for name, results in rounds.items():
        ordered = sorted(results, key=lambda r: r["casps"])
        runs[name] = {**ordered[len(ordered) // 2], "casps_rounds": [r["casps"] for r in results]}
    muj = {"steps": a.mujoco_steps, "warmup": 2}
    runs["mujoco_procedural"] = bench("mujoco", None, "procedural", **muj)
    runs["mujoco_real"] = bench("mujoco", real, src, **muj)
    auto = agents_per_world_for([sc.num_agents for sc in real], DEFAULT_MIN_FILL)
    busy = {"steps": a.busy_steps, "warmup": DrivingTaskConfig().max_steps, "worlds": a.busy_worlds}
    runs["kinematic_real_k16_busy"] = bench("kinematic", real, src, **busy)
    runs["kinematic_real_kauto_reset_busy"] = bench(
        "kinematic", real, src, agents=auto, min_active_fraction=0.5, **busy
    )
    threads: dict[str, Any] = {}
    for n in (1, 2):
        torch.set_num_threads(n)
        threads[str(n)] = {
            "kinematic_real": bench("kinematic", real, src, **kin),
            "kinematic_procedural": bench("kinematic", None, "procedural", **kin),
            "kinematic_real_random": bench("kinematic", real, src, actions="random", **kin),
        }
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        training = {
            "procedural": train(None, a.train_iterations, Path(tmp) / "proc"),
            "real": train(folder, a.train_iterations, Path(tmp) / "real"),
        }
    prof = profile(real, 10)

    def ratio(x: str, y: str) -> float:
        return runs[x]["casps"] / runs[y]["casps"]

    result = {
        "command": "python benchmarks/drive_native.py " + " ".join(sys.argv[1:]),
        "seed": 0,
        "worlds": WORLDS,
        "agents_per_world": AGENTS,
        "torch_threads": a.threads,
        "openmp_wait": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
        "corpus": {
            "folder": str(folder),
            "scenes": len(real),
            "params": json.loads((folder.parent.parent / "params.json").read_text()),
        },
        "ratios": {
            "kinematic_real_over_procedural": ratio("kinematic_real", "kinematic_procedural"),
            "mujoco_real_over_procedural": ratio("mujoco_real", "mujoco_procedural"),
            "kinematic_real_over_procedural_random": ratio(
                "kinematic_real_random", "kinematic_procedural_random"
            ),
            "kinematic_real_native_over_torch": ratio("kinematic_real", "kinematic_real_torch"),
            "kinematic_procedural_native_over_torch": ratio(
                "kinematic_procedural", "kinematic_procedural_torch"
            ),
            "threads_2_over_1_real": threads["2"]["kinematic_real"]["casps"]
            / threads["1"]["kinematic_real"]["casps"],
        },
        "agents_auto": auto,
        "runs": runs,
        "threads": threads,
        "training": training,
        "profile_kinematic_real": prof,
        "wall_s": time.perf_counter() - t0,
        "machine": machine_info(),
    }
    write_json(a.out, result)
    print(json.dumps(result["ratios"], indent=1), "->", a.out)


if __name__ == "__main__":
    main()
