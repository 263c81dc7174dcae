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
friction                   world for both              fine-tuning attempts used
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

from scenefactory.engines.mjwarp import PhysicsBackend
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
    ``standing_prob`` it is all zero. Commands are redrawn every ``resample_s``.

    Heading commands (Isaac Lab's ``heading_command``, on in its rough-terrain task): with
    probability ``heading_prob`` a draw (neither standing nor a pure turn) also draws a world-frame
    heading ``ψ* ~ U(−π, π)``, and until the next draw its yaw-rate command is recomputed every
    policy step as ``clip(heading_stiffness · wrap(ψ* − ψ), yaw range)``: the robot turns to the
    heading, then walks a straight line. With yaw-rate commands alone a robot told to turn at
    ``ω`` walks a circle of radius ``|v|/ω`` (0.8 m at 0.8 m/s and 1 rad/s) and on a terrain tile
    never leaves the central platform to meet the stairs or slopes around it."""

    vx_mps: tuple[float, float] = (-1.0, 2.0)
    vy_mps: tuple[float, float] = (-0.8, 0.8)
    yaw_radps: tuple[float, float] = (-1.8, 1.8)
    initial_fraction: float = 0.5
    step: float = 0.05
    advance_threshold: float = 0.6
    standing_prob: float = 0.1
    pure_turn_prob: float = 0.0
    resample_s: float = 10.0
    heading_prob: float = 0.0
    heading_stiffness: float = 0.5

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
        if not 0 <= self.heading_prob <= 1:
            raise ValueError(f"heading_prob must be in [0, 1], got {self.heading_prob}")
        if not self.heading_stiffness > 0:
            raise ValueError(f"heading_stiffness must be positive [1/s], got {self.heading_stiffness}")


@dataclass(frozen=True)
class WholeBodyConfig:
    """Whole-body commands beside the planar velocity: trunk height [m] above the floor, body pitch
    and roll [rad] (``rewards`` module docstring for the angles' definition and signs).

    Off by default (the velocity-only task: 3 commands). When ``enabled``, the command vector is
    6 wide (vx, vy, yaw rate, height, pitch, roll) in the observations, the rewards track it
    (``go1.whole_body.whole_body_task``) and each command draw also draws the body command: with
    probability ``nominal_prob`` ``(nominal_height_m, 0, 0)``, else height, pitch and roll
    independently uniform in their ranges (no curriculum). A policy trained without it keeps
    ``nominal_height_m`` and a level trunk."""

    enabled: bool = False
    height_m: tuple[float, float] = (0.20, 0.34)
    pitch_rad: tuple[float, float] = (-0.3, 0.3)
    roll_rad: tuple[float, float] = (-0.2, 0.2)
    nominal_height_m: float = go1.HOME_HEIGHT_M
    nominal_prob: float = 0.2

    def __post_init__(self) -> None:
        """Validate ranges."""
        for name in ("height_m", "pitch_rad", "roll_rad"):
            _pair(name, *getattr(self, name))
        if not self.height_m[0] > 0 or not self.height_m[0] <= self.nominal_height_m <= self.height_m[1]:
            raise ValueError(
                f"height_m {self.height_m} must be positive and hold nominal_height_m {self.nominal_height_m}"
            )
        for name in ("pitch_rad", "roll_rad"):
            lo, hi = getattr(self, name)
            if not -1.0 <= lo <= 0.0 <= hi <= 1.0:
                raise ValueError(f"{name} must hold 0 within [-1, 1] rad, got ({lo}, {hi})")
        if not 0 <= self.nominal_prob <= 1:
            raise ValueError(f"nominal_prob must be in [0, 1], got {self.nominal_prob}")


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


TERRAIN_KINDS = ("random", "slope_up", "slope_down", "stairs_up", "stairs_down", "steps")
"""Tile kinds of a rough-terrain grid (``go1.terrain`` draws each; "up" and "down" as seen from the
tile's centre, where a robot starts)."""


@dataclass(frozen=True)
class TerrainConfig:
    """The ground of the Go1 worlds: the flat plane (``kind="flat"``, the default and every run made
    before terrain) or a grid of tiles in one MuJoCo height field (``go1.terrain``).

    ``kind``: ``"flat"``; ``"rough"`` (columns of the kinds in ``proportions``, Isaac Lab's rough
    terrain); or one of :data:`TERRAIN_KINDS` (every column that kind). Rows are difficulty levels
    ``0 … num_levels − 1``: a tile of level ``l`` takes ``lo + l/(num_levels − 1)·(hi − lo)`` of
    each ``(lo, hi)`` range below (random ground ±amplitude, slope angle, stair step height, block
    height). Robots start at their tile's centre; with ``curriculum`` a robot is promoted or demoted
    one level when its episode ends (``go1.curriculum``), starting on levels ``0 … max_init_level``
    (or the top level, if lower).

    The height scan (``scan_size_m`` around the base, every ``scan_spacing_m``, yaw-aligned: 187
    points by default) is in the critic's observations on any terrain but flat, and in the actor's
    too with ``height_scan_actor`` (also on flat ground, where it reads the plane)."""

    kind: str = "flat"
    num_levels: int = 10
    num_cols: int = 10
    tile_size_m: float = 8.0
    border_m: float = 8.0
    horizontal_scale_m: float = 0.1
    proportions: tuple[tuple[str, float], ...] = (
        ("random", 0.2),
        ("slope_up", 0.1),
        ("slope_down", 0.1),
        ("stairs_up", 0.2),
        ("stairs_down", 0.2),
        ("steps", 0.2),
    )
    rough_amplitude_m: tuple[float, float] = (0.01, 0.10)
    slope_deg: tuple[float, float] = (2.5, 25.0)
    step_height_m: tuple[float, float] = (0.025, 0.25)
    step_width_m: float = 0.3
    block_height_m: tuple[float, float] = (0.02, 0.20)
    block_size_m: float = 0.45
    platform_m: float = 2.0
    edge_m: float = 0.5
    seed: int = 0
    curriculum: bool = True
    max_init_level: int = 4
    height_scan_actor: bool = False
    scan_size_m: tuple[float, float] = (1.6, 1.0)
    scan_spacing_m: float = 0.1
    scan_clip_m: float = 1.0
    scan_noise_m: float = 0.05
    """Uniform noise half-width on the actor's scan (when the task has sensor noise)."""

    def __post_init__(self) -> None:
        """Validate kinds, sizes and ranges."""
        kinds = ("flat", "rough", *TERRAIN_KINDS)
        if self.kind not in kinds:
            raise ValueError(f"terrain kind must be one of {kinds}, got '{self.kind}'")
        if self.num_levels < 1 or self.num_cols < 1 or self.max_init_level < 0:
            raise ValueError(
                f"need num_levels >= 1, num_cols >= 1 and max_init_level >= 0, got "
                f"{self.num_levels}, {self.num_cols}, {self.max_init_level}"
            )
        cells = self.tile_size_m / self.horizontal_scale_m
        if not self.horizontal_scale_m > 0 or abs(cells - round(cells)) > 1e-6:
            raise ValueError(
                f"tile_size_m ({self.tile_size_m}) must be a whole multiple of horizontal_scale_m "
                f"({self.horizontal_scale_m})"
            )
        inner = self.tile_size_m / 2 - self.edge_m
        if self.border_m < 0 or self.edge_m < 0 or not 0 <= self.platform_m / 2 < inner:
            raise ValueError(
                f"need border_m, edge_m >= 0 and platform_m / 2 < tile_size_m / 2 - edge_m, got "
                f"{self.border_m}, {self.edge_m}, {self.platform_m}"
            )
        names = [k for k, _ in self.proportions]
        if set(names) - set(TERRAIN_KINDS) or len(set(names)) != len(names):
            raise ValueError(f"proportions must name distinct kinds of {TERRAIN_KINDS}, got {names}")
        if any(w < 0 for _, w in self.proportions) or not sum(w for _, w in self.proportions) > 0:
            raise ValueError(f"proportions must be >= 0 with a positive sum, got {self.proportions}")
        for name in ("rough_amplitude_m", "slope_deg", "step_height_m", "block_height_m"):
            lo, hi = getattr(self, name)
            _pair(name, lo, hi)
            if lo < 0:
                raise ValueError(f"{name} must be >= 0, got ({lo}, {hi})")
        if not self.slope_deg[1] < 60:
            raise ValueError(f"slope_deg must stay below 60, got {self.slope_deg}")
        if not self.step_width_m > 0 or not self.block_size_m > 0:
            raise ValueError("step_width_m and block_size_m must be positive")
        if min(self.scan_size_m) < 0 or not self.scan_spacing_m > 0 or not self.scan_clip_m > 0:
            raise ValueError("need scan_size_m >= 0, scan_spacing_m > 0 and scan_clip_m > 0")
        if self.scan_noise_m < 0:
            raise ValueError(f"scan_noise_m must be >= 0, got {self.scan_noise_m}")

    @property
    def enabled(self) -> bool:
        """Whether the worlds stand on a height field (any kind but flat)."""
        return self.kind != "flat"

    @property
    def scans(self) -> bool:
        """Whether the task computes a height scan (on terrain, or for an actor that reads one)."""
        return self.enabled or self.height_scan_actor


def terrain_config_from_dict(data: dict[str, Any] | None) -> TerrainConfig:
    """Inverse of ``asdict(TerrainConfig)``; ``None`` (a config saved before terrain) is flat ground."""
    if data is None:
        return TerrainConfig()
    d: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    if "proportions" in d:
        d["proportions"] = tuple((str(k), float(w)) for k, w in d["proportions"])
    return TerrainConfig(**d)


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
    foot_clearance_target_m: float = 0.08
    """Swing height the optional ``foot_clearance`` reward asks for: a moving foot's lowest point
    this far over the ground under it (8 cm: a choice, not tuned; ``train go1
    --foot-clearance-target``)."""
    commands: CommandConfig = field(default_factory=CommandConfig)
    whole_body: WholeBodyConfig = field(default_factory=WholeBodyConfig)
    terrain: TerrainConfig = field(default_factory=TerrainConfig)
    randomization: RandomizationConfig | None = field(default_factory=RandomizationConfig)
    pushes: PushConfig | None = field(default_factory=PushConfig)
    noise: NoiseConfig | None = field(default_factory=NoiseConfig)
    rewards: tuple[RewardTerm, ...] = field(default_factory=_default_rewards)
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)
    """MuJoCo C (the default) or MuJoCo Warp on a device, for the worlds (``engines.mjwarp``)."""

    def __post_init__(self) -> None:
        """Check rates and sizes."""
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        ratio = self.physics_hz / self.policy_hz
        if self.policy_hz <= 0 or ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(
                f"physics_hz ({self.physics_hz}) must be a whole multiple of policy_hz ({self.policy_hz})"
            )
        if not 0 < self.foot_clearance_target_m < 0.5:
            raise ValueError(
                f"foot_clearance_target_m must be in (0, 0.5) m, got {self.foot_clearance_target_m}"
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
        body = [t.name for t in self.rewards if t.fn in r.WHOLE_BODY_FUNCTIONS]
        if body and not self.whole_body.enabled:
            raise ValueError(f"reward terms {body} read whole-body commands: need whole_body.enabled")

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
        whole_body=WholeBodyConfig(**tup(d.pop("whole_body", {}))),  # absent before whole-body commands
        terrain=terrain_config_from_dict(d.pop("terrain", None)),  # absent before terrain
        physics=PhysicsBackend(**d.pop("physics", {})),  # absent before the mujoco-warp backend
        randomization=None if rnd is None else RandomizationConfig(**tup(rnd)),
        pushes=None if push is None else PushConfig(**tup(push)),
        noise=None if noise is None else NoiseConfig(**noise),
        rewards=tuple(terms),
        **d,
    )
