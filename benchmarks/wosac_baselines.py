"""WOSAC baselines and timing on the generated real-format corpus: ``benchmark wosac`` for log replay,
constant velocity, IDM along the log and random driving, 32 rollouts, on ``--scenes`` generated
scenarios (``evaluation.wosac.corpus``, seed 0); writes every policy's figures, its wall and CPU time
and the machine's load to ``--out``.

    .venv/bin/python benchmarks/wosac_baselines.py --scenes 100 --out benchmarks/results/wosac_baselines.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import torch

from scenefactory.evaluation.wosac.benchmark import WosacJob, run_wosac
from scenefactory.evaluation.wosac.corpus import write_wosac_corpus

POLICIES = ("log", "constant_velocity", "idm", "random")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0, help="corpus seed and the random policy's seed")
    p.add_argument("--rollouts", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: no spin-waiting when busy)")
    p.add_argument("--reuse-corpus", action="store_true", help="score the corpus already in --work")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--work", type=Path, default=Path("/tmp/scenefactory-wosac-baselines"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/wosac_baselines.json"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    corpus = args.work / "corpus"
    t = time.perf_counter()
    reused = args.reuse_corpus and (corpus / "synthetic.tfrecord-00000-of-00001").exists()
    if not reused:
        write_wosac_corpus(corpus, args.scenes, args.seed)
    made = "reused from an earlier run" if reused else f"generated in {time.perf_counter() - t:.1f} s"
    report = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "corpus": f"write_wosac_corpus(count={args.scenes}, seed={args.seed}) ({made})",
        "seed": args.seed,
        "rollouts": args.rollouts,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "policies": {},
    }
    for policy in args.policies.split(","):
        job = WosacJob(
            scenes=corpus, policy=policy, out=args.work / policy, rollouts=args.rollouts, seed=args.seed
        )
        m = run_wosac(
            job,
            f"scenefactory --threads {args.threads} benchmark wosac --scenes {corpus} --policy"
            f" {policy} --rollouts {args.rollouts} --seed {args.seed} --out {args.work / policy}",
        )
        report["policies"][policy] = {
            "buckets": m["buckets"],
            "aggregate": m["aggregate"],
            "timing": m["timing"],
        }
        b, tm = m["buckets"], m["timing"]
        print(
            f"{policy}: meta {b['realism_meta_metric']:.4f} kin {b['kinematic_metrics']:.4f} inter"
            f" {b['interactive_metrics']:.4f} map {b['map_based_metrics']:.4f} minADE {b['min_ade']:.3f}"
            f" | {tm['total_s']:.1f} s wall, {tm['cpu_s']:.1f} s CPU, load {tm['load_average_1min']:.1f}",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
