"""Road graph: lane centre polylines with widths and connectivity, road lines and road edges.

Everything is numpy, padded to a fixed number of points per polyline with ``valid`` masks, so that
nothing ragged crosses a stage boundary. Coordinates are metres in the scene frame (z up, x east).

Shapes (L lanes, N road lines, M road edges, P points per polyline, E max connections per lane):

- ``lane_xy``        (L, P, 2) float64, lane centre polylines, in driving direction.
- ``lane_valid``     (L, P) bool.
- ``lane_width_m``   (L, P) float64, full lane width at each centre point.
- ``lane_entry``     (L, E) int64, indices of lanes that lead into this lane, -1 padded.
- ``lane_exit``      (L, E) int64, indices of lanes this lane leads into, -1 padded.
- ``line_xy``/``line_valid``/``line_type``  road lines (painted markings), WOMD ``RoadLine.Type`` codes.
- ``edge_xy``/``edge_valid``/``edge_type``  road edges (kerbs, medians), WOMD ``RoadEdge.Type`` codes.
- ``crosswalk_xy``/``crosswalk_valid`` (C, Q, 2)/(C, Q) and ``speed_bump_xy``/``speed_bump_valid``
  polygons; ``stop_sign_xy`` (S, 2) positions. Optional (empty by default): procedural scenes have
  none, converted WOMD scenes carry them.
- ``driveway_xy``/``driveway_valid`` (D, Q, 2)/(D, Q) driveway polygons (WOMD ``MapFeature.driveway``):
  drivable area beyond the road edges (entrances to lots and garages). Optional, empty by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class PointType(IntEnum):
    """Kind of a road-graph sample point, as observed by the driving task."""

    LANE_CENTER = 0
    ROAD_LINE = 1
    ROAD_EDGE = 2


class RoadLineType(IntEnum):
    """WOMD ``RoadLine.Type`` codes (painted markings)."""

    UNKNOWN = 0
    BROKEN_SINGLE_WHITE = 1
    SOLID_SINGLE_WHITE = 2
    SOLID_DOUBLE_WHITE = 3
    BROKEN_SINGLE_YELLOW = 4
    BROKEN_DOUBLE_YELLOW = 5
    SOLID_SINGLE_YELLOW = 6
    SOLID_DOUBLE_YELLOW = 7
    PASSING_DOUBLE_YELLOW = 8


class RoadEdgeType(IntEnum):
    """WOMD ``RoadEdge.Type`` codes."""

    UNKNOWN = 0
    BOUNDARY = 1
    MEDIAN = 2


def pad_polylines(polylines: Sequence[np.ndarray], dim: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Stack ragged polylines ``[(n_i, dim)]`` into ``(N, P, dim)`` zero-padded points and a ``(N, P)`` mask.

    ``P`` is the longest polyline (at least 1, so empty inputs still give well-formed arrays).
    """
    count = len(polylines)
    width = max([len(p) for p in polylines] + [1])
    xy = np.zeros((count, width, dim), dtype=np.float64)
    valid = np.zeros((count, width), dtype=bool)
    for i, poly in enumerate(polylines):
        arr = np.asarray(poly, dtype=np.float64).reshape(-1, dim)
        xy[i, : len(arr)] = arr
        valid[i, : len(arr)] = True
    return xy, valid


def pad_index_lists(lists: Sequence[Sequence[int]]) -> np.ndarray:
    """Stack ragged integer lists into an ``(N, E)`` int64 array padded with -1 (E >= 1)."""
    width = max([len(x) for x in lists] + [1])
    out = np.full((len(lists), width), -1, dtype=np.int64)
    for i, items in enumerate(lists):
        out[i, : len(items)] = np.asarray(items, dtype=np.int64)
    return out


def _unpad(xy: np.ndarray, valid: np.ndarray) -> list[np.ndarray]:
    return [xy[i][valid[i]] for i in range(len(xy))]


