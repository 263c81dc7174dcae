"""WOMD ``Scenario`` → :class:`~scenefactory.scenes.scene.Scene`.

- **Frame.** Coordinates are re-centred per scene on the self-driving car's position at the current
  step (or on the lanes' centroid if it is not valid), so every scene sits near the origin.
- **Lanes.** Vehicle lanes (freeway, surface street, undefined; bike lanes are not drivable for
  cars) keep their centre polylines and entry/exit connectivity (feature ids → lane indices; links
  to dropped lanes are removed). Widths, per point, in order of preference: the distances to the
  lane's left and right boundary features over each boundary segment's point range (the lane
  centre lies between them: width = left + right half-widths; one side known → twice it); half
  the distance to a neighbouring lane's centre; else :data:`DEFAULT_LANE_WIDTH_M`. Widths are
  clipped to [2.4, 6.0] m, what real lanes span.
- **Lines and edges.** Road lines and road edges keep their WOMD type codes.
- **Agents.** Controlled agents are vehicles valid at ``current_time_index`` that actually move
  (their logged future covers at least :data:`MIN_ROUTE_M`), the self-driving car first, then the
  tracks to predict, then the others by distance to it, up to ``max_agents``. Each spawns at its
  logged pose and speed, its route is its logged future path (resampled every metre) and its goal
  is the route's end; its full logged future becomes the scene's :class:`AgentLog` (expert actions,
  log divergence).
- **Road condition.** WOMD carries no weather: scenes get ``condition`` (dry asphalt by default).
- **Checks first.** A scenario with no drivable lane or no controllable agent is refused with
  :class:`ScenarioConversionError` (nothing to drive); one whose ``current_time_index`` is outside
  its steps, or whose observed states or map points hold a non-finite or implausible number (the
  bounds of :mod:`scenefactory.scenes.plausibility`), with :class:`ScenarioValueError` naming the
  track, step and field — before any of it is used.

- **Markings.** Crosswalk and speed-bump polygons and stop-sign positions go into the road graph.
- **Log playback.** The other objects (vehicles, pedestrians, cyclists; up to ``max_replay``,
  nearest first) become the scene's :class:`ReplayLog`: they move along their logs, and the
  controlled agents must avoid them.

"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scenefactory.errors import UserError
from scenefactory.scenes.friction import RoadCondition
from scenefactory.scenes.plausibility import ANGLE, COORDINATE, LENGTH, SPEED, WIDTH, Bound
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.routes import arc_lengths, resample_uniform
from scenefactory.scenes.scene import AgentLog, ReplayLog, Scene, make_scene
from scenefactory.scenes.womd.scenario_pb2 import LaneCenter, Scenario, Track

DEFAULT_LANE_WIDTH_M = 3.7
WIDTH_RANGE_M = (2.4, 6.0)
MIN_ROUTE_M = 5.0
WOMD_DT_S = 0.1
VEHICLE_LANES = (
    LaneCenter.TYPE_UNDEFINED,
    LaneCenter.TYPE_FREEWAY,
    LaneCenter.TYPE_SURFACE_STREET,
)


class ScenarioConversionError(UserError):
    """A scenario that cannot become a scene (e.g. no drivable lanes, no controllable agent)."""


class ScenarioValueError(ScenarioConversionError):
    """A scenario holding wrong values: a non-finite or implausible number, or a bad time index."""


# Observed-state fields checked before conversion: (name, bound on |value|). Speed is the magnitude
# of (velocity_x, velocity_y); sizes <= 0 mean "unknown" (the defaults below replace them).
_STATE_CHECKS: tuple[tuple[str, Bound], ...] = (
    ("center_x", COORDINATE),
    ("center_y", COORDINATE),
    ("speed (velocity_x, velocity_y)", SPEED),
    ("heading", ANGLE),
    ("length", LENGTH),
    ("width", WIDTH),
)
_MAP_POINTS = {
    "lane": "polyline",
    "road_line": "polyline",
    "road_edge": "polyline",
    "crosswalk": "polygon",
    "speed_bump": "polygon",
}


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion kept and left out (counts)."""

    lanes: int
    bike_lanes_dropped: int
    road_lines: int
    road_edges: int
    controlled_agents: int
    vehicles_valid_now: int
    crosswalks: int
    stop_signs: int
    speed_bumps: int
    other_objects: int


