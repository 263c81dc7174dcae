"""``log-grounding``: how far does an engine drift from real driving when it replays logged actions?

The data path and the measurement of grounding on real logs: every grounding method of
:data:`CORRECTIONS` is fitted on the training logs and replayed like the engines.

1. The converted scenes of ``--scenes DIR`` (WOMD, ``scenefactory convert``) that carry driving
   logs are split by scene with a seeded permutation: :data:`HOLDOUT_FRAC` held out, the rest
   for fitting. Both parts are written as transition datasets (``train_transitions/``,
   ``heldout_transitions/``; :mod:`scenefactory.grounding.log_dataset`).
2. Every engine under test replays the held-out logs open loop (:func:`log_divergence`): each
   logged agent starts at its logged spawn state and receives, step after step, the actions the
   kinematic tier's inverse infers from its log; the divergence at step t is the distance between
   the simulated and the logged position. An agent counts while its log is unbroken from the spawn
   (the first unobserved step ends it) and until it hits another car (on engines with a contact
   model: from there on it no longer follows its log).
3. Reported per engine: mean divergence over the replay (ADE) and the divergence at
   :data:`HORIZONS_S` (FDE), with 95 % CIs over agents, and the divergence curve over time.
4. The human baseline on the reference engines (:func:`logged_drivers`; the tiers policies are
   scored on): the held-out scenes' logged drivers closed loop
   (:mod:`scenefactory.evaluation.human`) — goal reach, collision, off-road, time-out, near miss,
   TTC, DRAC (and any rate the metrics add, e.g. red-light violations) — and which logged objects
   were controlled, replayed and left out, and why.

The engines: the uncorrected kinematic tier (the abstract simulator to be grounded) and the
mujoco tier (for reference), then one row per correction in ``CORRECTIONS`` — a function from the
training transitions to an :data:`EngineMaker`: each grounding method (``dr``, ``sysid``,
``markov``, ``gat``, ``history``) fitted by :func:`~scenefactory.grounding.ground.ground` on all
the training transitions and run as the grounded engine (:func:`grounding_correction`; smaller
fits with ``--quick``). Its row against the uncorrected kinematic one is the divergence before and
after the correction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.dynamics.correctors import Method
from scenefactory.engines import make_engine
from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.evaluation.human import agent_counts, describe_counts, human_baseline, replay_beyond
from scenefactory.experiments.base import ExperimentArgs, console
from scenefactory.experiments.divergence import (
    HORIZONS_S,
    MAX_AGENTS,
    Divergence,
    EngineMaker,
    log_divergence,
    plot_curves,
)
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile, write_report
from scenefactory.experiments.results import Cell, Metrics, Reader
from scenefactory.experiments.tables import markdown_table, metrics_table
from scenefactory.grounding.ground import GroundConfig, ground
from scenefactory.grounding.log_dataset import write_log_dataset
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.vehicles.params import VehicleParams

NAME = "log-grounding"
HOLDOUT_FRAC = 0.5
QUICK_MAX_SCENES = 40

Correction = Callable[[Path, VehicleParams, float], EngineMaker]
"""``(training transitions folder, vehicle, dt [s]) → EngineMaker``: a grounding method fitted on
the logged transitions of the training scenes."""


def grounding_correction(cfg: GroundConfig) -> Correction:
    """The correction of ``cfg.method``: :func:`~scenefactory.grounding.ground.ground` fits it on
    the training transitions (at most ``cfg.budget`` of them, ``None``: all but the fit's held-out
    episodes) into ``<transitions folder>/../groundings/<method>/``, and every engine it makes is a
    :func:`~scenefactory.engines.history.grounded_engine` running that artifact (CPU)."""

    def correct(data: Path, params: VehicleParams, dt: float) -> EngineMaker:
        t0 = time.perf_counter()
        res = ground(data, cfg, data.parent / "groundings" / cfg.method.value)
        console.print(
            f"  grounding {cfg.method.value}: fitted on {res.config['budget_transitions']} logged "
            f"transitions ({time.perf_counter() - t0:.0f} s)"
        )

        def make(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
            return make_engine(
                EngineSpec("grounded", grounding=res.out_dir), worlds, agents, dt=dt, params=params
            )

        return make

    return correct


CORRECTED = tuple(m for m in Method if m is not Method.NONE)
"""The methods compared (``none`` is the uncorrected kinematic row already)."""
CORRECTIONS: dict[str, Correction] = {
    m.value: grounding_correction(GroundConfig(method=m)) for m in CORRECTED
}
"""Grounding methods compared by this experiment (name → correction), with ``scenefactory
ground``'s default settings and every training transition."""
QUICK_CORRECTIONS: dict[str, Correction] = {
    m.value: grounding_correction(
        GroundConfig(method=m, train_steps=200, sysid_iterations=20, gat_sim_transitions=2000)
    )
    for m in CORRECTED
}
"""The same with smaller fits (``--quick``)."""


