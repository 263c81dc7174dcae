"""A model-based trotting controller for the Go1: the baseline that stands in for the robot's
built-in controller in ``eval go1 --controller model-based``.

It drives the robot through exactly the policy's actuator path: every 50 Hz step it returns the
env's *actions* ``a = (q* − q_home) / action_scale``, so the env's PD law, gains, torque limits,
latency, motor strength and pushes are the same for both. It reads only what the policy reads:
the newest frame of the actor observation (gyro, projected gravity, command, joint positions and
velocities); the base velocity comes from leg odometry, not from the simulator.

Per robot and step (batched over N robots in numpy, no Python loop over robots):

1. **Command shaping.** The command is clipped to what the controller can do (``max_command``)
   and the reference ``v_ref`` (vx, vy, yaw rate) moves toward it at most ``accel`` per second,
   as a built-in controller limits and ramps its joystick.
2. **Gait clock.** A trot: diagonal pairs FR+RL and FL+RR half a period apart, period
   ``period_s``, duty factor ``duty`` (> 0.5: both pairs share the load briefly at each switch);
   leg phase ``φ ∈ [0, 1)``, stance while ``φ < duty``. With a zero command and the robot at
   rest the clock stops while all four feet are down: the robot stands.
3. **Leg odometry.** ``v̂_b = −mean(J_i(q)·q̇_i + ω × p_i)`` over the legs in mid-stance,
   low-passed (``velocity_filter``); the yaw rate ``ω̂_z`` is the low-passed gyro.
4. **Stance feet** (trunk frame) sweep against the hip's velocity,
   ``ṗ_i = −(v_s + ω_s × p_i)``, with ``v_s = v_ref + k_v·(v_ref − v̂) + ∫k_i·(v_ref − v̂)`` and
   ``ω_s`` alike (``velocity_feedback``, ``yaw_feedback``, ``integral_gain``): the strides of
   this stepping come out about 1.4× longer than planned, which the integral removes.
5. **Swing feet** go from their lift-off point to the Raibert touchdown point
   ``p_td,i = p_nom,i + (v_ref + ω_ref × p_nom,i)·T_stance/2 + k·(v̂ − v_ref) + s``
   (``raibert_gain_s``) along a cosine blend in x and y and a raised-cosine arc of
   ``clearance_m`` in z; the touchdown point is turned by ``swing_tilt`` of the trunk's measured
   roll and pitch, so that a foot on the low side of a tilted trunk reaches the ground, and
   shifted by ``s``, the integral of the lean (``balance_gain``): a trunk whose centre of mass is
   off centre leans toward it, and the feet follow it there.
6. **Leg inverse kinematics** of :mod:`scenefactory.go1.robot`'s geometry (hip abduction about x,
   thigh and knee about y) turns the feet into joint angles ``q_d``. Feet are planned in a level
   frame at depth ``height_m`` under the trunk and turned into the trunk frame by the commanded
   pitch and roll (zero unless the task has whole-body commands, which also set the height).
7. **Feed-forward through the PD targets.** Stance legs carry the robot's weight along gravity,
   ``τ_ff = J_iᵀ f_i``, each leg's share ramping in and out over ``load_ramp`` of its stance; the
   PD's damping is compensated with the reference joint velocity. The target is
   ``q* = q_d + τ_ff / K_p + (K_d / K_p)·q̇_d``: the torque an ideal PD would add.

Tuned by hand and short sweeps on flat ground, first in the nominal world and then in the
evaluation's varied worlds (``benchmarks/go1_model_based_sweep.py`` reruns a sweep); the defaults of
:class:`TrotConfig` are what came out. Without the damping compensation and feed-forward it sagged
and drifted backward at 0.4 m/s when asked to stand in place; without the integral its strides
overshot (1.48 m/s at a 1.0 m/s command); without the lean integral a trunk centre of mass moved
by up to 4 cm made it fall; a quicker velocity estimate (filter 0.5, not 0.25) and a weaker stance
feedback (0.25, not 0.5) recovered 14 of 16 pushes of 1.5 m/s instead of 9. What it reaches is on
the shipped policy's model card (docs site, results), beside the policy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from scenefactory.go1 import observations as obs_terms
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.kinematics import HIP_POS_B, LEG_SIDE, foot_jacobians, foot_positions, leg_ik

Array = npt.NDArray[np.float64]

GRAVITY_MPS2 = 9.81
LEG_PHASE_OFFSET = np.array([0.0, 0.5, 0.5, 0.0])
"""Gait phase of each leg (:data:`~scenefactory.go1.robot.LEGS` order): FR+RL, then FL+RR."""


@dataclass(frozen=True)
class TrotConfig:
    """Gait and gains of :class:`ModelBasedController` (the module docstring's symbols)."""

    period_s: float = 0.32
    """Gait period [s], a whole number of policy steps per half period."""
    duty: float = 0.56
    """Share of the period a leg is in stance."""
    height_m: float = go1.HOME_HEIGHT_M - go1.FOOT_RADIUS_M
    """Stance foot depth below the trunk origin [m]: the trunk at the home pose's height (whole-body
    commands set it instead)."""
    clearance_m: float = 0.08
    """Peak swing-foot lift [m]."""
    raibert_gain_s: float = 0.1
    """``k`` of the touchdown point [s]: steps further out when the robot runs ahead of ``v_ref``."""
    foot_y_m: float = 0.13
    """Nominal lateral foot position from the trunk's centre line [m] (feet under the hips)."""
    max_command: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = (
        (-1.0, 1.5),
        (-0.6, 0.6),
        (-1.8, 1.8),
    )
    """Ranges the command is clipped to: vx, vy [m/s], yaw rate [rad/s] (what it walks without
    falling on the flat nominal world; 2.0 m/s made it fall)."""
    accel: tuple[float, float, float] = (1.0, 1.0, 2.0)
    """Command ramp: vx, vy [m/s²], yaw rate [rad/s²]."""
    velocity_filter: float = 0.5
    """Weight of each new sample in the low-passed velocity and yaw-rate estimates, (0, 1]."""
    max_velocity_error_mps: float = 0.5
    """Bound on ``|v_ref − v̂|`` per axis in the feedback terms [m/s]."""
    velocity_feedback: float = 0.25
    """``k_v``: stance sweep correction per unit velocity error."""
    yaw_feedback: float = 0.5
    """The same for the yaw rate."""
    integral_gain: float = 1.0
    """``k_i`` [1/s] of the integral of the velocity and yaw-rate errors in the stance sweep."""
    max_integral: float = 1.0
    """Bound on each integral correction [m/s, rad/s]."""
    swing_tilt: float = 0.5
    """Share of the trunk's measured roll and pitch (off the command) the touchdown point turns by."""
    load_ramp: float = 0.1
    """Share of a stance at each end over which a foot's load ramps in and out, (0, 0.5]."""
    weight_feedforward: float = 1.0
    """Share of the robot's weight the stance legs' feed-forward carries (0: kinematics only)."""
    damping_feedforward: bool = True
    """Add ``(K_d/K_p)·q̇_d`` to the targets (compensates the PD's damping on a moving reference)."""
    balance_gain: float = 0.1
    """Rate [m/(rad·s)] at which a lasting lean (pitch, roll off the command) shifts the touchdown
    points toward the low side: finds an off-centre centre of mass."""
    max_balance_shift_m: float = 0.05
    """Bound on that shift per axis [m]."""
    stand_speed_mps: float = 0.2
    """At a zero command the robot stops stepping once its speed estimate is below this [m/s]."""

    def __post_init__(self) -> None:
        """Check the gait's numbers."""
        if not self.period_s > 0 or not 0.5 <= self.duty < 1:
            raise ValueError(f"need period_s > 0 and 0.5 <= duty < 1, got {self.period_s} and {self.duty}")
        if not 0.1 < self.height_m < go1.THIGH_LENGTH_M + go1.CALF_LENGTH_M:
            raise ValueError(f"height_m {self.height_m} is outside the leg's reach")
        if not 0 < self.velocity_filter <= 1 or not 0 < self.load_ramp <= 0.5:
            raise ValueError(
                f"need velocity_filter in (0, 1] and load_ramp in (0, 0.5], got {self.velocity_filter} "
                f"and {self.load_ramp}"
            )
        if min(self.accel) <= 0 or self.clearance_m < 0 or self.max_velocity_error_mps < 0:
            raise ValueError("accel must be positive, clearance_m and max_velocity_error_mps >= 0")
        for name, (lo, hi) in zip(("vx", "vy", "yaw rate"), self.max_command, strict=True):
            if not lo <= 0 <= hi:
                raise ValueError(f"max_command {name} must be (low, high) around 0, got ({lo}, {hi})")


def tilt(grav: Array) -> tuple[Array, Array]:
    """(N,) pitch (positive nose down) and roll (positive left side up) [rad] of the projected
    gravity (N, 3), as ``rewards.pitch_roll`` defines them."""
    g = grav / np.linalg.norm(grav, axis=1, keepdims=True)
    return np.arcsin(np.clip(g[:, 0], -1.0, 1.0)), np.arctan2(-g[:, 1], -g[:, 2])


def level_to_body(pitch: Array, roll: Array) -> Array:
    """(N, 3, 3) rotation ``Rᵀ = Rx(−φ)·Ry(−θ)`` taking yaw-aligned level-frame vectors into the
    frame of a trunk at pitch ``θ`` and roll ``φ`` (N,)."""
    cr, sr, cp, sp = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch)
    zero, one = np.zeros_like(cr), np.ones_like(cr)
    rx = np.stack([one, zero, zero, zero, cr, sr, zero, -sr, cr], axis=1).reshape(-1, 3, 3)
    ry = np.stack([cp, zero, -sp, zero, one, zero, sp, zero, cp], axis=1).reshape(-1, 3, 3)
    return rx @ ry