@dataclass(frozen=True)
class RoadGraph:
    """A padded road graph; see the module docstring for shapes and units."""

    lane_xy: np.ndarray
    lane_valid: np.ndarray
    lane_width_m: np.ndarray
    lane_entry: np.ndarray
    lane_exit: np.ndarray
    line_xy: np.ndarray
    line_valid: np.ndarray
    line_type: np.ndarray
    edge_xy: np.ndarray
    edge_valid: np.ndarray
    edge_type: np.ndarray
    crosswalk_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 2)))
    crosswalk_valid: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=bool))
    speed_bump_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 2)))
    speed_bump_valid: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=bool))
    stop_sign_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    driveway_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 2)))
    driveway_valid: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=bool))

    def __post_init__(self) -> None:
        """Check shapes and connectivity once, at construction (fail loudly, never later)."""
        num_lanes, pts = self.lane_valid.shape
        _check(self.lane_xy.shape == (num_lanes, pts, 2), f"lane_xy shape {self.lane_xy.shape}")
        _check(self.lane_width_m.shape == (num_lanes, pts), f"lane_width_m shape {self.lane_width_m.shape}")
        _check(self.lane_entry.shape[0] == num_lanes, "lane_entry rows != number of lanes")
        _check(self.lane_exit.shape[0] == num_lanes, "lane_exit rows != number of lanes")
        for name in ("lane_entry", "lane_exit"):
            idx = getattr(self, name)
            _check(
                bool(np.all((idx >= -1) & (idx < num_lanes))), f"{name} refers to a lane that does not exist"
            )
        for prefix in ("line", "edge"):
            xy, valid, kind = (getattr(self, f"{prefix}_{k}") for k in ("xy", "valid", "type"))
            _check(xy.shape[:2] == valid.shape and xy.shape[-1] == 2, f"{prefix}_xy shape {xy.shape}")
            _check(kind.shape == (valid.shape[0],), f"{prefix}_type shape {kind.shape}")
        for prefix in ("crosswalk", "speed_bump", "driveway"):
            xy, valid = getattr(self, f"{prefix}_xy"), getattr(self, f"{prefix}_valid")
            _check(xy.ndim == 3 and xy.shape[:2] == valid.shape and xy.shape[-1] == 2, f"{prefix}_xy shape")
        _check(self.stop_sign_xy.ndim == 2 and self.stop_sign_xy.shape[-1] == 2, "stop_sign_xy shape")
        widths = self.lane_width_m[self.lane_valid]
        _check(bool(np.all(widths > 0.0)), "lane widths must be positive")
        _check(bool(np.all(self.lane_valid.sum(axis=1) >= 2)), "every lane needs at least 2 valid points")

    @property
    def num_lanes(self) -> int:
        """Number of lanes L."""
        return int(self.lane_valid.shape[0])

    @classmethod
    def from_lists(
        cls,
        lanes: Sequence[np.ndarray],
        lane_widths_m: Sequence[np.ndarray | float],
        lane_entries: Sequence[Sequence[int]],
        lane_exits: Sequence[Sequence[int]],
        lines: Sequence[np.ndarray] = (),
        line_types: Sequence[int] = (),
        edges: Sequence[np.ndarray] = (),
        edge_types: Sequence[int] = (),
    ) -> RoadGraph:
        """Build a padded road graph from ragged python lists (scalar widths broadcast along a lane)."""
        lane_xy, lane_valid = pad_polylines(lanes)
        width = np.zeros(lane_valid.shape, dtype=np.float64)
        for i, w in enumerate(lane_widths_m):
            width[i, : int(lane_valid[i].sum())] = w
        line_xy, line_valid = pad_polylines(lines)
        edge_xy, edge_valid = pad_polylines(edges)
        return cls(
            lane_xy=lane_xy,
            lane_valid=lane_valid,
            lane_width_m=width,
            lane_entry=pad_index_lists(lane_entries),
            lane_exit=pad_index_lists(lane_exits),
            line_xy=line_xy,
            line_valid=line_valid,
            line_type=np.asarray(line_types, dtype=np.int64).reshape(len(lines)),
            edge_xy=edge_xy,
            edge_valid=edge_valid,
            edge_type=np.asarray(edge_types, dtype=np.int64).reshape(len(edges)),
        )

    def lane(self, i: int) -> np.ndarray:
        """Valid centre points of lane ``i``, ``(n, 2)``."""
        return self.lane_xy[i][self.lane_valid[i]]

    def lanes(self) -> list[np.ndarray]:
        """All lanes as ragged ``[(n_i, 2)]``."""
        return _unpad(self.lane_xy, self.lane_valid)

    def lines(self) -> list[np.ndarray]:
        """All road lines as ragged ``[(n_i, 2)]``."""
        return _unpad(self.line_xy, self.line_valid)

    def edges(self) -> list[np.ndarray]:
        """All road edges as ragged ``[(n_i, 2)]``."""
        return _unpad(self.edge_xy, self.edge_valid)

    def exits(self, i: int) -> list[int]:
        """Lanes that lane ``i`` leads into."""
        return [int(j) for j in self.lane_exit[i] if j >= 0]

    def entries(self, i: int) -> list[int]:
        """Lanes that lead into lane ``i``."""
        return [int(j) for j in self.lane_entry[i] if j >= 0]

    def crosswalks(self) -> list[np.ndarray]:
        """Crosswalk polygons as ragged ``[(n_i, 2)]``."""
        return _unpad(self.crosswalk_xy, self.crosswalk_valid)

    def speed_bumps(self) -> list[np.ndarray]:
        """Speed-bump polygons as ragged ``[(n_i, 2)]``."""
        return _unpad(self.speed_bump_xy, self.speed_bump_valid)

    def driveways(self) -> list[np.ndarray]:
        """Driveway polygons as ragged ``[(n_i, 2)]``."""
        return _unpad(self.driveway_xy, self.driveway_valid)

    def with_driveways(self, driveways: Sequence[np.ndarray]) -> RoadGraph:
        """A copy carrying these driveway polygons (replacing any it had)."""
        from dataclasses import replace

        xy, valid = pad_polylines(driveways)
        return replace(self, driveway_xy=xy, driveway_valid=valid)

    def with_markings(
        self, crosswalks: Sequence[np.ndarray], speed_bumps: Sequence[np.ndarray], stop_signs: np.ndarray
    ) -> RoadGraph:
        """A copy carrying crosswalk and speed-bump polygons and stop-sign positions (S, 2)."""
        from dataclasses import replace

        cw_xy, cw_valid = pad_polylines(crosswalks)
        sb_xy, sb_valid = pad_polylines(speed_bumps)
        return replace(
            self,
            crosswalk_xy=cw_xy,
            crosswalk_valid=cw_valid,
            speed_bump_xy=sb_xy,
            speed_bump_valid=sb_valid,
            stop_sign_xy=np.asarray(stop_signs, dtype=np.float64).reshape(-1, 2),
        )

    def bounds(self) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)`` over every valid point of lanes, lines, edges and driveways."""
        pts = [
            self.lane_xy[self.lane_valid],
            self.line_xy[self.line_valid],
            self.edge_xy[self.edge_valid],
            self.driveway_xy[self.driveway_valid],
        ]
        allp = np.concatenate([p for p in pts if len(p)], axis=0)
        lo, hi = allp.min(axis=0), allp.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


class RoadGraphError(ValueError):
    """A road graph was built with inconsistent arrays."""


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise RoadGraphError(f"invalid road graph: {what}")