def _kinematic(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
    return make_engine(EngineSpec("kinematic"), worlds, agents, dt=dt, params=params)


def _mujoco(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
    return make_engine(EngineSpec("mujoco"), worlds, agents, dt=dt, params=params)


REFERENCE_ENGINES: dict[str, EngineMaker] = {
    "kinematic (uncorrected)": _kinematic,
    "mujoco (physics tier)": _mujoco,
}


HUMAN_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "red_light_violation_rate",
    "timeout_rate",
    "near_miss_rate",
    "min_ttc_s",
    "mean_peak_drac_mps2",
    "log_divergence_m",
)
"""Figures of the human-baseline table (those the metrics lack are left out)."""
HUMAN_WORLDS = 32
"""Worlds run at once for the human baseline."""


def logged_drivers(
    engines: Mapping[str, EngineMaker], scenes: Sequence[Scene], params: VehicleParams, dt: float, seed: int
) -> dict[str, Any]:
    """The human baseline on every engine: ``{"engines": {name: metrics}, "agents": counts}`` of the
    scenes' logged drivers closed loop (``evaluation.human``), K = the most agents any scene
    controls (at most :data:`MAX_AGENTS`; the others replay their logs)."""
    k = max(1, min(MAX_AGENTS, max(sc.num_agents for sc in scenes)))
    fitted = [replay_beyond(sc, k) for sc in scenes]
    w = min(HUMAN_WORLDS, len(fitted))
    task = replace(DrivingTaskConfig(num_worlds=w, agents_per_world=k), dt_s=dt)
    out = {
        name: human_baseline(task, fitted, make(w, k, dt, params), w, seed) for name, make in engines.items()
    }
    return {"engines": out, "agents": agent_counts(scenes, k)}


def split_scenes(scenes: Sequence[Scene], holdout_frac: float, seed: int) -> tuple[list[Scene], list[Scene]]:
    """``(train, held_out)``: a seeded permutation holds out ``round(frac · n)`` scenes (≥ 1, and
    at least one is left to train on)."""
    n = len(scenes)
    k = min(max(1, round(holdout_frac * n)), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:k].tolist())
    return [s for i, s in enumerate(scenes) if i not in held], [s for i, s in enumerate(scenes) if i in held]


