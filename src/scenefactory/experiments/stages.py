"""The stages the ``grounding`` and ``matrix`` experiments build their policies on: recording
mujoco transitions, fitting grounding corrections and learned dynamics models on them, and the
held-out scenes every policy is evaluated on.

Each stage finishes by writing ``stage.json`` (its inputs and its typed result's JSON form,
:func:`~scenefactory.experiments.base.staged`): a rerun on the same folder with the same inputs
reads the result back instead of redoing the stage, so the policies trained in a fitted model keep
that model when an experiment is resumed.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from scenefactory.dynamics.correctors import Method
from scenefactory.dynamics.models import DynamicsModelConfig, model_kind
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.experiments.base import ExperimentArgs, console, stage_record, staged
from scenefactory.experiments.results import Reader
from scenefactory.grounding.dataset import collect
from scenefactory.grounding.fit import fit_dynamics
from scenefactory.grounding.ground import GroundConfig, ground
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene

DEFAULT_LAG_STEPS = 3
"""Target actuator lag of the ``grounding`` experiment [policy steps of 0.1 s]. A kinematic policy
loses little at 1 step (measured: goal reach 0.90 → 0.88 on mujoco) and clearly more at 2."""
TARGET_TIER = "mujoco"
"""The tier the transitions are recorded on."""
HOLDOUT_FRAC = 0.2
"""Episodes of the recorded data the fits hold out (``GroundConfig.holdout_frac``)."""
COLLECT_MARGIN = 2.0
"""Target transitions collected per budgeted one (held-out episodes, finished agents)."""
TRAIN_SPLIT_MARGIN = 1.15
"""Collected transitions per budgeted one beyond the held-out share (the split is by episodes)."""
COLLECT_ATTEMPTS = 3
"""Collections tried before giving up on the budget."""


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

    @property
    def target(self) -> EngineSpec:
        """The engine the transitions are recorded on: :data:`TARGET_TIER` with the lag."""
        return EngineSpec(TARGET_TIER, action_lag_steps=self.action_lag_steps)


# ------------------------------------------------------------------------------- collection


@dataclass(frozen=True)
class Collection:
    """A transition dataset recorded for an experiment: ``transitions`` recorded over ``steps``
    policy steps, the ``attempts`` it took and their ``wall_s``, and the dataset's ``meta`` (what
    ``grounding.dataset.collect`` wrote: engine, worlds, agents, lag, ...). Its JSON form is the
    meta with ``wall_s`` and ``collect_attempts`` added (as the stage record has always held it)."""

    transitions: int
    steps: int
    wall_s: float
    attempts: int
    meta: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the class docstring)."""
        return {
            **self.meta,
            "transitions": self.transitions,
            "steps": self.steps,
            "wall_s": self.wall_s,
            "collect_attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, r: Reader) -> Collection:
        """Inverse of :meth:`to_json`."""
        meta = {k: v for k, v in r.data.items() if k not in ("wall_s", "collect_attempts")}
        return cls(
            r.integer("transitions"),
            r.integer("steps"),
            r.number("wall_s"),
            r.integer("collect_attempts"),
            meta,
        )


def collection_key(
    settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> dict[str, Any]:
    """The inputs of a target collection: a finished one with the same inputs is reused."""
    return {
        "engine": TARGET_TIER,
        "worlds": settings.collect_worlds,
        "agents": agents,
        "seed": seed,
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "action_lag_steps": settings.action_lag_steps,
        "budget": settings.budget,
    }


def collect_target(
    out: Path, settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> Collection:
    """Drive the target (:attr:`GroundingSettings.target`) with ``checkpoint``'s policy mix until
    the data leaves the budget after the held-out episodes. A first attempt is sized by
    :data:`COLLECT_MARGIN`; agents that finish early record nothing until their world resets, so
    when it falls short the collection is redone longer (up to :data:`COLLECT_ATTEMPTS` times). A
    collection that finished in ``out`` with the same inputs is reused (a resumed run)."""
    data, reused = staged(
        out,
        collection_key(settings, agents, seed, checkpoint),
        lambda: _collect(out, settings, agents, seed, checkpoint),
        Collection.from_json,
    )
    when = "recorded by an earlier run" if reused else f"{data.wall_s:.0f} s"
    console.print(f"target data: {data.transitions} transitions in {out} ({when})")
    return data


def _collect(
    out: Path, settings: GroundingSettings, agents: int, seed: int, checkpoint: Path | None
) -> Collection:
    """:func:`collect_target`'s collection, redone longer while it falls short."""
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
            engine=settings.target,
            worlds=settings.collect_worlds,
            agents=agents,
            steps=steps,
            seed=seed,
            checkpoint=checkpoint,
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
    return Collection(got, int(meta["steps"]), time.perf_counter() - t0, attempts, dict(meta))


# ------------------------------------------------------------------------------ grounding fits


@dataclass(frozen=True)
class GroundingFit:
    """A grounding method fitted on the target data: its folder (``path``), the target
    transitions it used, its held-out prediction errors (``heldout``: ``grounded`` for the
    corrected model, ``kinematic_bicycle`` for the plain bicycle on the same episodes, each error
    name → metres, with the held-out episodes and transitions), the fit's wall time, and the rest
    of the ``config.json`` it wrote (``config``: method, settings, fit). Its JSON form is that
    ``config.json`` with ``path`` and ``wall_s`` added (as the stage record has always held it)."""

    path: str
    budget_transitions: int
    heldout: Mapping[str, Any]
    wall_s: float
    config: Mapping[str, Any]

    TYPED = ("path", "wall_s", "budget_transitions", "heldout")
    """The fields of the JSON form held as fields, not in ``config``."""

    def __post_init__(self) -> None:
        """``config`` holds the rest of ``config.json``, none of the typed fields (one place each)."""
        both = [k for k in self.TYPED if k in self.config]
        if both:
            raise ValueError(f"GroundingFit.config repeats the typed fields {both}")

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the class docstring)."""
        return {
            **self.config,
            "budget_transitions": self.budget_transitions,
            "heldout": dict(self.heldout),
            "path": self.path,
            "wall_s": self.wall_s,
        }

    @classmethod
    def from_json(cls, r: Reader) -> GroundingFit:
        """Inverse of :meth:`to_json`."""
        held = r.obj("heldout")
        for name in ("grounded", "kinematic_bicycle"):  # the errors the report reads: objects
            held.obj(name)
        heldout = dict(held.data)
        config = {k: v for k, v in r.data.items() if k not in cls.TYPED}
        return cls(r.text("path"), r.integer("budget_transitions"), heldout, r.number("wall_s"), config)


def fit_groundings(
    data: Path, settings: GroundingSettings, methods: Sequence[str], out: Path, seed: int
) -> dict[str, GroundingFit]:
    """Fit each method in ``methods`` on ``data`` into ``out/<method>/``; method → its fit. A method
    fitted in an earlier run with the same settings on the same finished collection is reused, not
    refitted (the policies trained in it must keep the model they were trained in)."""
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

        def run(cfg: GroundConfig = cfg, folder: Path = out / name) -> GroundingFit:
            t0 = time.perf_counter()
            res = ground(data, cfg, folder)
            doc = {**res.config, "path": str(res.out_dir), "wall_s": time.perf_counter() - t0}
            return GroundingFit.from_json(Reader(doc, f"{folder}/config.json"))

        key = {"data": str(data), "data_stage": data_stage, "config": asdict(cfg)}
        fit, reused = staged(out / name, key, run, GroundingFit.from_json, record=data_stage is not None)
        when = "fitted by an earlier run" if reused else f"{fit.wall_s:.0f} s"
        fits[name] = fit
        held = fit.heldout["grounded"]
        console.print(
            f"  grounding {name}: {fit.budget_transitions} target transitions, held-out "
            f"10-step error {held['rollout10_pos_err_m']:.3f} m ({when})"
        )
    return fits


# --------------------------------------------------------------------------- learned models


@dataclass(frozen=True)
class ModelFit:
    """A learned dynamics model: its ``model.pt`` (``path``), where it comes from (``source``:
    fitted here, ``--dynamics-model``, a given policy's spec), its held-out errors (``heldout``)
    and the plain bicycle's on the same episodes (``bicycle``; error name → metres), the dataset
    and training facts of its fit (``fit_dynamics``'s ``metrics.json``), and the fit's wall time
    (``None`` when it was not fitted here)."""

    path: str
    source: str
    heldout: Mapping[str, Any]
    bicycle: Mapping[str, Any]
    dataset: Mapping[str, Any]
    train: Mapping[str, Any]
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name (``wall_s`` only when known)."""
        out: dict[str, Any] = {
            "path": self.path,
            "source": self.source,
            "heldout": dict(self.heldout),
            "bicycle": dict(self.bicycle),
            "dataset": dict(self.dataset),
            "train": dict(self.train),
        }
        if self.wall_s is not None:
            out["wall_s"] = self.wall_s
        return out

    @classmethod
    def from_json(cls, r: Reader) -> ModelFit:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.text("path"),
            r.text("source"),
            r.document("heldout"),
            r.document("bicycle"),
            r.document("dataset"),
            r.document("train"),
            r.opt_number("wall_s"),
        )

    @classmethod
    def of(cls, path: Path, metrics: Mapping[str, Any], source: str, wall_s: float | None = None) -> ModelFit:
        """A model at ``path`` from ``fit_dynamics``'s ``metrics`` (its ``metrics.json``)."""
        train = metrics.get("train", {})
        keys = ("epochs", "train_transitions", "heldout_transitions", "heldout_episodes", "train_seconds")
        return cls(
            path=str(path),
            source=source,
            heldout=dict(metrics["model"]),
            bicycle=dict(metrics["kinematic_bicycle"]),
            dataset=dict(metrics.get("dataset", {})),
            train={k: train.get(k) for k in keys},
            wall_s=wall_s,
        )


def fit_models(data: Path, kinds: Sequence[str], epochs: int, out: Path, seed: int) -> dict[str, ModelFit]:
    """Fit each family in ``kinds`` on the transitions in ``data`` for ``epochs`` epochs into
    ``out/<kind>/``. A model fitted by an earlier run with the same settings on the same finished
    collection is reused (the policies trained in it must keep the model they were trained in)."""
    data_stage = stage_record(data)
    fits = {}
    for kind in kinds:
        cfg = DynamicsModelConfig(kind=model_kind(kind))
        key = {
            "data": str(data),
            "data_stage": data_stage,
            "config": asdict(cfg),
            "epochs": epochs,
            "seed": seed,
            "holdout_frac": HOLDOUT_FRAC,
        }

        def run(cfg: DynamicsModelConfig = cfg, folder: Path = out / kind) -> ModelFit:
            t0 = time.perf_counter()
            res = fit_dynamics(data, cfg, folder, epochs=epochs, seed=seed, holdout_frac=HOLDOUT_FRAC)
            return ModelFit.of(res.model_path, res.metrics, "fitted here", time.perf_counter() - t0)

        fit, reused = staged(out / kind, key, run, ModelFit.from_json, record=data_stage is not None)
        when = "fitted by an earlier run" if reused else f"{fit.wall_s or 0.0:.0f} s"
        fits[kind] = fit
        console.print(
            f"  {kind}: held-out 1-step error {fit.heldout['pos_err_m']:.4f} m, 10-step "
            f"{fit.heldout['rollout10_pos_err_m']:.3f} m ({when})"
        )
    return fits


# ---------------------------------------------------------------------------- held-out scenes


def held_out_scenes(num: int, seed: int) -> Callable[[int], list[Scene]]:
    """``agents → scenes``: ``num`` held-out procedural scenes (eval seed range), built once per
    agent count, each under its own road condition."""
    cache: dict[int, list[Scene]] = {}

    def scenes(agents: int) -> list[Scene]:
        if agents not in cache:
            cache[agents] = procedural_scenes("eval", num, agents, base_seed=seed)
        return cache[agents]

    return scenes
