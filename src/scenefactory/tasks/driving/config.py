"""Typed, frozen configuration of the multi-agent goal-reaching driving task.

A task is a list of weighted reward terms plus observation and termination settings. Variants are
made with ``dataclasses.replace`` (one level deep); a term is off when it is absent from
``rewards``, not behind a flag.

Reward hacking by leaving the road: off-road and collision both end the agent's episode, so
leaving the road forfeits the goal bonus and all further progress exactly as a crash does, and its
penalty is at least the collision penalty (checked at construction). Driving off the road to dodge
a collision therefore never pays more than the collision it avoids.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from scenefactory.bounds import MIN_ACTIVE_FRACTION, POLICY_HZ, SCENE_AGENTS, WORLDS
from scenefactory.errors import ArgumentError
from scenefactory.tasks.driving import rewards as r
from scenefactory.tasks.driving.context import StepContext
from scenefactory.tasks.driving.idm import IdmParams
from scenefactory.vehicles.params import VehicleParams


@dataclass(frozen=True)
class RewardTerm:
    """A pure function ``fn(ctx) -> (W, K)`` tensor and its weight; the reward is Σ weight·fn."""

    name: str
    fn: Callable[[StepContext], torch.Tensor]
    weight: float


@dataclass(frozen=True)
class ObservationConfig:
    """What each agent sees (all in its own ego frame: x forward, y left).

    ``traffic_signals`` adds the next signal and stop sign on the agent's route (distance along the
    route, the signal's colour, whether the agent has stopped for it; see
    :func:`~scenefactory.tasks.driving.observations.signal_obs`); off by default, so the width of
    existing policies' observations is unchanged.
    """

    num_road_points: int = 24
    road_point_range_m: float = 50.0
    road_point_spacing_m: float = 3.0
    num_neighbors: int = 8
    neighbor_range_m: float = 50.0
    route_lookahead_m: tuple[float, ...] = (5.0, 10.0, 15.0, 20.0, 30.0)
    friction_aware: bool = True
    ttc_horizon_s: float = 10.0
    traffic_signals: bool = False

    def __post_init__(self) -> None:
        """Validate counts and ranges."""
        if self.num_road_points < 1 or self.num_neighbors < 1:
            raise ValueError("num_road_points and num_neighbors must be at least 1")
        if self.road_point_range_m <= 0 or self.neighbor_range_m <= 0 or self.road_point_spacing_m <= 0:
            raise ValueError("observation ranges and spacing must be positive")
        if not self.route_lookahead_m or any(d <= 0 for d in self.route_lookahead_m):
            raise ValueError("route_lookahead_m must be a non-empty tuple of positive distances")


@dataclass(frozen=True)
class FrictionChange:
    """An abrupt change of road friction inside every episode (e.g. dry asphalt → ice).

    When a world's episode has run ``at_step`` policy steps (time ``at_step · dt_s``), its road
    friction becomes ``mu`` — in the engine (``Engine.set_friction``) and in the friction
    observation alike — for the rest of the episode; the dynamics of step ``at_step`` onward (0-based)
    run on the new road. A world reset restores the scene's own (or randomized) friction.
    """

    at_step: int
    mu: float

    def __post_init__(self) -> None:
        """Check the step and the friction coefficient."""
        if isinstance(self.at_step, bool) or not isinstance(self.at_step, int) or self.at_step < 1:
            raise ValueError(f"FrictionChange.at_step must be an integer >= 1, got {self.at_step!r}")
        if not (math.isfinite(self.mu) and self.mu > 0.0):
            raise ValueError(f"FrictionChange.mu must be a positive number, got {self.mu!r}")


def _default_rewards() -> tuple[RewardTerm, ...]:
    return (
        RewardTerm("progress", r.route_progress, 0.2),
        RewardTerm("goal", r.goal_reached, 10.0),
        RewardTerm("collision", r.collision, -10.0),
        RewardTerm("offroad", r.offroad, -10.0),
        RewardTerm("ttc", r.ttc_danger, -0.2),
        RewardTerm("comfort_action_rate", r.action_rate, -0.02),
        RewardTerm("comfort_lateral_accel", r.lateral_accel_excess, -0.05),
    )


RED_LIGHT_WEIGHT = -10.0
"""Weight of ``red_light_violation`` in :func:`with_traffic_signals`: as a collision, so running a
red light never pays more than the time it saves (waiting costs no reward, only the chance to time
out before the goal, worth at most the goal bonus)."""
STOP_SIGN_WEIGHT = -5.0
"""Weight of ``stop_sign_violation`` in :func:`with_traffic_signals` (stopping costs ~2 s)."""


@dataclass(frozen=True)
class DrivingTaskConfig:
    """The driving task: worlds × agents, episode limits, success radius, observations, rewards.

    ``water_film_randomization_mm`` (low, high): when set, every world reset draws a water film
    uniformly from it and sets the world's road friction from the scene's surface through the
    friction model (domain randomization of road conditions); ``None`` keeps each scene's own.
    ``friction_change`` (a :class:`FrictionChange`): a scheduled change of road friction inside
    every episode; ``None`` (the default) leaves the road as the episode started.
    ``min_active_fraction`` (training only, keeps worlds busy): a world resets as soon as fewer than
    this fraction of the agents it started its episode with are still active, and the agents still
    active then end as time-outs (``DrivingEnv.step``, phase 3); 0 (the default) waits for the last
    one. Evaluation always plays episodes to their end (``evaluation.rollout`` sets it to 0).
    ``native_kernels`` (True): on a CPU, the agents' interactions (TTC, DRAC, box overlap) run in the
    fused numba kernels of ``tasks.driving.native``; False runs the torch path (always used on a GPU).
    Both give the same numbers bit for bit, so it is a speed setting, left out of
    :func:`task_config_to_dict`.
    ``replay_idm`` (an :class:`~scenefactory.tasks.driving.idm.IdmParams`): the replayed (logged)
    vehicles react: they follow their logged paths with the IDM speed law and brake for the agents
    (:mod:`~scenefactory.tasks.driving.replay_idm`; ``eval drive --others idm``); ``None`` (the
    default) plays every logged object's log back as it is."""

    num_worlds: int = 64
    agents_per_world: int = 8
    dt_s: float = 0.1
    episode_length_s: float = 20.0
    goal_radius_m: float = 3.0
    offroad_tolerance_m: float = 0.5
    progress_clip_m: float = 2.0
    water_film_randomization_mm: tuple[float, float] | None = None
    friction_change: FrictionChange | None = None
    min_active_fraction: float = 0.0
    native_kernels: bool = True
    replay_idm: IdmParams | None = None
    observations: ObservationConfig = field(default_factory=ObservationConfig)
    rewards: tuple[RewardTerm, ...] = field(default_factory=_default_rewards)
    vehicle: VehicleParams = field(default_factory=VehicleParams)

    def __post_init__(self) -> None:
        """Check values, and that leaving the road can never pay more than a collision."""
        # the CLI's bounds (scenefactory.bounds): ArgumentError, a ValueError and TypeError too
        WORLDS.check(self.num_worlds, "DrivingTaskConfig.num_worlds (--worlds)")
        SCENE_AGENTS.check(self.agents_per_world, "DrivingTaskConfig.agents_per_world (--agents)")
        for name in ("dt_s", "episode_length_s", "goal_radius_m", "offroad_tolerance_m", "progress_clip_m"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"DrivingTaskConfig.{name} must be a finite number, got {v!r}")
        if self.dt_s > 0:
            POLICY_HZ.check(
                1.0 / self.dt_s, f"DrivingTaskConfig.dt_s {self.dt_s:g} s as a rate (--policy-hz)"
            )
        if not self.dt_s > 0 or not self.episode_length_s > self.dt_s:
            raise ValueError(f"need 0 < dt_s < episode_length_s, got {self.dt_s}, {self.episode_length_s}")
        if not self.goal_radius_m > 0:
            raise ValueError(f"goal_radius_m must be positive, got {self.goal_radius_m}")
        wf = self.water_film_randomization_mm
        if wf is not None and not (len(wf) == 2 and 0.0 <= wf[0] <= wf[1]):
            raise ValueError(
                f"water_film_randomization_mm must be (low, high) with 0 <= low <= high, got {wf}"
            )
        maf = self.min_active_fraction
        if isinstance(maf, bool) or not isinstance(maf, int | float) or not 0.0 <= maf <= 1.0:
            raise ArgumentError(
                f"min_active_fraction must be a number in [0, 1] (--min-active-fraction: the fraction of"
                f" a world's starting agents below which it resets; 0 = wait for the last one), got {maf!r}"
            )
        MIN_ACTIVE_FRACTION.check(maf, "DrivingTaskConfig.min_active_fraction (--min-active-fraction)")
        if self.replay_idm is not None and not isinstance(self.replay_idm, IdmParams):
            raise ArgumentError(
                "DrivingTaskConfig.replay_idm (--others idm) must be an IdmParams or None (logs replayed"
                f" as they are), got {self.replay_idm!r}"
            )
        fc = self.friction_change
        if fc is not None and fc.at_step >= self.max_steps:
            raise ValueError(
                f"friction_change.at_step {fc.at_step} never comes: episodes last {self.max_steps} steps"
            )
        names = [t.name for t in self.rewards]
        if len(set(names)) != len(names):
            raise ValueError(f"reward term names must be unique, got {names}")
        weights = {t.name: t.weight for t in self.rewards}
        if "offroad" in weights and "collision" in weights and weights["offroad"] > weights["collision"]:
            raise ValueError(
                f"offroad weight {weights['offroad']} must be <= collision weight {weights['collision']}: "
                "otherwise leaving the road to dodge a crash pays"
            )

    @property
    def max_steps(self) -> int:
        """Policy steps per episode."""
        return round(self.episode_length_s / self.dt_s)


