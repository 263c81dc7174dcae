"""Keeping worlds busy on scenes of varied agent counts.

- Controlled agents beyond a world's K slots are replayed from their scene's log (not dropped):
  the driven agents see them as neighbours and collide with them; a scene without a log is
  truncated as before.
- ``agents_per_world_for``: the largest K whose worlds start at least ``min_fill`` full on average.
- The training reset policy (``min_active_fraction``): a world resets once fewer than that
  fraction of its starting agents are active, the survivors ending as time-outs; the default 0
  changes nothing, and evaluation never uses it.
- ``bench drive --scenes DIR`` (with ``--agents auto`` and the reset policy) reports the active
  slot fraction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scene_fixtures import straight_scene
from scenefactory.cli import main
from scenefactory.evaluation.rollout import evaluate
from scenefactory.jobs import drive
from scenefactory.rl.driving import Trainer
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.rl.ppo import PPOConfig
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import AgentLog, Scene
from scenefactory.scenes.scene_json import save_scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, task_config_to_dict
from scenefactory.tasks.driving.env import DrivingEnv, StepResult
from scenefactory.tasks.driving.observations import NEIGHBOR_FEATURES
from scenefactory.tasks.driving.slots import agents_per_world_for, initial_fill
from scenefactory.tasks.driving.status import AgentStatus

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def logged(scene: Scene, steps: int = 60) -> Scene:
    """``scene`` with a log in which every agent drives straight on at its spawn speed."""
    k = scene.max_agents
    t = np.arange(steps) * 0.1
    yaw = np.repeat(scene.spawn_pose[:, 2:3], steps, axis=1)
    speed = np.repeat(scene.spawn_speed_mps[:, None], steps, axis=1)
    heading = np.stack((np.cos(yaw), np.sin(yaw)), axis=-1)
    xy = scene.spawn_pose[:, None, :2] + heading * (speed * t)[..., None]
    return replace(scene, log=AgentLog(xy, yaw, speed, np.ones((k, steps), dtype=bool)))


def stalled_ahead() -> Scene:
    """Agent 0 eastbound at 5 m/s; agent 1 (the second slot) stands 7 m ahead in its lane."""
    return logged(straight_scene([(10.0, 0.0, 0.0, 5.0), (17.0, 0.0, 0.0, 0.0)], goal_s=30.0))


def neighbours(env: DrivingEnv) -> torch.Tensor:
    """(W, K, m, features) the neighbour block of the observations (friction last, no signals)."""
    oc = env.cfg.observations
    block = env.observations()[..., -1 - NEIGHBOR_FEATURES * oc.num_neighbors : -1]
    return block.reshape(*block.shape[:2], oc.num_neighbors, NEIGHBOR_FEATURES)


def drive_straight(env: DrivingEnv, steps: int) -> list[StepResult]:
    zero = torch.zeros(env.num_worlds, env.agents_per_world, 2)
    return [env.step(zero) for _ in range(steps)]


# ------------------------------------------------------------------------- agents beyond K replayed


def test_agents_beyond_k_are_replayed_seen_and_hit() -> None:
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=1)
    env = DrivingEnv(cfg, [stalled_ahead()])
    assert env.num_replay == 1
    assert torch.allclose(env.pool.replay_xy[env.pool.replay_rows(0)][0, :3], torch.tensor([[17.0, 0.0]] * 3))
    near = neighbours(env)[0, 0, 0]
    assert near[-1] == 1.0  # a valid neighbour ...
    assert near[0] == pytest.approx(7.0 / cfg.observations.neighbor_range_m, abs=1e-5)  # 7 m ahead
    assert near[1] == pytest.approx(0.0, abs=1e-5)
    outcomes = [r.finished.outcome.tolist() for r in drive_straight(env, 12)]
    assert [int(AgentStatus.COLLISION)] in outcomes  # ... that agent 0 runs into

    # without a log (procedural) the agent beyond K is truncated: nothing ahead, nothing hit
    bare = DrivingEnv(cfg, [replace(stalled_ahead(), log=None)])
    assert bare.num_replay == 0 and neighbours(bare)[0, 0, 0, -1] == 0.0
    assert all(
        int(AgentStatus.COLLISION) not in r.finished.outcome.tolist() for r in drive_straight(bare, 12)
    )

    # with K slots for every agent, none is replayed
    assert DrivingEnv(replace(cfg, agents_per_world=2), [stalled_ahead()]).num_replay == 0


def test_replayed_agents_follow_their_log_with_speed_along_yaw() -> None:
    scene = logged(straight_scene([(10.0, 0.0, 0.0, 5.0), (30.0, 3.5, np.pi, 4.0), (60.0, 0.0, 0.0, 3.0)]))
    env = DrivingEnv(DrivingTaskConfig(num_worlds=1, agents_per_world=1), [scene])
    p = env.pool
    assert env.num_replay == 2
    rows = p.replay_rows(0)  # the packed rows of scene 0
    assert torch.allclose(p.replay_vel[rows][0, 5], torch.tensor([-4.0, 0.0]), atol=1e-5)
    assert torch.allclose(p.replay_xy[rows][1, 10], torch.tensor([63.0, 0.0]), atol=1e-5)
    assert torch.allclose(p.replay_yaw[rows][0, 0], torch.tensor(np.pi, dtype=torch.float32))
    assert bool(p.replay_valid[rows][:, :60].all()) and p.replay_length[rows].tolist() == [4.5, 4.5]


def test_agents_left_out_says_they_replay(capsys: pytest.CaptureFixture[str]) -> None:
    scenes = [stalled_ahead(), replace(stalled_ahead(), log=None)]
    assert drive.agents_left_out(scenes, 1, Path("scenes"), "--agents") == 2
    err = capsys.readouterr().err
    assert "the other 1 replay their logs" in err and "1 agents of scenes without a log are left out" in err


# ---------------------------------------------------------------------------------- K from the data


def test_agents_per_world_for_hand_made_counts() -> None:
    assert agents_per_world_for(range(3, 33)) == 10  # fill(10) = 0.907, fill(11) = 0.891
    assert initial_fill(range(3, 33), 10) == pytest.approx(272 / 300)
    assert agents_per_world_for([16] * 10) == 16  # never more slots than any scene fills
    assert agents_per_world_for([4, 4, 4, 32]) == 4  # fill(5) = 17/20 < 0.9
    assert agents_per_world_for([4, 4, 4, 32], min_fill=0.5) == 12  # fill(12) = 0.5, fill(13) = 0.48
    assert agents_per_world_for([40, 50], max_agents=32) == 32
    assert agents_per_world_for([0, 0, 5]) == 1  # no K reaches 0.9: one slot
    with pytest.raises(ValueError, match="no scenes"):
        agents_per_world_for([])
    with pytest.raises(ValueError, match="min_fill"):
        agents_per_world_for([3], min_fill=0.0)


@given(
    counts=st.lists(st.integers(0, 64), min_size=1, max_size=40),
    min_fill=st.floats(0.05, 1.0),
)
def test_agents_per_world_for_is_the_largest_k_that_meets_the_fill(
    counts: list[int], min_fill: float
) -> None:
    k = agents_per_world_for(counts, min_fill)
    top = max(max(counts), 1)
    assert 1 <= k <= top
    if k > 1 or initial_fill(counts, 1) >= min_fill:
        assert initial_fill(counts, k) >= min_fill - 1e-9
    for bigger in range(k + 1, top + 1):  # K + 1 (and every K beyond) misses the bound
        assert initial_fill(counts, bigger) < min_fill


# ---------------------------------------------------------------------------------- reset policy


def three_fast_one_parked() -> Scene:
    """Three agents at 5 m/s reach their goals (10 m ahead) together; the fourth stands still."""
    return straight_scene(
        [(10.0, 0.0, 0.0, 5.0), (40.0, 0.0, 0.0, 5.0), (70.0, 0.0, 0.0, 5.0), (100.0, 3.5, np.pi, 0.0)],
        goal_s=10.0,
    )


def run_until_reset(cfg: DrivingTaskConfig, limit: int = 40) -> tuple[int, StepResult | None]:
    env = DrivingEnv(cfg, [three_fast_one_parked()])
    for step, res in enumerate(drive_straight(env, limit), start=1):
        if res.reset_worlds.numel():
            return step, res
    return limit + 1, None


def test_a_world_resets_when_too_few_agents_are_left_and_survivors_time_out() -> None:
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=4, min_active_fraction=0.5)
    step, res = run_until_reset(cfg)
    assert step < cfg.max_steps and res is not None
    # 1 of the 4 starting agents is left (< 0.5 · 4): the world resets, the parked one times out
    outcomes = dict(zip(res.finished.agent.tolist(), res.finished.outcome.tolist(), strict=True))
    assert outcomes == {0: AgentStatus.GOAL, 1: AgentStatus.GOAL, 2: AgentStatus.GOAL, 3: AgentStatus.TIMEOUT}
    assert res.time_out[0].tolist() == [False, False, False, True] and bool(res.done.all())
    assert res.reset_worlds.tolist() == [0]
    # 1 left is not below 0.25 · 4: the world waits (as by default) for its time limit
    assert run_until_reset(replace(cfg, min_active_fraction=0.25))[0] > 40
    assert run_until_reset(replace(cfg, min_active_fraction=0.0))[0] > 40


def test_the_reset_policy_is_checked_and_kept_out_of_old_configs() -> None:
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="min_active_fraction must be a number in"):
            DrivingTaskConfig(min_active_fraction=bad)
    assert "min_active_fraction" not in task_config_to_dict(DrivingTaskConfig())
    assert task_config_to_dict(DrivingTaskConfig(min_active_fraction=0.5))["min_active_fraction"] == 0.5


def rollout(cfg: DrivingTaskConfig, scenes: list[Scene], steps: int = 40) -> list[torch.Tensor]:
    env = DrivingEnv(cfg, scenes, seed=3)
    gen = torch.Generator().manual_seed(5)
    out = [env.observations().clone()]
    for _ in range(steps):
        a = torch.rand(cfg.num_worlds, cfg.agents_per_world, 2, generator=gen) * 2 - 1
        res = env.step(a)
        out += [res.obs.clone(), res.reward, res.done, res.time_out, res.reset_worlds, env.scene_id.clone()]
        for w in res.reset_worlds.tolist():  # a world resets with no agent left driving
            assert not bool((res.was_active[w] & ~res.done[w]).any())
    return out


def test_default_zero_leaves_rollouts_as_they_were() -> None:
    scenes = procedural_scenes("train", 4, 4, base_seed=0)
    cfg = DrivingTaskConfig(num_worlds=6, agents_per_world=4, episode_length_s=3.0)
    default, explicit = rollout(cfg, scenes), rollout(replace(cfg, min_active_fraction=0.0), scenes)
    assert len(default) == len(explicit)
    assert all(torch.equal(a, b) for a, b in zip(default, explicit, strict=True))


def test_evaluation_never_uses_the_reset_policy() -> None:
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=4, min_active_fraction=0.5, episode_length_s=4.0)
    metrics, log = evaluate(lambda obs: torch.zeros(*obs.shape[:2], 2), cfg, [three_fast_one_parked()])
    rec = log.cat()
    parked = rec.agent == 3
    assert rec.outcome[parked].tolist() == [int(AgentStatus.TIMEOUT)]
    assert rec.steps[parked].tolist() == [cfg.max_steps]  # played to the time limit, not cut short
    assert metrics["goal_reach_rate"] == pytest.approx(0.75)


# ------------------------------------------------------------------------------ bench drive --scenes


@pytest.fixture
def scene_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scenes"
    folder.mkdir()
    spawns = [(10.0 + 15 * i, 0.0, 0.0, 5.0) for i in range(5)]
    for n in (2, 3, 5):
        scene = logged(straight_scene(spawns[:n], goal_s=20.0))
        save_scene(replace(scene, name=f"s{n}"), folder / f"s{n}.json")
    return folder


def test_bench_drive_on_a_scene_folder(
    scene_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    argv = ["--threads", "1", "bench", "drive", "--scenes", str(scene_dir), "--worlds", "4", "--steps", "4"]
    assert main([*argv, "--agents", "auto", "--min-active-fraction", "0.5", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["agents_per_world"] == 2 and r["agents_auto"]  # fill(2) = 1, fill(3) = 8/9 < 0.9
    assert (
        r["scene_source"] == f"dir:{scene_dir}" and r["num_scenes"] == 3 and r["min_active_fraction"] == 0.5
    )
    assert r["agents_per_scene"] == {
        "min": 2,
        "mean": pytest.approx(10 / 3),
        "max": 5,
        "histogram": {"2": 1, "3": 1, "5": 1},
    }
    assert r["agents_replayed_beyond_k"] == 4 and r["agents_left_out_beyond_k"] == 0
    assert r["road_points_per_scene"]["max"] >= r["road_points_per_scene"]["mean"] > 0
    assert 0.0 < r["active_slot_fraction"] <= r["valid_slot_fraction"] <= 1.0
    assert r["active_casps"] == pytest.approx(r["casps"] * r["active_slot_fraction"])
    assert r["slot_steps"] == 4 * 2 * 4
    assert '"active_slot_fraction"' in capsys.readouterr().out


def test_train_takes_k_from_the_scenes_and_records_the_reset_policy(scene_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["--threads", "1", "train", "drive", "--scenes", str(scene_dir), "--agents", "auto"]
    argv += ["--min-active-fraction", "0.5", "--worlds", "2", "--iterations", "1", "--out", str(out)]
    assert main(argv) == 0
    task = json.loads((out / "config.json").read_text())["task"]
    assert task["agents_per_world"] == 2 and task["min_active_fraction"] == 0.5
    assert main(argv) == 0  # the same command resumes: the same K from the same folder


def test_the_logged_drivers_take_k_auto_too(scene_dir: Path, tmp_path: Path) -> None:
    argv = ["--threads", "1", "eval", "drive", "--policy", "expert", "--scenes", str(scene_dir)]
    assert main([*argv, "--agents", "auto", "--out", str(tmp_path / "e")]) == 0
    m = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert m["agents_per_world"] == 2 and m["agents"]["replayed"] == 4 and m["episodes"] == 6


def test_agents_auto_needs_a_scene_folder(cli_error: Callable[..., str], tmp_path: Path) -> None:
    line = cli_error("bench", "drive", "--agents", "auto", "--out", str(tmp_path / "b.json"))
    assert "--agents auto chooses the agents per world from the scenes of --scenes DIR" in line
    line = cli_error("train", "drive", "--agents", "auto", "--out", str(tmp_path / "t"))
    assert "--agents auto" in line
    line = cli_error("bench", "drive", "--agents", "many", "--out", str(tmp_path / "b.json"))
    assert "expected 'auto' or an integer in [1, 32]" in line
    line = cli_error("train", "drive", "--min-active-fraction", "1.5", "--out", str(tmp_path / "t"))
    assert "--min-active-fraction: expected a fraction of a world's starting agents in [0, 1]" in line


def test_training_history_reports_the_active_slot_fraction(tmp_path: Path, one_torch_thread: None) -> None:
    # One scene of 3 agents in worlds of 4 slots: at most 3/4 of the slot-steps are decisions.
    scene = straight_scene([(10.0, 0.0, 0.0, 5.0), (40.0, 0.0, 0.0, 5.0), (100.0, 3.5, np.pi, 5.0)])
    task = DrivingTaskConfig(num_worlds=2, agents_per_world=4)
    spec = TrainSpec(task=task, ppo=PPOConfig(num_steps_per_env=8), iterations=1, num_train_scenes=0)
    (row,) = Trainer(spec, [scene], tmp_path / "run").run()
    assert 0.0 < row["active_slot_fraction"] <= 0.75
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    rows = history["history"] if isinstance(history, dict) else history
    assert rows[0]["active_slot_fraction"] == row["active_slot_fraction"]
