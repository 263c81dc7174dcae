"""Simulated Go1 robots behind :class:`~scenefactory.go1.deploy.runner.RobotInterface` (no torch).

:class:`MujocoGo1` is one Go1 in plain MuJoCo (``MjData``, not the training batch) whose physics
and actuation are set by :class:`SimRobotConfig`: ``TRAINING_SIM`` reproduces the training
simulator (200 Hz, implicitfast, Newton, pyramidal cone, PD at the physics rate, no delay, no
noise); ``SIM2SIM`` is the community's standard check before hardware — 1 ms physics, the Euler
integrator, the CG solver with an elliptic friction cone, a 10 ms actuator delay, joint damping
and friction 50 % higher, sensor noise, and a heavier trunk.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import mujoco
import numpy as np

from scenefactory.go1 import robot as go1
from scenefactory.go1.deploy.runner import SensorReading
from scenefactory.go1.frames import gravity_in_body


@dataclass(frozen=True)
class SimRobotConfig:
    """How a simulated Go1 differs from the training simulator."""

    solver: go1.SolverOptions = field(default_factory=go1.SolverOptions)
    control_hz: float = 50.0
    actuator_delay_s: float = 0.0
    gyro_noise_radps: float = 0.0
    joint_pos_noise_rad: float = 0.0
    joint_vel_noise_radps: float = 0.0
    joint_damping_scale: float = 1.0
    joint_friction_scale: float = 1.0
    trunk_added_mass_kg: float = 0.0
    floor_friction: float = 1.0


TRAINING_SIM = SimRobotConfig()
SIM2SIM = SimRobotConfig(
    solver=go1.SolverOptions(
        timestep_s=0.001, integrator="Euler", cone="elliptic", solver="CG", iterations=50
    ),
    actuator_delay_s=0.010,
    gyro_noise_radps=0.1,
    joint_pos_noise_rad=0.005,
    joint_vel_noise_radps=0.5,
    joint_damping_scale=1.5,
    joint_friction_scale=1.5,
    trunk_added_mass_kg=0.5,
    floor_friction=0.8,
)


class MujocoGo1:
    """One simulated Go1: PD at the physics rate toward (delayed) targets, noisy sensors."""

    def __init__(self, cfg: SimRobotConfig = TRAINING_SIM, seed: int = 0) -> None:
        """Compile the model with ``cfg``'s solver settings and physical changes."""
        self.cfg = cfg
        self.model = mujoco.MjModel.from_xml_string(
            go1.go1_mjcf(solver=cfg.solver, floor_friction=cfg.floor_friction, with_visuals=False)
        )
        m = self.model
        self.index = go1.Go1Index.from_model(m)
        m.dof_damping[self.index.joint_qvel] *= cfg.joint_damping_scale
        m.dof_frictionloss[self.index.joint_qvel] *= cfg.joint_friction_scale
        m.body_mass[self.index.trunk_body] += cfg.trunk_added_mass_kg
        mujoco.mj_setConst(m, mujoco.MjData(m))
        self.data = mujoco.MjData(m)
        self.rng = np.random.default_rng(seed)
        dt = m.opt.timestep
        self.substeps = round(1.0 / (cfg.control_hz * dt))
        if not math.isclose(self.substeps * dt * cfg.control_hz, 1.0, rel_tol=1e-6):
            raise ValueError(
                f"control period 1/{cfg.control_hz} s is not a whole number of {dt} s physics steps"
            )
        self._delay_steps = round(cfg.actuator_delay_s / dt)
        self._pending: deque[tuple[int, np.ndarray, float, float]] = deque()
        self._t = 0
        self._active = (go1.default_joint_pos(), go1.DEFAULT_KP, go1.DEFAULT_KD)
        self.reset()

    def reset(self, yaw: float = 0.0) -> None:
        """Stand the robot at the home pose, heading ``yaw``."""
        d, ix = self.data, self.index
        mujoco.mj_resetData(self.model, d)
        d.qpos[2] = go1.HOME_HEIGHT_M
        d.qpos[3:7] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        d.qpos[ix.joint_qpos] = go1.default_joint_pos()
        mujoco.mj_forward(self.model, d)
        self._pending.clear()
        self._t = 0
        self._active = (go1.default_joint_pos(), go1.DEFAULT_KP, go1.DEFAULT_KD)

    def read(self) -> SensorReading:
        """Sensors with the configured noise."""
        d, ix, c, r = self.data, self.index, self.cfg, self.rng
        return SensorReading(
            gyro_radps=d.sensordata[ix.gyro] + r.uniform(-1, 1, 3) * c.gyro_noise_radps,
            quat_wxyz=d.sensordata[ix.orientation].copy(),
            joint_pos_rad=d.qpos[ix.joint_qpos] + r.uniform(-1, 1, 12) * c.joint_pos_noise_rad,
            joint_vel_radps=d.qvel[ix.joint_qvel] + r.uniform(-1, 1, 12) * c.joint_vel_noise_radps,
        )

    def command_pd(self, joint_targets: np.ndarray, kp: float, kd: float) -> None:
        """Queue targets; they reach the motors ``actuator_delay_s`` later."""
        due = self._t + self._delay_steps
        self._pending.append((due, np.asarray(joint_targets, dtype=np.float64).copy(), kp, kd))

    def wait_for_tick(self) -> None:
        """Run the physics (PD every physics step) up to the next control tick."""
        m, d, ix = self.model, self.data, self.index
        for _ in range(self.substeps):
            while self._pending and self._pending[0][0] <= self._t:
                self._active = self._pending.popleft()[1:]
            self._t += 1
            target, kp, kd = self._active
            d.ctrl[ix.actuator] = go1.pd_torque(target, d.qpos[ix.joint_qpos], d.qvel[ix.joint_qvel], kp, kd)
            mujoco.mj_step(m, d)
        if not (np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()):
            raise FloatingPointError("simulated Go1 state became NaN/inf")

    # ------------------------------------------------------------------ ground truth for checks

    def body_velocity(self) -> tuple[np.ndarray, float]:
        """(true planar body velocity (2,) [m/s], true yaw rate [rad/s])."""
        d, ix = self.data, self.index
        return d.sensordata[ix.local_linvel][:2].copy(), float(d.sensordata[ix.gyro][2])

    def fallen(self, tilt_deg: float = 60.0) -> bool:
        """Trunk on the ground or tilted past ``tilt_deg``."""
        d, ix = self.data, self.index
        g = gravity_in_body(d.sensordata[ix.orientation])
        return bool(d.sensordata[ix.trunk_touch] > 0.0 or g[2] > -math.cos(math.radians(tilt_deg)))
