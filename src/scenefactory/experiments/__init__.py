"""Experiments that reproduce the headline results, one registry from name to runner.

``scenefactory experiment NAME --out DIR [--quick] [--seeds N] [--checkpoint KIND=PATH ...]`` runs
one and writes a report folder: ``report.md`` (the exact command, seeds, sizes and config, tables
with 95 % CIs), ``results.json`` (every number, atomically) and PNG plots. With ``--ray ADDRESS``
the trainings and evaluations run as tasks on that Ray cluster (:mod:`.ray_backend`).

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
- ``go1-navigation``: navigation policies trained in a point-mass simulator grounded with Go1
  rollouts (each grounding method), evaluated on the Go1 (``--budget``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError
from scenefactory.experiments import (
    friction_change,
    go1_navigation,
    grounding,
    log_grounding,
    matrix,
    transfer,
    wet_road,
)
from scenefactory.experiments.base import ExperimentArgs, Sizes
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile
from scenefactory.experiments.results import Reader, ResultsFieldError, check_version, read_json_file
from scenefactory.io import show_value

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        transfer.EXPERIMENT,
        friction_change.EXPERIMENT,
        wet_road.EXPERIMENT,
        log_grounding.EXPERIMENT,
        grounding.EXPERIMENT,
        matrix.EXPERIMENT,
        go1_navigation.EXPERIMENT,
    )
}
"""Experiment name → registry entry."""


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; ``UserError`` listing the known names if there is none."""
    if name not in EXPERIMENTS:
        raise UserError(f"unknown experiment '{name}': expected one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def run_experiment(name: str, args: ExperimentArgs) -> ResultsFile[Any]:
    """Run experiment ``name`` with ``args``; returns its ``results.json`` (typed)."""
    experiment = get_experiment(name)
    foreign = [flag for flag in args.options_set() if flag not in experiment.options]
    if foreign:
        takes = ", ".join(experiment.options) or "none of them"
        raise UserError(f"experiment {name} does not take {', '.join(foreign)} (it takes {takes})")
    args.out.mkdir(parents=True, exist_ok=True)
    args.executor()  # --ray: connect and check the cluster before any work
    return experiment.run(args)


def read_results(path: Path) -> ResultsFile[Any]:
    """The ``results.json`` at ``path`` in its typed form, read by the result class of the
    experiment it names; a bad file (not JSON, another version, an unknown experiment, a missing
    or mistyped field) is a ``UserError`` naming the file and the field."""

    def read(data: Any) -> ResultsFile[Any]:
        if not isinstance(data, Mapping):
            raise ResultsFieldError(f"expected a JSON object (an experiment report), got {show_value(data)}")
        doc = Reader(data, "")
        check_version(doc)
        name = doc.text("experiment")
        if name not in EXPERIMENTS:
            raise ResultsFieldError(
                f"field 'experiment': unknown experiment '{name}', expected one of {', '.join(EXPERIMENTS)}"
            )
        return ResultsFile.from_json(data, EXPERIMENTS[name].read_results)

    return read_json_file(path, read)


__all__ = [
    "EXPERIMENTS",
    "Experiment",
    "ExperimentArgs",
    "ResultsFile",
    "Sizes",
    "get_experiment",
    "read_results",
    "run_experiment",
]
