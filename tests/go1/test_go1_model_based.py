"""The model-based trot baseline (``go1.model_based``): its frames, and what it does in the env
through the policy's actuator path — walk forward, turn either way, stand still — and
``eval go1 --controller model-based``.

The walking figures are pinned with a margin under what it measured (nominal world, seeds 0-2,
4 s): 0.5 m/s commanded, 0.54 m/s achieved over the last 2 s and 2.1 m covered; ±1.0 rad/s
commanded, 1.02-1.05 rad/s achieved; at a zero command under 0.001 m/s of drift.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from scenefactory.cli.main import main
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import Go1TaskConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.frames import gravity_in_body
from scenefactory.go1.jobs import Go1EvalArgs, evaluate
from scenefactory.go1.model_based import ModelBasedController, TrotConfig, level_to_body, tilt

SECONDS = 4.0
MIN_DISTANCE_M = 1.5
"""Covered at a 0.5 m/s command in :data:`SECONDS` (measured 2.1 m)."""
MIN_TURN_RADPS = 0.8
"""Mean yaw rate over the last 2 s at a ±1.0 rad/s command (measured 1.02-1.05)."""


def test_tilt_and_level_frame_agree_with_the_imu() -> None:
    pitch, roll = np.array([0.2, -0.15]), np.array([-0.1, 0.25])
    # a trunk at this pitch and roll: body-to-world R = Ry(θ)·Rx(φ), whose transpose we build
    rot_t = level_to_body(pitch, roll)
    quats = np.zeros((2, 4))
    for i in range(2):
        mujoco.mju_mat2Quat(quats[i], rot_t[i].T.flatten())
    grav = gravity_in_body(quats)
    np.testing.assert_allclose(grav, rot_t @ np.array([0.0, 0.0, -1.0]), atol=1e-12)
    got_pitch, got_roll = tilt(grav)
    np.testing.assert_allclose(got_pitch, pitch, atol=1e-12)
    np.testing.assert_allclose(got_roll, roll, atol=1e-12)


def test_config_and_observation_errors() -> None:
    with pytest.raises(ValueError, match="duty"):
        TrotConfig(duty=0.4)
    with pytest.raises(ValueError, match="max_command vx"):
        TrotConfig(max_command=((0.2, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
    controller = ModelBasedController(Go1TaskConfig())
    with pytest.raises(ValueError, match=r"observations must be \(N, >= 45\)"):
        controller.act(torch.zeros(3, 20))


def rollout(commands: np.ndarray, seconds: float, seed: int = 0) -> dict[str, np.ndarray]:
    """Hold ``commands`` (N, 3) on the nominal flat world with the controller in the loop."""
    n = len(commands)
    task = replace(nominal(Go1TaskConfig()), num_envs=n, episode_length_s=seconds + 1.0)
    env = Go1Env(task, seed=seed, nthread=1)
    env.hold_commands(commands)
    controller = ModelBasedController(task)
    obs, _ = env.observations()
    start = env._qpos[:, 0:2].copy()
    steps = round(seconds / task.dt)
    fell = np.zeros(n, dtype=bool)
    vel = np.zeros((steps, n, 3))
    yaw_rate = np.zeros((steps, n))
    for t in range(steps):
        actions = controller.act(obs)
        assert actions.shape == (n, go1.NUM_JOINTS) and torch.isfinite(actions).all()
        res = env.step(actions)
        controller.reset(res.done)
        obs = res.actor_obs
        fell |= res.terminated.numpy()
        vel[t] = res.state.lin_vel_b.numpy()
        yaw_rate[t] = res.state.ang_vel_b[:, 2].numpy()
    return {
        "fell": fell,
        "distance": np.linalg.norm(env._qpos[:, 0:2] - start, axis=1),
        "vel": vel,
        "yaw_rate": yaw_rate,
    }


def test_it_walks_forward_turns_both_ways_and_stands(one_torch_thread: None) -> None:
    commands = np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    out = rollout(commands, SECONDS)
    assert not out["fell"].any()
    last = slice(-round(2.0 / Go1TaskConfig().dt), None)
    # forward: covers the distance, moving forward in its own frame
    assert out["distance"][0] >= MIN_DISTANCE_M
    assert out["vel"][last, 0, 0].mean() > 0.4
    # turns in the commanded direction, on the spot
    assert out["yaw_rate"][last, 1].mean() > MIN_TURN_RADPS
    assert out["yaw_rate"][last, 2].mean() < -MIN_TURN_RADPS
    assert out["distance"][1:3].max() < 0.5
    # a zero command: it stands (no stepping, no drift)
    assert np.abs(out["vel"][last, 3, :2]).mean() < 0.01
    assert out["distance"][3] < 0.1


def test_it_follows_whole_body_commands(one_torch_thread: None) -> None:
    from scenefactory.go1.rewards import pitch_roll
    from scenefactory.go1.whole_body import whole_body_task

    task = replace(nominal(whole_body_task(Go1TaskConfig())), num_envs=3, episode_length_s=5.0)
    env = Go1Env(task, seed=0, nthread=1)
    env.hold_commands(
        np.array([[0.5, 0, 0, 0.22, 0, 0], [0.5, 0, 0, 0.32, 0, 0], [0.5, 0, 0, 0.28, 0.2, -0.15]])
    )
    controller = ModelBasedController(task)
    obs, _ = env.observations()
    heights, attitude = [], []
    for t in range(150):
        res = env.step(controller.act(obs))
        assert not res.terminated.any()
        obs = res.actor_obs
        if t >= 75:
            heights.append(res.state.height_m.numpy())
            attitude.append(pitch_roll(res.state.gravity_b).numpy())
    h, (pitch, roll) = np.mean(heights, axis=0), np.mean(attitude, axis=0)[2]
    assert h[0] == pytest.approx(0.22, abs=0.02) and h[1] == pytest.approx(
        0.32, abs=0.02
    )  # measured 0.224, 0.318
    assert pitch == pytest.approx(0.2, abs=0.05) and roll == pytest.approx(-0.15, abs=0.05)


def test_eval_controller_model_based_writes_the_tables(tmp_path: Path, one_torch_thread: None) -> None:
    result = evaluate(Go1EvalArgs(out=tmp_path, controller="model-based", episodes=2, quick=True))
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["controller"] == "model-based" and saved["checkpoint"] is None
    assert saved["policy"]["controller"] == "model-based trot"
    assert len(saved["tracking"]) == len(result["tracking"]) == 12
    assert [p["push_mps"] for p in saved["push_recovery"]] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert saved["episodes"]["protocol"] == "varied"
    stand = saved["tracking"][0]
    assert stand["falls"] == 0 and stand["lin_vel_error_mps"] < 0.05  # a zero command: it stands
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("# Go1 evaluation\n\nController: model-based trot")
    assert "| push m/s |" in text and "World per episode: floor friction U(0.4, 1.25)" in text


def test_cli_model_based_refuses_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "go1", "--controller", "model-based", "--checkpoint", str(tmp_path / "x.pt")]
    assert main([*argv, "--out", str(tmp_path / "e")]) == 2
    assert "takes no --checkpoint" in capsys.readouterr().err
    assert main(["eval", "go1", "--controller", "mpc", "--out", str(tmp_path / "e")]) == 2
