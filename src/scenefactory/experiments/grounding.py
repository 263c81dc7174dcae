"""``grounding``: how much of the kinematic → physics gap each grounding method closes.

The target is the mujoco tier under conditions the kinematic tier does not model: the procedural
scenes' own road conditions (40 % of them wet or in heavy rain: friction-limited tyres) and an
actuator lag of :data:`~scenefactory.experiments.stages.DEFAULT_LAG_STEPS` policy steps
(``--action-lag-steps``; every action reaches the car that many steps late,
:class:`~scenefactory.engines.wrappers.LaggedEngine`).

1. ``none``: policies trained on the plain kinematic tier (direct transfer), one per seed.
2. Target data: the first ``none`` policy drives the target (``grounding.dataset.collect``: the
   policy, the policy with action noise and smooth random driving, water films 0–5 mm drawn per
   reset on training scenes) for enough steps to leave the transition budget after the fit's
   20 % held-out episodes.
3. Every grounding method (:class:`~scenefactory.dynamics.correctors.Method`) is fitted once on
   that data (:func:`~scenefactory.grounding.ground.ground`, at most ``budget`` target
   transitions; ``dr`` uses none), into ``out/groundings/<method>/``.
4. One policy per method per seed is trained on its grounded engine (the kinematic bicycle plus
   the correction), and ``oracle`` policies on the target itself.
5. Every policy drives the same held-out procedural scenes on the target. Reported per kind: goal
   reach, collision, off-road with Wilson 95 % CIs, the target transitions used, the grounding's
   held-out prediction errors, and the fraction of the goal-reach gap closed,
   (kind − none) / (oracle − none), with a scene-paired bootstrap 95 % interval
   (:mod:`~scenefactory.experiments.gap`); the history-conditioned method is compared with each
   other one on the same scale.
6. The same policies also drive those scenes on the mujoco tier without the lag and on the
   kinematic tier (:data:`OTHER_TIERS`): the cross-simulator matrix's columns for the grounded
   engines' policies.

Any kind can be given instead of trained: ``--checkpoint KIND=PATH`` (repeatable); a method whose
policies are all given is not fitted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scenefactory.checkpoint import load_checkpoint
from scenefactory.dynamics.correctors import Method
from scenefactory.engines.spec import EngineSpec
from scenefactory.experiments.base import (
    ExperimentArgs,
    Pooled,
    Sizes,
    evaluate_pooled,
    policies,
    rate_difference,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.gap import (
    DRAWS,
    OUTCOMES,
    GapClosed,
    find_gap,
    gap_closed,
    gap_difference,
    scene_counts,
)
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile, plot_grouped_panels, plot_intervals, write_report
from scenefactory.experiments.results import (
    Cell,
    Contrast,
    Reader,
    find_cell,
)
from scenefactory.experiments.stages import (
    COLLECT_MARGIN,
    HOLDOUT_FRAC,
    TARGET_TIER,
    Collection,
    GroundingFit,
    GroundingSettings,
    collect_target,
    fit_groundings,
    held_out_scenes,
)
from scenefactory.experiments.tables import fmt_ci, fmt_diff, markdown_table
from scenefactory.rl.driving_spec import TrainSpec

NAME = "grounding"
ENGINE = TARGET_TIER
BASE, ORACLE, HIGHLIGHT = "none", "oracle", Method.HISTORY.value
METHODS = tuple(m.value for m in Method)
KINDS = (*METHODS, ORACLE)
KEYS = tuple(OUTCOMES)
OTHER_TIERS = ("mujoco", "kinematic")
"""Engines every policy is also evaluated on, without the target's lag."""
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=15, train_scenes=24, episodes=12, eval_worlds=12
)
FULL_SETTINGS = GroundingSettings()
QUICK_SETTINGS = GroundingSettings(
    budget=2000, collect_worlds=8, fit_steps=200, sysid_iterations=20, gat_sim_transitions=2000
)


