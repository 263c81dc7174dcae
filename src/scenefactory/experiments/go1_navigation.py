"""``go1-navigation``: navigation policies trained in a point-mass simulator, grounded with Go1
rollouts, evaluated on the Go1.

1. The target: the MuJoCo Go1 walking the shipped locomotion policy (``go1/policies``), which
   turns velocity commands into gait; the abstract engine: the unicycle of
   :mod:`~scenefactory.navigation.engine` stepping 0.2 s, its action the same command.
2. Go1 data: ``budget_minutes`` of robot time (plus the fits' 20 % held-out episodes) of smooth
   random commands in open space, recorded through φ (:func:`~scenefactory.navigation.go1_side.record_go1`).
3. Per training seed, every grounding method (none, dr, sysid, markov, gat, history) is fitted on
   the first ``budget_minutes`` of training episodes in a seeded order
   (:func:`~scenefactory.navigation.fit.fit`), and one navigation policy is trained in the grounded
   abstract simulator by the cross-entropy method on all tasks at once
   (:func:`~scenefactory.navigation.policy.train_cem`).
4. The curve over the data budget: the methods that use data, refitted and retrained on
   ``curve_minutes`` of robot time (same seeds).
5. Every policy drives ``episodes`` episodes of every task on the Go1 (walls as MuJoCo geoms;
   start heading ± 0.2 rad) and as many in its own abstract simulator. Reported per method: Go1
   success rate (pooled episodes, Wilson 95 %; and the mean of the seeds' rates with a Student-t
   95 % interval), time to goal over the successful episodes (normal 95 %), collisions and falls,
   per task; the model's held-out open-loop error on Go1 transitions; and whether ``history`` beats
   ``none`` (direct transfer): the difference of success rates with both intervals.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
from rich.console import Console

from scenefactory.dynamics.correctors import Method
from scenefactory.errors import UserError
from scenefactory.experiments.base import ExperimentArgs
from scenefactory.experiments.go1_navigation_report import summarize, write_nav_report
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile
from scenefactory.experiments.results import Cell, Reader
from scenefactory.go1.jobs import SHIPPED_POLICY
from scenefactory.go1.train import load_go1_policy
from scenefactory.navigation.fit import NavFitConfig, fit, histories, minutes_of, transitions_of
from scenefactory.navigation.go1_side import NAV_DT_S, evaluate_go1, limits_of, record_go1
from scenefactory.navigation.policy import PARAM_NAMES, CEMConfig, Outcomes, train_cem
from scenefactory.navigation.sim import rollout_abstract
from scenefactory.navigation.tasks import TASKS, NavTask, TaskBatch

NAME = "go1-navigation"
console = Console(stderr=True)
DATA_METHODS = (Method.SYSID, Method.MARKOV, Method.GAT, Method.HISTORY)


@dataclass(frozen=True)
class NavSizes:
    """How big a run is (module docstring for the roles)."""

    seeds: int = 3
    budget_minutes: float = 6.0
    curve_minutes: tuple[float, ...] = (1.5,)
    record_worlds: int = 16
    record_episode_s: float = 20.0
    episodes: int = 6
    tasks: tuple[str, ...] = tuple(TASKS)
    cem: CEMConfig = field(default_factory=CEMConfig)
    train_steps: int = 1000
    sysid_iterations: int = 100
    sysid_horizon: int = 10

    def __post_init__(self) -> None:
        """Positive sizes, known tasks, curve budgets below the main one."""
        if self.seeds < 1 or self.episodes < 1 or self.record_worlds < 1 or not self.budget_minutes > 0:
            raise UserError(f"go1-navigation sizes must be positive, got {self}")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            raise UserError(f"unknown navigation tasks {unknown}: expected some of {', '.join(TASKS)}")
        if any(not 0 < m < self.budget_minutes for m in self.curve_minutes):
            raise UserError(
                f"curve budgets must lie in (0, {self.budget_minutes}) min, got {self.curve_minutes}"
            )


FULL = NavSizes()
QUICK = NavSizes(
    seeds=1,
    budget_minutes=0.8,
    curve_minutes=(0.4,),
    record_worlds=8,
    record_episode_s=8.0,
    episodes=1,
    tasks=("open", "u_maze"),
    cem=CEMConfig(iterations=2, population=6, elites=2, episodes=1),
    train_steps=60,
    sysid_iterations=10,
    sysid_horizon=5,
)


@dataclass(frozen=True)
class Go1NavigationResults:
    """The experiment's figures (:mod:`.go1_navigation_report` lays them out): ``data`` (the Go1
    recording), ``policies`` (one per method, budget and seed: parameters, fit metrics, outcomes on
    the Go1 and in its own simulator), ``summary`` (per method and budget) and ``comparison``
    (history vs none)."""

    figures: dict[str, Any]

    @property
    def cells(self) -> tuple[Cell, ...]:
        """No driving cells: the seed-level statistics are in ``summary``."""
        return ()

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return dict(self.figures)

    @classmethod
    def from_json(cls, r: Reader) -> Go1NavigationResults:
        """Read back (the sections must be there)."""
        for key in ("data", "policies", "summary", "comparison"):
            r.raw(key)
        r.array("policies")
        return cls(dict(r.data))


def _outcome_json(o: Outcomes, batch: TaskBatch) -> dict[str, list[Any]]:
    names = [batch.names[i] for i in batch.task_index.tolist()]
    t = [None if math.isnan(v) else round(v, 3) for v in o.time_s.tolist()]
    return {
        "task": names,
        "success": o.success.tolist(),
        "time_s": t,
        "collided": o.collided.tolist(),
        "fell": o.fell.tolist(),
        "progress": [round(v, 4) for v in o.progress.tolist()],
    }


def _go1_outcomes(
    policy: Any, tasks: list[NavTask], thetas: torch.Tensor, episodes: int, seed: int
) -> list[dict[str, list[Any]]]:
    """Per policy row of ``thetas``, its outcomes on every task of the Go1 (tasks one after the other)."""
    per: list[dict[str, list[Any]]] = [
        {k: [] for k in ("task", "success", "time_s", "collided", "fell", "progress")}
        for _ in range(len(thetas))
    ]
    for task in tasks:
        t0 = time.perf_counter()
        o = evaluate_go1(policy, task, thetas, episodes, seed)
        batch = TaskBatch.of([task] * len(thetas), episodes)
        js = _outcome_json(o, batch)
        for i in range(len(thetas)):
            for k, v in js.items():
                per[i][k].extend(v[i * episodes : (i + 1) * episodes])
        console.print(
            f"[go1-navigation] Go1 {task.name}: {len(thetas)} policies x {episodes} episodes "
            f"in {time.perf_counter() - t0:.0f} s"
        )
    return per


def run(args: ExperimentArgs) -> ResultsFile[Go1NavigationResults]:
    """Run the experiment into ``args.out`` (module docstring) on one torch thread: the tensors are
    small, and a second torch thread beside MuJoCo's only contends for the cores (on a loaded
    2-core machine the history fit took 147 s on two threads against 11 s on one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)


