"""What every experiment shares: its arguments and sizes, stages that a resumed run reuses,
policies (given as checkpoints or trained here, one per seed), pooled evaluation with confidence
intervals, and differences between two conditions with their intervals.

Trainings and evaluations are :class:`~scenefactory.experiments.ray_backend.Job` lists run by the
experiment's executor: here, one after the other, or as tasks on a Ray cluster (``--ray``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from rich.console import Console

from scenefactory.bounds import check_scene_range
from scenefactory.engines.spec import TIERS, EngineSpec
from scenefactory.errors import UserError
from scenefactory.evaluation.plots import plot_learning_curve
from scenefactory.evaluation.rollout import evaluate
from scenefactory.experiments.ray_backend import LOCAL, Executor, Job, executor_for
from scenefactory.experiments.results import (
    Cell,
    Difference,
    Metrics,
    PolicyFigures,
    Reader,
    ResultsFieldError,
)
from scenefactory.io import json_safe, write_json
from scenefactory.rl.driving import IterationStats, Trainer, load_policy
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.rl.ppo import PPOConfig
from scenefactory.scenes.friction import RoadCondition
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.stats import Z95
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import FinishedEpisodes
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize

console = Console(stderr=True)


@dataclass(frozen=True)
class Sizes:
    """How big a run is.

    ``seeds`` training seeds per policy kind (each trains one policy; given checkpoints replace
    them); a training run of ``train_worlds`` × ``train_agents`` agents for ``iterations`` PPO
    iterations on ``train_scenes`` procedural scenes; ``episodes`` held-out scenes per evaluation,
    played ``eval_worlds`` at a time.
    """

    seeds: int
    train_worlds: int
    train_agents: int
    iterations: int
    train_scenes: int
    episodes: int
    eval_worlds: int = 64

    def __post_init__(self) -> None:
        """Every size must be a positive integer."""
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"experiment size {name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class ExperimentArgs:
    """The command line of ``scenefactory experiment NAME``.

    ``checkpoints`` are ``(kind, path)`` pairs (``--checkpoint KIND=PATH``, repeatable: one policy
    per pair; the kinds an experiment knows are in its ``kinds``); ``seeds``, ``episodes`` and
    ``iterations`` override the experiment's sizes; ``sizes`` replaces its presets wholesale
    (tests, scripts); ``command`` is the command as typed, quoted in the report.
    ``action_lag_steps`` (target actuator lag [policy steps]), ``budget`` (target transitions a
    grounding fit may use) and ``dynamics_models`` (``(kind, path)`` pairs of fitted ``model.pt``
    files, ``--dynamics-model KIND=PATH``) are options of the experiments that list them in
    :attr:`Experiment.options`; ``None`` / empty: the experiment's default. ``ray`` (``--ray
    ADDRESS``): run the trainings and evaluations as tasks on the Ray cluster there
    (:mod:`~scenefactory.experiments.ray_backend`; ``None``: in this process).
    """

    out: Path
    quick: bool = False
    seeds: int | None = None
    seed: int = 0
    checkpoints: tuple[tuple[str, Path], ...] = ()
    episodes: int | None = None
    iterations: int | None = None
    scenes_dir: Path | None = None
    command: str = ""
    sizes: Sizes | None = None
    action_lag_steps: int | None = None
    budget: int | None = None
    dynamics_models: tuple[tuple[str, Path], ...] = ()
    ray: str | None = None

    def executor(self) -> Executor:
        """Where the trainings and evaluations run: here, or on the ``ray`` cluster (connected once)."""
        return executor_for(self.ray, self.out)

    def options_set(self) -> list[str]:
        """The experiment-specific options given (flag names), to check against :attr:`Experiment.options`."""
        given = {
            "--action-lag-steps": self.action_lag_steps is not None,
            "--budget": self.budget is not None,
            "--dynamics-model": bool(self.dynamics_models),
        }
        return [flag for flag, on in given.items() if on]

    def resolve(self, full: Sizes, quick: Sizes) -> Sizes:
        """The run's sizes: ``sizes``, or the quick or full preset, with the flag overrides."""
        base = self.sizes or (quick if self.quick else full)
        sizes = replace(
            base,
            seeds=self.seeds or base.seeds,
            episodes=self.episodes or base.episodes,
            iterations=self.iterations or base.iterations,
        )
        self.check_scene_range(sizes)
        return sizes

    def check_scene_range(self, sizes: Sizes) -> None:
        """``UserError`` naming the flags unless the procedural scenes of a run at ``sizes`` stay in
        their seed ranges: each trained seed ``s`` trains on scenes ``s .. s + train_scenes − 1``
        of the training range, and every evaluation plays ``--seed .. --seed + episodes − 1``."""
        n = sizes.seeds - 1 + sizes.train_scenes
        check_scene_range(
            "train",
            self.seed,
            n,
            f"--seed {self.seed} with --seeds {sizes.seeds} of {sizes.train_scenes} scenes each",
        )
        check_scene_range(
            "eval", self.seed, sizes.episodes, f"--seed {self.seed} with --episodes {sizes.episodes}"
        )

    def checkpoints_by_kind(self, kinds: Sequence[str]) -> dict[str, list[Path]]:
        """Given checkpoints grouped by kind; an unknown kind, a missing, unsafe or foreign file is a
        ``UserError``."""
        out: dict[str, list[Path]] = {k: [] for k in kinds}
        for kind, path in self.checkpoints:
            if kind not in out:
                expected = f"KIND in {tuple(kinds)}" if kinds else "no --checkpoint at all"
                raise UserError(
                    f"--checkpoint kind '{kind}' unknown for this experiment: expected {expected}"
                )
            if not Path(path).exists():
                raise UserError(f"--checkpoint {kind}={path}: checkpoint not found")
            try:  # read (safely) and checked now: a bad file fails before any training
                trained_on = load_policy(path).meta.get("engine")
            except UserError as exc:
                raise UserError(f"--checkpoint {kind}={path}: {exc}") from None
            if kind in TIERS and trained_on is not None and trained_on != kind:
                raise UserError(
                    f"--checkpoint {kind}={path}: the policy was trained on {trained_on}, "
                    f"expected a {kind}-trained one for KIND {kind}"
                )
            out[kind].append(Path(path))
        return out


