"""A spatial index of the road points of many scenes: exact k-nearest queries whose cost does not grow
with the size of the map, in memory that grows with the map's points and area.

Each scene gets a grid of square cells of side ``c`` over its drivable grid's extent; its points are
stored sorted by cell (row-major), so the points of a run of cells along a row are one contiguous
range (CSR offsets ``cell_start``). All scenes are packed one after another (memory grows with the
total number of points and cells, not scenes × the largest map). Each cell stores one small integer,
its search radius ``R`` (rounded up to a sixteenth of a cell), with

    R = min(range_m + δ, r_k(centre) + 2δ),   δ = c / √2 (half the cell diagonal),

and ``r_k(centre)`` the distance from the cell centre to its k-th nearest point of the scene. The
cells that meet the disc of radius ``R`` about the centre form, row by row, one run of columns each:
row offset ``o`` (in cells) spans columns ``±ceil(h / c - 1/2)`` with ``h = sqrt(R² - g²)`` and
``g = max(0, |o| - 1/2) · c`` the disc's nearest vertical distance to that row.
Exactness: for a query ``q`` in the cell, ``|q - centre| ≤ δ``, so ``r_k(q) ≤ r_k(centre) + δ``; any
of q's k nearest points ``x`` has ``|x - centre| ≤ r_k(q) + δ ≤ r_k(centre) + 2δ``, and any point
within range of q lies within ``range_m + δ`` of the centre. A query reads those row runs (padded to
the largest disc of its batch) instead of the whole map, and returns what the brute-force search
over all points returns (up to the order of near ties; a hair of slack covers float32 rounding at
cell borders). Every cell is indexed (the drivable field is not a true distance everywhere, so it
cannot safely tell where no vehicle goes); positions outside the grid (beyond the drivable grid's
margin) read the nearest border cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree

from scenefactory.scenes.roadgraph import PointType, RoadGraph
from scenefactory.tasks.driving.drivable import DrivableGrid
from scenefactory.tasks.driving.geometry import smallest_k

DEFAULT_CELL_M = 3.0
"""Side of an index cell, m: smaller cells fit the search disc closer (fewer points read per query)
and cost more cells (6 bytes each)."""
NUM_POINT_TYPES = len(PointType)


def resample_polyline(xy: np.ndarray, spacing_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Points every ``spacing_m`` along ``xy`` (n, 2) (ends included) and unit tangents, both (m, 2)."""
    seg = np.diff(xy, axis=0)
    seg_len = np.linalg.norm(seg, axis=1)
    keep = seg_len > 1e-9
    if not keep.any():
        return xy[:1].copy(), np.array([[1.0, 0.0]])
    xy = np.concatenate([xy[:1], xy[1:][keep]], axis=0)
    seg, seg_len = seg[keep], seg_len[keep]
    s = np.concatenate([[0.0], np.cumsum(seg_len)])
    count = max(int(np.floor(s[-1] / spacing_m)), 1) + 1
    query = np.linspace(0.0, s[-1], count)
    idx = np.clip(np.searchsorted(s, query, side="right") - 1, 0, len(seg) - 1)
    frac = ((query - s[idx]) / seg_len[idx])[:, None]
    pts = xy[idx] + frac * seg[idx]
    tangents = seg[idx] / seg_len[idx][:, None]
    return pts, tangents


def roadgraph_points(rg: RoadGraph, spacing_m: float) -> tuple[np.ndarray, np.ndarray]:
    """All sample points of a road graph (lane centres, road lines, road edges, every ``spacing_m``):
    ``xy`` (P, 2) and ``feat`` (P, 5) = unit tangent, a one-hot of :class:`PointType`."""
    groups = (
        (rg.lanes(), PointType.LANE_CENTER),
        (rg.lines(), PointType.ROAD_LINE),
        (rg.edges(), PointType.ROAD_EDGE),
    )
    xys, feats = [], []
    for polys, kind in groups:
        for poly in polys:
            if len(poly) < 2:
                continue
            pts, tan = resample_polyline(poly, spacing_m)
            onehot = np.zeros((len(pts), NUM_POINT_TYPES))
            onehot[:, int(kind)] = 1.0
            xys.append(pts)
            feats.append(np.concatenate([tan, onehot], axis=1))
    return np.concatenate(xys, axis=0), np.concatenate(feats, axis=0)