def _run(args: ExperimentArgs) -> ResultsFile[Go1NavigationResults]:
    t_start = time.perf_counter()
    sizes = QUICK if args.quick else FULL
    if args.seeds is not None:
        sizes = replace(sizes, seeds=args.seeds)
    if args.episodes is not None:
        sizes = replace(sizes, episodes=args.episodes)
    if args.budget is not None:
        sizes = replace(sizes, budget_minutes=minutes_of(args.budget, NAV_DT_S), curve_minutes=())
    torch.manual_seed(args.seed)
    policy = load_go1_policy(SHIPPED_POLICY)
    limits = limits_of(policy)
    tasks = [TASKS[t] for t in sizes.tasks]
    base = NavFitConfig(
        train_steps=sizes.train_steps,
        sysid_iterations=sizes.sysid_iterations,
        sysid_horizon=sizes.sysid_horizon,
    )
    record_min = sizes.budget_minutes / (1.0 - base.holdout_frac) * 1.1
    t0 = time.perf_counter()
    rec = record_go1(policy, record_min, args.seed, sizes.record_worlds, sizes.record_episode_s)
    console.print(
        f"[go1-navigation] recorded {rec.minutes:.1f} min of Go1 robot time "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    np.savez_compressed(args.out / "go1_transitions.npz", **rec.data)  # type: ignore[arg-type]
    h = histories(rec.data, base)
    budgets = [(sizes.budget_minutes, list(Method))] + [(m, list(DATA_METHODS)) for m in sizes.curve_minutes]
    seeds = [args.seed + i for i in range(sizes.seeds)]
    rows: list[dict[str, Any]] = []
    thetas = []
    for minutes, methods in budgets:
        for seed in seeds:
            for method in methods:
                t0 = time.perf_counter()
                cfg = replace(base, method=method, seed=seed, budget=transitions_of(minutes, NAV_DT_S))
                fitted = fit(h, NAV_DT_S, limits, cfg)
                t_fit = time.perf_counter() - t0
                model = fitted.model

                def rollout(
                    b: TaskBatch, th: torch.Tensor, g: torch.Generator, model: Any = model
                ) -> Outcomes:
                    return rollout_abstract(model, limits, b, th, g)

                theta, curve = train_cem(rollout, tasks, sizes.cem, seed)
                batch = TaskBatch.of(tasks, sizes.episodes)
                own = rollout(
                    batch, theta.expand(batch.size, -1), torch.Generator().manual_seed(args.seed + 1000)
                )
                rows.append(
                    {
                        "method": method.value,
                        "budget_minutes": minutes if method in DATA_METHODS else 0.0,
                        "budget_transitions": fitted.budget_transitions,
                        "seed": seed,
                        "theta": dict(zip(PARAM_NAMES, [round(v, 4) for v in theta.tolist()], strict=True)),
                        "cem_curve": [round(v, 4) for v in curve],
                        "fit": fitted.info,
                        "fit_s": round(t_fit, 1),
                        "train_s": round(time.perf_counter() - t0 - t_fit, 1),
                        "abstract": _outcome_json(own, batch),
                    }
                )
                thetas.append(theta)
                ho = fitted.info["heldout"]["grounded"]
                console.print(
                    f"[go1-navigation] {method.value} {minutes:g} min seed {seed}: held-out 10-step error "
                    f"{ho['rollout10_pos_err_m']:.3f} m, abstract success {own.success.float().mean():.2f} "
                    f"({t_fit:.0f} s fit, {rows[-1]['train_s']:.0f} s CEM)"
                )
    go1 = _go1_outcomes(policy, tasks, torch.stack(thetas), sizes.episodes, args.seed)
    for row, out in zip(rows, go1, strict=True):
        row["go1"] = out
    summary, comparison = summarize(rows, sizes.budget_minutes, [t.name for t in tasks])
    figures = {
        "data": {
            "minutes": rec.minutes,
            "transitions": len(rec.data["step"]),
            "falls": rec.falls,
            "heldout_frac": base.holdout_frac,
            "nav_dt_s": NAV_DT_S,
            "file": "go1_transitions.npz",
        },
        "policies": rows,
        "summary": summary,
        "comparison": comparison,
    }
    config = {
        "sizes": asdict(sizes),
        "fit": {k: v for k, v in asdict(base).items() if k not in ("method", "seed", "budget")},
        "locomotion_policy": str(SHIPPED_POLICY.name),
        "command_limits": asdict(limits),
        "tasks": {t.name: asdict(t) for t in tasks},
    }
    return write_nav_report(
        args, NAME, Go1NavigationResults(figures), config, seeds, time.perf_counter() - t_start
    )


EXPERIMENT = Experiment(
    NAME,
    "navigation policies trained in a grounded point-mass simulator, evaluated on the Go1 "
    "(--budget: transitions of 0.2 s)",
    (),
    run,
    Go1NavigationResults.from_json,
    options=("--budget",),
)
