"""Agent spawns, lane routes and goals on a road graph, and procedural scenes built from them.

``sample_agents`` places up to ``num_agents`` controlled cars on lane centres (yaw = lane tangent),
follows each car's lane through randomly chosen exits to build its route, puts the goal on the
route ``goal_s`` metres ahead and resamples the route to uniform spacing from the spawn point.
``make_procedural_scene`` combines a generator, its sampled params, a friction value and the agents
into a ``Scene``; every random draw comes from generators seeded by the scene seed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.scenes.friction import RoadCondition
from scenefactory.scenes.procedural import get_generator
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.scene import Scene, make_scene

SURFACE_MIX = (("asphalt", 0.75), ("concrete", 0.25))
"""Road surfaces of procedural scenes and their probabilities."""

RAIN_MIX_MM_PER_H = ((0.0, 0.0, 0.6), (0.0, 20.0, 0.25), (20.0, 60.0, 0.15))
"""Rain rate of procedural scenes: (low, high, probability) bands — dry, rain, heavy rain — drawn
uniformly within the band and turned into a water film by ``friction.water_film_from_rain``."""


def sample_road_condition(rng: np.random.Generator) -> RoadCondition:
    """A surface and a water film drawn from :data:`SURFACE_MIX` and :data:`RAIN_MIX_MM_PER_H`."""
    names, weights = zip(*SURFACE_MIX, strict=True)
    surface = str(names[rng.choice(len(names), p=np.array(weights))])
    lo, hi, _ = RAIN_MIX_MM_PER_H[rng.choice(len(RAIN_MIX_MM_PER_H), p=[b[2] for b in RAIN_MIX_MM_PER_H])]
    return RoadCondition.from_rain(surface, float(rng.uniform(lo, hi)) if hi > lo else lo)


_MAX_ROUTE_LANES = 1000  # guard against zero-length lane cycles


@dataclass(frozen=True)
class AgentSamplingConfig:
    """How controlled agents are placed; ranges are ``(low, high)``, drawn uniformly.

    Attributes:
        speed_range_mps: spawn speed, m/s.
        length_range_m: vehicle length, m (a single value by default: no variation).
        width_range_m: vehicle width, m.
        goal_range_m: arc length of the goal along the route, m.
        min_after_goal_m: route that must remain after the goal, m; shorter spawns are rejected.
        lookahead_m: the route is extended to ``goal_s + lookahead_m`` (or a dead end) and cut there, m.
        route_spacing_m: spacing of the resampled route points, m.
        min_gap_m: least centre distance between two cars heading the same way (same or
            neighbouring lanes, lanes merging into one another), m.
        same_direction_deg: two cars whose headings differ by less than this count as heading the same way.
        box_margin_m: least clearance between any two cars' footprints (all pairs, any heading), m.
        candidates_per_agent: spawn candidates drawn per placement; the valid one farthest from the
            cars already placed wins (spreads cars out).
        max_failed_rounds: placement rounds in a row without a valid candidate before giving up on
            the agents still missing.
    """

    speed_range_mps: tuple[float, float] = (0.0, 6.0)
    length_range_m: tuple[float, float] = (4.5, 4.5)
    width_range_m: tuple[float, float] = (1.9, 1.9)
    goal_range_m: tuple[float, float] = (20.0, 60.0)
    min_after_goal_m: float = 10.0
    lookahead_m: float = 15.0
    route_spacing_m: float = 1.0
    min_gap_m: float = 9.0
    same_direction_deg: float = 90.0
    box_margin_m: float = 1.0
    candidates_per_agent: int = 8
    max_failed_rounds: int = 20

    def __post_init__(self) -> None:
        """Check ranges and positivity."""
        for name in ("speed_range_mps", "length_range_m", "width_range_m", "goal_range_m"):
            lo, hi = getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo <= hi):
                raise UserError(
                    f"AgentSamplingConfig.{name} must be (low, high) with 0 <= low <= high, got {(lo, hi)}"
                )
        if self.length_range_m[0] <= 0.0 or self.width_range_m[0] <= 0.0:
            raise UserError("AgentSamplingConfig: vehicle length and width must be positive")
        if self.lookahead_m < self.min_after_goal_m:
            raise UserError("AgentSamplingConfig.lookahead_m must be at least min_after_goal_m")
        for name in (
            "min_after_goal_m",
            "route_spacing_m",
            "min_gap_m",
            "same_direction_deg",
            "box_margin_m",
        ):
            if not getattr(self, name) >= 0.0:
                raise UserError(f"AgentSamplingConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.route_spacing_m <= 0.0 or self.candidates_per_agent < 1 or self.max_failed_rounds < 1:
            raise UserError("AgentSamplingConfig: route_spacing_m, candidates and rounds must be positive")


@dataclass(frozen=True)
class AgentSpec:
    """One controlled agent.

    Attributes:
        spawn_pose: ``(3,)`` x_m, y_m, yaw_rad; on the route's first point, yaw along the lane.
        spawn_speed_mps: initial speed along the heading, m/s.
        route_xy: ``(R, 2)`` route from the spawn point, spaced ``route_spacing_m``, m.
        goal_xy: ``(2,)`` the route point at arc length ``goal_s_m``, m.
        goal_s_m: arc length of the goal along the route, m.
        length_m: vehicle length, m.
        width_m: vehicle width, m.
        lane: index of the spawn lane in the road graph.
    """

    spawn_pose: np.ndarray
    spawn_speed_mps: float
    route_xy: np.ndarray
    goal_xy: np.ndarray
    goal_s_m: float
    length_m: float
    width_m: float
    lane: int


# ------------------------------------------------------------------------------------- polylines


def arc_lengths(xy: np.ndarray) -> np.ndarray:
    """Cumulative arc length ``(n,)`` of a polyline ``(n, 2)``, starting at 0."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=-1))])


