"""How the driving step's threads share the cores: torch's and numba's parallel loops run on one
OpenMP runtime (GNU libgomp), whose idle threads spin before they sleep. On a machine with as many
threads as cores and another process busy, a spinning thread holds a core the descheduled one needs
at every barrier (tens of parallel regions a step).

Runs ``scenefactory --threads N bench drive --actions random`` (the simulator alone) on the
real-format corpus of ``benchmarks/drive_native.py`` in fresh processes, for each OpenMP wait policy
(:data:`POLICIES`), 1 and 2 threads, with the machine as it
is and with one core kept busy by a second process (a pure-Python loop), and writes
``benchmarks/results/thread_sharing.json``. Usage::

    .venv/bin/python benchmarks/thread_sharing.py [--steps 30] [--worlds 256] [--agents 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from real_scenes import corpus  # a sibling script

from scenefactory.evaluation.bench import machine_info
from scenefactory.io import write_json

POLICIES: dict[str, dict[str, str]] = {
    "spin300k": {"GOMP_SPINCOUNT": "300000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "active": {"OMP_WAIT_POLICY": "ACTIVE"},
    "spin100k": {"GOMP_SPINCOUNT": "100000"},
}
"""Wait settings tried: libgomp's own default (spin about 300,000 times, then sleep; what a process
gets with neither variable set when torch is imported before scenefactory), never spin (the
package's default, ``scenefactory/__init__.py``), always spin, spin a third as long."""


def run(folder: Path, threads: int, wait: dict[str, str], a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One ``bench drive`` process under the ``wait`` settings; its JSON with the load averages before it."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(wait)
    out = tmp / "bench.json"
    cmd = [
        sys.executable, "-m", "scenefactory", "--threads", str(threads), "bench", "drive",
        "--actions", "random", "--scenes", str(folder), "--worlds", str(a.worlds),
        "--agents", str(a.agents), "--steps", str(a.steps), "--out", str(out),
    ]  # fmt: skip
    load = [round(x, 2) for x in os.getloadavg()]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = json.loads(out.read_text())
    return {"casps": r["casps"], "active_casps": r["active_casps"], "load_before": load}


def main() -> None:
    """Every combination of the module docstring; one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--worlds", type=int, default=256)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2, help="rounds of every setting, interleaved")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/thread_sharing.json"))
    a = p.parse_args()
    folder = corpus("womd_mix", 48, 7, (2000, 8000), (3, 32))
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (False, True):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                for rep in range(a.repeats):
                    for name, wait in POLICIES.items():
                        for threads in (1, 2):
                            key = f"{'one_core_busy' if busy else 'as_is'}/{name}/{threads}/{rep}"
                            runs[key] = run(folder, threads, wait, a, Path(tmp))
                            print(key, f"{runs[key]['casps']:,.0f} CASPS", flush=True)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
            time.sleep(2)
    settings = sorted({k.rsplit("/", 1)[0] for k in runs})  # condition/policy/threads
    median = {}
    for setting in settings:
        of_it = [r["casps"] for k, r in runs.items() if k.startswith(setting + "/")]
        median[setting] = statistics.median(of_it)
    result = {
        "command": "python benchmarks/thread_sharing.py " + " ".join(sys.argv[1:]),
        "seed": 0,
        "what": "scenefactory --threads N bench drive --actions random on the womd_mix real-format corpus",
        "worlds": a.worlds,
        "agents_per_world": a.agents,
        "steps": a.steps,
        "corpus": str(folder),
        "median_casps": median,
        "runs": runs,
        "machine": machine_info(),
    }
    write_json(a.out, result)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
