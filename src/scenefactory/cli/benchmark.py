"""``benchmark wosac``: the Waymo Open Sim Agents Challenge realism metrics of a sim-agent policy on a
folder of WOMD scenario shards (:mod:`scenefactory.evaluation.wosac`); its flags and the one mapping of
them onto :class:`~scenefactory.evaluation.wosac.benchmark.WosacJob`.

The evaluation modules are imported when the command runs, not with this module (start-up time).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenefactory.bounds import SEED, IntRange
from scenefactory.cli.argtypes import out_path

POLICY_NAMES = ("log", "constant_velocity", "idm", "random", "checkpoint")
"""``--policy`` choices (``evaluation.wosac.rollouts.POLICIES`` and a trained driving checkpoint)."""
ROLLOUTS = IntRange(1, 1024, "the challenge uses 32")
MAX_SCENES = IntRange(0, 10_000_000)


def add_commands(sub: Any) -> None:
    """Add ``benchmark`` with its ``wosac`` benchmark."""
    b = sub.add_parser("benchmark", help="the field's benchmarks on real logs (WOSAC realism)")
    kinds = b.add_subparsers(dest="task", required=True)
    w = kinds.add_parser("wosac", help="WOSAC 2025 realism meta-metric of a sim-agent policy -> metrics.json")
    w.add_argument("--scenes", type=Path, required=True, help="folder of WOMD scenario shards (*tfrecord*)")
    w.add_argument("--policy", choices=POLICY_NAMES, required=True, help="sim-agent policy for every object")
    w.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="with --policy checkpoint: a driving checkpoint (train drive) that drives each scenario's"
        " controllable vehicles, its actions sampled",
    )
    w.add_argument(
        "--others",
        choices=("log", "idm"),
        default="log",
        help="with --policy checkpoint: the other objects replay their logs (log, default) or, the"
        " vehicles, follow their logged paths with an IDM speed law and brake for the agents (idm)",
    )
    w.add_argument("--rollouts", type=ROLLOUTS, default=32, help="rollouts per scenario (default 32)")
    w.add_argument("--seed", type=SEED, default=0, help="seed of the random policy (default 0)")
    w.add_argument("--max-scenes", type=MAX_SCENES, default=0, help="score the first N scenarios (0: all)")
    w.add_argument(
        "--save-rollouts",
        action="store_true",
        help="also write rollouts.npz (for benchmarks/wosac_official.py)",
    )
    w.add_argument("--out", type=out_path, required=True)
    w.add_argument("--quiet", action="store_true", help="no per-scenario line")


def benchmark(args: argparse.Namespace) -> int:
    """``benchmark wosac``: prints the report table; exit status 0. Runs on one torch thread unless
    ``--threads`` says otherwise: its tensors are small (100 scenarios x 32 random rollouts on this
    2-core machine: 58 s on one thread at load 1.2, 344 s on two at load 4.8;
    ``benchmarks/results/wosac_speed.json``)."""
    import torch

    from scenefactory.evaluation.wosac.benchmark import CHECKPOINT, WosacJob, report_markdown, run_wosac

    if getattr(args, "threads", None) is None:
        torch.set_num_threads(1)

    job = WosacJob(
        scenes=args.scenes,
        policy=args.policy,
        out=args.out,
        rollouts=args.rollouts,
        seed=args.seed,
        max_scenes=args.max_scenes,
        save_rollouts=args.save_rollouts,
        checkpoint=args.checkpoint,
        others=args.others,
    )
    driver = None
    if job.policy == CHECKPOINT and job.checkpoint is not None:
        driver = _driver(job.checkpoint, job.others)
    command = " ".join(["scenefactory", *getattr(args, "argv", [])])
    result = run_wosac(
        job, command, None if args.quiet else lambda line: print(line, file=sys.stderr), driver=driver
    )
    print(report_markdown(result))
    return 0


def _driver(checkpoint: Path, others: str) -> Any:
    """The checkpoint's policy as a WOSAC driver: sampled actions, on the engine it was trained on
    (the kinematic tier for a checkpoint that does not say). A missing or unfit checkpoint is a
    ``CheckpointError`` naming it (``rl.driving.load_policy``, weights_only loading)."""
    from scenefactory.engines.spec import EngineSpec
    from scenefactory.evaluation.wosac.driven import Driver
    from scenefactory.rl.driving import load_policy

    policy = load_policy(checkpoint)
    engine = policy.engine if policy.engine is not None else EngineSpec(tier="kinematic")
    return Driver(act=policy.sample, task=policy.task_cfg, engine=engine, others=others, name=str(checkpoint))


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("benchmark", "wosac"): benchmark
}