def point_at(xy: np.ndarray, s: np.ndarray, at_m: float) -> tuple[np.ndarray, float]:
    """Point ``(2,)`` and heading (rad) of polyline ``xy`` with arc lengths ``s`` at arc length ``at_m``."""
    i = int(np.clip(np.searchsorted(s, at_m, side="right") - 1, 0, len(s) - 2))
    seg = xy[i + 1] - xy[i]
    frac = (at_m - s[i]) / max(s[i + 1] - s[i], 1e-12)
    return xy[i] + frac * seg, math.atan2(float(seg[1]), float(seg[0]))


def resample_uniform(xy: np.ndarray, spacing_m: float, length_m: float) -> np.ndarray:
    """Points at arc lengths ``0, spacing, 2 spacing, ... <= length_m`` along polyline ``xy`` ``(n, 2)``."""
    s = arc_lengths(xy)
    s_new = np.arange(0.0, min(length_m, float(s[-1])) + 1e-9, spacing_m)
    return np.stack([np.interp(s_new, s, xy[:, 0]), np.interp(s_new, s, xy[:, 1])], axis=-1)


# ----------------------------------------------------------------------------------------- spawns


def boxes_overlap(
    pose_a: np.ndarray, size_a: tuple[float, float], pose_b: np.ndarray, size_b: tuple[float, float]
) -> bool:
    """Whether two oriented boxes intersect (separating-axis test).

    Args:
        pose_a: ``(3,)`` x_m, y_m, yaw_rad of box a's centre.
        size_a: ``(length_m, width_m)`` of box a.
        pose_b: ``(3,)`` pose of box b.
        size_b: ``(length_m, width_m)`` of box b.
    """
    d = np.asarray(pose_b[:2]) - np.asarray(pose_a[:2])
    for yaw in (pose_a[2], pose_b[2]):
        axes = (np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw), math.cos(yaw)]))
        for ax in axes:
            reach = 0.0
            for pose, (length, width) in ((pose_a, size_a), (pose_b, size_b)):
                c, s = math.cos(pose[2]), math.sin(pose[2])
                reach += length / 2.0 * abs(c * ax[0] + s * ax[1]) + width / 2.0 * abs(-s * ax[0] + c * ax[1])
            if abs(float(d @ ax)) > reach:
                return False
    return True


