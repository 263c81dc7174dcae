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
- **Agents** (:func:`select_agents`; GPUDrive's and Waymax's practice). A track is controlled
  when it is a vehicle, observed at ``current_time_index``, moves (some observed position from
  then on lies :data:`PARKED_M` or more from where it starts) and has a goal its log reaches: the
  end of its own observed log, :data:`MIN_ROUTE_M` or more from its start. The self-driving car
  comes first, then the tracks to predict, then the others by distance to it, up to
  ``max_agents``. Every other track is replayed from its log (below) with its reason, the first
  that applies, of :data:`REASONS`: ``not_vehicle``, ``not_valid_at_start``, ``parked``,
  ``short_log``, ``beyond_max_agents``. A controlled agent spawns at its logged pose and speed,
  its route is its logged future path (resampled every metre) and its goal is the route's end;
  its full logged future becomes the scene's :class:`AgentLog` (expert actions, log divergence).
  The counts go into ``Scene.params["agents"]`` (:meth:`AgentSelection.counts`) and the
  :class:`ConversionReport`.
- **Road condition.** WOMD carries no weather: scenes get ``condition`` (dry asphalt by default).
- **Checks first.** A scenario with no drivable lane or no controllable agent is refused with
  :class:`ScenarioConversionError` (nothing to drive); one whose ``current_time_index`` is outside
  its steps, or whose observed states or map points hold a non-finite or implausible number (the
  bounds of :mod:`scenefactory.scenes.plausibility`), with :class:`ScenarioValueError` naming the
  track, step and field — before any of it is used.

- **Markings.** Crosswalk and speed-bump polygons and stop-sign positions go into the road graph.
- **Signals.** ``dynamic_map_states`` from ``current_time_index`` on become the scene's
  :class:`SignalLog` (step 0 = the current step): one column per signal-controlled lane, in order of
  first appearance, its WOMD state per step (``UNKNOWN`` where a step does not mention it) and its
  stop point; lane ids map to road-graph lane indices by their polylines (-1 for a lane that was
  dropped, e.g. a bike lane). Each stop sign gives one stop point per lane it controls (that lane's
  point nearest to the sign), or its own position when it names no kept lane.
- **Log playback.** The other objects (vehicles, pedestrians, cyclists) observed at some step
  from ``current_time_index`` on become the scene's :class:`ReplayLog`, nearest first, up to
  ``max_replay`` (the rest are counted as ``left_out``): they move along their logs, and the
  controlled agents must avoid them. Objects seen only before the current step are counted as
  ``history_only``.

"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.scenes.friction import RoadCondition
from scenefactory.scenes.plausibility import ANGLE, COORDINATE, LENGTH, SPEED, WIDTH, Bound
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.routes import arc_lengths, resample_uniform
from scenefactory.scenes.scene import AgentLog, ReplayLog, Scene, SignalLog, make_scene
from scenefactory.scenes.womd.scenario_pb2 import LaneCenter, MapPoint, Scenario, Track

DEFAULT_LANE_WIDTH_M = 3.7
WIDTH_RANGE_M = (2.4, 6.0)
MIN_ROUTE_M = 5.0
"""Closest a controlled agent's goal (the end of its observed log) may be to its start [m]: farther
than the goal radius, so that no agent starts at its goal."""
PARKED_M = 1.0
"""A vehicle whose every observed position from the current step on lies within this of its start
[m] does not move (parked, or waiting for the whole log; more than a box's jitter)."""
REASONS: dict[str, str] = {
    "not_vehicle": "a pedestrian, cyclist or other object: only vehicles are controlled",
    "not_valid_at_start": "not observed at current_time_index",
    "parked": f"does not move: every observed position from the start within {PARKED_M:g} m of it",
    "short_log": f"its observed log ends within {MIN_ROUTE_M:g} m of its start: no goal to drive to",
    "beyond_max_agents": "controllable, but beyond --max-agents (the SDC, the tracks to predict, then"
    " the nearest are controlled)",
}
"""Why a track is not controlled (it is replayed instead): key → explanation."""
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
    "driveway": "polygon",
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
    replayed_objects: int
    left_out_objects: int
    history_only_objects: int
    not_controlled: dict[str, int]


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
    # Driveways are drivable area beyond the kerb (tasks.driving.drivable); polygons need 3+ points.
    driveways = [_xy(f.driveway.polygon, origin) for f in scenario.map_features if f.HasField("driveway")]
    rg = rg.with_driveways([p for p in driveways if len(p) >= 3])
    return rg, counts


