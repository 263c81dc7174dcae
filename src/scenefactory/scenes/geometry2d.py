"""Planar curve primitives and the road-graph builder shared by the procedural generators.

Curves are built densely (``Curve``: points and unit tangents, about every 0.1 m), offset exactly
along their normals and only then resampled to the output spacing (``resample``). Primitives:
``line``, ``arc``, ``bezier``, the smoothstep ``_taper`` and ``join``. ``_Builder`` collects the
lanes, connections, road lines and road edges of one road graph; ``_two_way`` adds a two-way road
(lanes, centre and lane lines, edges) along a reference curve. Units are metres, scene frame.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType

_DENSE_STEP_M = 0.1

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


def _taper(x0: float, x1: float, y0: float, y1: float) -> Curve:
    """Smoothstep lane shift from ``(x0, y0)`` to ``(x1, y1)``, level at both ends."""
    n = max(2, math.ceil((x1 - x0) / _DENSE_STEP_M) + 1)
    u = np.linspace(0.0, 1.0, n)
    xy = np.stack([x0 + u * (x1 - x0), y0 + (y1 - y0) * (3 * u**2 - 2 * u**3)], axis=-1)
    slope = (y1 - y0) * 6 * u * (1 - u) / (x1 - x0)
    tan = np.stack([np.ones_like(slope), slope], axis=-1)
    return Curve(xy, tan / np.linalg.norm(tan, axis=-1, keepdims=True))


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
