"""Expert actions from logs (the kinematic tier's inverse) and the log-divergence metric."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from scene_fixtures import straight_scene
from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.engines import EngineSpec
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.evaluation.rollout import EXPERT, evaluate
from scenefactory.scenes.scene import AgentLog, Scene
from scenefactory.scenes.scene_json import load_scene, save_scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.vehicles.params import VehicleParams


def _logged_scene(steps: int = 40) -> Scene:
    """Drive two agents with smooth actions on the kinematic tier and keep their states as a log."""
    scene = straight_scene([(10.0, 0.0, 0.0, 5.0), (100.0, 3.5, np.pi, 6.0)], goal_s=200.0)
    eng = KinematicEngine(1, 2, dt=0.1)
    pose = torch.as_tensor(scene.spawn_pose, dtype=torch.float32)[None]
    eng.reset(
        torch.tensor([0]),
        pose,
        torch.as_tensor(scene.spawn_speed_mps)[None],
        torch.ones(1, 2, dtype=torch.bool),
    )
    xy, yaw, speed = [pose[0, :, :2].numpy()], [pose[0, :, 2].numpy()], [eng.state().speed[0].numpy()]
    for t in range(steps - 1):
        a = torch.tensor(
            [[[0.05 * np.sin(0.2 * t), 0.3], [-0.04, 0.1 * np.cos(0.1 * t)]]], dtype=torch.float32
        )
        st = eng.step(a, torch.ones(1, 2, dtype=torch.bool))
        xy.append(st.pos_xy[0].numpy().copy())
        yaw.append(st.yaw[0].numpy().copy())
        speed.append(st.speed[0].numpy().copy())
    log = AgentLog(
        xy=np.stack(xy, axis=1).astype(np.float64),
        yaw=np.stack(yaw, axis=1).astype(np.float64),
        speed=np.stack(speed, axis=1).astype(np.float64),
        valid=np.ones((2, steps), dtype=bool),
    )
    return replace(scene, log=log)


def test_inverse_bicycle_recovers_known_actions() -> None:
    """Forward-simulate known actions, invert the states: the same actions come back."""
    p = VehicleParams()
    eng = KinematicEngine(1, 1, dt=0.1, params=p)
    eng.reset(
        torch.tensor([0]), torch.zeros(1, 1, 3), torch.full((1, 1), 8.0), torch.ones(1, 1, dtype=torch.bool)
    )
    acts = [(0.02 * i, 0.25 if i < 10 else -0.3) for i in range(20)]
    yaw, speed = [0.0], [8.0]
    for s, a in acts:
        st = eng.step(torch.tensor([[[s, a]]]), torch.ones(1, 1, dtype=torch.bool))
        yaw.append(st.yaw.item())
        speed.append(st.speed.item())
    got, ok = inverse_bicycle(np.array(yaw), np.array(speed), np.ones(21, dtype=bool), 0.1, p)
    assert ok[:-1].all() and not ok[-1]
    np.testing.assert_allclose(got[:-1, 1], [a for _, a in acts], atol=1e-4)
    np.testing.assert_allclose(got[:-1, 0], [s for s, _ in acts], atol=2e-3)


def test_expert_replays_a_kinematic_log_with_small_divergence(tmp_path: object) -> None:
    """A log made by the kinematic tier, replayed through its own inverse, stays on the log."""
    scene = _logged_scene()
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=2, episode_length_s=3.5)
    metrics, _ = evaluate(EXPERT, cfg, [scene], engine=EngineSpec())
    assert metrics["episodes_with_log"] == 2
    assert metrics["log_divergence_m"] < 0.2
    # without a log there is no divergence to report
    plain, _ = evaluate(EXPERT, cfg, [replace(scene, log=None)], engine=EngineSpec())
    assert plain["episodes_with_log"] == 0


@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_closed_loop_expert_returns_to_its_log(engine: str) -> None:
    """Spawned 1 m beside its log, the closed-loop logged driver steers back onto it (and keeps
    its pace); the open-loop inverse keeps the offset."""
    from scenefactory.tasks.driving.env import DrivingEnv

    scene = _logged_scene()
    pose = scene.spawn_pose.copy()
    pose[0, 1] += 1.0
    scene = replace(scene, spawn_pose=pose)
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=2, episode_length_s=3.5)
    assert scene.log is not None
    errors = {}
    for closed in (True, False):
        spec = EngineSpec(tier=engine, physics_hz=100.0)
        env = DrivingEnv(cfg, [scene], engine=spec, sequential_scenes=True)
        with torch.inference_mode():
            for _ in range(30):
                env.step(env.expert_actions(closed_loop=closed))
        errors[closed] = float(np.linalg.norm(env.engine.state().pos_xy[0, 0].numpy() - scene.log.xy[0, 30]))
    assert errors[True] < 0.25 and errors[False] > 0.7, errors


def test_log_round_trips_through_json(tmp_path: pytest.TempPathFactory) -> None:
    scene = _logged_scene(12)
    path = tmp_path / "s.json"  # type: ignore[operator]
    save_scene(scene, path)
    back = load_scene(path)
    assert back.log is not None and scene.log is not None
    for name in ("xy", "yaw", "speed", "valid"):
        assert np.array_equal(getattr(back.log, name), getattr(scene.log, name))


def test_eval_cli_policy_expert(tmp_path: pytest.TempPathFactory) -> None:
    import json

    from scenefactory.cli import main

    folder = tmp_path / "logs"  # type: ignore[operator]
    save_scene(_logged_scene(), folder / "logged.json")
    out = tmp_path / "out"  # type: ignore[operator]
    args = [
        "eval",
        "drive",
        "--policy",
        "expert",
        "--scenes",
        str(folder),
        "--agents",
        "2",
        "--out",
        str(out),
    ]
    assert main([*args, "--engine", "kinematic"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["policy"] == "expert" and m["log_divergence_m"] < 0.2
    assert main([*args, "--engine", "mujoco"]) == 0
    mj = json.loads((out / "metrics.json").read_text())
    # closed loop, the logged drivers track their logs on the physics tier too
    assert mj["episodes_with_log"] == 2 and mj["log_divergence_m"] < 0.2
    assert m["agents"]["controlled"] == mj["agents"]["controlled"] == 2
    assert main(["eval", "drive", "--out", str(out)]) == 2  # neither checkpoint nor expert
