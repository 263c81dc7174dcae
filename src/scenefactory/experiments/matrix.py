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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scenefactory.dynamics.model_file import load_dynamics_model
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.experiments.accuracy import (
    AccuracyPoint,
    Correlation,
    correlations,
    describe,
    find_correlation,
    plot_accuracy,
)
from scenefactory.experiments.base import (
    ExperimentArgs,
    Sizes,
    console,
    evaluate_pooled,
    policies,
    rate_difference,
    train_spec,
    training_seeds,
)
from scenefactory.experiments.gap import DRAWS, OUTCOMES, GapClosed, find_gap, gap_closed, scene_counts
from scenefactory.experiments.registry import Experiment
from scenefactory.experiments.report import ResultsFile, plot_grouped_panels, write_report
from scenefactory.experiments.results import (
    Cell,
    Contrast,
    Metrics,
    Reader,
    find_cell,
    find_contrast,
)
from scenefactory.experiments.stages import (
    HOLDOUT_FRAC,
    Collection,
    GroundingSettings,
    ModelFit,
    collect_target,
    fit_models,
    held_out_scenes,
)
from scenefactory.experiments.tables import fmt_ci, fmt_diff, markdown_table, metrics_table
from scenefactory.rl.driving import load_policy
from scenefactory.rl.driving_spec import TrainSpec

NAME = "matrix"
BASE, ORACLE = "kinematic", "mujoco"
LEARNED = ("mlp", "gru", "transformer", "residual")
"""The learned model families (``dynamics.models.ModelKind``), one policy kind each."""
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


def given_models(args: ExperimentArgs) -> dict[str, ModelFit]:
    """``--dynamics-model KIND=PATH`` by kind; a ``UserError`` for an unknown or repeated kind, a
    missing or foreign file, or a model of another family than its KIND."""
    out: dict[str, ModelFit] = {}
    for kind, path in args.dynamics_models:
        if kind not in LEARNED:
            raise UserError(
                f"--dynamics-model kind '{kind}' unknown for experiment {NAME}: expected KIND in {LEARNED}"
            )
        if kind in out:
            raise UserError(
                f"--dynamics-model {kind} given twice ({out[kind].path}, {path}): one model per kind"
            )
        model, metrics = load_dynamics_model(Path(path))
        found = model.cfg.kind.value
        if found != kind:
            raise UserError(f"--dynamics-model {kind}={path}: the file holds a '{found}' model, not '{kind}'")
        out[kind] = ModelFit.of(Path(path), metrics, "--dynamics-model")
    return out


def _model_of_checkpoints(paths: Sequence[Path]) -> ModelFit | None:
    """The dynamics model the first given policy was trained in (its spec), if the file is there."""
    engine = load_policy(paths[0]).engine
    model = None if engine is None else engine.dynamics_model
    if model is None or not model.is_file():
        return None
    return ModelFit.of(model, load_dynamics_model(model)[1], "the given policy's spec")


