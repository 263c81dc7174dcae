"""Typed, frozen configuration of the Go1 velocity-tracking task.

Variants by ``dataclasses.replace`` one level deep; a reward term is off when it is absent from
``rewards``; randomization, pushes and sensor noise are off when their field is ``None``
(:func:`nominal` gives the task with all three off — the "no robustness" ablation and the
evaluation world).

Documented ranges (what :data:`Go1TaskConfig` trains with by default):

=========================  ==========================  ============================================
quantity                   range                       when
=========================  ==========================  ============================================
floor friction μ           U(0.4, 1.25)                per episode (legged_gym 0.5–1.25, Playground
                                                       0.4–1.0)
link masses (hip..calf)    × U(0.9, 1.1)               per episode (Playground)
trunk mass                 + U(−1, 2) kg               per episode (Isaac Lab −1…+3)
trunk CoM                  + U(−0.04, 0.04) m per axis per episode (Playground ±0.05)
motor strength             × U(0.9, 1.1) per joint     per episode
PD gains Kp, Kd            × U(0.9, 1.1) per world     per episode
action latency             U(0, 20) ms, whole physics  per episode
                           steps (0–4 at 200 Hz)
joint damping and dry      × U(lo, hi), one draw per   per episode (off by default: (1, 1); the
friction                   world for both              README's fine-tuning attempt uses
                                                       (0.8, 1.8); in the critic's
                                                       privileged vector when drawn)
sensor noise (actor only)  gyro ±0.2 rad/s, gravity    every step (Isaac Lab's values)
                           ±0.05, joint pos ±0.01 rad,
                           joint vel ±1.5 rad/s
pushes                     base xy velocity kick of    per push
                           U(0, 2.0) m/s, random
                           direction (every U(6, 12) s)
=========================  ==========================  ============================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from scenefactory.go1 import rewards as r
from scenefactory.go1 import robot as go1
from scenefactory.go1.rewards import REWARD_FUNCTIONS
from scenefactory.go1.state import LocoState


@dataclass(frozen=True)
class RewardTerm:
    """A pure function ``fn(state) -> (N,)`` and its weight; the reward is Σ weight·fn·dt."""

    name: str
    fn: Callable[[LocoState], torch.Tensor]
    weight: float


def _pair(name: str, lo: float, hi: float) -> None:
    if not lo <= hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got ({lo}, {hi})")


@dataclass(frozen=True)
class CommandConfig:
    """Velocity commands (body frame) and the curriculum that widens them.

    The curriculum keeps a fraction ``f`` of each range (linear and yaw separately), starting at
    ``initial_fraction``; when the mean per-step tracking term of the episodes that ended in an
    iteration exceeds ``advance_threshold`` (of its maximum 1), ``f`` grows by ``step``, up to 1.
    A sampled command is ``U(f·low, f·high)`` per axis; with probability ``pure_turn_prob`` its
    linear part is zero (a turn on the spot, rare under uniform sampling), then with probability
    ``standing_prob`` it is all zero. Commands are redrawn every ``resample_s``."""

    vx_mps: tuple[float, float] = (-1.0, 2.0)
    vy_mps: tuple[float, float] = (-0.8, 0.8)
    yaw_radps: tuple[float, float] = (-1.8, 1.8)
    initial_fraction: float = 0.5
    step: float = 0.05
    advance_threshold: float = 0.6
    standing_prob: float = 0.1
    pure_turn_prob: float = 0.0
    resample_s: float = 10.0

    def __post_init__(self) -> None:
        """Validate ranges."""
        for name in ("vx_mps", "vy_mps", "yaw_radps"):
            _pair(name, *getattr(self, name))
        if not 0 < self.initial_fraction <= 1 or not 0 < self.step <= 1:
            raise ValueError("initial_fraction and step must be in (0, 1]")
        if not 0 <= self.standing_prob < 1 or not self.resample_s > 0:
            raise ValueError("need 0 <= standing_prob < 1 and resample_s > 0")
        if not 0 <= self.pure_turn_prob < 1:
            raise ValueError(f"pure_turn_prob must be in [0, 1), got {self.pure_turn_prob}")


@dataclass(frozen=True)
class RandomizationConfig:
    """Per-episode domain randomization ranges (see the module table)."""

    floor_friction: tuple[float, float] = (0.4, 1.25)
    link_mass_scale: tuple[float, float] = (0.9, 1.1)
    trunk_added_mass_kg: tuple[float, float] = (-1.0, 2.0)
    trunk_com_offset_m: float = 0.04
    motor_strength: tuple[float, float] = (0.9, 1.1)
    pd_gain_scale: tuple[float, float] = (0.9, 1.1)
    latency_s: tuple[float, float] = (0.0, 0.02)
    joint_friction_scale: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        """Validate ranges."""
        for name in (
            "joint_friction_scale",
            "floor_friction",
            "link_mass_scale",
            "trunk_added_mass_kg",
            "motor_strength",
            "pd_gain_scale",
            "latency_s",
        ):
            _pair(name, *getattr(self, name))
        if self.floor_friction[0] <= 0 or self.link_mass_scale[0] <= 0 or self.latency_s[0] < 0:
            raise ValueError("friction and mass scale must be positive and latency non-negative")
        if self.joint_friction_scale[0] < 0:
            raise ValueError(f"joint_friction_scale must be >= 0, got {self.joint_friction_scale}")


@dataclass(frozen=True)
class PushConfig:
    """Random base-velocity kicks: every ``U(interval_s)`` add ``U(0, max)`` m/s in a random xy direction."""

    interval_s: tuple[float, float] = (6.0, 12.0)
    max_velocity_mps: float = 2.0

    def __post_init__(self) -> None:
        """Validate ranges."""
        _pair("interval_s", *self.interval_s)
        if self.interval_s[0] <= 0 or self.max_velocity_mps < 0:
            raise ValueError("push interval must be positive and the magnitude non-negative")


@dataclass(frozen=True)
class NoiseConfig:
    """Uniform sensor noise half-widths on the actor's observations."""

    gyro_radps: float = 0.2
    gravity: float = 0.05
    joint_pos_rad: float = 0.01
    joint_vel_radps: float = 1.5