def _clearance(
    pose: np.ndarray, size: tuple[float, float], placed: list[AgentSpec], cfg: AgentSamplingConfig
) -> float | None:
    """Least centre distance to the cars already placed (inf if none), or None if the spawn conflicts.

    Conflicts: a car heading the same way closer than ``min_gap_m``, or any car whose footprint,
    grown by half of ``box_margin_m`` on every side like this one's, intersects this footprint.
    """
    if not placed:
        return math.inf
    poses = np.stack([a.spawn_pose for a in placed])
    dist = np.hypot(poses[:, 0] - pose[0], poses[:, 1] - pose[1])
    dyaw = np.abs((poses[:, 2] - pose[2] + math.pi) % (2.0 * math.pi) - math.pi)
    if np.any((dist < cfg.min_gap_m) & (dyaw < math.radians(cfg.same_direction_deg))):
        return None
    pad = cfg.box_margin_m
    grown = (size[0] + pad, size[1] + pad)
    others = np.array([(a.length_m + pad, a.width_m + pad) for a in placed])
    near = dist < 0.5 * (math.hypot(*grown) + np.hypot(others[:, 0], others[:, 1]))  # circumcircles meet
    for i in np.flatnonzero(near):
        if boxes_overlap(pose, grown, placed[i].spawn_pose, (float(others[i, 0]), float(others[i, 1]))):
            return None
    return float(dist.min())