@dataclass(frozen=True)
class SceneCells:
    """The index of one scene (module docstring): the order that sorts its points by cell, and per
    cell (row-major) the number of points and the search radius in cells."""

    origin_xy: np.ndarray  # (2,) float64 lower-left corner of cell (0, 0), m
    shape_rc: tuple[int, int]  # rows, columns
    cell_m: float  # cell side, m
    order: np.ndarray  # (P,) int64 point ids sorted by cell (stable)
    counts: np.ndarray  # (rows * cols,) int64 points per cell
    radius: np.ndarray  # (rows * cols,) int16 search radius R, sixteenths of a cell (rounded up)


def build_scene_cells(
    xy: np.ndarray,
    grid: DrivableGrid,
    k: int,
    range_m: float,
    cell_m: float = DEFAULT_CELL_M,
) -> SceneCells:
    """The index of one scene's points ``xy`` (P, 2) over ``grid``'s extent (module docstring)."""
    h, w = grid.values.shape
    lo = np.asarray(grid.origin_xy, dtype=np.float64)
    hi = lo + np.array([w - 1, h - 1], dtype=np.float64) * grid.resolution_m
    if len(xy):  # cover every point (a grid always does; this keeps the index exact regardless)
        lo, hi = np.minimum(lo, xy.min(axis=0)), np.maximum(hi, xy.max(axis=0))
    cols, rows = (max(1, math.ceil(float(e) / cell_m)) for e in hi - lo)
    cx = lo[0] + (np.arange(cols) + 0.5) * cell_m
    cy = lo[1] + (np.arange(rows) + 0.5) * cell_m
    centres = np.stack(np.meshgrid(cx, cy), axis=-1).reshape(-1, 2)
    half_diag = cell_m / math.sqrt(2.0)
    if len(xy):
        col = np.clip(np.floor((xy[:, 0] - lo[0]) / cell_m), 0, cols - 1).astype(np.int64)
        row = np.clip(np.floor((xy[:, 1] - lo[1]) / cell_m), 0, rows - 1).astype(np.int64)
        cell = row * cols + col
        order = np.argsort(cell, kind="stable")
        counts = np.bincount(cell, minlength=rows * cols).astype(np.int64)
        kk = min(k, len(xy))
        d, _ = cKDTree(xy).query(centres, k=kk)
        r_k = d.reshape(len(d), -1)[:, -1] if kk == k else np.full(len(d), np.inf)
    else:
        order = np.zeros(0, dtype=np.int64)
        counts = np.zeros(rows * cols, dtype=np.int64)
        r_k = np.full(len(centres), np.inf)
    reach = np.minimum(range_m + half_diag, r_k + 2.0 * half_diag)
    reach = np.minimum(reach, float(np.hypot(rows, cols)) * cell_m)  # never past the grid's size
    radius = np.ceil(reach * RADIUS_STEPS / cell_m).astype(np.int64)
    return SceneCells(lo, (rows, cols), float(cell_m), order, counts, radius.astype(np.int16))


RADIUS_STEPS = 16
"""Search radii are stored in sixteenths of a cell (rounded up)."""