def _xy(points: object, origin: np.ndarray) -> np.ndarray:
    arr = np.array([[p.x, p.y] for p in points], dtype=np.float64).reshape(-1, 2)  # type: ignore[attr-defined]
    return arr - origin


def _distance_to_polyline(pts: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """Distance [m] from each point (n, 2) to a polyline (m, 2) (a single point if m = 1)."""
    if len(poly) == 1:
        return np.linalg.norm(pts - poly[0], axis=1)
    a, b = poly[:-1], poly[1:]
    ab = b - a
    t = np.einsum("nmk,mk->nm", pts[:, None, :] - a[None], ab) / np.maximum((ab * ab).sum(1), 1e-12)
    closest = a[None] + np.clip(t, 0.0, 1.0)[..., None] * ab[None]
    return np.linalg.norm(pts[:, None, :] - closest, axis=2).min(axis=1)


def _half_widths(
    pts: np.ndarray,
    bounds: object,
    neighbors: object,
    boundary_polys: dict[int, np.ndarray],
    lane_polys: dict[int, np.ndarray],
) -> np.ndarray:
    """Half-width on one side per lane point [m]; NaN where neither boundary nor neighbour says."""
    n = len(pts)
    half = np.full(n, np.nan)
    for b in bounds:  # type: ignore[attr-defined]
        poly = boundary_polys.get(int(b.boundary_feature_id))
        if poly is None or len(poly) == 0:
            continue
        i0, i1 = max(0, int(b.lane_start_index)), min(n - 1, int(b.lane_end_index))
        if i1 >= i0:
            half[i0 : i1 + 1] = _distance_to_polyline(pts[i0 : i1 + 1], poly)
    for nb in neighbors:  # type: ignore[attr-defined]
        poly = lane_polys.get(int(nb.feature_id))
        if poly is None or len(poly) == 0:
            continue
        i0, i1 = max(0, int(nb.self_start_index)), min(n - 1, int(nb.self_end_index))
        if i1 >= i0:
            seg = slice(i0, i1 + 1)
            missing = np.isnan(half[seg])
            half[seg] = np.where(missing, 0.5 * _distance_to_polyline(pts[seg], poly), half[seg])
    return half


def _lane_width(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    both = left + right
    width = np.where(np.isnan(left), 2.0 * right, np.where(np.isnan(right), 2.0 * left, both))
    width = np.where(np.isnan(width), DEFAULT_LANE_WIDTH_M, width)
    return np.clip(width, *WIDTH_RANGE_M)


def _check_values(scenario: Scenario) -> None:
    """Raise :class:`ScenarioValueError` for a bad ``current_time_index`` or a non-finite or implausible
    number in an observed state or a used map point (module docstring)."""
    sid = scenario.scenario_id
    t0 = scenario.current_time_index
    steps = len(scenario.timestamps_seconds) or max((len(tr.states) for tr in scenario.tracks), default=0)
    if t0 < 0 or (steps and t0 >= steps):
        raise ScenarioValueError(
            f"scenario '{sid}': current_time_index {t0} is outside its {steps} logged steps [0, {steps - 1}]"
        )
    limits = np.array([b.hi for _, b in _STATE_CHECKS])
    for i, tr in enumerate(scenario.tracks):
        rows = np.array(
            [
                (
                    s.valid,
                    s.center_x,
                    s.center_y,
                    math.hypot(s.velocity_x, s.velocity_y),
                    s.heading,
                    s.length,
                    s.width,
                )
                for s in tr.states
            ],
            dtype=np.float64,
        ).reshape(-1, 1 + len(_STATE_CHECKS))
        steps_valid = np.flatnonzero(rows[:, 0] > 0)
        vals = rows[steps_valid, 1:]
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(vals) <= limits)  # NaN compares False, so it is bad too
        if bad.any():
            row, col = np.argwhere(bad)[0]
            name, bound = _STATE_CHECKS[col]
            value, step = float(vals[row, col]), int(steps_valid[row])
            raise ScenarioValueError(
                f"scenario '{sid}': track {i} (id {tr.id}) step {step}: {name} = {value!r} is not"
                f" {bound.describe()}"
            )
    for f in scenario.map_features:
        kind = f.WhichOneof("feature_data")
        if kind in _MAP_POINTS:
            points = list(getattr(getattr(f, kind), _MAP_POINTS[kind]))
        elif kind == "stop_sign":
            points = [f.stop_sign.position]
        else:
            continue
        for j, p in enumerate(points):
            for axis in ("x", "y"):
                if not COORDINATE.contains(getattr(p, axis)):
                    raise ScenarioValueError(
                        f"scenario '{sid}': map feature {f.id} ({kind}) point {j}: {axis} ="
                        f" {getattr(p, axis)!r} is not {COORDINATE.describe()}"
                    )


def _origin(scenario: Scenario) -> np.ndarray:
    t0 = scenario.current_time_index
    sdc = scenario.sdc_track_index
    if 0 <= sdc < len(scenario.tracks) and t0 < len(scenario.tracks[sdc].states):
        s = scenario.tracks[sdc].states[t0]
        if s.valid:
            return np.array([s.center_x, s.center_y])
    pts = [[p.x, p.y] for f in scenario.map_features if f.HasField("lane") for p in f.lane.polyline]
    return np.mean(np.array(pts), axis=0) if pts else np.zeros(2)


def _roadgraph(scenario: Scenario, origin: np.ndarray) -> tuple[RoadGraph, dict[str, int]]:
    boundary_polys: dict[int, np.ndarray] = {}
    lane_polys: dict[int, np.ndarray] = {}
    lines, line_types, edges, edge_types = [], [], [], []
    counts = {"bike": 0, "crosswalk": 0, "stop_sign": 0, "speed_bump": 0}
    for f in scenario.map_features:
        kind = f.WhichOneof("feature_data")
        if kind == "road_line":
            boundary_polys[f.id] = _xy(f.road_line.polyline, origin)
            if len(boundary_polys[f.id]) >= 2:
                lines.append(boundary_polys[f.id])
                line_types.append(int(f.road_line.type))
        elif kind == "road_edge":
            boundary_polys[f.id] = _xy(f.road_edge.polyline, origin)
            if len(boundary_polys[f.id]) >= 2:
                edges.append(boundary_polys[f.id])
                edge_types.append(int(f.road_edge.type))
        elif kind == "lane":
            lane_polys[f.id] = _xy(f.lane.polyline, origin)
        elif kind in counts:
            counts[kind] += 1
    keep = [
        f
        for f in scenario.map_features
        if f.HasField("lane") and f.lane.type in VEHICLE_LANES and len(lane_polys[f.id]) >= 2
    ]
    counts["bike"] = sum(
        1 for f in scenario.map_features if f.HasField("lane") and f.lane.type not in VEHICLE_LANES
    )
    if not keep:
        raise ScenarioConversionError(
            f"scenario '{scenario.scenario_id}' has no drivable lanes (vehicle lanes with 2+ points)"
        )
    index = {f.id: i for i, f in enumerate(keep)}
    lanes, widths, entries, exits = [], [], [], []
    for f in keep:
        pts = lane_polys[f.id]
        left = _half_widths(pts, f.lane.left_boundaries, f.lane.left_neighbors, boundary_polys, lane_polys)
        right = _half_widths(pts, f.lane.right_boundaries, f.lane.right_neighbors, boundary_polys, lane_polys)
        lanes.append(pts)
        widths.append(_lane_width(left, right))
        entries.append([index[i] for i in f.lane.entry_lanes if i in index])
        exits.append([index[i] for i in f.lane.exit_lanes if i in index])
    rg = RoadGraph.from_lists(lanes, widths, entries, exits, lines, line_types, edges, edge_types)
    crosswalks = [_xy(f.crosswalk.polygon, origin) for f in scenario.map_features if f.HasField("crosswalk")]
    bumps = [_xy(f.speed_bump.polygon, origin) for f in scenario.map_features if f.HasField("speed_bump")]
    signs = [_xy([f.stop_sign.position], origin)[0] for f in scenario.map_features if f.HasField("stop_sign")]
    rg = rg.with_markings(
        [p for p in crosswalks if len(p)], [p for p in bumps if len(p)], np.array(signs).reshape(-1, 2)
    )
    return rg, counts


def _controlled(scenario: Scenario, origin: np.ndarray, max_agents: int) -> tuple[list[int], int]:
    """Track indices of the controlled agents (ordered) and the number of vehicles valid now."""
    t0 = scenario.current_time_index
    sdc = scenario.sdc_track_index
    predict = {int(r.track_index) for r in scenario.tracks_to_predict}
    cands = []
    valid_now = 0
    for i, tr in enumerate(scenario.tracks):
        if tr.object_type != Track.TYPE_VEHICLE or t0 >= len(tr.states) or not tr.states[t0].valid:
            continue
        valid_now += 1
        fut = np.array([[s.center_x, s.center_y] for s in tr.states[t0:] if s.valid]) - origin
        if len(fut) < 2 or arc_lengths(fut)[-1] < MIN_ROUTE_M:
            continue
        s0 = tr.states[t0]
        dist = float(np.hypot(s0.center_x - origin[0], s0.center_y - origin[1]))
        cands.append(((0 if i == sdc else 1 if i in predict else 2, dist), i))
    cands.sort()
    return [i for _, i in cands[:max_agents]], valid_now


def _replay(scenario: Scenario, origin: np.ndarray, exclude: set[int], max_replay: int) -> ReplayLog:
    """The logged objects that are not controlled, nearest to the origin first (module docstring)."""
    t0 = scenario.current_time_index
    rows = []
    for i, tr in enumerate(scenario.tracks):
        states = tr.states[t0:]
        valid = np.array([s.valid for s in states], dtype=bool)
        if i in exclude or not valid.any():
            continue
        first = states[int(np.argmax(valid))]
        dist = float(np.hypot(first.center_x - origin[0], first.center_y - origin[1]))
        rows.append((dist, i, tr, valid))
    rows.sort(key=lambda r: (r[0], r[1]))
    rows = rows[:max_replay]
    steps = max((len(r[3]) for r in rows), default=0)
    n = len(rows)
    xy, yaw, vel = np.zeros((n, steps, 2)), np.zeros((n, steps)), np.zeros((n, steps, 2))
    valid_all = np.zeros((n, steps), dtype=bool)
    length, width, kind = np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)
    for j, (_, _, tr, valid) in enumerate(rows):
        states = tr.states[t0:]
        for t, s in enumerate(states):
            if s.valid:
                xy[j, t] = (s.center_x - origin[0], s.center_y - origin[1])
                yaw[j, t] = s.heading
                vel[j, t] = (s.velocity_x, s.velocity_y)
        valid_all[j, : len(valid)] = valid
        first = states[int(np.argmax(valid))]
        length[j] = first.length if first.length > 0 else 4.5
        width[j] = first.width if first.width > 0 else 1.9
        kind[j] = int(tr.object_type)
    return ReplayLog(xy, yaw, vel, valid_all, length, width, kind, dt_s=WOMD_DT_S)


