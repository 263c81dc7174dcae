"""The data jobs: convert driving logs to scenes (``convert``), record transition datasets
(``collect drive``, ``collect logs``), and fit what the abstract tiers learn from them
(``fit-dynamics``: a learned dynamics model; ``ground``: a grounding correction of the kinematic
tier). Each takes one frozen dataclass of its arguments and reads and checks its inputs before
its progress bar starts, so that a bad input is one error line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenefactory.dynamics.correctors import method_from_name
from scenefactory.dynamics.models import DynamicsModelConfig, model_kind
from scenefactory.engines.spec import EngineSpec
from scenefactory.grounding import dataset
from scenefactory.grounding.fit import fit_dynamics as fit_model
from scenefactory.grounding.ground import GroundConfig, load_target
from scenefactory.grounding.ground import ground as fit_grounding
from scenefactory.grounding.log_dataset import write_log_dataset
from scenefactory.jobs.console import console, progress_bar
from scenefactory.jobs.drive import POLICY_HZ
from scenefactory.rl.driving import load_policy
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.womd.batch import check_ray_address, convert_files, parse_formats, prepare
from scenefactory.tasks.driving.road_cache import warm as warm_road_cache

__all__ = [
    "COLLECT_SCENES",
    "POLICY_HZ",
    "CollectArgs",
    "CollectLogsArgs",
    "ConvertArgs",
    "FitDynamicsArgs",
    "GroundArgs",
    "collect",
    "collect_logs",
    "convert",
    "fit_dynamics",
    "ground",
]

COLLECT_SCENES = 60
"""Procedural training scenes ``collect drive`` records on (from ``--seed``)."""


# ---------------------------------------------------------------------------------------- convert


@dataclass(frozen=True, kw_only=True)
class ConvertArgs:
    """Arguments of ``convert``: the scenario TFRecord files or globs ``inputs``, the output folder,
    the ``formats`` (comma-separated: json, mjcf, usd), ``workers`` processes (or the Ray cluster
    at ``ray_address``), ``max_agents`` controlled agents per scene, and the share of scenes put in
    the eval split (``eval_fraction``, by a hash of the scenario id)."""

    inputs: tuple[str, ...]
    out: Path
    formats: str = "json"
    workers: int = 1
    max_agents: int = 32
    ray_address: str | None = None
    eval_fraction: float = 0.1


def convert(args: ConvertArgs) -> dict[str, Any]:
    """WOMD shards → scene files, with a progress bar over shards; returns ``summary.json``'s
    document.

    Raises ``UserError`` before converting anything for bad arguments, and
    :class:`~scenefactory.scenes.womd.batch.ConvertInterrupted` on SIGINT/SIGTERM once the workers
    have ended and ``summary.json``/``index.json`` are written (see ``scenes.womd.batch``).
    """
    fmts = parse_formats(args.formats)
    files = prepare(args.inputs, args.out)  # user errors surface here, before the progress bar starts
    if args.ray_address is not None:
        check_ray_address(args.ray_address)  # an unreachable cluster: one line, not minutes of retries
    with progress_bar() as bar:
        job = bar.add_task("convert", total=len(files), info="")
        done = [0, 0, 0]

        def on_shard(rep: dict[str, Any]) -> None:
            done[0] += 1
            done[1] += len(rep["converted"])
            done[2] += len(rep["errors"])
            bar.update(job, completed=done[0], info=f"{done[1]} scenes, {done[2]} errors")

        return convert_files(
            files,
            args.out,
            fmts,
            args.workers,
            args.max_agents,
            on_shard,
            args.ray_address,
            args.eval_fraction,
            prepare_scene=warm_road_cache if "json" in fmts else None,
        )


# ---------------------------------------------------------------------------------------- collect


@dataclass(frozen=True, kw_only=True)
class CollectArgs:
    """Arguments of ``collect drive``: ``steps`` policy steps of ``worlds`` x ``agents`` agents on
    :data:`COLLECT_SCENES` procedural scenes from ``seed``, driven by a policy mix (around the
    policy of ``checkpoint``, if given) on ``engine``."""

    out: Path
    engine: EngineSpec = field(default_factory=lambda: EngineSpec("mujoco"))
    worlds: int = 32
    agents: int = 4
    steps: int = 200
    seed: int = 0
    checkpoint: Path | None = None


def collect(args: CollectArgs) -> dict[str, Any]:
    """A transition dataset (see ``grounding.dataset``); returns its ``meta.json`` document."""
    if args.checkpoint is not None:
        load_policy(args.checkpoint)  # a foreign or unsafe checkpoint fails before any work
    with progress_bar() as bar:
        job = bar.add_task(f"collect ({args.engine.tier})", total=args.steps, info="")
        return dataset.collect(
            args.out,
            engine=args.engine,
            worlds=args.worlds,
            agents=args.agents,
            steps=args.steps,
            seed=args.seed,
            checkpoint=args.checkpoint,
            num_scenes=COLLECT_SCENES,
            progress=lambda done, total: bar.update(job, completed=done),
        )


@dataclass(frozen=True, kw_only=True)
class CollectLogsArgs:
    """Arguments of ``collect logs``: the converted scenes of ``scenes_dir`` (its ``scene_split``)."""

    scenes_dir: Path
    out: Path
    scene_split: str = "all"


def collect_logs(args: CollectLogsArgs) -> dict[str, Any]:
    """Converted scenes' logged trajectories as a transition dataset (see
    ``grounding.log_dataset``); returns its ``meta.json`` document."""
    source = str(args.scenes_dir) + ("" if args.scene_split == "all" else f" split={args.scene_split}")
    return write_log_dataset(load_scene_dir(args.scenes_dir, args.scene_split), args.out, source=source)


# ------------------------------------------------------------------------------ fit and ground


@dataclass(frozen=True, kw_only=True)
class FitDynamicsArgs:
    """Arguments of ``fit-dynamics``: a ``model`` (mlp, gru, transformer or residual) reading
    ``history`` steps (``None``: the model's default) fitted for ``epochs`` on the dataset folder
    ``data``."""

    data: Path
    out: Path
    model: str = "mlp"
    history: int | None = None
    epochs: int = 10
    seed: int = 0


def fit_dynamics(args: FitDynamicsArgs) -> dict[str, Any]:
    """Train a dynamics model; returns its held-out errors beside the kinematic bicycle's
    (``metrics.json``)."""
    cfg = DynamicsModelConfig(kind=model_kind(args.model), history_len=args.history)
    transitions = dataset.load_transitions(args.data, min_episodes=2)  # read and checked once, before the bar
    with progress_bar() as bar:
        job = bar.add_task(f"fit-dynamics ({args.model})", total=args.epochs, info="")
        result = fit_model(
            args.data,
            cfg,
            args.out,
            epochs=args.epochs,
            seed=args.seed,
            progress=lambda e, n, loss: bar.update(job, completed=e, info=f"loss {loss:.4f}"),
            dataset=transitions,
        )
    return result.metrics


@dataclass(frozen=True, kw_only=True)
class GroundArgs:
    """Arguments of ``ground``: one grounding ``method`` (none, dr, sysid, markov, gat, history)
    fitted on the target dataset ``data`` with at most ``budget`` of its transitions (``None``:
    all), networks trained ``steps`` steps; ``alpha`` is gat's action mix, ``history`` the steps
    the history method's GRU reads."""

    method: str
    data: Path
    out: Path
    budget: int | None = None
    seed: int = 0
    steps: int = 2000
    alpha: float = 0.5
    history: int = 8

    def config(self) -> GroundConfig:
        """The fit's :class:`~scenefactory.grounding.ground.GroundConfig` (an unknown method is a
        ``UserError`` listing the methods)."""
        return GroundConfig(
            method=method_from_name(self.method),
            budget=self.budget,
            seed=self.seed,
            train_steps=self.steps,
            gat_alpha=self.alpha,
            history_len=self.history,
        )


def ground(args: GroundArgs) -> dict[str, Any]:
    """Fit the grounding method on the target data and print its held-out errors next to the
    uncorrected bicycle's; returns the grounding folder's ``config.json`` document."""
    cfg = args.config()
    target = load_target(args.data, cfg)  # read and checked once, before the progress bar
    with progress_bar() as bar:
        job = bar.add_task(f"ground ({cfg.method.value})", total=None, info="")

        def on_progress(done: int, total: int, info: str) -> None:
            bar.update(job, completed=done, total=total, info=info)

        result = fit_grounding(args.data, cfg, args.out, progress=on_progress, dataset=target)
    held = result.config["heldout"]
    rows = [
        (f"grounded ({cfg.method.value})", held["grounded"]),
        ("kinematic bicycle", held["kinematic_bicycle"]),
    ]
    console.print(
        f"held-out errors on {held['episodes']} episodes ({held['transitions']} transitions); "
        f"budget {result.config['budget_transitions']} target transitions"
    )
    console.print(
        f"{'model':<22} {'1-step m':>9} {'yaw rad':>8} {'speed m/s':>9} {'10-step m':>9} {'20-step m':>9}"
    )
    for label, m in rows:
        console.print(
            f"{label:<22} {m['pos_err_m']:>9.4f} {m['yaw_err_rad']:>8.4f} {m['speed_err_mps']:>9.4f} "
            f"{m['rollout10_pos_err_m']:>9.3f} {m['rollout20_pos_err_m']:>9.3f}"
        )
    if "fitted" in result.config["fit"]:
        console.print(f"fitted knobs: {result.config['fit']['fitted']}")
    return result.config