@dataclass(frozen=True)
class AgentSelection:
    """Which tracks a scene controls and replays (module docstring), as track indices.

    ``controlled`` in order (SDC, tracks to predict, then by distance); ``replayed`` nearest first;
    ``left_out`` the objects beyond ``max_replay``; ``history_only`` those not observed from the
    current step on; ``reasons`` every track of ``replayed`` and ``left_out`` → its key in
    :data:`REASONS`; ``vehicles_valid_now`` the vehicles observed at the current step.
    """

    controlled: list[int]
    replayed: list[int]
    left_out: list[int]
    history_only: list[int]
    reasons: dict[int, str]
    vehicles_valid_now: int

    def by_reason(self) -> dict[str, int]:
        """Count per key of :data:`REASONS` (every key, 0 included)."""
        out = dict.fromkeys(REASONS, 0)
        for reason in self.reasons.values():
            out[reason] += 1
        return out

    def counts(self, scenario: Scenario) -> dict[str, Any]:
        """The JSON-able record of ``Scene.params["agents"]``: ``controlled``, ``replayed``,
        ``left_out``, ``history_only`` counts, ``by_reason`` (why the replayed and left-out ones are
        not controlled), the ``controlled_track_ids`` (WOMD track ids, in agent order), and the
        ``sdc_track_id`` and ``tracks_to_predict_ids`` (``eval drive --control``)."""
        return {
            "controlled": len(self.controlled),
            "replayed": len(self.replayed),
            "left_out": len(self.left_out),
            "history_only": len(self.history_only),
            "by_reason": self.by_reason(),
            "controlled_track_ids": [int(scenario.tracks[i].id) for i in self.controlled],
            "sdc_track_id": _track_id(scenario, scenario.sdc_track_index),
            "tracks_to_predict_ids": [_track_id(scenario, r.track_index) for r in scenario.tracks_to_predict],
        }


def _track_id(scenario: Scenario, index: int) -> int:
    """The WOMD id of track ``index``, -1 when the index names no track."""
    return int(scenario.tracks[index].id) if 0 <= index < len(scenario.tracks) else -1


def _why_not(tr: Track, t0: int, origin: np.ndarray) -> str | None:
    """The :data:`REASONS` key that keeps a track from being controlled (``beyond_max_agents``
    aside), or None if it can be."""
    if tr.object_type != Track.TYPE_VEHICLE:
        return "not_vehicle"
    if t0 >= len(tr.states) or not tr.states[t0].valid:
        return "not_valid_at_start"
    fut = np.array([[s.center_x, s.center_y] for s in tr.states[t0:] if s.valid]) - origin
    away = np.linalg.norm(fut - fut[0], axis=1)
    if away.max() < PARKED_M:
        return "parked"
    if away[-1] < MIN_ROUTE_M:
        return "short_log"
    return None


def select_agents(scenario: Scenario, origin: np.ndarray, max_agents: int, max_replay: int) -> AgentSelection:
    """Controlled, replayed and left-out tracks of a scenario (module docstring)."""
    t0 = scenario.current_time_index
    sdc = scenario.sdc_track_index
    predict = {int(r.track_index) for r in scenario.tracks_to_predict}
    cands, others, history = [], [], []
    reasons: dict[int, str] = {}
    valid_now = 0
    for i, tr in enumerate(scenario.tracks):
        seen = [s for s in tr.states[t0:] if s.valid]
        if not seen:
            history.append(i)
            continue
        first = seen[0]
        dist = float(np.hypot(first.center_x - origin[0], first.center_y - origin[1]))
        valid_now += int(tr.object_type == Track.TYPE_VEHICLE and tr.states[t0].valid)
        why = _why_not(tr, t0, origin)
        if why is None:
            cands.append(((0 if i == sdc else 1 if i in predict else 2, dist), i))
        else:
            reasons[i] = why
            others.append((dist, i))
    cands.sort()
    for _, i in cands[max_agents:]:
        reasons[i] = "beyond_max_agents"
        first = next(s for s in scenario.tracks[i].states[t0:] if s.valid)
        others.append((float(np.hypot(first.center_x - origin[0], first.center_y - origin[1])), i))
    others.sort()
    return AgentSelection(
        controlled=[i for _, i in cands[:max_agents]],
        replayed=[i for _, i in others[:max_replay]],
        left_out=[i for _, i in others[max_replay:]],
        history_only=history,
        reasons=reasons,
        vehicles_valid_now=valid_now,
    )


def _replay(scenario: Scenario, origin: np.ndarray, tracks: list[int]) -> ReplayLog:
    """The replayed tracks' logs from the current step on (module docstring)."""
    t0 = scenario.current_time_index
    rows = []
    for i in tracks:
        tr = scenario.tracks[i]
        rows.append((tr, np.array([s.valid for s in tr.states[t0:]], dtype=bool)))
    steps = max((len(r[1]) for r in rows), default=0)
    n = len(rows)
    xy, yaw, vel = np.zeros((n, steps, 2)), np.zeros((n, steps)), np.zeros((n, steps, 2))
    valid_all = np.zeros((n, steps), dtype=bool)
    length, width, kind = np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)
    for j, (tr, valid) in enumerate(rows):
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


