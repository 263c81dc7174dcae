"""Experiments that reproduce the headline results, one registry from name to runner.

``scenefactory experiment NAME --out DIR [--quick] [--seeds N] [--checkpoint KIND=PATH ...]`` runs
one and writes a report folder: ``report.md`` (the exact command, seeds, sizes and config, tables
with 95 % CIs), ``results.json`` (every number, atomically) and PNG plots.

- ``transfer``: policies trained on the kinematic and the mujoco tier, each evaluated on both.
- ``friction-change``: policies of both tiers on mujoco when the road turns dry → ice mid-episode.
- ``wet-road``: friction-aware vs friction-unaware policies on wet roads (peak DRAC, goal reach).
- ``log-grounding``: open-loop divergence of engines from held-out real driving logs; the hook
  where grounded (corrected) abstract engines plug in.
- ``grounding``: each grounding method's policies on mujoco with an actuator lag: the fraction of
  the direct-transfer → oracle gap each closes (``--action-lag-steps``, ``--budget``).
- ``matrix``: policies trained on kinematic, on each learned dynamics model of mujoco and on mujoco,
  each evaluated on mujoco and kinematic; each model's held-out error against the goal reach on
  mujoco of the policies trained in it (``--dynamics-model KIND=PATH``).
"""

from __future__ import annotations

from typing import Any

from scenefactory.errors import UserError
from scenefactory.experiments import friction_change, grounding, log_grounding, matrix, transfer, wet_road
from scenefactory.experiments.base import Experiment, ExperimentArgs, Sizes

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        transfer.EXPERIMENT,
        friction_change.EXPERIMENT,
        wet_road.EXPERIMENT,
        log_grounding.EXPERIMENT,
        grounding.EXPERIMENT,
        matrix.EXPERIMENT,
    )
}
"""Experiment name → registry entry."""


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; ``UserError`` listing the known names if there is none."""
    if name not in EXPERIMENTS:
        raise UserError(f"unknown experiment '{name}': expected one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def run_experiment(name: str, args: ExperimentArgs) -> dict[str, Any]:
    """Run experiment ``name`` with ``args``; returns its ``results.json`` document."""
    experiment = get_experiment(name)
    foreign = [flag for flag in args.options_set() if flag not in experiment.options]
    if foreign:
        takes = ", ".join(experiment.options) or "none of them"
        raise UserError(f"experiment {name} does not take {', '.join(foreign)} (it takes {takes})")
    args.out.mkdir(parents=True, exist_ok=True)
    return experiment.run(args)


__all__ = ["EXPERIMENTS", "Experiment", "ExperimentArgs", "Sizes", "get_experiment", "run_experiment"]