def _default_rewards() -> tuple[RewardTerm, ...]:
    return (
        RewardTerm("track_lin_vel_xy", r.track_lin_vel_xy, 1.5),
        RewardTerm("track_ang_vel_z", r.track_ang_vel_z, 1.0),
        RewardTerm("lin_vel_z", r.lin_vel_z_sq, -2.0),
        RewardTerm("ang_vel_xy", r.ang_vel_xy_sq, -0.05),
        RewardTerm("orientation", r.flat_orientation_sq, -2.5),
        RewardTerm("torques", r.torques_sq, -2e-4),
        RewardTerm("joint_acc", r.joint_acc_sq, -2.5e-7),
        RewardTerm("action_rate", r.action_rate_sq, -0.01),
        RewardTerm("feet_air_time", r.feet_air_time, 0.25),
        RewardTerm("joint_limits", r.joint_limit_violation, -10.0),
        RewardTerm("stand_still", r.stand_still, -0.5),
        RewardTerm("fall", r.fallen, -200.0),
    )


@dataclass(frozen=True)
class Go1TaskConfig:
    """The velocity-tracking task (50 Hz policy, 200 Hz physics by default).

    Action ``a`` (12,) → joint targets ``q* = q_home + action_scale · clip(a, ±action_clip)``, held
    by the PD law of :func:`scenefactory.go1.robot.pd_torque` every physics step. The actor sees
    ``history`` frames of gyro, projected gravity, command, joint positions (minus home), joint
    velocities and last action (45 each, noisy); the critic sees one clean frame plus privileged
    state (base linear velocity, height, foot contacts, the randomized parameters)."""

    num_envs: int = 1024
    physics_hz: float = 200.0
    policy_hz: float = 50.0
    episode_length_s: float = 20.0
    kp: float = go1.DEFAULT_KP
    kd: float = go1.DEFAULT_KD
    action_scale: float = 0.25
    action_clip: float = 6.0
    history: int = 3
    fall_tilt_deg: float = 60.0
    feet_air_time_threshold_s: float = 0.5
    commands: CommandConfig = field(default_factory=CommandConfig)
    randomization: RandomizationConfig | None = field(default_factory=RandomizationConfig)
    pushes: PushConfig | None = field(default_factory=PushConfig)
    noise: NoiseConfig | None = field(default_factory=NoiseConfig)
    rewards: tuple[RewardTerm, ...] = field(default_factory=_default_rewards)

    def __post_init__(self) -> None:
        """Check rates and sizes."""
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        ratio = self.physics_hz / self.policy_hz
        if self.policy_hz <= 0 or ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(
                f"physics_hz ({self.physics_hz}) must be a whole multiple of policy_hz ({self.policy_hz})"
            )
        if self.history < 1 or not self.episode_length_s > 0:
            raise ValueError("history must be >= 1 and episode_length_s positive")
        if self.kp <= 0 or self.kd < 0 or self.action_scale <= 0:
            raise ValueError(
                f"need kp > 0, kd >= 0, action_scale > 0; got {self.kp}, {self.kd}, {self.action_scale}"
            )
        names = [t.name for t in self.rewards]
        if len(set(names)) != len(names):
            raise ValueError(f"reward term names must be unique, got {names}")

    @property
    def decimation(self) -> int:
        """Physics steps per policy step."""
        return round(self.physics_hz / self.policy_hz)

    @property
    def dt(self) -> float:
        """Policy step [s]."""
        return 1.0 / self.policy_hz

    @property
    def max_steps(self) -> int:
        """Policy steps per episode."""
        return round(self.episode_length_s * self.policy_hz)