def _route(
    roadgraph: RoadGraph,
    lanes: list[np.ndarray],
    s: list[np.ndarray],
    lane: int,
    start: np.ndarray,
    start_s: float,
    want_m: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Polyline from ``start`` along ``lane`` and random exits until ``want_m`` long or a dead end.

    Returns the polyline ``(n, 2)`` and its length (m).
    """
    pieces = [start[None, :], lanes[lane][s[lane] > start_s + 1e-6]]
    total = float(s[lane][-1]) - start_s
    cur = lane
    for _ in range(_MAX_ROUTE_LANES):
        exits = roadgraph.exits(cur)
        if total >= want_m or not exits:
            break
        cur = exits[int(rng.integers(len(exits)))]
        pieces.append(lanes[cur][1:])
        total += float(s[cur][-1])
    return np.concatenate(pieces), total


def _candidate(
    roadgraph: RoadGraph,
    lanes: list[np.ndarray],
    s: list[np.ndarray],
    counts: np.ndarray,
    placed: list[AgentSpec],
    rng: np.random.Generator,
    cfg: AgentSamplingConfig,
) -> tuple[AgentSpec, float] | None:
    """Draw one spawn candidate and its clearance, or None if it conflicts or its route is too short.

    Lanes are drawn with weight ``length / (1 + agents already in it)^2``: long lanes and empty
    lanes first, several agents per lane allowed.
    """
    lengths = np.array([si[-1] for si in s])
    weight = lengths / (1.0 + counts) ** 2
    lane = int(rng.choice(len(lanes), p=weight / weight.sum()))
    at_m = float(rng.uniform(0.0, lengths[lane]))
    xy, yaw = point_at(lanes[lane], s[lane], at_m)
    pose = np.array([xy[0], xy[1], yaw])
    size = (float(rng.uniform(*cfg.length_range_m)), float(rng.uniform(*cfg.width_range_m)))
    clearance = _clearance(pose, size, placed, cfg)
    if clearance is None:
        return None
    goal_s = float(rng.uniform(*cfg.goal_range_m))
    poly, total = _route(roadgraph, lanes, s, lane, xy, at_m, goal_s + cfg.lookahead_m, rng)
    if total < goal_s + cfg.min_after_goal_m:
        return None
    route = resample_uniform(poly, cfg.route_spacing_m, goal_s + cfg.lookahead_m)
    goal_xy, _ = point_at(route, arc_lengths(route), goal_s)
    spec = AgentSpec(
        spawn_pose=pose,
        spawn_speed_mps=float(rng.uniform(*cfg.speed_range_mps)),
        route_xy=route,
        goal_xy=goal_xy,
        goal_s_m=goal_s,
        length_m=size[0],
        width_m=size[1],
        lane=lane,
    )
    return spec, clearance


def sample_agents(
    roadgraph: RoadGraph, num_agents: int, rng: np.random.Generator, cfg: AgentSamplingConfig | None = None
) -> list[AgentSpec]:
    """Place up to ``num_agents`` non-overlapping controlled agents with routes and goals.

    Each placement round draws ``cfg.candidates_per_agent`` candidates and keeps the valid one
    farthest from the agents already placed; after ``cfg.max_failed_rounds`` rounds in a row
    without a valid candidate the road is taken as full. Returns as many agents as fit.
    """
    cfg = AgentSamplingConfig() if cfg is None else cfg
    if num_agents < 0:
        raise UserError(f"num_agents must be >= 0, got {num_agents}")
    lanes = roadgraph.lanes()
    s = [arc_lengths(lane) for lane in lanes]
    counts = np.zeros(len(lanes))
    placed: list[AgentSpec] = []
    failed = 0
    while len(placed) < num_agents and failed < cfg.max_failed_rounds:
        best: tuple[AgentSpec, float] | None = None
        for _ in range(cfg.candidates_per_agent):
            cand = _candidate(roadgraph, lanes, s, counts, placed, rng, cfg)
            if cand is not None and (best is None or cand[1] > best[1]):
                best = cand
        if best is None:
            failed += 1
            continue
        failed = 0
        placed.append(best[0])
        counts[best[0].lane] += 1
    return placed


# ------------------------------------------------------------------------------------------ scenes


def scene_from_agents(name: str, roadgraph: RoadGraph, agents: list[AgentSpec], **kwargs: Any) -> Scene:
    """A ``Scene`` from a road graph and agent specs; ``kwargs`` go to ``make_scene`` (surface, friction)."""
    return make_scene(
        name=name,
        roadgraph=roadgraph,
        spawn_pose=[a.spawn_pose for a in agents],
        spawn_speed_mps=[a.spawn_speed_mps for a in agents],
        routes=[a.route_xy for a in agents],
        goal_xy=[a.goal_xy for a in agents],
        goal_s_m=[a.goal_s_m for a in agents],
        length_m=[a.length_m for a in agents],
        width_m=[a.width_m for a in agents],
        **kwargs,
    )


def make_procedural_scene(
    kind: str, seed: int, num_agents: int, *, agent_cfg: AgentSamplingConfig | None = None, **overrides: Any
) -> Scene:
    """A procedural scene of generator ``kind``: sampled params, road graph, friction and agents.

    The seed feeds four independent streams (params, geometry jitter, friction, agents), so changing
    ``num_agents`` or an override leaves everything else as it was. ``overrides`` replace sampled
    params fields by name (e.g. ``lanes_per_direction=1``).
    """
    gen = get_generator(kind)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise UserError(f"scene seed must be a non-negative integer, got {seed!r}")
    params_rng, road_rng, friction_rng, agent_rng, signal_rng = (
        np.random.default_rng(child) for child in np.random.SeedSequence(int(seed)).spawn(5)
    )  # spawn(5) leaves the first four streams as spawn(4) gave them
    params = gen.sample(params_rng)
    valid = {f.name for f in dataclasses.fields(params)}
    unknown = sorted(set(overrides) - valid)
    if unknown:
        raise UserError(f"unknown {kind} params {unknown}; valid: {', '.join(sorted(valid))}")
    params = dataclasses.replace(params, **overrides)
    roadgraph = gen.make(params, road_rng)
    condition = sample_road_condition(friction_rng)
    agents = sample_agents(roadgraph, num_agents, agent_rng, agent_cfg)
    return scene_from_agents(
        f"{kind}-{seed}",
        roadgraph,
        agents,
        surface=condition.surface,
        water_film_mm=condition.water_film_mm,
        friction=condition.mu,
        generator=kind,
        seed=int(seed),
        params=dataclasses.asdict(params),
        signals=None if gen.signals is None else gen.signals(params, roadgraph, signal_rng),
    )
