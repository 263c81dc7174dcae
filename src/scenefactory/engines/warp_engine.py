"""The ``mujoco-warp`` tier: the mujoco tier's cars on MuJoCo Warp, every world in one batched model.

The same MJCF (``vehicles.car.world_mjcf``: a road plane plus K articulated cars) and the same
control law as :class:`~scenefactory.engines.mujoco_engine.MujocoEngine` (its module docstring
writes it out: steer-rate limit, Ackermann servos, drive torque with a governor, brake torque split
65/35 front/rear as spin-joint ``frictionloss``, finished and padding cars parked 2 km away with
their brakes on), held in one :class:`~scenefactory.engines.mjwarp.WarpSim` on the engine's device:

- every step is torch operations on :attr:`device` writing into live views of MuJoCo Warp's arrays
  (no numpy, no copies, no device-to-host read but the health check's one flag);
- the ``round(dt · physics_hz)`` substeps of a policy step are one recorded graph (a CUDA graph on a
  GPU), in which a small Warp kernel ORs each car's touch sensor after every substep — the
  collision events of :meth:`WarpEngine.collisions`;
- road friction per world is the road geom's row of the per-world ``geom_friction``, brakes the
  per-world ``dof_frictionloss``;
- partial resets by world ids write only those worlds' rows.

MuJoCo Warp computes in float32: trajectories agree with the mujoco tier within the tolerances of
``tests/engines/test_warp_equivalence.py``, braking distances and lateral limits within 5 %.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mujoco
import torch
import warp as wp

from scenefactory.engines.base import VehicleState, check_actions, check_reset
from scenefactory.engines.mjwarp import WarpSim
from scenefactory.engines.mujoco_engine import BRAKE_BIAS_FRONT, PARK_SPACING_M, PARK_XY_M
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ
from scenefactory.vehicles.car import CarIndex, CarParams, world_mjcf
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

BRAKE_SHARE = (
    BRAKE_BIAS_FRONT / 2,
    BRAKE_BIAS_FRONT / 2,
    (1 - BRAKE_BIAS_FRONT) / 2,
    (1 - BRAKE_BIAS_FRONT) / 2,
)
"""Per-wheel share of the total brake torque (fl, fr, rl, rr), as on the mujoco tier."""


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading about +z [rad] of quaternions (..., 4) in MuJoCo's (w, x, y, z) order."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def world_z_rate(q: torch.Tensor, omega_body: torch.Tensor) -> torch.Tensor:
    """World-frame z component [rad/s] of body angular velocities (..., 3) for orientations ``q``:
    the last row of the rotation matrix, (2(xz − wy), 2(yz + wx), 1 − 2(x² + y²)), dotted with ω."""
    w, x, y, z = q.unbind(-1)
    r20 = 2.0 * (x * z - w * y)
    r21 = 2.0 * (y * z + w * x)
    r22 = 1.0 - 2.0 * (x * x + y * y)
    return r20 * omega_body[..., 0] + r21 * omega_body[..., 1] + r22 * omega_body[..., 2]


def ackermann_angles(steer_rad: torch.Tensor, car: CarParams) -> tuple[torch.Tensor, torch.Tensor]:
    """Left and right road-wheel angles [rad] for a bicycle angle: δ_l,r = atan(L·tan δ / (L ∓ (t/2)·tan δ)),
    clipped to ± ``max_steer_rad`` (``vehicles.car.ackermann_angles``, in torch)."""
    tan = torch.tan(steer_rad)
    wheelbase, half = car.wheelbase_m, 0.5 * car.track_m
    lim = car.max_steer_rad
    left = torch.atan(wheelbase * tan / (wheelbase - half * tan)).clamp(-lim, lim)
    right = torch.atan(wheelbase * tan / (wheelbase + half * tan)).clamp(-lim, lim)
    return left, right


def drive_ctrl(torque_nm: torch.Tensor, wheel_speed_radps: torch.Tensor, car: CarParams) -> torch.Tensor:
    """The drive ctrl that delivers ``torque_nm`` at ``wheel_speed_radps`` on the torque–speed line
    T = ctrl·(1 − ω/ω₀), clipped to ± ``max_drive_torque_nm`` (``vehicles.car.drive_ctrl``, in torch)."""
    scale = 1.0 - wheel_speed_radps / car.drive_free_speed_radps
    limit = car.max_drive_torque_nm
    return (torque_nm / scale.clamp_min(1e-6)).clamp(-limit, limit)


@wp.kernel(module="unique")
def touch_or(sensordata: wp.array2d[float], adr: wp.array[int], touched: wp.array2d[int]) -> None:
    """Per (world, car): ``touched`` |= the car's touch sensor [N] > 0 (launched after each substep)."""
    # Warp's type stubs do not describe kernel code (tid and array indexing): mypy is told so
    w, k = wp.tid()  # type: ignore[misc]
    if sensordata[w, adr[k]] > 0.0:  # type: ignore[index]
        touched[w, k] = 1  # type: ignore[index]


