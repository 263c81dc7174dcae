"""The Go1-class robot model: masses, joint limits, actuators, and standing under PD at home."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from scenefactory.go1 import robot as go1


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(go1.go1_mjcf())


def test_total_mass_matches_go1(model: mujoco.MjModel) -> None:
    """Go1 weighs ≈ 12.7 kg; the visual geoms must add nothing."""
    assert float(model.body_mass.sum()) == pytest.approx(12.744, abs=0.01)
    assert pytest.approx(12.744, abs=1e-9) == go1.TOTAL_MASS_KG
    plain = mujoco.MjModel.from_xml_string(go1.go1_mjcf(with_visuals=False))
    assert float(plain.body_mass.sum()) == pytest.approx(float(model.body_mass.sum()))


def test_joint_order_ranges_and_torque_limits(model: mujoco.MjModel) -> None:
    idx = go1.Go1Index.from_model(model)
    assert model.nu == 12 and len(go1.JOINT_NAMES) == 12
    for k, name in enumerate(go1.JOINT_NAMES):
        j = model.joint(name)
        part = name.split("_")[1]
        np.testing.assert_allclose(j.range, go1.JOINT_RANGE_RAD[part])
        a = model.actuator(name)
        np.testing.assert_allclose(a.ctrlrange, [-go1.TORQUE_LIMIT_NM[part], go1.TORQUE_LIMIT_NM[part]])
        assert idx.actuator[k] == a.id
    assert go1.JOINT_RANGE_RAD["calf"] == (-2.818, -0.888)
    assert go1.TORQUE_LIMIT_NM["calf"] == pytest.approx(35.55)


def test_home_pose_puts_feet_on_the_ground_under_the_hips(model: mujoco.MjModel) -> None:
    d = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, d, model.key("home").id)
    mujoco.mj_forward(model, d)
    for leg in go1.LEGS:
        foot = d.site_xpos[model.site(f"{leg}_foot").id]
        hip = d.xpos[model.body(f"{leg}_hip").id]
        assert foot[2] == pytest.approx(go1.FOOT_RADIUS_M, abs=0.005)
        assert foot[0] == pytest.approx(hip[0], abs=1e-6)


def test_pd_torque_saturates_at_the_motor_limits() -> None:
    q = go1.default_joint_pos()
    tau = go1.pd_torque(q + 10.0, q, np.zeros(12), 35.0, 0.5)
    np.testing.assert_allclose(tau, go1.torque_limits())
    # Below saturation the motor strength scales the PD torque: a 0.1 rad error at kp 35 asks for
    # 3.5 N·m (well under every limit), 1.75 N·m at half strength, and the damping term scales too.
    full = go1.pd_torque(q + 0.1, q, np.full(12, 1.0), 35.0, 0.5)
    half = go1.pd_torque(q + 0.1, q, np.full(12, 1.0), 35.0, 0.5, strength=0.5)
    np.testing.assert_allclose(full, 3.5 - 0.5)
    np.testing.assert_allclose(half, 0.5 * (3.5 - 0.5))


def test_stands_stable_under_pd_at_the_home_pose(model: mujoco.MjModel) -> None:
    """3 s of PD (default gains) toward the home pose from the home keyframe: the robot settles
    standing — trunk above 0.22 m, within 5° of level, within 6 cm of where it started, at rest,
    touching the floor with its feet only."""
    d = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, d, model.key("home").id)
    idx = go1.Go1Index.from_model(model)
    q0 = go1.default_joint_pos()
    for _ in range(600):
        d.ctrl[:] = go1.pd_torque(
            q0, d.qpos[idx.joint_qpos], d.qvel[idx.joint_qvel], go1.DEFAULT_KP, go1.DEFAULT_KD
        )
        mujoco.mj_step(model, d)
    assert d.qpos[2] > 0.22
    _, x, y, _ = d.qpos[3:7]
    tilt = math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y)))))
    assert tilt < 5.0
    assert np.linalg.norm(d.qpos[0:2]) < 0.06
    assert np.abs(d.qvel).max() < 0.05
    feet = {model.geom(f"{leg}_foot").id for leg in go1.LEGS}
    touching = {int(c.geom2) for c in d.contact[: d.ncon]} | {int(c.geom1) for c in d.contact[: d.ncon]}
    touching.discard(model.geom("floor").id)
    assert touching == feet
    assert (d.sensordata[idx.foot_touch] > 10.0).all()
    assert d.sensordata[idx.trunk_touch] == 0.0
    assert (d.sensordata[idx.leg_touch] == 0.0).all()  # standing on its feet: no thigh or calf down


def test_a_shin_on_an_edge_registers_on_its_calf_sensor() -> None:
    """The home pose over a 7 cm ledge just behind the front feet (a stair's nosing under the shins):
    the front calves touch it, their touch sensors read the force, and no foot's or thigh's does."""
    ground = (
        "",
        '<geom name="floor" type="plane" size="0 0 0.05" contype="0" conaffinity="1" priority="1"/>'
        '<geom name="ledge" type="box" pos="0.11 0 0.035" size="0.03 0.3 0.035" contype="0"'
        ' conaffinity="1"/>',
    )
    model = mujoco.MjModel.from_xml_string(go1.go1_mjcf(with_visuals=False, ground=ground))
    idx = go1.Go1Index.from_model(model)
    d = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, d, model.key("home").id)
    mujoco.mj_forward(model, d)
    touching = {int(c.geom1) for c in d.contact[: d.ncon]} | {int(c.geom2) for c in d.contact[: d.ncon]}
    assert touching == {model.geom(n).id for n in ("FR_calf", "FL_calf", "ledge")}
    thigh_calf = d.sensordata[idx.leg_touch].reshape(4, 2)  # FR, FL, RR, RL; thigh, calf
    assert (thigh_calf[:2, 1] > 1.0).all()
    assert (thigh_calf[:, 0] == 0.0).all() and (thigh_calf[2:, 1] == 0.0).all()
    assert (d.sensordata[idx.foot_touch] == 0.0).all()
