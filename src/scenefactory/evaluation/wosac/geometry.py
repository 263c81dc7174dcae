"""Batched geometry of the WOSAC features, in torch, operation for operation as the official code.

- :func:`box_corners_xy`: ``box_utils.get_upright_3d_box_corners`` (bottom four corners,
  counter-clockwise from front-left);
- :func:`box_signed_distance`: ``geometry_utils.minkowski_sum_of_box_and_box_points`` and
  ``signed_distance_from_point_to_convex_polygon`` (the signed distance between two convex boxes is
  the origin's signed distance to their Minkowski difference);
- :func:`polyline_signed_distance`: ``map_metric_features._compute_signed_distance_to_polylines``
  (nearest segment by 3-D distance with z stretched, signed 2-D distance, the sign from the segment's
  side or, off its ends, from the convexity of the neighbouring segments);
- :func:`nearest_lane_start_index`: ``traffic_light_features._get_nearest_lane_segment_index``,
  including its distance as written there, ``|start_to_point + start_to_end * t|`` (a ``+`` where a
  point-to-segment distance has a ``-``), and its masking by the segment's start point only.

The official code compares every query point with every segment. Here :func:`grid_candidates`
first keeps, for the cell of a square grid that a point falls in, only the segments that can be
nearest to some point of the cell (those whose lower bound on the distance is no more than the
least upper bound over all segments), then computes the exact distances to those only and takes the
first minimum in segment order, so the result is the official one with far less work.
"""

from __future__ import annotations

import math

import torch

from scenefactory.evaluation.wosac.config import EXTREMELY_LARGE_DISTANCE

_CORNER_SIGNS = ((1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0))