def _turn(rot: Array, p: Array) -> Array:
    """Points (N, 4, 3) turned by (N, 3, 3)."""
    return np.einsum("nij,nlj->nli", rot, p)


# ------------------------------------------------------------------------------------ controller


class ModelBasedController:
    """A batched trotting controller with Raibert foot placement (module docstring).

    Implements the evaluation's policy protocol: :meth:`act` maps actor observations (N, H·F) to
    the env's actions (N, 12); :meth:`reset` restarts the gait of robots whose episode ended. Its
    per-robot state (gait clock, feet, estimates, command ramp) is sized on the first call of
    :meth:`act`. With whole-body commands in ``task_cfg`` it also follows the trunk height, pitch
    and roll commands."""

    params_dim = 0

    def __init__(self, task_cfg: Go1TaskConfig, cfg: TrotConfig | None = None) -> None:
        """Control robots of ``task_cfg`` (its rates, gains, action scale and observation layout)."""
        self.task_cfg = task_cfg
        self.cfg = cfg or TrotConfig()
        self.dt = task_cfg.dt
        self.q_home = go1.default_joint_pos()
        self.meta: dict[str, Any] = {"controller": "model-based trot", **asdict(self.cfg)}
        whole_body = task_cfg.whole_body.enabled
        self._layout = {name: (a, b) for name, a, b in obs_terms.frame_layout(whole_body)}
        self._frame_dim = obs_terms.frame_dim(whole_body)
        self.p_nom = np.stack([HIP_POS_B[:, 0], LEG_SIDE * self.cfg.foot_y_m, np.zeros(4)], axis=1)
        """(4, 3) nominal foot positions in the level frame (z: the depth, per robot)."""
        self._weight_n = go1.TOTAL_MASS_KG * GRAVITY_MPS2
        self._alloc(0)

    def _alloc(self, n: int) -> None:
        self._n = n
        self.time_s = np.zeros(n)
        self.v_ref = np.zeros((n, 3))
        self.v_est = np.zeros((n, 3))
        self.yaw_rate_est = np.zeros(n)
        self.sweep_int = np.zeros((n, 3))
        self.com_shift = np.zeros((n, 2))
        """(N, 2) learnt shift [m] of the nominal feet toward the robot's centre of mass."""
        self.p_des = np.tile(self.p_nom, (n, 1, 1))
        """(N, 4, 3) planned feet, level frame."""
        self.p_des[..., 2] = -self.cfg.height_m
        self.p_liftoff = self.p_des.copy()
        self.q_des_prev: Array | None = None

    def reset(self, done: torch.Tensor | None = None) -> None:
        """Restart the gait, ramp and estimates of robots where ``done`` (N,) is true, or of all."""
        if done is None:
            self._alloc(0)
            return
        ids = np.nonzero(done.detach().cpu().numpy())[0]
        if ids.size == 0 or self._n == 0:
            return
        for arr in (self.time_s, self.v_ref, self.v_est, self.yaw_rate_est, self.sweep_int, self.com_shift):
            arr[ids] = 0.0
        self.p_des[ids] = self.p_nom
        self.p_des[ids, :, 2] = -self.cfg.height_m
        self.p_liftoff[ids] = self.p_des[ids]
        if self.q_des_prev is not None:
            self.q_des_prev[ids] = leg_ik(self.p_des[ids])

    def phases(self) -> Array:
        """(N, 4) each leg's gait phase in [0, 1) now."""
        return (self.time_s[:, None] / self.cfg.period_s + LEG_PHASE_OFFSET) % 1.0

    def _read(self, obs: torch.Tensor, name: str) -> Array:
        a, b = self._layout[name]
        return obs[:, a:b].detach().cpu().double().numpy()

    def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
        """Actor observations (N, H·F (+ scan)), newest frame first → actions (N, 12) (module
        docstring); only the newest frame is read."""
        if obs.ndim != 2 or obs.shape[1] < self._frame_dim:
            raise ValueError(f"observations must be (N, >= {self._frame_dim}), got {tuple(obs.shape)}")
        if obs.shape[0] != self._n:
            self._alloc(obs.shape[0])
        gyro, grav = self._read(obs, "gyro_radps"), self._read(obs, "projected_gravity")
        command = self._read(obs, "command")
        q = self._read(obs, "joint_pos_minus_home_rad") + self.q_home
        qd = self._read(obs, "joint_vel_radps")
        n = q.shape[0]
        depth = np.full(n, self.cfg.height_m)
        attitude = np.zeros((n, 2))  # commanded pitch, roll
        if command.shape[1] == 6:  # whole-body: trunk height above the floor, pitch, roll
            depth = command[:, 3] - go1.FOOT_RADIUS_M
            attitude = command[:, 4:6]
        phase_now = self.phases()
        still = self._shape_command(command[:, :3], phase_now)  # 1-2
        phase = self.phases()
        stance = phase < self.cfg.duty
        self._estimate(q, qd, gyro, phase_now)  # 3
        self._plan_feet(phase, phase_now, stance, still, depth)  # 4-5
        feet_b = self._feet_in_trunk(grav, attitude, stance, still)
        return self._actions(feet_b, q, grav, phase, stance, still)  # 6-7

    def _shape_command(self, command: Array, phase: Array) -> npt.NDArray[np.bool_]:
        """Clip and ramp the command into ``v_ref``; advance the gait clock, except for robots that
        stand still (returned, (N,) bool: zero command, at rest, all feet down)."""
        c = self.cfg
        limits = np.asarray(c.max_command)
        wanted = np.clip(command, limits[:, 0], limits[:, 1])
        step = np.asarray(c.accel) * self.dt
        self.v_ref += np.clip(wanted - self.v_ref, -step, step)
        still = (np.abs(wanted).max(axis=1) == 0.0) & (np.abs(self.v_ref).max(axis=1) < 1e-3)
        still &= np.hypot(self.v_est[:, 0], self.v_est[:, 1]) < c.stand_speed_mps
        still &= (phase < c.duty).all(axis=1)
        self.time_s += np.where(still, 0.0, self.dt)
        return still

    def _feet_in_trunk(
        self, grav: Array, attitude: Array, stance: npt.NDArray[np.bool_], still: npt.NDArray[np.bool_]
    ) -> Array:
        """(N, 4, 3) the planned feet in the trunk frame: stance feet at the commanded attitude,
        swing feet turned by ``swing_tilt`` of the measured lean; the lean integral updated."""
        c = self.cfg
        pitch, roll = tilt(grav)
        lean = np.stack([pitch, roll], axis=1) - attitude
        shift = np.stack([lean[:, 0], -lean[:, 1]], axis=1)  # nose down: forward; left up: right
        self.com_shift += (~still)[:, None] * c.balance_gain * self.dt * shift
        self.com_shift = np.clip(self.com_shift, -c.max_balance_shift_m, c.max_balance_shift_m)
        swing = attitude + c.swing_tilt * lean
        return np.where(
            stance[..., None],
            _turn(level_to_body(attitude[:, 0], attitude[:, 1]), self.p_des),
            _turn(level_to_body(swing[:, 0], swing[:, 1]), self.p_des),
        )

    def _actions(
        self,
        feet_b: Array,
        q: Array,
        grav: Array,
        phase: Array,
        stance: npt.NDArray[np.bool_],
        still: npt.NDArray[np.bool_],
    ) -> torch.Tensor:
        """(N, 12) env actions: inverse kinematics of the feet plus the feed-forward (steps 6-7)."""
        c, n = self.cfg, q.shape[0]
        q_des = leg_ik(feet_b)
        if self.q_des_prev is None:
            self.q_des_prev = q_des.copy()
        qd_des = (q_des - self.q_des_prev) / self.dt
        self.q_des_prev = q_des
        force = self._stance_forces(grav, phase, stance, still)  # (N, 4, 3) on the ground, trunk frame
        tau = np.einsum("nlji,nlj->nli", foot_jacobians(q_des), force).reshape(n, 12)
        kp, kd = self.task_cfg.kp, self.task_cfg.kd
        q_target = q_des + tau / kp
        if c.damping_feedforward:
            q_target += (kd / kp) * qd_des
        actions = (q_target - self.q_home) / self.task_cfg.action_scale
        return torch.as_tensor(actions, dtype=torch.float32)

    def _estimate(self, q: Array, qd: Array, gyro: Array, phase: Array) -> None:
        """Update the low-passed base velocity (leg odometry) and yaw-rate estimates."""
        c, n = self.cfg, q.shape[0]
        p = foot_positions(q)
        v_feet = np.einsum("nlij,nlj->nli", foot_jacobians(q), qd.reshape(n, 4, 3))
        v_body = -(v_feet + np.cross(gyro[:, None, :], p))
        mid = (phase > 0.1 * c.duty) & (phase < 0.9 * c.duty)
        k = mid.sum(axis=1, keepdims=True)
        sample = (v_body * mid[..., None]).sum(axis=1) / np.maximum(k, 1)
        has = k[:, 0] > 0
        self.v_est[has] += c.velocity_filter * (sample[has] - self.v_est[has])
        self.yaw_rate_est += c.velocity_filter * (gyro[:, 2] - self.yaw_rate_est)

    def _plan_feet(
        self,
        phase: Array,
        phase_now: Array,
        stance: npt.NDArray[np.bool_],
        still: npt.NDArray[np.bool_],
        depth: Array,
    ) -> None:
        """Advance the planned feet ``p_des`` (level frame): stance sweep and swing (steps 4-5)."""
        c, dt, n = self.cfg, self.dt, phase.shape[0]
        v_lin = np.concatenate([self.v_ref[:, :2], np.zeros((n, 1))], axis=1)
        w_ref = np.zeros((n, 3))
        w_ref[:, 2] = self.v_ref[:, 2]
        lin_err = np.clip(v_lin - self.v_est, -c.max_velocity_error_mps, c.max_velocity_error_mps)
        lin_err[:, 2] = 0.0
        yaw_err = w_ref[:, 2] - self.yaw_rate_est
        walking = ~still[:, None]
        self.sweep_int[:, :2] += walking * c.integral_gain * dt * lin_err[:, :2]
        self.sweep_int[:, 2] += walking[:, 0] * c.integral_gain * dt * yaw_err
        self.sweep_int = np.clip(self.sweep_int, -c.max_integral, c.max_integral)
        v_sweep = v_lin + c.velocity_feedback * lin_err + self.sweep_int * np.array([1.0, 1.0, 0.0])
        w_sweep = w_ref.copy()
        w_sweep[:, 2] += c.yaw_feedback * yaw_err + self.sweep_int[:, 2]
        hip_vel = v_sweep[:, None, :] + np.cross(w_sweep[:, None, :], self.p_des)
        stance_p = self.p_des - dt * hip_vel * walking[..., None]
        stance_p[..., 2] = -depth[:, None]

        lifting = ~stance & (phase_now < c.duty)
        self.p_liftoff[lifting] = self.p_des[lifting]
        t_stance = c.duty * c.period_s
        nom_vel = v_lin[:, None, :] + np.cross(w_ref[:, None, :], self.p_nom[None])
        p_td = self.p_nom[None] + nom_vel * (t_stance / 2) - c.raibert_gain_s * lin_err[:, None, :]
        p_td[..., :2] += self.com_shift[:, None, :]
        p_td[..., 2] = -depth[:, None]
        w = np.clip((phase - c.duty) / (1 - c.duty), 0.0, 1.0)[..., None]
        swing_p = self.p_liftoff + (0.5 - 0.5 * np.cos(math.pi * w)) * (p_td - self.p_liftoff)
        swing_p[..., 2] = -depth[:, None] + c.clearance_m * 0.5 * (1.0 - np.cos(2.0 * math.pi * w[..., 0]))
        self.p_des = np.where(stance[..., None], stance_p, swing_p)

    def _stance_forces(
        self, grav: Array, phase: Array, stance: npt.NDArray[np.bool_], still: npt.NDArray[np.bool_]
    ) -> Array:
        """(N, 4, 3) force each stance foot applies to the ground, trunk frame: its share of the
        weight along gravity, ramping in and out over ``load_ramp`` of its stance (an equal share
        of all four feet for a robot standing still)."""
        c = self.cfg
        progress = np.clip(phase / c.duty, 0.0, 1.0)
        load = np.where(stance, np.clip(np.minimum(progress, 1.0 - progress) / c.load_ramp, 0.0, 1.0), 0.0)
        load[still] = 1.0
        g = grav / np.linalg.norm(grav, axis=1, keepdims=True)  # unit, pointing down
        total = np.maximum(load.sum(axis=1, keepdims=True), 0.5)
        share = c.weight_feedforward * self._weight_n * load / total
        return share[..., None] * g[:, None, :]