@dataclass(frozen=True)
class MatrixResults:
    """Every policy kind on each of :data:`ENGINES` (``cells``), the learned models by family
    (``models``; ``None`` where policies were given and their model file is not found), each
    model's accuracy against the goal reach on mujoco of the policies trained in it (``accuracy``,
    ``correlations``), the gap each kind closes on mujoco goal reach (``gap_closed_on_mujoco``),
    each kind's mujoco goal reach against the kinematic-trained policies'
    (``goal_vs_kinematic_on_mujoco``: difference ``goal_reach_rate``), and the mujoco data the
    models were fitted on (``None`` when every model was given)."""

    cells: tuple[Cell, ...]
    models: Mapping[str, ModelFit | None]
    accuracy: tuple[AccuracyPoint, ...]
    correlations: tuple[Correlation, ...]
    gap_closed_on_mujoco: tuple[GapClosed, ...]
    goal_vs_kinematic_on_mujoco: tuple[Contrast, ...]
    mujoco_data: Collection | None

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name, lists of objects (``models`` by family, null if unknown)."""
        return {
            "cells": [c.to_json() for c in self.cells],
            "models": {k: None if m is None else m.to_json() for k, m in self.models.items()},
            "accuracy": [p.to_json() for p in self.accuracy],
            "correlations": [c.to_json() for c in self.correlations],
            "gap_closed_on_mujoco": [g.to_json() for g in self.gap_closed_on_mujoco],
            "goal_vs_kinematic_on_mujoco": [c.to_json() for c in self.goal_vs_kinematic_on_mujoco],
            "mujoco_data": None if self.mujoco_data is None else self.mujoco_data.to_json(),
        }

    @classmethod
    def from_json(cls, r: Reader) -> MatrixResults:
        """Inverse of :meth:`to_json`."""
        models = r.obj("models")
        return cls(
            r.objects("cells", Cell.from_json),
            {k: None if v is None else ModelFit.from_json(models.obj(k)) for k, v in models.data.items()},
            r.objects("accuracy", AccuracyPoint.from_json),
            r.objects("correlations", Correlation.from_json),
            r.objects("gap_closed_on_mujoco", GapClosed.from_json),
            r.objects("goal_vs_kinematic_on_mujoco", Contrast.from_json),
            None if r.raw("mujoco_data") is None else Collection.from_json(r.obj("mujoco_data")),
        )


# ------------------------------------------------------------------------------------------ run


def run(args: ExperimentArgs, settings: MatrixSettings | None = None) -> ResultsFile[MatrixResults]:
    """Run the experiment; writes the report folder and returns its results file. ``settings``
    replaces the quick/full presets (tests)."""
    t0 = time.perf_counter()
    sizes = args.resolve(FULL, QUICK)
    st = settings or (QUICK_SETTINGS if args.quick else FULL_SETTINGS)
    given = args.checkpoints_by_kind(KINDS)
    models: dict[str, ModelFit | None] = dict(given_models(args))
    for kind in LEARNED:
        if kind not in models and given[kind]:
            models[kind] = _model_of_checkpoints(given[kind])
    ckpts: dict[str, list[Path]] = {}
    train_wall: dict[str, float] = {}

    def train(kind: str, make: Callable[[int], TrainSpec]) -> None:
        t1 = time.perf_counter()
        ckpts[kind] = policies(kind, given[kind], make, args, sizes)
        train_wall[kind] = time.perf_counter() - t1

    def in_model(kind: str) -> Callable[[int], TrainSpec]:
        def make(seed: int) -> TrainSpec:  # called only when the kind's policies are not given
            model = models[kind]
            if model is None:
                raise UserError(f"no dynamics model of kind '{kind}' to train its policies in")
            return train_spec(EngineSpec("learned", dynamics_model=Path(model.path)), sizes, seed)

        return make

    train(BASE, lambda s: train_spec(EngineSpec(BASE), sizes, s))
    to_fit = [k for k in LEARNED if k not in models]
    data = None
    if to_fit:
        data_dir = args.out / "mujoco_transitions"
        collect = GroundingSettings(action_lag_steps=0, budget=st.budget, collect_worlds=st.collect_worlds)
        data = collect_target(data_dir, collect, sizes.train_agents, args.seed, ckpts[BASE][0])
        console.print(f"fitting {', '.join(to_fit)} on {data_dir}")
        models.update(fit_models(data_dir, to_fit, st.fit_epochs, args.out / "models", args.seed))
    for kind in LEARNED:
        train(kind, in_model(kind))
    train(ORACLE, lambda s: train_spec(EngineSpec(ORACLE), sizes, s))

    scenes = held_out_scenes(sizes.episodes, args.seed)
    cells = []
    on_target = {}
    for kind in KINDS:
        for engine in ENGINES:
            p = evaluate_pooled(
                ckpts[kind],
                scenes,
                EngineSpec(engine),
                args.seed,
                sizes.eval_worlds,
                label=f"{kind} →",
                executor=args.executor(),
            )
            cells.append(p.cell(kind, engine, train_wall_s=train_wall[kind]))
            if engine == ORACLE:
                on_target[kind] = p
    counts = {k: scene_counts(p.records, "goal_reach_rate", sizes.episodes) for k, p in on_target.items()}
    gaps = gap_closed(counts, BASE, ORACLE, seed=args.seed)
    vs_base = [
        Contrast(
            k,
            {
                "goal_reach_rate": rate_difference(
                    on_target[k].metrics, on_target[BASE].metrics, "goal_reach_rate"
                )
            },
        )
        for k in KINDS
    ]
    points = accuracy_points(models, {k: p.metrics for k, p in on_target.items()})
    results = MatrixResults(
        tuple(cells), models, tuple(points), correlations(points), tuple(gaps.values()), tuple(vs_base), data
    )
    return _write(args, sizes, st, given, ckpts, results, t0)


def accuracy_points(
    models: Mapping[str, ModelFit | None], on_target: Mapping[str, Metrics]
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
    known = sorted((m for m in models.values() if m is not None), key=lambda m: m.source != "fitted here")
    if known:
        points.append(point("kinematic bicycle", known[0].bicycle, learned=False))
    for kind in LEARNED:
        model = models.get(kind)
        points.append(point(kind, None if model is None else model.heldout))
    return points


# ---------------------------------------------------------------------------------------- report


def _num(v: float | None, digits: int = 4) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _sections(results: MatrixResults) -> list[str]:
    cells, models, gaps, vs = (
        results.cells,
        results.models,
        results.gap_closed_on_mujoco,
        results.goal_vs_kinematic_on_mujoco,
    )
    matrix = metrics_table(
        ["trained on", "evaluated on"], [((c.kind, c.eval_tier), c.metrics) for c in cells], KEYS
    )

    def goal(kind: str, engine: str) -> str:
        return fmt_ci(find_cell(cells, kind, engine).metrics, "goal_reach_rate")

    glance = markdown_table(
        ["trained on", "goal reach on mujoco", "goal reach on kinematic", "Δ on mujoco vs kinematic-trained"],
        [
            [
                k,
                goal(k, ORACLE),
                goal(k, BASE),
                "—" if k == BASE else fmt_diff(find_contrast(vs, k).differences["goal_reach_rate"]),
            ]
            for k in KINDS
        ],
    )
    rows = []
    for p in results.accuracy:
        kind = p.label if p.learned else BASE
        g = find_gap(gaps, kind)
        gap = "n/a" if not math.isfinite(g.gap_closed) else fmt_ci(g.figures, "gap_closed", 2)
        rows.append(
            [
                p.label if p.learned else f"{p.label} (no learning; `kinematic` policies)",
                _num(p.one_step_m),
                _num(p.rollout10_m, 3),
                _num(p.rollout20_m, 3),
                goal(kind, ORACLE),
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

    def corr(models: str, error: str) -> str:
        return describe(find_correlation(results.correlations, models, error))

    lines = [
        f"- 1-step error vs goal reach, learned models: {corr('learned', 'one_step')}.",
        f"- 10-step error vs goal reach, learned models: {corr('learned', 'rollout10')}.",
        f"- with the plain bicycle as a fifth model: 1-step {corr('all', 'one_step')}; "
        f"10-step {corr('all', 'rollout10')}.",
    ]
    model_rows = []
    for k in LEARNED:
        m = models.get(k)
        train, data = (m.train, m.dataset) if m is not None else ({}, {})
        model_rows.append(
            [
                k,
                m.source if m is not None else "unknown (policies given, their model file not found)",
                f"`{m.path}`" if m is not None else "—",
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
    results: MatrixResults,
    t0: float,
) -> ResultsFile[MatrixResults]:
    cells = results.cells
    bars = plot_grouped_panels(
        args.out / "matrix.png",
        list(ENGINES),
        {k: {e: find_cell(cells, k, e).metrics for e in ENGINES} for k in KINDS},
        KEYS,
        f"{NAME}: policies trained on each engine, evaluated on mujoco and kinematic",
    )
    goal = {k: find_cell(cells, k, ORACLE).metrics["goal_reach_rate"] for k in KINDS}
    scatter = plot_accuracy(
        args.out / "accuracy_vs_transfer.png",
        results.accuracy,
        {"trained on mujoco": goal[ORACLE]},
        f"{NAME}: model accuracy vs goal reach on mujoco",
        ylabel="goal reach on mujoco",
    )
    data = results.mujoco_data
    collected = (
        f"{data.transitions} mujoco transitions were recorded ({st.collect_worlds} worlds × "
        f"{sizes.train_agents} agents × {data.steps} steps, driven by the first `kinematic` policy, its "
        f"noisy copy and smooth random driving; water films 0–5 mm drawn per reset) and each missing "
        f"family fitted on them for {st.fit_epochs} epochs, the same {HOLDOUT_FRAC:.0%} of the episodes "
        f"held out for every model's errors"
        if data is not None
        else "No mujoco data was collected (every learned model was given)"
    )
    best = max(LEARNED, key=lambda k: goal[k])
    span = find_contrast(results.goal_vs_kinematic_on_mujoco, ORACLE).differences["goal_reach_rate"]
    caveat = ""
    if not span.ci95[0] > 0:
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
        _sections(results),
        sizes,
        {k: training_seeds(given[k], args, sizes) for k in KINDS},
        {
            "settings": asdict(st),
            "data_engine": ORACLE,
            "holdout_frac": HOLDOUT_FRAC,
            "models": {k: None if m is None else m.path for k, m in results.models.items()},
            "checkpoints": {k: [str(p) for p in v] for k, v in ckpts.items()},
            "gap_interval": "scene-paired percentile bootstrap over held-out scenes",
        },
        results,
        [bars, scatter],
        time.perf_counter() - t0,
        seed_compare=[
            (find_cell(cells, k, ORACLE), find_cell(cells, BASE, ORACLE)) for k in KINDS if k != BASE
        ],
    )


EXPERIMENT = Experiment(
    NAME,
    "train kinematic / mlp / gru / transformer / residual / mujoco x evaluate mujoco and kinematic; "
    "model accuracy vs transfer",
    KINDS,
    run,
    MatrixResults.from_json,
    options=("--dynamics-model",),
)
