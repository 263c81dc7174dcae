"""Procedural road generators: straight, curved, intersection, T-junction, roundabout and merge.

Each generator is a pure function ``make_<kind>(params, rng) -> RoadGraph``; its frozen params
dataclass (in :mod:`scenefactory.scenes.procedural_params`) documents every field with its unit and
the range the scene library samples it from (``sample_params``); ``rng`` only draws the small jitter
a params field names (junction arm angles).

Conventions shared by every generator (metres, scene frame, x east, y north):

- right-hand traffic; lane centres are polylines in driving direction with points every
  ``point_spacing_m`` (about 1 m); lanes meet exactly end-to-start where they are connected, and
  ``lane_exit``/``lane_entry`` list each connection from both sides;
- road lines: ``SOLID_DOUBLE_YELLOW`` between directions, ``BROKEN_SINGLE_WHITE`` between lanes of
  one direction;
- road edges (``BOUNDARY``) run ``shoulder_m`` outside the outer lane boundaries and are oriented
  with the road on their left (the WOMD / WOSAC counter-clockwise convention), so a point right
  of an edge is off-road;
- the drivable area (``tasks.driving.drivable``) is the road side of the edges united with the lane
  footprints (within half a lane width of a lane centre), so shoulders count as road; junctions
  carry a connector lane for every movement, and junction corner edges are the connector curves
  offset outwards, so no edge ever cuts a lane;
- the whole scene lies within about +-130 m of the origin.

The curve primitives (``Curve``, ``line``, ``arc``, ``bezier``, ``join``, ``resample``) and the
road-graph builder live in :mod:`scenefactory.scenes.geometry2d`; this module holds the generators
and their registry (``GENERATORS``, ``get_generator``, ``sample_params``).

Traffic signals: the intersection and T-junction take an optional ``signal_cycle_s`` (off by
default); :func:`junction_signals` then gives the scene a looping two-phase
:class:`~scenefactory.scenes.scene.SignalLog` (``Generator.signals``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.scenes.geometry2d import (
    Curve,
    _angle,
    _Builder,
    _left,
    _taper,
    _two_way,
    _unit,
    _wrap,
    arc,
    bezier,
    join,
    line,
)
from scenefactory.scenes.procedural_params import (
    SIGNAL_ALL_RED_S,
    SIGNAL_YELLOW_S,
    CurvedParams,
    IntersectionParams,
    MergeParams,
    P,
    RoundaboutParams,
    StraightParams,
    TJunctionParams,
    _merge_layout,
    _roundabout_mouth,
    sample_fields,
)
from scenefactory.scenes.roadgraph import RoadGraph, RoadLineType
from scenefactory.scenes.scene import SignalLog, SignalState

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


def make_merge(params: MergeParams, rng: np.random.Generator) -> RoadGraph:
    """Highway on-ramp; lanes: main lanes 1.. (full length), rightmost lane split at the merge, the ramp.

    Edges: the left road edge, the main road's right edge up to the gore tip continued back along the
    ramp's left edge to the ramp start (one polyline), and the ramp's right edge continuing along the
    rightmost lane after the merge. The scene is centred on its bounding box (``rng`` is not used).
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
    # The main road's right edge up to the gore tip and back along the ramp's left edge: one
    # polyline, so the tip is a vertex with the road on both sides past it (not two open ends).
    gore = Curve(np.vstack([ramp_left.xy[:tip], tip_xy]), ramp_left.tan[: tip + 1]).reversed()
    b.edge(join(line(np.array([0.0, -d]), tip_xy), gore))
    b.edge(join(ramp.offset(-d), line(np.array([x_end, -d]), np.array([x1, -d]))))
    return b.build()


# --------------------------------------------------------------------------------------- signals

SIGNAL_DT_S = 0.1
"""Step of procedural signal cycles [s] (the driving task's policy step)."""