def scenario_to_scene(
    scenario: Scenario,
    max_agents: int = 32,
    condition: RoadCondition | None = None,
    max_replay: int = 64,
) -> tuple[Scene, ConversionReport]:
    """Convert one scenario (see the module docstring).

    Raises:
        ScenarioConversionError: the scenario has nothing to drive (empty, no drivable lane, no
            controllable agent).
        ScenarioValueError: it holds a bad ``current_time_index`` or an implausible number.
    """
    sid = scenario.scenario_id
    if not scenario.tracks and not scenario.map_features:
        raise ScenarioConversionError(f"scenario '{sid}' is empty (no tracks, no map)")
    _check_values(scenario)
    origin = _origin(scenario)
    rg, counts = _roadgraph(scenario, origin)
    agents, valid_now = _controlled(scenario, origin, max_agents)
    if not agents:
        raise ScenarioConversionError(
            f"scenario '{sid}' has no controllable agent: none of its {valid_now} vehicles observed at"
            f" current_time_index {scenario.current_time_index} has a logged future of {MIN_ROUTE_M:g} m"
            " or more"
        )
    t0 = scenario.current_time_index
    poses, speeds, routes, goals, goal_s, lengths, widths = [], [], [], [], [], [], []
    log_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for i in agents:
        states = scenario.tracks[i].states[t0:]
        xy = np.array([[s.center_x, s.center_y] for s in states]) - origin
        valid = np.array([s.valid for s in states], dtype=bool)
        yaw = np.array([s.heading for s in states], dtype=np.float64)
        speed = np.array([np.hypot(s.velocity_x, s.velocity_y) for s in states], dtype=np.float64)
        path = xy[valid]
        keep = np.concatenate([[True], np.linalg.norm(np.diff(path, axis=0), axis=1) > 1e-3])
        path = path[keep]
        length = float(arc_lengths(path)[-1])
        route = resample_uniform(path, 1.0, length)
        if np.linalg.norm(route[-1] - path[-1]) > 1e-6:
            route = np.vstack([route, path[-1]])
        s0 = states[0]
        poses.append(np.array([xy[0, 0], xy[0, 1], s0.heading]))
        speeds.append(float(speed[0]))
        routes.append(route)
        goals.append(path[-1])
        goal_s.append(float(arc_lengths(route)[-1]))
        lengths.append(float(s0.length) if s0.length > 0 else 4.5)
        widths.append(float(s0.width) if s0.width > 0 else 1.9)
        log_rows.append(
            (np.where(valid[:, None], xy, 0.0), np.where(valid, yaw, 0.0), np.where(valid, speed, 0.0), valid)
        )
    cond = condition or RoadCondition("asphalt", 0.0)
    steps = len(scenario.tracks[agents[0]].states) - t0 if agents else 0
    log = AgentLog(
        xy=np.array([r[0] for r in log_rows]).reshape(len(agents), steps, 2),
        yaw=np.array([r[1] for r in log_rows]).reshape(len(agents), steps),
        speed=np.array([r[2] for r in log_rows]).reshape(len(agents), steps),
        valid=np.array([r[3] for r in log_rows], dtype=bool).reshape(len(agents), steps),
        dt_s=WOMD_DT_S,
    )
    scene = make_scene(
        name=str(scenario.scenario_id) or "womd-scenario",
        roadgraph=rg,
        spawn_pose=poses,
        spawn_speed_mps=speeds,
        routes=routes,
        goal_xy=goals,
        goal_s_m=goal_s,
        length_m=lengths,
        width_m=widths,
        surface=cond.surface,
        water_film_mm=cond.water_film_mm,
        friction=cond.mu,
        generator="womd",
        params={"origin_xy": [float(origin[0]), float(origin[1])], "current_time_index": int(t0)},
        log=log,
        replay=_replay(scenario, origin, set(agents), max_replay),
    )
    report = ConversionReport(
        lanes=rg.num_lanes,
        bike_lanes_dropped=counts["bike"],
        road_lines=len(rg.line_type),
        road_edges=len(rg.edge_type),
        controlled_agents=len(agents),
        vehicles_valid_now=valid_now,
        crosswalks=counts["crosswalk"],
        stop_signs=counts["stop_sign"],
        speed_bumps=counts["speed_bump"],
        other_objects=len(scenario.tracks) - len(agents),
    )
    return scene, report
