"""Synthetic WOMD scenarios of a city grid, in the real wire format, for benchmarks and tests.

The project ships no Waymo data, so :func:`city_scenario` builds scenarios that look like real ones
to every reader of the format (``convert``, the drivable area, routes, signals), and
:func:`write_corpus` writes a corpus of them as TFRecord shards named like WOMD's.

**Map** (deterministic for a seed; turned by a random angle and moved by a random offset, as WOMD
maps sit anywhere in their frame). A grid of ``nx`` x ``ny`` four-way junctions ``pitch`` metres
apart (60-110 m, drawn per axis), cropped ``stub`` metres past the outer junctions as a real map is
cropped. Every street is two-way with two 3.5 m lanes per direction (right-hand traffic; lane
centres 1.75 m and 5.25 m right of the street's axis) and a 2.5 m parking strip on each side,
kerbs 9.5 m from the axis with 4 m corner radii:

- *lane centres* per street segment and direction (2 m point spacing), joined at each junction by
  16 connector lanes (two through, one right turn from the outer lane, one left turn from the inner
  lane per approach; arcs at 1 m spacing) with their entry/exit lane links, so every lane leads
  somewhere until the map's edge; lane neighbours and left/right boundary segments name the road
  lines, so ``convert`` reads 3.5 m widths;
- *road lines*: the double-yellow centre line, the broken white lane dividers and the solid white
  lines between the outer lanes and the parking strips;
- *road edges*: the kerb around every block, clockwise so that the road is on its left (WOMD's
  orientation); closed loops for inner blocks, open polylines ending at the map's edge for outer
  ones;
- *crosswalks* across every junction arm, and (``driveways``) a few *driveway* polygons across kerbs;
- (``signals``) each junction is either signalled, with a four-phase cycle (through and right,
  then protected left, per axis; green, 3 s yellow, 1 s all red) given per connector lane and
  step in ``dynamic_map_states`` with its stop point at the connector's start, or an all-way stop
  with a *stop sign* per approach naming the approach lanes.

The grid size and stub length are chosen so that ``convert`` gives about ``target_road_points``
road points at 3 m spacing (``tasks.driving.pool.road_points``): every lane, line and edge
polyline of length ``L`` gives ``floor(L / 3) + 1``, counted from the layout before it is built.

**Vehicles** (91 steps at 10 Hz, current step 10, every state valid). ``num_vehicles`` moving
vehicles drive lane paths (a random walk over the lane graph: through 60 %, turning 40 %) at a
desired speed drawn from 5-15 m/s, simulated together with the intelligent driver model (jerk
limited): they follow the vehicle ahead on their path, slow to 2 m/s^2 of lateral acceleration on
turns (4-6 m/s), stop at red lights and at yellow ones they can stop for, go on green, stop at
stop signs and then enter one vehicle per junction at a time. Candidates are simulated in batches
and kept greedily when they never brake harder than :data:`HARSH_BRAKE_MPS2`, stay on their path,
end :data:`MIN_TRAVEL_M` or more from where they are at the current step, overlap no kept or
parked vehicle at any step (boxes grown by :data:`CLEARANCE_M`) and keep the rules as the
evaluation judges them from the current step on (no stop line crossed on red; a stop at a stop
sign after the current step; a signal's stop line crossed 12 m or more before the log ends, so that
the log shows which movement's light it obeyed). Unless no dropped candidate held a kept one back,
the kept ones are simulated again alone and checked again: every log is collision-free, every
vehicle controllable, and replayed by the kinematic expert without a collision, off-road or
violation. ``parked`` stationary vehicles stand in the parking strips (``convert`` replays them as
parked). A map too small for ``num_vehicles`` raises ``ValueError`` (:func:`write_corpus` then
tries one vehicle fewer).

**Background traffic** (:class:`Background`, drawn per scenario from a :class:`TrafficMix`; off by
default, so scenarios without it are unchanged). WOMD scenarios log up to 128 objects, of which only
some are the moving vehicles above: many vehicles are parked, pedestrians and cyclists pass on the
sidewalks, and most objects are observed over part of the 9.1 s only (they come into view later or
leave it). :data:`WOMD_MIX` gives a corpus that make-up; its target figures, checked on generated
files by ``tests/scenes/test_womd_synthetic.py``:

- tracks per scenario: 20 to 128 (never more than WOMD's 128); vehicles, pedestrians and cyclists
  all present in a corpus, vehicles 45-85 % of the tracks, pedestrians 10-45 %, cyclists 1-10 %;
- parked (a vehicle that never moves 1 m from its first observed position while observed): 25-75 %
  of the vehicles;
- observed per step (valid states per step, averaged over the 91 steps): 8 to 60 per scenario,
  20 to 45 averaged over a corpus ("a few dozen at a time"; seven real scenes measured 6 to 44);
- partly observed (a track not valid at some step): 50 % of the tracks or more.

Pedestrians (0.8-1.7 m/s, a quarter standing) and cyclists (3-7 m/s) move in straight lines along
the sidewalks beyond the kerbs (1-3.5 m and 0.8-1.4 m past them), observed while beside their
block; the extra parked vehicles fill the parking strips clear of every other vehicle. With share
``occluded_share`` a parked vehicle, pedestrian, cyclist or moving vehicle past the first eight
tracks is observed over one window of 10 steps or more (appearing later, disappearing earlier, or
both); invalid states carry -1, as WOMD's do. The background is drawn from its own generator, so
the map, the moving vehicles and their logs are the same as without it.

Messages are encoded directly in the protobuf wire format with numpy (map points, object states and
signal states are fixed-size records), then parsed once by the real ``Scenario`` parser. About
35 ms a scenario on one core for targets of 2,000-8,000 points and 3-32 vehicles (10,000 in about
3 minutes on two cores with :func:`write_corpus`).
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scenefactory.scenes.womd.scenario_pb2 import Scenario
from scenefactory.scenes.womd.tfrecord import write_records

# ------------------------------------------------------------------------------------ constants

STEPS = 91
CURRENT = 10
DT_S = 0.1
LANE_OFFSETS_M = (1.75, 5.25)
"""Lane centres right of a street's axis: inner, outer."""
DIVIDER_M = 3.5
EDGE_LINE_M = 7.0
KERB_M = 9.5
"""Kerb distance from the street axis: two 3.5 m lanes and a 2.5 m parking strip."""
CORNER_R_M = 4.0
JUNCTION_M = KERB_M + CORNER_R_M
"""Lanes end (stop lines) and kerbs start rounding this far from a junction's centre."""
PITCH_RANGE_M = (60.0, 110.0)
STUB_RANGE_M = (12.0, 90.0)
STRAIGHT_STEP_M = 2.0
ARC_STEP_M = 1.0
ROAD_POINT_SPACING_M = 3.0
SPEED_LIMIT_MPH = 35.0
SPEED_RANGE_MPS = (5.0, 15.0)
MIN_TRAVEL_M = 10.0
"""Every moving vehicle ends its log this far or farther from where it is at the current step."""
HARSH_BRAKE_MPS2 = 4.5
CLEARANCE_M = 0.25
"""Boxes are grown by this on every side when checking that no two vehicles overlap."""

# intelligent driver model
_A_MAX = 1.5
_B_COMF = 2.0
_A_EMERGENCY = 8.0
_HEADWAY_S = 1.2
_JAM_M = 2.0
_STOP_JAM_M = 0.5
_STOP_BEFORE_M = 1.0
"""Vehicles stop with their front this far before a stop line."""
_LAT_ACCEL = 2.0
_SIGN_WAIT_S = 1.0
_SIGNAL_COMMIT_DECEL = 4.0
_LOOKAHEAD_M = 80.0
"""Vehicles farther ahead than this do not slow a vehicle down."""
_PAST_SIGNAL_M = 12.0
_JERK_UP = 5.0
_JERK_DOWN = 20.0

# WOMD codes
_SURFACE_STREET = 2
_BROKEN_WHITE, _SOLID_WHITE, _DOUBLE_YELLOW = 1, 2, 7
_EDGE_BOUNDARY = 1
_VEHICLE, _PEDESTRIAN, _CYCLIST = 1, 2, 3
_ARROW_STOP, _ARROW_CAUTION, _ARROW_GO, _STOP, _CAUTION, _GO = 1, 2, 3, 4, 5, 6
_GO_CODES = (_ARROW_GO, _GO)
_CAUTION_CODES = (_ARROW_CAUTION, _CAUTION)
_RED_CODES = (_ARROW_STOP, _STOP, 7)  # 7: flashing stop

