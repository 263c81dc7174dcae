"""The baselines table of issue 45 on a generated real-format corpus: the WOSAC realism figures and the
human-replay figures (the self-driving car driven, every other object replaying its log, or the logged
vehicles reacting with the IDM) of log replay, constant velocity, IDM and a trained driving policy.

Every figure comes from the CLI (``benchmark wosac``, ``eval drive``), run here one after the other;
the corpus is ``write_wosac_corpus(--scenes, --seed)`` (held out from the policy's training corpus when
the seeds differ), or with ``--shards DIR`` the scenario shards of your own WOMD copy, converted with
``scenefactory convert``. Writes a result record
(``scenefactory.result/1``) that the docs render.

    .venv/bin/python benchmarks/real_format_baselines.py --scenes 50 --seed 1 \\
        --checkpoint runs/womd/checkpoints/latest.pt \\
        --trained-with "scenefactory train drive --recipe real-format ..." \\
        --out benchmarks/results/experiments/real_format_baselines.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from scenefactory.evaluation.wosac.corpus import write_wosac_corpus

WOSAC_POLICIES = ("log", "constant_velocity", "idm", "random")
DRIVERS = (
    ("expert", "logged drivers (log replay)"),
    ("constant-velocity", "constant velocity"),
    ("idm", "IDM"),
)
SHARD = "synthetic.tfrecord-00000-of-00001"
KEPT = (
    "policy",
    "episodes",
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "timeout_rate",
    "near_miss_rate",
    "mean_min_ttc_s",
    "log_divergence_m",
    "red_light_violation_rate",
    "others",
    "control",
    "engine",
    "checkpoint",
    "command",
)
"""The figures of each ``eval drive`` run the record keeps (its metrics.json holds the rest)."""


def cli(args: list[str], loads: list[float]) -> float:
    """Run ``scenefactory ARGS``; return its wall time; record the load average after it."""
    exe = str(Path(sys.executable).parent / "scenefactory")
    t = time.perf_counter()
    print("$ scenefactory " + " ".join(shlex.quote(a) for a in args), flush=True)
    subprocess.run([exe, *args], check=True, stdout=subprocess.DEVNULL)
    loads.append(os.getloadavg()[0])
    return time.perf_counter() - t


def ci(m: dict[str, Any], key: str) -> str:
    lo, hi = m[f"{key}_ci95"]
    return f"{m[key]:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=int, default=50)
    p.add_argument("--seed", type=int, default=1, help="corpus seed and the sampling seed")
    p.add_argument("--rollouts", type=int, default=32)
    p.add_argument("--checkpoint", type=Path, required=True, help="the trained driving policy")
    p.add_argument("--trained-with", default="not recorded", help="the command that trained it")
    p.add_argument("--engine", default="kinematic", help="engine of the human-replay runs")
    p.add_argument("--work", type=Path, default=Path("/tmp/scenefactory-real-format-baselines"))
    p.add_argument("--reuse-corpus", action="store_true")
    p.add_argument(
        "--shards",
        type=Path,
        default=None,
        help="a folder of your own WOMD scenario shards (*tfrecord*) in place of the generated corpus",
    )
    p.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/experiments/real_format_baselines.json")
    )
    a = p.parse_args()
    loads: list[float] = [os.getloadavg()[0]]
    corpus, conv = a.work / "corpus", a.work / "converted"
    t0 = time.perf_counter()
    if a.shards is not None:  # your own copy: its shards as they are (--scenes is not used)
        corpus = a.shards
        shards = sorted(str(f) for f in corpus.iterdir() if "tfrecord" in f.name)
        if not shards:
            raise SystemExit(f"--shards {corpus}: no *tfrecord* files in it")
        if not (a.reuse_corpus and (conv / "json").is_dir()):
            cli(["--threads", "1", "convert", *shards, "--out", str(conv)], loads)
    elif not (a.reuse_corpus and (conv / "json").is_dir()):
        write_wosac_corpus(corpus, a.scenes, a.seed)
        cli(["--threads", "1", "convert", str(corpus / SHARD), "--out", str(conv)], loads)
    common = ["--rollouts", str(a.rollouts), "--seed", str(a.seed), "--quiet"]
    wosac: dict[str, dict[str, Any]] = {}
    runs = [(pol, [], pol) for pol in WOSAC_POLICIES]
    runs += [
        (f"checkpoint_{o}", ["--checkpoint", str(a.checkpoint), "--others", o], "checkpoint")
        for o in ("log", "idm")
    ]
    for name, extra, pol in runs:
        out = a.work / "wosac" / name
        cli(
            [
                "--threads",
                "1",
                "benchmark",
                "wosac",
                "--scenes",
                str(corpus),
                "--policy",
                pol,
                *extra,
                *common,
                "--out",
                str(out),
            ],
            loads,
        )
        m = json.loads((out / "metrics.json").read_text())
        wosac[name] = {
            "buckets": m["buckets"],
            "timing": m["timing"],
            "command": m["command"],
            "driven": m.get("driven"),
        }
    replay: dict[str, dict[str, Any]] = {}
    drivers = [(d, []) for d, _ in DRIVERS] + [("checkpoint", ["--checkpoint", str(a.checkpoint)])]
    for driver, extra in drivers:
        for others in ("log", "idm"):
            out = a.work / "replay" / f"{driver}_{others}"
            args = [
                "--threads",
                "1",
                "eval",
                "drive",
                "--policy",
                driver,
                *extra,
                "--scenes",
                str(conv / "json"),
            ]
            args += [
                "--control",
                "sdc",
                "--others",
                others,
                "--engine",
                a.engine,
                "--episodes",
                str(a.scenes),
            ]
            args += ["--worlds", str(min(a.scenes, 64)), "--seed", str(a.seed), "--out", str(out)]
            cli(args, loads)
            m = json.loads((out / "metrics.json").read_text())
            m["command"] = "scenefactory " + " ".join(shlex.quote(x) for x in args)
            replay[f"{driver}_{others}"] = m
    total_s = time.perf_counter() - t0

    names = {
        "log": "log replay",
        "constant_velocity": "constant velocity",
        "idm": "IDM along the log",
        "random": "random",
    }
    w_rows = []
    for name, r in wosac.items():
        b, tm = r["buckets"], r["timing"]
        label = names.get(name, "trained policy (sampled), others " + name.removeprefix("checkpoint_"))
        w_rows.append(
            [
                label,
                round(b["realism_meta_metric"], 4),
                round(b["kinematic_metrics"], 4),
                round(b["interactive_metrics"], 4),
                round(b["map_based_metrics"], 4),
                round(b["min_ade"], 3),
                round(b["simulated_collision_rate"], 4),
                round(b["simulated_offroad_rate"], 4),
                round(tm["total_s"], 1),
            ]
        )
    labels = dict(DRIVERS) | {"checkpoint": "trained policy (mean action)"}
    r_rows = []
    for key, m in replay.items():
        driver, others = key.rsplit("_", 1)
        r_rows.append(
            [
                labels[driver],
                others,
                ci(m, "goal_reach_rate"),
                ci(m, "collision_rate"),
                ci(m, "offroad_rate"),
                round(m["timeout_rate"], 3),
                round(m["log_divergence_m"], 2),
                m["episodes"],
            ]
        )
    # the logged drivers beside each other driver, in the same mode: the same figures every time
    for key, m in replay.items():
        hb = m.get("human_baseline")
        if hb is not None:
            ref = replay["expert_" + key.rsplit("_", 1)[1]]
            assert (
                hb["goal_reach_rate"] == ref["goal_reach_rate"]
                and hb["collision_rate"] == ref["collision_rate"]
            ), key
    n_scenes = json.loads((a.work / "wosac" / "log" / "metrics.json").read_text())["scenarios"]
    record = {
        "schema": "scenefactory.result/1",
        "order": 30,
        "title": "Baselines on real-format scenes: WOSAC realism and human replay (log / reactive IDM)",
        "command": "python " + " ".join(shlex.quote(x) for x in sys.argv),
        "seed": (
            f"corpus write_wosac_corpus(count={a.scenes}, seed={a.seed}); sampling seed {a.seed}"
            if a.shards is None
            else f"the WOMD shards of {a.shards}; sampling seed {a.seed}"
        ),
        "machine": {
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "load": f"1-min load average {min(loads):.1f}-{max(loads):.1f} during the run (shared)",
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "episodes": (
            f"WOSAC: {n_scenes} scenarios x {a.rollouts} rollouts x 80 steps; human replay: the SDC of"
            f" each of the {n_scenes} converted scenes on the {a.engine} engine (one agent-episode per scene)"
        ),
        "source": (
            f"measured by this command in {total_s / 60:.1f} min; the trained policy is {a.checkpoint},"
            f" trained with: {a.trained_with}"
        ),
        "summary": (
            "WOSAC: every object valid at the current step simulated by the policy named (the trained"
            " policy drives the controllable vehicles, actions sampled, the other objects by their log or"
            " the IDM). Human replay (`eval drive --control sdc`): the SDC driven, every other object"
            " replaying its log (`--others log`) or, for vehicles, following its logged path at an IDM"
            " speed and braking for the SDC (`--others idm`); pedestrians and cyclists keep their logs."
        ),
        "tables": [
            {
                "title": "WOSAC 2025 realism (the scenarios of the corpus)",
                "columns": [
                    "policy",
                    "meta-metric",
                    "kinematic",
                    "interactive",
                    "map-based",
                    "minADE (m)",
                    "sim. collision",
                    "sim. off-road",
                    "wall s",
                ],
                "rows": w_rows,
            },
            {
                "title": "Human replay: the SDC driven, the others logged or reacting",
                "columns": [
                    "SDC driver",
                    "others",
                    "goal reach [95 % CI]",
                    "collision",
                    "off-road",
                    "time-out",
                    "log divergence (m)",
                    "agent-episodes",
                ],
                "rows": r_rows,
            },
        ],
        "runs": {"wosac": wosac, "human_replay": {k: {f: m.get(f) for f in KEPT} for k, m in replay.items()}},
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["tables"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
