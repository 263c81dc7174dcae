"""Go1 velocity-tracking task: reward terms on tiny cases, config round trip, one env smoke step,
partial resets, pushes, randomization and the asymmetric observations."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from scenefactory.go1 import rewards as r
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import (
    CommandConfig,
    Go1TaskConfig,
    PushConfig,
    RandomizationConfig,
    nominal,
    task_config_from_dict,
    task_config_to_dict,
)
from scenefactory.go1.env import Go1Env
from scenefactory.go1.frames import gravity_in_body
from scenefactory.go1.observations import CRITIC_DIM, FRAME_DIM
from scenefactory.go1.state import LocoState


def state(**kw: torch.Tensor | float) -> LocoState:
    """Two robots standing still, commanded to stand, unless overridden."""
    n = 2
    home = torch.tensor(go1.default_joint_pos(), dtype=torch.float32)
    base = dict(
        command=torch.zeros(n, 3),
        lin_vel_b=torch.zeros(n, 3),
        ang_vel_b=torch.zeros(n, 3),
        gravity_b=torch.tensor([[0.0, 0.0, -1.0]] * n),
        height_m=torch.full((n,), 0.27),
        joint_pos=home.repeat(n, 1),
        joint_vel=torch.zeros(n, 12),
        joint_acc=torch.zeros(n, 12),
        default_joint_pos=home,
        joint_limits=torch.tensor(go1.joint_ranges(), dtype=torch.float32),
        torque=torch.zeros(n, 12),
        actions=torch.zeros(n, 12),
        prev_actions=torch.zeros(n, 12),
        foot_contact=torch.ones(n, 4, dtype=torch.bool),
        leg_contact=torch.zeros(n, 8, dtype=torch.bool),
        first_contact=torch.zeros(n, 4, dtype=torch.bool),
        air_time_s=torch.zeros(n, 4),
        foot_height_m=torch.zeros(n, 4),
        foot_speed_xy=torch.zeros(n, 4),
        fallen=torch.zeros(n, dtype=torch.bool),
        air_time_threshold_s=0.5,
        foot_clearance_target_m=0.08,
        dt=0.02,
    )
    base.update(kw)
    return LocoState(**base)  # type: ignore[arg-type]


def test_tracking_kernels() -> None:
    cmd = torch.tensor([[1.0, 0.0, 0.5], [1.0, 0.0, 0.5]])
    vel = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    ang = torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]])
    s = state(command=cmd, lin_vel_b=vel, ang_vel_b=ang)
    torch.testing.assert_close(r.track_lin_vel_xy(s), torch.tensor([1.0, math.exp(-1 / 0.25)]))
    torch.testing.assert_close(r.track_ang_vel_z(s), torch.tensor([1.0, math.exp(-1 / 0.25)]))
    torch.testing.assert_close(r.track_ang_vel_z_fine(s), torch.tensor([1.0, math.exp(-1 / 0.01)]))
    small = state(command=cmd, lin_vel_b=vel, ang_vel_b=ang + torch.tensor([0.0, 0.0, -0.05]))
    # where the coarse kernel is flat (0.05 rad/s off: 0.99), the fine one still pays (0.78)
    assert r.track_ang_vel_z(small)[0] > 0.98 and r.track_ang_vel_z_fine(small)[0] < 0.8


def test_penalty_terms_measure_what_they_name() -> None:
    s = state(
        lin_vel_b=torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.0, 0.0]]),
        ang_vel_b=torch.tensor([[1.0, 2.0, 9.0], [0.0, 0.0, 0.0]]),
        gravity_b=torch.tensor([[0.6, 0.0, -0.8], [0.0, 0.0, -1.0]]),
        torque=torch.tensor([[2.0] + [0.0] * 11, [0.0] * 12]),
        actions=torch.tensor([[1.0] * 12, [0.0] * 12]),
    )
    torch.testing.assert_close(r.lin_vel_z_sq(s), torch.tensor([0.25, 0.0]))
    torch.testing.assert_close(r.ang_vel_xy_sq(s), torch.tensor([5.0, 0.0]))
    torch.testing.assert_close(r.flat_orientation_sq(s), torch.tensor([0.36, 0.0]))
    torch.testing.assert_close(r.torques_sq(s), torch.tensor([4.0, 0.0]))
    torch.testing.assert_close(r.action_rate_sq(s), torch.tensor([12.0, 0.0]))


def test_feet_air_time_rewards_long_steps_only_when_moving() -> None:
    first = torch.tensor([[True, False, False, False]] * 2)
    air = torch.tensor([[0.7, 0.0, 0.0, 0.0]] * 2)
    cmd = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    s = state(first_contact=first, air_time_s=air, command=cmd)
    torch.testing.assert_close(r.feet_air_time(s), torch.tensor([0.2, 0.0]))


@pytest.mark.parametrize("target", [0.08, 0.12])
def test_foot_clearance_costs_moving_feet_off_the_target_height(target: float) -> None:
    h = torch.tensor([[0.0, target, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = torch.tensor([[2.0, 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # robot 1: all feet in stance
    got = r.foot_clearance(state(foot_height_m=h, foot_speed_xy=v, foot_clearance_target_m=target))
    # foot 0 drags along the ground at 2 m/s; foot 1 swings at the target height; 2 and 3 stand
    torch.testing.assert_close(got, torch.tensor([target**2 * 2.0, 0.0]))


def test_leg_contacts_count_thighs_and_calves_on_the_ground() -> None:
    legs = torch.zeros(2, 8, dtype=torch.bool)
    legs[0, 1] = legs[0, 6] = True  # FR calf on a stair's edge, RR thigh on the ground
    torch.testing.assert_close(r.leg_contacts(state(leg_contact=legs)), torch.tensor([2.0, 0.0]))


def test_joint_limits_stand_still_and_fall_terms() -> None:
    home = torch.tensor(go1.default_joint_pos(), dtype=torch.float32)
    q = home.repeat(2, 1)
    q[0, 2] = -3.0  # calf 0.182 rad past its hard lower limit
    lim = torch.tensor([[-2.0, 2.0]] * 12)
    lim[2] = torch.tensor([-2.818, -0.888])
    s = state(joint_pos=q, joint_limits=lim, command=torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert float(r.joint_limit_violation(s)[0]) == pytest.approx(0.182, abs=1e-5)
    assert float(r.joint_limit_violation(s)[1]) == 0.0
    assert float(r.stand_still(s)[0]) == pytest.approx(1.2, abs=1e-5)
    assert float(r.stand_still(s)[1]) == 0.0  # commanded to move
    s2 = state(fallen=torch.tensor([True, False]))
    torch.testing.assert_close(r.fallen(s2), torch.tensor([1.0, 0.0]))


def test_gravity_in_body_frame() -> None:
    level = np.array([1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(gravity_in_body(level), [0.0, 0.0, -1.0])
    a = math.radians(30)  # pitched nose-down by 30° about y
    q = np.array([math.cos(a / 2), 0.0, math.sin(a / 2), 0.0])
    np.testing.assert_allclose(gravity_in_body(q), [math.sin(a), 0.0, -math.cos(a)], atol=1e-12)


def test_config_round_trip_and_validation() -> None:
    cfg = Go1TaskConfig(num_envs=8)
    assert task_config_from_dict(task_config_to_dict(cfg)) == cfg
    nom = nominal(cfg)
    assert nom.randomization is None and nom.pushes is None and nom.noise is None
    assert task_config_from_dict(task_config_to_dict(nom)) == nom
    with pytest.raises(ValueError, match="whole multiple"):
        Go1TaskConfig(physics_hz=210.0)
    with pytest.raises(ValueError, match="interval"):
        PushConfig(interval_s=(5.0, 1.0))
    with pytest.raises(ValueError, match="pure_turn_prob"):
        CommandConfig(pure_turn_prob=1.0)


def test_pure_turn_commands_have_no_linear_part() -> None:
    cmds = CommandConfig(initial_fraction=1.0, pure_turn_prob=0.5, standing_prob=0.0)
    e = Go1Env(Go1TaskConfig(num_envs=400, commands=cmds), seed=3, nthread=1)
    still = (e.command[:, :2] == 0).all(axis=1)
    assert 0.4 < still.mean() < 0.6  # half of 400 draws, binomial sd 0.025
    assert (e.command[still, 2] != 0).all()
    plain = Go1Env(Go1TaskConfig(num_envs=400, commands=replace(cmds, pure_turn_prob=0.0)), seed=3, nthread=1)
    assert (plain.command[:, :2] != 0).all()


def _yaw(e: Go1Env) -> np.ndarray:
    """(N,) yaw [rad] the IMU reports (the task reads its sensors, not the state)."""
    quat = e._sensordata[:, e.index.orientation]
    w, x, y, z = (quat[:, i] for i in range(4))
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def test_heading_commands_steer_the_yaw_rate_and_survive_a_state_round_trip() -> None:
    cmds = CommandConfig(initial_fraction=1.0, heading_prob=0.5, standing_prob=0.1, heading_stiffness=0.5)
    cfg = Go1TaskConfig(num_envs=400, commands=cmds)
    e = Go1Env(cfg, seed=3, nthread=1)
    steer = ~np.isnan(e.heading_rad)
    assert 0.35 < steer.mean() < 0.55  # 0.5 of the 0.9 that are not standing, binomial sd 0.025
    assert (e.command[steer, :2] != 0).any(axis=1).all()  # a standing robot does not steer
    lo, hi = cmds.yaw_radps
    for _ in range(3):  # at the reset, then every step from the yaw the robot has turned to
        err = np.angle(np.exp(1j * (e.heading_rad[steer] - _yaw(e)[steer])))
        np.testing.assert_allclose(e.command[steer, 2], np.clip(0.5 * err, lo, hi), atol=1e-9)
        assert (np.abs(err) > 0.05).mean() > 0.5  # the check sees a real heading error
        e.step(torch.zeros(400, 12))
    saved = e.state_dict()
    twin = Go1Env(cfg, seed=9, nthread=1)
    twin.load_state_dict(saved)
    np.testing.assert_array_equal(twin.heading_rad, e.heading_rad)  # NaN where yaw rates are drawn
    twin.load_state_dict({k: v for k, v in saved.items() if k != "heading_rad"})  # saved before them
    assert np.isnan(twin.heading_rad).all()
    e.hold_commands(np.tile([0.5, 0.0, 0.0], (400, 1)))
    assert np.isnan(e.heading_rad).all()
    e.step(torch.zeros(400, 12))
    assert (e.command[:, 2] == 0).all()
    plain = Go1Env(Go1TaskConfig(num_envs=400, commands=replace(cmds, heading_prob=0.0)), seed=3, nthread=1)
    assert np.isnan(plain.heading_rad).all()
    with pytest.raises(ValueError, match="heading_prob"):
        CommandConfig(heading_prob=1.5)
    with pytest.raises(ValueError, match="heading_stiffness"):
        CommandConfig(heading_stiffness=0.0)


@pytest.fixture(scope="module")
def env() -> Go1Env:
    return Go1Env(Go1TaskConfig(num_envs=4), seed=1, nthread=1)


def test_critic_sees_the_joint_friction_scale_only_when_randomized() -> None:
    base = Go1TaskConfig(num_envs=4)
    assert base.randomization is not None
    jf = replace(base, randomization=replace(base.randomization, joint_friction_scale=(0.8, 1.8)))
    env = Go1Env(jf, seed=2, nthread=1)
    _, critic = env.observations()
    assert critic.shape == (4, CRITIC_DIM + 1)
    torch.testing.assert_close(
        critic[:, -1], torch.as_tensor(env.randomizer.joint_friction_scale, dtype=torch.float32)
    )
    assert not np.allclose(env.randomizer.joint_friction_scale, 1.0)


def test_smoke_step_shapes_and_values(env: Go1Env) -> None:
    actor, critic = env.observations()
    assert actor.shape == (4, 3 * FRAME_DIM) and critic.shape == (4, CRITIC_DIM)
    res = env.step(torch.zeros(4, 12))
    assert res.actor_obs.shape == (4, 3 * FRAME_DIM)
    assert torch.isfinite(res.reward).all() and torch.isfinite(res.critic_obs).all()
    assert set(res.terms) == {t.name for t in env.cfg.rewards}
    # newest frame first: the command slot of the newest frame is each robot's command
    torch.testing.assert_close(res.actor_obs[:, 6:9], torch.as_tensor(env.command, dtype=torch.float32))
    with pytest.raises(ValueError, match=r"\(4, 12\)"):
        env.step(torch.zeros(3, 12))
    with pytest.raises(FloatingPointError, match="non-finite"):
        env.step(torch.full((4, 12), float("nan")))


def test_partial_reset_only_touches_the_given_robots(env: Go1Env) -> None:
    for _ in range(3):
        env.step(torch.zeros(4, 12))
    before = env.step_count.copy()
    env.reset(np.array([2]))
    assert env.step_count[2] == 0
    assert (env.step_count[[0, 1, 3]] == before[[0, 1, 3]]).all()


def test_randomization_writes_per_world_physics(env: Go1Env) -> None:
    rnd = env.randomizer
    fr = env.sim.batch.expanded("geom_friction")
    assert fr is not None
    np.testing.assert_allclose(fr[:, env.index.floor_geom, 0], rnd.friction)
    assert len(set(np.round(rnd.friction, 6))) == 4
    lo, hi = env.cfg.randomization.floor_friction  # type: ignore[union-attr]
    assert ((rnd.friction >= lo) & (rnd.friction <= hi)).all()
    mass = env.sim.batch.expanded("body_mass")
    assert mass is not None
    trunk = mass[:, env.index.trunk_body]
    np.testing.assert_allclose(trunk, go1.TRUNK_MASS_KG + rnd.trunk_added_mass_kg)


def test_joint_friction_randomization_is_per_world_and_off_by_default(env: Go1Env) -> None:
    assert env.sim.batch.expanded("dof_damping") is None  # default (1, 1): the model's own values
    cfg = Go1TaskConfig(num_envs=3, randomization=RandomizationConfig(joint_friction_scale=(0.8, 1.8)))
    e = Go1Env(cfg, seed=2, nthread=1)
    scale = e.randomizer.joint_friction_scale
    assert ((scale >= 0.8) & (scale <= 1.8)).all() and len(set(scale)) == 3
    dofs = e.index.joint_qvel
    damping, friction = e.sim.batch.expanded("dof_damping"), e.sim.batch.expanded("dof_frictionloss")
    assert damping is not None and friction is not None
    np.testing.assert_allclose(damping[:, dofs], e.model.dof_damping[dofs] * scale[:, None])
    np.testing.assert_allclose(friction[:, dofs], e.model.dof_frictionloss[dofs] * scale[:, None])
    assert (damping[:, :6] == 0).all()  # the free joint is untouched
    with pytest.raises(ValueError, match="joint_friction_scale"):
        RandomizationConfig(joint_friction_scale=(-0.1, 1.0))


def test_push_kicks_the_trunk_and_hold_commands_sticks() -> None:
    e = Go1Env(replace(nominal(Go1TaskConfig(num_envs=2)), episode_length_s=5.0), seed=0, nthread=1)
    e.hold_commands(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.5]]))
    actor, _ = e.observations()  # every stacked frame reads the held command, not reset's draw
    for k in range(e.cfg.history):
        torch.testing.assert_close(
            actor[:, k * FRAME_DIM + 6 : k * FRAME_DIM + 9], torch.tensor([[1.0, 0, 0], [0, 0, 1.5]])
        )
    v0 = e.sim.bind("qvel")[:, 0:2].copy()
    e.push(np.array([0]), np.array([[2.0, 0.0]]))
    v1 = e.sim.bind("qvel")[:, 0:2]
    np.testing.assert_allclose(v1[0] - v0[0], [2.0, 0.0])
    np.testing.assert_allclose(v1[1], v0[1])
    for _ in range(3):
        e.step(torch.zeros(2, 12))
    e.reset(np.array([0, 1]))
    np.testing.assert_allclose(e.command, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.5]])


def test_nominal_world_has_no_noise_and_unit_parameters() -> None:
    e = Go1Env(nominal(Go1TaskConfig(num_envs=2)), seed=0, nthread=1)
    assert (e.randomizer.kp_scale == 1.0).all() and (e.randomizer.latency_steps == 0).all()
    a1, _ = e.observations()
    a2, _ = e.observations()
    torch.testing.assert_close(a1, a2)
    # the three history frames start identical
    torch.testing.assert_close(a1[:, :FRAME_DIM], a1[:, FRAME_DIM : 2 * FRAME_DIM])


def test_robot_that_falls_is_terminated_and_reset() -> None:
    e = Go1Env(nominal(Go1TaskConfig(num_envs=2)), seed=0, nthread=1)
    qpos = e.sim.bind("qpos")
    qpos[0, 3:7] = [math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0]  # rolled 90°
    e.sim.forward()
    res = e.step(torch.zeros(2, 12))
    assert bool(res.terminated[0]) and not bool(res.terminated[1])
    assert e.step_count[0] == 0 and e.step_count[1] == 1
    assert float(res.terms["fall"][0]) == 1.0
