"""Road-distance primitives of the drivable-area field (:mod:`scenefactory.tasks.driving.drivable`).

The segments each part of the field is a minimum over (lane centre segments with half widths,
road-edge segments with their neighbours along the edge, driveway outlines), the pointwise kernels
the grid build and the direct evaluation share (torch, broadcasting), and the direct, brute-force
float64 evaluation of every part at arbitrary points: the reference the grid is tested against and
a tool for checking a map (too slow for every step). The definition, with its formulas, is in the
docstring of :mod:`~scenefactory.tasks.driving.drivable`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from scenefactory.scenes.roadgraph import RoadGraph

CYCLIC_EDGE_TOLERANCE_M = 1.0
"""An edge whose first and last points are this close is a closed loop (WOMD: squared gap < 1 m^2)."""

CHUNK_ELEMENTS = 1 << 22
"""Upper bound on point x segment pairs evaluated at once."""

_MIN_SEGMENT_M = 1e-6
"""Edge and driveway points closer than this to the previous one are dropped (no zero-length segment)."""


def lane_segments(roadgraph: RoadGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every lane centre segment between two valid consecutive points.

    Returns:
        ``(a (S, 2), b (S, 2), half_width_a (S,), half_width_b (S,))`` float64, m.
    """
    ok = roadgraph.lane_valid[:, :-1] & roadgraph.lane_valid[:, 1:]
    a = roadgraph.lane_xy[:, :-1][ok]
    b = roadgraph.lane_xy[:, 1:][ok]
    hwa = 0.5 * roadgraph.lane_width_m[:, :-1][ok]
    hwb = 0.5 * roadgraph.lane_width_m[:, 1:][ok]
    return a, b, hwa, hwb


def _distinct(poly: np.ndarray) -> np.ndarray:
    """``poly`` without points closer than ``_MIN_SEGMENT_M`` to their predecessor."""
    step = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    return poly[np.concatenate([[True], step > _MIN_SEGMENT_M])]


