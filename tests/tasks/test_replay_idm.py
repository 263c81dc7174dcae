"""Reactive traffic (``DrivingTaskConfig.replay_idm``, ``eval drive --others idm``): logged vehicles
follow their logged paths with the IDM speed law and brake for the controlled agents; pedestrians and
cyclists keep their logs; off (the default), log replay is unchanged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from scene_fixtures import straight_scene
from scenefactory.engines import EngineSpec
from scenefactory.errors import ArgumentError
from scenefactory.scenes.scene import ReplayLog, Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, task_config_from_dict, task_config_to_dict
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.idm import IdmParams
from scenefactory.tasks.driving.replay_idm import along_path, logged_paths
from scenefactory.tasks.driving.status import AgentStatus

PEDESTRIAN = 2


def _scene(kinds: tuple[int, ...] = (1,)) -> Scene:
    """A stopped agent at x = 40 m; logged objects drive into it at 8 m/s along the lane from x = 10 m
    (the first) and, for a second kind, from x = 0 m one lane over (never in the agent's way)."""
    base = straight_scene([(40.0, 0.0, 0.0, 0.0)], goal_s=30.0)
    t = np.arange(60, dtype=float)
    starts = [(10.0, 0.0), (0.0, 3.5)][: len(kinds)]
    xy = np.stack([np.stack([x0 + 0.8 * t, np.full_like(t, y0)], axis=1) for x0, y0 in starts])
    n = len(kinds)
    rep = ReplayLog(
        xy=xy,
        yaw=np.zeros((n, 60)),
        vel_xy=np.tile([8.0, 0.0], (n, 60, 1)),
        valid=np.ones((n, 60), dtype=bool),
        length_m=np.full(n, 4.5),
        width_m=np.full(n, 1.9),
        kind=np.array(kinds),
    )
    return replace(base, replay=rep)


def _run(scene: Scene, engine: str, idm: IdmParams | None, steps: int = 50) -> tuple[int | None, DrivingEnv]:
    env = DrivingEnv(
        DrivingTaskConfig(num_worlds=1, agents_per_world=1, replay_idm=idm),
        [scene],
        engine=EngineSpec(tier=engine),
    )
    brake = torch.tensor([[[0.0, -1.0]]])
    for _ in range(steps):
        res = env.step(brake)  # stand still with the brakes on
        if res.done.any():
            return int(res.finished.outcome[0]), env
    return None, env


@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_logged_vehicle_brakes_for_a_stopped_agent(engine: str) -> None:
    """Under log replay the logged car runs into the stopped agent (a collision); under ``idm`` it
    brakes and creeps up behind it, its bumper about the IDM's minimum spacing (2 m) short of the
    agent's (the lead distance is read at 1 m probes, Waymax's way, so it settles 1-2 m short)."""
    assert _run(_scene(), engine, None)[0] == int(AgentStatus.COLLISION)
    outcome, env = _run(_scene(), engine, IdmParams())
    assert outcome is None
    assert env.replay_idm is not None
    rear_of_agent = float(env.engine.state().pos_xy[0, 0, 0]) - 2.25
    front_of_car = 10.0 + float(env.replay_idm.s_m[0, 0]) + 2.25
    assert float(env.replay_idm.speed_mps[0, 0]) < 0.6  # from 8 m/s
    assert 1.0 < rear_of_agent - front_of_car < 3.0


def test_pedestrians_keep_their_logs() -> None:
    """A pedestrian's replay is its log under ``idm`` (same objects as log replay, bit for bit), so it
    walks into the stopped agent in both modes; a vehicle in the next lane drives on at its speed."""
    scene = _scene((PEDESTRIAN, 1))
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=1)
    log_env = DrivingEnv(cfg, [scene])
    idm_env = DrivingEnv(replace(cfg, replay_idm=IdmParams()), [scene])
    brake = torch.tensor([[[0.0, -1.0]]])
    for _ in range(20):
        log_env.step(brake)
        idm_env.step(brake)
        a = log_env._objects(log_env.engine.state())
        b = idm_env._objects(idm_env.engine.state())
        assert torch.equal(a[0][:, :2], b[0][:, :2]) and torch.equal(a[2][:, :2], b[2][:, :2])
        assert torch.allclose(a[0][:, 2], b[0][:, 2], atol=1e-4)  # the free vehicle: its log, to rounding
    assert _run(scene, "kinematic", IdmParams())[0] == int(AgentStatus.COLLISION)


