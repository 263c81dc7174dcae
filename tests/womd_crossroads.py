"""A WOMD scenario of a four-way crossroads with turning, lane-changing and straight logged drivers,
built in code in the real wire format (the project ships no WOMD data).

Roads: east-west and north-south, two 3.5 m lanes per direction (right-hand traffic; lane centres at
±1.75 m and ±5.25 m), kerbs 7 m from the centre line with 6 m corner radii (road edges oriented
with the road on their left, as WOMD's are), a lane centre for each through lane and for the two
turns driven. Logged drivers (10 Hz, 91 steps, current step 10), none of them near another:

- ``A`` eastbound inner lane, turns left (radius 8.75 m) into the northbound inner lane, 7 m/s;
- ``B`` eastbound outer lane, turns right (radius 7.75 m) into the southbound outer lane, 6 m/s;
- ``C`` westbound, changes from the inner to the outer lane (3.5 m) west of the crossroads, 8 m/s;
- ``D`` southbound inner lane, straight, 4 m/s.

A policy that does not steer misses A's, B's and C's goals (the end of each log).
"""

from __future__ import annotations

import math

import numpy as np

from scenefactory.scenes.womd.scenario_pb2 import (
    LaneCenter,
    MapFeature,
    MapPoint,
    RoadEdge,
    Scenario,
    Track,
)

STEPS = 91
CURRENT = 10
ARM_M = 60.0
KERB_M = 7.0
CORNER_R_M = 6.0


def _points(xy: np.ndarray) -> list[MapPoint]:
    return [MapPoint(x=float(x), y=float(y), z=0.0) for x, y in xy]


def _line(a: tuple[float, float], b: tuple[float, float], step_m: float = 2.0) -> np.ndarray:
    n = max(2, round(math.dist(a, b) / step_m) + 1)
    return np.linspace(a, b, n)


def _arc(centre: tuple[float, float], r: float, a0: float, a1: float, step_m: float = 1.0) -> np.ndarray:
    n = max(3, round(abs(a1 - a0) * r / step_m) + 1)
    ang = np.linspace(a0, a1, n)
    return np.stack([centre[0] + r * np.cos(ang), centre[1] + r * np.sin(ang)], axis=1)


def _join(*parts: np.ndarray) -> np.ndarray:
    out = [parts[0]]
    for p in parts[1:]:
        out.append(p[1:] if np.allclose(p[0], out[-1][-1]) else p)
    return np.concatenate(out)


def left_turn() -> np.ndarray:
    """A's path: eastbound at y = −1.75, left into x = +1.75 northbound."""
    c = (1.75 - 8.75, -1.75 + 8.75)
    return _join(
        _line((-ARM_M, -1.75), (c[0], -1.75)),
        _arc(c, 8.75, -math.pi / 2, 0.0),
        _line((1.75, c[1]), (1.75, ARM_M)),
    )


def right_turn() -> np.ndarray:
    """B's path: eastbound at y = −5.25, right into x = −5.25 southbound."""
    c = (-KERB_M - CORNER_R_M, -KERB_M - CORNER_R_M)
    r = CORNER_R_M + 1.75
    return _join(
        _line((-ARM_M, -5.25), (c[0], -5.25)),
        _arc(c, r, math.pi / 2, 0.0),
        _line((-5.25, c[1]), (-5.25, -ARM_M)),
    )


def lane_change() -> np.ndarray:
    """C's path: westbound at y = +1.75, over to y = +5.25 between x = −10 and x = −35."""
    x = np.arange(ARM_M, -ARM_M - 1e-9, -1.0)
    u = np.clip((-10.0 - x) / 25.0, 0.0, 1.0)
    return np.stack([x, 1.75 + 3.5 * (3 * u**2 - 2 * u**3)], axis=1)


def straight_south() -> np.ndarray:
    """D's path: southbound at x = −1.75."""
    return _line((-1.75, ARM_M), (-1.75, -ARM_M), 1.0)


def path_track(track_id: int, path: np.ndarray, s_now_m: float, speed_mps: float) -> Track:
    """A car moving along ``path`` at constant speed, at arc length ``s_now_m`` at the current step;
    heading = the path's tangent, velocity = speed along it."""
    seg = np.diff(path, axis=0)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(seg, axis=1))])
    track = Track(id=track_id, object_type=Track.TYPE_VEHICLE)
    for step in range(STEPS):
        q = s_now_m + speed_mps * 0.1 * (step - CURRENT)
        x, y = np.interp(q, s, path[:, 0]), np.interp(q, s, path[:, 1])
        i = int(np.clip(np.searchsorted(s, q) - 1, 0, len(seg) - 1))
        heading = math.atan2(seg[i, 1], seg[i, 0])
        track.states.add(
            center_x=float(x), center_y=float(y), center_z=0.8, length=4.6, width=1.9, height=1.6,
            heading=heading, velocity_x=speed_mps * math.cos(heading),
            velocity_y=speed_mps * math.sin(heading), valid=True,
        )  # fmt: skip
    return track


