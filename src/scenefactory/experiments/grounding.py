"""``grounding``: how much of the kinematic → physics gap each grounding method closes.

The target is the mujoco tier under conditions the kinematic tier does not model: the procedural
scenes' own road conditions (40 % of them wet or in heavy rain: friction-limited tyres) and an
actuator lag of :data:`DEFAULT_LAG_STEPS` policy steps (``--action-lag-steps``; every action
reaches the car that many steps late, :class:`~scenefactory.engines.wrappers.LaggedEngine`).

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
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from scenefactory.dynamics.correctors import Method
from scenefactory.errors import UserError
from scenefactory.experiments.base import (
    Experiment,
    ExperimentArgs,
    Pooled,
    Sizes,
    console,
    evaluate_pooled,
    policies,
    stage_record,
    staged,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.gap import DRAWS, OUTCOMES, gap_closed, gap_difference, scene_counts
from scenefactory.experiments.report import (
    fmt_ci,
    fmt_diff,
    markdown_table,
    plot_grouped_panels,
    plot_intervals,
    write_report,
)
from scenefactory.scenes.scene import Scene

NAME = "grounding"
DEFAULT_LAG_STEPS = 3
"""Target actuator lag [policy steps of 0.1 s]. A kinematic policy loses little at 1 step
(measured: goal reach 0.90 → 0.88 on mujoco) and clearly more at 2."""
ENGINE = "mujoco"
BASE, ORACLE, HIGHLIGHT = "none", "oracle", Method.HISTORY.value
METHODS = tuple(m.value for m in Method)
KINDS = (*METHODS, ORACLE)
KEYS = tuple(OUTCOMES)
OTHER_TIERS = ("mujoco", "kinematic")
"""Engines every policy is also evaluated on, without the target's lag."""
HOLDOUT_FRAC = 0.2
"""Episodes of the target data the fits hold out (``GroundConfig.holdout_frac``)."""
COLLECT_MARGIN = 2.0
"""Target transitions collected per budgeted one (held-out episodes, finished agents)."""
TRAIN_SPLIT_MARGIN = 1.15
"""Collected transitions per budgeted one beyond the held-out share (the split is by episodes)."""
COLLECT_ATTEMPTS = 3
"""Collections tried before giving up on the budget."""
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=15, train_scenes=24, episodes=12, eval_worlds=12
)


@dataclass(frozen=True)
class GroundingSettings:
    """The target and the fits.

    ``action_lag_steps`` target actuator lag [policy steps]; ``budget`` target transitions each fit
    may use; ``collect_worlds`` worlds (× the sizes' ``train_agents``) driven to collect them;
    ``fit_steps`` Adam steps of the networks, ``sysid_iterations`` of system identification,
    ``gat_sim_transitions`` bicycle transitions for GAT's inverse model, ``history_len`` H of the
    history-conditioned correction.
    """

    action_lag_steps: int = DEFAULT_LAG_STEPS
    budget: int = 20_000
    collect_worlds: int = 32
    fit_steps: int = 2000
    sysid_iterations: int = 200
    gat_sim_transitions: int = 20_000
    history_len: int = 8

    def __post_init__(self) -> None:
        """The lag may be 0 (no lag); every other setting must be a positive integer."""
        for name, value in asdict(self).items():
            low = 0 if name == "action_lag_steps" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(f"grounding setting {name} must be an integer >= {low}, got {value!r}")

    def with_flags(self, args: ExperimentArgs) -> GroundingSettings:
        """These settings with ``--action-lag-steps`` and ``--budget`` applied."""
        lag = self.action_lag_steps if args.action_lag_steps is None else args.action_lag_steps
        return replace(self, action_lag_steps=lag, budget=args.budget or self.budget)


FULL_SETTINGS = GroundingSettings()
QUICK_SETTINGS = GroundingSettings(
    budget=2000, collect_worlds=8, fit_steps=200, sysid_iterations=20, gat_sim_transitions=2000
)


