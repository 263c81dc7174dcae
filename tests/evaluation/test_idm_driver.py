"""Rule-based drivers (``eval drive --policy constant-velocity|idm``): the IDM driver brakes for a
stopped car on its route, the constant-velocity one runs into it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scene_fixtures import straight_scene
from scenefactory.engines import EngineSpec
from scenefactory.evaluation.idm_driver import CONSTANT_VELOCITY, IDM
from scenefactory.evaluation.rollout import evaluate
from scenefactory.scenes.scene import ReplayLog
from scenefactory.tasks.driving.config import DrivingTaskConfig


def test_idm_driver_stops_behind_a_stopped_car() -> None:
    """An agent at 8 m/s, a logged car standing 30 m ahead on its route: the IDM driver stops short
    of it (the episode times out, no collision), zero actions hit it."""
    base = straight_scene([(10.0, 0.0, 0.0, 8.0)], goal_s=45.0)
    rep = ReplayLog(
        xy=np.tile([40.0, 0.0], (1, 80, 1)),
        yaw=np.zeros((1, 80)),
        vel_xy=np.zeros((1, 80, 2)),
        valid=np.ones((1, 80), dtype=bool),
        length_m=np.array([4.5]),
        width_m=np.array([1.9]),
        kind=np.array([1]),
    )
    scene = replace(base, replay=rep)
    task = DrivingTaskConfig(num_worlds=1, agents_per_world=1, episode_length_s=6.0)
    engine = EngineSpec(tier="kinematic")
    idm, _ = evaluate(IDM, task, [scene], engine=engine)
    cv, _ = evaluate(CONSTANT_VELOCITY, task, [scene], engine=engine)
    assert idm["collision_rate"] == 0.0 and idm["timeout_rate"] == 1.0
    assert cv["collision_rate"] == 1.0