def test_partial_reset_restarts_only_its_worlds() -> None:
    """Resetting world 1 puts its vehicle back at its path's start; world 0's keeps its state."""
    env = DrivingEnv(DrivingTaskConfig(num_worlds=2, agents_per_world=1, replay_idm=IdmParams()), [_scene()])
    for _ in range(5):
        env.step(torch.tensor([0.0, -1.0]).expand(2, 1, 2))
    assert env.replay_idm is not None
    s0 = env.replay_idm.s_m.clone()
    assert (s0[:, 0] > 3.0).all()
    env.reset_worlds(torch.tensor([1]), torch.tensor([0]))
    assert env.replay_idm.s_m[1, 0] == 0.0 and env.replay_idm.s_m[0, 0] == s0[0, 0]
    assert env.replay_idm.speed_mps[1, 0] == pytest.approx(8.0)


def test_default_is_log_replay_and_config_round_trips() -> None:
    """The default task has no reactive replay (left out of the saved config, so saved configs read
    as before); a set one survives the round trip; a wrong type is refused naming the flag."""
    d = task_config_to_dict(DrivingTaskConfig())
    assert "replay_idm" not in d and task_config_from_dict(d).replay_idm is None
    cfg = DrivingTaskConfig(replay_idm=IdmParams(time_headway_s=1.5))
    assert task_config_from_dict(task_config_to_dict(cfg)) == cfg
    with pytest.raises(ArgumentError, match="--others idm"):
        DrivingTaskConfig(replay_idm="idm")  # type: ignore[arg-type]
    assert DrivingEnv(DrivingTaskConfig(num_worlds=1, agents_per_world=1), [_scene()]).replay_idm is None


def test_paths_follow_the_valid_log() -> None:
    """A log with a gap: the path runs through the valid points in order, arc length 0 to 3 m, then
    straight on; interpolation reads the heading too."""
    xy = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [9.0, 9.0], [3.0, 0.0]]])
    valid = torch.tensor([[True, True, False, True]])
    pts, dist, end, stops = logged_paths(xy, torch.zeros(1, 4), torch.zeros(1, 4, 2), valid)
    assert end.tolist() == [3.0] and stops.tolist() == [True]
    assert dist[0, :4].tolist() == [0.0, 1.0, 3.0, 3.0]
    here = along_path(pts, dist, torch.tensor([[0.5, 2.0, 13.0]]))
    assert torch.allclose(here[0, :, :2], torch.tensor([[0.5, 0.0], [2.0, 0.0], [13.0, 0.0]]))


def test_without_vehicles_every_figure_is_log_replays() -> None:
    """Replayed objects that are all pedestrians: with the reactive replay on, every observation,
    reward and outcome is bit for bit the default's (log replay; ``pairs.observed_objects``), so the
    switch changes nothing but the vehicles."""
    scene = _scene((PEDESTRIAN, PEDESTRIAN))
    cfg = DrivingTaskConfig(num_worlds=2, agents_per_world=1)
    envs = [DrivingEnv(cfg, [scene]), DrivingEnv(replace(cfg, replay_idm=IdmParams()), [scene])]
    assert torch.equal(envs[0].observations(), envs[1].observations())
    for t in range(40):
        act = torch.tensor([0.1 * (t % 3 - 1), 0.5 - 0.05 * t]).expand(2, 1, 2)
        a, b = (e.step(act) for e in envs)
        assert torch.equal(a.obs, b.obs) and torch.equal(a.reward, b.reward) and torch.equal(a.done, b.done)
