"""Procedural road generators: straight, curved, intersection, T-junction, roundabout and merge.

Each generator is a pure function ``make_<kind>(params, rng) -> RoadGraph``; its frozen params
dataclass documents every field with its unit and the range the scene library samples it from
(``sample_params``); ``rng`` only draws the small jitter a params field names (junction arm angles).

Conventions shared by every generator (metres, scene frame, x east, y north):

- right-hand traffic; lane centres are polylines in driving direction with points every
  ``point_spacing_m`` (about 1 m); lanes meet exactly end-to-start where they are connected, and
  ``lane_exit``/``lane_entry`` list each connection from both sides;
- road lines: ``SOLID_DOUBLE_YELLOW`` between directions, ``BROKEN_SINGLE_WHITE`` between lanes of
  one direction;
- road edges (``BOUNDARY``) run ``shoulder_m`` outside the outer lane boundaries and are oriented
  with the road on their left (the WOMD / WOSAC counter-clockwise convention), so a point right
  of an edge is off-road;
- the drivable area is the union of lane footprints (within half a lane width of a lane centre):
  junctions carry a connector lane for every movement, and junction corner edges are the connector
  curves offset outwards, so no edge ever cuts a lane;
- the whole scene lies within about +-130 m of the origin.

Curves are built densely (``Curve``: points and unit tangents), offset exactly along their
normals and only then resampled to the output spacing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import numpy as np

from scenefactory.errors import UserError
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType

_DENSE_STEP_M = 0.1
_MAX_ARC_LENGTH_M = 180.0  # curved road: longest arc, keeps the scene within +-130 m
_MIN_MERGE_TAIL_M = 30.0  # merge: main road left after the ramp has merged
_MIN_RING_GAP_DEG = 5.0  # roundabout: ring arc kept between one arm's entry and the next exit

# ------------------------------------------------------------------------------------- parameters


def _field(default: Any, lo: float, hi: float, *, sample: bool = True) -> Any:
    """A params field valid in ``[lo, hi]``; ``sample`` says whether the library draws it from that range."""
    return field(default=default, metadata={"range": (lo, hi), "sample": sample})


def _validate(params: Any) -> None:
    """Check every field against its declared range and type; raise ``UserError`` naming the field."""
    name = type(params).__name__
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        lo, hi = f.metadata["range"]
        is_int = isinstance(f.default, int)
        ok_type = isinstance(value, int) if is_int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or not math.isfinite(value):
            kind = "an integer" if is_int else "a finite number"
            raise UserError(f"{name}.{f.name} must be {kind}, got {value!r}")
        if not lo <= value <= hi:
            raise UserError(f"{name}.{f.name} = {value!r} is outside its valid range [{lo}, {hi}]")


P = TypeVar("P")


def sampled_values(cls: type, rng: np.random.Generator, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Draw every sampled field of params class ``cls`` from its range (integers inclusive), by name."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata["sample"] or f.name in skip:
            continue
        lo, hi = f.metadata["range"]
        is_int = isinstance(f.default, int)
        values[f.name] = int(rng.integers(lo, hi + 1)) if is_int else float(rng.uniform(lo, hi))
    return values


def sample_fields(cls: type[P], rng: np.random.Generator) -> P:
    """Params of class ``cls`` with every sampled field drawn from its range, defaults elsewhere."""
    return cls(**sampled_values(cls, rng))


@dataclass(frozen=True)
class StraightParams:
    """Two-way straight road along +x, centred on the origin.

    Attributes:
        length_m: road length, m; sampled from [150, 250].
        lanes_per_direction: lanes each way; sampled from [1, 3].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    length_m: float = _field(200.0, 150.0, 250.0)
    lanes_per_direction: int = _field(2, 1, 3)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges."""
        _validate(self)


@dataclass(frozen=True)
class CurvedParams:
    """Two-way road: a straight lead-in, a left-turning circular arc, a straight lead-out; centred.

    The two straight leads share equally what the arc leaves of ``length_m``.

    Attributes:
        length_m: total length of the road centre line, m; sampled from [170, 230].
        radius_m: arc radius of the road centre line, m; sampled from [50, 200].
        turn_deg: turning angle of the arc, degrees; sampled from [45, 120] with at most
            ``min(180 m, length_m)`` of arc (so larger turns for tighter radii).
        lanes_per_direction: lanes each way; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    length_m: float = _field(200.0, 170.0, 230.0)
    radius_m: float = _field(100.0, 50.0, 200.0)
    turn_deg: float = _field(90.0, 45.0, 120.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and the arc-length limit."""
        _validate(self)
        arc_m = self.radius_m * math.radians(self.turn_deg)
        if arc_m > min(_MAX_ARC_LENGTH_M, self.length_m) + 1e-9:
            raise UserError(
                f"CurvedParams: radius_m * turn = {arc_m:.1f} m of arc exceeds min({_MAX_ARC_LENGTH_M} m, "
                "length_m) (the road must hold the arc and fit in +-130 m); lower radius_m or turn_deg"
            )

    @classmethod
    def sample(cls, rng: np.random.Generator) -> CurvedParams:
        """Sample fields; the turn is drawn from [45, min(120, min(180 m, length) / radius)] degrees."""
        values = sampled_values(cls, rng, skip=("turn_deg",))
        hi = min(120.0, math.degrees(min(_MAX_ARC_LENGTH_M, values["length_m"]) / values["radius_m"]))
        return cls(**values, turn_deg=float(rng.uniform(45.0, hi)))


@dataclass(frozen=True)
class IntersectionParams:
    """Four-way junction of two-way arms, with connector lanes for every left/straight/right movement.

    Attributes:
        arm_length_m: length of each arm from the junction mouth outwards, m; sampled from [50, 70].
        lanes_per_direction: lanes each way on every arm; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        corner_radius_m: radius of the kerb at each corner, m; sampled from [5, 9].
        arm_angle_jitter_deg: each arm's direction is 90 deg * k plus U(-j, j) drawn from ``rng``,
            degrees, in [0, 15].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    corner_radius_m: float = _field(7.0, 5.0, 9.0)
    arm_angle_jitter_deg: float = _field(10.0, 0.0, 15.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges."""
        _validate(self)


@dataclass(frozen=True)
class TJunctionParams:
    """Three-arm junction: a through road along x and a side arm towards +y.

    Attributes:
        arm_length_m: length of each arm from the junction mouth outwards, m; sampled from [50, 70].
        lanes_per_direction: lanes each way on every arm; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        corner_radius_m: radius of the kerb at each corner, m; sampled from [5, 9].
        arm_angle_jitter_deg: the side arm points at 90 deg plus U(-j, j) drawn from ``rng``,
            degrees, in [0, 25].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    corner_radius_m: float = _field(7.0, 5.0, 9.0)
    arm_angle_jitter_deg: float = _field(15.0, 0.0, 25.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges."""
        _validate(self)


@dataclass(frozen=True)
class RoundaboutParams:
    """Single-lane roundabout (counter-clockwise) with 3 or 4 two-way single-lane arms.

    Entry and exit lanes are circular arcs tangent to the arm lane and to the ring, so the arm
    mouth distance follows from ``ring_radius_m`` and ``entry_radius_m``.

    Attributes:
        ring_radius_m: radius of the ring lane centre, m; sampled from [15, 25].
        num_arms: number of arms; sampled from [3, 4].
        entry_radius_m: radius of the entry/exit arcs, m; sampled from [8, 11].
        arm_length_m: length of each arm, m; sampled from [50, 70].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        arm_angle_jitter_deg: arm k points at 360 deg * k / num_arms plus U(-j, j) drawn from
            ``rng``, degrees, in [0, 8].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    ring_radius_m: float = _field(20.0, 15.0, 25.0)
    num_arms: int = _field(4, 3, 4)
    entry_radius_m: float = _field(10.0, 8.0, 11.0)
    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    arm_angle_jitter_deg: float = _field(8.0, 0.0, 8.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and that entries and exits of neighbouring arms leave ring between them."""
        _validate(self)
        _, _, alpha = _roundabout_mouth(self)
        spare = 360.0 / self.num_arms - 2.0 * self.arm_angle_jitter_deg - 2.0 * math.degrees(alpha)
        if spare < _MIN_RING_GAP_DEG:
            raise UserError(
                f"RoundaboutParams: arms too close for their entries ({spare:.1f} deg of ring left between "
                f"arms, need {_MIN_RING_GAP_DEG}); raise ring_radius_m or lower entry_radius_m or num_arms"
            )


@dataclass(frozen=True)
class MergeParams:
    """One-way highway along +x with an on-ramp from the lower left joining the rightmost lane.

    The ramp rises at ``ramp_angle_deg``, bends parallel to the main road as an acceleration lane
    right of the rightmost lane, then tapers (a smoothstep) into the rightmost lane, whose
    downstream segment it exits into.

    Attributes:
        main_length_m: main road length, m; sampled from [200, 240].
        num_main_lanes: main lanes; sampled from [2, 3].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        ramp_angle_deg: approach angle of the ramp to the main road, degrees; sampled from [15, 25].
        ramp_drop_m: lateral offset of the ramp start below the acceleration lane, m; sampled from [8, 12].
        accel_length_m: length of the parallel acceleration lane, m; sampled from [20, 40].
        taper_length_m: length of the taper into the rightmost lane, m; sampled from [40, 60].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    main_length_m: float = _field(220.0, 200.0, 240.0)
    num_main_lanes: int = _field(3, 2, 3)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    ramp_angle_deg: float = _field(20.0, 15.0, 25.0)
    ramp_drop_m: float = _field(10.0, 8.0, 12.0)
    accel_length_m: float = _field(30.0, 20.0, 40.0)
    taper_length_m: float = _field(50.0, 40.0, 60.0)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and that the merge ends at least 30 m before the main road does."""
        _validate(self)
        tail = self.main_length_m - _merge_layout(self)["merge_end_x"]
        if tail < _MIN_MERGE_TAIL_M:
            raise UserError(
                f"MergeParams: only {tail:.1f} m of main road after the merge (need {_MIN_MERGE_TAIL_M}); "
                "raise main_length_m or shorten the ramp (ramp_drop_m, accel_length_m, taper_length_m)"
            )


# ---------------------------------------------------------------------------------------- curves


class Curve(NamedTuple):
    """A dense planar curve in travel order: points ``xy`` (n, 2) m and unit tangents ``tan`` (n, 2)."""

    xy: np.ndarray
    tan: np.ndarray

    def offset(self, d_m: float) -> Curve:
        """The curve shifted ``d_m`` along its left normal (negative: to the right)."""
        return Curve(self.xy + d_m * _left(self.tan), self.tan)

    def reversed(self) -> Curve:
        """The same curve travelled the other way."""
        return Curve(self.xy[::-1].copy(), -self.tan[::-1])


def _left(v: np.ndarray) -> np.ndarray:
    """Left normals ``(..., 2)`` of directions ``(..., 2)`` (rotated +90 deg)."""
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


def _unit(angle_rad: float) -> np.ndarray:
    return np.array([math.cos(angle_rad), math.sin(angle_rad)])


def _angle(v: np.ndarray) -> float:
    return math.atan2(float(v[1]), float(v[0]))


def _wrap(angle_rad: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi


def line(p0: np.ndarray, p1: np.ndarray) -> Curve:
    """Straight segment from ``p0`` to ``p1`` (two points suffice: offsets of a line are exact)."""
    p0, p1 = np.asarray(p0, dtype=np.float64), np.asarray(p1, dtype=np.float64)
    t = (p1 - p0) / np.linalg.norm(p1 - p0)
    return Curve(np.stack([p0, p1]), np.stack([t, t]))


def arc(center: np.ndarray, radius_m: float, a0_rad: float, a1_rad: float) -> Curve:
    """Circular arc from polar angle ``a0`` to ``a1`` (counter-clockwise when ``a1 > a0``)."""
    n = max(2, math.ceil(radius_m * abs(a1_rad - a0_rad) / _DENSE_STEP_M) + 1)
    a = np.linspace(a0_rad, a1_rad, n)
    radial = np.stack([np.cos(a), np.sin(a)], axis=-1)
    return Curve(np.asarray(center) + radius_m * radial, math.copysign(1.0, a1_rad - a0_rad) * _left(radial))


def bezier(p0: np.ndarray, d0: np.ndarray, p1: np.ndarray, d1: np.ndarray) -> Curve:
    """Cubic Bezier from ``p0`` heading ``d0`` to ``p1`` heading ``d1`` (unit vectors).

    When the two tangent lines meet ahead of ``p0`` and behind ``p1`` at a corner ``X``, the handles
    are ``k |p0 X|`` and ``k |X p1|`` with ``k = 4/3 tan(D/4) / tan(D/2)`` for the turn ``D``: an
    exact-ish circular arc for symmetric corners, convex otherwise. Else (near-parallel lanes) both
    handles are a third of the chord, which gives a straight line or a gentle S.
    """
    p0, p1 = np.asarray(p0, dtype=np.float64), np.asarray(p1, dtype=np.float64)
    chord = float(np.linalg.norm(p1 - p0))
    h0 = h1 = chord / 3.0
    cross = float(d0[0] * d1[1] - d0[1] * d1[0])
    if abs(cross) > 1e-6:
        rel = p1 - p0  # solve p0 + t0 d0 = p1 - t1 d1
        t0 = float(rel[0] * d1[1] - rel[1] * d1[0]) / cross
        t1 = float(d0[0] * rel[1] - d0[1] * rel[0]) / cross
        turn = math.acos(max(-1.0, min(1.0, float(np.dot(d0, d1)))))
        if 0.0 < t0 < 2.0 * chord and 0.0 < t1 < 2.0 * chord:
            k = 4.0 / 3.0 * math.tan(turn / 4.0) / math.tan(turn / 2.0)
            h0, h1 = k * t0, k * t1
    c = np.stack([p0, p0 + h0 * np.asarray(d0), p1 - h1 * np.asarray(d1), p1])
    n = max(8, math.ceil(2.0 * chord / _DENSE_STEP_M))
    t = np.linspace(0.0, 1.0, n)[:, None]
    xy = (1 - t) ** 3 * c[0] + 3 * (1 - t) ** 2 * t * c[1] + 3 * (1 - t) * t**2 * c[2] + t**3 * c[3]
    dxy = 3 * (1 - t) ** 2 * (c[1] - c[0]) + 6 * (1 - t) * t * (c[2] - c[1]) + 3 * t**2 * (c[3] - c[2])
    return Curve(xy, dxy / np.linalg.norm(dxy, axis=-1, keepdims=True))


def join(*curves: Curve) -> Curve:
    """Concatenate curves that meet end to start (the duplicated joint point is dropped)."""
    xy = [curves[0].xy] + [c.xy[1:] for c in curves[1:]]
    tan = [curves[0].tan] + [c.tan[1:] for c in curves[1:]]
    return Curve(np.concatenate(xy), np.concatenate(tan))


def resample(xy: np.ndarray, spacing_m: float) -> np.ndarray:
    """Resample a polyline ``(n, 2)`` to near-uniform arc-length spacing, keeping both end points exactly."""
    seg = np.linalg.norm(np.diff(xy, axis=0), axis=-1)
    keep = np.concatenate([[True], seg > 1e-9])
    xy, s = xy[keep], np.concatenate([[0.0], np.cumsum(seg[seg > 1e-9])])
    n = max(1, round(float(s[-1]) / spacing_m))
    s_new = np.linspace(0.0, float(s[-1]), n + 1)
    out = np.stack([np.interp(s_new, s, xy[:, 0]), np.interp(s_new, s, xy[:, 1])], axis=-1)
    out[0], out[-1] = xy[0], xy[-1]
    return out


# --------------------------------------------------------------------------------------- builder


class _Builder:
    """Collects lanes, connections, lines and edges of one road graph (local to one generator call)."""

    def __init__(self, spacing_m: float, shift: np.ndarray | None = None) -> None:
        self.spacing_m = spacing_m
        self.shift = np.zeros(2) if shift is None else np.asarray(shift, dtype=np.float64)
        self.lanes: list[np.ndarray] = []
        self.widths: list[float] = []
        self.entries: list[list[int]] = []
        self.exits: list[list[int]] = []
        self.lines: list[np.ndarray] = []
        self.line_types: list[int] = []
        self.edges: list[np.ndarray] = []

    def _points(self, curve: Curve) -> np.ndarray:
        return resample(curve.xy + self.shift, self.spacing_m)

    def lane(
        self, curve: Curve, width_m: float, start: np.ndarray | None = None, end: np.ndarray | None = None
    ) -> int:
        """Add a lane along ``curve``; ``start``/``end`` snap its ends onto a connected lane's end points."""
        pts = self._points(curve)
        if start is not None:
            pts[0] = start
        if end is not None:
            pts[-1] = end
        self.lanes.append(pts)
        self.widths.append(width_m)
        self.entries.append([])
        self.exits.append([])
        return len(self.lanes) - 1

    def connect(self, src: int, dst: int) -> None:
        """Lane ``src`` leads into lane ``dst`` (recorded on both sides)."""
        self.exits[src].append(dst)
        self.entries[dst].append(src)

    def start(self, lane: int) -> np.ndarray:
        """First point of a lane, in the unshifted frame the curves are built in."""
        return self.lanes[lane][0] - self.shift

    def end(self, lane: int) -> np.ndarray:
        """Last point of a lane, in the unshifted frame the curves are built in."""
        return self.lanes[lane][-1] - self.shift

    def line(self, curve: Curve, kind: RoadLineType) -> None:
        """Add a painted road line."""
        self.lines.append(self._points(curve))
        self.line_types.append(int(kind))

    def edge(self, curve: Curve) -> None:
        """Add a road edge (``BOUNDARY``); the road must lie on the curve's left."""
        self.edges.append(self._points(curve))

    def build(self) -> RoadGraph:
        """The padded road graph."""
        return RoadGraph.from_lists(
            self.lanes,
            self.widths,
            self.entries,
            self.exits,
            self.lines,
            self.line_types,
            self.edges,
            [int(RoadEdgeType.BOUNDARY)] * len(self.edges),
        )


def _two_way(b: _Builder, ref: Curve, n: int, w: float, shoulder: float) -> tuple[list[int], list[int]]:
    """Add a two-way road of ``n`` lanes each way along ``ref`` (its centre line, the yellow line).

    Returns ``(forward, backward)`` lane ids, index 0 next to the centre line; forward lanes drive
    along ``ref`` on its right, backward lanes against it on its left.
    """
    fwd = [b.lane(ref.offset(-(i + 0.5) * w), w) for i in range(n)]
    bwd = [b.lane(ref.offset((i + 0.5) * w).reversed(), w) for i in range(n)]
    b.line(ref, RoadLineType.SOLID_DOUBLE_YELLOW)
    for i in range(1, n):
        b.line(ref.offset(-i * w), RoadLineType.BROKEN_SINGLE_WHITE)
        b.line(ref.offset(i * w).reversed(), RoadLineType.BROKEN_SINGLE_WHITE)
    b.edge(ref.offset(-(n * w + shoulder)))
    b.edge(ref.offset(n * w + shoulder).reversed())
    return fwd, bwd


# ------------------------------------------------------------------------------------ generators


def make_straight(params: StraightParams, rng: np.random.Generator) -> RoadGraph:
    """Two-way straight road along +x from ``-length/2`` to ``+length/2`` (``rng`` is not used)."""
    p = params
    b = _Builder(p.point_spacing_m)
    half = p.length_m / 2.0
    _two_way(
        b,
        line(np.array([-half, 0.0]), np.array([half, 0.0])),
        p.lanes_per_direction,
        p.lane_width_m,
        p.shoulder_m,
    )
    return b.build()


def make_curved(params: CurvedParams, rng: np.random.Generator) -> RoadGraph:
    """Two-way road: lead-in along +x, a left arc of ``turn_deg``, lead-out; bbox centred (``rng`` unused)."""
    p = params
    turn = math.radians(p.turn_deg)
    lead = (p.length_m - p.radius_m * turn) / 2.0
    bend = arc(np.array([lead, p.radius_m]), p.radius_m, -math.pi / 2.0, -math.pi / 2.0 + turn)
    parts = [bend]
    if lead > 1e-6:
        parts = [line(np.zeros(2), bend.xy[0]), bend, line(bend.xy[-1], bend.xy[-1] + lead * _unit(turn))]
    ref = join(*parts)
    lo, hi = ref.xy.min(axis=0), ref.xy.max(axis=0)
    b = _Builder(p.point_spacing_m, shift=-(lo + hi) / 2.0)
    _two_way(b, ref, p.lanes_per_direction, p.lane_width_m, p.shoulder_m)
    return b.build()


def _movement_lanes(turn_rad: float, n: int) -> list[tuple[int, int]]:
    """(inbound lane, outbound lane) pairs for a movement; index 0 is next to the centre line."""
    if abs(turn_rad) < math.pi / 4.0:
        return [(i, i) for i in range(n)]  # straight: lane keeps its position
    if turn_rad < 0.0:
        return [(n - 1, n - 1)]  # right turn: outermost to outermost
    return [(0, 0)]  # left turn: innermost to innermost


def _junction(angles_rad: list[float], p: IntersectionParams | TJunctionParams) -> RoadGraph:
    """A junction of two-way straight arms pointing at ``angles_rad`` (counter-clockwise sorted).

    Arms start at the mouth radius ``r0``, far enough out that neighbouring arms' edges do not
    meet before the kerb radius; connectors join inbound lanes to outbound lanes for every
    non-U-turn movement; each corner edge is the outermost corner connector offset outwards.
    """
    gaps = np.diff(np.append(angles_rad, angles_rad[0] + 2.0 * math.pi))
    if np.any(gaps <= math.radians(30.0)) or np.any(gaps > math.pi + 1e-9):
        raise UserError(
            f"junction arms must be 30-180 deg apart, got gaps {np.degrees(gaps).round(1).tolist()}"
        )
    n, w, shoulder = p.lanes_per_direction, p.lane_width_m, p.shoulder_m
    r0 = max((n * w + shoulder) / math.tan(g / 2.0) for g in gaps) + p.corner_radius_m
    b = _Builder(p.point_spacing_m)
    units = [_unit(a) for a in angles_rad]
    arms = [_two_way(b, line(r0 * u, (r0 + p.arm_length_m) * u), n, w, shoulder) for u in units]  # (out, in)
    for a, (ua, (_, inbound)) in enumerate(zip(units, arms, strict=True)):
        for c, (uc, (outbound, _)) in enumerate(zip(units, arms, strict=True)):
            if a == c:
                continue
            for i, j in _movement_lanes(_wrap(_angle(uc) - _angle(-ua)), n):
                src, dst = inbound[i], outbound[j]
                curve = bezier(b.end(src), -ua, b.start(dst), uc)
                k = b.lane(curve, w, start=b.lanes[src][-1], end=b.lanes[dst][0])
                b.connect(src, k)
                b.connect(k, dst)
    for a in range(len(units)):
        c = (a + 1) % len(units)
        corner = bezier(b.end(arms[a][1][n - 1]), -units[a], b.start(arms[c][0][n - 1]), units[c])
        b.edge(corner.offset(-(w / 2.0 + shoulder)))
    return b.build()


def make_intersection(params: IntersectionParams, rng: np.random.Generator) -> RoadGraph:
    """Four-way junction; arm k points at ``90 deg * k`` plus jitter drawn from ``rng``."""
    p = params
    jitter = rng.uniform(-p.arm_angle_jitter_deg, p.arm_angle_jitter_deg, size=4)
    angles = sorted(math.radians(90.0 * k + float(j)) for k, j in enumerate(jitter))
    return _junction(angles, p)


def make_t_junction(params: TJunctionParams, rng: np.random.Generator) -> RoadGraph:
    """Through road along x (arms at 0 and 180 deg) and a side arm at 90 deg plus jitter from ``rng``."""
    p = params
    side = 90.0 + float(rng.uniform(-p.arm_angle_jitter_deg, p.arm_angle_jitter_deg))
    angles = [0.0, math.radians(side), math.pi]
    return _junction(angles, p)


def _roundabout_mouth(p: RoundaboutParams) -> tuple[float, float, float]:
    """``(r_arm, cy, alpha)`` in an arm's frame (x out along the arm, y to its left).

    The entry arc (radius ``Re``) is tangent to the inbound lane (``y = w/2``) and externally
    tangent to the ring (radius ``R``): its centre is ``(r_arm, cy)`` with ``cy = w/2 + Re`` and
    ``|centre| = R + Re``; the arm lanes end at ``x = r_arm`` and the entry meets the ring at the
    polar angle ``alpha`` (the exit mirrors it at ``-alpha``).
    """
    cy = p.lane_width_m / 2.0 + p.entry_radius_m
    r_arm = math.sqrt((p.ring_radius_m + p.entry_radius_m) ** 2 - cy**2)
    return r_arm, cy, math.atan2(cy, r_arm)


def make_roundabout(params: RoundaboutParams, rng: np.random.Generator) -> RoadGraph:
    """Counter-clockwise single-lane ring split at every entry and exit, with arms at jittered angles.

    Ring lanes: ``pass_k`` from arm k's exit point to its entry point, ``between_k`` from arm k's
    entry point to arm k+1's exit point. Exits and entries are circular arcs (right turns).
    """
    p = params
    w, ring_r, re = p.lane_width_m, p.ring_radius_m, p.entry_radius_m
    k_arms = p.num_arms
    jitter = rng.uniform(-p.arm_angle_jitter_deg, p.arm_angle_jitter_deg, size=k_arms)
    theta = sorted(2.0 * math.pi * k / k_arms + math.radians(float(j)) for k, j in enumerate(jitter))
    r_arm, cy, alpha = _roundabout_mouth(p)
    b = _Builder(p.point_spacing_m)
    arms = [
        _two_way(b, line(r_arm * _unit(t), (r_arm + p.arm_length_m) * _unit(t)), 1, w, p.shoulder_m)
        for t in theta
    ]
    nxt = [theta[(k + 1) % k_arms] + (2.0 * math.pi if k == k_arms - 1 else 0.0) for k in range(k_arms)]
    origin = np.zeros(2)
    pass_ids = [b.lane(arc(origin, ring_r, t - alpha, t + alpha), w) for t in theta]
    between_ids = [
        b.lane(arc(origin, ring_r, t + alpha, t1 - alpha), w, start=b.lanes[pass_ids[k]][-1])
        for k, (t, t1) in enumerate(zip(theta, nxt, strict=True))
    ]
    for k in range(k_arms):  # close the ring exactly: between_k ends where pass_{k+1} starts
        b.lanes[between_ids[k]][-1] = b.lanes[pass_ids[(k + 1) % k_arms]][0]
    entries, exits = [], []
    for k, t in enumerate(theta):
        u, v = _unit(t), _left(_unit(t))
        entry = arc(r_arm * u + cy * v, re, t - math.pi / 2.0, t + alpha - math.pi)
        exit_ = arc(r_arm * u - cy * v, re, t - alpha + math.pi, t + math.pi / 2.0)
        outbound, inbound = arms[k][0][0], arms[k][1][0]
        n_id = b.lane(entry, w, start=b.lanes[inbound][-1], end=b.lanes[between_ids[k]][0])
        x_id = b.lane(exit_, w, start=b.lanes[pass_ids[k]][0], end=b.lanes[outbound][0])
        prev_between = between_ids[k - 1]
        for src, dst in ((prev_between, pass_ids[k]), (prev_between, x_id), (pass_ids[k], between_ids[k])):
            b.connect(src, dst)
        for src, dst in ((n_id, between_ids[k]), (inbound, n_id), (x_id, outbound)):
            b.connect(src, dst)
        entries.append(entry)
        exits.append(exit_)
    d = w / 2.0 + p.shoulder_m
    b.edge(arc(origin, ring_r - d, 2.0 * math.pi, 0.0))  # central island, clockwise: road outside it
    for k, (t, t1) in enumerate(zip(theta, nxt, strict=True)):
        outer = arc(origin, ring_r + d, t + alpha, t1 - alpha)
        b.edge(join(entries[k].offset(-d), outer, exits[(k + 1) % k_arms].offset(-d)))
    return b.build()


def _merge_layout(p: MergeParams) -> dict[str, float]:
    """Key positions of the merge, in a frame with the main road from x=0 and the rightmost lane at y=0."""
    w, phi = p.lane_width_m, math.radians(p.ramp_angle_deg)
    y_acc = -w
    corner_x = p.ramp_drop_m / math.tan(phi)  # where the ramp line meets the acceleration lane line
    bend = min(12.0, 0.5 * p.ramp_drop_m / math.sin(phi))  # tangent length of the bend on each side
    accel_x = corner_x + bend
    taper_x = accel_x + p.accel_length_m
    return {
        "y_acc": y_acc,
        "corner_x": corner_x,
        "bend": bend,
        "accel_x": accel_x,
        "taper_x": taper_x,
        "merge_end_x": taper_x + p.taper_length_m,
    }


def _taper(x0: float, x1: float, y0: float, y1: float) -> Curve:
    """Smoothstep lane shift from ``(x0, y0)`` to ``(x1, y1)``, level at both ends."""
    n = max(2, math.ceil((x1 - x0) / _DENSE_STEP_M) + 1)
    u = np.linspace(0.0, 1.0, n)
    xy = np.stack([x0 + u * (x1 - x0), y0 + (y1 - y0) * (3 * u**2 - 2 * u**3)], axis=-1)
    slope = (y1 - y0) * 6 * u * (1 - u) / (x1 - x0)
    tan = np.stack([np.ones_like(slope), slope], axis=-1)
    return Curve(xy, tan / np.linalg.norm(tan, axis=-1, keepdims=True))


def make_merge(params: MergeParams, rng: np.random.Generator) -> RoadGraph:
    """Highway on-ramp; lanes: main lanes 1.. (full length), rightmost lane split at the merge, the ramp.

    Edges: the left road edge, the main road's right edge up to the gore tip, the ramp's left edge
    from the ramp start to the gore tip, and the ramp's right edge continuing along the rightmost
    lane after the merge. The scene is centred on its bounding box (``rng`` is not used).
    """
    p = params
    w, m, sh = p.lane_width_m, p.num_main_lanes, p.shoulder_m
    lay = _merge_layout(p)
    phi = math.radians(p.ramp_angle_deg)
    x1, y_acc, x_end = p.main_length_m, lay["y_acc"], lay["merge_end_x"]
    corner = np.array([lay["corner_x"], y_acc])
    bend_start = corner - lay["bend"] * _unit(phi)
    bend_end = corner + np.array([lay["bend"], 0.0])
    ramp = join(
        line(np.array([0.0, y_acc - p.ramp_drop_m]), bend_start),
        bezier(bend_start, _unit(phi), bend_end, np.array([1.0, 0.0])),
        line(bend_end, np.array([lay["taper_x"], y_acc])),
        _taper(lay["taper_x"], x_end, y_acc, 0.0),
    )
    y_lo, y_hi = y_acc - p.ramp_drop_m - w / 2.0 - sh, (m - 0.5) * w + sh
    b = _Builder(p.point_spacing_m, shift=np.array([-x1 / 2.0, -(y_lo + y_hi) / 2.0]))
    right_up = b.lane(line(np.array([0.0, 0.0]), np.array([x_end, 0.0])), w)
    right_down = b.lane(line(np.array([x_end, 0.0]), np.array([x1, 0.0])), w, start=b.lanes[right_up][-1])
    for k in range(1, m):
        b.lane(line(np.array([0.0, k * w]), np.array([x1, k * w])), w)
        b.line(
            line(np.array([0.0, (k - 0.5) * w]), np.array([x1, (k - 0.5) * w])),
            RoadLineType.BROKEN_SINGLE_WHITE,
        )
    ramp_id = b.lane(ramp, w, end=b.lanes[right_down][0])
    b.connect(right_up, right_down)
    b.connect(ramp_id, right_down)
    b.line(
        line(bend_end + np.array([0.0, w / 2.0]), np.array([lay["taper_x"], y_acc + w / 2.0])),
        RoadLineType.BROKEN_SINGLE_WHITE,
    )
    d = w / 2.0 + sh
    b.edge(line(np.array([x1, (m - 0.5) * w + sh]), np.array([0.0, (m - 0.5) * w + sh])))
    ramp_left = ramp.offset(d)
    tip = int(np.argmax(ramp_left.xy[:, 1] >= -d))  # gore tip: the ramp's left edge meets the main one
    tip_xy = np.array([ramp_left.xy[tip, 0], -d])
    b.edge(line(np.array([0.0, -d]), tip_xy))
    b.edge(Curve(np.vstack([ramp_left.xy[:tip], tip_xy]), ramp_left.tan[: tip + 1]).reversed())
    b.edge(join(ramp.offset(-d), line(np.array([x_end, -d]), np.array([x1, -d]))))
    return b.build()


# -------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Generator:
    """One procedural road kind: its params type, a params sampler and the road-graph builder."""

    params_type: type
    sample: Callable[[np.random.Generator], Any]
    make: Callable[[Any, np.random.Generator], RoadGraph]


def _plain(cls: type[P]) -> Callable[[np.random.Generator], P]:
    return lambda rng: sample_fields(cls, rng)


GENERATORS: Mapping[str, Generator] = MappingProxyType(
    {
        "straight": Generator(StraightParams, _plain(StraightParams), make_straight),
        "curved": Generator(CurvedParams, CurvedParams.sample, make_curved),
        "intersection": Generator(IntersectionParams, _plain(IntersectionParams), make_intersection),
        "t_junction": Generator(TJunctionParams, _plain(TJunctionParams), make_t_junction),
        "roundabout": Generator(RoundaboutParams, _plain(RoundaboutParams), make_roundabout),
        "merge": Generator(MergeParams, _plain(MergeParams), make_merge),
    }
)


def get_generator(kind: str) -> Generator:
    """The generator named ``kind``; ``UserError`` naming the value and the valid kinds otherwise."""
    if kind not in GENERATORS:
        raise UserError(f"unknown scene generator {kind!r}; valid kinds: {', '.join(GENERATORS)}")
    return GENERATORS[kind]


def sample_params(kind: str, rng: np.random.Generator) -> Any:
    """Draw the params of generator ``kind`` from their documented ranges."""
    return get_generator(kind).sample(rng)
