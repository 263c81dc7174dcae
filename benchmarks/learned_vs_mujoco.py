"""CASPS of learned dynamics engines against the mujoco tier, same worlds and agents, one run.

Usage: ``.venv/bin/python benchmarks/learned_vs_mujoco.py --dynamics-model runs/fit_mlp/model.pt
[--dynamics-model runs/fit_gru/model.pt ...] [--worlds 256] [--agents 16]`` → writes
``benchmarks/results/learned_vs_mujoco.json`` with each engine's CASPS and its ratio to mujoco
(default rates: 10 Hz policy, 120 Hz physics for mujoco).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scenefactory.dynamics.model_file import load_dynamics_model
from scenefactory.evaluation.bench import bench_drive, machine_info
from scenefactory.io import write_json


def main() -> None:
    """Measure mujoco, then each learned model, in this process; write one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dynamics-model", action="append", required=True)
    p.add_argument("--worlds", type=int, default=256)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/learned_vs_mujoco.json"))
    a = p.parse_args()
    mujoco = bench_drive("mujoco", a.worlds, a.agents, steps=a.steps)["casps"]
    rows = {"mujoco": {"casps": mujoco}}
    for path in a.dynamics_model:
        model, _ = load_dynamics_model(Path(path))
        kind = model.cfg.kind.value if hasattr(model.cfg.kind, "value") else str(model.cfg.kind)
        casps = bench_drive("learned", a.worlds, a.agents, steps=a.steps, dynamics_model=path)["casps"]
        rows[f"learned:{kind}"] = {"casps": casps, "over_mujoco": casps / mujoco, "model": path}
        print(f"learned {kind}: {casps:,.0f} CASPS = {casps / mujoco:.2f}x mujoco ({mujoco:,.0f})")
    write_json(
        a.out, {"worlds": a.worlds, "agents_per_world": a.agents, "engines": rows, "machine": machine_info()}
    )


if __name__ == "__main__":
    main()