def with_traffic_signals(cfg: DrivingTaskConfig) -> DrivingTaskConfig:
    """``cfg`` with traffic signals on: the signal observation and the red-light and stop-sign
    penalty terms (weights :data:`RED_LIGHT_WEIGHT`, :data:`STOP_SIGN_WEIGHT`); terms already there
    are kept as they are."""
    names = {t.name for t in cfg.rewards}
    extra = tuple(
        t
        for t in (
            RewardTerm("red_light", r.red_light_violation, RED_LIGHT_WEIGHT),
            RewardTerm("stop_sign", r.stop_sign_violation, STOP_SIGN_WEIGHT),
        )
        if t.name not in names
    )
    return replace(
        cfg, observations=replace(cfg.observations, traffic_signals=True), rewards=cfg.rewards + extra
    )


def task_config_to_dict(cfg: DrivingTaskConfig) -> dict[str, Any]:
    """JSON-ready form of a task config (reward terms by function name and weight); an absent
    ``friction_change``, ``min_active_fraction`` 0, ``traffic_signals`` off and no ``replay_idm`` are
    left out, so configs without them read as they did before they existed."""
    out = asdict(replace(cfg, rewards=()))
    del out["native_kernels"]  # how, not what: the results are the same either way
    if cfg.friction_change is None:
        del out["friction_change"]
    if not cfg.min_active_fraction:
        del out["min_active_fraction"]
    if not cfg.observations.traffic_signals:
        del out["observations"]["traffic_signals"]
    if cfg.replay_idm is None:
        del out["replay_idm"]
    out["rewards"] = [{"name": t.name, "fn": t.fn.__name__, "weight": t.weight} for t in cfg.rewards]
    out["observations"]["route_lookahead_m"] = list(cfg.observations.route_lookahead_m)
    return out


