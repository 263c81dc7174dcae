"""The scheduled friction change (``DrivingTaskConfig.friction_change``): it reaches the engine at
the configured step, the observation sees it, a reset restores the scene's road, and on the physics
tier it changes what the car does (braking from 15 m/s on ice instead of dry asphalt)."""

from __future__ import annotations

import pytest
import torch

from scene_fixtures import straight_scene
from scenefactory.engines import EngineSpec
from scenefactory.scenes.friction import PRESETS
from scenefactory.tasks.driving.config import DrivingTaskConfig, FrictionChange, task_config_from_dict
from scenefactory.tasks.driving.config import task_config_to_dict as to_dict
from scenefactory.tasks.driving.env import DrivingEnv

ICE = PRESETS["ice"].mu


def _brake_env(engine: str, change: FrictionChange | None, episode_s: float = 6.0) -> DrivingEnv:
    scene = straight_scene([(10.0, 0.0, 0.0, 15.0)], goal_s=150.0)  # friction 0.8 (dry asphalt)
    cfg = DrivingTaskConfig(
        num_worlds=1, agents_per_world=1, episode_length_s=episode_s, friction_change=change
    )
    return DrivingEnv(cfg, [scene], engine=EngineSpec(tier=engine), sequential_scenes=True)


def test_the_change_reaches_engine_and_observation_at_its_step_and_a_reset_restores_the_road() -> None:
    env = _brake_env("kinematic", FrictionChange(at_step=5, mu=ICE), episode_s=1.0)  # 10-step episodes
    act = torch.zeros(1, 1, 2)
    seen = []
    for _ in range(12):
        obs = env.step(act).obs
        seen.append((float(env.engine.friction[0]), float(obs[0, 0, -1])))  # type: ignore[attr-defined]
    # steps 1-4 on the scene's road, from step 5 on ice, the reset at step 10 brings the road back
    assert [e for e, _ in seen] == pytest.approx([0.8] * 4 + [ICE] * 5 + [0.8] * 3)
    assert [o for _, o in seen] == pytest.approx([e for e, _ in seen])  # the friction observation


def test_without_a_schedule_the_road_never_changes() -> None:
    env = _brake_env("kinematic", None)
    for _ in range(20):
        env.step(torch.zeros(1, 1, 2))
        assert float(env.engine.friction[0]) == pytest.approx(0.8)  # type: ignore[attr-defined]


def test_physics_tier_brakes_on_ice_after_the_change() -> None:
    """Full braking from 15 m/s: dry stops in ~14 m (v²/2μg, μ 0.8); a switch to ice (μ 0.1) at
    0.3 s leaves the car sliding far longer — the change is in the physics, not only in a number."""

    def distance(change: FrictionChange | None) -> float:
        env = _brake_env("mujoco", change)
        x0 = float(env.engine.state().pos_xy[0, 0, 0])
        for _ in range(30):  # 3 s of full braking, straight
            env.step(torch.tensor([[[0.0, -1.0]]]))
        return float(env.engine.state().pos_xy[0, 0, 0]) - x0

    dry, iced = distance(None), distance(FrictionChange(at_step=3, mu=ICE))
    assert 10.0 < dry < 20.0
    assert iced > 2.0 * dry


def test_config_round_trip_and_bad_values() -> None:
    cfg = DrivingTaskConfig(friction_change=FrictionChange(at_step=30, mu=0.1))
    assert task_config_from_dict(to_dict(cfg)) == cfg
    plain = to_dict(DrivingTaskConfig())
    assert "friction_change" not in plain  # configs without a change read as before it existed
    assert task_config_from_dict(plain).friction_change is None
    with pytest.raises(ValueError, match="at_step"):
        FrictionChange(at_step=0, mu=0.1)
    with pytest.raises(ValueError, match="mu"):
        FrictionChange(at_step=3, mu=0.0)
    with pytest.raises(ValueError, match="never comes"):
        DrivingTaskConfig(episode_length_s=2.0, friction_change=FrictionChange(at_step=20, mu=0.1))