def _edges() -> list[np.ndarray]:
    """The four kerbs, each with the road on its left (WOMD's orientation)."""
    k, r, a = KERB_M, CORNER_R_M, ARM_M
    out = []
    for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
        c = (sx * (k + r), sy * (k + r))
        # corner of quadrant (sx, sy): from the east-west arm's kerb to the north-south arm's kerb
        ang_ew = math.atan2(-sy, 0.0)  # the arc point on the y = sy·k kerb, seen from the centre
        ang_ns = math.atan2(0.0, -sx)  # the arc point on the x = sx·k kerb
        ew = _line((sx * a, sy * k), (c[0], sy * k))
        arc = _arc(c, r, ang_ew, ang_ew + _short(ang_ew, ang_ns))
        ns = _line((sx * k, c[1]), (sx * k, sy * a))
        edge = _join(ew, arc, ns)
        # built from the east-west arm inward: the road is on the left in quadrants I and III
        out.append(edge if sx * sy > 0 else edge[::-1])
    return out


def _short(a0: float, a1: float) -> float:
    return (a1 - a0 + math.pi) % (2 * math.pi) - math.pi


def crossroads_scenario(scenario_id: str = "crossroads") -> Scenario:
    """The scenario of the module docstring."""
    scenario = Scenario(
        scenario_id=scenario_id,
        timestamps_seconds=[0.1 * step for step in range(STEPS)],
        current_time_index=CURRENT,
        sdc_track_index=0,
    )
    scenario.tracks.extend(
        [
            path_track(1, left_turn(), 20.0, 7.0),
            path_track(2, right_turn(), 20.0, 6.0),
            path_track(3, lane_change(), 50.0, 8.0),
            path_track(4, straight_south(), 25.0, 4.0),
        ]
    )
    lanes = [
        _line((-ARM_M, -1.75), (ARM_M, -1.75)),
        _line((-ARM_M, -5.25), (ARM_M, -5.25)),
        _line((ARM_M, 1.75), (-ARM_M, 1.75)),
        _line((ARM_M, 5.25), (-ARM_M, 5.25)),
        _line((1.75, -ARM_M), (1.75, ARM_M)),
        _line((5.25, -ARM_M), (5.25, ARM_M)),
        _line((-1.75, ARM_M), (-1.75, -ARM_M)),
        _line((-5.25, ARM_M), (-5.25, -ARM_M)),
        _arc((-7.0, 7.0), 8.75, -math.pi / 2, 0.0),
        _arc((-13.0, -13.0), 7.75, math.pi / 2, 0.0),
    ]
    fid = 1
    for poly in lanes:
        lane = LaneCenter(type=LaneCenter.TYPE_SURFACE_STREET, speed_limit_mph=25.0, polyline=_points(poly))
        scenario.map_features.append(MapFeature(id=fid, lane=lane))
        fid += 1
    for poly in _edges():
        edge = RoadEdge(type=RoadEdge.TYPE_ROAD_EDGE_BOUNDARY, polyline=_points(poly))
        scenario.map_features.append(MapFeature(id=fid, road_edge=edge))
        fid += 1
    return scenario


def rotated(scenario: Scenario, angle_rad: float, scenario_id: str) -> Scenario:
    """A copy of ``scenario`` turned by ``angle_rad`` about the origin (positions, headings,
    velocities and map points), named ``scenario_id``."""
    out = Scenario()
    out.CopyFrom(scenario)
    out.scenario_id = scenario_id
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    for tr in out.tracks:
        for st in tr.states:
            if st.valid:
                st.center_x, st.center_y = (
                    c * st.center_x - s * st.center_y,
                    s * st.center_x + c * st.center_y,
                )
                st.velocity_x, st.velocity_y = (
                    c * st.velocity_x - s * st.velocity_y,
                    s * st.velocity_x + c * st.velocity_y,
                )
                st.heading = (st.heading + angle_rad + math.pi) % (2 * math.pi) - math.pi
    for f in out.map_features:
        kind = f.WhichOneof("feature_data")
        for p in getattr(f, kind).polyline:
            p.x, p.y = c * p.x - s * p.y, s * p.x + c * p.y
    return out


def noisy(
    scenario: Scenario, seed: int, pos_m: float = 0.08, yaw_rad: float = 0.03, speed_frac: float = 0.05
) -> Scenario:
    """A copy of ``scenario`` whose observed states carry independent Gaussian noise per step, as
    a real log's boxes do: position ``pos_m``, heading ``yaw_rad``, a ``speed_frac`` share of the
    velocity."""
    rng = np.random.default_rng(seed)
    out = Scenario()
    out.CopyFrom(scenario)
    for tr in out.tracks:
        for st in tr.states:
            if st.valid:
                st.center_x += rng.normal(0.0, pos_m)
                st.center_y += rng.normal(0.0, pos_m)
                st.heading = (st.heading + rng.normal(0.0, yaw_rad) + math.pi) % (2 * math.pi) - math.pi
                scale = 1.0 + rng.normal(0.0, speed_frac)
                st.velocity_x *= scale
                st.velocity_y *= scale
    return out
