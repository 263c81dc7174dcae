"""Kinematic bicycle tier: the equations in its docstring, limits, masking and partial resets."""

from __future__ import annotations

import math

import pytest
import torch

from scenefactory.engines import EngineSpec, make_engine
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams, actions_to_controls


def _engine(w: int = 1, k: int = 1, speed: float = 0.0, dt: float = 0.1) -> KinematicEngine:
    eng = KinematicEngine(w, k, dt=dt)
    pose = torch.zeros(w, k, 3)
    eng.reset(torch.arange(w), pose, torch.full((w, k), speed), torch.ones(w, k, dtype=torch.bool))
    return eng


def _act(steer: float, accel: float, w: int = 1, k: int = 1) -> torch.Tensor:
    return torch.tensor([steer, accel]).expand(w, k, 2).clone()


def test_straight_acceleration_matches_hand_computation() -> None:
    # accel action 0.5 → 0.5 · 4 m/s² = 2 m/s²; from 10 m/s over 0.1 s: v' = 10.2, x' = v̄·dt = 10.1·0.1
    eng = _engine(speed=10.0)
    st = eng.step(_act(0.0, 0.5), torch.ones(1, 1, dtype=torch.bool))
    assert st.speed.item() == pytest.approx(10.2, abs=1e-5)
    assert st.pos_xy[0, 0, 0].item() == pytest.approx(1.01, abs=1e-5)
    assert st.pos_xy[0, 0, 1].item() == pytest.approx(0.0, abs=1e-6)
    assert st.accel.item() == pytest.approx(2.0, abs=1e-4)


def test_braking_stops_without_reversing() -> None:
    eng = _engine(speed=0.5)
    active = torch.ones(1, 1, dtype=torch.bool)
    st = eng.step(_act(0.0, -1.0), active)  # 8 m/s² · 0.1 s > 0.5 m/s
    assert st.speed.item() == 0.0
    assert st.accel.item() == pytest.approx(-5.0, abs=1e-4)  # achieved, not commanded
    x = st.pos_xy[0, 0, 0].item()
    st = eng.step(_act(0.0, -1.0), active)
    assert st.pos_xy[0, 0, 0].item() == pytest.approx(x)
    assert st.speed.item() == 0.0


def test_steering_rate_and_angle_limits() -> None:
    p = VehicleParams()
    eng = _engine(speed=5.0)
    active = torch.ones(1, 1, dtype=torch.bool)
    st = eng.step(_act(1.0, 0.0), active)
    assert st.steer.item() == pytest.approx(p.max_steer_rate_radps * 0.1, abs=1e-6)
    for _ in range(20):
        st = eng.step(_act(1.0, 0.0), active)
    assert st.steer.item() == pytest.approx(p.max_steer_rad, abs=1e-6)


def test_constant_steer_drives_the_circle_of_the_bicycle_equations() -> None:
    # CoM turning radius of the kinematic bicycle: R = l_r / sin β, β = atan(l_r/L · tan δ)
    p = VehicleParams()
    eng = _engine(speed=8.0, dt=0.01)
    active = torch.ones(1, 1, dtype=torch.bool)
    steer_action = 0.5
    delta = steer_action * p.max_steer_rad
    for _ in range(100):  # reach the steering angle (rate limited)
        eng.step(_act(steer_action, 0.0), active)
    beta = math.atan(p.rear_axle_to_com_m / p.wheelbase_m * math.tan(delta))
    radius = p.rear_axle_to_com_m / math.sin(beta)
    pts = []
    for _ in range(300):
        st = eng.step(_act(steer_action, 0.0), active)
        pts.append(st.pos_xy[0, 0].clone())
    xy = torch.stack(pts).double()
    # fit a circle through three points and compare radii
    a, b, c = xy[0], xy[100], xy[200]
    ab, bc, ca = (a - b).norm(), (b - c).norm(), (c - a).norm()
    area = 0.5 * abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]))
    fitted = (ab * bc * ca / (4 * area)).item()
    assert fitted == pytest.approx(radius, rel=2e-3)
    yaw_rate = 8.0 * math.cos(beta) * math.tan(delta) / p.wheelbase_m
    assert st.yaw_rate.item() == pytest.approx(yaw_rate, rel=1e-4)


def test_inactive_agents_do_not_move_and_partial_reset_touches_only_given_worlds() -> None:
    eng = _engine(w=3, k=2, speed=5.0)
    active = torch.tensor([[True, False], [True, True], [False, False]])
    st = eng.step(_act(0.2, 0.3, 3, 2), active)
    moved = st.pos_xy.norm(dim=-1) > 0
    assert torch.equal(moved, active)
    before = st.pos_xy.clone()
    pose = torch.tensor([[[10.0, 5.0, 1.0], [20.0, 5.0, -1.0]]])
    eng.reset(torch.tensor([1]), pose, torch.zeros(1, 2), torch.tensor([[True, False]]))
    st = eng.state()
    assert torch.equal(st.pos_xy[0], before[0]) and torch.equal(st.pos_xy[2], before[2])
    assert torch.allclose(st.pos_xy[1], pose[0, :, :2])
    assert st.valid[1].tolist() == [True, False]
    st = eng.step(_act(0.0, 1.0, 3, 2), torch.ones(3, 2, dtype=torch.bool))
    assert st.speed[1, 1].item() == 0.0  # invalid slot never moves


def test_action_mapping_and_bad_actions() -> None:
    p = VehicleParams()
    steer, accel = actions_to_controls(torch.tensor([[2.0, -0.5], [-0.5, 0.25]]), p)
    assert steer.tolist() == pytest.approx([p.max_steer_rad, -0.5 * p.max_steer_rad])
    assert accel.tolist() == pytest.approx([-0.5 * p.max_brake_mps2, 0.25 * p.max_accel_mps2])
    eng = _engine()
    with pytest.raises(ValueError, match="shape"):
        eng.step(torch.zeros(2, 1, 2), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(FloatingPointError, match="non-finite"):
        eng.step(torch.full((1, 1, 2), float("nan")), torch.ones(1, 1, dtype=torch.bool))


def test_unknown_engine_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown engine 'warp9'"):
        make_engine(EngineSpec(tier="warp9"), 1, 1)
    with pytest.raises(ValueError, match="rear_axle_to_com_m"):
        VehicleParams(rear_axle_to_com_m=3.0)
