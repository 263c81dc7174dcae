"""The choice of a native tool for the driving task's pair work, measured: the agents' TTC, DRAC and box
overlap (``K x M`` pairs) by the torch path (``tasks.driving.pairs``), by torch.compile (inductor, CPU)
of the same functions, and by the fused numba kernels (``tasks.driving.native``): first-call time
(compilation: numba's cache is pointed at an empty folder), steady time per call, and whether the
results equal the torch path's bit for bit.

Objects are a busy real-format world's: 256 worlds, K = 16 agents, M = 56 objects (40 logged ones
observed), positions over a 150 m square, speeds up to 15 m/s, 80 % active. A second shape (M = 48)
shows what a change of the observed count costs each tool (it changes every step in the env).

Writes ``benchmarks/results/pair_kernels.json``. Usage: ``.venv/bin/python benchmarks/pair_kernels.py
[--threads 1] [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-cold-")  # first call compiles
import torch

from scenefactory.evaluation.bench import machine_info
from scenefactory.io import write_json
from scenefactory.tasks.driving.native import agent_interactions
from scenefactory.tasks.driving.pairs import agent_box_overlap, agent_ttc_drac

W, K = 256, 16


def objects(m: int, seed: int) -> tuple[torch.Tensor, ...]:
    """A batch of worlds of ``m`` objects (module docstring)."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.rand(W, m, 2, generator=g) * 150.0
    yaw = (torch.rand(W, m, generator=g) - 0.5) * 6.28
    speed = torch.rand(W, m, generator=g) * 15.0
    vel = torch.stack((torch.cos(yaw), torch.sin(yaw)), -1) * speed[..., None]
    length = 0.5 + torch.rand(W, m, generator=g) * 4.5
    width = 0.5 + torch.rand(W, m, generator=g) * 1.6
    active = torch.rand(W, m, generator=g) < 0.8
    return pos, yaw, vel, length, width, active


def torch_path(pos, yaw, vel, length, width, active):  # type: ignore[no-untyped-def]
    """The torch path: TTC, DRAC, overlap."""
    ttc, drac = agent_ttc_drac(pos, yaw, vel, length, width, active, K, 10.0)
    return ttc, drac, agent_box_overlap(pos, yaw, length, width, active, K)


def numba_path(pos, yaw, vel, length, width, active):  # type: ignore[no-untyped-def]
    """The fused numba kernels."""
    return agent_interactions(pos, yaw, vel, length, width, active, K, 10.0)


def measure(fn: Any, repeats: int) -> dict[str, Any]:
    """First call (compile) and steady seconds per call on two shapes; equality with the torch path."""
    out: dict[str, Any] = {}
    for label, m in (("m56", 56), ("m48", 48)):
        args = objects(m, 0)
        t0 = time.perf_counter()
        got = fn(*args)
        first = time.perf_counter() - t0
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
        steady = sorted(times)[len(times) // 2]  # the median: other processes share the cores
        ref = torch_path(*args)
        equal = all(torch.equal(a, b) for a, b in zip(got, ref, strict=True))
        out[label] = {"first_call_s": first, "steady_ms": steady * 1e3, "equal_to_torch": equal}
        print(
            f"{fn.__name__:14s} {label}: first {first:6.2f} s, steady {steady * 1e3:7.2f} ms, equal {equal}"
        )
    return out


def main() -> None:
    """Measure the three tools in one process; one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/pair_kernels.json"))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    load = os.getloadavg()
    compiled = torch.compile(torch_path, dynamic=True)
    compiled.__name__ = "torch_compile"  # type: ignore[attr-defined]
    result = {
        "command": f"python benchmarks/pair_kernels.py --threads {a.threads} --repeats {a.repeats}",
        "worlds": W,
        "agents": K,
        "torch": measure(torch_path, a.repeats),
        "numba": measure(numba_path, a.repeats),
        "torch_compile_inductor": measure(compiled, a.repeats),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "machine": machine_info(),
    }
    write_json(a.out, result)


if __name__ == "__main__":
    main()
