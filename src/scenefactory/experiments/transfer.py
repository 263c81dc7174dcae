"""``transfer``: the 2×2 cross-simulator table — policies trained on the kinematic and the mujoco
tier, each evaluated on both tiers on the same held-out scenes.

A tier's policies are the given ``--checkpoint TIER=PATH`` (repeatable) or are trained here with
the demo's settings, one per seed. Each (policy, engine) cell is evaluated by ``eval drive``'s job
(``jobs.drive.evaluate``) into ``out/<trained>_on_<engine>/metrics.json`` (one policy) or
``out/<trained>_on_<engine>/policy_<i>/metrics.json`` (several); a cell pools its policies'
agent-episodes (the rates are exact pooled counts). Besides the report folder, ``transfer.md``,
``transfer.json`` and ``transfer.png`` are written as before. Each (kind, seed) training and each
(policy, engine) evaluation is a job of the experiment's executor (``--ray``: a Ray task): an
evaluation writes into a scratch folder, and the driver writes its files into the cell's folder.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.transfer import plot_transfer, transfer_table
from scenefactory.experiments.base import ExperimentArgs, Sizes, train_all, train_spec, training_seeds
from scenefactory.experiments.ray_backend import Job
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile, write_report
from scenefactory.experiments.results import Cell, PolicyFigures, Reader, find_cell
from scenefactory.experiments.tables import markdown_table
from scenefactory.io import atomic_write_bytes, atomic_write_text, write_json
from scenefactory.jobs.drive import EvalArgs, evaluate
from scenefactory.stats import wilson_interval

NAME = "transfer"
TIERS = ("kinematic", "mujoco")
CELL_KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate")
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=15, train_scenes=24, episodes=12, eval_worlds=12
)


@dataclass(frozen=True)
class TransferResults:
    """The 2×2 table: one cell per (training tier, evaluation tier), each pooling the tier's
    policies (kind = the training tier)."""

    cells: tuple[Cell, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain data: ``{"cells": [cell, ...]}``."""
        return {"cells": [c.to_json() for c in self.cells]}

    @classmethod
    def from_json(cls, r: Reader) -> TransferResults:
        """Inverse of :meth:`to_json`."""
        return cls(r.objects("cells", Cell.from_json))

    def matrix(self) -> dict[str, Any]:
        """The cells as ``evaluation.transfer`` tables and plots them (``transfer.json``): the
        tiers in order and each cell under ``<trained>-><evaluated>``."""
        return {
            "cells": {
                f"{c.kind}->{c.eval_tier}": {
                    "trained_on": c.kind,
                    "evaluated_on": c.eval_tier,
                    "checkpoints": c.checkpoints,
                    **c.metrics,
                    "per_policy": [p.to_json() for p in c.policies],
                }
                for c in self.cells
            },
            "trained_on": list(dict.fromkeys(c.kind for c in self.cells)),
            "evaluated_on": list(dict.fromkeys(c.eval_tier for c in self.cells)),
        }


def _pool(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled rates of several evaluations (counts summed; Wilson intervals on the pooled counts)."""
    n = sum(int(m["episodes"]) for m in metrics)
    out: dict[str, Any] = {"episodes": n, "scenes": metrics[0].get("scenes"), "policies": len(metrics)}
    for k in CELL_KEYS:
        hits = sum(round(m[k] * m["episodes"]) for m in metrics)
        out[k] = hits / n if n else float("nan")
        out[f"{k}_ci95"] = list(wilson_interval(hits, n))
    return out


def _figures(m: dict[str, Any]) -> PolicyFigures:
    """One policy's figures from what ``jobs.drive.evaluate`` returned (its checkpoint records no
    training seed there: the seed-level tables number the policies in order)."""
    return PolicyFigures(
        checkpoint=str(m["checkpoint"]),
        trained_on=m.get("trained_on"),
        trained_seed=None,
        trained_iterations=m.get("trained_iterations"),
        wall_s=m.get("wall_s"),
        metrics={k: m[k] for k in ("episodes", *CELL_KEYS)},
    )


def evaluate_cell(job: EvalArgs) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``eval drive``'s job into a scratch folder (a job of the executor, perhaps on a Ray worker):
    its metrics and the files it wrote (``metrics.json``, ``metrics.md``, ``metrics.png``), for the
    driver to write into ``job.out``."""
    with tempfile.TemporaryDirectory(prefix="scenefactory-eval-") as tmp:
        metrics = evaluate(replace(job, out=Path(tmp)))
        files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    return metrics, files


def run(args: ExperimentArgs) -> ResultsFile[TransferResults]:
    """Run the experiment; writes the report folder and returns its results file."""
    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    given = args.checkpoints_by_kind(TIERS)
    ckpts = train_all({t: (given[t], partial(train_spec, EngineSpec(t), sizes)) for t in TIERS}, args, sizes)
    jobs: list[Job[tuple[dict[str, Any], dict[str, bytes]]]] = []
    for trained in TIERS:
        for engine in TIERS:
            cell_dir = args.out / f"{trained}_on_{engine}"
            for i, ckpt in enumerate(ckpts[trained]):
                out = cell_dir if len(ckpts[trained]) == 1 else cell_dir / f"policy_{i}"
                job = EvalArgs(
                    checkpoint=ckpt,
                    out=out,
                    engine=EngineSpec(engine),
                    episodes=sizes.episodes,
                    seed=args.seed,
                    worlds=sizes.eval_worlds,
                )
                jobs.append(
                    Job(f"evaluation of {trained} policy {i + 1} ({ckpt}) on {engine}", evaluate_cell, (job,))
                )

    def write(i: int, result: tuple[dict[str, Any], dict[str, bytes]]) -> None:
        for name, data in result[1].items():
            atomic_write_bytes(jobs[i].args[0].out / name, data)

    per_job = iter(args.executor().run(jobs, write))
    cells = []
    for trained in TIERS:
        for engine in TIERS:
            per = [next(per_job)[0] for _ in ckpts[trained]]
            cells.append(Cell(trained, engine, "", _pool(per), tuple(_figures(m) for m in per)))
    results = TransferResults(tuple(cells))
    matrix = results.matrix()
    write_json(args.out / "transfer.json", matrix)
    atomic_write_text(args.out / "transfer.md", transfer_table(matrix))
    plot = plot_transfer(matrix, args.out / "transfer.png")
    per_rows = [
        [c.kind, c.eval_tier, f"`{p.checkpoint}`"]
        + [f"{p.metrics[k]:.3f}" for k in CELL_KEYS]
        + [str(p.metrics["episodes"])]
        for c in cells
        for p in c.policies
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
        results,
        [plot],
        time.perf_counter() - t0,
        seed_compare=[(find_cell(cells, "mujoco", "kinematic"), find_cell(cells, "kinematic", "mujoco"))],
    )


EXPERIMENT = Experiment(
    NAME,
    "2x2 table: train kinematic/mujoco x evaluate kinematic/mujoco",
    TIERS,
    run,
    TransferResults.from_json,
)
