"""Build the batched environments from a config, scenes and an engine: the public entry points.

:func:`make_driving_env` returns a :class:`~scenefactory.tasks.driving.env.DrivingEnv` (W worlds ×
K agents, stepped with ``(W, K, 2)`` actions); :func:`make_go1_env` a
:class:`~scenefactory.go1.env.Go1Env` (N robots, ``(N, 12)`` actions). Both are the environments the
CLI trains and evaluates on, not copies of them; the Gymnasium and PettingZoo views of them live in
:mod:`scenefactory.api.gym_vector` and :mod:`scenefactory.api.parallel_env`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

import torch

from scenefactory import inputs
from scenefactory.bounds import AGENTS, DRIVE_SEED, ENVS, SCENE_COUNT, SEED, check_scene_range
from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.env import Go1Env
from scenefactory.scenes.library import SCENE_SPLITS, load_scene_dir, procedural_scenes
from scenefactory.scenes.procedural_params import DEFAULT_SIGNAL_CYCLE_S
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_checks import check_scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv

DEFAULT_NUM_SCENES = 120
"""Procedural training scenes built when no scenes are given (as many as ``train drive`` builds)."""

DEFAULT_ENGINE = EngineSpec()
"""The kinematic bicycle tier: no model files, the fastest engine."""


def driving_scenes(
    scenes: Sequence[Scene] | str | os.PathLike[str] | None,
    agents_per_world: int,
    seed: int = 0,
    num_scenes: int | None = None,
    scene_split: str = "all",
    traffic_signals: bool = False,
) -> list[Scene]:
    """The scenes a driving environment draws from.

    - ``None``: ``num_scenes`` (default :data:`DEFAULT_NUM_SCENES`) procedural scenes of the
      training split (seeds ``seed, seed + 1, ...``), each with up to ``agents_per_world`` agents,
      their junctions signalled when the task observes ``traffic_signals``;
    - a folder (``str`` or path): its ``*.json`` scenes (``scenefactory convert`` writes them), the
      ``scene_split`` of them (``"all"``, ``"train"`` or ``"eval"``), the first ``num_scenes`` only
      when given;
    - a sequence of :class:`~scenefactory.scenes.scene.Scene`: those, as they are.

    Raises ``UserError`` for an empty scene list, and for ``num_scenes``/``scene_split`` given with
    a list of scenes (they would be ignored).
    """
    if scene_split not in SCENE_SPLITS:
        raise UserError(f"scene_split must be one of {list(SCENE_SPLITS)}, got {scene_split!r}")
    if num_scenes is not None:
        SCENE_COUNT.check(num_scenes, "num_scenes (--train-scenes)")
    if scenes is None:
        if scene_split != "all":
            raise UserError("scene_split selects scenes of a folder; procedural scenes have no split")
        AGENTS.check(agents_per_world, "agents_per_world with procedural scenes (--agents)")
        DRIVE_SEED.check(seed, "seed with procedural scenes (--seed)")
        cycle = DEFAULT_SIGNAL_CYCLE_S if traffic_signals else 0.0
        n = DEFAULT_NUM_SCENES if num_scenes is None else num_scenes
        check_scene_range("train", seed, n, f"seed {seed} with num_scenes {n}")
        return procedural_scenes("train", n, agents_per_world, base_seed=seed, signal_cycle_s=cycle)
    if isinstance(scenes, str | os.PathLike):
        return load_scene_dir(scenes, scene_split, num_scenes)
    if num_scenes is not None or scene_split != "all":
        raise UserError(
            "num_scenes and scene_split choose procedural or folder scenes; "
            f"got a list of {len(scenes)} scenes as well (slice the list instead)"
        )
    out = list(scenes)
    if not out:
        raise UserError("scenes is an empty list: a driving environment needs at least one scene")
    bad = [type(s).__name__ for s in out if not isinstance(s, Scene)]
    if bad:
        raise UserError(f"scenes must be Scene objects (or a folder path), got {sorted(set(bad))}")
    for i, sc in enumerate(out):  # the whole-scene checks a scene file gets (extent, surface, ...)
        check_scene(sc, f"scenes[{i}] ('{sc.name}')")
    return out


def make_driving_env(
    task: DrivingTaskConfig | None = None,
    scenes: Sequence[Scene] | str | os.PathLike[str] | None = None,
    engine: EngineSpec | Engine = DEFAULT_ENGINE,
    seed: int = 0,
    device: str | torch.device = "cpu",
    *,
    num_scenes: int | None = None,
    scene_split: str = "all",
    sequential_scenes: bool = False,
) -> DrivingEnv:
    """A batched driving environment: ``task.num_worlds`` worlds × ``task.agents_per_world`` agents.

    ``task`` defaults to :class:`DrivingTaskConfig` (64 × 8); ``scenes`` are resolved by
    :func:`driving_scenes` (default: procedural training scenes drawn with ``seed``); ``engine`` is an
    :class:`EngineSpec` (the tier and its settings) or an engine already built for
    ``num_worlds × agents_per_world`` agents. ``seed`` seeds the scene draws at world resets (and the
    procedural scenes). ``sequential_scenes`` hands the scenes out in order instead of at random
    (evaluation). Step it with ``env.step(actions)``, ``actions`` (W, K, 2) in [-1, 1]
    (steer, accel), which returns a :class:`~scenefactory.tasks.driving.env.StepResult`.

    Every argument is checked against the CLI's bounds (``scenefactory.bounds.API_ARGUMENTS``):
    ``seed`` in [0, 2**32 - 1] (procedural scenes: their seed range), ``device`` ``"cpu"`` or an
    available ``"cuda[:N]"``; a wrong one is an ``ArgumentError`` naming it.
    """
    task = DrivingTaskConfig() if task is None else task
    if not isinstance(task, DrivingTaskConfig):
        raise UserError(f"task: expected a DrivingTaskConfig, got {type(task).__name__}")
    if not isinstance(engine, EngineSpec | Engine):
        raise UserError(
            f"engine: expected an EngineSpec (e.g. EngineSpec(tier='mujoco')) or an Engine, got {engine!r}"
        )
    SEED.check(seed, "seed (--seed)")
    dev = inputs.device(device)
    chosen = driving_scenes(
        scenes,
        task.agents_per_world,
        seed,
        num_scenes,
        scene_split,
        traffic_signals=task.observations.traffic_signals,
    )
    return DrivingEnv(task, chosen, engine=engine, seed=seed, device=dev, sequential_scenes=sequential_scenes)


def make_go1_env(
    cfg: Go1TaskConfig | None = None,
    num_envs: int | None = None,
    seed: int = 0,
    nthread: int | None = None,
    randomize_episode_start: bool = False,
) -> Go1Env:
    """A batched Go1 velocity-tracking environment: N robots, each in its own MuJoCo world.

    ``cfg`` defaults to :class:`Go1TaskConfig` (domain randomization, pushes and sensor noise on;
    :func:`~scenefactory.go1.config.nominal` turns them off); ``num_envs``, when given, replaces
    ``cfg.num_envs``. ``nthread`` MuJoCo threads (default: torch's thread count); ``randomize_episode_start``
    spreads the robots' episode clocks (training, so time-outs do not all come at once). Step it with
    ``env.step(actions)``, ``actions`` (N, 12), which returns a :class:`~scenefactory.go1.env.LocoStep`.
    """
    cfg = Go1TaskConfig() if cfg is None else cfg
    if not isinstance(cfg, Go1TaskConfig):
        raise UserError(f"cfg: expected a Go1TaskConfig, got {type(cfg).__name__}")
    if num_envs is not None:
        cfg = replace(cfg, num_envs=ENVS.check(num_envs, "num_envs (--envs)"))
    ENVS.check(cfg.num_envs, "Go1TaskConfig.num_envs (--envs)")
    SEED.check(seed, "seed (--seed)")
    return Go1Env(cfg, seed=seed, nthread=nthread, randomize_episode_start=randomize_episode_start)