def edge_segments(roadgraph: RoadGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every road-edge segment with its neighbours along its polyline.

    Returns:
        ``(a (S, 2), b (S, 2), prev (S,), next (S,))``: segment ends (float64, m) and the index of
        the previous and next segment of the same edge (int64; -1 at the open ends of an edge; a
        closed loop, ends within ``CYCLIC_EDGE_TOLERANCE_M``, wraps around).
    """
    starts, ends, prevs, nexts = [], [], [], []
    base = 0
    for edge in roadgraph.edges():
        pts = _distinct(edge)
        if len(pts) < 2:
            continue
        closed = len(pts) >= 3 and float(np.linalg.norm(pts[-1] - pts[0])) <= CYCLIC_EDGE_TOLERANCE_M
        if closed and float(np.linalg.norm(pts[-1] - pts[0])) > _MIN_SEGMENT_M:
            pts = np.vstack([pts, pts[:1]])  # close the gap with a short segment
        elif closed:
            pts = np.vstack([pts[:-1], pts[:1]])  # make the end meet the start exactly
        n = len(pts) - 1
        idx = base + np.arange(n)
        prev, nxt = idx - 1, idx + 1
        prev[0] = idx[-1] if closed else -1
        nxt[-1] = idx[0] if closed else -1
        starts.append(pts[:-1])
        ends.append(pts[1:])
        prevs.append(prev)
        nexts.append(nxt)
        base += n
    if not starts:
        return np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(prevs), np.concatenate(nexts)


def driveway_segments(roadgraph: RoadGraph) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Closed outlines of the driveway polygons with 3+ distinct points.

    Returns:
        ``(a (S, 2), b (S, 2), polygons)``: every outline segment (float64, m) and each kept polygon
        as a closed ``(n + 1, 2)`` ring (last point = first).
    """
    rings = []
    for poly in roadgraph.driveways():
        pts = _distinct(poly)
        if len(pts) >= 2 and float(np.linalg.norm(pts[-1] - pts[0])) <= _MIN_SEGMENT_M:
            pts = pts[:-1]
        if len(pts) >= 3:
            rings.append(np.vstack([pts, pts[:1]]))
    if not rings:
        return np.zeros((0, 2)), np.zeros((0, 2)), []
    return np.concatenate([r[:-1] for r in rings]), np.concatenate([r[1:] for r in rings]), rings


# ----------------------------------------------------------------------- pointwise pieces


def segment_field(
    px: torch.Tensor,
    py: torch.Tensor,
    ax: torch.Tensor,
    ay: torch.Tensor,
    ex: torch.Tensor,
    ey: torch.Tensor,
    hwa: torch.Tensor,
    dhw: torch.Tensor,
) -> torch.Tensor:
    """``|p - q(t)| - hw(t)`` for broadcast points ``p`` and segments ``a -> a + e`` (module docstring)."""
    rx, ry = px - ax, py - ay
    t = ((rx * ex + ry * ey) / (ex * ex + ey * ey).clamp(min=1e-12)).clamp_(0.0, 1.0)
    ox = rx.sub_(t * ex)
    oy = ry.sub_(t * ey)
    return torch.sqrt(ox.mul_(ox).addcmul_(oy, oy)).sub_(hwa).sub_(t.mul_(dhw))


def nearest_on_segments(
    px: torch.Tensor, py: torch.Tensor, ax: torch.Tensor, ay: torch.Tensor, ex: torch.Tensor, ey: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For points ``[..., 1]`` and segments ``[..., M]``: the distance to the nearest segment,
    its position ``[...]`` (long) among the M, and the clamped projection ``t`` on it."""
    rx, ry = px - ax, py - ay
    t = ((rx * ex + ry * ey) / (ex * ex + ey * ey).clamp(min=1e-12)).clamp_(0.0, 1.0)
    ox = rx.sub_(t * ex)
    oy = ry.sub_(t * ey)
    d2, arg = ox.mul_(ox).addcmul_(oy, oy).min(dim=-1)
    return d2.sqrt_(), arg, t.gather(-1, arg.unsqueeze(-1)).squeeze(-1)


def edge_left(
    px: torch.Tensor,
    py: torch.Tensor,
    seg: torch.Tensor,
    t: torch.Tensor,
    edges: torch.Tensor,
    prev: torch.Tensor,
    nxt: torch.Tensor,
) -> torch.Tensor:
    """Whether points lie on the road side (left) of their nearest edge segment ``seg`` (module docstring).

    ``edges`` is ``(4, S)`` ``ax, ay, ex, ey``; ``prev``/``nxt`` ``(S,)`` long neighbours (-1: none);
    ``seg`` and ``t`` are the nearest segment and the projection on it, shaped like the points.
    """
    ax, ay, ex, ey = edges

    def cross(i: torch.Tensor) -> torch.Tensor:
        return ex[i] * (py - ay[i]) - ey[i] * (px - ax[i])

    c_j = cross(seg)
    at_start = (t <= 0.0) & (prev[seg] >= 0)
    at_end = (t >= 1.0) & (nxt[seg] >= 0)
    k = torch.where(at_start, prev[seg], torch.where(at_end, nxt[seg], seg))
    c_k = cross(k)
    # Turn at the shared vertex: e_prev x e_next, with (prev, next) = (k, seg) at a start, (seg, k) at an end.
    turn = ex[k] * ey[seg] - ey[k] * ex[seg]
    turn = torch.where(at_end, -turn, turn)
    at_vertex = at_start | at_end
    both, either = (c_j > 0) & (c_k > 0), (c_j > 0) | (c_k > 0)
    return torch.where(at_vertex, torch.where(turn > 0, both, either), c_j > 0)


def inside_ring(px: torch.Tensor, py: torch.Tensor, ring: torch.Tensor) -> torch.Tensor:
    """Even-odd test of points ``[...]`` against one closed ring ``(n + 1, 2)``."""
    ax, ay = ring[:-1, 0], ring[:-1, 1]
    bx, by = ring[1:, 0], ring[1:, 1]
    x, y = px.unsqueeze(-1), py.unsqueeze(-1)
    straddle = (ay > y) != (by > y)
    x_cross = ax + (y - ay) * (bx - ax) / torch.where(by == ay, torch.ones_like(by), by - ay)
    return ((straddle & (x < x_cross)).sum(-1) % 2) == 1


# --------------------------------------------------------------------- direct evaluation


def _direct(xy: np.ndarray, fn: Callable[[torch.Tensor], torch.Tensor], pairs: int) -> np.ndarray:
    """Evaluate ``fn`` on points ``(..., 2)`` in float64 chunks of at most ``CHUNK_ELEMENTS`` pairs."""
    pts = torch.from_numpy(np.asarray(xy, dtype=np.float64)).reshape(-1, 2)
    out = torch.empty(len(pts), dtype=torch.float64)
    step = max(1, CHUNK_ELEMENTS // max(1, pairs))
    for lo in range(0, len(pts), step):
        out[lo : lo + step] = fn(pts[lo : lo + step])
    return out.numpy().reshape(np.shape(xy)[:-1])


def lane_signed_distance(roadgraph: RoadGraph, xy: np.ndarray) -> np.ndarray:
    """Direct (brute force, float64) ``f_lane`` at points ``xy`` ``(..., 2)`` -> ``(...)`` m."""
    a, b, hwa, hwb = (torch.from_numpy(x) for x in lane_segments(roadgraph))
    e = b - a

    def fn(p: torch.Tensor) -> torch.Tensor:
        p = p[:, None, :]
        f = segment_field(p[..., 0], p[..., 1], a[:, 0], a[:, 1], e[:, 0], e[:, 1], hwa, hwb - hwa)
        return f.amin(dim=-1)

    return _direct(xy, fn, len(a))


def edge_signed_distance(roadgraph: RoadGraph, xy: np.ndarray) -> np.ndarray:
    """Direct (brute force, float64) ``f_edge`` at points ``xy`` ``(..., 2)``; ``+inf`` without edges."""
    a, b, prev, nxt = edge_segments(roadgraph)
    if len(a) == 0:
        return np.full(np.shape(xy)[:-1], np.inf)
    edges = torch.from_numpy(np.stack((*a.T, *(b - a).T)))
    prev_t, nxt_t = torch.from_numpy(prev), torch.from_numpy(nxt)

    def fn(p: torch.Tensor) -> torch.Tensor:
        px, py = p[:, 0], p[:, 1]
        d, seg, t = nearest_on_segments(px[:, None], py[:, None], *edges)
        return torch.where(edge_left(px, py, seg, t, edges, prev_t, nxt_t), -d, d)

    return _direct(xy, fn, len(a))


def driveway_signed_distance(roadgraph: RoadGraph, xy: np.ndarray) -> np.ndarray:
    """Direct (brute force, float64) ``f_driveway`` at points ``xy`` ``(..., 2)``; ``+inf`` without any."""
    a, b, rings = driveway_segments(roadgraph)
    if len(a) == 0:
        return np.full(np.shape(xy)[:-1], np.inf)
    seg = torch.from_numpy(np.stack((*a.T, *(b - a).T)))
    ring_t = [torch.from_numpy(r) for r in rings]

    def fn(p: torch.Tensor) -> torch.Tensor:
        px, py = p[:, 0], p[:, 1]
        d = nearest_on_segments(px[:, None], py[:, None], *seg)[0]
        inside = torch.zeros_like(d, dtype=torch.bool)
        for r in ring_t:
            inside |= inside_ring(px, py, r)
        return torch.where(inside, -d, d)

    return _direct(xy, fn, len(a))


def drivable_signed_distance(roadgraph: RoadGraph, xy: np.ndarray) -> np.ndarray:
    """Direct (brute force, float64) field ``f`` (module docstring), the reference for the grid."""
    parts = (lane_signed_distance, edge_signed_distance, driveway_signed_distance)
    return np.minimum.reduce([fn(roadgraph, xy) for fn in parts])