@dataclass(frozen=True)
class LogGroundingResults:
    """Each engine's open-loop replay of the held-out logs (``engines``, by the engine's name in the
    report: ``kinematic (uncorrected)``, ``kinematic + history``, ...), the logged drivers' metrics
    closed loop on each reference engine (``human_baseline``, by name) and which logged objects
    they controlled, replayed and left out (``agents``, as ``evaluation.human.agent_counts`` counts
    them). No policy is evaluated: there are no cells."""

    engines: Mapping[str, Divergence]
    human_baseline: Mapping[str, Metrics]
    agents: Mapping[str, Any]

    @property
    def cells(self) -> tuple[Cell, ...]:
        """None: this experiment evaluates no policies."""
        return ()

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name (``engines`` and ``human_baseline`` by engine name)."""
        return {
            "engines": {n: d.to_json() for n, d in self.engines.items()},
            "human_baseline": {n: dict(m) for n, m in self.human_baseline.items()},
            "agents": dict(self.agents),
        }

    @classmethod
    def from_json(cls, r: Reader) -> LogGroundingResults:
        """Inverse of :meth:`to_json`."""
        humans = r.obj("human_baseline")
        return cls(
            r.by_name("engines", Divergence.from_json),
            {n: humans.document(n) for n in humans.data},
            r.document("agents"),
        )


def run(
    args: ExperimentArgs, corrections: Mapping[str, Correction] | None = None
) -> ResultsFile[LogGroundingResults]:
    """Run the experiment; writes the report folder and returns its results file."""
    t0 = time.perf_counter()
    if corrections is None:
        corrections = QUICK_CORRECTIONS if args.quick else CORRECTIONS
    if args.scenes_dir is None:
        raise UserError(f"experiment {NAME} needs --scenes DIR (scene JSON converted from driving logs)")
    args.checkpoints_by_kind(())  # takes no checkpoints: refuse any
    scenes = [sc for sc in load_scene_dir(args.scenes_dir) if sc.log is not None]
    if args.quick:
        scenes = scenes[:QUICK_MAX_SCENES]
    if len(scenes) < 2:
        raise UserError(
            f"experiment {NAME} needs at least 2 scenes with driving logs in {args.scenes_dir}, "
            f"found {len(scenes)}"
        )
    train, held = split_scenes(scenes, HOLDOUT_FRAC, args.seed)
    if args.episodes is not None:
        held = held[: args.episodes]
    params = VehicleParams()
    dt = float(scenes[0].log.dt_s) if scenes[0].log is not None else 0.1
    source = str(args.scenes_dir)
    train_dir, held_dir = args.out / "train_transitions", args.out / "heldout_transitions"
    train_meta = write_log_dataset(train, train_dir, source=source, params=params)
    held_meta = write_log_dataset(held, held_dir, source=source, params=params)
    engines: dict[str, EngineMaker] = dict(REFERENCE_ENGINES)
    for name, correct in corrections.items():
        engines[f"kinematic + {name}"] = correct(train_dir, params, dt)
    results: dict[str, Divergence] = {}
    for name, make in engines.items():
        t1 = time.perf_counter()
        results[name] = log_divergence(make, held, params, dt)
        console.print(
            f"  {name}: ADE {results[name].ade_m:.3f} m over {results[name].agents} logged agents "
            f"({time.perf_counter() - t1:.0f} s)"
        )
    t1 = time.perf_counter()
    humans = logged_drivers(REFERENCE_ENGINES, held, params, dt, args.seed)
    console.print(
        "  logged drivers: goal "
        + ", ".join(f"{n} {m['goal_reach_rate']:.3f}" for n, m in humans["engines"].items())
        + f" ({time.perf_counter() - t1:.0f} s)"
    )

    def cell(v: float, ci95: tuple[float, float]) -> str:
        lo, hi = ci95
        return "n/a" if not math.isfinite(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    table = markdown_table(
        [
            "engine",
            "ADE (m)",
            *(f"at {h:g} s (m)" for h in HORIZONS_S),
            "agents counted / logged",
            "hit a car",
        ],
        [
            [
                n,
                cell(r.ade_m, r.ade_m_ci95),
                *(cell(r.at(h).mean_m, r.at(h).ci95) for h in HORIZONS_S),
                f"{r.agents} / {r.logged_agents}",
                str(r.ended_by_contact),
            ]
            for n, r in results.items()
        ],
    )
    plot = plot_curves(
        results, args.out / "log_divergence.png", f"{NAME}: open-loop replay of {len(held)} held-out logs"
    )
    pending = (
        (
            f"\nEach correction ({', '.join(corrections)}) is a grounding method fitted on the training "
            "transitions (`scenefactory ground`, folders in `groundings/`) and run as the grounded engine: "
            "compare its row (after) with the uncorrected kinematic row (before).\n"
        )
        if corrections
        else "\nNo correction: the rows are the uncorrected kinematic tier and the mujoco tier.\n"
    )
    human_keys = [k for k in HUMAN_KEYS if any(k in m for m in humans["engines"].values())]
    human_table = metrics_table(["engine"], [([n], m) for n, m in humans["engines"].items()], human_keys)
    human_section = (
        "## Logged drivers on the reference engines (human baseline, held-out scenes)\n\n"
        "The held-out scenes' own drivers, closed loop: each step the action that takes the car "
        "from its current state onto its log. On real logs they should reach ≥ 0.97 of their goals "
        "with ≤ 0.01 collision and off-road on every engine; a shortfall is the simulator's, not a "
        f"policy's.\n\n{human_table}\nAgents: {describe_counts(humans['agents'])}.\n"
    )
    intro = f"""
{len(scenes)} converted scenes with driving logs from `{source}`, split by scene (seed {args.seed}):
{len(train)} for fitting ({train_meta["transitions"]} logged transitions in `train_transitions/`),
{len(held)} held out ({held_meta["transitions"]} in `heldout_transitions/`). Each engine replays the
held-out logs open loop with the actions the kinematic inverse infers from them; the divergence is
the distance between the simulated and the logged position (while the log is unbroken).
{pending}"""
    return write_report(
        args,
        NAME,
        "Log grounding: divergence from real driving logs",
        intro,
        ["## Divergence from the logs (held-out scenes)\n\n" + table, human_section],
        None,
        {"split": f"seed {args.seed}, {HOLDOUT_FRAC:g} held out", "training": "none (no policy is trained)"},
        {
            "scenes_dir": source,
            "holdout_frac": HOLDOUT_FRAC,
            "horizons_s": list(HORIZONS_S),
            "dt_s": dt,
            "train_scenes": [s.name for s in train],
            "heldout_scenes": [s.name for s in held],
            "engines": list(engines),
            "corrections": list(corrections),
        },
        LogGroundingResults(results, humans["engines"], humans["agents"]),
        [plot],
        time.perf_counter() - t0,
    )


EXPERIMENT = Experiment(
    NAME,
    "open-loop divergence of engines from held-out driving logs (needs --scenes)",
    (),
    run,
    LogGroundingResults.from_json,
)