def _polyline_key(xy: np.ndarray) -> bytes:
    return np.round(np.asarray(xy, dtype=np.float64), 6).tobytes()


def _nearest_on_polyline(p: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """The point of polyline ``poly`` (m, 2) nearest to ``p`` (2,)."""
    if len(poly) == 1:
        return poly[0].copy()
    a, ab = poly[:-1], np.diff(poly, axis=0)
    t = np.clip(((p - a) * ab).sum(1) / np.maximum((ab * ab).sum(1), 1e-12), 0.0, 1.0)
    closest = a + t[:, None] * ab
    return np.asarray(closest[int(np.argmin(np.linalg.norm(closest - p, axis=1)))])


def _signals(scenario: Scenario, origin: np.ndarray, rg: RoadGraph) -> SignalLog | None:
    """Traffic signals and stop-sign stop points (module docstring); ``None`` when there are neither.

    Raises:
        ScenarioValueError: a stop point or sign position outside the plausible coordinates.
    """
    sid = scenario.scenario_id
    # feature id -> road-graph lane, matched by polyline (the road graph keeps kept lanes unchanged)
    by_poly: dict[bytes, int] = {}
    for i in range(rg.num_lanes):
        by_poly.setdefault(_polyline_key(rg.lane(i)), i)
    lane_of: dict[int, int] = {}
    for f in scenario.map_features:
        if f.HasField("lane"):
            idx = by_poly.get(_polyline_key(_xy(f.lane.polyline, origin)))
            if idx is not None:
                lane_of[int(f.id)] = idx

    def point(p: MapPoint, what: str) -> np.ndarray:
        for axis in ("x", "y"):
            if not COORDINATE.contains(getattr(p, axis)):
                raise ScenarioValueError(
                    f"scenario '{sid}': {what}: {axis} = {getattr(p, axis)!r} is not {COORDINATE.describe()}"
                )
        return np.array([p.x, p.y]) - origin

    t0 = scenario.current_time_index
    steps = scenario.dynamic_map_states[t0:]
    column: dict[int, int] = {}
    stop_xy: list[np.ndarray] = []
    seen: dict[tuple[int, int], int] = {}
    for t, dms in enumerate(steps):
        for ls in dms.lane_states:
            lane_id = int(ls.lane)
            if lane_id not in column:
                column[lane_id] = len(column)
                stop_xy.append(point(ls.stop_point, f"step {t0 + t}: signal of lane {lane_id}: stop_point"))
            seen.setdefault((t, column[lane_id]), int(ls.state))  # the first entry of a step wins
    state = np.zeros((len(steps), len(column)), dtype=np.int64)
    for (t, col), code in seen.items():
        state[t, col] = code
    sign_xy: list[np.ndarray] = []
    sign_lane: list[int] = []
    for f in scenario.map_features:
        if not f.HasField("stop_sign"):
            continue
        pos = point(f.stop_sign.position, f"map feature {f.id} (stop_sign): position")
        lanes = [lane_of[int(i)] for i in f.stop_sign.lane if int(i) in lane_of]
        for lane in dict.fromkeys(lanes):
            sign_xy.append(_nearest_on_polyline(pos, rg.lane(lane)))
            sign_lane.append(lane)
        if not lanes:
            sign_xy.append(pos)
            sign_lane.append(-1)
    if not column and not sign_xy:
        return None
    return SignalLog(
        stop_xy=np.array(stop_xy, dtype=np.float64).reshape(-1, 2),
        lane=np.array([lane_of.get(i, -1) for i in column], dtype=np.int64),
        state=state,
        sign_xy=np.array(sign_xy, dtype=np.float64).reshape(-1, 2),
        sign_lane=np.array(sign_lane, dtype=np.int64),
        dt_s=WOMD_DT_S,
    )


def scenario_to_scene(
    scenario: Scenario,
    max_agents: int = 32,
    condition: RoadCondition | None = None,
    max_replay: int = 128,
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
    selection = select_agents(scenario, origin, max_agents, max_replay)
    agents, valid_now = selection.controlled, selection.vehicles_valid_now
    if not agents:
        why = ", ".join(f"{n} {k}" for k, n in selection.by_reason().items() if n)
        raise ScenarioConversionError(
            f"scenario '{sid}' has no controllable agent: none of its {valid_now} vehicles observed at"
            f" current_time_index {scenario.current_time_index} moves to a goal {MIN_ROUTE_M:g} m or more"
            f" away ({why or 'no tracks'})"
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
        params={
            "origin_xy": [float(origin[0]), float(origin[1])],
            "current_time_index": int(t0),
            "agents": selection.counts(scenario),
        },
        log=log,
        replay=_replay(scenario, origin, selection.replayed),
        signals=_signals(scenario, origin, rg),
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
        replayed_objects=len(selection.replayed),
        left_out_objects=len(selection.left_out),
        history_only_objects=len(selection.history_only),
        not_controlled=selection.by_reason(),
    )
    return scene, report