def junction_signals(
    rg: RoadGraph, cycle_s: float, rng: np.random.Generator, dt_s: float = SIGNAL_DT_S
) -> SignalLog:
    """A looping two-phase signal cycle for a junction built by ``_junction``.

    Approach lanes are the lanes with no entry and at least one exit (the arms' inbound lanes).
    Every movement out of one (a connector lane) is a signal-controlled lane whose stop point is its
    first point, as WOMD gives each movement its own lane state. Approaches within 45 deg of
    parallel (either way) to the first approach form phase 0, the crossing ones phase 1. In a cycle
    of ``n = cycle_s / dt_s`` steps, phase 0 is green for ``n/2 - yellow - all-red`` steps, then
    yellow for :data:`~scenefactory.scenes.procedural_params.SIGNAL_YELLOW_S`, then red for the rest
    of the cycle; phase 1 does the same from step ``n/2``; so crossing directions are never both
    green or yellow, and both are red for
    :data:`~scenefactory.scenes.procedural_params.SIGNAL_ALL_RED_S` after each yellow. The cycle
    starts at a step drawn from ``rng`` (so episodes meet every phase).
    """
    approaches = [i for i in range(rg.num_lanes) if not rg.entries(i) and rg.exits(i)]
    if not approaches:
        raise UserError("junction_signals: the road graph has no approach lane (no entry, some exits)")
    dirs = [_unit(_angle(rg.lane(i)[-1] - rg.lane(i)[-2])) for i in approaches]
    crossing = [
        abs(float(dirs[0][0] * d[1] - dirs[0][1] * d[0])) > math.sin(math.radians(45.0)) for d in dirs
    ]
    n = max(2, round(cycle_s / dt_s))
    half, yellow, clear = n // 2, round(SIGNAL_YELLOW_S / dt_s), round(SIGNAL_ALL_RED_S / dt_s)
    green = half - yellow - clear
    if green < 1:
        raise UserError(f"junction_signals: a {cycle_s} s cycle leaves no green time")
    phases = np.full((2, n), int(SignalState.STOP), dtype=np.int64)
    for k, start in enumerate((0, half)):
        phases[k, start : start + green] = int(SignalState.GO)
        phases[k, start + green : start + green + yellow] = int(SignalState.CAUTION)
    phases = np.roll(phases, -int(rng.integers(n)), axis=1)
    stop_xy, lanes, columns = [], [], []
    for a, cross in zip(approaches, crossing, strict=True):
        for c in rg.exits(a):
            stop_xy.append(rg.lane(c)[0])
            lanes.append(c)
            columns.append(phases[int(cross)])
    return SignalLog(
        stop_xy=np.array(stop_xy, dtype=np.float64),
        lane=np.array(lanes, dtype=np.int64),
        state=np.stack(columns, axis=1),
        dt_s=dt_s,
        loop=True,
    )


def _junction_signal_log(
    params: IntersectionParams | TJunctionParams, rg: RoadGraph, rng: np.random.Generator
) -> SignalLog | None:
    """The junction's signal cycle when ``params.signal_cycle_s`` is set, else none."""
    return junction_signals(rg, params.signal_cycle_s, rng) if params.signal_cycle_s > 0 else None


# -------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Generator:
    """One procedural road kind: its params type, a params sampler and the road-graph builder;
    ``signals`` (optional) gives a scene's traffic signals from its params, road graph and an rng."""

    params_type: type
    sample: Callable[[np.random.Generator], Any]
    make: Callable[[Any, np.random.Generator], RoadGraph]
    signals: Callable[[Any, RoadGraph, np.random.Generator], SignalLog | None] | None = None


def _plain(cls: type[P]) -> Callable[[np.random.Generator], P]:
    return lambda rng: sample_fields(cls, rng)


GENERATORS: Mapping[str, Generator] = MappingProxyType(
    {
        "straight": Generator(StraightParams, _plain(StraightParams), make_straight),
        "curved": Generator(CurvedParams, CurvedParams.sample, make_curved),
        "intersection": Generator(
            IntersectionParams, _plain(IntersectionParams), make_intersection, _junction_signal_log
        ),
        "t_junction": Generator(
            TJunctionParams, _plain(TJunctionParams), make_t_junction, _junction_signal_log
        ),
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
