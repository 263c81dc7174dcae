"""``matrix``: the cross-simulator matrix with learned dynamics, and model accuracy against transfer.

Policy kinds, each trained here one per seed (or given as ``--checkpoint KIND=PATH``):

- ``kinematic``: the kinematic bicycle (direct transfer);
- ``mlp``, ``gru``, ``transformer``, ``residual``: the learned tier (``--engine learned``) running a
  dynamics model of that family fitted on mujoco transitions — fitted here (below) or given as
  ``--dynamics-model KIND=PATH`` (a ``fit-dynamics`` ``model.pt`` of that family);
- ``mujoco``: the physics tier itself (the oracle).

Steps:

1. train the ``kinematic`` policies;
2. if some learned model is neither given nor implied by given policies: the first ``kinematic``
   policy drives mujoco (:func:`~scenefactory.experiments.grounding.collect_target`, no lag: the
   policy, its noisy copy and smooth random driving, water films 0–5 mm per reset) and every
   missing family is fitted on those transitions with ``fit_dynamics`` (the same 20 % of the
   episodes held out for all of them, so their errors compare), into ``out/models/<kind>/``;
3. train one policy per learned model and seed on it, and the ``mujoco`` policies;
4. evaluate every kind on mujoco and on kinematic on the same held-out scenes: goal reach,
   collision, off-road (Wilson 95 % CIs), the Wald difference from direct transfer and the fraction
   of the kinematic → mujoco goal-reach gap closed (scene-paired bootstrap, :mod:`.gap`);
5. set each model's held-out 1- and 10-step errors against the goal reach on mujoco of the policies
   trained in it (:mod:`.accuracy`), the plain bicycle as a reference point.

Grounded engines (the bicycle plus a fitted correction) are not rows here: the ``grounding``
experiment trains and scores them, against a lagged target.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError
from scenefactory.experiments.accuracy import AccuracyPoint, correlations, describe, plot_accuracy
from scenefactory.experiments.base import (
    Experiment,
    ExperimentArgs,
    Pooled,
    Sizes,
    console,
    evaluate_pooled,
    policies,
    rate_difference,
    stage_record,
    staged,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.gap import DRAWS, OUTCOMES, gap_closed, scene_counts
from scenefactory.experiments.grounding import (
    HOLDOUT_FRAC,
    GroundingSettings,
    collect_target,
    held_out_scenes,
)
from scenefactory.experiments.report import (
    fmt_ci,
    fmt_diff,
    markdown_table,
    metrics_table,
    plot_grouped_panels,
    write_report,
)

NAME = "matrix"
BASE, ORACLE = "kinematic", "mujoco"
LEARNED = ("mlp", "gru", "transformer", "residual")
"""The learned model families (``grounding.models.ModelKind``), one policy kind each."""
KINDS = (BASE, *LEARNED, ORACLE)
ENGINES = (ORACLE, BASE)
"""The tiers every policy is evaluated on."""
KEYS = tuple(OUTCOMES)
ERROR_KEYS = ("pos_err_m", "rollout10_pos_err_m", "rollout20_pos_err_m")
"""``fit_dynamics`` held-out errors [m] set against transfer: 1 step, 10 and 20 open-loop steps."""
FULL = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
QUICK = Sizes(
    seeds=1, train_worlds=16, train_agents=4, iterations=15, train_scenes=24, episodes=12, eval_worlds=12
)


@dataclass(frozen=True)
class MatrixSettings:
    """The mujoco data and the model fits.

    ``budget`` sizes the collection as in the ``grounding`` experiment (about 2.5 × ``budget``
    transitions are recorded; each fit trains on the 80 % of episodes not held out);
    ``collect_worlds`` worlds (× the sizes' ``train_agents``) drive mujoco to record them;
    ``fit_epochs`` passes of ``fit_dynamics`` over the training transitions.
    """

    budget: int = 20_000
    collect_worlds: int = 32
    fit_epochs: int = 20

    def __post_init__(self) -> None:
        """Every setting must be a positive integer."""
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"matrix setting {name} must be a positive integer, got {value!r}")


FULL_SETTINGS = MatrixSettings()
QUICK_SETTINGS = MatrixSettings(budget=2000, collect_worlds=8, fit_epochs=5)


# ------------------------------------------------------------------------------ learned models


def _model_info(path: Path, metrics: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What the report needs of a fitted model: where it is from and its held-out errors."""
    train = metrics.get("train", {})
    return {
        "path": str(path),
        "source": source,
        "heldout": metrics["model"],
        "bicycle": metrics["kinematic_bicycle"],
        "dataset": metrics.get("dataset", {}),
        "train": {
            k: train.get(k)
            for k in (
                "epochs",
                "train_transitions",
                "heldout_transitions",
                "heldout_episodes",
                "train_seconds",
            )
        },
    }


def given_models(args: ExperimentArgs) -> dict[str, dict[str, Any]]:
    """``--dynamics-model KIND=PATH`` by kind; a ``UserError`` for an unknown or repeated kind, a
    missing or foreign file, or a model of another family than its KIND."""
    from scenefactory.dynamics.model_file import load_dynamics_model

    out: dict[str, dict[str, Any]] = {}
    for kind, path in args.dynamics_models:
        if kind not in LEARNED:
            raise UserError(
                f"--dynamics-model kind '{kind}' unknown for experiment {NAME}: expected KIND in {LEARNED}"
            )
        if kind in out:
            raise UserError(
                f"--dynamics-model {kind} given twice ({out[kind]['path']}, {path}): one model per kind"
            )
        model, metrics = load_dynamics_model(Path(path))
        found = model.cfg.kind.value
        if found != kind:
            raise UserError(f"--dynamics-model {kind}={path}: the file holds a '{found}' model, not '{kind}'")
        out[kind] = _model_info(Path(path), metrics, "--dynamics-model")
    return out


def _model_of_checkpoints(paths: Sequence[Path]) -> dict[str, Any] | None:
    """The dynamics model the first given policy was trained in (its spec), if the file is there."""
    from scenefactory.checkpoint import load_checkpoint
    from scenefactory.dynamics.model_file import load_dynamics_model

    model = (load_checkpoint(paths[0]).get("spec") or {}).get("dynamics_model")
    if not model or not Path(model).is_file():
        return None
    return _model_info(Path(model), load_dynamics_model(Path(model))[1], "the given policy's spec")


def fit_models(
    data: Path, kinds: Sequence[str], st: MatrixSettings, out: Path, seed: int
) -> dict[str, dict[str, Any]]:
    """Fit each family in ``kinds`` on the transitions in ``data`` into ``out/<kind>/``. A model
    fitted by an earlier run with the same settings on the same finished collection is reused (the
    policies trained in it must keep the model they were trained in)."""
    from scenefactory.dynamics.models import DynamicsModelConfig, model_kind
    from scenefactory.grounding.fit import fit_dynamics

    data_stage = stage_record(data)
    fits = {}
    for kind in kinds:
        cfg = DynamicsModelConfig(kind=model_kind(kind))
        key = {
            "data": str(data),
            "data_stage": data_stage,
            "config": asdict(cfg),
            "epochs": st.fit_epochs,
            "seed": seed,
            "holdout_frac": HOLDOUT_FRAC,
        }

        def run(cfg: DynamicsModelConfig = cfg, folder: Path = out / kind) -> dict[str, Any]:
            t0 = time.perf_counter()
            res = fit_dynamics(data, cfg, folder, epochs=st.fit_epochs, seed=seed, holdout_frac=HOLDOUT_FRAC)
            info = _model_info(res.model_path, res.metrics, "fitted here")
            return {**info, "wall_s": time.perf_counter() - t0}

        fit, reused = staged(out / kind, key, run, record=data_stage is not None)
        when = "fitted by an earlier run" if reused else f"{fit['wall_s']:.0f} s"
        fits[kind] = fit
        console.print(
            f"  {kind}: held-out 1-step error {fit['heldout']['pos_err_m']:.4f} m, 10-step "
            f"{fit['heldout']['rollout10_pos_err_m']:.3f} m ({when})"
        )
    return fits


# ------------------------------------------------------------------------------------------ run


def run(args: ExperimentArgs, settings: MatrixSettings | None = None) -> dict[str, Any]:
    """Run the experiment; writes the report folder and returns ``results.json``'s document.
    ``settings`` replaces the quick/full presets (tests)."""
    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    st = settings or (QUICK_SETTINGS if args.quick else FULL_SETTINGS)
    given = args.checkpoints_by_kind(KINDS)
    models: dict[str, dict[str, Any] | None] = {k: v for k, v in given_models(args).items()}
    for kind in LEARNED:
        if kind not in models and given[kind]:
            models[kind] = _model_of_checkpoints(given[kind])
    ckpts: dict[str, list[Path]] = {}
    train_wall: dict[str, float] = {}

    def train(kind: str, make: Any) -> None:
        t1 = time.perf_counter()
        ckpts[kind] = policies(kind, given[kind], make, args, sizes)
        train_wall[kind] = time.perf_counter() - t1

    train(BASE, partial(train_spec, BASE, sizes))
    to_fit = [k for k in LEARNED if k not in models]
    data_meta = None
    if to_fit:
        data_dir = args.out / "mujoco_transitions"
        collect = GroundingSettings(action_lag_steps=0, budget=st.budget, collect_worlds=st.collect_worlds)
        data_meta = collect_target(data_dir, collect, sizes.train_agents, args.seed, ckpts[BASE][0])
        console.print(f"fitting {', '.join(to_fit)} on {data_dir}")
        models.update(fit_models(data_dir, to_fit, st, args.out / "models", args.seed))
    for kind in LEARNED:
        info = models[kind]
        path = None if info is None else Path(info["path"])
        train(kind, partial(train_spec, "learned", sizes, dynamics_model=path))
    train(ORACLE, partial(train_spec, ORACLE, sizes))

    scenes = held_out_scenes(sizes.episodes, args.seed)
    pooled: dict[tuple[str, str], Pooled] = {}
    for kind in KINDS:
        for engine in ENGINES:
            pooled[kind, engine] = evaluate_pooled(
                ckpts[kind], scenes, engine, args.seed, sizes.eval_worlds, label=f"{kind} →"
            )
    cells: dict[str, dict[str, Any]] = {}
    for (kind, engine), p in pooled.items():
        cells[f"{kind}->{engine}"] = {
            "trained_on": kind,
            "evaluated_on": engine,
            "checkpoints": [str(c) for c in ckpts[kind]],
            "train_wall_s": train_wall[kind],
            **p.metrics,
            "per_policy": p.per_policy,
        }
    on_target = {k: pooled[k, ORACLE] for k in KINDS}
    counts = {k: scene_counts(p.records, "goal_reach_rate", sizes.episodes) for k, p in on_target.items()}
    gaps = gap_closed(counts, BASE, ORACLE, seed=args.seed)
    vs_base = {
        k: rate_difference(on_target[k].metrics, on_target[BASE].metrics, "goal_reach_rate") for k in KINDS
    }
    points = accuracy_points(models, {k: p.metrics for k, p in on_target.items()})
    results = {
        "cells": cells,
        "models": models,
        "accuracy": [asdict(p) for p in points],
        "correlations": correlations(points),
        "gap_closed_on_mujoco": gaps,
        "goal_vs_kinematic_on_mujoco": vs_base,
        "mujoco_data": data_meta,
    }
    return _write(args, sizes, st, given, ckpts, results, points, t0)


def accuracy_points(
    models: Mapping[str, Mapping[str, Any] | None], on_target: Mapping[str, Mapping[str, Any]]
) -> list[AccuracyPoint]:
    """One point per learned model (errors ``None`` when its model is unknown) and, when some
    model is known, the plain bicycle (the ``kinematic`` policies' training model) scored on that
    model's held-out data — a model fitted here if there is one, so on the data the fitted models
    share."""

    def point(label: str, errors: Mapping[str, Any] | None, learned: bool = True) -> AccuracyPoint:
        e = [None if errors is None else errors.get(k) for k in ERROR_KEYS]
        one, r10, r20 = (float(v) if v is not None and math.isfinite(v) else None for v in e)
        kind = label if learned else BASE
        lo, hi = on_target[kind]["goal_reach_rate_ci95"]
        goal = float(on_target[kind]["goal_reach_rate"])
        return AccuracyPoint(label, one, r10, r20, goal, (float(lo), float(hi)), learned)

    points = []
    known = sorted((m for m in models.values() if m is not None), key=lambda m: m["source"] != "fitted here")
    if known:
        points.append(point("kinematic bicycle", known[0]["bicycle"], learned=False))
    for kind in LEARNED:
        model = models.get(kind)
        points.append(point(kind, None if model is None else model["heldout"]))
    return points


# ---------------------------------------------------------------------------------------- report


def _num(v: float | None, digits: int = 4) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _sections(results: Mapping[str, Any], points: Sequence[AccuracyPoint]) -> list[str]:
    cells, models, gaps, vs = (
        results["cells"],
        results["models"],
        results["gap_closed_on_mujoco"],
        results["goal_vs_kinematic_on_mujoco"],
    )
    matrix = metrics_table(
        ["trained on", "evaluated on"],
        [((c["trained_on"], c["evaluated_on"]), c) for c in cells.values()],
        KEYS,
    )
    glance = markdown_table(
        ["trained on", "goal reach on mujoco", "goal reach on kinematic", "Δ on mujoco vs kinematic-trained"],
        [
            [
                k,
                fmt_ci(cells[f"{k}->{ORACLE}"], "goal_reach_rate"),
                fmt_ci(cells[f"{k}->{BASE}"], "goal_reach_rate"),
                "—" if k == BASE else fmt_diff(vs[k]),
            ]
            for k in KINDS
        ],
    )
    rows = []
    for p in points:
        kind = p.label if p.learned else BASE
        g = gaps[kind]
        gap = "n/a" if not math.isfinite(g["gap_closed"]) else fmt_ci(g, "gap_closed", 2)
        rows.append(
            [
                p.label if p.learned else f"{p.label} (no learning; `kinematic` policies)",
                _num(p.one_step_m),
                _num(p.rollout10_m, 3),
                _num(p.rollout20_m, 3),
                fmt_ci(cells[f"{kind}->{ORACLE}"], "goal_reach_rate"),
                gap,
            ]
        )
    accuracy = markdown_table(
        [
            "model",
            "1-step error (m)",
            "10-step error (m)",
            "20-step error (m)",
            "goal reach on mujoco",
            "gap closed",
        ],
        rows,
    )
    corr = results["correlations"]
    lines = [
        f"- 1-step error vs goal reach, learned models: {describe(corr['learned/one_step'])}.",
        f"- 10-step error vs goal reach, learned models: {describe(corr['learned/rollout10'])}.",
        f"- with the plain bicycle as a fifth model: 1-step {describe(corr['all/one_step'])}; "
        f"10-step {describe(corr['all/rollout10'])}.",
    ]
    model_rows = []
    for k in LEARNED:
        m = models.get(k) or {}
        train, data = m.get("train", {}), m.get("dataset", {})
        model_rows.append(
            [
                k,
                m.get("source", "unknown (policies given, their model file not found)"),
                f"`{m['path']}`" if m else "—",
                f"`{data['path']}` ({data.get('engine')})" if data.get("path") else "—",
                *(str(train.get(f, "—")) for f in ("train_transitions", "heldout_transitions", "epochs")),
            ]
        )
    return [
        "## Every policy kind on both tiers\n\n" + matrix,
        "## Goal reach at a glance\n\n" + glance,
        "## Model accuracy against transfer\n\n"
        + accuracy
        + "\nA negative ρ means the more accurate model (smaller error) trained the policies that reach "
        "more goals on mujoco. The errors are open-loop predictions on held-out mujoco episodes; goal "
        "reach is closed loop.\n\n" + "\n".join(lines),
        "## The learned models\n\n"
        + markdown_table(
            ["model", "source", "file", "fitted on", "train transitions", "held-out transitions", "epochs"],
            model_rows,
        )
        + "\nThe errors of models fitted on different data (given ones) are each on their own held-out "
        "episodes and compare only roughly.",
    ]


def _write(
    args: ExperimentArgs,
    sizes: Sizes,
    st: MatrixSettings,
    given: Mapping[str, list[Path]],
    ckpts: Mapping[str, list[Path]],
    results: Mapping[str, Any],
    points: Sequence[AccuracyPoint],
    t0: float,
) -> dict[str, Any]:
    cells = results["cells"]
    bars = plot_grouped_panels(
        args.out / "matrix.png",
        list(ENGINES),
        {k: {e: cells[f"{k}->{e}"] for e in ENGINES} for k in KINDS},
        KEYS,
        f"{NAME}: policies trained on each engine, evaluated on mujoco and kinematic",
    )
    goal = {k: cells[f"{k}->{ORACLE}"]["goal_reach_rate"] for k in KINDS}
    scatter = plot_accuracy(
        args.out / "accuracy_vs_transfer.png",
        points,
        {"trained on mujoco": goal[ORACLE]},
        f"{NAME}: model accuracy vs goal reach on mujoco",
        ylabel="goal reach on mujoco",
    )
    data = results["mujoco_data"]
    collected = (
        f"{data['transitions']} mujoco transitions were recorded ({st.collect_worlds} worlds × "
        f"{sizes.train_agents} agents × {data['steps']} steps, driven by the first `kinematic` policy, its "
        f"noisy copy and smooth random driving; water films 0–5 mm drawn per reset) and each missing "
        f"family fitted on them for {st.fit_epochs} epochs, the same {HOLDOUT_FRAC:.0%} of the episodes "
        f"held out for every model's errors"
        if data
        else "No mujoco data was collected (every learned model was given)"
    )
    best = max(LEARNED, key=lambda k: goal[k])
    span = results["goal_vs_kinematic_on_mujoco"][ORACLE]
    caveat = ""
    if not span["ci95"][0] > 0:
        caveat = (
            f" Here the mujoco-trained policies do not clearly beat the kinematic-trained ones on "
            f"mujoco (Δ {fmt_diff(span)}), so the gap fractions mean little; read Δ instead."
        )
    intro = f"""
Policies trained on the kinematic bicycle, on four learned dynamics models of the mujoco tier
(`mlp`, `gru`, `transformer`, `residual`, run as `--engine learned`) and on mujoco itself are each
evaluated on mujoco and on kinematic, on the same {sizes.episodes} held-out procedural scenes (each
under its own road condition: 40 % wet or heavy rain, which only mujoco models). {collected}.

Goal reach on mujoco: kinematic-trained {goal[BASE]:.3f}, mujoco-trained {goal[ORACLE]:.3f}, best
learned model `{best}` {goal[best]:.3f}. "Gap closed" = (kind − kinematic) / (mujoco − kinematic) on
mujoco goal reach, with a scene-paired bootstrap 95 % interval ({DRAWS} draws); Δ is a Wald
interval.{caveat} Grounded engines (the bicycle plus a fitted correction) are not rows here: the
`grounding` experiment trains and scores them against a lagged mujoco target.
"""
    return write_report(
        args,
        NAME,
        "Cross-simulator matrix with learned dynamics, and model accuracy against transfer",
        intro,
        _sections(results, points),
        sizes,
        {k: training_seeds(given[k], args, sizes) for k in KINDS},
        {
            "settings": asdict(st),
            "data_engine": ORACLE,
            "holdout_frac": HOLDOUT_FRAC,
            "models": {k: (m or {}).get("path") for k, m in results["models"].items()},
            "checkpoints": {k: [str(p) for p in v] for k, v in ckpts.items()},
            "gap_interval": "scene-paired percentile bootstrap over held-out scenes",
        },
        results,
        [bars, scatter],
        time.perf_counter() - t0,
        seed_compare=[(f"{k}->{ORACLE}", f"{BASE}->{ORACLE}") for k in KINDS if k != BASE],
    )


EXPERIMENT = Experiment(
    NAME,
    "train kinematic / mlp / gru / transformer / residual / mujoco x evaluate mujoco and kinematic; "
    "model accuracy vs transfer",
    KINDS,
    run,
    options=("--dynamics-model",),
)