@dataclass(frozen=True)
class RoadPointIndex:
    """Packed road points of S scenes, sorted by cell, and their cell index, on one device.

    Attributes:
        xy: ``(N, 2)`` float32 every scene's points, scene after scene, each scene's by cell, m.
        feat: ``(N, F)`` float16 per-point features (tangent, type one-hot).
        point_start: ``(S + 1,)`` int64 offsets of each scene's points in ``xy``.
        origin_xy: ``(S, 2)`` float32 lower-left corner of each scene's cell (0, 0), m.
        shape_rc: ``(S, 2)`` int64 cell rows and columns per scene.
        cell_base: ``(S,)`` int64 position of each scene's first cell.
        cell_start: ``(C + 1,)`` int32 offset in ``xy`` of every cell's first point (CSR).
        radius: ``(C,)`` int16 every cell's search radius, sixteenths of a cell.
        cell_m: cell side, m; ``max_radius``: the largest radius in whole cells (rounded up);
            ``k``, ``range_m``: the largest query the index is exact for.
    """

    xy: torch.Tensor
    feat: torch.Tensor
    point_start: torch.Tensor
    origin_xy: torch.Tensor
    shape_rc: torch.Tensor
    cell_base: torch.Tensor
    cell_start: torch.Tensor
    radius: torch.Tensor
    cell_m: float
    max_radius: int
    k: int
    range_m: float

    @classmethod
    def build(
        cls,
        points: Sequence[tuple[np.ndarray, np.ndarray]],
        cells: Sequence[SceneCells],
        k: int,
        range_m: float,
        device: torch.device | str = "cpu",
    ) -> RoadPointIndex:
        """Pack per-scene ``(xy (P, 2), feat (P, F))`` points and their :class:`SceneCells` (all
        built with one cell side)."""
        sides = {c.cell_m for c in cells}
        if len(sides) != 1:
            raise ValueError(f"scenes indexed with different cell sides {sorted(sides)}")
        sizes = np.array([len(xy) for xy, _ in points], dtype=np.int64)
        point_start = np.concatenate([[0], np.cumsum(sizes)])
        if point_start[-1] >= 2**31:
            raise ValueError(f"{point_start[-1]} road points: more than an int32 offset can name")
        feat_dim = points[0][1].shape[1] if points else 0
        # Filled scene by scene into preallocated arrays: thousands of real maps must not be held
        # twice over (the per-scene parts, then their concatenation in float64).
        xy = np.empty((int(point_start[-1]), 2), dtype=np.float32)
        feat = np.empty((int(point_start[-1]), feat_dim), dtype=np.float16)
        for (p_xy, p_feat), c, lo, hi in zip(points, cells, point_start[:-1], point_start[1:], strict=True):
            xy[lo:hi] = p_xy[c.order]
            feat[lo:hi] = p_feat[c.order]
        n_cells = np.array([len(c.counts) for c in cells], dtype=np.int64)
        cell_start = np.zeros(int(n_cells.sum()) + 1, dtype=np.int32)
        np.cumsum(np.concatenate([c.counts for c in cells]), out=cell_start[1:])
        radius = np.concatenate([c.radius for c in cells]).astype(np.int16, copy=False)

        def t(a: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)

        return cls(
            xy=t(xy),
            feat=t(feat),
            point_start=t(point_start),
            origin_xy=t(np.stack([c.origin_xy for c in cells]), torch.float32),
            shape_rc=t(np.array([c.shape_rc for c in cells], dtype=np.int64)),
            cell_base=t(np.concatenate([[0], np.cumsum(n_cells)[:-1]])),
            cell_start=t(cell_start),
            radius=t(radius),
            cell_m=sides.pop(),
            max_radius=-(-int(radius.max(initial=0)) // RADIUS_STEPS),
            k=k,
            range_m=float(range_m),
        )

    @property
    def num_scenes(self) -> int:
        """S."""
        return int(self.shape_rc.shape[0])

    def nbytes(self) -> int:
        """Bytes held by the index's tensors (points and features included)."""
        parts = [self.xy, self.feat, self.point_start, self.origin_xy, self.shape_rc]
        parts += [self.cell_base, self.cell_start, self.radius]
        return sum(int(x.numel() * x.element_size()) for x in parts)

    def candidates(
        self, scene_ids: torch.Tensor, query_xy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The points of the disc each query ``(W, A, 2)`` of world scenes ``scene_ids`` ``(W,)`` reads:
        ``(ids (W, A, L) int64 global point ids, has (W, A, L) bool)``, L the largest disc of the batch."""
        w, a = query_xy.shape[:2]
        s = scene_ids.view(w, 1).expand(w, a)
        local = torch.nan_to_num(query_xy - self.origin_xy[s])
        rows, cols = self.shape_rc[s, 0], self.shape_rc[s, 1]
        col = torch.minimum((local[..., 0] / self.cell_m).floor().clamp(min=0).long(), cols - 1)
        row = torch.minimum((local[..., 1] / self.cell_m).floor().clamp(min=0).long(), rows - 1)
        base = self.cell_base[s]
        radius = (self.radius[base + row * cols + col].float() / RADIUS_STEPS).unsqueeze(-1)
        offs = torch.arange(-self.max_radius, self.max_radius + 1, device=query_xy.device)
        gap = (offs.abs().float() - 0.5).clamp(min=0.0)  # (2R + 1,) disc rows, cells
        half = (radius * radius - gap * gap).clamp(min=0.0).sqrt()
        # A hair of slack (1e-4 cell) so float32 rounding never drops a column or row the disc meets.
        reach = (half - 0.5 + 1e-4).ceil().clamp(min=0.0).long()  # (W, A, 2R + 1)
        rr = row.unsqueeze(-1) + offs
        in_disc = (radius + 1e-4 >= gap) & (rr >= 0) & (rr < rows.unsqueeze(-1))
        rr = torch.minimum(rr.clamp(min=0), (rows - 1).unsqueeze(-1))
        c0 = (col.unsqueeze(-1) - reach).clamp(min=0)
        c1 = torch.minimum(col.unsqueeze(-1) + reach, (cols - 1).unsqueeze(-1))
        first = base.unsqueeze(-1) + rr * cols.unsqueeze(-1)
        run_start = self.cell_start[first + c0].long()
        run_len = torch.where(in_disc, self.cell_start[first + c1 + 1].long() - run_start, 0)
        cum = run_len.cumsum(-1)
        width = max(1, int(cum[..., -1].max()))  # the batch's largest disc
        j = torch.arange(width, device=query_xy.device).expand(w, a, width)
        run = torch.searchsorted(cum, j.contiguous(), right=True).clamp(max=cum.shape[-1] - 1)
        before = torch.gather(cum - run_len, -1, run)
        ids = torch.gather(run_start, -1, run) + j - before
        has = j < cum[..., -1:]
        return torch.where(has, ids, 0), has

    def nearest(
        self, scene_ids: torch.Tensor, query_xy: torch.Tensor, k: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``k`` nearest points of each query's scene, nearest first (exact for ``k <= self.k``).

        Args:
            scene_ids: ``(W,)`` int64 scene of each world.
            query_xy: ``(W, A, 2)`` query positions in their scene's frame, m.
            k: number of neighbours.

        Returns:
            ``(ids (W, A, k) int64 global point ids, dist (W, A, k) m, valid (W, A, k) bool)``; slots
            beyond the candidates found have ``valid = False``, ``ids = 0`` and ``dist = +inf``.
        """
        if k > self.k:
            raise ValueError(f"the road index answers up to {self.k} nearest points, asked for {k}")
        ids, has = self.candidates(scene_ids, query_xy)
        if self.xy.numel():
            pts = self.xy[ids]
        else:
            pts = torch.zeros((*ids.shape, 2), device=query_xy.device)
        diff = pts - query_xy.unsqueeze(-2)
        d2 = diff[..., 0] * diff[..., 0] + diff[..., 1] * diff[..., 1]
        pos, dist, valid = smallest_k(torch.where(has, d2, torch.inf), k)
        return torch.where(valid, torch.gather(ids, -1, pos), 0), dist, valid