# ------------------------------------------------------------------------------------ policies


STAGE_FILE = "stage.json"


def _canonical(key: Mapping[str, Any]) -> Any:
    """``key`` as it reads back from JSON (tuples become lists, paths strings)."""
    return json.loads(json.dumps(json_safe(key), default=str))


def finished_stage(folder: Path, key: Mapping[str, Any]) -> dict[str, Any] | None:
    """The result a stage (a data collection, a model fit) left in ``folder`` when it finished
    with the inputs ``key``; ``None`` when it must run: it never finished there (no
    ``stage.json``: it crashed or was stopped midway) or it ran with other inputs."""
    path = folder / STAGE_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != _canonical(key):
        return None
    result = doc.get("result")
    return result if isinstance(result, dict) else None


def start_stage(folder: Path) -> None:
    """Forget a finished stage in ``folder`` before it runs again (a crash midway must not leave
    the old ``stage.json`` beside new, half-written files)."""
    (folder / STAGE_FILE).unlink(missing_ok=True)


def finish_stage(folder: Path, key: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """Record, atomically and last, that the stage in ``folder`` finished with inputs ``key``;
    a rerun with the same inputs reuses ``result`` (:func:`finished_stage`)."""
    write_json(folder / STAGE_FILE, {"key": _canonical(key), "result": result})


class JsonForm(Protocol):
    """A result with a JSON form (read back by its class's ``from_json(Reader)``)."""

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        ...


S = TypeVar("S", bound=JsonForm)


def staged(
    folder: Path,
    key: Mapping[str, Any],
    run: Callable[[], S],
    read: Callable[[Reader], S],
    record: bool = True,
) -> tuple[S, bool]:
    """``(result, reused)``: the result of the stage that finished in ``folder`` with inputs
    ``key`` (its recorded JSON form read back by ``read``), or ``run()``'s, recorded for the next
    run (unless ``record`` is false: inputs that cannot be told apart, such as data without a stage
    record, are never reused). A finished record this version cannot read is a ``UserError``
    naming the file and the field: rerunning the stage would change what later stages were built
    on, so deleting the folder is the user's call."""
    done = finished_stage(folder, key) if record else None
    if done is not None:
        try:
            return read(Reader(done, "result")), True
        except ResultsFieldError as exc:
            raise UserError(
                f"{folder / STAGE_FILE}: {exc} (delete {folder} to redo this stage and what was built on it)"
            ) from None
    start_stage(folder)
    result = run()
    if record:
        finish_stage(folder, key, result.to_json())
    return result, False


def stage_record(folder: Path) -> str | None:
    """The record of the stage that finished in ``folder`` (the key of the stages built on its
    output), ``None`` when none did."""
    path = folder / STAGE_FILE
    return path.read_text() if path.is_file() else None


def train_policy(spec: TrainSpec, scenes: Sequence[Scene], out: Path, label: str) -> Path:
    """Train (or resume) one policy with :class:`~scenefactory.rl.ppo.Trainer`; returns its
    ``latest.pt``. A log line every 10 iterations."""
    trainer = Trainer(spec, scenes, out)
    t0 = time.perf_counter()
    tier = spec.engine.tier
    console.print(
        f"[bold]{label}[/]: training {spec.iterations} iterations on {engine_name(spec.engine)} in {out}"
    )

    def on_iteration(s: IterationStats) -> None:
        if s.iteration % 10 == 0 or s.iteration == spec.iterations:
            goal = s.metrics.get("goal_reach_rate", float("nan"))
            console.print(
                f"  {label} iteration {s.iteration}/{spec.iterations}: reward {s.mean_reward:.2f}, "
                f"goal {goal:.2f} ({time.perf_counter() - t0:.0f} s)"
            )

    trainer.run(on_iteration)
    plot_learning_curve(trainer.history, out / "learning_curve.png", title=f"{label} ({tier})")
    return trainer.ckpt_dir / "latest.pt"


def train_job(spec: TrainSpec, out: Path, label: str) -> Path:
    """One training (a :class:`~scenefactory.experiments.ray_backend.Job`): on ``spec.num_train_scenes``
    procedural training scenes from ``spec.seed``, into ``out``; returns its ``latest.pt``."""
    scenes = procedural_scenes(
        "train", spec.num_train_scenes, spec.task.agents_per_world, base_seed=spec.seed
    )
    return train_policy(spec, scenes, out, label)


def train_all(
    kinds: Mapping[str, tuple[Sequence[Path], Callable[[int], TrainSpec]]],
    args: ExperimentArgs,
    sizes: Sizes,
) -> dict[str, list[Path]]:
    """The policies of each kind (``kind: (given checkpoints, make_spec)``): the given checkpoints,
    or one trained per seed ``args.seed … args.seed + sizes.seeds − 1`` into
    ``out/train/<kind>_s<seed>``; every (kind, seed) training is one job of the experiment's
    executor (all at once on a Ray cluster)."""
    out: dict[str, list[Path]] = {kind: list(given) for kind, (given, _) in kinds.items()}
    jobs: list[Job[Path]] = []
    owners: list[str] = []
    for kind, (given, make_spec) in kinds.items():
        if given:
            continue
        for seed in range(args.seed, args.seed + sizes.seeds):
            folder = args.out / "train" / f"{kind}_s{seed}"
            jobs.append(
                Job(
                    f"training ({kind}, seed {seed})",
                    train_job,
                    (make_spec(seed), folder, f"{kind} seed {seed}"),
                )
            )
            owners.append(kind)
    executor = args.executor()
    if executor.remote and jobs:
        console.print(f"{len(jobs)} trainings as tasks on the Ray cluster at {args.ray} ...")

    def done(i: int, path: Path) -> None:
        if executor.remote:
            console.print(f"  {jobs[i].what}: {path}")

    for kind, path in zip(owners, executor.run(jobs, done), strict=True):
        out[kind].append(path)
    return out


def policies(
    kind: str,
    given: Sequence[Path],
    make_spec: Callable[[int], TrainSpec],
    args: ExperimentArgs,
    sizes: Sizes,
) -> list[Path]:
    """The policies of one kind: the given checkpoints, or one trained per seed (:func:`train_all`)."""
    return train_all({kind: (given, make_spec)}, args, sizes)[kind]


def train_spec(
    engine: EngineSpec, sizes: Sizes, seed: int, task: DrivingTaskConfig | None = None
) -> TrainSpec:
    """The :class:`~scenefactory.rl.ppo.TrainSpec` of a policy trained on ``engine`` at ``sizes``:
    ``task`` (default: the demo's driving task with the sizes' worlds and agents) and the default
    PPO settings, on ``sizes.train_scenes`` procedural scenes."""
    if task is None:
        task = DrivingTaskConfig(num_worlds=sizes.train_worlds, agents_per_world=sizes.train_agents)
    return TrainSpec(
        task=task,
        ppo=PPOConfig(),
        engine=engine,
        iterations=sizes.iterations,
        seed=seed,
        num_train_scenes=sizes.train_scenes,
    )


def training_seeds(given: Sequence[Path], args: ExperimentArgs, sizes: Sizes) -> list[int] | str:
    """What the report says about a kind's seeds: the list trained here, or 'given checkpoints'."""
    return "given checkpoints" if given else list(range(args.seed, args.seed + sizes.seeds))


# ---------------------------------------------------------------------------------- evaluation


def engine_name(engine: EngineSpec) -> str:
    """How logs and reports name an engine: its tier, with its actuator lag where it has one."""
    lag = engine.action_lag_steps
    return engine.tier + (f" + lag {lag}" if lag else "")


def on_road(scene: Scene, road: RoadCondition) -> Scene:
    """``scene`` with its road replaced: surface, water film and the friction they give."""
    return replace(scene, surface=road.surface, water_film_mm=road.water_film_mm, friction=road.mu)


@dataclass(frozen=True)
class Pooled:
    """Agent-episodes of several policies on the same scenes: the pooled ``metrics`` (keys as in
    ``metrics.json``, with 95 % CIs, plus ``scenes`` and ``policies``), each policy's own figures,
    and the pooled records."""

    metrics: dict[str, Any]
    policies: tuple[PolicyFigures, ...]
    records: FinishedEpisodes

    def cell(self, kind: str, eval_tier: str, condition: str = "", train_wall_s: float | None = None) -> Cell:
        """These evaluations as the cell of policies of ``kind`` on ``eval_tier`` under ``condition``."""
        return Cell(kind, eval_tier, condition, self.metrics, self.policies, train_wall_s)


def evaluate_job(
    ckpt: Path, task: DrivingTaskConfig, scenes: list[Scene], engine: EngineSpec, seed: int, eval_worlds: int
) -> tuple[PolicyFigures, list[FinishedEpisodes]]:
    """One policy's evaluation (a :class:`~scenefactory.experiments.ray_backend.Job`): deterministic
    actions of ``ckpt``'s policy under ``task`` on ``scenes``; its figures and agent-episode records."""
    policy = load_policy(ckpt)
    t0 = time.perf_counter()
    metrics, log = evaluate(policy.act, task, scenes, engine=engine, num_worlds=eval_worlds, seed=seed)
    figures = PolicyFigures(
        checkpoint=str(ckpt),
        trained_on=policy.meta.get("engine"),
        trained_seed=policy.meta.get("seed"),
        trained_iterations=policy.meta.get("iteration"),
        wall_s=time.perf_counter() - t0,
        metrics=metrics,
    )
    return figures, log.parts


def evaluate_pooled(
    checkpoints: Sequence[Path],
    scenes_for: Callable[[int], list[Scene]],
    engine: EngineSpec,
    seed: int,
    eval_worlds: int,
    edit_task: Callable[[DrivingTaskConfig], DrivingTaskConfig] = lambda t: t,
    label: str = "",
    executor: Executor = LOCAL,
) -> Pooled:
    """Evaluate every checkpoint (deterministic actions) on ``scenes_for(agents_per_world)`` with
    its task config passed through ``edit_task``, on ``engine`` (its actuator lag included); pool
    the agent-episodes of all of them. ``edit_task`` and ``scenes_for`` run here; each policy's
    evaluation is one job of ``executor`` (:func:`evaluate_job`)."""
    name = engine_name(engine)
    jobs = []
    for i, ckpt in enumerate(checkpoints):
        task = edit_task(load_policy(ckpt).task_cfg)
        what = f"evaluation of {label} policy {i + 1}/{len(checkpoints)} ({ckpt}) on {name}"
        scenes = scenes_for(task.agents_per_world)
        jobs.append(Job(what, evaluate_job, (Path(ckpt), task, scenes, engine, seed, eval_worlds)))

    def done(i: int, result: tuple[PolicyFigures, list[FinishedEpisodes]]) -> None:
        figures, metrics = result[0], result[0].metrics
        console.print(
            f"  {label} policy {i + 1}/{len(checkpoints)} on {name}: "
            f"goal {metrics['goal_reach_rate']:.3f}, collision {metrics['collision_rate']:.3f}, "
            f"peak DRAC {metrics['mean_peak_drac_mps2']:.2f} m/s² "
            f"({metrics['episodes']} agent-episodes, {figures.wall_s:.0f} s)"
        )

    pooled, per_policy = EpisodeLog(), []
    for figures, parts in executor.run(jobs, done):
        per_policy.append(figures)
        pooled.parts.extend(parts)
    records = pooled.cat()
    out = summarize(records)
    out["scenes"] = per_policy[0].metrics["scenes"] if per_policy else 0
    out["policies"] = len(per_policy)
    return Pooled(out, tuple(per_policy), records)


def rate_difference(a: Metrics, b: Metrics, key: str) -> Difference:
    """``a[key] − b[key]`` for a rate over independent agent-episodes, with a normal (Wald) 95 %
    interval: ± z·√(p_a(1−p_a)/n_a + p_b(1−p_b)/n_b)."""
    pa, na, pb, nb = a[key], a["episodes"], b[key], b["episodes"]
    if not (na and nb):
        return Difference(math.nan, (math.nan, math.nan))
    half = Z95 * math.sqrt(pa * (1 - pa) / na + pb * (1 - pb) / nb)
    d = pa - pb
    return Difference(d, (d - half, d + half))


def mean_difference(a: torch.Tensor, b: torch.Tensor) -> Difference:
    """``mean(a) − mean(b)`` with a normal (Welch) 95 % interval: ± z·√(s_a²/n_a + s_b²/n_b)."""
    if a.numel() < 2 or b.numel() < 2:
        return Difference(math.nan, (math.nan, math.nan))
    a, b = a.double(), b.double()
    d = float(a.mean() - b.mean())
    half = Z95 * math.sqrt(float(a.var()) / a.numel() + float(b.var()) / b.numel())
    return Difference(d, (d - half, d + half))
