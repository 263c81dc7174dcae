"""Drivable-area distance field: a per-scene grid, built once, sampled every step for all worlds.

The field ``f`` is a signed distance in metres, negative on the drivable area and positive off
it; an agent is off-road when ``max`` over its four box corners of ``f`` exceeds
``DrivingTaskConfig.offroad_tolerance_m`` (WOMD's own off-road test, with our tolerance). It is
the union (pointwise minimum) of three parts::

    f(p) = min( f_edge(p), f_driveway(p), f_lane(p) )

**Road edges** (WOMD ``RoadEdge`` BOUNDARY and MEDIAN polylines) are oriented so that their left
(port) side is on the road, counter-clockwise for closed edges. For every edge segment
``i: a_i -> b_i`` (``e_i = b_i - a_i``)::

    t_i(p) = clamp((p - a_i).e_i / |e_i|^2, 0, 1),   d_i(p) = |p - a_i - t_i e_i|,
    c_i(p) = e_i x (p - a_i)                         (> 0: p is left of the segment's line)
    f_edge(p) = -d_j(p) if p is left of the nearest segment j = argmin_i d_i(p), else +d_j(p)

"Left of the nearest segment" is ``c_j > 0`` when ``0 < t_j < 1``. When the nearest point is a
vertex ``v`` shared with a neighbouring segment ``k`` (``t_j = 0``: ``k`` is the previous segment;
``t_j = 1``: the next), the side follows the turn at ``v``: where the edge turns left
(``e_prev x e_next > 0``, a convex road corner) ``p`` is on the road only if it is left of both
lines (``c_j > 0`` and ``c_k > 0``), where it turns right only if it is left of either. This is
the angle-weighted pseudo-normal test, exact at corners, and WOMD's
``_compute_signed_distance_to_polyline`` rule. Edges whose ends are within 1 m of each other are
closed loops (their first segment's previous segment is the last; a gap is closed by a segment);
the open ends of other edges use their end segment's line, so past the end of a cropped map (or of
a procedural road) the strip between two kerbs' extended lines stays road, up to the grid's margin.
``f_edge = +inf`` in a scene without edges. WOMD also picks the nearest edge in 3D (z stretched
x3) to separate over- and underpasses; road graphs here are 2D, so that is not done.

**Driveways** (WOMD ``Driveway`` polygons, drivable beyond the kerb)::

    f_driveway(p) = -dist(p, boundary) inside some polygon (even-odd rule), +dist(p, boundary) outside

where ``boundary`` is every polygon's closed outline; ``+inf`` without driveways.

**Lane footprints**, per lane centre segment ``a -> b`` (full widths ``w_a``, ``w_b`` at its ends)::

    f_lane(p) = min over segments of ( |p - q(t)| - (w_a + t (w_b - w_a)) / 2 ),
    t = clamp((p - a).(b - a) / |b - a|^2, 0, 1),  q(t) = a + t (b - a)

Negative inside a lane footprint (at a centre line it is minus the half width), zero on its
border, positive off it; each segment's footprint is a capsule (round caps of radius ``w/2``).
In a scene without road edges (a hand-made road graph of lanes alone) the lanes are the whole
drivable area; with edges they keep lanes drivable where a sparse or cropped map has no edge
nearby, or where a lane's estimated width pokes past a kerb.

Kerbside parking, driveways, the inside of intersections (whose connector lanes carry no
boundaries) and shoulders lie between road edges but outside lane footprints: only the edge part
makes them drivable, as WOMD's metric does. Outside every part (and for constant lane widths)
``f`` is the exact Euclidean distance to the drivable area.

Grids are node-based: ``values[r, c]`` is the field at ``origin_xy + (c, r) * resolution_m``
(rows along y, columns along x), so sampling is bilinear between the four surrounding nodes.

**Tolerance.** WOMD's metric calls a box off-road at ``f > 0`` on exact geometry; the driving task
uses ``offroad_tolerance_m = 0.5``. It covers (1) the bilinear error of the 1 m grid at the road's
border: none along straight kerbs, up to about 0.3 m at sharp corners (driveway corners, median
ends; 0.5 m at the cusp of a merge's gore), measured against the direct field; (2) the noise of
real maps and box labels (kerbs digitized to a decimetre or two, cars parked with a wheel on the
kerb), which is what leaves Waymax's logged drivers about 0.3 % off-road at 0. A corner 0.5 m past
a kerb already puts a wheel over it. The cost: a median island narrower than 1 m (a box inside it
is less than 0.5 m deep) can be crossed without a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.plausibility import MAX_SCENE_EXTENT_M
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.tasks.driving.road_distance import (
    CHUNK_ELEMENTS,
    driveway_segments,
    edge_left,
    edge_segments,
    inside_ring,
    lane_segments,
    nearest_on_segments,
    segment_field,
)

MAX_GRID_NODES = int((MAX_SCENE_EXTENT_M + 2 * 20.0 + 1) ** 2)
"""Most nodes of one drivable grid: a map of ``MAX_SCENE_EXTENT_M`` a side (the bound a scene file
is held to) at 1 m with the default 20 m margin, 16.3 M nodes (65 MB)."""

OFFROAD_PAD_M = 100.0
"""Value read outside every grid (and used to pad stacked grids): far off road."""

_TILE = 8
"""Grid nodes per fine tile side when culling segments during the build."""

_COARSE = 4
"""Fine tiles per coarse tile side (the first culling level)."""


@dataclass(frozen=True)
class DrivableGrid:
    """A signed distance field to the drivable area of one scene (see the module docstring).

    Attributes:
        origin_xy: ``(2,)`` float64, scene-frame position of node ``values[0, 0]``, m.
        resolution_m: node spacing, m.
        values: ``(H, W)`` float32 signed distance, m; row ``r`` is ``y = origin_y + r * res``,
            column ``c`` is ``x = origin_x + c * res``.
    """

    origin_xy: np.ndarray
    resolution_m: float
    values: np.ndarray

    def __post_init__(self) -> None:
        """Check shapes once, at construction."""
        if self.origin_xy.shape != (2,):
            raise ValueError(f"DrivableGrid origin_xy must have shape (2,), got {self.origin_xy.shape}")
        if not self.resolution_m > 0.0:
            raise ValueError(f"DrivableGrid resolution_m must be positive, got {self.resolution_m}")
        if self.values.ndim != 2 or min(self.values.shape) < 2 or self.values.dtype != np.float32:
            raise ValueError(
                f"DrivableGrid values must be float32 (H, W) with H, W >= 2, got {self.values.dtype} "
                f"{self.values.shape}"
            )

    def node_xy(self) -> np.ndarray:
        """Scene-frame positions of all nodes, ``(H, W, 2)`` float64, m."""
        h, w = self.values.shape
        xs = self.origin_xy[0] + self.resolution_m * np.arange(w)
        ys = self.origin_xy[1] + self.resolution_m * np.arange(h)
        gx, gy = np.meshgrid(xs, ys)
        return np.stack((gx, gy), axis=-1)


# ------------------------------------------------------------------------------ the grid

_Bounds = Callable[
    [torch.Tensor, torch.Tensor, float, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]
]
"""``bounds(cx, cy, rho, idx)``: lower and upper bounds ``(t, M)`` of segments ``idx`` ``(t, M)``
(``None``: all S segments, ``(t, S)`` bounds) over tiles centred at ``(cx, cy)`` ``(t, 1)`` with
half diagonal ``rho``."""
_TileFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class _Tiles:
    """A node grid split into square tiles of ``size`` nodes; coordinates relative to the grid origin.

    ``cx``, ``cy``: ``(T, 1)`` tile centres (row-major over ``tiles_r`` x ``tiles_c``); ``half``: half
    a tile side; ``rho``: half a tile diagonal.
    """

    size: int
    tiles_r: int
    tiles_c: int
    cx: torch.Tensor
    cy: torch.Tensor
    half: float
    rho: float

    @classmethod
    def make(cls, n_rows: int, n_cols: int, resolution_m: float, size: int) -> _Tiles:
        """Tiles of ``size`` x ``size`` nodes covering an ``n_rows`` x ``n_cols`` grid."""
        tiles_r, tiles_c = -(-n_rows // size), -(-n_cols // size)
        tr, tc = torch.meshgrid(torch.arange(tiles_r), torch.arange(tiles_c), indexing="ij")
        half = 0.5 * (size - 1) * resolution_m
        return cls(
            size=size,
            tiles_r=tiles_r,
            tiles_c=tiles_c,
            cx=(tc.flatten() * size * resolution_m + half).float()[:, None],
            cy=(tr.flatten() * size * resolution_m + half).float()[:, None],
            half=half,
            rho=math.sqrt(2.0) * half,
        )


def _compact(keep: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``idx`` ``(T, M)`` reduced to their ``keep`` entries, left-aligned: ``(T, M')``
    indices (0 in padding slots) and the mask of real slots."""
    counts = keep.sum(dim=1)
    width = max(1, int(counts.max()) if len(counts) else 1)
    slot = torch.cumsum(keep, dim=1) - 1
    rows, cols = keep.nonzero(as_tuple=True)
    out = torch.zeros(len(keep), width, dtype=torch.long)
    out[rows, slot[rows, cols]] = idx[rows, cols]
    return out, torch.arange(width)[None, :] < counts[:, None]


