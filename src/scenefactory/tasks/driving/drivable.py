"""Drivable-area distance field: a per-scene grid, built once, sampled every step for all worlds.

The field is the signed distance, in metres, to the union of lane footprints, written per lane
centre segment ``a -> b`` (full widths ``w_a``, ``w_b`` at its ends)::

    sdf(p) = min over segments of ( |p - q(t)| - (w_a + t (w_b - w_a)) / 2 ),
    t = clamp((p - a).(b - a) / |b - a|^2, 0, 1),  q(t) = a + t (b - a)

Negative inside a lane footprint (at a centre line it is minus the half width), zero on its
border, positive off road. Each segment's footprint is a capsule, so lanes end in round caps of
radius ``w/2`` beyond their last point. Outside all footprints (and for constant widths) this is
the exact Euclidean distance to the drivable area; inside, it is the depth into the deepest lane.

Grids are node-based: ``values[r, c]`` is the field at ``origin_xy + (c, r) * resolution_m``
(rows along y, columns along x), so sampling is bilinear between the four surrounding nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from scenefactory.scenes.roadgraph import RoadGraph

OFFROAD_PAD_M = 100.0
"""Value read outside every grid (and used to pad stacked grids): far off road."""

_TILE = 16
"""Grid nodes per tile side when culling segments during the build."""

_CHUNK_ELEMENTS = 1 << 22
"""Upper bound on node x segment pairs evaluated at once during the build."""


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


def _segment_field(
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


def lane_signed_distance(roadgraph: RoadGraph, xy: np.ndarray) -> np.ndarray:
    """Direct (brute force, float64) evaluation of the field at points ``xy`` ``(..., 2)`` -> ``(...)`` m.

    The reference that :func:`build_drivable_grid` is tested against; too slow for every step.
    """
    a, b, hwa, hwb = (torch.from_numpy(x) for x in lane_segments(roadgraph))
    pts = torch.from_numpy(np.asarray(xy, dtype=np.float64)).reshape(-1, 2)
    e = b - a
    out = torch.empty(len(pts), dtype=torch.float64)
    step = max(1, _CHUNK_ELEMENTS // max(1, len(a)))
    for lo in range(0, len(pts), step):
        p = pts[lo : lo + step, None, :]
        f = _segment_field(p[..., 0], p[..., 1], a[:, 0], a[:, 1], e[:, 0], e[:, 1], hwa, hwb - hwa)
        out[lo : lo + step] = f.amin(dim=-1)
    return out.numpy().reshape(np.shape(xy)[:-1])


def build_drivable_grid(
    roadgraph: RoadGraph, resolution_m: float = 1.0, margin_m: float = 20.0
) -> DrivableGrid:
    """Sample the drivable-area field on a grid over the road graph bounds plus ``margin_m``.

    Args:
        roadgraph: the scene's road graph (lanes give the field; lines and edges only the bounds).
        resolution_m: node spacing, m.
        margin_m: extra extent on every side of :meth:`RoadGraph.bounds`, m.

    The grid is split into 16 x 16-node tiles. For a tile with centre ``c`` and half diagonal
    ``rho`` every segment's field lies in ``[d(c) - rho - hw_max, d(c) + rho - hw_min]`` over the
    tile (``d`` is the distance to the segment, 1-Lipschitz); segments whose lower bound exceeds the
    smallest upper bound cannot be the minimum anywhere in the tile and are skipped. The survivors
    are evaluated exactly, in float32 relative to the origin, in chunks of padded tiles.
    """
    if not resolution_m > 0.0 or margin_m < 0.0:
        raise ValueError(f"need resolution_m > 0 and margin_m >= 0, got {resolution_m}, {margin_m}")
    xmin, ymin, xmax, ymax = roadgraph.bounds()
    origin = np.array([xmin - margin_m, ymin - margin_m], dtype=np.float64)
    n_cols = max(2, math.ceil((xmax - xmin + 2.0 * margin_m) / resolution_m - 1e-9) + 1)
    n_rows = max(2, math.ceil((ymax - ymin + 2.0 * margin_m) / resolution_m - 1e-9) + 1)

    a, b, hwa, hwb = lane_segments(roadgraph)
    if len(a) == 0:
        raise ValueError("build_drivable_grid: the road graph has no lane segments (no drivable area)")
    seg = torch.from_numpy(np.stack((*(a - origin).T, *(b - a).T, hwa, hwb - hwa), axis=0)).float()
    ax, ay, ex, ey, seg_hwa, seg_dhw = seg  # each (S,)

    # Tiles and their bounds on every segment's field.
    tiles_r, tiles_c = -(-n_rows // _TILE), -(-n_cols // _TILE)
    tr, tc = torch.meshgrid(torch.arange(tiles_r), torch.arange(tiles_c), indexing="ij")
    half = 0.5 * (_TILE - 1) * resolution_m
    cx = (tc.flatten() * _TILE * resolution_m + half).float()[:, None]
    cy = (tr.flatten() * _TILE * resolution_m + half).float()[:, None]
    rho = math.sqrt(2.0) * half
    dist_c = _segment_field(cx, cy, ax, ay, ex, ey, torch.zeros_like(seg_hwa), torch.zeros_like(seg_dhw))
    hw_min = torch.minimum(seg_hwa, seg_hwa + seg_dhw)
    hw_max = torch.maximum(seg_hwa, seg_hwa + seg_dhw)
    upper = (dist_c + rho - hw_min).amin(dim=1, keepdim=True)
    keep = dist_c - rho - hw_max <= upper + 1e-3  # (T, S); the slack absorbs float32 rounding

    # Node offsets within a tile.
    lr, lc = torch.meshgrid(torch.arange(_TILE), torch.arange(_TILE), indexing="ij")
    local_x = (lc.flatten() * resolution_m).float()
    local_y = (lr.flatten() * resolution_m).float()
    out = torch.empty(tiles_r * tiles_c, _TILE * _TILE)
    counts = keep.sum(dim=1)
    order = torch.argsort(counts)
    sorted_counts = counts[order].tolist()
    lo = 0
    while lo < len(order):
        # Group tiles of similar segment counts (ascending) so that padding stays small.
        hi = lo + 1
        while hi < len(order) and (hi + 1 - lo) * _TILE * _TILE * sorted_counts[hi] <= _CHUNK_ELEMENTS:
            hi += 1
        group = order[lo:hi]
        width = max(1, sorted_counts[hi - 1])
        gkeep = keep[group]
        slot = torch.cumsum(gkeep, dim=1) - 1
        rows, cols = gkeep.nonzero(as_tuple=True)
        idx = torch.zeros(len(group), width, dtype=torch.long)
        idx[rows, slot[rows, cols]] = cols
        used = torch.arange(width)[None, :] < counts[group][:, None]  # (G, M)
        px = (cx[group] - half + local_x)[:, :, None]  # (G, T^2, 1)
        py = (cy[group] - half + local_y)[:, :, None]
        # Padding slots get half width -inf, so their field is +inf and never the minimum.
        hwa_g = torch.where(used, seg_hwa[idx], -torch.inf)
        pick = [x[idx][:, None, :] for x in (ax, ay, ex, ey)] + [hwa_g[:, None, :], seg_dhw[idx][:, None, :]]
        out[group] = _segment_field(px, py, *pick).amin(dim=-1)
        lo = hi
    grid = out.reshape(tiles_r, tiles_c, _TILE, _TILE).permute(0, 2, 1, 3)
    grid = grid.reshape(tiles_r * _TILE, tiles_c * _TILE)[:n_rows, :n_cols]
    return DrivableGrid(origin_xy=origin, resolution_m=float(resolution_m), values=grid.numpy().copy())


@dataclass(frozen=True)
class GridStack:
    """Drivable grids of ``S`` scenes in one padded tensor, sampled for many worlds at once.

    Attributes:
        values: ``[S, Hmax, Wmax]`` float32, m; padded with ``pad_value_m`` past each grid.
        origin_xy: ``[S, 2]`` float32 position of each grid's node ``[0, 0]``, m.
        resolution_m: ``[S]`` float32 node spacing, m.
        shape_hw: ``[S, 2]`` int64 number of rows and columns of each grid.
        pad_value_m: value read outside a grid (far off road).
    """

    values: torch.Tensor
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
        """Stack grids (scene id = position in ``grids``), padding with ``pad_value_m``."""
        if not grids:
            raise ValueError("GridStack needs at least one grid")
        h = max(g.values.shape[0] for g in grids)
        w = max(g.values.shape[1] for g in grids)
        values = np.full((len(grids), h, w), pad_value_m, dtype=np.float32)
        for s, g in enumerate(grids):
            values[s, : g.values.shape[0], : g.values.shape[1]] = g.values
        return cls(
            values=torch.from_numpy(values).to(device),
            origin_xy=torch.tensor(
                np.stack([g.origin_xy for g in grids]), dtype=torch.float32, device=device
            ),
            resolution_m=torch.tensor([g.resolution_m for g in grids], dtype=torch.float32, device=device),
            shape_hw=torch.tensor([g.values.shape for g in grids], dtype=torch.long, device=device),
            pad_value_m=pad_value_m,
        )

    def to(self, device: torch.device | str) -> GridStack:
        """The same stack on another device."""
        return GridStack(
            values=self.values.to(device),
            origin_xy=self.origin_xy.to(device),
            resolution_m=self.resolution_m.to(device),
            shape_hw=self.shape_hw.to(device),
            pad_value_m=self.pad_value_m,
        )

    def sample(self, scene_ids: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        """Bilinear field value at scene-frame points, m, shape ``[...]``.

        Args:
            scene_ids: ``[...]`` int64 index of each point's scene in the stack.
            xy: ``[..., 2]`` scene-frame points, m.

        Points outside their scene's grid (or NaN) read ``pad_value_m``. The four surrounding
        nodes are fetched with one gather from the flattened stack.
        """
        _, h_max, w_max = self.values.shape
        res = self.resolution_m[scene_ids]
        gx = (xy[..., 0] - self.origin_xy[scene_ids, 0]) / res
        gy = (xy[..., 1] - self.origin_xy[scene_ids, 1]) / res
        last_r = (self.shape_hw[scene_ids, 0] - 1).to(gx.dtype)
        last_c = (self.shape_hw[scene_ids, 1] - 1).to(gx.dtype)
        inside = (gx >= 0.0) & (gy >= 0.0) & (gx <= last_c) & (gy <= last_r)
        gx = torch.minimum(torch.nan_to_num(gx).clamp(min=0.0), last_c)
        gy = torch.minimum(torch.nan_to_num(gy).clamp(min=0.0), last_r)
        c0 = torch.minimum(gx.floor(), last_c - 1.0)
        r0 = torch.minimum(gy.floor(), last_r - 1.0)
        fx, fy = gx - c0, gy - r0
        base = (scene_ids * h_max + r0.long()) * w_max + c0.long()
        offsets = torch.tensor([0, 1, w_max, w_max + 1], dtype=torch.long, device=base.device)
        corner = self.values.reshape(-1)[base[..., None] + offsets]  # [..., 4]
        top = corner[..., 0] + fx * (corner[..., 1] - corner[..., 0])
        bottom = corner[..., 2] + fx * (corner[..., 3] - corner[..., 2])
        value = top + fy * (bottom - top)
        return torch.where(inside, value, torch.full_like(value, self.pad_value_m))
