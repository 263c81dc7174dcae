"""The driving environment: one smoke step, each termination, masking and partial resets."""

from __future__ import annotations

import numpy as np
import torch

from scene_fixtures import straight_scene
from scenefactory.engines import EngineSpec
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving import observations as obs_terms
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.status import AgentStatus


def _env(scenes: list[Scene], worlds: int = 2, agents: int = 3, **cfg: float) -> DrivingEnv:
    return DrivingEnv(DrivingTaskConfig(num_worlds=worlds, agents_per_world=agents, **cfg), scenes, seed=0)


def _const(env: DrivingEnv, steer: float, accel: float) -> torch.Tensor:
    return torch.tensor([steer, accel]).expand(env.num_worlds, env.agents_per_world, 2).clone()


def test_smoke_step_shapes_and_finite(road_scene: Scene) -> None:
    env = _env([road_scene])
    obs = env.observations()
    assert obs.shape == (2, 3, env.obs_dim)
    res = env.step(_const(env, 0.0, 0.3))
    assert res.obs.shape == obs.shape and torch.isfinite(res.obs).all()
    assert res.reward.shape == (2, 3) and torch.isfinite(res.reward).all()
    assert res.was_active.all()
    assert (res.reward_terms["progress"] > 0).all()  # everyone drove forward along its route


def test_goal_terminates_masks_and_world_resets_when_all_done() -> None:
    scene = straight_scene([(10.0, 0.0, 0.0, 8.0)], goal_s=20.0)
    env = _env([scene], worlds=1, agents=1)
    statuses, rewards = [], []
    for _ in range(60):
        res = env.step(_const(env, 0.0, 0.2))
        rewards.append(res.reward.item())
        if res.done.any():
            statuses.append(int(res.finished.outcome[0]))
            assert res.reset_worlds.tolist() == [0]  # its only agent finished → world resets
            break
    assert statuses == [int(AgentStatus.GOAL)]
    assert rewards[-1] > 9.0  # goal bonus (10) dominates the last step
    assert env.active.all() and env.step_count.item() == 0  # fresh episode


def test_head_on_collision_terminates_both_and_others_keep_driving() -> None:
    scene = straight_scene(
        [(30.0, 0.0, 0.0, 6.0), (42.0, 0.0, np.pi, 6.0), (60.0, 3.5, np.pi, 2.0)], goal_s=40.0
    )
    env = _env([scene], worlds=1, agents=3)
    for _ in range(30):
        res = env.step(_const(env, 0.0, 0.0))
        if res.done.any():
            break
    out = {int(a): int(o) for a, o in zip(res.finished.agent, res.finished.outcome, strict=True)}
    assert out == {0: int(AgentStatus.COLLISION), 1: int(AgentStatus.COLLISION)}
    assert res.reward[0, 0] < -9.0
    assert env.active[0].tolist() == [False, False, True]
    res = env.step(_const(env, 0.0, 0.0))
    assert res.was_active[0].tolist() == [False, False, True]
    assert res.reward[0, 0] == 0.0 and res.reward[0, 1] == 0.0  # masked until the world resets


def test_leaving_the_road_is_offroad() -> None:
    scene = straight_scene([(20.0, 0.0, 0.0, 8.0)], goal_s=50.0)
    env = _env([scene], worlds=1, agents=1)
    for _ in range(40):
        res = env.step(_const(env, -1.0, 0.0))  # hard right: off the southern edge
        if res.done.any():
            break
    assert int(res.finished.outcome[0]) == int(AgentStatus.OFFROAD)
    assert res.reward[0, 0] < -9.0


def test_timeout_and_partial_reset_leave_other_worlds_alone() -> None:
    scene = straight_scene([(10.0, 0.0, 0.0, 0.0)], goal_s=30.0)
    env = _env([scene], worlds=2, agents=1, episode_length_s=1.0)
    a = _const(env, 0.0, 0.0)
    a[1, 0, 1] = 0.5  # world 1 moves, world 0 stands still
    for _ in range(10):
        res = env.step(a)
    assert res.done.all() and res.time_out.all()
    assert [int(o) for o in res.finished.outcome] == [int(AgentStatus.TIMEOUT)] * 2
    # partial reset of world 0 only
    env.step(a)
    before = env.engine.state().pos_xy.clone()
    env.reset_worlds(torch.tensor([0]))
    after = env.engine.state().pos_xy
    assert torch.equal(after[1], before[1])
    assert torch.allclose(after[0, 0], torch.tensor([10.0, 0.0]))


def test_replayed_object_is_seen_and_hits_a_stopped_agent() -> None:
    """Log playback: a logged car drives along the lane into a stopped controlled agent; the agent
    sees it among its neighbours and the contact is a collision (on both engines)."""
    from dataclasses import replace

    from scenefactory.scenes.scene import ReplayLog

    base = straight_scene([(40.0, 0.0, 0.0, 0.0)], goal_s=30.0)
    t = np.arange(60)
    xy = np.stack([10.0 + 8.0 * 0.1 * t, np.zeros_like(t, dtype=float)], axis=1)[None]
    rep = ReplayLog(
        xy=xy,
        yaw=np.zeros((1, 60)),
        vel_xy=np.tile([8.0, 0.0], (1, 60, 1)),
        valid=np.ones((1, 60), dtype=bool),
        length_m=np.array([4.5]),
        width_m=np.array([1.9]),
        kind=np.array([1]),
    )
    scene = replace(base, replay=rep)
    for engine in ("kinematic", "mujoco"):
        env = DrivingEnv(
            DrivingTaskConfig(num_worlds=1, agents_per_world=1), [scene], engine=EngineSpec(tier=engine)
        )
        oc = env.cfg.observations
        start = (
            obs_terms.EGO_DIM + 2 * len(oc.route_lookahead_m) + obs_terms.ROAD_FEATURES * oc.num_road_points
        )
        neighbor = env.observations()[0, 0, start : start + obs_terms.NEIGHBOR_FEATURES]
        assert neighbor[-1] == 1.0  # the logged car is the nearest neighbour (valid flag)
        assert neighbor[0] < 0  # behind the agent
        outcome = None
        for _ in range(50):
            res = env.step(_const(env, 0.0, -1.0))  # stand still with the brakes on
            if res.done.any():
                outcome = int(res.finished.outcome[0])
                break
        assert outcome == int(AgentStatus.COLLISION), engine
