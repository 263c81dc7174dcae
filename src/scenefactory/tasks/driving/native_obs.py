"""The observation's heavy terms as native CPU kernels (numba), threaded over worlds: the road points,
the neighbours, the route ahead, and the drivable field read for the off-road check.

**Road points.** The torch path (:meth:`~scenefactory.tasks.driving.road_index.RoadPointIndex.nearest`,
then :func:`~scenefactory.tasks.driving.observations.road_obs`) gathers every candidate of every
query's search disc into a padded ``(W, A, L)`` batch (L the batch's largest disc), selects the ``k``
smallest and gathers their features: most of a kinematic step on real maps. Here one pass per agent
walks the disc's rows of cells, nearest row first, pruning rows and columns that lie farther than the
``k``-th distance found so far (float64, a centimetre of margin), and keeps the ``k`` nearest in a
small sorted buffer; a second pass writes the features. The search disc is computed as the torch
path computes it; it only decides which points are read, and the index is exact for any disc that
covers it (``road_index``'s module docstring).

**Same numbers as the torch path, bit for bit** (``tests/tasks/test_native_obs.py``). Squared
distances, ego-frame coordinates, tangents, features are the torch path's float32 operations in its
order (no fast-math: nothing is fused); ``cos``/``sin`` and square roots are taken from torch (MKL's
square root is not always the correctly rounded one numba would take). Equal distances are ordered
by point (object) id in both paths (``geometry.smallest_k``), which is the order read here.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from scenefactory.tasks.driving.drivable import GridStack
from scenefactory.tasks.driving.native import numba_threads
from scenefactory.tasks.driving.observations import NEIGHBOR_FEATURES
from scenefactory.tasks.driving.road_index import RADIUS_STEPS, RoadPointIndex


@numba.njit(inline="always")
def _sort_by_distance_then_id(d: np.ndarray, ids: np.ndarray, n: int) -> None:
    """Insertion sort of ``d[:n]`` (with ``ids``) by distance, then id."""
    for i in range(1, n):
        x, xi = d[i], ids[i]
        j = i
        while j > 0 and (x < d[j - 1] or (x == d[j - 1] and xi < ids[j - 1])):
            d[j] = d[j - 1]
            ids[j] = ids[j - 1]
            j -= 1
        d[j] = x
        ids[j] = xi


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _nearest_pass(
    xy: np.ndarray,
    origin: np.ndarray,
    shape_rc: np.ndarray,
    cell_base: np.ndarray,
    cell_start: np.ndarray,
    radius: np.ndarray,
    cell_m: np.float32,
    max_radius: int,
    scene_ids: np.ndarray,
    pos: np.ndarray,
    ids_out: np.ndarray,
    d2_out: np.ndarray,
) -> None:
    """For every query ``pos[w, a]``: the ``k`` nearest points of its scene's disc, nearest first
    (``ids_out`` int64, ``d2_out`` float32 squared distances, ``+inf`` past the points found)."""
    n_w, n_a = pos.shape[0], pos.shape[1]
    k = ids_out.shape[2]
    inf = np.float32(np.inf)
    zero, half, step = np.float32(0.0), np.float32(0.5), np.float32(RADIUS_STEPS)
    slack = np.float32(1e-4)
    cm, margin = float(cell_m), 0.01
    for w in numba.prange(n_w):
        s = scene_ids[w]
        rows, cols, base = shape_rc[s, 0], shape_rc[s, 1], cell_base[s]
        ox, oy = origin[s, 0], origin[s, 1]
        best_d = np.empty(k, dtype=np.float32)
        best_i = np.empty(k, dtype=np.int64)
        for a in range(n_a):
            qx, qy = pos[w, a, 0], pos[w, a, 1]
            lx, ly = qx - ox, qy - oy
            if lx != lx:
                lx = zero
            if ly != ly:
                ly = zero
            col = min(max(math.floor(lx / cell_m), 0), cols - 1)
            row = min(max(math.floor(ly / cell_m), 0), rows - 1)
            r = np.float32(radius[base + row * cols + col]) / step
            lx64, ly64 = float(qx) - float(ox), float(qy) - float(oy)
            for j in range(k):
                best_d[j] = inf
                best_i[j] = 0
            found = 0
            for step_o in range(2 * max_radius + 1):  # rows nearest first: 0, -1, +1, -2, +2, ...
                o = (step_o + 1) // 2 * (1 if step_o % 2 == 0 else -1)
                gap = max(np.float32(abs(o)) - half, zero)
                rr = row + o
                if not (r + slack >= gap and rr >= 0 and rr < rows):
                    continue
                h = math.sqrt(max(r * r - gap * gap, zero))
                reach = max(math.ceil(np.float32(h) - half + slack), 0)
                c0 = max(col - reach, 0)
                c1 = min(col + reach, cols - 1)
                if found == k:  # prune by the k-th distance so far (float64, a centimetre of margin)
                    limit = math.sqrt(float(best_d[k - 1])) + margin
                    gy = max(rr * cm - ly64, ly64 - (rr + 1) * cm, 0.0)
                    if gy > limit:
                        continue
                    hx = math.sqrt(limit * limit - gy * gy)
                    c0 = max(c0, math.floor((lx64 - hx) / cm))
                    c1 = min(c1, math.floor((lx64 + hx) / cm))
                    if c0 > c1:
                        continue
                first = base + rr * cols
                for p in range(cell_start[first + c0], cell_start[first + c1 + 1]):
                    dx = xy[p, 0] - qx
                    dy = xy[p, 1] - qy
                    d2 = dx * dx + dy * dy
                    if found < k:  # the first k unsorted, sorted once when full
                        best_d[found] = d2
                        best_i[found] = p
                        found += 1
                        if found == k:
                            _sort_by_distance_then_id(best_d, best_i, k)
                        continue
                    if d2 > best_d[k - 1] or (d2 == best_d[k - 1] and p > best_i[k - 1]):
                        continue
                    j = k - 1
                    # by distance, then point id: the candidates' order in the torch path
                    while j > 0 and (d2 < best_d[j - 1] or (d2 == best_d[j - 1] and p < best_i[j - 1])):
                        best_d[j] = best_d[j - 1]
                        best_i[j] = best_i[j - 1]
                        j -= 1
                    best_d[j] = d2
                    best_i[j] = p
            if found < k:
                _sort_by_distance_then_id(best_d, best_i, found)
            for j in range(k):
                d2_out[w, a, j] = best_d[j]
                ids_out[w, a, j] = best_i[j]


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _feature_pass(
    xy: np.ndarray,
    feat: np.ndarray,
    pos: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    ids: np.ndarray,
    dist: np.ndarray,
    range_m: np.float32,
    out: np.ndarray,
) -> None:
    """``out[w, a, j * 8 : (j + 1) * 8]``: point ``j``'s features as ``observations.road_obs`` writes
    them (zeros where it is absent or beyond ``range_m``)."""
    n_w, n_a, k = ids.shape[0], ids.shape[1], ids.shape[2]
    n_types = feat.shape[1] - 2
    zero, one = np.float32(0.0), np.float32(1.0)
    for w in numba.prange(n_w):
        for a in range(n_a):
            c, s = cos[w, a], sin[w, a]
            qx, qy = pos[w, a, 0], pos[w, a, 1]
            for j in range(k):
                o = j * (4 + n_types + 1)
                d = dist[w, a, j]
                if not d <= range_m:  # +inf (no point) or out of range; NaN never (finite d2)
                    for f in range(4 + n_types + 1):
                        out[w, a, o + f] = zero
                    continue
                p = ids[w, a, j]
                dx = xy[p, 0] - qx
                dy = xy[p, 1] - qy
                out[w, a, o] = (c * dx + s * dy) / range_m
                out[w, a, o + 1] = (c * dy - s * dx) / range_m
                tx, ty = feat[p, 0], feat[p, 1]
                out[w, a, o + 2] = c * tx + s * ty
                out[w, a, o + 3] = -s * tx + c * ty
                for f in range(n_types):
                    out[w, a, o + 4 + f] = feat[p, 2 + f]
                out[w, a, o + 4 + n_types] = one


class NativeRoadObs:
    """The road observation of :meth:`RoadPointIndex.nearest` + ``observations.road_obs`` for one
    index, natively (module docstring). Holds the index's arrays as numpy views, features in float32
    (the float16 values converted exactly, once)."""

    def __init__(self, index: RoadPointIndex) -> None:
        if index.xy.device.type != "cpu":
            raise ValueError(f"native road observations run on the CPU, the index is on {index.xy.device}")
        self.index = index
        self._xy = index.xy.contiguous().numpy()
        self._feat = index.feat.float().contiguous().numpy()
        self._origin = index.origin_xy.contiguous().numpy()
        self._shape = index.shape_rc.contiguous().numpy()
        self._base = index.cell_base.contiguous().numpy()
        self._start = index.cell_start.contiguous().numpy()
        self._radius = index.radius.contiguous().numpy()

    def __call__(
        self, scene_ids: torch.Tensor, pos_xy: torch.Tensor, yaw: torch.Tensor, k: int, range_m: float
    ) -> torch.Tensor:
        """``(W, A, k * 8)`` float32: the road term of the observation of agents at ``pos_xy``
        ``(W, A, 2)`` heading ``yaw`` ``(W, A)`` in worlds of scenes ``scene_ids`` ``(W,)``."""
        ix = self.index
        if k > ix.k:
            raise ValueError(f"the road index answers up to {ix.k} nearest points, asked for {k}")
        w, a = pos_xy.shape[:2]
        pos = pos_xy.detach().contiguous().numpy()
        ids = torch.zeros((w, a, k), dtype=torch.int64)
        d2 = torch.full((w, a, k), torch.inf, dtype=torch.float32)
        cos, sin = torch.cos(yaw), torch.sin(yaw)
        out = torch.empty((w, a, k * (self._feat.shape[1] + 3)), dtype=torch.float32)
        with numba_threads():
            if self._xy.shape[0]:
                _nearest_pass(
                    self._xy, self._origin, self._shape, self._base, self._start, self._radius,
                    np.float32(ix.cell_m), ix.max_radius, scene_ids.contiguous().numpy(), pos,
                    ids.numpy(), d2.numpy(),
                )  # fmt: skip
            dist = d2.sqrt_()  # torch's square roots (module docstring)
            _feature_pass(
                self._xy, self._feat, pos, cos.contiguous().numpy(), sin.contiguous().numpy(),
                ids.numpy(), dist.numpy(), np.float32(range_m), out.numpy(),
            )  # fmt: skip
        return out


# ------------------------------------------------------------------------------------ neighbours


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _neighbor_select_pass(
    pos: np.ndarray, active: np.ndarray, range2: np.float32, idx_out: np.ndarray, valid_out: np.ndarray
) -> None:
    """``observations.neighbor_select``: the ``m`` nearest other active objects of each of the ``K``
    agents within range, nearest first, equal squared distances in object order."""
    n_w, n_obj = pos.shape[0], pos.shape[1]
    k, m = idx_out.shape[1], idx_out.shape[2]
    inf = np.float32(np.inf)
    for w in numba.prange(n_w):
        best_d = np.empty(m, dtype=np.float32)
        best_i = np.empty(m, dtype=np.int64)
        for a in range(k):
            ax, ay = pos[w, a, 0], pos[w, a, 1]
            found = 0
            for j in range(m):
                best_d[j] = inf
                best_i[j] = 0
            for b in range(n_obj):
                if b == a or not active[w, b]:
                    continue
                dx = pos[w, b, 0] - ax
                dy = pos[w, b, 1] - ay
                d2 = dx * dx + dy * dy
                if not d2 <= range2:
                    continue
                if found == m and not d2 < best_d[m - 1]:
                    continue
                j = min(found, m - 1)
                while j > 0 and d2 < best_d[j - 1]:
                    best_d[j] = best_d[j - 1]
                    best_i[j] = best_i[j - 1]
                    j -= 1
                best_d[j] = d2
                best_i[j] = b
                if found < m:
                    found += 1
            for j in range(m):
                idx_out[w, a, j] = best_i[j]
                valid_out[w, a, j] = j < found


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _neighbor_feature_pass(
    pos: np.ndarray,
    vel: np.ndarray,
    length: np.ndarray,
    width: np.ndarray,
    ttc: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    rel_sin: np.ndarray,
    rel_cos: np.ndarray,
    idx: np.ndarray,
    valid: np.ndarray,
    range_m: np.float32,
    out: np.ndarray,
) -> None:
    """``observations.neighbor_features``, written into ``out`` (W, K, m * 10)."""
    n_w, k, m = idx.shape[0], idx.shape[1], idx.shape[2]
    zero, one, ten, five = np.float32(0.0), np.float32(1.0), np.float32(10.0), np.float32(5.0)
    for w in numba.prange(n_w):
        for a in range(k):
            c, s = cos[w, a], sin[w, a]
            for j in range(m):
                o = j * NEIGHBOR_FEATURES
                if not valid[w, a, j]:
                    for f in range(NEIGHBOR_FEATURES):
                        out[w, a, o + f] = zero
                    continue
                b = idx[w, a, j]
                dx = pos[w, b, 0] - pos[w, a, 0]
                dy = pos[w, b, 1] - pos[w, a, 1]
                out[w, a, o] = (c * dx + s * dy) / range_m
                out[w, a, o + 1] = (c * dy - s * dx) / range_m
                out[w, a, o + 2] = rel_sin[w, a, j]
                out[w, a, o + 3] = rel_cos[w, a, j]
                rvx = vel[w, b, 0] - vel[w, a, 0]
                rvy = vel[w, b, 1] - vel[w, a, 1]
                out[w, a, o + 4] = (c * rvx + s * rvy) / ten
                out[w, a, o + 5] = (-s * rvx + c * rvy) / ten
                out[w, a, o + 6] = length[w, b] / five
                out[w, a, o + 7] = width[w, b] / five
                out[w, a, o + 8] = min(max(ttc[w, a, b] / ten, zero), one)
                out[w, a, o + 9] = one


def native_neighbor_obs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    ttc_s: torch.Tensor,
    m: int,
    range_m: float,
) -> torch.Tensor:
    """:func:`~scenefactory.tasks.driving.observations.neighbor_obs` natively, bit for bit (CPU float32
    tensors): the selection and the features in numba, the ``sin``/``cos`` of the headings in torch."""
    w, k = ttc_s.shape[:2]
    pos = pos_xy.contiguous().numpy()
    idx = torch.empty((w, k, m), dtype=torch.int64)
    valid = torch.empty((w, k, m), dtype=torch.bool)
    out = torch.empty((w, k, m * NEIGHBOR_FEATURES), dtype=torch.float32)
    with numba_threads():
        range2 = np.float32(range_m * range_m)
        _neighbor_select_pass(pos, active.contiguous().numpy(), range2, idx.numpy(), valid.numpy())
        ego_yaw = yaw[:, :k]
        rel_yaw = torch.gather(yaw.unsqueeze(1).expand(w, k, yaw.shape[1]), 2, idx) - ego_yaw.unsqueeze(-1)
        _neighbor_feature_pass(
            pos, vel_xy.contiguous().numpy(), length.contiguous().numpy(), width.contiguous().numpy(),
            ttc_s.contiguous().numpy(), torch.cos(ego_yaw).contiguous().numpy(),
            torch.sin(ego_yaw).contiguous().numpy(), torch.sin(rel_yaw).numpy(), torch.cos(rel_yaw).numpy(),
            idx.numpy(), valid.numpy(), np.float32(range_m), out.numpy(),
        )  # fmt: skip
    return out


# ------------------------------------------------------------------------------ drivable field

HALF_TO_FLOAT = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
"""Every float16 bit pattern's float32 value (exact): the drivable grids' nodes are read through it."""


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _sample_pass(
    values: np.ndarray,
    lut: np.ndarray,
    base: np.ndarray,
    origin: np.ndarray,
    res: np.ndarray,
    shape_hw: np.ndarray,
    scene_ids: np.ndarray,
    xy: np.ndarray,
    pad: np.float32,
    out: np.ndarray,
) -> None:
    """``GridStack.sample``'s float32 operations per point, in its order (``values`` are the
    float16 nodes' bit patterns, read through ``lut``)."""
    n_w, n_p = xy.shape[0], xy.shape[1]
    zero, one = np.float32(0.0), np.float32(1.0)
    for w in numba.prange(n_w):
        s = scene_ids[w]
        ox, oy, r = origin[s, 0], origin[s, 1], res[s]
        n_cols = shape_hw[s, 1]
        last_r = np.float32(shape_hw[s, 0] - 1)
        last_c = np.float32(n_cols - 1)
        b0 = base[s]
        for p in range(n_p):
            gx = (xy[w, p, 0] - ox) / r
            gy = (xy[w, p, 1] - oy) / r
            inside = gx >= zero and gy >= zero and gx <= last_c and gy <= last_r
            if not inside:
                out[w, p] = pad
                continue
            gx = min(gx, last_c)  # inside: no NaN, no clamp below 0 to do
            gy = min(gy, last_r)
            c0 = min(np.float32(math.floor(gx)), last_c - one)
            r0 = min(np.float32(math.floor(gy)), last_r - one)
            fx, fy = gx - c0, gy - r0
            i = b0 + np.int64(r0) * n_cols + np.int64(c0)
            v00, v01 = lut[values[i]], lut[values[i + 1]]
            v10, v11 = lut[values[i + n_cols]], lut[values[i + n_cols + 1]]
            top = v00 + fx * (v01 - v00)
            bottom = v10 + fx * (v11 - v10)
            out[w, p] = top + fy * (bottom - top)