def box_corners_xy(
    x: torch.Tensor, y: torch.Tensor, length: torch.Tensor, width: torch.Tensor, heading: torch.Tensor
) -> torch.Tensor:
    """(..., 4, 2) the bottom corners of boxes given by (...) tensors, counter-clockwise."""
    c, s = torch.cos(heading), torch.sin(heading)
    l2, w2 = length * 0.5, width * 0.5
    out = []
    for sl, sw in _CORNER_SIGNS:
        cx, cy = sl * l2, sw * w2
        out.append(torch.stack([c * cx - s * cy + x, s * cx + c * cy + y], dim=-1))
    return torch.stack(out, dim=-2)


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _downmost_edge(box: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``geometry_utils._get_downmost_edge_in_box``: (M, 1) index of the lowest-y vertex, (M, 1, 2)
    unit direction of the edge that starts there."""
    idx = torch.argmin(box[..., 1], dim=-1, keepdim=True)
    start = torch.gather(box, 1, idx[..., None].expand(-1, -1, 2))
    end = torch.gather(box, 1, ((idx + 1) % 4)[..., None].expand(-1, -1, 2))
    edge = end - start
    return idx, edge / torch.linalg.norm(edge, dim=-1)[..., None]


_ORDER_1 = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
_ORDER_2 = torch.tensor([0, 1, 1, 2, 2, 3, 3, 0])


def box_signed_distance(box1: torch.Tensor, box2: torch.Tensor) -> torch.Tensor:
    """(M,) signed distance between convex boxes ``box1`` and ``box2`` (M, 4, 2), counter-clockwise:
    negative when they overlap. The origin's signed distance to ``box1 + (-box2)``."""
    neg2 = -box2
    i1, d1 = _downmost_edge(box1)
    i2, d2 = _downmost_edge(neg2)
    cond = (_cross(d1, d2) >= 0.0).expand(-1, 8)
    o1 = torch.where(cond, _ORDER_2, _ORDER_1)
    o1 = (o1 + i1) % 4
    o2 = torch.where(cond, _ORDER_1, _ORDER_2)
    o2 = (o2 + i2) % 4
    poly = torch.gather(box1, 1, o1[..., None].expand(-1, -1, 2)) + torch.gather(
        neg2, 1, o2[..., None].expand(-1, -1, 2)
    )
    return _origin_to_convex_polygon(poly)


def _origin_to_convex_polygon(poly: torch.Tensor) -> torch.Tensor:
    """``signed_distance_from_point_to_convex_polygon`` with the query point at the origin."""
    edge = torch.roll(poly, -1, dims=-2) - poly
    length = torch.linalg.norm(edge, dim=-1)
    tangent = edge / length[..., None]
    normal = torch.stack([-tangent[..., 1], tangent[..., 0]], dim=-1)
    to_query = -poly
    vertex_d = torch.linalg.norm(to_query, dim=-1)
    signed_perp = (-normal * to_query).sum(-1)
    inside = (signed_perp <= 0).all(-1)
    proj = (tangent * to_query).sum(-1) / length
    on_edge = (proj >= 0.0) & (proj <= 1.0)
    edge_d = torch.where(on_edge, signed_perp.abs(), torch.full_like(signed_perp, math.inf))
    d = torch.cat([edge_d, vertex_d], dim=-1).min(-1).values
    return torch.where(inside, -d, d)


def _point_segment_distance(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ab = b - a
    denom = _dot(ab, ab)
    t = torch.where(denom > 0, _dot(p - a, ab) / torch.where(denom > 0, denom, 1.0), 0.0).clamp(0.0, 1.0)
    return torch.linalg.norm(p - a - ab * t[..., None], dim=-1)


def _cells(points_xy: torch.Tensor, cell_m: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unique grid cells of ``points_xy``: (C, 2) centres, (P,) cell of each point, (C, 2) cell ids."""
    ij = torch.floor(points_xy / cell_m).to(torch.int64)
    key = ij[:, 0] * (1 << 32) + ij[:, 1]
    uniq, inv = torch.unique(key, return_inverse=True)
    ci = torch.div(uniq + (1 << 31), 1 << 32, rounding_mode="floor")
    cj = uniq - ci * (1 << 32)
    ids = torch.stack([ci, cj], dim=-1)
    return (ids.to(points_xy.dtype) + 0.5) * cell_m, inv, ids


def _keep(
    centre: torch.Tensor,
    half: float,
    a: torch.Tensor,
    b: torch.Tensor,
    ok: torch.Tensor,
    upper_kind: str,
    extra: torch.Tensor | None,
) -> torch.Tensor:
    """(C, K) which of each cell's K candidate segments (ends ``a``/``b`` (C, K, 2), real where
    ``ok``) can be nearest to a point of the cell (see :func:`grid_candidates`)."""
    c = centre[:, None]
    near = _point_segment_distance(c, a, b)
    if upper_kind == "segment":
        far = near + half
    elif upper_kind == "ends":
        far = torch.maximum(torch.linalg.norm(c - a, dim=-1), torch.linalg.norm(c - b, dim=-1)) + half
    else:
        raise ValueError(f"grid_candidates: upper_kind must be 'segment' or 'ends', got {upper_kind!r}")
    if extra is not None:
        far = torch.sqrt(far.square() + extra.square())
    upper = torch.where(ok, far, math.inf).min(dim=1).values
    return ok & ((near - half) <= upper[:, None])


def grid_candidates(
    points_xy: torch.Tensor,
    bound_a: torch.Tensor,
    bound_b: torch.Tensor,
    upper_kind: str,
    extra_upper: torch.Tensor | None = None,
    coarse_m: float = 16.0,
    fine_m: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (point, segment) pairs to measure: for each query point the segments that can be its
    nearest, as flat ``(Q,)`` point and segment indices, sorted by point then segment.

    ``bound_a``/``bound_b`` (S, 2) are the ends of a segment holding every point the exact distance
    can be measured to. For a square cell (centre c, half diagonal h): lower bound
    ``L_s = dist(c, bound_s) - h``; upper bound ``U = min_s U_s`` with ``U_s = dist(c, bound_s) + h``
    (``upper_kind="segment"``: the distance to a segment is 1-Lipschitz) or
    ``max(|c - a_s|, |c - b_s|) + h`` (``"ends"``: the farthest end bounds every point of the
    segment), in quadrature with ``extra_upper`` (S,) when given; ``s`` is kept when ``L_s <= U``, so
    the nearest segment of every point of the cell is. Done on ``coarse_m`` cells over all segments,
    then on ``fine_m`` cells over their coarse cell's segments (an upper bound over fewer segments is
    still one).
    """
    ratio = round(coarse_m / fine_m)
    fine_c, fine_inv, fine_ids = _cells(points_xy, fine_m)
    coarse_key = torch.div(fine_ids, ratio, rounding_mode="floor")
    ck = coarse_key[:, 0] * (1 << 32) + coarse_key[:, 1]
    cuniq, f2c = torch.unique(ck, return_inverse=True)
    ci = torch.div(cuniq + (1 << 31), 1 << 32, rounding_mode="floor")
    coarse_c = (torch.stack([ci, cuniq - ci * (1 << 32)], dim=-1).to(points_xy.dtype) + 0.5) * coarse_m
    s = bound_a.shape[0]
    all_ok = torch.ones(1, s, dtype=torch.bool)
    extra_all = None if extra_upper is None else extra_upper[None]
    keep_c = _keep(
        coarse_c, coarse_m * math.sqrt(0.5), bound_a[None], bound_b[None], all_ok, upper_kind, extra_all
    )
    kc = max(int(keep_c.sum(dim=1).max()), 1)
    cand = torch.topk(keep_c.to(torch.int8), kc, dim=1).indices  # (Cc, Kc): kept ones first
    cand_ok = torch.gather(keep_c, 1, cand)
    fc, fok = cand[f2c], cand_ok[f2c]  # (Cf, Kc)
    extra_f = None if extra_upper is None else extra_upper[fc]
    keep_f = _keep(fine_c, fine_m * math.sqrt(0.5), bound_a[fc], bound_b[fc], fok, upper_kind, extra_f)
    seg_sorted = torch.where(keep_f, fc, s)
    seg_sorted, _ = torch.sort(seg_sorted, dim=1)
    counts = keep_f.sum(dim=1)
    per_point = counts[fine_inv]
    pair_point = torch.repeat_interleave(torch.arange(points_xy.shape[0]), per_point)
    start = torch.cumsum(per_point, 0) - per_point
    local = torch.arange(pair_point.shape[0]) - start[pair_point]
    return pair_point, seg_sorted[fine_inv[pair_point], local]


def _first_argmin(d: torch.Tensor, pair_point: torch.Tensor, pair_seg: torch.Tensor, n: int) -> torch.Tensor:
    """(Q,) mask of the pair holding each point's least ``d``, the lowest segment index on ties."""
    dmin = torch.full((n,), math.inf, dtype=d.dtype).scatter_reduce(0, pair_point, d, "amin")
    big = torch.iinfo(torch.int64).max
    cand = torch.where(d == dmin[pair_point], pair_seg, big)
    best = torch.full((n,), big, dtype=torch.int64).scatter_reduce(0, pair_point, cand, "amin")
    return pair_seg == best[pair_point]


def road_edge_segments(xyzv: torch.Tensor, cyclic: torch.Tensor) -> dict[str, torch.Tensor]:
    """The valid segments of padded polylines ``xyzv`` (P, L, 4) with what the sign rule needs about
    their neighbours, laid out as ``_compute_signed_distance_to_polylines`` pads and rolls them."""
    pv = xyzv[..., 3] > 0
    seg_ok = pv[:, :-1] & pv[:, 1:]
    s0, s1 = xyzv[:, :-1, :3], xyzv[:, 1:, :3]
    ste = s1 - s0
    cyc = cyclic[:, None]
    prev_idx_first = torch.where(cyclic, ste.shape[1] - 1, 0)
    next_idx_last = torch.where(cyclic, 0, ste.shape[1] - 1)
    n_seg = ste.shape[1]
    prev_idx = torch.arange(n_seg)[None].expand(ste.shape[0], -1) - 1
    prev_idx = torch.where(prev_idx < 0, prev_idx_first[:, None], prev_idx)
    next_idx = torch.arange(n_seg)[None].expand(ste.shape[0], -1) + 1
    next_idx = torch.where(next_idx >= n_seg, next_idx_last[:, None], next_idx)
    prior_ok = torch.cat([torch.where(cyc, seg_ok[:, -1:], seg_ok[:, :1]), seg_ok[:, :-1]], dim=1)
    next_ok = torch.cat([seg_ok[:, 1:], torch.where(cyc, seg_ok[:, :1], seg_ok[:, -1:])], dim=1)
    ste2 = ste[..., :2]
    padded = torch.cat([ste2[:, -1:], ste2, ste2[:, :1]], dim=1)
    convex = _cross(padded[:, :-1], padded[:, 1:]) > 0.0  # (P, S + 1)

    def take(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(t, 1, idx[..., None].expand(-1, -1, t.shape[-1]))

    flat = seg_ok.reshape(-1)
    out = {
        "s0": s0,
        "ste": ste,
        "prev_s0": take(s0[..., :2], prev_idx),
        "prev_ste": take(ste2, prev_idx),
        "next_s0": take(s0[..., :2], next_idx),
        "next_ste": take(ste2, next_idx),
        "prior_ok": prior_ok,
        "next_ok": next_ok,
        "convex_before": convex[:, :-1],
        "convex_after": convex[:, 1:],
    }
    return {k: v.reshape(-1, *v.shape[2:])[flat] for k, v in out.items()}


def polyline_signed_distance(
    points: torch.Tensor, seg: dict[str, torch.Tensor], z_stretch: float
) -> torch.Tensor:
    """(P,) signed 2-D distance of ``points`` (P, 3) to the nearest segment of ``seg``
    (:func:`road_edge_segments`), nearest by 3-D distance with z scaled by ``z_stretch``;
    negative on the port (on-road) side."""
    s0, ste = seg["s0"], seg["ste"]
    zmin_q, zmax_q = points[:, 2].min(), points[:, 2].max()
    z0, z1 = s0[:, 2], s0[:, 2] + ste[:, 2]
    dz = torch.maximum(
        torch.maximum(zmax_q - torch.minimum(z0, z1), torch.maximum(z0, z1) - zmin_q), torch.zeros(())
    )
    pp, ps = grid_candidates(points[:, :2], s0[:, :2], s0[:, :2] + ste[:, :2], "segment", z_stretch * dz)
    stp = points[pp] - s0[ps]
    ste_c = ste[ps]
    den = _dot(ste_c, ste_c)
    rel_t = _dot(stp, ste_c)
    rel_t = torch.where(den != 0, rel_t / torch.where(den != 0, den, 1.0), 0.0)
    to_seg = stp - ste_c * rel_t.clamp(0.0, 1.0)[..., None]
    stretch = torch.tensor([1.0, 1.0, z_stretch], dtype=points.dtype)
    d3 = torch.linalg.norm(to_seg * stretch, dim=-1)
    best = _first_argmin(d3, pp, ps, points.shape[0])
    pp, ps, stp, ste_c, rel_t, to_seg = pp[best], ps[best], stp[best], ste_c[best], rel_t[best], to_seg[best]
    g = {k: v[ps] for k, v in seg.items() if k not in ("s0", "ste")}
    p = points[pp]
    n = torch.sign(_cross(stp[..., :2], ste_c[..., :2]))
    n_prior = torch.sign(_cross(p[..., :2] - g["prev_s0"], g["prev_ste"]))
    n_next = torch.sign(_cross(p[..., :2] - g["next_s0"], g["next_ste"]))
    d2 = torch.linalg.norm(to_seg[..., :2], dim=-1)
    before = torch.where(g["convex_before"], torch.maximum(n, n_prior), torch.minimum(n, n_prior))
    after = torch.where(g["convex_after"], torch.maximum(n, n_next), torch.minimum(n, n_next))
    sign = torch.where(
        (rel_t < 0.0) & g["prior_ok"], before, torch.where((rel_t > 1.0) & g["next_ok"], after, n)
    )
    out = torch.zeros(points.shape[0], dtype=points.dtype)
    out[pp] = sign * d2
    return out


def lane_starts(xyzv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The segments ``_get_nearest_lane_segment_index`` scores: every one whose start point is valid
    (so a shorter lane's last point starts one towards the zero padding). Returns (S,) lane row,
    (S,) segment column and (S, 2, 2) start and end."""
    ok = xyzv[:, :-1, 3] > 0
    rows, cols = torch.nonzero(ok, as_tuple=True)
    ends = torch.stack([xyzv[rows, cols, :2], xyzv[rows, cols + 1, :2]], dim=1)
    return rows, cols, ends


def _lane_distance(p: torch.Tensor, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """The official ``|start_to_point + start_to_end * clip(t)|`` (see the module docstring)."""
    stp = p - start
    ste = end - start
    den = _dot(ste, ste)
    t = torch.where(den != 0, _dot(stp, ste) / torch.where(den != 0, den, 1.0), 0.0)
    return torch.linalg.norm(stp + ste * t.clamp(0.0, 1.0)[..., None], dim=-1)


def nearest_lane_start_index(points_xy: torch.Tensor, rows: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """(P,) lane row of the segment nearest to each point by the official lane distance (first
    minimum in (row, column) order, which :func:`lane_starts` keeps)."""
    start, end = ends[:, 0], ends[:, 1]
    pp, ps = grid_candidates(points_xy, start, 2.0 * start - end, "ends")
    d = _lane_distance(points_xy[pp], start[ps], end[ps])
    best = _first_argmin(d, pp, ps, points_xy.shape[0])
    out = torch.zeros(points_xy.shape[0], dtype=torch.int64)
    out[pp[best]] = rows[ps[best]]
    return out


def lane_segment_column(points_xy: torch.Tensor, lane_xyzv: torch.Tensor) -> torch.Tensor:
    """(M,) column of the nearest segment of each point's own lane ``lane_xyzv`` (M, L, 4), by the
    official lane distance over segments whose start is valid (the stop point's "fence")."""
    start, end = lane_xyzv[:, :-1, :2], lane_xyzv[:, 1:, :2]
    d = _lane_distance(points_xy[:, None], start, end)
    d = torch.where(lane_xyzv[:, :-1, 3] > 0, d, EXTREMELY_LARGE_DISTANCE)
    return torch.argmin(d, dim=1)