def task_config_from_dict(data: dict[str, Any]) -> DrivingTaskConfig:
    """Inverse of :func:`task_config_to_dict`; unknown reward functions are an error."""
    data = dict(data)
    terms = []
    for t in data.pop("rewards"):
        if t["fn"] not in r.REWARD_FUNCTIONS:
            raise ValueError(
                f"unknown reward function '{t['fn']}', expected one of {sorted(r.REWARD_FUNCTIONS)}"
            )
        terms.append(RewardTerm(t["name"], r.REWARD_FUNCTIONS[t["fn"]], float(t["weight"])))
    wf = data.pop("water_film_randomization_mm", None)
    fc = data.pop("friction_change", None)
    idm = data.pop("replay_idm", None)
    obs = dict(data.pop("observations"))
    obs["route_lookahead_m"] = tuple(obs["route_lookahead_m"])
    return DrivingTaskConfig(
        observations=ObservationConfig(**obs),
        vehicle=VehicleParams(**data.pop("vehicle")),
        rewards=tuple(terms),
        water_film_randomization_mm=None if wf is None else (float(wf[0]), float(wf[1])),
        friction_change=None if fc is None else FrictionChange(int(fc["at_step"]), float(fc["mu"])),
        replay_idm=None if idm is None else IdmParams(**idm),
        **data,
    )