class WarpEngine:
    """Batched MuJoCo Warp cars behind the :class:`~scenefactory.engines.base.Engine` protocol."""

    name = "mujoco-warp"

    HOST_FIELDS = ("_steer_cmd", "_valid", "_live", "_prev_speed", "_accel", "_frozen", "_touch")
    """This engine's own tensors that the next step reads (``state_dict()["engine"]``)."""

    def __init__(
        self,
        num_worlds: int,
        agents_per_world: int,
        dt: float = 0.1,
        params: VehicleParams | None = None,
        device: str | torch.device = "cpu",
        physics_hz: float = DEFAULT_PHYSICS_HZ,
        car: CarParams | None = None,
        graph: bool = True,
    ) -> None:
        """Build the world model (as the mujoco tier does) and put ``num_worlds`` copies on ``device``."""
        if num_worlds < 1 or agents_per_world < 1:
            raise ValueError(f"need at least one world and one agent, got {num_worlds} x {agents_per_world}")
        substeps = round(dt * physics_hz)
        if substeps < 1 or not math.isclose(substeps / physics_hz, dt, rel_tol=1e-6):
            raise ValueError(
                f"the policy step {dt} s must be a whole number of physics steps at {physics_hz} Hz "
                f"(e.g. policy 10 Hz with physics 120 Hz, or 30 Hz with 120 Hz)"
            )
        self.num_worlds, self.agents_per_world = num_worlds, agents_per_world
        self.dt, self.physics_hz, self.substeps = float(dt), float(physics_hz), substeps
        self.params = params or VehicleParams()
        self.car = car or CarParams()
        self.model = mujoco.MjModel.from_xml_string(
            world_mjcf(agents_per_world, self.car, friction=1.0, timestep_s=1.0 / physics_hz)
        )
        self.index = CarIndex.from_model(self.model)
        self.sim = WarpSim(
            self.model, num_worlds, device, expand=("geom_friction", "dof_frictionloss"), graph=graph
        )
        self.device = dev = self.sim.device
        s = self.sim
        self._qpos, self._qvel, self._ctrl = s.tensor("qpos"), s.tensor("qvel"), s.tensor("ctrl")
        self._frictionloss = s.expand_tensor("dof_frictionloss")
        self._geom_friction = s.expand_tensor("geom_friction")
        ix = self.index

        def on(a: Any) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.long, device=dev)

        self._ix = {
            name: on(getattr(ix, name))
            for name in (
                "free_qpos",
                "free_qvel",
                "steer_qpos",
                "steer_qvel",
                "susp_qpos",
                "susp_qvel",
                "wheel_qpos",
                "wheel_qvel",
                "steer_actuator",
                "drive_actuator",
            )
        }
        self._drive_qvel = on(ix.wheel_qvel[:, ix.drive_wheel])  # (K, D) spin dofs of driven wheels
        self._qpos0 = torch.as_tensor(self.model.qpos0, dtype=torch.float32, device=dev)
        self._touch_adr: Any = wp.array(ix.touch_sensordata.astype("int32"), dtype=int, device=s.wp_device)
        self._touched_wp = wp.zeros((num_worlds, agents_per_world), dtype=int, device=s.wp_device)
        self._touched = wp.to_torch(self._touched_wp)
        c = self.car
        self._torque_per_accel = (
            c.total_mass_kg * c.wheel_radius_m + 4.0 * c.wheel_inertia_kgm2[1] / c.wheel_radius_m
        )
        self._num_driven = int(ix.drive_actuator.shape[1])
        self._brake_share = torch.tensor(BRAKE_SHARE, device=dev)
        shape = (num_worlds, agents_per_world)
        self._steer_cmd = torch.zeros(shape, device=dev)
        self._valid = torch.zeros(shape, dtype=torch.bool, device=dev)
        self._live = torch.zeros(shape, dtype=torch.bool, device=dev)
        self._prev_speed = torch.zeros(shape, device=dev)
        self._accel = torch.zeros(shape, device=dev)
        self._frozen = torch.zeros((*shape, 3), device=dev)  # x, y, yaw where a car stopped being live
        self._touch = torch.zeros(shape, dtype=torch.bool, device=dev)
        self.friction = torch.ones(num_worlds, device=dev)
        k = torch.arange(agents_per_world, device=dev, dtype=torch.float32)
        self._park_xy = torch.stack((PARK_XY_M[0] + PARK_SPACING_M * k, torch.full_like(k, PARK_XY_M[1])), -1)
        self._last_state: VehicleState | None = None

    # ---------------------------------------------------------------------------------- helpers

    def _place(
        self, rows: torch.Tensor, mask: torch.Tensor, xy: torch.Tensor, yaw: torch.Tensor, speed: torch.Tensor
    ) -> None:
        """Put the cars of worlds ``rows`` (n,) where ``mask`` (n, K) holds upright at ride height,
        wheels straight, rolling at ``speed`` (n, K) along ``yaw`` (n, K) from ``xy`` (n, K, 2)."""
        ix, r = self._ix, rows[:, None, None]  # index (K, m) columns of those rows
        m3 = mask[..., None]
        n, k = mask.shape
        qpos = torch.zeros(n, k, 7, device=self.device)
        qpos[..., 0:2] = xy
        qpos[..., 2] = self.car.com_height_m
        qpos[..., 3] = torch.cos(0.5 * yaw)
        qpos[..., 6] = torch.sin(0.5 * yaw)
        self._qpos[r, ix["free_qpos"]] = torch.where(m3, qpos, self._qpos[r, ix["free_qpos"]])
        for name in ("steer_qpos", "susp_qpos", "wheel_qpos"):
            self._qpos[r, ix[name]] = torch.where(m3, 0.0, self._qpos[r, ix[name]])
        qvel = torch.zeros(n, k, 6, device=self.device)
        qvel[..., 0] = speed * torch.cos(yaw)
        qvel[..., 1] = speed * torch.sin(yaw)
        self._qvel[r, ix["free_qvel"]] = torch.where(m3, qvel, self._qvel[r, ix["free_qvel"]])
        for name in ("steer_qvel", "susp_qvel"):
            self._qvel[r, ix[name]] = torch.where(m3, 0.0, self._qvel[r, ix[name]])
        spin = (speed / self.car.wheel_radius_m)[..., None].expand(n, k, 4)
        self._qvel[r, ix["wheel_qvel"]] = torch.where(m3, spin, self._qvel[r, ix["wheel_qvel"]])

    def _park(self, rows: torch.Tensor, mask: torch.Tensor) -> None:
        """Move the cars of worlds ``rows`` where ``mask`` (n, K) holds out of the way, brakes on."""
        n, k = mask.shape
        zeros = torch.zeros(n, k, device=self.device)
        self._place(rows, mask, self._park_xy.expand(n, k, 2), zeros, zeros)
        ix, r = self._ix, rows[:, None, None]  # index (K, m) columns of those rows
        m3 = mask[..., None]
        brake = self._frictionloss[r, ix["wheel_qvel"]]
        self._frictionloss[r, ix["wheel_qvel"]] = torch.where(m3, self.car.max_brake_torque_nm, brake)
        drive = self._ctrl[r, ix["drive_actuator"]]
        self._ctrl[r, ix["drive_actuator"]] = torch.where(m3, 0.0, drive)

    def _touch_hook(self) -> None:
        """After each substep (inside the graph): OR every car's touch sensor into the step's flags."""
        wp.launch(
            touch_or,
            dim=(self.num_worlds, self.agents_per_world),
            inputs=[self.sim.d.sensordata, self._touch_adr, self._touched_wp],
            device=self.sim.wp_device,
        )

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
        dev = self.device
        rows = world_ids.to(dev, torch.long)
        pose = pose.detach().to(dev, torch.float32)
        speed = speed_mps.detach().to(dev, torch.float32).clamp(0.0, self.params.max_speed_mps)
        ok = valid.to(dev, torch.bool)
        self._qpos[rows] = self._qpos0
        self._qvel[rows] = 0.0
        self._ctrl[rows] = 0.0
        self._frictionloss[rows] = 0.0
        self._place(rows, ok, pose[..., :2], pose[..., 2], speed)
        self._park(rows, ~ok)
        self._steer_cmd[rows] = 0.0
        self._valid[rows] = ok
        self._live[rows] = ok
        self._prev_speed[rows] = torch.where(ok, speed, 0.0)
        self._accel[rows] = 0.0
        self._touch[rows] = False
        self._frozen[rows] = pose
        # no forward: the next step computes everything from qpos/qvel, and nothing derived is read
        # before it (the mujoco tier's forward only refreshes the sensors, which each step rereads)
        self._last_state = None

    def set_friction(self, world_ids: torch.Tensor, mu: torch.Tensor) -> None:
        """Tyre–road friction of worlds ``world_ids``: the road geom's sliding friction."""
        rows = world_ids.to(self.device, torch.long)
        mu = mu.detach().to(self.device, torch.float32)
        self._geom_friction[rows, self.index.ground_geom, 0] = mu
        self.friction[rows] = mu

    def step(self, actions: torch.Tensor, active: torch.Tensor) -> VehicleState:
        """Hold the controls for ``substeps`` physics steps (the mujoco tier's law, in torch)."""
        check_actions(actions, self.num_worlds, self.agents_per_world)
        dev, ix, p, c = self.device, self._ix, self.params, self.car
        live = active.to(dev, torch.bool) & self._valid
        stopped = self._live & ~live
        st = self.state()  # frozen where a car stops being live: where it is now
        self._frozen[..., 0:2] = torch.where(stopped[..., None], st.pos_xy, self._frozen[..., 0:2])
        self._frozen[..., 2] = torch.where(stopped, st.yaw, self._frozen[..., 2])
        self._park(torch.arange(self.num_worlds, device=dev), stopped)
        self._live = live
        steer_target, accel = actions_to_controls(actions.detach().to(dev, torch.float32), p)
        max_d = p.max_steer_rate_radps * self.dt
        self._steer_cmd = (self._steer_cmd + (steer_target - self._steer_cmd).clamp(-max_d, max_d)).clamp(
            -p.max_steer_rad, p.max_steer_rad
        )
        steer = torch.where(live, self._steer_cmd, 0.0)
        left, right = ackermann_angles(steer, c)
        sa = ix["steer_actuator"]
        self._ctrl[:, sa[:, 0]] = left
        self._ctrl[:, sa[:, 1]] = right
        fast = self._prev_speed >= p.max_speed_mps
        drive = torch.where(live & (accel > 0.0) & ~fast, accel, 0.0) * (
            self._torque_per_accel / self._num_driven
        )
        wheel_speed = self._qvel[:, self._drive_qvel]  # (W, K, D)
        self._ctrl[:, ix["drive_actuator"]] = drive_ctrl(drive[..., None], wheel_speed, c)
        total = torch.where(accel < 0.0, -accel, 0.0) * self._torque_per_accel  # (W, K) [N·m]
        brake = (total[..., None] * self._brake_share).clamp_max(c.max_brake_torque_nm)
        self._frictionloss[:, ix["wheel_qvel"]] = torch.where(live[..., None], brake, c.max_brake_torque_nm)
        self._touched.zero_()
        self.sim.step(self.substeps, self._touch_hook)
        self._touch = self._touched.bool() & live
        self.sim.check_health(f"try a higher physics rate than {self.physics_hz} Hz")
        self._last_state = None
        speed = self.state().speed
        self._accel = torch.where(live, (speed - self._prev_speed) / self.dt, 0.0)
        self._prev_speed = speed
        self._last_state = None
        return self.state()

    def state_dict(self) -> dict[str, Any]:
        """MuJoCo Warp's integration state of every world with the per-world friction and brake
        fields, and this engine's command and bookkeeping tensors, all copied to the CPU."""
        return {
            "sim": self.sim.state_dict(),
            "engine": {f: getattr(self, f).detach().cpu().clone() for f in self.HOST_FIELDS},
            "friction": self.friction.detach().cpu().clone(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (every tensor checked before any is written)."""
        own = state.get("engine")
        if not isinstance(own, Mapping) or "sim" not in state:
            raise ValueError("WarpEngine state lacks 'engine' or 'sim'")
        for f in (*self.HOST_FIELDS, "friction"):
            value = own.get(f) if f != "friction" else state.get("friction")
            current = getattr(self, f)
            if (
                not isinstance(value, torch.Tensor)
                or value.shape != current.shape
                or value.dtype != current.dtype
            ):
                got = (
                    f"{value.dtype}{tuple(value.shape)}"
                    if isinstance(value, torch.Tensor)
                    else type(value).__name__
                )
                where = f if f == "friction" else f"engine.{f}"
                held = f"{current.dtype}{tuple(current.shape)}"
                raise ValueError(f"WarpEngine state '{where}' is {got}, this engine holds {held}")
        self.sim.load_state_dict(state["sim"])
        for f in self.HOST_FIELDS:
            setattr(self, f, own[f].to(self.device).clone())
        self.friction = state["friction"].to(self.device).clone()
        self._last_state = None

    def collisions(self) -> torch.Tensor:
        """(W, K) bool: the car's body touched another car (or the road) during the last step."""
        return self._touch.clone()

    def state(self) -> VehicleState:
        """Current batched state; cars that are not live report where they stopped, at rest."""
        if self._last_state is not None:
            return self._last_state
        ix, live = self._ix, self._live
        q = self._qpos[:, ix["free_qpos"]]  # (W, K, 7)
        v = self._qvel[:, ix["free_qvel"]]  # (W, K, 6)
        yaw = torch.where(live, yaw_from_quat(q[..., 3:7]), self._frozen[..., 2])
        pos = torch.where(live[..., None], q[..., 0:2], self._frozen[..., 0:2])
        vel = torch.where(live[..., None], v[..., 0:2], 0.0)
        cos, sin = torch.cos(yaw), torch.sin(yaw)
        vx_b = cos * vel[..., 0] + sin * vel[..., 1]
        vy_b = -sin * vel[..., 0] + cos * vel[..., 1]
        self._last_state = VehicleState(
            pos_xy=pos,
            yaw=yaw,
            vel_xy=vel,
            vel_b=torch.stack((vx_b, vy_b), dim=-1),
            speed=vx_b,
            yaw_rate=torch.where(live, world_z_rate(q[..., 3:7], v[..., 3:6]), 0.0),
            steer=torch.where(live, self._qpos[:, ix["steer_qpos"]].mean(dim=-1), 0.0),
            accel=self._accel.clone(),
            valid=self._valid.clone(),
        )
        return self._last_state