def _cull(
    tiles: _Tiles,
    bounds: _Bounds,
    num_segments: int,
    parents: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """For every tile, the candidate segments that may be the minimum somewhere in it: those whose
    lower bound does not exceed the smallest upper bound. Candidates are all segments, or with
    ``parents = (idx, used, parent)`` row ``parent[t]`` of ``idx``/``used``."""
    step = max(1, CHUNK_ELEMENTS // (num_segments if parents is None else parents[0].shape[1]))
    kept_idx, kept_used = [], []
    for lo in range(0, len(tiles.cx), step):
        cx, cy = tiles.cx[lo : lo + step], tiles.cy[lo : lo + step]
        if parents is None:
            lower, upper = bounds(cx, cy, tiles.rho, None)
            cand = torch.arange(num_segments).expand(len(cx), num_segments)
            keep = lower <= upper.amin(dim=1, keepdim=True) + 1e-3  # slack: float32 rounding
        else:
            rows = parents[2][lo : lo + step]
            cand, ok = parents[0][rows], parents[1][rows]
            lower, upper = bounds(cx, cy, tiles.rho, cand)
            keep = ok & (lower <= torch.where(ok, upper, torch.inf).amin(dim=1, keepdim=True) + 1e-3)
        i, u = _compact(keep, cand)
        kept_idx.append(i)
        kept_used.append(u)
    width = max(i.shape[1] for i in kept_idx)
    pad = torch.nn.functional.pad
    return (
        torch.cat([pad(i, (0, width - i.shape[1])) for i in kept_idx]),
        torch.cat([pad(u, (0, width - u.shape[1])) for u in kept_used]),
    )


def _tiled(
    n_rows: int, n_cols: int, resolution_m: float, num_segments: int, bounds: _Bounds, fn: _TileFn
) -> list[torch.Tensor]:
    """Evaluate a minimum over segments on the node grid, tile by tile, on the segments that can win.

    Two levels: coarse tiles of ``_TILE * _COARSE`` nodes cull all segments by ``bounds``; every fine
    tile of ``_TILE`` nodes then culls its coarse tile's survivors. ``fn(px, py, idx, used)`` gets the
    nodes ``(G, _TILE^2, 1)`` of a group of G fine tiles, their kept segment indices ``(G, M)`` (0 in
    padding slots) and the mask ``used`` ``(G, M)`` of real slots, and returns one or more
    ``(G, _TILE^2)`` values; they come back as ``(n_rows, n_cols)`` grids. Groups hold tiles of
    similar segment counts so that padding stays small.
    """
    coarse = _Tiles.make(n_rows, n_cols, resolution_m, _TILE * _COARSE)
    fine = _Tiles.make(n_rows, n_cols, resolution_m, _TILE)
    c_idx, c_used = _cull(coarse, bounds, num_segments)
    fr, fc = torch.meshgrid(torch.arange(fine.tiles_r), torch.arange(fine.tiles_c), indexing="ij")
    parent = ((fr // _COARSE) * coarse.tiles_c + fc // _COARSE).flatten()
    idx, used = _cull(fine, bounds, num_segments, (c_idx, c_used, parent))

    lr, lc = torch.meshgrid(torch.arange(_TILE), torch.arange(_TILE), indexing="ij")
    local_x = (lc.flatten() * resolution_m).float()
    local_y = (lr.flatten() * resolution_m).float()
    counts = used.sum(dim=1)
    order = torch.argsort(counts)
    sorted_counts = counts[order].tolist()
    outs: list[torch.Tensor] = []
    lo = 0
    while lo < len(order):
        hi = lo + 1
        while hi < len(order) and (hi + 1 - lo) * _TILE * _TILE * sorted_counts[hi] <= CHUNK_ELEMENTS:
            hi += 1
        group = order[lo:hi]
        width = max(1, sorted_counts[hi - 1])
        px = (fine.cx[group] - fine.half + local_x)[:, :, None]
        py = (fine.cy[group] - fine.half + local_y)[:, :, None]
        values = fn(px, py, idx[group, :width], used[group, :width])
        if not outs:
            outs = [torch.empty(len(order), _TILE * _TILE, dtype=v.dtype) for v in values]
        for out, v in zip(outs, values, strict=True):
            out[group] = v
        lo = hi
    grids = []
    for out in outs:
        g = out.reshape(fine.tiles_r, fine.tiles_c, _TILE, _TILE).permute(0, 2, 1, 3)
        grids.append(g.reshape(fine.tiles_r * _TILE, fine.tiles_c * _TILE)[:n_rows, :n_cols])
    return grids


def _node_xy(n_rows: int, n_cols: int, resolution_m: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Node coordinates ``(H, W)`` x and y, float32, relative to the origin."""
    xs = torch.arange(n_cols, dtype=torch.float32) * resolution_m
    ys = torch.arange(n_rows, dtype=torch.float32) * resolution_m
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return gx, gy


def _lane_grid(shape: tuple[int, int, float], roadgraph: RoadGraph, origin: np.ndarray) -> torch.Tensor:
    """``f_lane`` on the grid. Over a tile with centre ``c`` and half diagonal ``rho`` every segment's
    field lies in ``[d(c) - rho - hw_max, d(c) + rho - hw_min]`` (``d``, the distance to the
    segment, is 1-Lipschitz)."""
    a, b, hwa, hwb = lane_segments(roadgraph)
    seg = torch.from_numpy(np.stack((*(a - origin).T, *(b - a).T, hwa, hwb - hwa), axis=0)).float()
    ax, ay, ex, ey, seg_hwa, seg_dhw = seg  # each (S,)

    def bounds(
        cx: torch.Tensor, cy: torch.Tensor, rho: float, i: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        zero = torch.zeros(())
        pick = seg if i is None else seg[:, i]  # (6, S) or (6, t, M)
        d = segment_field(cx, cy, pick[0], pick[1], pick[2], pick[3], zero, zero)
        hw_lo, hw_hi = torch.minimum(pick[4], pick[4] + pick[5]), torch.maximum(pick[4], pick[4] + pick[5])
        return d - rho - hw_hi, d + rho - hw_lo

    def fn(px: torch.Tensor, py: torch.Tensor, idx: torch.Tensor, used: torch.Tensor) -> tuple[torch.Tensor]:
        # Padding slots get half width -inf, so their field is +inf and never the minimum.
        hwa_g = torch.where(used, seg_hwa[idx], -torch.inf)
        pick = [x[idx][:, None, :] for x in (ax, ay, ex, ey)] + [hwa_g[:, None, :], seg_dhw[idx][:, None, :]]
        return (segment_field(px, py, *pick).amin(dim=-1),)

    return _tiled(*shape, len(ax), bounds, fn)[0]


def _nearest_segment_grid(
    shape: tuple[int, int, float], seg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distance to the nearest of segments ``seg`` ``(4, S)`` (``ax, ay, ex, ey``, origin-relative),
    its index and the projection ``t`` on it, each ``(H, W)``. Over a tile the distance to a segment
    lies in ``[d(c) - rho, d(c) + rho]``."""
    ax, ay, ex, ey = seg

    def bounds(
        cx: torch.Tensor, cy: torch.Tensor, rho: float, i: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        zero = torch.zeros(())
        pick = seg if i is None else seg[:, i]  # (4, S) or (4, t, M)
        d = segment_field(cx, cy, pick[0], pick[1], pick[2], pick[3], zero, zero)
        return d - rho, d + rho

    def fn(
        px: torch.Tensor, py: torch.Tensor, idx: torch.Tensor, used: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        # Padding slots are moved 1e9 m away, so they are never the nearest.
        far = torch.where(used, 0.0, 1e9)[:, None, :]
        pick = [ax[idx][:, None, :] + far, ay[idx][:, None, :], ex[idx][:, None, :], ey[idx][:, None, :]]
        d, arg, t = nearest_on_segments(px, py, *pick)
        return d, torch.gather(idx, 1, arg), t

    d, i, t = _tiled(*shape, len(ax), bounds, fn)
    return d, i, t


def _edge_grid(
    shape: tuple[int, int, float], roadgraph: RoadGraph, origin: np.ndarray
) -> torch.Tensor | None:
    """``f_edge`` on the grid, or ``None`` without road edges."""
    a, b, prev, nxt = edge_segments(roadgraph)
    if len(a) == 0:
        return None
    edges = torch.from_numpy(np.stack((*(a - origin).T, *(b - a).T))).float()
    d, seg, t = _nearest_segment_grid(shape, edges)
    gx, gy = _node_xy(*shape)
    left = edge_left(gx, gy, seg, t, edges, torch.from_numpy(prev), torch.from_numpy(nxt))
    return torch.where(left, -d, d)


def _driveway_grid(
    shape: tuple[int, int, float], roadgraph: RoadGraph, origin: np.ndarray
) -> torch.Tensor | None:
    """``f_driveway`` on the grid, or ``None`` without driveways; the inside test runs only on the
    nodes of each polygon's bounding box."""
    a, b, rings = driveway_segments(roadgraph)
    if len(a) == 0:
        return None
    d = _nearest_segment_grid(shape, torch.from_numpy(np.stack((*(a - origin).T, *(b - a).T))).float())[0]
    n_rows, n_cols, res = shape
    gx, gy = _node_xy(*shape)
    inside = torch.zeros_like(d, dtype=torch.bool)
    for ring in rings:
        r = ring - origin
        c0, r0 = (max(0, math.floor(v / res)) for v in r.min(axis=0))
        c1, r1 = (math.ceil(v / res) + 1 for v in r.max(axis=0))
        block = (slice(r0, min(r1, n_rows)), slice(c0, min(c1, n_cols)))
        inside[block] ^= inside_ring(gx[block], gy[block], torch.from_numpy(r).float())
    return torch.where(inside, -d, d)


def check_grid_size(width_m: float, height_m: float, resolution_m: float) -> None:
    """``SceneFormatError`` (a ``UserError``) naming the extent and the bound when a grid of
    ``width_m`` x ``height_m`` at ``resolution_m`` would hold more than :data:`MAX_GRID_NODES`
    nodes: checked before anything is allocated (a map moved 9e5 m away asked for 101 GB)."""
    nodes = (width_m / resolution_m + 1.0) * (height_m / resolution_m + 1.0)
    if not math.isfinite(nodes) or nodes > MAX_GRID_NODES:
        raise SceneFormatError(
            f"the road graph spans {width_m:.6g} m x {height_m:.6g} m with its margin: a drivable grid"
            f" of {nodes:.3g} nodes at {resolution_m:g} m ({4 * nodes / 1e9:.3g} GB); expected at most"
            f" {MAX_GRID_NODES:,} nodes (a map of at most {MAX_SCENE_EXTENT_M:g} m a side)"
        )


def build_drivable_grid(
    roadgraph: RoadGraph, resolution_m: float = 1.0, margin_m: float = 20.0
) -> DrivableGrid:
    """Sample the drivable-area field ``f`` (module docstring) on a grid over the road graph
    bounds plus ``margin_m``.

    Args:
        roadgraph: the scene's road graph (lanes, road edges and driveways give the field).
        resolution_m: node spacing, m.
        margin_m: extra extent on every side of :meth:`RoadGraph.bounds`, m.

    Each part is a minimum over segments, computed tile by tile: from a tile centre's distance to a
    segment, bounds over the whole tile (the distance is 1-Lipschitz) rule out the segments that
    cannot be the minimum anywhere in it, first for coarse 32 x 32-node tiles over all segments,
    then for their 8 x 8-node tiles over the coarse survivors; the rest are evaluated exactly, in
    float32 relative to the origin, in chunks of tiles. The edge sign and the driveway inside test
    then run once per node. About 1 s for 20,000 edge points over 470 m x 470 m on one CPU thread.
    """
    if not resolution_m > 0.0 or margin_m < 0.0:
        raise ValueError(f"need resolution_m > 0 and margin_m >= 0, got {resolution_m}, {margin_m}")
    if not roadgraph.lane_valid.any():
        raise ValueError("build_drivable_grid: the road graph has no lane segments (no drivable area)")
    xmin, ymin, xmax, ymax = roadgraph.bounds()
    origin = np.array([xmin - margin_m, ymin - margin_m], dtype=np.float64)
    check_grid_size(xmax - xmin + 2.0 * margin_m, ymax - ymin + 2.0 * margin_m, resolution_m)
    n_cols = max(2, math.ceil((xmax - xmin + 2.0 * margin_m) / resolution_m - 1e-9) + 1)
    n_rows = max(2, math.ceil((ymax - ymin + 2.0 * margin_m) / resolution_m - 1e-9) + 1)
    shape = (n_rows, n_cols, float(resolution_m))
    field = _lane_grid(shape, roadgraph, origin)
    for part in (_edge_grid(shape, roadgraph, origin), _driveway_grid(shape, roadgraph, origin)):
        if part is not None:
            field = torch.minimum(field, part)
    return DrivableGrid(origin_xy=origin, resolution_m=float(resolution_m), values=field.numpy().copy())


@dataclass(frozen=True)
class GridStack:
    """Drivable grids of ``S`` scenes packed one after another, sampled for many worlds at once.

    Packed, not padded: memory grows with the total number of nodes, not scenes × the largest grid.
    Node values are stored as float16 (half the memory of a pool of thousands of real maps): the
    rounding is below 0.25 mm for |f| < 1 m, where off-road is decided (tolerance 0.5 m), and below
    1/2048 of |f| anywhere; sampling interpolates in float32.

    Attributes:
        values: ``[N]`` float16 every grid's nodes, row-major, grid after grid, m.
        base: ``[S]`` int64 position of each grid's node ``[0, 0]`` in ``values``.
        origin_xy: ``[S, 2]`` float32 position of each grid's node ``[0, 0]``, m.
        resolution_m: ``[S]`` float32 node spacing, m.
        shape_hw: ``[S, 2]`` int64 number of rows and columns of each grid.
        pad_value_m: value read outside a grid (far off road).
    """

    values: torch.Tensor
    base: torch.Tensor
    origin_xy: torch.Tensor
    resolution_m: torch.Tensor
    shape_hw: torch.Tensor
    pad_value_m: float = OFFROAD_PAD_M

    @classmethod
    def from_grids(
        cls,
        grids: Sequence[DrivableGrid],
        device: torch.device | str = "cpu",
        pad_value_m: float = OFFROAD_PAD_M,
    ) -> GridStack:
        """Pack grids (scene id = position in ``grids``)."""
        if not grids:
            raise ValueError("GridStack needs at least one grid")
        return cls.pack([(g.origin_xy, g.resolution_m, g.values) for g in grids], device, pad_value_m)

    @classmethod
    def pack(
        cls,
        parts: Sequence[tuple[np.ndarray, float, np.ndarray]],
        device: torch.device | str = "cpu",
        pad_value_m: float = OFFROAD_PAD_M,
    ) -> GridStack:
        """Pack ``(origin_xy (2,), resolution_m, values (H, W))`` per scene (values of any float
        dtype, stored as float16), filled into one preallocated array."""
        if not parts:
            raise ValueError("GridStack needs at least one grid")
        sizes = np.array([v.size for _, _, v in parts], dtype=np.int64)
        base = np.concatenate([[0], np.cumsum(sizes)])
        values = np.empty(int(base[-1]), dtype=np.float16)
        for (_, _, v), lo, hi in zip(parts, base[:-1], base[1:], strict=True):
            values[lo:hi] = v.reshape(-1)
        return cls(
            values=torch.from_numpy(values).to(device),
            base=torch.from_numpy(base[:-1].copy()).to(device),
            origin_xy=torch.tensor(np.stack([o for o, _, _ in parts]), dtype=torch.float32, device=device),
            resolution_m=torch.tensor([r for _, r, _ in parts], dtype=torch.float32, device=device),
            shape_hw=torch.tensor([v.shape for _, _, v in parts], dtype=torch.long, device=device),
            pad_value_m=pad_value_m,
        )

    def to(self, device: torch.device | str) -> GridStack:
        """The same stack on another device."""
        return GridStack(
            values=self.values.to(device),
            base=self.base.to(device),
            origin_xy=self.origin_xy.to(device),
            resolution_m=self.resolution_m.to(device),
            shape_hw=self.shape_hw.to(device),
            pad_value_m=self.pad_value_m,
        )

    def grid(self, scene_id: int) -> np.ndarray:
        """Scene ``scene_id``'s node values as stored, ``(H, W)`` float32 (a copy), m."""
        h, w = (int(v) for v in self.shape_hw[scene_id])
        start = int(self.base[scene_id])
        return self.values[start : start + h * w].reshape(h, w).float().cpu().numpy()

    def nbytes(self) -> int:
        """Bytes held by the stack's tensors."""
        parts = (self.values, self.base, self.origin_xy, self.resolution_m, self.shape_hw)
        return sum(int(x.numel() * x.element_size()) for x in parts)

    def sample(self, scene_ids: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        """Bilinear field value at scene-frame points, m, shape ``[...]``.

        Args:
            scene_ids: ``[...]`` int64 index of each point's scene in the stack.
            xy: ``[..., 2]`` scene-frame points, m.

        Points outside their scene's grid (or NaN) read ``pad_value_m``. The four surrounding
        nodes are fetched with one gather from the packed values.
        """
        res = self.resolution_m[scene_ids]
        gx = (xy[..., 0] - self.origin_xy[scene_ids, 0]) / res
        gy = (xy[..., 1] - self.origin_xy[scene_ids, 1]) / res
        n_cols = self.shape_hw[scene_ids, 1]
        last_r = (self.shape_hw[scene_ids, 0] - 1).to(gx.dtype)
        last_c = (n_cols - 1).to(gx.dtype)
        inside = (gx >= 0.0) & (gy >= 0.0) & (gx <= last_c) & (gy <= last_r)
        gx = torch.minimum(torch.nan_to_num(gx).clamp(min=0.0), last_c)
        gy = torch.minimum(torch.nan_to_num(gy).clamp(min=0.0), last_r)
        c0 = torch.minimum(gx.floor(), last_c - 1.0)
        r0 = torch.minimum(gy.floor(), last_r - 1.0)
        fx, fy = gx - c0, gy - r0
        base = self.base[scene_ids] + r0.long() * n_cols + c0.long()
        one = torch.ones_like(n_cols)
        offsets = torch.stack((torch.zeros_like(n_cols), one, n_cols, n_cols + one), dim=-1)
        corner = self.values[base[..., None] + offsets].to(gx.dtype)  # [..., 4]
        top = corner[..., 0] + fx * (corner[..., 1] - corner[..., 0])
        bottom = corner[..., 2] + fx * (corner[..., 3] - corner[..., 2])
        value = top + fy * (bottom - top)
        return torch.where(inside, value, torch.full_like(value, self.pad_value_m))
