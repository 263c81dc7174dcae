"""``transfer``: the 2×2 cross-simulator table — policies trained on the kinematic and the mujoco
tier, each evaluated on both tiers on the same held-out scenes.

A tier's policies are the given ``--checkpoint TIER=PATH`` (repeatable) or are trained here with
the demo's settings, one per seed. Each (policy, engine) cell is evaluated by
``drive.evaluate_checkpoint`` into ``out/<trained>_on_<engine>/metrics.json`` (one policy) or
``out/<trained>_on_<engine>/policy_<i>/metrics.json`` (several); a cell pools its policies'
agent-episodes (the rates are exact pooled counts). Besides the report folder, ``transfer.md``,
``transfer.json`` and ``transfer.png`` are written as before.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from scenefactory.experiments.base import (
    Experiment,
    ExperimentArgs,
    Sizes,
    policies,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.report import markdown_table, write_report
from scenefactory.io import atomic_write_text, write_json
from scenefactory.stats import wilson_interval

NAME = "transfer"
TIERS = ("kinematic", "mujoco")
CELL_KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate")
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=15, train_scenes=24, episodes=12, eval_worlds=12
)


def _pool(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled rates of several evaluations (counts summed; Wilson intervals on the pooled counts)."""
    n = sum(int(m["episodes"]) for m in metrics)
    out: dict[str, Any] = {"episodes": n, "scenes": metrics[0].get("scenes"), "policies": len(metrics)}
    for k in CELL_KEYS:
        hits = sum(round(m[k] * m["episodes"]) for m in metrics)
        out[k] = hits / n if n else float("nan")
        out[f"{k}_ci95"] = list(wilson_interval(hits, n))
    return out


def run(args: ExperimentArgs) -> dict[str, Any]:
    """Run the experiment; writes the report folder and returns ``results.json``'s document."""
    from scenefactory.evaluation.transfer import plot_transfer, transfer_table
    from scenefactory.jobs.drive import evaluate_checkpoint

    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    given = args.checkpoints_by_kind(TIERS)
    ckpts = {t: policies(t, given[t], partial(train_spec, t, sizes), args, sizes) for t in TIERS}
    cells: dict[str, dict[str, Any]] = {}
    for trained in TIERS:
        for engine in TIERS:
            cell_dir = args.out / f"{trained}_on_{engine}"
            per = []
            for i, ckpt in enumerate(ckpts[trained]):
                out = cell_dir if len(ckpts[trained]) == 1 else cell_dir / f"policy_{i}"
                per.append(
                    evaluate_checkpoint(ckpt, engine, sizes.episodes, args.seed, out, sizes.eval_worlds)
                )
            cells[f"{trained}->{engine}"] = {
                "trained_on": trained,
                "evaluated_on": engine,
                "checkpoints": [str(p) for p in ckpts[trained]],
                **_pool(per),
                "per_policy": [{k: m[k] for k in ("checkpoint", "episodes", *CELL_KEYS)} for m in per],
            }
    matrix = {"cells": cells, "trained_on": list(TIERS), "evaluated_on": list(TIERS)}
    write_json(args.out / "transfer.json", matrix)
    atomic_write_text(args.out / "transfer.md", transfer_table(matrix))
    plot = plot_transfer(matrix, args.out / "transfer.png")
    per_rows = [
        [c["trained_on"], c["evaluated_on"], f"`{p['checkpoint']}`"]
        + [f"{p[k]:.3f}" for k in CELL_KEYS]
        + [str(p["episodes"])]
        for c in cells.values()
        for p in c["per_policy"]
    ]
    sections = [
        "## Pooled over each tier's policies\n\n" + transfer_table(matrix),
        "## Per policy\n\n"
        + markdown_table(
            ["trained on", "evaluated on", "policy", "goal reach", "collision", "off-road", "agent-episodes"],
            per_rows,
        ),
    ]
    intro = f"""
Policies trained on each tier (kinematic bicycle, mujoco articulated cars) are evaluated on both
tiers on the same {sizes.episodes} held-out procedural scenes (each under its own road condition).
SceneFactory reports 99.5 % success for physics → kinematic and 47.3 % for kinematic → physics.
"""
    return write_report(
        args,
        NAME,
        "Cross-simulator transfer: kinematic ↔ mujoco",
        intro,
        sections,
        sizes,
        {t: training_seeds(given[t], args, sizes) for t in TIERS},
        {"tiers": list(TIERS), "checkpoints": {t: [str(p) for p in v] for t, v in ckpts.items()}},
        matrix,
        [plot],
        time.perf_counter() - t0,
        seed_compare=[("mujoco->kinematic", "kinematic->mujoco")],
    )


EXPERIMENT = Experiment(NAME, "2x2 table: train kinematic/mujoco x evaluate kinematic/mujoco", TIERS, run)