def collection_key(
    settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> dict[str, Any]:
    """The inputs of a target collection: a finished one with the same inputs is reused."""
    return {
        "engine": ENGINE,
        "worlds": settings.collect_worlds,
        "agents": agents,
        "seed": seed,
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "action_lag_steps": settings.action_lag_steps,
        "budget": settings.budget,
    }


def collect_target(
    out: Path, settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> dict[str, Any]:
    """Drive the target (``ENGINE`` with the lag) with ``checkpoint``'s policy mix until the data
    leaves the budget after the held-out episodes; the dataset's meta. A first attempt is sized by
    :data:`COLLECT_MARGIN`; agents that finish early record nothing until their world resets, so
    when it falls short the collection is redone longer (up to :data:`COLLECT_ATTEMPTS` times). A
    collection that finished in ``out`` with the same inputs is reused (a resumed run)."""
    meta, reused = staged(
        out,
        collection_key(settings, agents, seed, checkpoint),
        lambda: _collect(out, settings, agents, seed, checkpoint),
    )
    when = "recorded by an earlier run" if reused else f"{meta['wall_s']:.0f} s"
    console.print(f"target data: {meta['transitions']} transitions in {out} ({when})")
    return meta


def _collect(
    out: Path, settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> dict[str, Any]:
    """:func:`collect_target`'s collection, redone longer while it falls short."""
    import shutil

    from scenefactory.grounding.dataset import collect

    per_step = settings.collect_worlds * agents
    need = math.ceil(TRAIN_SPLIT_MARGIN * settings.budget / (1.0 - HOLDOUT_FRAC))
    steps = math.ceil(COLLECT_MARGIN * settings.budget / ((1.0 - HOLDOUT_FRAC) * per_step))
    t0 = time.perf_counter()
    attempts = 0
    while True:
        attempts += 1
        if out.exists():
            shutil.rmtree(out)
        meta = collect(
            out,
            engine=ENGINE,
            worlds=settings.collect_worlds,
            agents=agents,
            steps=steps,
            seed=seed,
            checkpoint=checkpoint,
            action_lag_steps=settings.action_lag_steps,
        )
        got = int(meta["transitions"])
        if got >= need:
            break
        if attempts == COLLECT_ATTEMPTS:
            raise UserError(
                f"{out}: {attempts} collections gave {got} target transitions, fewer than the {need} "
                f"that --budget {settings.budget} needs; lower --budget"
            )
        console.print(f"target data: {got} transitions from {steps} steps, need {need}; collecting longer")
        steps = math.ceil(steps * 1.25 * need / max(got, 1))
    meta["wall_s"] = time.perf_counter() - t0
    meta["collect_attempts"] = attempts
    return dict(meta)


def fit_groundings(
    data: Path, settings: GroundingSettings, methods: Sequence[str], out: Path, seed: int
) -> dict[str, dict[str, Any]]:
    """Fit each method in ``methods`` on ``data`` into ``out/<method>/``; method → artifact config
    (``budget_transitions``, ``heldout`` errors, ``fit``) plus ``path``. A method fitted in an
    earlier run with the same settings on the same finished collection is reused, not refitted
    (the policies trained in it must keep the model they were trained in)."""
    from scenefactory.grounding.ground import GroundConfig, ground

    data_stage = stage_record(data)
    fits = {}
    for name in methods:
        cfg = GroundConfig(
            method=Method(name),
            budget=settings.budget,
            seed=seed,
            holdout_frac=HOLDOUT_FRAC,
            history_len=settings.history_len,
            train_steps=settings.fit_steps,
            sysid_iterations=settings.sysid_iterations,
            gat_sim_transitions=settings.gat_sim_transitions,
        )

        def run(cfg: GroundConfig = cfg, folder: Path = out / name) -> dict[str, Any]:
            t0 = time.perf_counter()
            res = ground(data, cfg, folder)
            return {**res.config, "path": str(res.out_dir), "wall_s": time.perf_counter() - t0}

        key = {"data": str(data), "data_stage": data_stage, "config": asdict(cfg)}
        fit, reused = staged(out / name, key, run, record=data_stage is not None)
        when = "fitted by an earlier run" if reused else f"{fit['wall_s']:.0f} s"
        fits[name] = fit
        held = fit["heldout"]["grounded"]
        console.print(
            f"  grounding {name}: {fit['budget_transitions']} target transitions, held-out "
            f"10-step error {held['rollout10_pos_err_m']:.3f} m ({when})"
        )
    return fits


def held_out_scenes(num: int, seed: int) -> Callable[[int], list[Scene]]:
    """``agents → scenes``: ``num`` held-out procedural scenes (eval seed range), built once per
    agent count, each under its own road condition."""
    from scenefactory.scenes.library import procedural_scenes

    cache: dict[int, list[Scene]] = {}

    def scenes(agents: int) -> list[Scene]:
        if agents not in cache:
            cache[agents] = procedural_scenes("eval", num, agents, base_seed=seed)
        return cache[agents]

    return scenes


def _error_cell(kind: str, fits: Mapping[str, Mapping[str, Any]], key: str) -> str:
    """The grounded model's held-out error; for ``none`` the plain bicycle's on the same episodes."""
    if kind == BASE and fits:
        v = next(iter(fits.values()))["heldout"]["kinematic_bicycle"][key]
    elif kind in fits:
        v = fits[kind]["heldout"]["grounded"][key]
    else:
        return "—"
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"


def _tables(
    cells: Mapping[str, Mapping[str, Any]],
    fits: Mapping[str, Mapping[str, Any]],
    gaps: Mapping[str, Mapping[str, Any]],
    vs_history: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    rows = []
    for kind, c in cells.items():
        g = gaps[kind]
        gap = "n/a" if not math.isfinite(g["gap_closed"]) else fmt_ci(g, "gap_closed", 2)
        label = f"**{kind}**" if kind == HIGHLIGHT else kind
        rows.append(
            [
                label,
                c["trained_on"],
                str(c["target_transitions"]),
                _error_cell(kind, fits, "pos_err_m"),
                _error_cell(kind, fits, "rollout10_pos_err_m"),
                *(fmt_ci(c, k) for k in KEYS),
                str(c["episodes"]),
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
        [[k, fmt_diff(v["goal_reach"]), fmt_diff(v["gap_closed"], 2)] for k, v in vs_history.items()],
    )
    return [
        "## Every policy on the target\n\n" + main,
        f"## The history-conditioned correction against the rest\n\n{versus}",
    ]


def _tier_table(
    cells: Mapping[str, Mapping[str, Any]], other: Mapping[str, Mapping[str, Mapping[str, Any]]], target: str
) -> str:
    """Every policy's goal reach on the target and on each other tier, with collisions and off-road."""
    header = ["policy", "trained on", f"goal reach on {target}"]
    for tier in other:
        header += [f"goal reach on {tier}", "collision", "off-road"]
    rows = []
    for kind, c in cells.items():
        row = [f"**{kind}**" if kind == HIGHLIGHT else kind, c["trained_on"], fmt_ci(c, "goal_reach_rate")]
        for by_kind in other.values():
            row += [fmt_ci(by_kind[kind], k) for k in KEYS]
        rows.append(row)
    return (
        "## Every policy on each tier\n\nThe same held-out scenes; the other tiers without the "
        "target's lag.\n\n" + markdown_table(header, rows)
    )


def run(args: ExperimentArgs, settings: GroundingSettings | None = None) -> dict[str, Any]:
    """Run the experiment; writes the report folder and returns ``results.json``'s document.
    ``settings`` replaces the quick/full presets (tests); the flags still apply."""
    from scenefactory.experiments.base import rate_difference

    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    base_settings = settings or (QUICK_SETTINGS if args.quick else FULL_SETTINGS)
    st = base_settings.with_flags(args)
    given = args.checkpoints_by_kind(KINDS)
    lag = st.action_lag_steps
    ckpts: dict[str, list[Path]] = {}
    train_wall: dict[str, float] = {}

    def train(kind: str, make: Callable[[int], Any]) -> None:
        t1 = time.perf_counter()
        ckpts[kind] = policies(kind, given[kind], make, args, sizes)
        train_wall[kind] = time.perf_counter() - t1

    train(BASE, lambda s: train_spec("kinematic", sizes, s))
    to_fit = [m for m in METHODS if m != BASE and not given[m]]
    fits: dict[str, dict[str, Any]] = {}
    data_meta: dict[str, Any] | None = None
    if to_fit:
        data_dir = args.out / "target_transitions"
        data_meta = collect_target(data_dir, st, sizes.train_agents, args.seed, ckpts[BASE][0])
        fits = fit_groundings(data_dir, st, to_fit, args.out / "groundings", args.seed)
    for m in METHODS[1:]:
        art = Path(fits[m]["path"]) if m in fits else None
        train(m, partial(train_spec, "grounded", sizes, grounding=art))
    train(ORACLE, lambda s: train_spec(ENGINE, sizes, s, action_lag_steps=lag))

    scenes = held_out_scenes(sizes.episodes, args.seed)
    pooled: dict[str, Pooled] = {}
    for kind in KINDS:
        pooled[kind] = evaluate_pooled(
            ckpts[kind], scenes, ENGINE, args.seed, sizes.eval_worlds, label=kind, action_lag_steps=lag
        )
    other = {
        tier: {
            kind: evaluate_pooled(
                ckpts[kind], scenes, tier, args.seed, sizes.eval_worlds, label=f"{kind} on {tier}"
            )
            for kind in KINDS
        }
        for tier in OTHER_TIERS
    }
    oracle_steps = _oracle_transitions(ckpts[ORACLE]) if not given[ORACLE] else "given checkpoints"
    cells: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        used: Any = fits[kind]["budget_transitions"] if kind in fits else 0
        if kind == ORACLE:
            used = oracle_steps
        elif given[kind] and kind != BASE:
            used = "given checkpoints"
        cells[kind] = {
            "kind": kind,
            "trained_on": _trained_on(kind, lag),
            "target_transitions": used,
            "checkpoints": [str(p) for p in ckpts[kind]],
            "train_wall_s": train_wall[kind],
            **pooled[kind].metrics,
            "per_policy": pooled[kind].per_policy,
        }
    counts = {
        key: {k: scene_counts(p.records, key, sizes.episodes) for k, p in pooled.items()} for key in KEYS
    }
    gaps = {key: gap_closed(counts[key], BASE, ORACLE, seed=args.seed) for key in KEYS}
    vs_history = {
        k: {
            "goal_reach": rate_difference(cells[HIGHLIGHT], cells[k], "goal_reach_rate"),
            "gap_closed": gap_difference(counts["goal_reach_rate"], HIGHLIGHT, k, BASE, ORACLE, args.seed),
        }
        for k in KINDS
        if k != HIGHLIGHT
    }
    results = {
        "cells": cells,
        "other_tiers": {tier: {k: p.metrics for k, p in by_kind.items()} for tier, by_kind in other.items()},
        "gap_closed": gaps,
        "history_vs": vs_history,
        "groundings": fits,
        "target_data": data_meta,
    }
    return _write(args, sizes, st, given, ckpts, results, t0)


def _trained_on(kind: str, lag: int) -> str:
    if kind == BASE:
        return "kinematic"
    if kind == ORACLE:
        return f"{ENGINE} + lag {lag}"
    return f"kinematic + {kind}"


def _oracle_transitions(paths: Sequence[Path]) -> int:
    """Target transitions (agent steps) of the oracle's training runs, from their specs."""
    from scenefactory.checkpoint import load_checkpoint

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
    results: Mapping[str, Any],
    t0: float,
) -> dict[str, Any]:
    cells, fits = results["cells"], results["groundings"]
    goal_gaps = results["gap_closed"]["goal_reach_rate"]
    lag = st.action_lag_steps
    target = f"{ENGINE} + lag {lag}"
    other = results["other_tiers"]
    bars = plot_grouped_panels(
        args.out / "outcomes.png",
        [target, *other],
        {k: {target: c, **{tier: other[tier][k] for tier in other}} for k, c in cells.items()},
        KEYS,
        f"{NAME}: every policy on the target ({target}) and on each tier without the lag",
    )
    methods = [k for k in KINDS if k not in (BASE, ORACLE)]
    gap_plot = plot_intervals(
        args.out / "gap_closed.png",
        methods,
        [goal_gaps[k]["gap_closed"] for k in methods],
        [goal_gaps[k]["gap_closed_ci95"] for k in methods],
        f"{NAME}: fraction of the goal-reach gap closed (0 = direct transfer, 1 = oracle)",
        "gap closed",
        highlight=HIGHLIGHT,
        reference_lines=(0.0, 1.0),
    )
    data = results["target_data"]
    collected = (
        f"{data['transitions']} target transitions were collected\n({st.collect_worlds} worlds × "
        f"{sizes.train_agents} agents × {data['steps']} steps, driven by the first `none` policy,\n"
        f"its noisy copy and smooth random driving; water films 0–5 mm drawn per reset)"
        if data
        else "No target data was collected (every method's policies were given)"
    )
    g = goal_gaps
    h = g[HIGHLIGHT]
    span = cells[ORACLE]["goal_reach_rate"] - cells[BASE]["goal_reach_rate"]
    closes = f"the history-conditioned correction closes {fmt_ci(h, 'gap_closed', 2)} of that gap"
    if not math.isfinite(h["gap_closed"]):
        closes = "there is no gap to close (oracle = direct transfer): no fraction is defined"
    elif span < 0:
        closes = f"the oracle does not beat direct transfer here, so the fractions ({closes}) mean little"
    headline = (
        f"Goal reach on the target: direct transfer {cells[BASE]['goal_reach_rate']:.3f}, "
        f"oracle {cells[ORACLE]['goal_reach_rate']:.3f}; {closes}."
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
{g[BASE]["draws_without_gap"]} draws in which oracle = none are left out). "Target transitions" is
the target data each policy's engine was fitted on (the oracle: its PPO experience on the
target); the 1- and 10-step errors are the grounded model's held-out position errors (open loop)
on the target data (for `none`: the plain bicycle's).
"""
    return write_report(
        args,
        NAME,
        "Grounding the kinematic tier: how much of the gap each method closes",
        intro,
        [*_tables(cells, fits, g, results["history_vs"]), _tier_table(cells, other, target)],
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
        seed_compare=[(k, BASE) for k in KINDS if k != BASE]
        + [(HIGHLIGHT, k) for k in KINDS if k not in (HIGHLIGHT, BASE)],
    )


EXPERIMENT = Experiment(
    NAME,
    "each grounding method's policies on mujoco + actuator lag: gap closed vs direct transfer/oracle",
    KINDS,
    run,
    options=("--action-lag-steps", "--budget"),
)
