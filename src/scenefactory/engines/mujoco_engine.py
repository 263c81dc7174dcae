"""The physics tier: articulated MuJoCo cars (``vehicles.car``), all worlds stepped together.

Every world is one MuJoCo simulation of the same model — a road plane plus K cars — held in one
``engines.mjbatch.BatchedSim`` (a persistent ``mujoco.batch.Batch``, native threads). Lane
geometry lives in the task as tensors, so every world shares the layout; per-world road friction
is a live ``geom_friction`` row.

Control, per policy step (``dt``) and held over its ``round(dt · physics_hz)`` physics substeps:

- steering: the road-wheel target ``δ*`` from :func:`~scenefactory.engines.base.actions_to_controls`
  moves toward it no faster than ``max_steer_rate_radps`` (as on the kinematic tier) and is sent to
  the two front servos through Ackermann geometry;
- ``accel`` ≥ 0: drive torque per driven wheel ``T = a·(M·r + 4·I_w/r) / D`` — the torque that
  accelerates the whole car (mass M, four wheels of spin inertia I_w, radius r, D driven wheels) at
  ``a`` on a dry road, so a given action asks for the same acceleration as on the kinematic tier;
  zero above ``max_speed_mps`` (a governor);
- ``accel`` < 0: brake torque ``b·(M·r + 4·I_w/r)`` split 65/35 front/rear, as spin-joint
  ``frictionloss`` (Coulomb friction, enforced by the solver; see ``vehicles.car``); the tyres lock
  when that exceeds the road's grip, and the car then slides at μ·g.

Vehicle–vehicle contacts are the task's collision events: each chassis carries a touch sensor over
its body box, read after every substep, and :meth:`MujocoEngine.collisions` reports which cars
touched another (or the road with their body) during the last policy step.

Finished and padding agents are parked 2 km away (a row per world, far from everything) with
their brakes on, so they cannot obstruct anyone; :meth:`state` keeps reporting the pose at which
they stopped (as the kinematic tier's frozen agents do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np
import torch

from scenefactory.engines.base import VehicleState, check_actions, check_reset, load_tensors_state
from scenefactory.engines.mjbatch import BatchedSim
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ
from scenefactory.vehicles.car import CarIndex, CarParams, ackermann_angles, drive_ctrl, world_mjcf
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

BRAKE_BIAS_FRONT = 0.65
"""Share of the brake torque on the front axle: braking moves load forward, so an even split
would lock the rear wheels early and stop ~15 % longer than v²/(2μg) on a dry road."""
BRAKE_SHARE = np.array(
    [BRAKE_BIAS_FRONT / 2, BRAKE_BIAS_FRONT / 2, (1 - BRAKE_BIAS_FRONT) / 2, (1 - BRAKE_BIAS_FRONT) / 2]
)
"""Per-wheel share of the total brake torque, in ``vehicles.car.WHEELS`` order (fl, fr, rl, rr)."""

PARK_XY_M = (2000.0, 2000.0)
PARK_SPACING_M = 10.0


def yaw_from_quat(q: np.ndarray) -> np.ndarray:
    """Heading about +z [rad] of quaternions (..., 4) in MuJoCo's (w, x, y, z) order."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def world_z_rate(q: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """World-frame z component [rad/s] of body angular velocities (..., 3) for orientations ``q``."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    r20 = 2.0 * (x * z - w * y)
    r21 = 2.0 * (y * z + w * x)
    r22 = 1.0 - 2.0 * (x * x + y * y)
    return r20 * omega_body[..., 0] + r21 * omega_body[..., 1] + r22 * omega_body[..., 2]