class NativeGridSample:
    """:meth:`~scenefactory.tasks.driving.drivable.GridStack.sample` natively, bit for bit, for
    points grouped by world (CPU): ``(W,)`` scene ids and ``(W, P, 2)`` points → ``(W, P)``."""

    def __init__(self, grids: GridStack) -> None:
        if grids.values.device.type != "cpu" or grids.values.dtype != torch.float16:
            raise ValueError("native grid sampling reads float16 grids on the CPU")
        self.grids = grids
        self._values = grids.values.contiguous().view(torch.int16).numpy().view(np.uint16)
        self._base = grids.base.contiguous().numpy()
        self._origin = grids.origin_xy.contiguous().numpy()
        self._res = grids.resolution_m.contiguous().numpy()
        self._shape = grids.shape_hw.contiguous().numpy()

    def __call__(self, scene_ids: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        """Field values (m) at ``xy`` ``(W, P, 2)`` of world scenes ``scene_ids`` ``(W,)``."""
        w, p = xy.shape[:2]
        out = torch.empty((w, p), dtype=torch.float32)
        with numba_threads():
            _sample_pass(
                self._values, HALF_TO_FLOAT, self._base, self._origin, self._res, self._shape,
                scene_ids.contiguous().numpy(), xy.contiguous().numpy(), np.float32(self.grids.pad_value_m),
                out.numpy(),
            )  # fmt: skip
        return out


# -------------------------------------------------------------------------------- route ahead


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _lookahead_pass(
    pos: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    route_xy: np.ndarray,
    route_s: np.ndarray,
    s_now: np.ndarray,
    route_end_s: np.ndarray,
    lookahead: np.ndarray,
    out: np.ndarray,
) -> None:
    """``observations.route_lookahead_obs``'s float32 operations per agent and distance, in its order."""
    n_w, n_k, n_r = route_s.shape
    zero, one, eps, scale = np.float32(0.0), np.float32(1.0), np.float32(1e-6), np.float32(30.0)
    for w in numba.prange(n_w):
        for a in range(n_k):
            c, s = cos[w, a], sin[w, a]
            for j in range(lookahead.shape[0]):
                q = min(s_now[w, a] + lookahead[j], route_end_s[w, a])
                i = min(max(np.searchsorted(route_s[w, a], q), 1), n_r - 1)
                s0, s1 = route_s[w, a, i - 1], route_s[w, a, i]
                frac = min(max((q - s0) / max(s1 - s0, eps), zero), one)
                px = route_xy[w, a, i - 1, 0] + frac * (route_xy[w, a, i, 0] - route_xy[w, a, i - 1, 0])
                py = route_xy[w, a, i - 1, 1] + frac * (route_xy[w, a, i, 1] - route_xy[w, a, i - 1, 1])
                dx, dy = px - pos[w, a, 0], py - pos[w, a, 1]
                out[w, a, 2 * j] = (c * dx + s * dy) / scale
                out[w, a, 2 * j + 1] = (c * dy - s * dx) / scale


def native_route_lookahead_obs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    route_xy: torch.Tensor,
    route_s: torch.Tensor,
    s_now: torch.Tensor,
    route_end_s: torch.Tensor,
    lookahead_m: torch.Tensor,
) -> torch.Tensor:
    """:func:`~scenefactory.tasks.driving.observations.route_lookahead_obs` natively, bit for bit
    (CPU float32 tensors; the heading's ``cos``/``sin`` from torch) → ``(W, K, 2n)``."""
    w, k = s_now.shape
    out = torch.empty((w, k, 2 * lookahead_m.shape[0]), dtype=torch.float32)

    def arr(x: torch.Tensor) -> np.ndarray:
        return x.contiguous().numpy()

    with numba_threads():
        _lookahead_pass(
            arr(pos_xy), arr(torch.cos(yaw)), arr(torch.sin(yaw)), arr(route_xy), arr(route_s), arr(s_now),
            arr(route_end_s), arr(lookahead_m), out.numpy(),
        )  # fmt: skip
    return out
