"""Leg kinematics (``go1.kinematics``) against MuJoCo's: the feet in the trunk frame, their
Jacobians and inverse, the feet's world positions and velocities of a moving, tilted trunk; and
what the env reads from them (foot heights over the ground under each foot, foot speeds)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from scenefactory.go1 import robot as go1
from scenefactory.go1.config import Go1TaskConfig, TerrainConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.kinematics import (
    feet_in_world,
    feet_velocity_in_world,
    foot_jacobians,
    foot_positions,
    leg_ik,
)


def random_joints(rng: np.random.Generator, n: int) -> np.ndarray:
    return go1.default_joint_pos() + rng.uniform(-0.4, 0.4, (n, go1.NUM_JOINTS))


def test_foot_kinematics_match_mujoco_and_invert() -> None:
    model = mujoco.MjModel.from_xml_string(go1.go1_mjcf(with_visuals=False))
    data = mujoco.MjData(model)
    index = go1.Go1Index.from_model(model)
    q = random_joints(np.random.default_rng(0), 5)
    feet = foot_positions(q)
    assert feet.shape == (5, 4, 3)
    for i in range(5):
        data.qpos[:] = 0.0
        data.qpos[3] = 1.0  # trunk frame = world frame
        data.qpos[index.joint_qpos] = q[i]
        mujoco.mj_kinematics(model, data)
        sites = np.array([data.site(f"{leg}_foot").xpos for leg in go1.LEGS])
        np.testing.assert_allclose(feet[i], sites, atol=1e-9)
    np.testing.assert_allclose(leg_ik(feet), q, atol=1e-9)
    eps, jac = 1e-6, foot_jacobians(q)
    for j in range(3):
        dq = np.zeros(go1.NUM_JOINTS)
        dq[j::3] = eps
        numeric = (foot_positions(q + dq) - foot_positions(q - dq)) / (2 * eps)
        np.testing.assert_allclose(jac[..., j], numeric, atol=1e-7)


def test_ik_pulls_an_unreachable_foot_onto_the_reach() -> None:
    far = foot_positions(go1.default_joint_pos()[None]).copy()
    far[0, 0, 2] = -1.0  # a metre below the front-right hip: the leg only reaches 0.43 m
    q = leg_ik(far)
    assert np.isfinite(q).all()
    reached = foot_positions(q)[0, 0] - np.array([go1.HIP_OFFSET_M[0], -go1.HIP_OFFSET_M[1], 0.0])
    assert np.linalg.norm(reached) == pytest.approx(
        np.hypot(go1.THIGH_LENGTH_M + go1.CALF_LENGTH_M, go1.THIGH_OFFSET_M), abs=2e-3
    )


def test_feet_in_world_and_their_velocities_match_mujoco() -> None:
    model = mujoco.MjModel.from_xml_string(go1.go1_mjcf(with_visuals=False))
    data = mujoco.MjData(model)
    index = go1.Go1Index.from_model(model)
    rng = np.random.default_rng(1)
    n = 4
    base_qpos = np.concatenate([rng.uniform(-1, 1, (n, 3)), rng.normal(size=(n, 4))], axis=1)
    base_qpos[:, 3:7] /= np.linalg.norm(base_qpos[:, 3:7], axis=1, keepdims=True)  # tilted, turned
    base_qvel = rng.uniform(-1, 1, (n, 6))
    q, qd = random_joints(rng, n), rng.uniform(-5, 5, (n, go1.NUM_JOINTS))
    pos, vel = feet_in_world(base_qpos, q), feet_velocity_in_world(base_qpos, base_qvel, q, qd)
    jacp = np.zeros((3, model.nv))
    for i in range(n):
        data.qpos[0:7], data.qpos[index.joint_qpos] = base_qpos[i], q[i]
        data.qvel[0:6], data.qvel[index.joint_qvel] = base_qvel[i], qd[i]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        for leg, name in enumerate(go1.LEGS):
            site = model.site(f"{name}_foot").id
            np.testing.assert_allclose(pos[i, leg], data.site_xpos[site], atol=1e-9)
            mujoco.mj_jacSite(model, data, jacp, None, site)
            np.testing.assert_allclose(vel[i, leg], jacp @ data.qvel, atol=1e-9)


def test_env_reads_foot_heights_over_the_ground_under_each_foot() -> None:
    """Standing at home on the floor the feet touch it (height ≈ 0) and rest (speed ≈ 0); on stairs
    going down (robots start on the top platform) the heights are over the terrain, not the floor."""
    flat = Go1Env(nominal(Go1TaskConfig(num_envs=2)), seed=0, nthread=1)
    for _ in range(25):  # settle
        step = flat.step(torch.zeros(2, go1.NUM_JOINTS))
    assert step.state.foot_height_m.abs().max() < 0.01
    assert step.state.foot_speed_xy.max() < 0.05
    height, speed = flat.feet()
    np.testing.assert_allclose(height, step.state.foot_height_m.numpy(), atol=1e-6)
    np.testing.assert_allclose(speed, step.state.foot_speed_xy.numpy(), atol=1e-6)
    terrain = TerrainConfig(kind="stairs_down", num_levels=2, num_cols=1, curriculum=False)
    stairs = Go1Env(nominal(Go1TaskConfig(num_envs=1, terrain=terrain)), seed=0, nthread=1)
    feet_w = feet_in_world(stairs._qpos[:, 0:7], stairs._qpos[:, stairs.index.joint_qpos])
    assert stairs.terrain is not None
    ground = stairs.terrain.height_at(feet_w[0, :, 0:2])
    height, _ = stairs.feet()
    np.testing.assert_allclose(height[0], feet_w[0, :, 2] - go1.FOOT_RADIUS_M - ground, atol=1e-9)
    assert ground.min() > 0.1  # it starts on the top platform, above the floor