# directions: 0 east, 1 north, 2 west, 3 south; right of d is (d + 3) % 4, left (d + 1) % 4
_U = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
_R = np.array([[0.0, -1.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
_THROUGH, _RIGHT, _LEFT = 0, 1, 2


# ------------------------------------------------------------------------------- wire format


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _vi(fieldno: int, n: int) -> bytes:
    return bytes((fieldno << 3,)) + _varint(n)


def _ld(fieldno: int, payload: bytes) -> bytes:
    return _varint(fieldno << 3 | 2) + _varint(len(payload)) + payload


def _f64(fieldno: int, x: float) -> bytes:
    return bytes((fieldno << 3 | 1,)) + struct.pack("<d", x)


def _packed(fieldno: int, values: Sequence[int]) -> bytes:
    return _ld(fieldno, b"".join(_varint(v) for v in values)) if values else b""


_POINT = np.dtype(
    [
        ("key", "u1"),
        ("len", "u1"),
        ("kx", "u1"),
        ("x", "<f8"),
        ("ky", "u1"),
        ("y", "<f8"),
        ("kz", "u1"),
        ("z", "<f8"),
    ]
)
"""One ``MapPoint`` as a length-delimited field: 29 bytes."""
_STATE = np.dtype(
    [
        ("key", "u1"), ("len", "u1"),
        ("kx", "u1"), ("x", "<f8"), ("ky", "u1"), ("y", "<f8"), ("kz", "u1"), ("z", "<f8"),
        ("kl", "u1"), ("length", "<f4"), ("kw", "u1"), ("width", "<f4"), ("kh", "u1"), ("height", "<f4"),
        ("kyaw", "u1"), ("heading", "<f4"), ("kvx", "u1"), ("vx", "<f4"), ("kvy", "u1"), ("vy", "<f4"),
        ("kvalid", "u1"), ("valid", "u1"),
    ]
)  # fmt: skip
"""One ``ObjectState`` as ``Track.states`` (field 3): 61 bytes."""


def _states(
    xy: np.ndarray,
    yaw: np.ndarray,
    vel: np.ndarray,
    size: tuple[float, float, float],
    valid: np.ndarray | None = None,
) -> bytes:
    """``Track.states`` of one track over its steps (all valid unless ``valid`` (T,) says; an
    unobserved state carries -1 in every field, as WOMD's do)."""
    rec = np.zeros(len(xy), _STATE)
    rec["key"], rec["len"] = 3 << 3 | 2, _STATE.itemsize - 2
    for name, key in (
        ("kx", 0x11), ("ky", 0x19), ("kz", 0x21), ("kl", 0x2D), ("kw", 0x35), ("kh", 0x3D),
        ("kyaw", 0x45), ("kvx", 0x4D), ("kvy", 0x55), ("kvalid", 0x58),
    ):  # fmt: skip
        rec[name] = key
    rec["x"], rec["y"], rec["z"] = xy[:, 0], xy[:, 1], 0.5 * size[2]
    rec["length"], rec["width"], rec["height"] = size
    rec["heading"] = yaw
    rec["vx"], rec["vy"] = vel[:, 0], vel[:, 1]
    rec["valid"] = 1
    if valid is not None:
        off = ~valid
        for name in ("x", "y", "z", "length", "width", "height", "heading", "vx", "vy"):
            rec[name][off] = -1.0
        rec["valid"][off] = 0
    return rec.tobytes()


# ------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class _Layout:
    nx: int
    ny: int
    pitch: tuple[float, float]
    stub: float


def _count(length: np.ndarray | float) -> np.ndarray:
    return np.floor(np.asarray(length) / ROAD_POINT_SPACING_M) + 1


def _layout_points(
    nx: np.ndarray, ny: np.ndarray, px: float, py: float, stub: np.ndarray | float
) -> np.ndarray:
    """Road points at 3 m of layouts (module docstring), from their polylines' lengths; elementwise."""
    lx, ly = px - 2 * JUNCTION_M, py - 2 * JUNCTION_M
    arc = 0.5 * math.pi * CORNER_R_M
    turn_r, turn_l = JUNCTION_M - LANE_OFFSETS_M[1], JUNCTION_M + LANE_OFFSETS_M[0]
    per_junction = (
        8 * _count(2 * JUNCTION_M) + 4 * _count(0.5 * math.pi * turn_r) + 4 * _count(0.5 * math.pi * turn_l)
    )
    stubs = 2 * _count(stub)
    n = 9 * (ny * ((nx - 1) * _count(lx) + stubs) + nx * ((ny - 1) * _count(ly) + stubs))  # 4 lanes, 5 lines
    n = n + nx * ny * per_junction + (nx - 1) * (ny - 1) * _count(2 * lx + 2 * ly + 4 * arc)
    n = n + 2 * (nx - 1) * _count(2 * stub + lx + 2 * arc) + 2 * (ny - 1) * _count(2 * stub + ly + 2 * arc)
    return np.asarray(n + 4 * _count(2 * stub + arc))


def choose_layout(target_road_points: int, rng: np.random.Generator) -> _Layout:
    """A grid whose road-point count is nearest ``target_road_points``, its stub length nearest a
    drawn preference (module docstring)."""
    px, py = (float(v) for v in rng.uniform(*PITCH_RANGE_M, size=2))
    prefer = rng.uniform(25.0, 45.0)
    lo, hi = STUB_RANGE_M
    nx, ny = (g.ravel() for g in np.meshgrid(np.arange(1, 16), np.arange(1, 16)))
    keep = np.maximum(nx, ny) <= 2 * np.minimum(nx, ny) + 1
    nx, ny = nx[keep], ny[keep]
    c0, c1 = _layout_points(nx, ny, px, py, lo), _layout_points(nx, ny, px, py, hi)
    stub = np.clip(lo + (target_road_points - c0) * (hi - lo) / np.maximum(c1 - c0, 1), lo, hi)
    err = np.abs(_layout_points(nx, ny, px, py, stub) - target_road_points) / target_road_points
    best = int(np.argmin(err + 0.002 * np.abs(stub - prefer)))
    return _Layout(int(nx[best]), int(ny[best]), (px, py), float(stub[best]))


# ---------------------------------------------------------------------------------------- map


@dataclass
class _Lane:
    xy: np.ndarray
    junction: int = -1
    """Connector: its junction; street lane: the junction it enters (-1 at the map's edge)."""
    turn: int = _THROUGH
    radius: float = math.inf
    entries: list[int] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    left_nb: int = -1
    right_nb: int = -1
    left_line: tuple[int, int] | None = None
    right_line: tuple[int, int] | None = None
    signal_col: int = -1
    length: float = 0.0
    connector: bool = False


@dataclass
class _Map:
    lanes: list[_Lane]
    lines: list[tuple[np.ndarray, int]]
    edges: list[np.ndarray]
    crosswalks: list[np.ndarray]
    driveways: list[np.ndarray]
    stop_signs: list[tuple[list[int], np.ndarray]]
    street_lanes: np.ndarray
    """Indices of the lanes between junctions (where vehicles start)."""
    control: np.ndarray
    """Per junction: 0 none, 1 signal, 2 all-way stop."""
    signal_state: np.ndarray
    """(STEPS, columns) WOMD state per step of each signalled connector."""
    signal_lanes: list[int]
    parking: list[tuple[np.ndarray, int, float]]
    """Parking strips: (axis point at segment start, travel direction, usable length)."""
    driveway_xy: np.ndarray


def _straight(a: np.ndarray, b: np.ndarray, step: float = STRAIGHT_STEP_M) -> np.ndarray:
    d = b - a
    n = max(2, math.ceil(math.hypot(d[0], d[1]) / step - 1e-9) + 1)
    return a + (np.arange(n) / (n - 1))[:, None] * d


def _arc(centre: np.ndarray, r: float, a0: float, sweep: float, step: float = ARC_STEP_M) -> np.ndarray:
    n = max(3, math.ceil(abs(sweep) * r / step - 1e-9) + 1)
    ang = a0 + np.linspace(0.0, sweep, n)
    return centre + r * np.stack([np.cos(ang), np.sin(ang)], axis=1)


def _sweep(a0: float, a1: float) -> float:
    return (a1 - a0 + math.pi) % (2 * math.pi) - math.pi


def _block_kerb(x0: float, x1: float, y0: float, y1: float, open_sides: tuple[bool, ...]) -> np.ndarray:
    """A block's kerb, clockwise (road on the left): sides top, right, bottom, left; the sides at
    the map's edge (``open_sides``) are left out and the corners between two kerbs rounded."""
    corners = np.array([[x0, y1], [x1, y1], [x1, y0], [x0, y0]])  # TL, TR, BR, BL: side k runs k -> k+1
    dirs = np.array([[1.0, 0.0], [0.0, -1.0], [-1.0, 0.0], [0.0, 1.0]])
    closed = [not o for o in open_sides]
    start = next((k for k in range(4) if closed[k] and not closed[k - 1]), 0)
    parts: list[np.ndarray] = []
    r = CORNER_R_M
    for i in range(4):
        k = (start + i) % 4
        if not closed[k]:
            continue
        a, b = corners[k], corners[(k + 1) % 4]
        rounded_in, rounded_out = closed[k - 1], closed[(k + 1) % 4]
        p0 = a + r * dirs[k] if rounded_in else a
        p1 = b - r * dirs[k] if rounded_out else b
        parts.append(_straight(p0, p1))
        if rounded_out:
            nxt = dirs[(k + 1) % 4]
            centre = b - r * dirs[k] + r * nxt
            a0 = math.atan2(-nxt[1], -nxt[0])
            parts.append(_arc(centre, r, a0, -0.5 * math.pi)[1:-1])
    poly = np.concatenate(parts)
    if all(closed):
        poly = np.vstack([poly, poly[:1]])
    return poly


def _signal_states(rng: np.random.Generator) -> dict[tuple[int, int], np.ndarray]:
    """A junction's four-phase cycle: (axis 0 east-west / 1 north-south, movement) -> codes per step."""
    green_through, green_left = rng.uniform(8.0, 14.0), rng.uniform(4.0, 6.0)
    yellow, all_red = 3.0, 1.0
    phases = [
        (0, _THROUGH, green_through),
        (0, _LEFT, green_left),
        (1, _THROUGH, green_through),
        (1, _LEFT, green_left),
    ]
    cycle = sum(g + yellow + all_red for *_, g in phases)
    tau = (np.arange(STEPS) * DT_S + rng.uniform(0.0, cycle)) % cycle
    out: dict[tuple[int, int], np.ndarray] = {}
    start = 0.0
    for axis, move, green in phases:
        arrow = move == _LEFT
        codes = np.full(STEPS, _ARROW_STOP if arrow else _STOP, dtype=np.int64)
        codes[(tau >= start) & (tau < start + green)] = _ARROW_GO if arrow else _GO
        codes[(tau >= start + green) & (tau < start + green + yellow)] = _ARROW_CAUTION if arrow else _CAUTION
        out[(axis, move)] = codes
        start += green + yellow + all_red
    out[(0, _RIGHT)], out[(1, _RIGHT)] = out[(0, _THROUGH)], out[(1, _THROUGH)]
    return out


def _build_map(layout: _Layout, rng: np.random.Generator, signals: bool, driveways: bool) -> _Map:
    nx, ny = layout.nx, layout.ny
    px, py = layout.pitch
    stub = layout.stub
    xs, ys = np.arange(nx) * px, np.arange(ny) * py
    jx0, jx1 = -JUNCTION_M - stub, xs[-1] + JUNCTION_M + stub
    jy0, jy1 = -JUNCTION_M - stub, ys[-1] + JUNCTION_M + stub
    centres = np.array([[x, y] for y in ys for x in xs])  # junction k = j * nx + i
    lanes: list[_Lane] = []
    lines: list[tuple[np.ndarray, int]] = []
    street: list[int] = []
    parking: list[tuple[np.ndarray, int, float]] = []
    arrive: dict[tuple[int, int, int], int] = {}  # (junction, direction, lane 0/1) -> lane arriving
    leave: dict[tuple[int, int, int], int] = {}

    def segment(axis: int, fixed: float, t0: float, t1: float, j_lo: int, j_hi: int) -> None:
        """Street segment along x (axis 0) or y (axis 1) from t0 to t1; j_lo/j_hi the junctions at
        its ends (-1 at the map's edge)."""
        fwd = 0 if axis == 0 else 1

        def at(t: float, off_dir: int, off: float) -> np.ndarray:
            base = np.array([t, fixed]) if axis == 0 else np.array([fixed, t])
            return base + off * _R[off_dir]

        # lines: centre, then per direction divider and edge line (each line gets a feature index)
        first_line = len(lines)
        lines.append((_straight(at(t0, fwd, 0.0), at(t1, fwd, 0.0)), _DOUBLE_YELLOW))
        for d in (fwd, fwd + 2):
            for off, kind in ((DIVIDER_M, _BROKEN_WHITE), (EDGE_LINE_M, _SOLID_WHITE)):
                lines.append((_straight(at(t0, d, off), at(t1, d, off)), kind))
        for n, d in enumerate((fwd, fwd + 2)):
            a, b = (t0, t1) if d == fwd else (t1, t0)
            j_from, j_to = (j_lo, j_hi) if d == fwd else (j_hi, j_lo)
            ids = []
            for k, off in enumerate(LANE_OFFSETS_M):
                lane = _Lane(_straight(at(a, d, off), at(b, d, off)), junction=j_to)
                divider = (first_line + 1 + 2 * n, _BROKEN_WHITE)
                if k == 0:
                    lane.left_line, lane.right_line = (first_line, _DOUBLE_YELLOW), divider
                else:
                    lane.left_line, lane.right_line = divider, (first_line + 2 + 2 * n, _SOLID_WHITE)
                ids.append(len(lanes))
                street.append(len(lanes))
                lanes.append(lane)
                if j_to >= 0:
                    arrive[(j_to, d, k)] = ids[-1]
                if j_from >= 0:
                    leave[(j_from, d, k)] = ids[-1]
            lanes[ids[0]].right_nb, lanes[ids[1]].left_nb = ids[1], ids[0]
            parking.append((at(a, d, 0.0), d, abs(b - a)))

    for j, y in enumerate(ys):
        ends = [jx0, *(v for x in xs for v in (x - JUNCTION_M, x + JUNCTION_M)), jx1]
        for k in range(nx + 1):
            segment(
                0,
                y,
                ends[2 * k],
                ends[2 * k + 1],
                j * nx + k - 1 if k > 0 else -1,
                j * nx + k if k < nx else -1,
            )
    for i, x in enumerate(xs):
        ends = [jy0, *(v for y in ys for v in (y - JUNCTION_M, y + JUNCTION_M)), jy1]
        for k in range(ny + 1):
            segment(
                1,
                x,
                ends[2 * k],
                ends[2 * k + 1],
                (k - 1) * nx + i if k > 0 else -1,
                k * nx + i if k < ny else -1,
            )

    n_junctions = nx * ny
    if signals:
        control = np.where(rng.random(n_junctions) < 0.6, 1, 2)
    else:
        control = np.zeros(n_junctions, dtype=np.int64)
    signal_cols: list[np.ndarray] = []
    signal_lanes: list[int] = []
    stop_signs: list[tuple[list[int], np.ndarray]] = []
    crosswalks: list[np.ndarray] = []
    for jn, c in enumerate(centres):
        states = _signal_states(rng) if control[jn] == 1 else None
        for d in range(4):
            u, r = _U[d], _R[d]
            moves = [(_THROUGH, 0, d), (_THROUGH, 1, d), (_RIGHT, 1, (d + 3) % 4), (_LEFT, 0, (d + 1) % 4)]
            for move, k, e in moves:
                src, dst = arrive[(jn, d, k)], leave[(jn, e, k)]
                p0 = lanes[src].xy[-1]
                if move == _THROUGH:
                    xy, radius = _straight(p0, lanes[dst].xy[0]), math.inf
                else:
                    side = 1.0 if move == _RIGHT else -1.0
                    centre = c - JUNCTION_M * u + side * JUNCTION_M * r
                    radius = float(np.linalg.norm(p0 - centre))
                    a0 = math.atan2(p0[1] - centre[1], p0[0] - centre[0])
                    p1 = lanes[dst].xy[0]
                    a1 = math.atan2(p1[1] - centre[1], p1[0] - centre[0])
                    xy = _arc(centre, radius, a0, _sweep(a0, a1))
                    xy[0], xy[-1] = p0, p1
                conn = _Lane(xy, jn, move, radius, [src], [dst], connector=True)
                if states is not None:
                    conn.signal_col = len(signal_cols)
                    signal_cols.append(states[(d % 2, move)])
                    signal_lanes.append(len(lanes))
                lanes[src].exits.append(len(lanes))
                lanes[dst].entries.append(len(lanes))
                lanes.append(conn)
            if control[jn] == 2:
                pos = c - (JUNCTION_M + 1.0) * u + (KERB_M + 0.3) * r
                stop_signs.append(([arrive[(jn, d, 0)], arrive[(jn, d, 1)]], pos))
            # crosswalk across the arm the traffic of direction d arrives on
            near, far = KERB_M + 0.5, JUNCTION_M - 0.5
            crosswalks.append(
                np.array(
                    [
                        c - near * u + KERB_M * r,
                        c - far * u + KERB_M * r,
                        c - far * u - KERB_M * r,
                        c - near * u - KERB_M * r,
                    ]
                )
            )

    # kerbs: blocks between the streets, the outer ones open at the map's edge
    bx = [jx0, *(v for x in xs for v in (x - KERB_M, x + KERB_M)), jx1]
    by = [jy0, *(v for y in ys for v in (y - KERB_M, y + KERB_M)), jy1]
    edges, drive_polys, drive_xy = [], [], []
    for b in range(ny + 1):
        for a in range(nx + 1):
            x0, x1, y0, y1 = bx[2 * a], bx[2 * a + 1], by[2 * b], by[2 * b + 1]
            open_sides = (b == ny, a == nx, b == 0, a == 0)  # top, right, bottom, left
            edges.append(_block_kerb(x0, x1, y0, y1, open_sides))
            if not driveways:
                continue
            sides = (
                ((x0, y1), (1.0, 0.0)),
                ((x1, y1), (0.0, -1.0)),
                ((x1, y0), (-1.0, 0.0)),
                ((x0, y0), (0.0, 1.0)),
            )
            lengths = (x1 - x0, y1 - y0, x1 - x0, y1 - y0)
            for k, ((sx, sy), dvec) in enumerate(sides):
                usable = lengths[k] - 2 * CORNER_R_M - 10.0
                if open_sides[k] or usable < 6.0 or rng.random() > 0.3:
                    continue
                d_ = np.array(dvec)
                inward = np.array([d_[1], -d_[0]])  # right of the kerb's direction: into the block
                t = CORNER_R_M + 5.0 + rng.uniform(0.0, usable)
                mid = np.array([sx, sy]) + t * d_
                half, depth = rng.uniform(1.8, 2.6), rng.uniform(6.0, 10.0)
                drive_polys.append(
                    np.array([mid - half * d_ - 0.3 * inward, mid + half * d_ - 0.3 * inward,
                              mid + half * d_ + depth * inward, mid - half * d_ + depth * inward])
                )  # fmt: skip
                drive_xy.append(mid)
    signal_state = np.stack(signal_cols, axis=1) if signal_cols else np.zeros((STEPS, 0), dtype=np.int64)
    xy = np.concatenate([lane.xy for lane in lanes])
    seg = np.append(np.hypot(*np.diff(xy, axis=0).T), 0.0)
    starts = np.cumsum([0] + [len(lane.xy) for lane in lanes[:-1]])
    ends = starts + np.array([len(lane.xy) for lane in lanes]) - 1
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    for lane, a, b in zip(lanes, starts.tolist(), ends.tolist(), strict=True):
        lane.length = float(cum[b] - cum[a])
    return _Map(
        lanes=lanes,
        lines=lines,
        edges=edges,
        crosswalks=crosswalks,
        driveways=drive_polys,
        stop_signs=stop_signs,
        street_lanes=np.array(street),
        control=control,
        signal_state=signal_state,
        signal_lanes=signal_lanes,
        parking=parking,
        driveway_xy=np.array(drive_xy).reshape(-1, 2),
    )


# ----------------------------------------------------------------------------------- vehicles


@dataclass
class _Candidate:
    lanes: list[int]
    starts: list[float]
    xy: np.ndarray
    s: np.ndarray
    s0: float
    v_des: float
    size: tuple[float, float, float]
    stops: list[tuple[float, int, int, int, float]]
    """(path arc length of the stop line, kind 1 signal / 2 sign, signal column, junction, box length)."""
    caps: list[tuple[float, float, float]]
    """Turns: (start, end arc length, speed cap)."""


def _vehicle_size(rng: np.random.Generator) -> tuple[float, float, float]:
    return float(rng.uniform(4.2, 5.2)), float(rng.uniform(1.8, 2.05)), float(rng.uniform(1.45, 1.9))


def _candidate(m: _Map, rng: np.random.Generator, weights: np.ndarray) -> _Candidate | None:
    v_des = float(rng.uniform(*SPEED_RANGE_MPS))
    need = v_des * (STEPS - 1) * DT_S + 15.0
    path = [int(rng.choice(m.street_lanes, p=weights))]
    seen = set(path)
    total = m.lanes[path[0]].length
    while total < m.lanes[path[0]].length + need:
        lane = m.lanes[path[-1]]
        options = [e for e in lane.exits if e not in seen]
        if not options:
            break
        if len(options) > 1:
            through = [e for e in options if m.lanes[e].turn == _THROUGH]
            turns = [e for e in options if m.lanes[e].turn != _THROUGH]
            pool = through if (through and (not turns or rng.random() < 0.6)) else turns
            nxt = int(pool[rng.integers(len(pool))])
        else:
            nxt = int(options[0])
        path.append(nxt)
        seen.add(nxt)
        total += m.lanes[nxt].length
    size = _vehicle_size(rng)
    s0_max = min(m.lanes[path[0]].length - 0.5 * size[0] - 3.0, total - need)
    if s0_max < 0.0:
        return None
    s0 = float(rng.uniform(0.0, s0_max))
    parts, starts, at = [], [], 0.0
    stops, caps = [], []
    for i, li in enumerate(path):
        lane = m.lanes[li]
        parts.append(lane.xy if i == 0 else lane.xy[1:])
        starts.append(at)
        if lane.connector and lane.turn != _THROUGH:
            caps.append((at, at + lane.length, math.sqrt(_LAT_ACCEL * lane.radius)))
        if i + 1 < len(path) and not lane.connector:  # a street lane into a junction
            conn = m.lanes[path[i + 1]]
            kind = int(m.control[conn.junction])
            if kind:
                stops.append((at + lane.length, kind, conn.signal_col, conn.junction, conn.length))
        at += lane.length
    xy = np.concatenate(parts)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))])
    return _Candidate(path, starts, xy, s, s0, v_des, size, stops, caps)


