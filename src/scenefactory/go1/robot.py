"""A Unitree Go1-class quadruped in MJCF, written from primitive geoms and public numbers.

Every constant of the robot lives here (masses, inertias, link lengths, joint ranges, torque
limits, home pose, PD defaults); the task, the deploy runner and the exporter read them from this
module only. Numbers: ``shared/reference/locomotion.md`` (Unitree's published Go1 description as
used by Isaac Lab, MuJoCo Menagerie and MuJoCo Playground).

Kinematic tree (x forward, y left, z up; leg order FR, FL, RR, RL; joints per leg hip abduction
about x, thigh about y, calf (knee) about y)::

    trunk (free joint, 5.204 kg)
      {leg}_hip    at (±0.1881, ±0.04675, 0)   abduction, ±0.863 rad          0.680 kg
        {leg}_thigh  at (0, ±0.08, 0)           thigh, −0.686 … 4.501 rad      1.009 kg
          {leg}_calf   at (0, 0, −0.213)        knee, −2.818 … −0.888 rad      0.196 kg
            foot sphere r 0.023 at (0, 0, −0.213)

Total mass 12.744 kg. A positive thigh angle swings the knee backward; a negative knee angle folds
the calf forward, so the home pose (abduction ±0.1 outward, thigh 0.9, knee −1.8) puts each foot
under its hip with the trunk 0.288 m above the ground.

Actuation: one ``motor`` per joint (ctrl = joint torque [N·m], ``ctrlrange`` the torque limit:
23.7 N·m hip and thigh, 35.55 N·m knee). PD position control runs in the task, once per physics
step: ``τ = clip(s · (Kp·(q* − q) − Kd·q̇), ±τ_max)`` with motor-strength scale ``s``
(:func:`pd_torque`); this is the actuator model legged_gym and Isaac Lab's ``DCMotor`` use.
Joints carry rotor armature 0.01 kg·m², viscous damping 0.1 N·m·s/rad and dry friction
0.2 N·m (the reference's ranges).

Contacts: the floor (``priority`` 1, so its friction governs and can be randomized per world
through ``geom_friction``) touches the trunk box, the hip, thigh and calf capsules and the four
foot spheres; robot geoms never touch each other (no self-collision, as in Playground). Feet use
``condim`` 3 (sliding friction; the reference's condim 6 adds torsional/rolling friction at ~30 %
more solver cost). The integrator is ``implicitfast`` with a pyramidal friction cone.

Sensors (on the ``imu`` site at the trunk origin): ``gyro`` (body rates, rad/s),
``accelerometer`` (m/s², includes gravity), ``orientation`` (framequat, w x y z), and the
privileged ``local_linvel`` (velocimeter, m/s, body frame; the critic's, never the actor's);
``{leg}_touch`` (normal force on each foot, N), ``{leg}_thigh_touch`` and ``{leg}_calf_touch``
(normal force on the thigh and calf capsules: a leg, not a foot, on the ground, such as a shin on a
stair's edge) and ``trunk_touch`` (the trunk hit the ground).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

LEGS = ("FR", "FL", "RR", "RL")
"""Leg order of every per-leg array: front-right, front-left, rear-right, rear-left."""

JOINTS_PER_LEG = ("hip", "thigh", "calf")
LEG_PARTS = ("thigh", "calf")
"""Links whose touch sensors report a leg, not a foot, on the ground (a shin on a stair's edge)."""
LEG_TOUCH_MARGIN_M = 0.005
"""How far each thigh and calf touch site reaches beyond its capsule (contact points lie on it)."""
LEG_TOUCH_SENSORS = len(LEGS) * len(LEG_PARTS)
"""The thigh and calf touch sensors, last in ``sensordata`` (states saved before them lack them)."""
JOINT_NAMES = tuple(f"{leg}_{j}_joint" for leg in LEGS for j in JOINTS_PER_LEG)
"""The 12 actuated joints in the order of every joint-space array (actions, observations, gains)."""
NUM_JOINTS = len(JOINT_NAMES)

HIP_OFFSET_M = (0.1881, 0.04675)
"""Hip joint position (x, |y|) in the trunk frame [m]."""
THIGH_OFFSET_M = 0.08
"""Lateral offset of the thigh joint from the hip joint [m] (outward)."""
THIGH_LENGTH_M = 0.213
CALF_LENGTH_M = 0.213
FOOT_RADIUS_M = 0.023

TRUNK_MASS_KG = 5.204
TRUNK_COM_M = (0.0223, 0.002, -0.0005)
TRUNK_INERTIA = (0.0168, 0.0630, 0.0717)
TRUNK_HALF_SIZE_M = (0.125, 0.04, 0.057)
HIP_MASS_KG = 0.68
HIP_INERTIA = (4.0e-4, 7.3e-4, 4.7e-4)
THIGH_MASS_KG = 1.009
THIGH_COM_M = (-0.003, 0.019, -0.031)
"""Thigh centre of mass (y mirrored to the leg's side)."""
THIGH_INERTIA = (4.6e-3, 4.7e-3, 8.2e-4)
CALF_MASS_KG = 0.196
CALF_COM_M = (0.004, 0.001, -0.146)
CALF_INERTIA = (1.48e-3, 1.50e-3, 3.6e-5)
TOTAL_MASS_KG = TRUNK_MASS_KG + 4 * (HIP_MASS_KG + THIGH_MASS_KG + CALF_MASS_KG)

JOINT_RANGE_RAD = {"hip": (-0.863, 0.863), "thigh": (-0.686, 4.501), "calf": (-2.818, -0.888)}
TORQUE_LIMIT_NM = {"hip": 23.7, "thigh": 23.7, "calf": 35.55}
VELOCITY_LIMIT_RADPS = 30.0
ARMATURE_KGM2 = 0.01
JOINT_DAMPING_NMS = 0.1
JOINT_FRICTIONLOSS_NM = 0.2
FOOT_FRICTION = 0.8

HOME_POSE_RAD = {"hip": 0.1, "thigh": 0.9, "calf": -1.8}
"""Home joint angles; the abduction sign flips so that every foot sits slightly outward."""
HOME_HEIGHT_M = 0.28
"""Trunk height at the home pose with the feet on the ground."""

DEFAULT_KP = 35.0
"""PD stiffness [N·m/rad], MuJoCo Playground's Go1 value. legged_gym's 20–25 leaves this model
standing 8 cm low and pitched 10° nose-up at the home pose (rear knees 0.35 rad off target, rear
thighs on the ground); 35 holds it at 0.237 m within 2°."""
DEFAULT_KD = 0.5
"""PD damping [N·m·s/rad]."""


def _side(leg: str) -> float:
    """+1 for left legs, −1 for right legs."""
    return 1.0 if leg[1] == "L" else -1.0


def _front(leg: str) -> float:
    return 1.0 if leg[0] == "F" else -1.0


def default_joint_pos() -> npt.NDArray[np.float64]:
    """(12,) home joint angles [rad] in :data:`JOINT_NAMES` order."""
    out = []
    for leg in LEGS:
        out += [HOME_POSE_RAD["hip"] * _side(leg), HOME_POSE_RAD["thigh"], HOME_POSE_RAD["calf"]]
    return np.array(out)


def torque_limits() -> npt.NDArray[np.float64]:
    """(12,) torque limits [N·m] in :data:`JOINT_NAMES` order."""
    return np.array([TORQUE_LIMIT_NM[j] for _ in LEGS for j in JOINTS_PER_LEG])


def joint_ranges() -> npt.NDArray[np.float64]:
    """(12, 2) joint ranges [rad] in :data:`JOINT_NAMES` order."""
    return np.array([JOINT_RANGE_RAD[j] for _ in LEGS for j in JOINTS_PER_LEG])


def pd_torque(
    target: npt.NDArray[np.float64],
    q: npt.NDArray[np.float64],
    qd: npt.NDArray[np.float64],
    kp: npt.NDArray[np.float64] | float,
    kd: npt.NDArray[np.float64] | float,
    strength: npt.NDArray[np.float64] | float = 1.0,
) -> npt.NDArray[np.float64]:
    """Saturated PD torque (..., 12) [N·m]: ``clip(s·(kp·(q* − q) − kd·q̇), ±τ_max)``."""
    tau = np.asarray(strength) * (np.asarray(kp) * (target - q) - np.asarray(kd) * qd)
    lim = torque_limits()
    return np.clip(tau, -lim, lim)


def _vec(v: tuple[float, ...] | npt.NDArray[np.float64]) -> str:
    return " ".join(f"{float(x):.6g}" for x in v)


def _leg_xml(leg: str) -> str:
    s, f = _side(leg), _front(leg)
    hx, hy = HIP_OFFSET_M
    rng = JOINT_RANGE_RAD
    lim = TORQUE_LIMIT_NM
    del lim
    thigh_com = (THIGH_COM_M[0], s * THIGH_COM_M[1], THIGH_COM_M[2])
    return f"""
      <body name="{leg}_hip" pos="{_vec((f * hx, s * hy, 0.0))}">
        <inertial pos="0 0 0" mass="{HIP_MASS_KG}" diaginertia="{_vec(HIP_INERTIA)}"/>
        <joint name="{leg}_hip_joint" axis="1 0 0" range="{_vec(rng["hip"])}"/>
        <geom name="{leg}_hip" type="cylinder" size="0.046 0.02" zaxis="0 1 0" class="collide"/>
        <body name="{leg}_thigh" pos="{_vec((0.0, s * THIGH_OFFSET_M, 0.0))}">
          <inertial pos="{_vec(thigh_com)}" mass="{THIGH_MASS_KG}" diaginertia="{_vec(THIGH_INERTIA)}"/>
          <joint name="{leg}_thigh_joint" axis="0 1 0" range="{_vec(rng["thigh"])}"/>
          <geom name="{leg}_thigh" type="capsule" fromto="0 0 0 0 0 {-THIGH_LENGTH_M}" size="0.015"
                class="collide"/>
          <site name="{leg}_thigh_touch" type="capsule" fromto="0 0 0 0 0 {-THIGH_LENGTH_M}"
                size="{0.015 + LEG_TOUCH_MARGIN_M}" rgba="0 0 0 0"/>
          <body name="{leg}_calf" pos="0 0 {-THIGH_LENGTH_M}">
            <inertial pos="{_vec(CALF_COM_M)}" mass="{CALF_MASS_KG}" diaginertia="{_vec(CALF_INERTIA)}"/>
            <joint name="{leg}_calf_joint" axis="0 1 0" range="{_vec(rng["calf"])}"/>
            <geom name="{leg}_calf" type="capsule" fromto="0 0 0 0 0 {-0.8 * CALF_LENGTH_M:.4f}"
                  size="0.01" class="collide"/>
            <site name="{leg}_calf_touch" type="capsule" fromto="0 0 0 0 0 {-0.8 * CALF_LENGTH_M:.4f}"
                  size="{0.01 + LEG_TOUCH_MARGIN_M}" rgba="0 0 0 0"/>
            <geom name="{leg}_foot" type="sphere" pos="0 0 {-CALF_LENGTH_M}" size="{FOOT_RADIUS_M}"
                  class="collide" friction="{FOOT_FRICTION} 0.02 0.01" rgba="0.1 0.1 0.1 1"/>
            <site name="{leg}_foot" type="sphere" pos="0 0 {-CALF_LENGTH_M}" size="{FOOT_RADIUS_M + 0.007}"
                  rgba="0 0 0 0"/>
          </body>
        </body>
      </body>"""


@dataclass(frozen=True)
class SolverOptions:
    """MuJoCo ``<option>`` settings of a Go1 world (training's by default)."""

    timestep_s: float = 0.005
    integrator: str = "implicitfast"
    cone: str = "pyramidal"
    solver: str = "Newton"
    iterations: int = 100


def go1_mjcf(
    timestep_s: float = 0.005,
    floor_friction: float = 1.0,
    with_visuals: bool = True,
    solver: SolverOptions | None = None,
    ground: tuple[str, str] | None = None,
    boxes_m: npt.NDArray[np.float64] | None = None,
) -> str:
    """The MJCF of one Go1 on a flat floor (see the module docstring).

    ``solver`` overrides the ``<option>`` settings (its timestep wins over ``timestep_s``);
    ``ground`` replaces the floor plane: (asset, worldbody) MJCF whose ground geom is named
    ``floor`` (``go1.terrain.hfield_xml``, the rough-terrain height field); ``boxes_m`` adds static
    obstacles (:func:`box_geoms_xml`)."""
    opt = solver or SolverOptions(timestep_s=timestep_s)
    legs = "".join(_leg_xml(leg) for leg in LEGS)
    q0 = default_joint_pos()
    motors = "\n".join(
        f'    <motor name="{name}" joint="{name}" ctrlrange="{-lim} {lim}"/>'
        for name, lim in zip(JOINT_NAMES, torque_limits(), strict=True)
    )
    touches = "\n".join(f'    <touch name="{leg}_touch" site="{leg}_foot"/>' for leg in LEGS)
    leg_touches = "\n".join(  # last: the sensors of older saved states are a prefix
        f'    <touch name="{leg}_{part}_touch" site="{leg}_{part}_touch"/>'
        for leg in LEGS
        for part in LEG_PARTS
    )
    home_qpos = _vec((0.0, 0.0, HOME_HEIGHT_M, 1.0, 0.0, 0.0, 0.0, *q0))
    tx, ty, tz = TRUNK_HALF_SIZE_M
    visual = (
        f"""
      <geom type="cylinder" size="0.058 {tx:.3f}" zaxis="1 0 0" class="visual"/>
      <geom type="box" size="0.03 0.05 0.03" pos="{tx + 0.02:.3f} 0 0.01" class="visual"
            rgba="0.2 0.2 0.2 1"/>"""
        if with_visuals
        else ""
    )
    floor = (
        '    <geom name="floor" type="plane" size="0 0 0.05" material="grid" contype="0" conaffinity="1"\n'
        f'          priority="1" friction="{floor_friction} 0.005 0.0001"/>'
    )
    ground_asset = ""
    if ground is not None:
        ground_asset, floor = "\n" + ground[0], ground[1]
    return f"""<mujoco model="go1">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{opt.timestep_s}" integrator="{opt.integrator}" cone="{opt.cone}" solver="{opt.solver}"
          iterations="{opt.iterations}"/>
  <size memory="2M"/>
  <visual><global offwidth="1280" offheight="720"/><quality shadowsize="2048"/></visual>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.32 0.36 0.40" rgb2="0.26 0.30 0.34"
             width="512" height="512"/>
    <material name="grid" texture="grid" texrepeat="1 1" texuniform="true"/>{ground_asset}
  </asset>
  <default>
    <joint armature="{ARMATURE_KGM2}" damping="{JOINT_DAMPING_NMS}" frictionloss="{JOINT_FRICTIONLOSS_NM}"/>
    <geom contype="0" conaffinity="0" condim="3" rgba="0.75 0.72 0.65 1"/>
    <default class="collide"><geom contype="1" conaffinity="0"/></default>
    <default class="visual"><geom contype="0" conaffinity="0" density="0" mass="0"/></default>
  </default>
  <worldbody>
    <light pos="0 0 4" dir="0 0 -1" directional="true"/>
{floor}{box_geoms_xml(boxes_m)}
    <body name="trunk" pos="0 0 {HOME_HEIGHT_M}">
      <camera name="track" mode="trackcom" pos="0.15 -1.15 0.38" xyaxes="1 0 0 0 0.3 1"/>
      <freejoint name="root"/>
      <inertial pos="{_vec(TRUNK_COM_M)}" mass="{TRUNK_MASS_KG}" diaginertia="{_vec(TRUNK_INERTIA)}"/>
      <geom name="trunk" type="box" size="{_vec(TRUNK_HALF_SIZE_M)}" class="collide"/>{visual}
      <site name="imu" pos="0 0 0"/>
      <site name="trunk_touch" type="box" size="{tx + 0.01:.3f} {ty + 0.01:.3f} {tz + 0.01:.3f}"
            rgba="0 0 0 0"/>
{legs}
    </body>
  </worldbody>
  <actuator>
{motors}
  </actuator>
  <sensor>
    <gyro name="gyro" site="imu"/>
    <accelerometer name="accelerometer" site="imu"/>
    <framequat name="orientation" objtype="site" objname="imu"/>
    <velocimeter name="local_linvel" site="imu"/>
{touches}
    <touch name="trunk_touch" site="trunk_touch"/>
{leg_touches}
  </sensor>
  <keyframe>
    <key name="home" qpos="{home_qpos}" ctrl="{_vec(np.zeros(NUM_JOINTS))}"/>
  </keyframe>
</mujoco>
"""


def box_geoms_xml(boxes_m: npt.NDArray[np.float64] | None) -> str:
    """Static axis-aligned boxes (B, 6) — centre x, y, z and half-sizes [m] — as world geoms that
    the robot collides with (like the floor: ``contype`` 0, ``conaffinity`` 1); "" for ``None``."""
    if boxes_m is None:
        return ""
    b = np.asarray(boxes_m, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 6 or not np.isfinite(b).all() or (b[:, 3:] <= 0).any():
        raise ValueError(f"boxes_m must be (B, 6) finite centres and positive half-sizes, got {b.shape}")
    return "".join(
        f'\n    <geom name="obstacle_{i}" type="box" pos="{_vec(row[:3])}" size="{_vec(row[3:])}" '
        'contype="0" conaffinity="1" rgba="0.55 0.45 0.35 1"/>'
        for i, row in enumerate(b)
    )


@dataclass(frozen=True)
class Go1Index:
    """Addresses into a compiled Go1 model (qpos/qvel/sensordata/ids), found once by name."""

    joint_qpos: npt.NDArray[np.int64]
    """(12,) qpos address of each actuated joint, :data:`JOINT_NAMES` order."""
    joint_qvel: npt.NDArray[np.int64]
    actuator: npt.NDArray[np.int64]
    trunk_body: int
    floor_geom: int
    link_bodies: npt.NDArray[np.int64]
    """(12,) hip, thigh and calf body ids, leg by leg."""
    gyro: npt.NDArray[np.int64]
    accelerometer: npt.NDArray[np.int64]
    orientation: npt.NDArray[np.int64]
    local_linvel: npt.NDArray[np.int64]
    foot_touch: npt.NDArray[np.int64]
    """(4,) sensordata address of each foot's touch sensor, :data:`LEGS` order."""
    leg_touch: npt.NDArray[np.int64]
    """(8,) sensordata address of each thigh's and calf's touch sensor, :data:`LEGS` order, thigh
    before calf."""
    trunk_touch: int

    @classmethod
    def from_model(cls, m: mujoco.MjModel) -> Go1Index:
        """Look every address up by name; a missing name raises ``KeyError`` naming it."""

        def jid(name: str) -> int:
            return int(m.joint(name).id)

        def sens(name: str) -> npt.NDArray[np.int64]:
            s = m.sensor(name)
            return np.arange(int(s.adr[0]), int(s.adr[0]) + int(s.dim[0]))

        ids = [jid(n) for n in JOINT_NAMES]
        links = [int(m.body(f"{leg}_{p}").id) for leg in LEGS for p in JOINTS_PER_LEG]
        return cls(
            joint_qpos=np.array([m.jnt_qposadr[i] for i in ids], dtype=np.int64),
            joint_qvel=np.array([m.jnt_dofadr[i] for i in ids], dtype=np.int64),
            actuator=np.array([m.actuator(n).id for n in JOINT_NAMES], dtype=np.int64),
            trunk_body=int(m.body("trunk").id),
            floor_geom=int(m.geom("floor").id),
            link_bodies=np.array(links, dtype=np.int64),
            gyro=sens("gyro"),
            accelerometer=sens("accelerometer"),
            orientation=sens("orientation"),
            local_linvel=sens("local_linvel"),
            foot_touch=np.array([sens(f"{leg}_touch")[0] for leg in LEGS], dtype=np.int64),
            leg_touch=np.array(
                [sens(f"{leg}_{part}_touch")[0] for leg in LEGS for part in LEG_PARTS], dtype=np.int64
            ),
            trunk_touch=int(sens("trunk_touch")[0]),
        )
