"""The public Python API (``scenefactory.api``): the factories build the real environments from a
config, scenes and an engine spec, reject what they would otherwise ignore, and the example of the
docs page "Your own training loop" (docs/tutorials/python-api.md) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import scenefactory.api as api
from scenefactory.api import (
    DrivingEnv,
    DrivingTaskConfig,
    EngineSpec,
    Go1Env,
    Go1TaskConfig,
    UserError,
    driving_scenes,
    make_driving_env,
    make_go1_env,
    nominal,
    procedural_scenes,
    with_traffic_signals,
)
from scenefactory.scenes.scene_json import save_scene

ROOT = Path(__file__).resolve().parents[2]
TASK = DrivingTaskConfig(num_worlds=2, agents_per_world=3, episode_length_s=3.0)


def test_all_names_resolve_and_nothing_else_is_exported() -> None:
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    public = {n for n in vars(api) if not n.startswith("_")}
    # the package's submodules are attributes too once imported; everything else is in __all__
    assert public - set(api.__all__) <= {"envs", "arrays", "gym_vector", "parallel_env"}


def test_make_driving_env_builds_the_batch_and_steps_it() -> None:
    env = make_driving_env(TASK, seed=0, num_scenes=4)
    assert isinstance(env, DrivingEnv)
    assert (env.num_worlds, env.agents_per_world) == (2, 3)
    assert env.pool.num_scenes == 4
    assert env.engine.dt == pytest.approx(TASK.dt_s)
    res = env.step(torch.rand(2, 3, 2) * 2 - 1)
    assert res.obs.shape == (2, 3, env.obs_dim)
    assert res.reward.shape == res.done.shape == (2, 3)


def test_default_scenes_follow_the_seed() -> None:
    a = make_driving_env(TASK, seed=3, num_scenes=4).observations()
    b = make_driving_env(TASK, seed=3, num_scenes=4).observations()
    c = make_driving_env(TASK, seed=4, num_scenes=4).observations()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_scene_folder_by_str_or_path_with_a_limit(tmp_path: Path) -> None:
    for i, scene in enumerate(procedural_scenes("eval", 3, 3)):
        save_scene(scene, tmp_path / f"s{i}.json")
    assert make_driving_env(TASK, str(tmp_path)).pool.num_scenes == 3
    assert make_driving_env(TASK, tmp_path, num_scenes=2).pool.num_scenes == 2
    with pytest.raises(UserError, match="does not exist"):
        make_driving_env(TASK, tmp_path / "missing")


def test_scene_arguments_that_would_be_ignored_are_errors() -> None:
    scenes = procedural_scenes("train", 2, 3)
    with pytest.raises(UserError, match="num_scenes and scene_split"):
        driving_scenes(scenes, 3, num_scenes=1)
    with pytest.raises(UserError, match="procedural scenes have no split"):
        driving_scenes(None, 3, scene_split="eval")
    with pytest.raises(UserError, match="scene_split must be one of"):
        driving_scenes(None, 3, scene_split="test")
    with pytest.raises(UserError, match="empty list"):
        driving_scenes([], 3)
    with pytest.raises(
        UserError, match=r"num_scenes \(--train-scenes\): expected an integer in \[1, 10000\], got 0"
    ):
        driving_scenes(None, 3, num_scenes=0)
    with pytest.raises(UserError, match=r"Scene objects.*'str'"):
        driving_scenes([scenes[0], "road.json"], 3)


def test_an_engine_spec_is_built_for_the_task() -> None:
    env = make_driving_env(
        TASK, procedural_scenes("train", 2, 3), engine=EngineSpec("kinematic", action_lag_steps=1)
    )
    assert type(env.engine).__name__ == "LaggedEngine"
    with pytest.raises(UserError, match="needs --dynamics-model"):
        make_driving_env(TASK, procedural_scenes("train", 2, 3), engine=EngineSpec("learned"))


def test_traffic_signal_tasks_get_signalled_procedural_junctions() -> None:
    plain = make_driving_env(TASK, num_scenes=6)
    signalled = make_driving_env(with_traffic_signals(TASK), num_scenes=6)
    assert plain.num_stops == 0
    assert signalled.num_stops > 0


def test_make_go1_env_overrides_the_robot_count() -> None:
    env = make_go1_env(nominal(Go1TaskConfig()), num_envs=3, seed=1)
    assert isinstance(env, Go1Env)
    assert env.num_envs == env.cfg.num_envs == 3
    step = env.step(torch.zeros(3, 12))
    assert step.actor_obs.shape == (3, env.cfg.history * 45)
    with pytest.raises(ValueError, match=r"num_envs \(--envs\): expected an integer in \[1, 16384\], got 0"):
        make_go1_env(num_envs=0)


PYTHON_API_PAGE = ROOT / "docs" / "tutorials" / "python-api.md"


def readme_example() -> str:
    """The first ``python`` code block of the Python API page (it was the README's section)."""
    text = PYTHON_API_PAGE.read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None, f"{PYTHON_API_PAGE} has no python code block"
    return block.group(1)


def test_the_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(readme_example(), str(PYTHON_API_PAGE), "exec"), namespace)
    # what the example reads at the end: the task's metrics and the Gymnasium view's batch
    assert 0.0 <= float(namespace["metrics"]["goal_reach_rate"]) <= 1.0
    assert namespace["obs"].shape == (namespace["vec"].num_envs, namespace["env"].obs_dim)