class MujocoEngine:
    """Batched MuJoCo cars behind the :class:`~scenefactory.engines.base.Engine` protocol."""

    name = "mujoco"

    def __init__(
        self,
        num_worlds: int,
        agents_per_world: int,
        dt: float = 0.1,
        params: VehicleParams | None = None,
        device: str | torch.device = "cpu",
        physics_hz: float = DEFAULT_PHYSICS_HZ,
        car: CarParams | None = None,
        nthread: int | None = None,
    ) -> None:
        """Build the world model and a persistent batch of ``num_worlds`` simulations."""
        if num_worlds < 1 or agents_per_world < 1:
            raise ValueError(f"need at least one world and one agent, got {num_worlds} x {agents_per_world}")
        substeps = round(dt * physics_hz)
        if substeps < 1 or not math.isclose(substeps / physics_hz, dt, rel_tol=1e-6):
            raise ValueError(
                f"the policy step {dt} s must be a whole number of physics steps at {physics_hz} Hz "
                f"(e.g. policy 10 Hz with physics 120 Hz, or 30 Hz with 120 Hz)"
            )
        self.num_worlds, self.agents_per_world = num_worlds, agents_per_world
        self.dt = float(dt)
        self.physics_hz = float(physics_hz)
        self.substeps = substeps
        self.params = params or VehicleParams()
        self.car = car or CarParams()
        self.device = torch.device(device)
        self.model = mujoco.MjModel.from_xml_string(
            world_mjcf(agents_per_world, self.car, friction=1.0, timestep_s=1.0 / physics_hz)
        )
        self.index = CarIndex.from_model(self.model)
        self.sim = BatchedSim(self.model, num_worlds, nthread)
        b = self.sim
        self._qpos, self._qvel, self._ctrl = b.bind("qpos"), b.bind("qvel"), b.bind("ctrl")
        self._sensordata = b.bind("sensordata")
        self._frictionloss = b.expand("dof_frictionloss")
        self._geom_friction = b.expand("geom_friction")
        self._touch_adr = self.index.touch_sensordata
        c = self.car
        wheel_inertia = c.wheel_inertia_kgm2[1]
        # wheel torque [N·m] per m/s² of car acceleration: M·r + 4·I_w/r (module docstring)
        self._torque_per_accel = c.total_mass_kg * c.wheel_radius_m + 4.0 * wheel_inertia / c.wheel_radius_m
        self._num_driven = self.index.drive_actuator.shape[1]
        shape = (num_worlds, agents_per_world)
        self._steer_cmd = np.zeros(shape)
        self._valid = np.zeros(shape, dtype=bool)
        self._live = np.zeros(shape, dtype=bool)
        self._prev_speed = np.zeros(shape)
        self._accel = np.zeros(shape)
        self._frozen = np.zeros((*shape, 3))  # x, y, yaw where a car stopped being live
        self._touch = np.zeros(shape, dtype=bool)
        self.friction = torch.ones(num_worlds, device=self.device)
        self._park_xy = np.stack(
            [
                PARK_XY_M[0] + PARK_SPACING_M * np.arange(agents_per_world),
                np.full(agents_per_world, PARK_XY_M[1]),
            ],
            axis=-1,
        )
        self._last_state: VehicleState | None = None

    # ---------------------------------------------------------------------------------- helpers

    def _place(
        self, w: np.ndarray, k: np.ndarray, xy: np.ndarray, yaw: np.ndarray, speed: np.ndarray
    ) -> None:
        """Put cars (w[i], k[i]) upright at ride height, wheels straight, rolling at ``speed``."""
        if w.size == 0:
            return
        fq, fv = self.index.free_qpos[k], self.index.free_qvel[k]  # (n, 7), (n, 6)
        rows = w[:, None]
        qpos = np.zeros((w.size, 7))
        qpos[:, 0:2] = xy
        qpos[:, 2] = self.car.com_height_m
        qpos[:, 3] = np.cos(0.5 * yaw)
        qpos[:, 6] = np.sin(0.5 * yaw)
        self._qpos[rows, fq] = qpos
        for adr in (self.index.steer_qpos, self.index.susp_qpos, self.index.wheel_qpos):
            self._qpos[rows, adr[k]] = 0.0
        qvel = np.zeros((w.size, 6))
        qvel[:, 0] = speed * np.cos(yaw)
        qvel[:, 1] = speed * np.sin(yaw)
        self._qvel[rows, fv] = qvel
        self._qvel[rows, self.index.steer_qvel[k]] = 0.0
        self._qvel[rows, self.index.wheel_qvel[k]] = (speed / self.car.wheel_radius_m)[:, None]
        self._qvel[rows, self.index.susp_qvel[k]] = 0.0

    def _park(self, w: np.ndarray, k: np.ndarray) -> None:
        """Move cars out of the way with brakes on (finished or padding agents)."""
        if w.size == 0:
            return
        self._place(w, k, self._park_xy[k], np.zeros(w.size), np.zeros(w.size))
        self._frictionloss[w[:, None], self.index.wheel_qvel[k]] = self.car.max_brake_torque_nm
        self._ctrl[w[:, None], self.index.drive_actuator[k]] = 0.0

    # --------------------------------------------------------------------------------- protocol

    def reset(
        self, world_ids: torch.Tensor, pose: torch.Tensor, speed_mps: torch.Tensor, valid: torch.Tensor
    ) -> None:
        """Place the agents of ``world_ids`` at ``pose`` (n, K, 3) rolling at ``speed_mps`` (n, K)."""
        k_n = self.agents_per_world
        n = int(world_ids.numel())
        check_reset(pose, speed_mps, valid, n, k_n)
        if n == 0:
            return
        ids = world_ids.cpu().numpy().astype(np.int64)
        pose_np = pose.detach().cpu().double().numpy()
        speed_np = speed_mps.detach().cpu().double().numpy().clip(0.0, self.params.max_speed_mps)
        valid_np = valid.cpu().numpy().astype(bool)
        self._qpos[ids] = self.model.qpos0
        self._qvel[ids] = 0.0
        self._ctrl[ids] = 0.0
        self._frictionloss[ids] = 0.0
        wi, ki = np.nonzero(valid_np)
        self._place(ids[wi], ki, pose_np[wi, ki, :2], pose_np[wi, ki, 2], speed_np[wi, ki])
        wp, kp = np.nonzero(~valid_np)
        self._park(ids[wp], kp)
        self._steer_cmd[ids] = 0.0
        self._valid[ids] = valid_np
        self._live[ids] = valid_np
        self._prev_speed[ids] = np.where(valid_np, speed_np, 0.0)
        self._accel[ids] = 0.0
        self._touch[ids] = False
        self._frozen[ids] = pose_np
        self.sim.forward(np.unique(ids))  # mujoco.batch takes sorted ids; reset takes any order
        self._last_state = None

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Tyre–road friction of worlds ``world_ids``: the road geom's sliding friction."""
        ids = world_ids.cpu().numpy().astype(np.int64)
        self._geom_friction[ids, self.index.ground_geom, 0] = mu.detach().cpu().double().numpy()
        self.friction[world_ids] = mu.float().to(self.device)

    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """Hold the controls for ``substeps`` physics steps; see the module docstring."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        live = active.cpu().numpy().astype(bool) & self._valid
        stopped = self._live & ~live
        if stopped.any():
            st = self.state()
            ws, ks = np.nonzero(stopped)
            self._frozen[ws, ks, 0:2] = st.pos_xy.numpy()[ws, ks]
            self._frozen[ws, ks, 2] = st.yaw.numpy()[ws, ks]
            self._park(ws, ks)
        self._live = live
        steer_target_t, accel_t = actions_to_controls(actions.detach().cpu().double(), self.params)
        steer_target, accel = steer_target_t.numpy(), accel_t.numpy()
        max_d = self.params.max_steer_rate_radps * self.dt
        self._steer_cmd = np.clip(
            self._steer_cmd + np.clip(steer_target - self._steer_cmd, -max_d, max_d),
            -self.params.max_steer_rad,
            self.params.max_steer_rad,
        )
        steer = np.where(live, self._steer_cmd, 0.0)
        left, right = ackermann_angles(steer, self.car)
        sa = self.index.steer_actuator
        self._ctrl[:, sa[:, 0]] = left
        self._ctrl[:, sa[:, 1]] = right
        fast = self._prev_speed >= self.params.max_speed_mps
        drive = np.where(live & (accel > 0.0) & ~fast, accel, 0.0) * self._torque_per_accel / self._num_driven
        wheel_speed = self._qvel[:, self.index.wheel_qvel[:, self.index.drive_wheel]]  # (W, K, D)
        self._ctrl[:, self.index.drive_actuator] = drive_ctrl(drive[..., None], wheel_speed, self.car)
        total = np.where(accel < 0.0, -accel, 0.0) * self._torque_per_accel  # (W, K) [N·m]
        brake = total[..., None] * BRAKE_SHARE  # (W, K, 4): front-biased like a real car
        brake = np.where(
            live[..., None], np.minimum(brake, self.car.max_brake_torque_nm), self.car.max_brake_torque_nm
        )
        self._frictionloss[:, self.index.wheel_qvel] = brake
        touch = np.zeros_like(self._touch)
        for _ in range(self.substeps):
            self.sim.step(1)
            touch |= self._sensordata[:, self._touch_adr] > 0.0
        self._touch = touch & live
        self.sim.check_health(f"try a higher physics rate than {self.physics_hz} Hz")
        self._last_state = None
        st = self.state()
        speed = st.speed.numpy().astype(np.float64)
        self._accel = np.where(live, (speed - self._prev_speed) / self.dt, 0.0)
        self._prev_speed = speed
        self._last_state = None
        return self.state()

    HOST_FIELDS = ("_steer_cmd", "_valid", "_live", "_prev_speed", "_accel", "_frozen", "_touch")
    """This engine's own arrays that the next step reads."""

    def state_dict(self) -> dict[str, Any]:
        """MuJoCo's integration state of every world with the per-world friction and brake fields,
        and this engine's command and bookkeeping arrays (see :meth:`Engine.state_dict`)."""
        host = {f: torch.from_numpy(np.array(getattr(self, f), copy=True)) for f in self.HOST_FIELDS}
        return {"sim": self.sim.state_dict(), "host": host, "friction": self.friction.detach().cpu().clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (every array checked before any is written)."""
        host = state.get("host")
        if not isinstance(host, Mapping) or "sim" not in state:
            raise ValueError("MujocoEngine state lacks 'host' or 'sim'")
        for f in self.HOST_FIELDS:
            value, arr = host.get(f), getattr(self, f)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != arr.shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"MujocoEngine state 'host.{f}' is {got}, this engine holds {arr.shape}")
        load_tensors_state(self, {"friction": state.get("friction")}, ("friction",))
        self.sim.load_state_dict(state["sim"])
        for f in self.HOST_FIELDS:
            getattr(self, f)[...] = host[f].numpy()
        self._last_state = None

    def collisions(self) -> torch.Tensor:
        """(W, K) bool: the car's body touched another car (or the road) during the last step."""
        return torch.from_numpy(self._touch.copy()).to(self.device)

    def state(self) -> VehicleState:
        """Current batched state; cars that are not live report where they stopped, at rest."""
        if self._last_state is not None:
            return self._last_state
        fq, fv = self.index.free_qpos, self.index.free_qvel
        q = self._qpos[:, fq]  # (W, K, 7)
        v = self._qvel[:, fv]  # (W, K, 6)
        yaw = yaw_from_quat(q[..., 3:7])
        live = self._live
        pos = np.where(live[..., None], q[..., 0:2], self._frozen[..., 0:2])
        yaw = np.where(live, yaw, self._frozen[..., 2])
        vel = np.where(live[..., None], v[..., 0:2], 0.0)
        c, s = np.cos(yaw), np.sin(yaw)
        vx_b = c * vel[..., 0] + s * vel[..., 1]
        vy_b = -s * vel[..., 0] + c * vel[..., 1]
        yaw_rate = np.where(live, world_z_rate(q[..., 3:7], v[..., 3:6]), 0.0)
        steer = np.where(live, self._qpos[:, self.index.steer_qpos].mean(axis=-1), 0.0)

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=self.device)

        self._last_state = VehicleState(
            pos_xy=t(pos),
            yaw=t(yaw),
            vel_xy=t(vel),
            vel_b=t(np.stack([vx_b, vy_b], axis=-1)),
            speed=t(vx_b),
            yaw_rate=t(yaw_rate),
            steer=t(steer),
            accel=t(self._accel),
            valid=torch.as_tensor(self._valid, device=self.device),
        )
        return self._last_state
