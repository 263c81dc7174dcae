"""``friction-change``: the road turns from dry asphalt to ice in the middle of every episode.

The stress case of dynamics distillation (Sim2Sim2Sim): does a driving policy survive an abrupt
loss of grip? Policies trained on the kinematic tier (friction-blind) and on the mujoco tier
(articulated cars, friction-limited tyres) — given with ``--checkpoint kinematic=PATH`` /
``mujoco=PATH`` (repeatable, one per seed) or trained here with the demo's settings, one per seed —
are evaluated on the mujoco tier on the same held-out procedural scenes, every road set to dry
asphalt (μ 0.80), twice: without a change, and with the road turning to ice (μ 0.10) at
``CHANGE_AT_S`` into every episode (``DrivingTaskConfig.friction_change``; the friction
observation shows the new μ from that step on). Measured per tier and road: goal reach, collision,
off-road, time-out, mean peak DRAC and the high-DRAC rate, with 95 % CIs, and the change's effect
(with change − without) with its interval. ``exposed`` counts the agent-episodes still driving at
the change (the others ended before it and are identical in both conditions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.experiments.base import (
    ExperimentArgs,
    Sizes,
    evaluate_pooled,
    mean_difference,
    on_road,
    rate_difference,
    train_all,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile, plot_grouped_panels, write_report
from scenefactory.experiments.results import Cell, Contrast, Reader, find_cell
from scenefactory.experiments.tables import delta_label, fmt_diff, markdown_table, metrics_table
from scenefactory.scenes.friction import PRESETS
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, FrictionChange, task_config_to_dict

NAME = "friction-change"
TIERS = ("kinematic", "mujoco")
EVAL_ENGINE = "mujoco"
ROAD_BEFORE, ROAD_AFTER = "dry", "ice"
CHANGE_AT_S = 3.0
"""Seconds into the episode when the road turns to ice (most agents are still under way)."""
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=20, train_scenes=24, episodes=16, eval_worlds=16
)
KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate", "mean_peak_drac_mps2", "high_drac_rate")
NO_CHANGE, CHANGE = "dry (no change)", f"dry → ice at {CHANGE_AT_S:g} s"


@dataclass(frozen=True)
class FrictionChangeResults:
    """One cell per training tier and road (``NO_CHANGE``, ``CHANGE``), all on ``EVAL_ENGINE``
    (each cell's metrics add ``exposed``: its agent-episodes still driving at the change), and per
    tier the change's effect (with − without) per metric."""

    cells: tuple[Cell, ...]
    effects: tuple[Contrast, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {"cells": [c.to_json() for c in self.cells], "effects": [e.to_json() for e in self.effects]}

    @classmethod
    def from_json(cls, r: Reader) -> FrictionChangeResults:
        """Inverse of :meth:`to_json`."""
        return cls(r.objects("cells", Cell.from_json), r.objects("effects", Contrast.from_json))


def run(args: ExperimentArgs) -> ResultsFile[FrictionChangeResults]:
    """Run the experiment; writes the report folder and returns its results file."""
    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    given = args.checkpoints_by_kind(TIERS)
    ckpts = train_all({t: (given[t], partial(train_spec, EngineSpec(t), sizes)) for t in TIERS}, args, sizes)
    dry, ice = PRESETS[ROAD_BEFORE], PRESETS[ROAD_AFTER]
    cache: dict[int, list[Scene]] = {}

    def scenes_for(agents: int) -> list[Scene]:
        if agents not in cache:
            raw = procedural_scenes("eval", sizes.episodes, agents, base_seed=args.seed)
            cache[agents] = [on_road(sc, dry) for sc in raw]
        return cache[agents]

    change_steps: set[int] = set()

    def with_change(task: DrivingTaskConfig) -> DrivingTaskConfig:
        at_step = round(CHANGE_AT_S / task.dt_s)
        if at_step >= task.max_steps:
            raise UserError(
                f"a policy's episodes last {task.episode_length_s:g} s: the road change at "
                f"{CHANGE_AT_S:g} s would never come"
            )
        change_steps.add(at_step)
        return replace(task, friction_change=FrictionChange(at_step, ice.mu))

    engine = EngineSpec(EVAL_ENGINE)
    cells: list[Cell] = []
    effects: list[Contrast] = []
    for tier in TIERS:
        base = evaluate_pooled(
            ckpts[tier],
            scenes_for,
            engine,
            args.seed,
            sizes.eval_worlds,
            label=f"{tier}, {NO_CHANGE}",
            executor=args.executor(),
        )
        changed = evaluate_pooled(
            ckpts[tier],
            scenes_for,
            engine,
            args.seed,
            sizes.eval_worlds,
            with_change,
            f"{tier}, {CHANGE}",
            args.executor(),
        )
        at_step = min(change_steps)
        for cond, pooled in ((NO_CHANGE, base), (CHANGE, changed)):
            exposed = int((pooled.records.steps > at_step).sum())
            cells.append(
                Cell(tier, EVAL_ENGINE, cond, {**pooled.metrics, "exposed": exposed}, pooled.policies)
            )
        differences = {
            k: rate_difference(changed.metrics, base.metrics, k) for k in KEYS if k.endswith("_rate")
        }
        differences["mean_peak_drac_mps2"] = mean_difference(
            changed.records.peak_drac_mps2, base.records.peak_drac_mps2
        )
        effects.append(Contrast(tier, differences))

    rows = [([c.kind, c.condition], c.metrics) for c in cells]
    table = metrics_table(["trained on", f"evaluated on {EVAL_ENGINE}"], rows, KEYS)
    exposure = ", ".join(
        f"{c.kind} {c.metrics['exposed']}/{c.metrics['episodes']}" for c in cells if c.condition == CHANGE
    )
    effect_rows = [
        [e.subject, *(fmt_diff(e.differences[k], 2 if k.endswith("_mps2") else 3) for k in KEYS)]
        for e in effects
    ]
    effect_table = markdown_table(["trained on", *(delta_label(k) for k in KEYS)], effect_rows)
    plot = plot_grouped_panels(
        args.out / "friction_change.png",
        [f"trained on {t}" for t in TIERS],
        {
            cond: {f"trained on {t}": find_cell(cells, t, condition=cond).metrics for t in TIERS}
            for cond in (NO_CHANGE, CHANGE)
        },
        ("goal_reach_rate", "collision_rate", "offroad_rate", "mean_peak_drac_mps2"),
        f"{NAME} on {EVAL_ENGINE}: {ROAD_BEFORE} (μ {dry.mu:.2f}) vs → {ROAD_AFTER} (μ {ice.mu:.2f})",
    )
    intro = f"""
Policies trained on each tier drive the same {sizes.episodes} held-out procedural scenes on the
{EVAL_ENGINE} tier, every road dry asphalt (μ {dry.mu:.2f}), once unchanged and once with the road
turning to ice (μ {ice.mu:.2f}) {CHANGE_AT_S:g} s into every episode (the friction observation shows
the new value from then on). Agent-episodes still driving at the change: {exposure}.
"""
    sections = [
        "## Outcomes\n\n" + table,
        "## Effect of the change (with − without)\n\n" + effect_table,
    ]
    return write_report(
        args,
        NAME,
        "Abrupt friction change: dry asphalt → ice",
        intro,
        sections,
        sizes,
        {tier: training_seeds(given[tier], args, sizes) for tier in TIERS},
        {
            "evaluated_on": EVAL_ENGINE,
            "road_before": {"preset": ROAD_BEFORE, "mu": dry.mu},
            "road_after": {"preset": ROAD_AFTER, "mu": ice.mu},
            "change_at_s": CHANGE_AT_S,
            "checkpoints": {t: [str(p) for p in v] for t, v in ckpts.items()},
            "training_task_of_policies_trained_here": task_config_to_dict(
                train_spec(EngineSpec(), sizes, args.seed).task
            ),
        },
        FrictionChangeResults(tuple(cells), tuple(effects)),
        [plot],
        time.perf_counter() - t0,
        seed_compare=[
            (find_cell(cells, t, condition=CHANGE), find_cell(cells, t, condition=NO_CHANGE)) for t in TIERS
        ],
        seed_paired=True,
    )


EXPERIMENT = Experiment(
    NAME,
    "policies of both tiers on mujoco, road dry → ice mid-episode",
    TIERS,
    run,
    FrictionChangeResults.from_json,
)
