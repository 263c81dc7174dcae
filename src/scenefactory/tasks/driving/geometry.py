"""Batched torch geometry for the multi-agent driving task: boxes, collisions, TTC, DRAC, projections.

Every function is pure and vectorized (no Python loop over worlds or agents) and expects float32
tensors in the scene frame: metres, radians, metres per second. Names carry shapes and units:
``W`` worlds, ``K`` agents per world, ``...`` any leading batch shape.

Vehicle footprints are oriented boxes: centre ``pos_xy``, heading ``yaw`` (the long axis, x
forward), full ``length`` and ``width``. For time to collision (TTC) and deceleration rate to
avoid a crash (DRAC) each box is covered by three equal circles along its long axis, as in
SceneFactory (see :func:`circle_cover`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DRAC_MIN_GAP_M = 1.0
"""Floor on the circle gap in the DRAC denominator, so touching pairs give a finite rate."""


def box_corners(
    pos_xy: torch.Tensor, yaw: torch.Tensor, length: torch.Tensor, width: torch.Tensor
) -> torch.Tensor:
    """Corners of oriented boxes, ``[..., 4, 2]`` metres, counter-clockwise from front-left.

    Args:
        pos_xy: ``[..., 2]`` box centres, m.
        yaw: ``[...]`` heading of the long axis, rad.
        length: ``[...]`` full length along the heading, m.
        width: ``[...]`` full width, m.

    The corners are ``pos + R(yaw) @ (sx * length/2, sy * width/2)`` for
    ``(sx, sy) = (+,+), (-,+), (-,-), (+,-)``: front-left, rear-left, rear-right, front-right.
    """
    signs = torch.tensor(
        [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]], dtype=pos_xy.dtype, device=pos_xy.device
    )
    half_l = (0.5 * length)[..., None]
    half_w = (0.5 * width)[..., None]
    lx = signs[:, 0] * half_l  # [..., 4] local x
    ly = signs[:, 1] * half_w
    cos, sin = torch.cos(yaw)[..., None], torch.sin(yaw)[..., None]
    x = pos_xy[..., 0:1] + cos * lx - sin * ly
    y = pos_xy[..., 1:2] + sin * lx + cos * ly
    return torch.stack((x, y), dim=-1)


def pair_mask(active: torch.Tensor) -> torch.Tensor:
    """``[W, K, K]`` bool: both agents of the pair active and the pair not on the diagonal."""
    k = active.shape[-1]
    eye = torch.eye(k, dtype=torch.bool, device=active.device)
    return active[..., :, None] & active[..., None, :] & ~eye


def pairwise_box_overlap(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
) -> torch.Tensor:
    """Exact oriented-box overlap for every pair of agents in each world, by separating axes.

    Args:
        pos_xy: ``[W, K, 2]`` box centres, m.
        yaw: ``[W, K]`` headings, rad.
        length: ``[W, K]`` full lengths, m.
        width: ``[W, K]`` full widths, m.
        active: ``[W, K]`` bool; inactive agents overlap nothing.

    Returns:
        ``[W, K, K]`` bool, symmetric, False on the diagonal and where either agent is inactive.

    Two convex boxes are disjoint iff some edge normal of either box separates them. Box ``i`` has
    unit axes ``u_i = (cos, sin)(yaw_i)``, ``v_i = (-sin, cos)(yaw_i)`` and half extents
    ``a_i = length_i/2``, ``b_i = width_i/2``. With ``d = p_j - p_i``, ``c = |cos(yaw_i - yaw_j)|``
    and ``s = |sin(yaw_i - yaw_j)|`` the four tests are::

        |d . u_i| > a_i + a_j c + b_j s        |d . u_j| > a_j + a_i c + b_i s
        |d . v_i| > b_i + a_j s + b_j c        |d . v_j| > b_j + a_i s + b_i c

    The boxes overlap (touching counts) when none of them holds.
    """
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    half_l, half_w = 0.5 * length, 0.5 * width
    dx = pos_xy[..., None, :, 0] - pos_xy[..., :, None, 0]  # [W, K, K]: p_j - p_i
    dy = pos_xy[..., None, :, 1] - pos_xy[..., :, None, 1]
    ci, si = cos[..., :, None], sin[..., :, None]
    cj, sj = cos[..., None, :], sin[..., None, :]
    rel_c = (ci * cj + si * sj).abs()  # |cos(yaw_i - yaw_j)|
    rel_s = (si * cj - ci * sj).abs()  # |sin(yaw_i - yaw_j)|
    ai, bi = half_l[..., :, None], half_w[..., :, None]
    aj, bj = half_l[..., None, :], half_w[..., None, :]
    sep = (dx * ci + dy * si).abs() > ai + aj * rel_c + bj * rel_s
    sep |= (dy * ci - dx * si).abs() > bi + aj * rel_s + bj * rel_c
    sep |= (dx * cj + dy * sj).abs() > aj + ai * rel_c + bi * rel_s
    sep |= (dy * cj - dx * sj).abs() > bj + ai * rel_s + bi * rel_c
    return ~sep & pair_mask(active)


def collided(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
) -> torch.Tensor:
    """``[W, K]`` bool: the agent's box overlaps any other active agent's box (arguments as
    :func:`pairwise_box_overlap`)."""
    return pairwise_box_overlap(pos_xy, yaw, length, width, active).any(dim=-1)


def circle_cover(
    pos_xy: torch.Tensor, yaw: torch.Tensor, length: torch.Tensor, width: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Three equal circles covering each box: ``(centres [..., 3, 2] m, radius [...] m)``.

    Args:
        pos_xy: ``[..., 2]`` box centres, m.
        yaw: ``[...]`` headings, rad.
        length: ``[...]`` full lengths, m.
        width: ``[...]`` full widths, m.

    Centres sit on the long axis at ``-L/3, 0, +L/3`` (rear, middle, front). Each circle covers
    one third of the box, an ``L/3 x W`` rectangle, whose corners are at distance
    ``r = sqrt((L/6)^2 + (W/2)^2)`` from its centre.
    """
    offsets = torch.tensor([-1.0, 0.0, 1.0], dtype=pos_xy.dtype, device=pos_xy.device) / 3.0
    along = length[..., None] * offsets  # [..., 3]
    cx = pos_xy[..., 0:1] + along * torch.cos(yaw)[..., None]
    cy = pos_xy[..., 1:2] + along * torch.sin(yaw)[..., None]
    radius = torch.sqrt((length / 6.0) ** 2 + (0.5 * width) ** 2)
    return torch.stack((cx, cy), dim=-1), radius