@dataclass(frozen=True)
class GroundingKind:
    """What the policies of ``kind`` were trained on (``kinematic + dr``, ``mujoco + lag 3``) and
    how many target transitions that engine was built from (the oracle: its PPO experience on the
    target; ``None``: the policies were given as checkpoints)."""

    kind: str
    trained_on: str
    target_transitions: int | None

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name."""
        return {
            "kind": self.kind,
            "trained_on": self.trained_on,
            "target_transitions": self.target_transitions,
        }

    @classmethod
    def from_json(cls, r: Reader) -> GroundingKind:
        """Inverse of :meth:`to_json`."""
        return cls(r.text("kind"), r.text("trained_on"), r.opt_integer("target_transitions"))


@dataclass(frozen=True)
class GroundingResults:
    """Every policy kind on the target (``cells``: tier :data:`ENGINE`, condition ``lag N``), what
    each kind was trained on (``kinds``), every kind on each of :data:`OTHER_TIERS` without the lag
    (``other_tiers``), the gap each kind closes per outcome (``gap_closed``), the history-conditioned
    method against each other kind (``history_vs``: differences ``goal_reach_rate`` (Wald) and
    ``gap_closed`` (bootstrap)), the fits by method (``groundings``) and the target data
    (``target_data``; ``None`` when every method's policies were given)."""

    cells: tuple[Cell, ...]
    kinds: tuple[GroundingKind, ...]
    other_tiers: tuple[Cell, ...]
    gap_closed: tuple[GapClosed, ...]
    history_vs: tuple[Contrast, ...]
    groundings: Mapping[str, GroundingFit]
    target_data: Collection | None

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name, lists of objects (``groundings`` by method)."""
        return {
            "cells": [c.to_json() for c in self.cells],
            "kinds": [k.to_json() for k in self.kinds],
            "other_tiers": [c.to_json() for c in self.other_tiers],
            "gap_closed": [g.to_json() for g in self.gap_closed],
            "history_vs": [c.to_json() for c in self.history_vs],
            "groundings": {m: f.to_json() for m, f in self.groundings.items()},
            "target_data": None if self.target_data is None else self.target_data.to_json(),
        }

    @classmethod
    def from_json(cls, r: Reader) -> GroundingResults:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.objects("cells", Cell.from_json),
            r.objects("kinds", GroundingKind.from_json),
            r.objects("other_tiers", Cell.from_json),
            r.objects("gap_closed", GapClosed.from_json),
            r.objects("history_vs", Contrast.from_json),
            r.by_name("groundings", GroundingFit.from_json),
            None if r.raw("target_data") is None else Collection.from_json(r.obj("target_data")),
        )

    def kind(self, name: str) -> GroundingKind:
        """What the policies of kind ``name`` were trained on."""
        return next(k for k in self.kinds if k.kind == name)


def _error_cell(kind: str, fits: Mapping[str, GroundingFit], key: str) -> str:
    """The grounded model's held-out error; for ``none`` the plain bicycle's on the same episodes."""
    if kind == BASE and fits:
        v = next(iter(fits.values())).heldout["kinematic_bicycle"][key]
    elif kind in fits:
        v = fits[kind].heldout["grounded"][key]
    else:
        return "—"
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"


def _label(kind: str) -> str:
    return f"**{kind}**" if kind == HIGHLIGHT else kind


def _tables(results: GroundingResults) -> list[str]:
    rows = []
    for c in results.cells:
        g = find_gap(results.gap_closed, c.kind)
        gap = "n/a" if not math.isfinite(g.gap_closed) else fmt_ci(g.figures, "gap_closed", 2)
        k = results.kind(c.kind)
        used = "given checkpoints" if k.target_transitions is None else str(k.target_transitions)
        rows.append(
            [
                _label(c.kind),
                k.trained_on,
                used,
                _error_cell(c.kind, results.groundings, "pos_err_m"),
                _error_cell(c.kind, results.groundings, "rollout10_pos_err_m"),
                *(fmt_ci(c.metrics, key) for key in KEYS),
                str(c.metrics["episodes"]),
                gap,
            ]
        )
    header = [
        "policy",
        "trained on",
        "target transitions",
        "1-step error (m)",
        "10-step error (m)",
        "goal reach",
        "collision",
        "off-road",
        "agent-episodes",
        "gap closed (goal reach)",
    ]
    main = markdown_table(header, rows)
    versus = markdown_table(
        [f"{HIGHLIGHT} vs", "Δ goal reach (Wald)", "Δ gap closed (bootstrap)"],
        [
            [v.subject, fmt_diff(v.differences["goal_reach_rate"]), fmt_diff(v.differences["gap_closed"], 2)]
            for v in results.history_vs
        ],
    )
    return [
        "## Every policy on the target\n\n" + main,
        f"## The history-conditioned correction against the rest\n\n{versus}",
    ]


def _tier_table(results: GroundingResults, target: str) -> str:
    """Every policy's goal reach on the target and on each other tier, with collisions and off-road."""
    header = ["policy", "trained on", f"goal reach on {target}"]
    for tier in OTHER_TIERS:
        header += [f"goal reach on {tier}", "collision", "off-road"]
    rows = []
    for c in results.cells:
        row = [_label(c.kind), results.kind(c.kind).trained_on, fmt_ci(c.metrics, "goal_reach_rate")]
        for tier in OTHER_TIERS:
            other = find_cell(results.other_tiers, c.kind, tier)
            row += [fmt_ci(other.metrics, k) for k in KEYS]
        rows.append(row)
    return (
        "## Every policy on each tier\n\nThe same held-out scenes; the other tiers without the "
        "target's lag.\n\n" + markdown_table(header, rows)
    )


def run(args: ExperimentArgs, settings: GroundingSettings | None = None) -> ResultsFile[GroundingResults]:
    """Run the experiment; writes the report folder and returns its results file. ``settings``
    replaces the quick/full presets (tests); the flags still apply."""
    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    base_settings = settings or (QUICK_SETTINGS if args.quick else FULL_SETTINGS)
    st = base_settings.with_flags(args)
    given = args.checkpoints_by_kind(KINDS)
    lag = st.action_lag_steps
    ckpts: dict[str, list[Path]] = {}
    train_wall: dict[str, float] = {}

    def train(kind: str, make: Callable[[int], TrainSpec]) -> None:
        t1 = time.perf_counter()
        ckpts[kind] = policies(kind, given[kind], make, args, sizes)
        train_wall[kind] = time.perf_counter() - t1

    def grounded(method: str) -> Callable[[int], TrainSpec]:
        def make(seed: int) -> TrainSpec:  # called only for a method fitted here (not given)
            return train_spec(EngineSpec("grounded", grounding=Path(fits[method].path)), sizes, seed)

        return make

    train(BASE, lambda s: train_spec(EngineSpec("kinematic"), sizes, s))
    to_fit = [m for m in METHODS if m != BASE and not given[m]]
    fits: dict[str, GroundingFit] = {}
    data: Collection | None = None
    if to_fit:
        data_dir = args.out / "target_transitions"
        data = collect_target(data_dir, st, sizes.train_agents, args.seed, ckpts[BASE][0])
        fits = fit_groundings(data_dir, st, to_fit, args.out / "groundings", args.seed)
    for m in METHODS[1:]:
        train(m, grounded(m))
    target = st.target
    train(ORACLE, lambda s: train_spec(target, sizes, s))

    scenes = held_out_scenes(sizes.episodes, args.seed)
    pooled: dict[str, Pooled] = {
        kind: evaluate_pooled(
            ckpts[kind], scenes, target, args.seed, sizes.eval_worlds, label=kind, executor=args.executor()
        )
        for kind in KINDS
    }
    other = [
        evaluate_pooled(
            ckpts[kind],
            scenes,
            EngineSpec(tier),
            args.seed,
            sizes.eval_worlds,
            label=f"{kind} on {tier}",
            executor=args.executor(),
        ).cell(kind, tier)
        for tier in OTHER_TIERS
        for kind in KINDS
    ]
    condition = f"lag {lag}"
    cells = tuple(pooled[k].cell(k, ENGINE, condition, train_wall[k]) for k in KINDS)
    kinds = []
    for kind in KINDS:
        used: int | None = fits[kind].budget_transitions if kind in fits else 0
        if kind == ORACLE:
            used = None if given[ORACLE] else _oracle_transitions(ckpts[ORACLE])
        elif given[kind] and kind != BASE:
            used = None
        kinds.append(GroundingKind(kind, _trained_on(kind, lag), used))
    counts = {
        key: {k: scene_counts(p.records, key, sizes.episodes) for k, p in pooled.items()} for key in KEYS
    }
    gaps = [g for key in KEYS for g in gap_closed(counts[key], BASE, ORACLE, args.seed, metric=key).values()]
    history = find_cell(cells, HIGHLIGHT)
    vs_history = [
        Contrast(
            k,
            {
                "goal_reach_rate": rate_difference(
                    history.metrics, find_cell(cells, k).metrics, "goal_reach_rate"
                ),
                "gap_closed": gap_difference(
                    counts["goal_reach_rate"], HIGHLIGHT, k, BASE, ORACLE, args.seed
                ),
            },
        )
        for k in KINDS
        if k != HIGHLIGHT
    ]
    results = GroundingResults(cells, tuple(kinds), tuple(other), tuple(gaps), tuple(vs_history), fits, data)
    return _write(args, sizes, st, given, ckpts, results, t0)


def _trained_on(kind: str, lag: int) -> str:
    if kind == BASE:
        return "kinematic"
    if kind == ORACLE:
        return f"{ENGINE} + lag {lag}"
    return f"kinematic + {kind}"


def _oracle_transitions(paths: Sequence[Path]) -> int:
    """Target transitions (agent steps) of the oracle's training runs, from their specs."""
    total = 0
    for p in paths:
        spec = load_checkpoint(p).get("spec") or {}
        task, ppo = spec.get("task", {}), spec.get("ppo", {})
        total += (
            int(spec.get("iterations", 0))
            * int(task.get("num_worlds", 0))
            * int(task.get("agents_per_world", 0))
            * int(ppo.get("num_steps_per_env", 0))
        )
    return total


def _write(
    args: ExperimentArgs,
    sizes: Sizes,
    st: GroundingSettings,
    given: Mapping[str, list[Path]],
    ckpts: Mapping[str, list[Path]],
    results: GroundingResults,
    t0: float,
) -> ResultsFile[GroundingResults]:
    cells = results.cells
    lag = st.action_lag_steps
    target = f"{ENGINE} + lag {lag}"
    bars = plot_grouped_panels(
        args.out / "outcomes.png",
        [target, *OTHER_TIERS],
        {
            c.kind: {
                target: c.metrics,
                **{tier: find_cell(results.other_tiers, c.kind, tier).metrics for tier in OTHER_TIERS},
            }
            for c in cells
        },
        KEYS,
        f"{NAME}: every policy on the target ({target}) and on each tier without the lag",
    )
    methods = [k for k in KINDS if k not in (BASE, ORACLE)]
    gaps = {k: find_gap(results.gap_closed, k) for k in KINDS}
    gap_plot = plot_intervals(
        args.out / "gap_closed.png",
        methods,
        [gaps[k].gap_closed for k in methods],
        [gaps[k].ci95 for k in methods],
        f"{NAME}: fraction of the goal-reach gap closed (0 = direct transfer, 1 = oracle)",
        "gap closed",
        highlight=HIGHLIGHT,
        reference_lines=(0.0, 1.0),
    )
    data = results.target_data
    collected = (
        f"{data.transitions} target transitions were collected\n({st.collect_worlds} worlds × "
        f"{sizes.train_agents} agents × {data.steps} steps, driven by the first `none` policy,\n"
        f"its noisy copy and smooth random driving; water films 0–5 mm drawn per reset)"
        if data is not None
        else "No target data was collected (every method's policies were given)"
    )
    h = gaps[HIGHLIGHT]
    goal = {k: find_cell(cells, k).metrics["goal_reach_rate"] for k in (BASE, ORACLE)}
    span = goal[ORACLE] - goal[BASE]
    closes = f"the history-conditioned correction closes {fmt_ci(h.figures, 'gap_closed', 2)} of that gap"
    if not math.isfinite(h.gap_closed):
        closes = "there is no gap to close (oracle = direct transfer): no fraction is defined"
    elif span < 0:
        closes = f"the oracle does not beat direct transfer here, so the fractions ({closes}) mean little"
    headline = (
        f"Goal reach on the target: direct transfer {goal[BASE]:.3f}, oracle {goal[ORACLE]:.3f}; {closes}."
    )
    intro = f"""
Target: the {ENGINE} tier with an actuator lag of {lag} policy steps ({lag * 0.1:.1f} s) on the
procedural scenes' own road conditions (40 % wet or heavy rain). {collected}. Each grounding
method was fitted once (seed {args.seed}) on at most **{st.budget} target transitions** (its whole
budget; `dr` uses none, `none` is the plain kinematic tier) with the episodes' 20 % held out for the
prediction errors below; one policy per method and seed trained on its grounded engine, the oracle
on the target itself. Every policy drives the same {sizes.episodes} held-out scenes on the target,
and on {" and ".join(OTHER_TIERS)} without the lag.

{headline}

Gap closed = (kind − none) / (oracle − none) on goal reach: 95 % interval from a scene-paired
bootstrap ({DRAWS} draws of the held-out scenes with replacement, all kinds resampled together;
{gaps[BASE].draws_without_gap} draws in which oracle = none are left out). "Target transitions" is
the target data each policy's engine was fitted on (the oracle: its PPO experience on the
target); the 1- and 10-step errors are the grounded model's held-out position errors (open loop)
on the target data (for `none`: the plain bicycle's).
"""
    cell = {c.kind: c for c in cells}
    return write_report(
        args,
        NAME,
        "Grounding the kinematic tier: how much of the gap each method closes",
        intro,
        [*_tables(results), _tier_table(results, target)],
        sizes,
        {k: training_seeds(given[k], args, sizes) for k in KINDS},
        {
            "target_engine": ENGINE,
            "settings": asdict(st),
            "holdout_frac": HOLDOUT_FRAC,
            "collect_margin": COLLECT_MARGIN,
            "checkpoints": {k: [str(p) for p in v] for k, v in ckpts.items()},
            "gap_interval": "scene-paired percentile bootstrap over held-out scenes",
        },
        results,
        [bars, gap_plot],
        time.perf_counter() - t0,
        seed_compare=[(cell[k], cell[BASE]) for k in KINDS if k != BASE]
        + [(cell[HIGHLIGHT], cell[k]) for k in KINDS if k not in (HIGHLIGHT, BASE)],
    )


EXPERIMENT = Experiment(
    NAME,
    "each grounding method's policies on mujoco + actuator lag: gap closed vs direct transfer/oracle",
    KINDS,
    run,
    GroundingResults.from_json,
    options=("--action-lag-steps", "--budget"),
)