def nominal(cfg: Go1TaskConfig) -> Go1TaskConfig:
    """``cfg`` without randomization, pushes or sensor noise."""
    return replace(cfg, randomization=None, pushes=None, noise=None)


def fixed_conditions(latency_s: float = 0.0, joint_scale: float = 1.0) -> RandomizationConfig:
    """The nominal robot (floor μ 1.0, nominal masses, motors and gains) with the action latency
    and the joint damping/friction scale fixed at these values in every world: a "randomization"
    whose ranges are single points, for evaluating a policy under one known condition."""
    return RandomizationConfig(
        floor_friction=(1.0, 1.0),
        link_mass_scale=(1.0, 1.0),
        trunk_added_mass_kg=(0.0, 0.0),
        trunk_com_offset_m=0.0,
        motor_strength=(1.0, 1.0),
        pd_gain_scale=(1.0, 1.0),
        latency_s=(latency_s, latency_s),
        joint_friction_scale=(joint_scale, joint_scale),
    )


def task_config_to_dict(cfg: Go1TaskConfig) -> dict[str, Any]:
    """JSON-ready form (reward terms by function name and weight)."""
    out = asdict(replace(cfg, rewards=()))
    out["rewards"] = [{"name": t.name, "fn": t.fn.__name__, "weight": t.weight} for t in cfg.rewards]
    return out


def task_config_from_dict(data: dict[str, Any]) -> Go1TaskConfig:
    """Inverse of :func:`task_config_to_dict`; an unknown reward function is an error."""
    d = dict(data)
    terms = []
    for t in d.pop("rewards"):
        if t["fn"] not in REWARD_FUNCTIONS:
            raise ValueError(
                f"unknown reward function '{t['fn']}', expected one of {sorted(REWARD_FUNCTIONS)}"
            )
        terms.append(RewardTerm(t["name"], REWARD_FUNCTIONS[t["fn"]], float(t["weight"])))

    def tup(x: dict[str, Any]) -> dict[str, Any]:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in x.items()}

    rnd, push, noise = d.pop("randomization"), d.pop("pushes"), d.pop("noise")
    return Go1TaskConfig(
        commands=CommandConfig(**tup(d.pop("commands"))),
        randomization=None if rnd is None else RandomizationConfig(**tup(rnd)),
        pushes=None if push is None else PushConfig(**tup(push)),
        noise=None if noise is None else NoiseConfig(**noise),
        rewards=tuple(terms),
        **d,
    )