def _upper_pairs(k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(i, j)`` of the ``k (k - 1) / 2`` agent pairs with ``i < j``."""
    iu = torch.triu_indices(k, k, offset=1, device=device)
    return iu[0], iu[1]


def _symmetric_fill(
    values: torch.Tensor, i: torch.Tensor, j: torch.Tensor, k: int, fill: float
) -> torch.Tensor:
    """Scatter pair-major ``[n_pairs, B]`` upper-triangle values into a symmetric ``[B, k, k]``."""
    flat = torch.cat((i * k + j, j * k + i))
    out = values.new_full((k * k, values.shape[-1]), fill)
    out.index_copy_(0, flat, torch.cat((values, values), dim=0))
    return out.reshape(k, k, -1).permute(2, 0, 1).contiguous()


def agent_pairs(k: int, m: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(i, j)``, ``i < j``, of the pairs of ``m`` objects with at least one of the first ``k``
    (controlled agents): the ``k (k - 1) / 2`` agent pairs, then every agent with each of the
    ``m - k`` other objects; ``k (k - 1) / 2 + k (m - k)`` pairs."""
    i, j = _upper_pairs(k, device)
    a = torch.arange(k, device=device).repeat_interleave(m - k)
    b = torch.arange(k, m, device=device).repeat(k)
    return torch.cat((i, a)), torch.cat((j, b))


def ttc_drac_of_pairs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    horizon_s: float,
    pairs: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """TTC and DRAC over the 3x3 circle pairs of each object pair ``(i, j)``, ``i < j``: every such
    pair (default) or the ``pairs`` given (both measures are symmetric, so one order suffices).

    Inputs are ``[B, K, ...]`` (one flat batch dim). Returns ``(ttc_s, drac_mps2, i, j)`` with
    ``ttc_s``/``drac_mps2`` pair-major, ``[n_pairs, B]``. A pair's values do not depend on which
    other pairs are computed (every operation is elementwise over pairs).
    """
    k = active.shape[-1]
    i, j = _upper_pairs(k, pos_xy.device) if pairs is None else pairs
    centres, radius = circle_cover(pos_xy, yaw, length, width)
    # Agent-major features [K, 10, B]: circle x (3), circle y (3), vx, vy, radius, active. Selecting
    # whole rows for the pairs is one fast gather per side, and keeps the batch contiguous (last).
    circles = centres.permute(1, 3, 2, 0).flatten(1, 2)  # [K, 6, B]
    feats = torch.cat(
        (circles, vel_xy.permute(1, 2, 0), radius.T[:, None], active.T[:, None].to(radius.dtype)), 1
    )
    fi, fj = feats.index_select(0, i), feats.index_select(0, j)  # [n_pairs, 10, B]
    # d[p, m, n, b] = centre n of agent j(p) - centre m of agent i(p)
    dx = fj[:, None, 0:3] - fi[:, 0:3, None]  # [n_pairs, 3, 3, B]
    dy = fj[:, None, 3:6] - fi[:, 3:6, None]
    rvx, rvy = (fj[:, 6] - fi[:, 6])[:, None, None], (fj[:, 7] - fi[:, 7])[:, None, None]  # v_j - v_i
    radius_sum = fi[:, 8] + fj[:, 8]  # [n_pairs, B]
    rsum2 = radius_sum * radius_sum
    # |d + v t|^2 = R^2  <=>  a t^2 + 2 h t + c = 0 with a = v.v, h = d.v, c = d.d - R^2.
    a = rvx * rvx + rvy * rvy
    h = (dx * rvx).addcmul_(dy, rvy)
    dist2 = dx.mul_(dx).addcmul_(dy, dy)  # reuses dx
    near2, near_idx = dist2.flatten(1, 2).min(dim=1)  # closest circle pair, [n_pairs, B]
    near_h = h.flatten(1, 2).gather(1, near_idx[:, None]).squeeze(1)
    c = dist2.sub_(rsum2[:, None, None])  # reuses dist2
    # The [.., 3, 3, ..] work is a few in-place float passes: boolean masks, and sqrt of negative
    # numbers, are slow on CPU. With c > 0 (apart) the first contact is the smaller root
    #     t = (-h - sqrt(q)) / a = c / (sqrt(q) - h),   q = h^2 - a c,
    # which needs h < 0 (approaching) and q >= 0 (the paths meet). We compute its reciprocal, the
    # contact rate (sqrt(q) - h) / c, made negative where q < 0 (miss); receding pairs are clamped
    # to h = 0, so q = -a c < 0 (or rate 0 when a = 0). The largest rate gives the first contact.
    # Overlapping circles (c <= 0) are caught per agent pair by the closest circle pair below.
    h.clamp_(max=0.0)
    q = torch.mul(h, h, out=dy).addcmul_(a, c, value=-1.0)  # reuses dy
    rate = q.abs().sqrt_().sub_(h).copysign_(q).div_(c)
    rate_max = rate.flatten(1, 2).amax(dim=1)
    ttc = torch.where(rate_max > 0.0, 1.0 / rate_max, torch.inf)
    ttc = torch.where(near2 <= rsum2, 0.0, ttc)
    on_course = (fi[:, 9] > 0.0) & (fj[:, 9] > 0.0) & (ttc <= horizon_s)
    ttc = torch.where(on_course, ttc, torch.inf)
    # DRAC from the closest circle pair: closing speed -(dp . dv) / |dp| = -h / |dp| there.
    dist = torch.sqrt(near2)
    closing = -near_h / dist.clamp(min=1e-6)
    drac = closing * closing / (2.0 * (dist - radius_sum).clamp(min=DRAC_MIN_GAP_M))
    drac = torch.where(on_course & (closing > 0.0), drac, 0.0)
    return ttc, drac, i, j


def pairwise_ttc(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    horizon_s: float = 10.0,
) -> torch.Tensor:
    """Time to collision, s, ``[W, K, K]``, if both agents hold their current velocity.

    Args:
        pos_xy: ``[W, K, 2]`` centres, m.
        yaw: ``[W, K]`` headings, rad.
        vel_xy: ``[W, K, 2]`` world-frame velocities, m/s.
        length: ``[W, K]`` full lengths, m.
        width: ``[W, K]`` full widths, m.
        active: ``[W, K]`` bool.
        horizon_s: contacts later than this count as none.

    Each agent is covered by three circles (:func:`circle_cover`). For a circle pair with centre
    offset ``d`` (``j`` minus ``i``), relative velocity ``v = v_j - v_i`` and radii sum
    ``R = r_i + r_j``, the contact time is the smallest ``t >= 0`` with ``|d + v t| = R``::

        t = (-h - sqrt(h^2 - a c)) / a,   a = v.v,  h = d.v,  c = d.d - R^2

    (0 when ``c <= 0``, i.e. already touching; none when ``h >= 0`` or ``h^2 < a c``). The TTC is
    the minimum over the 3x3 circle pairs; ``+inf`` when there is no contact within ``horizon_s``,
    on the diagonal and for pairs with an inactive agent. Symmetric in ``i, j``. Leading batch
    dims other than ``W`` work too.
    """
    return pairwise_ttc_drac(pos_xy, yaw, vel_xy, length, width, active, horizon_s)[0]


def pairwise_drac(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    horizon_s: float = 10.0,
) -> torch.Tensor:
    """Deceleration rate to avoid a crash, m/s^2, ``[W, K, K]`` (arguments as :func:`pairwise_ttc`).

    SceneFactory's multi-circle form: take the circle pair (one of 3x3) with the closest centres,
    centre offset ``dp = p_j - p_i`` at distance ``d``, relative velocity ``dv = v_j - v_i`` and
    radii sum ``R = r_i + r_j``. The closing speed is ``c = -(dp . dv) / d`` (positive when
    approaching) and::

        DRAC = c^2 / (2 * max(d - R, 1.0 m))

    The 1 m floor keeps touching or overlapping pairs finite. A pair counts only when it is on a
    collision course (finite :func:`pairwise_ttc` within ``horizon_s``) and closing (``c > 0``);
    otherwise, on the diagonal and for inactive pairs, DRAC is 0. Requiring a collision course
    is a deliberate choice: an oncoming car in the next lane closes fast but merely passes, and
    an all-closing-pairs DRAC would report a large (spurious) rate for it. For a rear-end pair on
    one line this reduces to the textbook ``(v_follower - v_leader)^2 / (2 gap)``.

    Symmetric in ``i, j``: each unordered pair is computed once and mirrored.
    """
    return pairwise_ttc_drac(pos_xy, yaw, vel_xy, length, width, active, horizon_s)[1]


def pairwise_ttc_drac(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    horizon_s: float = 10.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ttc_s, drac_mps2)``, both ``[W, K, K]``, sharing the circle-pair work (see
    :func:`pairwise_ttc` and :func:`pairwise_drac`; same arguments)."""
    batch, k = active.shape[:-1], active.shape[-1]
    pos, yw, vel, ln, wd, act = (
        x.reshape(-1, *x.shape[len(batch) :]) for x in (pos_xy, yaw, vel_xy, length, width, active)
    )
    ttc, drac, i, j = ttc_drac_of_pairs(pos, yw, vel, ln, wd, act, horizon_s)
    ttc_s = _symmetric_fill(ttc, i, j, k, torch.inf).reshape(*batch, k, k)
    return ttc_s, _symmetric_fill(drac, i, j, k, 0.0).reshape(*batch, k, k)


def smallest_k(dist2: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` smallest of squared distances ``[..., P]`` (``+inf`` = no candidate), nearest first:
    ``(pos [..., k] int64, dist [..., k] m, valid [..., k] bool)``. Slots past the finite ones (also
    when ``k > P``) have ``valid = False``, ``pos = 0`` (safe to gather with) and ``dist = +inf``.

    Equal distances come in the order of their positions (``topk`` alone leaves ties in an order of
    its algorithm's making, which a native kernel cannot reproduce): the selection runs on one int64
    key per candidate, the distance's float32 bits (ordered as the values are, for ``d² ≥ 0``; NaN
    last) above its position, so no two keys are equal."""
    kk = min(k, dist2.shape[-1])
    if dist2.dtype == torch.float32:
        bits = dist2.contiguous().view(torch.int32).to(torch.int64)
        where = torch.arange(dist2.shape[-1], device=dist2.device, dtype=torch.int64)
        key = torch.topk((bits << 32) | where, kk, dim=-1, largest=False, sorted=True).values
        pos = key & 0xFFFFFFFF
    else:  # the same order, by a stable sort
        pos = torch.sort(dist2, dim=-1, stable=True).indices[..., :kk]
    d2 = torch.gather(dist2, -1, pos)
    if kk < k:
        pad = (*d2.shape[:-1], k - kk)
        d2 = torch.cat((d2, d2.new_full(pad, torch.inf)), dim=-1)
        pos = torch.cat((pos, pos.new_zeros(pad)), dim=-1)
    valid = torch.isfinite(d2)
    return torch.where(valid, pos, 0), torch.sqrt(d2), valid


def nearest_k(
    query_xy: torch.Tensor, points_xy: torch.Tensor, points_valid: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` nearest valid points to each query, brute force, nearest first.

    Args:
        query_xy: ``[W, A, 2]`` query positions, m (any leading batch shape instead of ``W``).
        points_xy: ``[W, P, 2]`` candidate points, m.
        points_valid: ``[W, P]`` bool; invalid points are never chosen ahead of valid ones.
        k: number of neighbours (may exceed ``P``; the extra slots are invalid).

    Returns:
        ``(idx [W, A, k] int64, dist [W, A, k] m, valid [W, A, k] bool)``. Slots past the number of
        valid points have ``valid = False``, ``idx = 0`` (safe to gather with) and ``dist = +inf``.
    """
    dx = query_xy[..., :, None, 0] - points_xy[..., None, :, 0]  # [W, A, P]
    dy = query_xy[..., :, None, 1] - points_xy[..., None, :, 1]
    invalid = torch.where(points_valid, 0.0, torch.inf).to(dx.dtype)[..., None, :]  # [W, 1, P]
    dist2 = dx.mul_(dx).addcmul_(dy, dy).add_(invalid)
    return smallest_k(dist2, k)


def world_to_ego(xy: torch.Tensor, ego_pos: torch.Tensor, ego_yaw: torch.Tensor) -> torch.Tensor:
    """Express world points in the ego frame (x forward, y left), ``[..., 2]`` m.

    Args:
        xy: ``[..., 2]`` world points, m.
        ego_pos: ``[..., 2]`` ego position, m; broadcast against ``xy`` (unsqueeze to add dims).
        ego_yaw: ``[...]`` ego heading, rad; broadcast like ``ego_pos[..., 0]``.

    ``x_ego = cos(yaw) dx + sin(yaw) dy``, ``y_ego = -sin(yaw) dx + cos(yaw) dy`` with ``(dx, dy) =
    xy - ego_pos``. For directions (velocities, tangents) pass ``ego_pos = 0``.
    """
    dx = xy[..., 0] - ego_pos[..., 0]
    dy = xy[..., 1] - ego_pos[..., 1]
    cos, sin = torch.cos(ego_yaw), torch.sin(ego_yaw)
    return torch.stack((cos * dx + sin * dy, cos * dy - sin * dx), dim=-1)


@dataclass(frozen=True)
class PolylineSegments:
    """Static per-segment data of padded polylines, for repeated projection (see
    :func:`project_on_segments`). Build it once per route with :func:`polyline_segments`.

    Every field is ``[..., R - 1]`` float, one entry per segment ``r`` (points ``r -> r + 1``).

    Attributes:
        ax: start x, m.
        ay: start y, m.
        ex: direction x (``b - a``), m.
        ey: direction y, m.
        inv_len2: ``1 / |b - a|^2``, 1/m^2, 0 for invalid segments.
        start_s: arc length from the first point to the segment start, m.
        penalty: 0 for valid segments, ``+inf`` for invalid ones (added to squared distances).
    """

    ax: torch.Tensor
    ay: torch.Tensor
    ex: torch.Tensor
    ey: torch.Tensor
    inv_len2: torch.Tensor
    start_s: torch.Tensor
    penalty: torch.Tensor


def polyline_segments(poly_xy: torch.Tensor, poly_valid: torch.Tensor) -> PolylineSegments:
    """Segments of padded polylines ``poly_xy [..., R, 2]`` (m) with ``poly_valid [..., R]``.

    Segment ``r`` joins points ``r`` and ``r + 1`` and is valid when both are and it is longer than
    1 um (repeated points are skipped); arc length runs from the first point over valid segments.
    """
    x, y = poly_xy[..., 0], poly_xy[..., 1]
    ax, ay = x[..., :-1], y[..., :-1]
    ex, ey = x[..., 1:] - ax, y[..., 1:] - ay
    len2 = ex * ex + ey * ey
    valid = (poly_valid[..., :-1] & poly_valid[..., 1:] & (len2 > 1e-12)).to(poly_xy.dtype)  # 1 or 0
    seg_len = torch.sqrt(len2) * valid
    return PolylineSegments(
        ax=ax.contiguous(),  # strided views of poly_xy otherwise; copied once, read every step
        ay=ay.contiguous(),
        ex=ex,
        ey=ey,
        inv_len2=valid / len2.clamp(min=1e-12),
        start_s=torch.cumsum(seg_len, dim=-1) - seg_len,
        penalty=valid.reciprocal() - 1.0,  # 1/1 - 1 = 0 (valid), 1/0 - 1 = +inf (invalid)
    )


def project_on_segments(
    pos_xy: torch.Tensor, segs: PolylineSegments
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`project_on_polyline` on precomputed :class:`PolylineSegments` (cheaper per step)."""
    return project_at_segment(pos_xy, segs, *nearest_segment(pos_xy, segs))


def nearest_segment(pos_xy: torch.Tensor, segs: PolylineSegments) -> tuple[torch.Tensor, torch.Tensor]:
    """The segment nearest each query ``pos_xy`` ``[W, K, 2]``, lowest index on ties: ``(near2 [W, K, 1]``
    squared distance, ``+inf`` without a valid segment, ``seg_idx [W, K, 1]`` int64)``
    (``tasks.driving.native.nearest_segment`` computes the same natively)."""
    px = pos_xy[..., 0:1] - segs.ax  # [W, K, R-1]
    py = pos_xy[..., 1:2] - segs.ay
    t = (px * segs.ex).addcmul_(py, segs.ey).mul_(segs.inv_len2).clamp_(0.0, 1.0)
    px.addcmul_(t, segs.ex, value=-1.0)  # offset from the nearest point of each segment
    py.addcmul_(t, segs.ey, value=-1.0)
    dist2 = px.mul_(px).addcmul_(py, py).add_(segs.penalty)
    near2, seg_idx = dist2.min(dim=-1, keepdim=True)  # lowest index on ties
    return near2, seg_idx


def project_at_segment(
    pos_xy: torch.Tensor, segs: PolylineSegments, near2: torch.Tensor, seg_idx: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`project_on_segments` given its :func:`nearest_segment`."""

    def pick(x: torch.Tensor) -> torch.Tensor:
        return x.gather(-1, seg_idx).squeeze(-1)

    ax, ay, ex, ey = pick(segs.ax), pick(segs.ay), pick(segs.ex), pick(segs.ey)
    rx, ry = pos_xy[..., 0] - ax, pos_xy[..., 1] - ay
    t1 = ((rx * ex + ry * ey) * pick(segs.inv_len2)).clamp(0.0, 1.0)
    ox, oy = rx - t1 * ex, ry - t1 * ey
    lateral = torch.sqrt(ox * ox + oy * oy)
    lateral = torch.where(ex * ry - ey * rx < 0.0, -lateral, lateral)
    s_m = pick(segs.start_s) + t1 * torch.sqrt(ex * ex + ey * ey)
    tangent_yaw = torch.atan2(ey, ex)
    ok = torch.isfinite(near2.squeeze(-1))  # some valid segment
    return (
        torch.where(ok, s_m, 0.0),
        torch.where(ok, lateral, 0.0),
        torch.where(ok, tangent_yaw, 0.0),
        seg_idx.squeeze(-1),
    )


def project_on_polyline(
    pos_xy: torch.Tensor, poly_xy: torch.Tensor, poly_valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Nearest point on a per-agent polyline: ``(s_m, lateral_m, tangent_yaw, seg_idx)``, each ``[W, K]``.

    Args:
        pos_xy: ``[W, K, 2]`` query positions, m (any leading batch shape).
        poly_xy: ``[W, K, R, 2]`` polyline points, m, in travel direction.
        poly_valid: ``[W, K, R]`` bool; segment ``r`` (points ``r, r+1``) counts only when both
            points are valid (and they are not the same point).

    Each valid segment ``a -> b`` is projected on: ``t = clamp((p - a).(b - a) / |b - a|^2, 0, 1)``;
    the nearest such point (lowest index on ties) gives

    - ``s_m``: arc length from the first point, the summed lengths of the valid segments before it
      plus ``t |b - a|`` (so ``0 <= s_m <= total length``; the ends are not extrapolated),
    - ``lateral_m``: distance to it, positive when ``p`` is left of the segment (``cross(b - a,
      p - a) > 0``), negative when right,
    - ``tangent_yaw``: heading of that segment, rad,
    - ``seg_idx`` (int64): its index ``r``.

    A polyline without any valid segment gives ``s_m = lateral_m = 0``, yaw 0, index 0: callers must
    not rely on those values. For static polylines queried every step, build
    :func:`polyline_segments` once and call :func:`project_on_segments`.
    """
    return project_on_segments(pos_xy, polyline_segments(poly_xy, poly_valid))