def _pad(rows: Sequence[Sequence[float]], fill: float, width: int | None = None) -> np.ndarray:
    w = max([len(r) for r in rows] + [width or 1])
    out = np.full((len(rows), w), fill, dtype=np.float64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _simulate(
    cands: Sequence[_Candidate], m: _Map
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arc length, speed and acceleration (STEPS, N) of candidates driven together (module
    docstring); ``(N, N)`` bool: vehicle j held vehicle i back at some step (i's leader within
    :data:`_LOOKAHEAD_M`, or in the junction i waited to enter at a stop sign); ``(N,)`` bool: the
    vehicle broke a rule (:func:`_broke_rules`)."""
    n = len(cands)
    ar = np.arange(n)
    half = np.array([0.5 * c.size[0] for c in cands])
    half_sum = half[:, None] + half[None, :]
    v_des = np.array([c.v_des for c in cands])
    lane_start = _pad([c.starts for c in cands], np.inf)
    path_lanes = _pad([c.lanes for c in cands], 0).astype(np.int64)
    offset = np.full((n, len(m.lanes)), -np.inf)
    for i, c in enumerate(cands):
        offset[i, c.lanes] = c.starts
    stop_s = _pad([[st[0] for st in c.stops] for c in cands], np.inf)
    kind = _pad([[st[1] for st in c.stops] for c in cands], 0).astype(np.int64)
    col = _pad([[st[2] for st in c.stops] for c in cands], -1).astype(np.int64)
    junc = _pad([[st[3] for st in c.stops] for c in cands], -1).astype(np.int64)
    box_end = stop_s + _pad([[st[4] for st in c.stops] for c in cands], 0.0) + half[:, None]
    cap_a = _pad([[cp[0] for cp in c.caps] for c in cands], np.inf)
    cap_b = _pad([[cp[1] for cp in c.caps] for c in cands], -np.inf)
    cap_v2 = _pad([[cp[2] for cp in c.caps] for c in cands], np.inf) ** 2
    has_caps = bool(np.isfinite(cap_a).any())
    is_signal, is_sign = kind == 1, kind == 2
    has_stops = bool((kind > 0).any())
    if m.signal_state.shape[1]:
        c_ = np.where(is_signal, col, 0)
        red = is_signal[None] & ~np.isin(m.signal_state, _GO_CODES)[:, c_]  # (T, N, M)
        caution = is_signal[None] & np.isin(m.signal_state, _CAUTION_CODES)[:, c_]
    else:
        red = caution = np.zeros((STEPS, *kind.shape), dtype=bool)
    committed = np.zeros(kind.shape, dtype=bool)
    released = np.zeros(kind.shape, dtype=bool)
    wait = np.zeros(kind.shape)
    infl = np.zeros((n, n), dtype=bool)
    sqrt_ab = 2.0 * math.sqrt(_A_MAX * _B_COMF)

    def desired(s: np.ndarray) -> np.ndarray:
        if not has_caps:
            return v_des
        ahead = np.maximum(cap_a - s[:, None], 0.0)
        caps = np.where(s[:, None] < cap_b, cap_v2 + (2.0 * _B_COMF) * ahead, np.inf)
        return np.minimum(v_des, np.sqrt(caps.min(axis=1)))

    def leader(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = (s[:, None] >= lane_start).sum(axis=1) - 1
        s_in = s - lane_start[ar, pos]
        on = offset[:, path_lanes[ar, pos]] + s_in[None, :]  # [i, j]: j's arc length on i's path
        gap = on - s[:, None]
        gap = np.where(gap > 1e-6, gap - half_sum, np.inf)  # self: exactly 0, not ahead
        j = gap.argmin(axis=1)
        g = gap[ar, j]
        return np.where(g < _LOOKAHEAD_M, g, np.inf), j

    def stop_gaps(s: np.ndarray, v: np.ndarray, t: int) -> np.ndarray:
        d_stop = stop_s - (s + half)[:, None] - _STOP_BEFORE_M
        before = d_stop > -_STOP_BEFORE_M
        committed[...] |= caution[t] & (d_stop * (2.0 * _SIGNAL_COMMIT_DECEL) < (v * v)[:, None])
        waiting = is_sign & ~released
        active = ((red[t] & ~committed) | waiting) & before
        near = waiting & (d_stop < 3.0) & (v[:, None] < 0.3)
        wait[...] = np.where(near, wait + DT_S, wait)
        ready = near & (wait >= _SIGN_WAIT_S)
        if ready.any():
            inside = released & (s[:, None] < box_end)
            busy: dict[int, list[int]] = {}
            for i, k in zip(*np.nonzero(inside), strict=True):
                busy.setdefault(int(junc[i, k]), []).append(int(i))
            for i, k in zip(*np.nonzero(ready), strict=True):
                jn = int(junc[i, k])
                if jn in busy:
                    infl[i, busy[jn]] = True
                else:
                    released[i, k] = True
                    busy[jn] = [int(i)]
                    active[i, k] = False
        return np.where(active, d_stop, np.inf).min(axis=1)

    s = np.array([c.s0 for c in cands])
    v = desired(s)
    if has_stops:  # start slow enough to stop for a light that is not green or a sign
        d_stop = stop_s - (s + half)[:, None] - _STOP_BEFORE_M
        hold = (red[0] | is_sign) & (d_stop > -_STOP_BEFORE_M)
        d0 = np.where(hold, d_stop, np.inf).min(axis=1)
        v = np.minimum(v, np.sqrt(2.0 * _B_COMF * np.maximum(d0 - _STOP_JAM_M, 0.0)))
    gap0, j0 = leader(s)
    v = np.minimum(v, v[j0] + np.sqrt(2.0 * _B_COMF * np.maximum(gap0 - _JAM_M, 0.0)))
    a = np.zeros(n)
    out_s, out_v, out_a = np.empty((STEPS, n)), np.empty((STEPS, n)), np.empty((STEPS, n))
    for t in range(STEPS):
        gap, j = leader(s)
        v0 = np.maximum(desired(s), 0.1)
        s_lead = np.maximum(_JAM_M + v * _HEADWAY_S + v * (v - v[j]) / sqrt_ab, 0.0)
        inter = (s_lead / np.maximum(gap, 0.05)) ** 2
        infl[ar, j] |= np.isfinite(gap)
        if has_stops:
            g_stop = stop_gaps(s, v, t)
            s_stop = _STOP_JAM_M + v * _HEADWAY_S + v * v / sqrt_ab
            inter = np.maximum(inter, (s_stop / np.maximum(g_stop, 0.05)) ** 2)
        a_idm = _A_MAX * (1.0 - (v / v0) ** 4 - inter)
        a = np.clip(
            a_idm, np.maximum(a - _JERK_DOWN * DT_S, -_A_EMERGENCY), np.minimum(a + _JERK_UP * DT_S, _A_MAX)
        )
        v_new = np.maximum(v + a * DT_S, 0.0)
        out_s[t], out_v[t], out_a[t] = s, v, a
        s = s + 0.5 * (v + v_new) * DT_S
        v = v_new
    return out_s, out_v, out_a, infl, _broke_rules(out_s, out_v, stop_s, kind, col, m.signal_state)


def _broke_rules(
    s: np.ndarray, v: np.ndarray, stop_s: np.ndarray, kind: np.ndarray, col: np.ndarray, signal: np.ndarray
) -> np.ndarray:
    """(N,) bool: the vehicle's centre crosses a signal's stop line on red (red at the step before
    or after too) or less than :data:`_PAST_SIGNAL_M` before its log ends (then its log does not
    show which movement's signal it obeyed), or a stop sign's stop point (1 m before the line) from
    the current step on without having come below 0.5 m/s since the current step (the evaluation's
    rules, which see the log from the current step on)."""
    broke = np.zeros(s.shape[1], dtype=bool)
    for i, k in zip(*np.nonzero(kind), strict=True):
        point = stop_s[i, k] - (_STOP_BEFORE_M if kind[i, k] == 2 else 0.0)
        t = int(np.searchsorted(s[:, i], point))  # first step at or past it (s never decreases)
        if not 0 < t < STEPS:
            continue
        if kind[i, k] == 1:
            red = np.isin(signal[max(t - 1, 0) : t + 2, col[i, k]], _RED_CODES)
            broke[i] |= bool((red[:-1] & red[1:]).any()) or s[-1, i] - point < _PAST_SIGNAL_M
        elif t > CURRENT:
            broke[i] |= not bool((v[CURRENT : t + 1, i] < 0.5).any())
    return broke


def _poses(c: _Candidate, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (T, 2) and headings (T,) at arc lengths ``s`` along a candidate's path."""
    xy = np.stack([np.interp(s, c.s, c.xy[:, 0]), np.interp(s, c.s, c.xy[:, 1])], axis=1)
    seg = np.diff(c.xy, axis=0)
    ang = np.unwrap(np.arctan2(seg[:, 1], seg[:, 0]))
    mid = 0.5 * (c.s[:-1] + c.s[1:])
    yaw = np.interp(s, mid, ang)
    return xy, (yaw + math.pi) % (2 * math.pi) - math.pi


def _overlaps(xy: np.ndarray, yaw: np.ndarray, length: np.ndarray, width: np.ndarray) -> np.ndarray:
    """(N, N) bool: the boxes (grown by CLEARANCE_M) of i and j overlap at some step; xy (T, N, 2)."""
    n = xy.shape[1]
    hl, hw = 0.5 * length + CLEARANCE_M, 0.5 * width + CLEARANCE_M
    radius = np.hypot(hl, hw)
    d = xy[:, None, :, :] - xy[:, :, None, :]  # [t, i, j] = p_j - p_i
    close = (np.hypot(d[..., 0], d[..., 1]) < radius[:, None] + radius[None, :]).any(axis=0)
    close[np.arange(n), np.arange(n)] = False
    out = np.zeros((n, n), dtype=bool)
    ii, jj = np.nonzero(np.triu(close))
    if not len(ii):
        return out
    dx, dy = d[:, ii, jj, 0], d[:, ii, jj, 1]
    ci, si, cj, sj = np.cos(yaw[:, ii]), np.sin(yaw[:, ii]), np.cos(yaw[:, jj]), np.sin(yaw[:, jj])
    rc, rs = np.abs(ci * cj + si * sj), np.abs(si * cj - ci * sj)
    ai, bi, aj, bj = hl[ii], hw[ii], hl[jj], hw[jj]
    sep = np.abs(dx * ci + dy * si) > ai + aj * rc + bj * rs
    sep |= np.abs(dy * ci - dx * si) > bi + aj * rs + bj * rc
    sep |= np.abs(dx * cj + dy * sj) > aj + ai * rc + bi * rs
    sep |= np.abs(dy * cj - dx * sj) > bj + ai * rs + bi * rc
    hit = (~sep).any(axis=0)
    out[ii[hit], jj[hit]] = True
    return out | out.T


@dataclass
class _Vehicles:
    xy: np.ndarray
    """(T, N, 2)"""
    yaw: np.ndarray
    speed: np.ndarray
    size: list[tuple[float, float, float]]
    valid: np.ndarray | None = None
    """(T, N) observed steps; None: every step."""
    kind: int = _VEHICLE


def _parked(
    m: _Map, rng: np.random.Generator, count: int, exact: bool = True, beside: _Vehicles | None = None
) -> _Vehicles:
    """``count`` parked vehicles (as many as fit unless ``exact``), clear of those ``beside``."""
    weights = np.array([max(p[2] - 20.0, 0.0) for p in m.parking])
    placed: list[tuple[np.ndarray, float, tuple[float, float, float]]] = []
    if beside is not None:
        placed = [(beside.xy[0, i], 0.0, beside.size[i]) for i in range(beside.xy.shape[1])]
        count += len(placed)
    tries = 0
    while len(placed) < count and tries < 60 * max(count, 1) and weights.sum() > 0:
        tries += 1
        base, d, usable = m.parking[int(rng.choice(len(m.parking), p=weights / weights.sum()))]
        size = _vehicle_size(rng)
        t = rng.uniform(6.0 + 0.5 * size[0], usable - 6.0 - 0.5 * size[0])
        xy = base + t * _U[d] + (KERB_M - 0.25 - 0.5 * size[1]) * _R[d]
        if any(np.linalg.norm(xy - p) < 0.5 * (size[0] + s[0]) + 1.0 for p, _, s in placed):
            continue
        if len(m.driveway_xy) and np.linalg.norm(m.driveway_xy - xy, axis=1).min() < 5.0 + 0.5 * size[0]:
            continue
        placed.append((xy, math.atan2(_U[d][1], _U[d][0]), size))
    if len(placed) < count and exact:
        raise ValueError(f"city_scenario: room for only {len(placed)} of {count} parked vehicles")
    if beside is not None:
        placed = placed[beside.xy.shape[1] :]
    n = len(placed)
    xy = np.zeros((STEPS, n, 2))
    yaw = np.zeros((STEPS, n))
    for i, (p, h, _) in enumerate(placed):
        xy[:, i] = p
        yaw[:, i] = h
    return _Vehicles(xy, yaw, np.zeros((STEPS, n)), [p[2] for p in placed])


def _moving(m: _Map, rng: np.random.Generator, count: int, parked: _Vehicles) -> _Vehicles:
    """``count`` vehicles driving the map together (module docstring)."""
    lengths = np.array([m.lanes[i].length for i in m.street_lanes])
    weights = lengths / lengths.sum()
    kept: list[_Candidate] = []
    n_parked = parked.xy.shape[1]

    def valid(
        cands: list[_Candidate], s: np.ndarray, a: np.ndarray, broke: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        poses = [_poses(c, s[:, i]) for i, c in enumerate(cands)]
        xy = np.stack([p[0] for p in poses], axis=1)
        yaw = np.stack([p[1] for p in poses], axis=1)
        ok = (np.linalg.norm(xy[-1] - xy[CURRENT], axis=1) >= MIN_TRAVEL_M) & ~broke
        ok &= a.min(axis=0) >= -HARSH_BRAKE_MPS2
        ok &= np.array([s[-1, i] + 0.5 * c.size[0] <= c.s[-1] for i, c in enumerate(cands)])
        all_xy = np.concatenate([xy, parked.xy], axis=1)
        all_yaw = np.concatenate([yaw, parked.yaw], axis=1)
        sizes = [c.size for c in cands] + parked.size
        hit = _overlaps(all_xy, all_yaw, np.array([z[0] for z in sizes]), np.array([z[1] for z in sizes]))
        return ok, hit, np.concatenate([xy, yaw[..., None]], axis=2)

    for _ in range(40):
        need = count - len(kept)
        fresh: list[_Candidate] = []
        while len(fresh) < need + max(2, need // 2):
            c = _candidate(m, rng, weights)
            if c is not None:
                fresh.append(c)
        cands = kept + fresh
        s, v, a, held, broke = _simulate(cands, m)
        ok, hit, pose = valid(cands, s, a, broke)
        chosen: list[int] = []
        for i in range(len(cands)):
            if len(chosen) == count:
                break
            if ok[i] and not hit[i, chosen].any() and not hit[i, len(cands) :].any():
                chosen.append(i)
        kept = [cands[i] for i in chosen]
        if len(kept) < count:
            continue
        dropped = np.setdiff1d(np.arange(len(cands)), chosen)
        if not held[np.ix_(np.array(chosen), dropped)].any():  # none held back by a dropped one
            return _Vehicles(pose[:, chosen, :2], pose[:, chosen, 2], v[:, chosen], [c.size for c in kept])
        s, v, a, _, broke = _simulate(kept, m)  # the kept ones alone: what the log holds
        ok, hit, pose = valid(kept, s, a, broke)
        good = ok & ~hit[:count].any(axis=1)
        if good.all():
            return _Vehicles(pose[..., :2], pose[..., 2], v, [c.size for c in kept])
        kept = [c for c, g in zip(kept, good, strict=True) if g]
    raise ValueError(
        f"city_scenario: could not place {count} moving vehicles without overlaps on this map ({n_parked}"
        " parked); ask for fewer vehicles or a bigger map"
    )


# ------------------------------------------------------------------------ background traffic


@dataclass(frozen=True)
class Background:
    """Logged objects of a scenario besides its moving vehicles and its ``parked`` ones (module
    docstring, *Background traffic*): ``pedestrians`` and ``cyclists`` on the sidewalks, up to
    ``extra_parked`` more parked vehicles (as many as the parking strips hold), and the share of
    parked vehicles, pedestrians, cyclists and moving vehicles past the first eight tracks that are
    observed over one window of the log only (``occluded_share``, in [0, 1])."""

    pedestrians: int = 0
    cyclists: int = 0
    extra_parked: int = 0
    occluded_share: float = 0.0

    def __post_init__(self) -> None:
        """Counts are non-negative, the share a fraction."""
        if (
            min(self.pedestrians, self.cyclists, self.extra_parked) < 0
            or not 0.0 <= self.occluded_share <= 1.0
        ):
            raise ValueError(f"Background: need counts >= 0 and 0 <= occluded_share <= 1, got {self}")


@dataclass(frozen=True)
class TrafficMix:
    """Inclusive ranges a corpus draws each scenario's traffic from (:func:`write_corpus`)."""

    vehicles: tuple[int, int] = (3, 32)
    parked: int = 4
    extra_parked: tuple[int, int] = (0, 0)
    pedestrians: tuple[int, int] = (0, 0)
    cyclists: tuple[int, int] = (0, 0)
    occluded_share: float = 0.0

    def background(self, rng: np.random.Generator) -> Background:
        """One scenario's :class:`Background`, drawn uniformly from the ranges."""
        return Background(
            pedestrians=int(rng.integers(self.pedestrians[0], self.pedestrians[1] + 1)),
            cyclists=int(rng.integers(self.cyclists[0], self.cyclists[1] + 1)),
            extra_parked=int(rng.integers(self.extra_parked[0], self.extra_parked[1] + 1)),
            occluded_share=self.occluded_share,
        )


WOMD_MIX = TrafficMix(
    vehicles=(3, 32), parked=4, extra_parked=(6, 40), pedestrians=(0, 44), cyclists=(0, 8), occluded_share=0.8
)
"""WOMD's make-up of logged traffic (module docstring, *Background traffic*; checked by
``tests/scenes/test_womd_synthetic.py``)."""

_OCCLUDE_FROM = 8
"""Moving vehicles from this track on may be occluded (the SDC and the tracks to predict never are)."""
_MIN_WINDOW = 10


def _windows(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    """(T, n) observed steps: every step, or for ``share`` of the tracks one window of 10 steps or
    more (appearing later, disappearing earlier, or both)."""
    valid = np.ones((STEPS, n), dtype=bool)
    for i in np.flatnonzero(rng.random(n) < share):
        start = int(rng.integers(0, STEPS - _MIN_WINDOW + 1))
        stop = int(rng.integers(start + _MIN_WINDOW, STEPS + 1))
        valid[:, i] = False
        valid[start:stop, i] = True
    return valid


def _sidewalk(m: _Map, rng: np.random.Generator, count: int, cyclist: bool) -> _Vehicles:
    """``count`` pedestrians (or cyclists) moving along the sidewalks beyond the kerbs, observed while
    on their block's side (they leave the view past its end)."""
    usable = np.array([p[2] for p in m.parking])
    xy = np.zeros((STEPS, count, 2))
    yaw = np.zeros((STEPS, count))
    speed = np.zeros((STEPS, count))
    valid = np.zeros((STEPS, count), dtype=bool)
    sizes: list[tuple[float, float, float]] = []
    t = np.arange(STEPS) * DT_S
    for i in range(count):
        base, d, length = m.parking[int(rng.choice(len(m.parking), p=usable / usable.sum()))]
        if cyclist:
            off, v = KERB_M + rng.uniform(0.8, 1.4), rng.uniform(3.0, 7.0)
            sizes.append(
                (float(rng.uniform(1.6, 2.0)), float(rng.uniform(0.5, 0.8)), float(rng.uniform(1.5, 1.9)))
            )
        else:
            off, v = KERB_M + rng.uniform(1.0, 3.5), 0.0 if rng.random() < 0.25 else rng.uniform(0.8, 1.7)
            sizes.append(
                (float(rng.uniform(0.4, 1.0)), float(rng.uniform(0.4, 1.0)), float(rng.uniform(1.5, 1.9)))
            )
        sign = 1.0 if rng.random() < 0.5 else -1.0
        along = rng.uniform(0.0, length) + sign * v * (t - CURRENT * DT_S)
        xy[:, i] = base + along[:, None] * _U[d] + off * _R[d]
        yaw[:, i] = math.atan2(sign * _U[d][1], sign * _U[d][0])
        speed[:, i] = v
        valid[:, i] = (along >= 0.0) & (along <= length)
    return _Vehicles(xy, yaw, speed, sizes, valid, _CYCLIST if cyclist else _PEDESTRIAN)


def _background(m: _Map, seed: int, bg: Background, moving: _Vehicles, parked: _Vehicles) -> list[_Vehicles]:
    """The scenario's moving and parked vehicles with their observed windows, then its pedestrians and
    cyclists; drawn from their own generator, so a scenario without background is unchanged."""
    if bg == Background():
        return [moving, parked]
    rng = np.random.default_rng([seed, 1])
    if bg.extra_parked:  # as many more as fit, clear of the parked ones and every moving vehicle
        more = _parked(m, rng, bg.extra_parked, exact=False, beside=parked)
        n_mov, n_more = moving.xy.shape[1], more.xy.shape[1]
        sizes = moving.size + more.size
        hit = _overlaps(
            np.concatenate([moving.xy, more.xy], axis=1),
            np.concatenate([moving.yaw, more.yaw], axis=1),
            np.array([z[0] for z in sizes]),
            np.array([z[1] for z in sizes]),
        )[n_mov:, :n_mov].any(axis=1)
        keep = np.flatnonzero(~hit)
        parked = _Vehicles(
            np.concatenate([parked.xy, more.xy[:, keep]], axis=1),
            np.concatenate([parked.yaw, more.yaw[:, keep]], axis=1),
            np.zeros((STEPS, parked.xy.shape[1] + len(keep))),
            parked.size + [more.size[i] for i in keep],
        )
        del n_more
    n_mov = moving.xy.shape[1]
    mov_valid = _windows(rng, n_mov, bg.occluded_share)
    mov_valid[:, : min(_OCCLUDE_FROM, n_mov)] = True
    moving = _Vehicles(moving.xy, moving.yaw, moving.speed, moving.size, mov_valid)
    parked = _Vehicles(
        parked.xy, parked.yaw, parked.speed, parked.size, _windows(rng, parked.xy.shape[1], bg.occluded_share)
    )
    groups = [moving, parked]
    for count, cyclist in ((bg.pedestrians, False), (bg.cyclists, True)):
        if count:
            g = _sidewalk(m, rng, count, cyclist)
            assert g.valid is not None
            g.valid &= _windows(rng, count, bg.occluded_share)
            groups.append(g)
    return groups


# ------------------------------------------------------------------------------------ encoding


def _encode(scenario_id: str, m: _Map, groups: Sequence[_Vehicles], angle: float, shift: np.ndarray) -> bytes:
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, s], [-s, c]])  # row vectors: p @ rot = R p
    out = [_ld(5, scenario_id.encode("utf-8"))]
    out.append(b"".join(_f64(1, 0.1 * k) for k in range(STEPS)))
    out.append(_vi(10, CURRENT) + _vi(6, 0))
    track_id = 1
    for group in groups:
        for i in range(group.xy.shape[1]):
            xy = group.xy[:, i] @ rot + shift
            yaw = (group.yaw[:, i] + angle + math.pi) % (2 * math.pi) - math.pi
            vel = group.speed[:, i, None] * np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
            valid = None if group.valid is None else group.valid[:, i]
            body = _vi(1, track_id) + _vi(2, group.kind) + _states(xy, yaw, vel, group.size[i], valid)
            out.append(_ld(2, body))
            track_id += 1
    for k in range(min(8, groups[0].xy.shape[1])):
        out.append(_ld(11, _vi(1, k) + _vi(2, 1)))
    # every map point in one go: (field number, points) per polyline, in the order used below
    polys: list[tuple[int, np.ndarray]] = [(8, lane.xy) for lane in m.lanes]
    polys += [(2, xy) for xy, _ in m.lines] + [(2, xy) for xy in m.edges]
    polys += [(2, pos[None]) for _, pos in m.stop_signs]
    polys += [(1, xy) for xy in (*m.crosswalks, *m.driveways)]
    polys += [(3, m.lanes[li].xy[:1]) for li in m.signal_lanes]
    sizes = np.array([len(xy) for _, xy in polys])
    rec = np.zeros(int(sizes.sum()), _POINT)
    rec["key"] = np.repeat(np.array([f << 3 | 2 for f, _ in polys], dtype=np.uint8), sizes)
    rec["len"] = _POINT.itemsize - 2
    rec["kx"], rec["ky"], rec["kz"] = 0x09, 0x11, 0x19
    xy_all = np.concatenate([xy for _, xy in polys]) @ rot + shift
    rec["x"], rec["y"] = xy_all[:, 0], xy_all[:, 1]
    raw = rec.tobytes()
    ends = np.cumsum(sizes) * _POINT.itemsize
    chunks = [raw[a:b] for a, b in zip((0, *ends[:-1].tolist()), ends.tolist(), strict=True)]
    pts = iter(chunks)
    # map features: lanes get ids 1.., then lines, edges, signs, crosswalks, driveways
    n_lanes, n_lines = len(m.lanes), len(m.lines)
    line0 = 1 + n_lanes
    for i, lane in enumerate(m.lanes):
        last = len(lane.xy) - 1
        parts = [_f64(1, SPEED_LIMIT_MPH), _vi(2, _SURFACE_STREET), next(pts)]
        parts.append(_packed(9, [1 + e for e in lane.entries]))
        parts.append(_packed(10, [1 + e for e in lane.exits]))
        for fieldno, nb in ((11, lane.left_nb), (12, lane.right_nb)):
            if nb >= 0:
                other = len(m.lanes[nb].xy) - 1
                parts.append(
                    _ld(fieldno, _vi(1, 1 + nb) + _vi(2, 0) + _vi(3, last) + _vi(4, 0) + _vi(5, other))
                )
        for fieldno, bound in ((13, lane.left_line), (14, lane.right_line)):
            if bound is not None:
                parts.append(
                    _ld(fieldno, _vi(1, 0) + _vi(2, last) + _vi(3, line0 + bound[0]) + _vi(4, bound[1]))
                )
        out.append(_ld(8, _vi(1, 1 + i) + _ld(3, b"".join(parts))))
    for i, (_, kind) in enumerate(m.lines):
        out.append(_ld(8, _vi(1, line0 + i) + _ld(4, _vi(1, kind) + next(pts))))
    fid = line0 + n_lines
    for _ in m.edges:
        out.append(_ld(8, _vi(1, fid) + _ld(5, _vi(1, _EDGE_BOUNDARY) + next(pts))))
        fid += 1
    for lanes, _ in m.stop_signs:
        body = b"".join(_vi(1, 1 + li) for li in lanes) + next(pts)
        out.append(_ld(8, _vi(1, fid) + _ld(7, body)))
        fid += 1
    for fieldno, polygons in ((8, m.crosswalks), (10, m.driveways)):
        for _ in polygons:
            out.append(_ld(8, _vi(1, fid) + _ld(fieldno, next(pts))))
            fid += 1
    if m.signal_lanes:
        # one DynamicMapState per step: every signalled connector's state, its stop point its start
        template, state_at = bytearray(), []
        for li in m.signal_lanes:
            head = _vi(1, 1 + li) + b"\x10"
            tail = next(pts)
            template += b"\x0a" + _varint(len(head) + 1 + len(tail)) + head
            state_at.append(len(template))
            template += b"\x00" + tail
        rows = np.tile(np.frombuffer(bytes(template), dtype=np.uint8), (STEPS, 1))
        rows[:, state_at] = m.signal_state.astype(np.uint8)
        step_head = np.frombuffer(_varint(7 << 3 | 2) + _varint(len(template)), dtype=np.uint8)
        out.append(np.concatenate([np.tile(step_head, (STEPS, 1)), rows], axis=1).tobytes())
    return b"".join(out)


def _city_bytes(
    scenario_id: str,
    seed: int,
    target_road_points: int,
    num_vehicles: int,
    parked: int,
    signals: bool,
    driveways: bool,
    background: Background = Background(),
) -> bytes:
    if target_road_points < 1 or num_vehicles < 1 or parked < 0:
        raise ValueError(
            f"city_scenario: need target_road_points >= 1, num_vehicles >= 1, parked >= 0; got"
            f" {target_road_points}, {num_vehicles}, {parked}"
        )
    rng = np.random.default_rng(seed)
    layout = choose_layout(target_road_points, rng)
    m = _build_map(layout, rng, signals, driveways)
    standing = _parked(m, rng, parked)
    moving = _moving(m, rng, num_vehicles, standing)
    angle = float(rng.uniform(-math.pi, math.pi))
    shift = rng.uniform(-8000.0, 8000.0, size=2)
    groups = _background(m, seed, background, moving, standing)
    return _encode(scenario_id, m, groups, angle, shift)


def city_scenario(
    scenario_id: str,
    seed: int,
    target_road_points: int = 5000,
    num_vehicles: int = 16,
    parked: int = 0,
    signals: bool = True,
    driveways: bool = True,
    background: Background = Background(),
) -> Scenario:
    """A city-grid WOMD scenario (module docstring), the same for the same arguments; ``background``
    adds pedestrians, cyclists, more parked vehicles and partly observed tracks.

    Raises:
        ValueError: for a non-positive target or vehicle count, or a map too small for the vehicles.
    """
    args = (target_road_points, num_vehicles, parked, signals, driveways, background)
    return Scenario.FromString(_city_bytes(scenario_id, seed, *args))


# -------------------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class _Shard:
    path: str
    ids: tuple[str, ...]
    seeds: tuple[int, ...]
    targets: tuple[int, ...]
    vehicles: tuple[int, ...]
    parked: int
    backgrounds: tuple[Background, ...]


def fitting_scenario(
    sid: str, seed: int, target: int, vehicles: int, parked: int, background: Background = Background()
) -> bytes:
    """A corpus scenario's serialized ``Scenario``: with one moving vehicle fewer each time the map is
    too small for them."""
    while True:
        try:
            return _city_bytes(sid, seed, target, vehicles, parked, True, True, background)
        except ValueError:
            if vehicles <= 1:
                raise
            vehicles -= 1


def _write_shard(shard: _Shard) -> str:
    rows = zip(shard.ids, shard.seeds, shard.targets, shard.vehicles, shard.backgrounds, strict=True)
    records = (fitting_scenario(sid, seed, target, n, shard.parked, bg) for sid, seed, target, n, bg in rows)
    write_records(shard.path, records)
    return shard.path


def write_corpus(
    out_dir: Path,
    num_scenarios: int,
    seed: int = 0,
    road_points: tuple[int, int] = (2000, 8000),
    vehicles: tuple[int, int] = (3, 32),
    scenarios_per_shard: int = 100,
    parked: int = 4,
    workers: int | None = None,
    mix: TrafficMix | None = None,
) -> list[Path]:
    """Write ``num_scenarios`` city scenarios as TFRecord shards
    ``out_dir/synthetic.tfrecord-KKKKK-of-NNNNN`` (``scenarios_per_shard`` each); return their paths.

    Scenario ``i`` is ``synthetic-{seed}-{i:06d}``; its road-point target and moving-vehicle count
    are drawn uniformly from the inclusive ranges ``road_points`` and ``vehicles``, and its own seed,
    by a numpy Generator seeded with ``seed``, so a corpus is the same for the same arguments. A map
    too small for its vehicles gets one vehicle fewer until they fit (never with targets of 2,000
    points or more and up to 32 vehicles in our runs), so every scenario is written.
    Shards are written in ``workers`` processes (default: one per CPU), each atomically.
    A ``mix`` (e.g. :data:`WOMD_MIX`) replaces ``vehicles`` and ``parked`` and adds each scenario's
    :class:`Background`, drawn after everything else (the same corpus seed gives the same maps).
    """
    if num_scenarios < 1 or scenarios_per_shard < 1:
        raise ValueError(
            "write_corpus: need num_scenarios >= 1 and scenarios_per_shard >= 1, got"
            f" {num_scenarios}, {scenarios_per_shard}"
        )
    if mix is not None:
        vehicles, parked = mix.vehicles, mix.parked
    if not (1 <= road_points[0] <= road_points[1] and 1 <= vehicles[0] <= vehicles[1]):
        raise ValueError(f"write_corpus: bad ranges road_points={road_points}, vehicles={vehicles}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    targets = rng.integers(road_points[0], road_points[1] + 1, size=num_scenarios)
    counts = rng.integers(vehicles[0], vehicles[1] + 1, size=num_scenarios)
    seeds = rng.integers(0, 2**63 - 1, size=num_scenarios)
    backgrounds = [mix.background(rng) if mix is not None else Background() for _ in range(num_scenarios)]
    n_shards = math.ceil(num_scenarios / scenarios_per_shard)
    shards = []
    for k in range(n_shards):
        part = slice(k * scenarios_per_shard, min((k + 1) * scenarios_per_shard, num_scenarios))
        idx = range(num_scenarios)[part]
        shards.append(
            _Shard(
                path=str(out_dir / f"synthetic.tfrecord-{k:05d}-of-{n_shards:05d}"),
                ids=tuple(f"synthetic-{seed}-{i:06d}" for i in idx),
                seeds=tuple(int(x) for x in seeds[part]),
                targets=tuple(int(x) for x in targets[part]),
                vehicles=tuple(int(x) for x in counts[part]),
                parked=parked,
                backgrounds=tuple(backgrounds[part]),
            )
        )
    n_workers = min(workers or os.cpu_count() or 1, n_shards)
    if n_workers <= 1:
        paths = [_write_shard(s) for s in shards]
    else:
        with ProcessPoolExecutor(n_workers) as pool:
            paths = list(pool.map(_write_shard, shards))
    return [Path(p) for p in paths]
