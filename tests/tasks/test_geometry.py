"""Tests of the batched driving geometry: boxes, overlap, TTC, DRAC, nearest points, frames, projection.

Hand-worked cases use the 4.5 x 1.9 m car throughout. Its three covering circles sit at -1.5, 0 and
+1.5 m along the heading with radius r = sqrt(0.75^2 + 0.95^2) = 1.21037 m, so two cars touch when a
circle pair is 2r = 2.42074 m apart.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
import torch

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.tasks.driving.geometry import (
    box_corners,
    circle_cover,
    collided,
    nearest_k,
    pairwise_box_overlap,
    pairwise_drac,
    pairwise_ttc,
    pairwise_ttc_drac,
    polyline_segments,
    project_on_polyline,
    project_on_segments,
    world_to_ego,
)

CAR_L, CAR_W = 4.5, 1.9
R = math.sqrt(0.75**2 + 0.95**2)  # 1.21037 m
TWO_R = 2.0 * R  # 2.42074 m


Cars = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _cars(poses: Sequence[tuple[float, ...]], length: float = CAR_L, width: float = CAR_W) -> Cars:
    """One world of cars from ``(x, y, yaw, speed)``: pos [1,K,2], yaw [1,K], vel [1,K,2], L, W, active."""
    p = torch.tensor(poses, dtype=torch.float32)
    pos = p[None, :, :2]
    yaw = p[None, :, 2]
    vel = torch.stack((p[:, 3] * torch.cos(p[:, 2]), p[:, 3] * torch.sin(p[:, 2])), dim=-1)[None]
    k = len(poses)
    full = torch.ones(1, k)
    return pos, yaw, vel, full * length, full * width, torch.ones(1, k, dtype=torch.bool)


def _pair(poses: Sequence[tuple[float, ...]]) -> tuple[float, float]:
    ttc, drac = pairwise_ttc_drac(*_cars(poses))
    assert ttc[0, 0, 1] == ttc[0, 1, 0] or (math.isinf(ttc[0, 0, 1]) and math.isinf(ttc[0, 1, 0]))
    assert drac[0, 0, 1] == drac[0, 1, 0]
    return float(ttc[0, 0, 1]), float(drac[0, 0, 1])


# ---------------------------------------------------------------------------------------------
# Boxes and circles


def test_box_corners_rotated_90_degrees() -> None:
    # Box 4 x 2 at (1, 1) facing +y: front-left corner is 2 m ahead (+y) and 1 m left (-x).
    corners = box_corners(
        torch.tensor([1.0, 1.0]), torch.tensor(math.pi / 2), torch.tensor(4.0), torch.tensor(2.0)
    )
    expect = torch.tensor([[0.0, 3.0], [0.0, -1.0], [2.0, -1.0], [2.0, 3.0]])
    torch.testing.assert_close(corners, expect, atol=1e-6, rtol=0)


def test_circle_cover_centres_radius_and_coverage() -> None:
    centres, radius = circle_cover(
        torch.tensor([[0.0, 0.0]]), torch.tensor([0.0]), torch.tensor([4.5]), torch.tensor([1.9])
    )
    torch.testing.assert_close(centres[0], torch.tensor([[-1.5, 0.0], [0.0, 0.0], [1.5, 0.0]]))
    assert float(radius[0]) == pytest.approx(R, abs=1e-6)
    # Every point of a rotated box lies in some circle.
    pos, yaw = torch.tensor([3.0, -2.0]), torch.tensor(0.7)
    c, r = circle_cover(pos, yaw, torch.tensor(5.0), torch.tensor(2.0))
    local = torch.stack(
        torch.meshgrid(torch.linspace(-2.5, 2.5, 41), torch.linspace(-1, 1, 17), indexing="ij"), -1
    )
    world = world_to_ego(local.reshape(-1, 2), torch.zeros(2), -yaw) + pos  # rotate by +yaw
    d = torch.linalg.norm(world[:, None, :] - c[None], dim=-1).amin(dim=1)
    assert bool((d <= r + 1e-5).all())


# ---------------------------------------------------------------------------------------------
# Oriented-box overlap


def _overlap_one(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Overlap of two boxes ``(x, y, yaw, length, width)``."""
    p = torch.tensor([a, b], dtype=torch.float32)[None]
    out = pairwise_box_overlap(
        p[..., :2], p[..., 2], p[..., 3], p[..., 4], torch.ones(1, 2, dtype=torch.bool)
    )
    assert bool(out[0, 0, 1]) == bool(out[0, 1, 0])
    return bool(out[0, 0, 1])


def test_overlap_axis_aligned_and_touching() -> None:
    assert _overlap_one((0, 0, 0, 4.5, 1.9), (4.0, 0, 0, 4.5, 1.9))  # 0.5 m bumper overlap
    assert not _overlap_one((0, 0, 0, 4.5, 1.9), (4.6, 0, 0, 4.5, 1.9))  # 0.1 m gap
    assert not _overlap_one((0, 0, 0, 4.5, 1.9), (0, 2.0, 0, 4.5, 1.9))  # side by side, 0.1 m apart
    assert _overlap_one((0, 0, 0, 4.0, 2.0), (4.0, 0, 0, 4.0, 2.0))  # exactly touching counts


def test_overlap_45_degree_corners() -> None:
    # 2 x 2 squares at 45 deg are diamonds |x| + |y| <= sqrt(2) = 1.41421 around their centres.
    # Centres 2.8 m apart on x: the corners at x = 1.41421 and 2.8 - 1.41421 = 1.38579 overlap by
    # 0.028 m, corner into corner. At 2.9 m apart they miss by 0.072 m.
    q = math.pi / 4
    assert _overlap_one((0, 0, q, 2, 2), (2.8, 0, q, 2, 2))
    assert not _overlap_one((0, 0, q, 2, 2), (2.9, 0, q, 2, 2))


def test_overlap_aabbs_overlap_but_obbs_do_not() -> None:
    # Diamonds at (0, 0) and (2.2, 2.2): their axis-aligned boxes [-1.414, 1.414]^2 and
    # [0.786, 3.614]^2 overlap, but the facing edges x + y = 1.414 and x + y = 4.4 - 1.414 = 2.986 are
    # parallel and 1.09 m apart, so the boxes do not.
    q = math.pi / 4
    assert not _overlap_one((0, 0, q, 2, 2), (2.2, 2.2, q, 2, 2))
    assert _overlap_one((0, 0, q, 2, 2), (1.4, 1.4, q, 2, 2))  # edges 0.2 m into each other
    # A long thin bar across a car's corner without touching it: the car spans x, y in
    # [-2.25, 2.25] x [-0.95, 0.95]; the bar at 45 deg through (2.5, 1.2) has its near edge on
    # x + y = 3.7 - 0.1 * sqrt(2) = 3.559 > 2.25 + 0.95 = 3.2, clear of the corner (2.25, 0.95).
    assert not _overlap_one((0, 0, 0, 4.5, 1.9), (2.5, 1.2, -q, 6.0, 0.2))
    assert _overlap_one((0, 0, 0, 4.5, 1.9), (2.0, 0.8, -q, 6.0, 0.2))


def _sat_reference(a: np.ndarray, b: np.ndarray) -> bool:
    """Generic polygon separating-axis test on corner lists (float64)."""
    for poly in (a, b):
        for e in range(4):
            edge = poly[(e + 1) % 4] - poly[e]
            n = np.array([-edge[1], edge[0]])
            pa, pb = a @ n, b @ n
            if pa.max() < pb.min() - 1e-9 or pb.max() < pa.min() - 1e-9:
                return False
    return True


def test_overlap_matches_polygon_sat_on_random_boxes() -> None:
    g = torch.Generator().manual_seed(3)
    w, k = 8, 10
    pos = torch.rand(w, k, 2, generator=g) * 12.0
    yaw = (torch.rand(w, k, generator=g) - 0.5) * 2 * math.pi
    length = 2.0 + 4.0 * torch.rand(w, k, generator=g)
    width = 0.5 + 2.0 * torch.rand(w, k, generator=g)
    active = torch.ones(w, k, dtype=torch.bool)
    out = pairwise_box_overlap(pos, yaw, length, width, active)
    corners = box_corners(pos, yaw, length, width).double().numpy()
    hits = 0
    for b in range(w):
        for i, j in itertools.permutations(range(k), 2):
            ref = _sat_reference(corners[b, i], corners[b, j])
            assert bool(out[b, i, j]) == ref
            hits += ref
    assert 20 < hits < w * k * (k - 1) - 20  # the sample has both outcomes
    torch.testing.assert_close(collided(pos, yaw, length, width, active), out.any(dim=-1))


def test_overlap_inactive_and_diagonal() -> None:
    pos = torch.zeros(2, 3, 2)  # all three boxes on top of each other
    yaw = torch.zeros(2, 3)
    ones = torch.ones(2, 3)
    active = torch.tensor([[True, True, False], [False, False, True]])
    out = pairwise_box_overlap(pos, yaw, 4 * ones, 2 * ones, active)
    expect = torch.zeros(2, 3, 3, dtype=torch.bool)
    expect[0, 0, 1] = expect[0, 1, 0] = True
    assert torch.equal(out, expect)
    assert torch.equal(
        collided(pos, yaw, 4 * ones, 2 * ones, active), torch.tensor([[True, True, False], [False] * 3])
    )


# ---------------------------------------------------------------------------------------------
# TTC and DRAC, hand-worked


def test_rear_end_follower_faster() -> None:
    # Follower at x = 0 at 15 m/s, leader at x = 20 at 10 m/s, both heading +x.
    # Closest circles: follower front at 1.5, leader rear at 18.5 -> 17.0 m apart.
    # gap = 17 - 2.42074 = 14.57926 m; closing speed 5 m/s.
    # TTC = 14.57926 / 5 = 2.91585 s; DRAC = 5^2 / (2 * 14.57926) = 0.85738 m/s^2.
    ttc, drac = _pair([(0, 0, 0, 15), (20, 0, 0, 10)])
    assert ttc == pytest.approx((17.0 - TWO_R) / 5.0, rel=1e-5)
    assert ttc == pytest.approx(2.91585, abs=1e-4)
    assert drac == pytest.approx(0.85738, abs=1e-4)


def test_head_on() -> None:
    # A at x = 0 heading +x at 10 m/s; B at x = 30 heading -x (yaw pi) at 10 m/s.
    # Closest circles: A front at 1.5, B front at 30 - 1.5 = 28.5 -> 27.0 m apart, closing 20 m/s.
    # gap = 27 - 2.42074 = 24.57926 m; TTC = 24.57926 / 20 = 1.22896 s;
    # DRAC = 20^2 / (2 * 24.57926) = 8.13694 m/s^2.
    ttc, drac = _pair([(0, 0, 0, 10), (30, 0, math.pi, 10)])
    assert ttc == pytest.approx(1.22896, abs=1e-4)
    assert drac == pytest.approx(8.13694, abs=1e-3)


def test_t_bone_crossing() -> None:
    # A from (0, 0) heading +x at 10 m/s; B from (20, -20) heading +y at 10 m/s; both centres reach
    # (20, 0) at t = 2 s. Circle offsets o (A) and o' (B) in {-1.5, 0, 1.5}:
    #   d(t) = B_o' - A_o = (20 - o - 10 t, -(20 - o' - 10 t)),
    # so while 10 t < 18.5 the fronts (o = o' = 1.5) are the closest pair: d = (u, -u),
    # u = 18.5 - 10 t, |d| = sqrt(2) u. Contact: sqrt(2) u = 2.42074 -> u = 1.71172,
    # TTC = (18.5 - 1.71172) / 10 = 1.67883 s.
    # DRAC now: dp = (18.5, -18.5), |dp| = 26.16295; dv = (0, 10) - (10, 0) = (-10, 10);
    # closing = -(dp . dv) / |dp| = 370 / 26.16295 = 14.14214 (= 10 sqrt 2) m/s;
    # gap = 26.16295 - 2.42074 = 23.74221 m; DRAC = 200 / (2 * 23.74221) = 4.21191 m/s^2.
    ttc, drac = _pair([(0, 0, 0, 10), (20, -20, math.pi / 2, 10)])
    assert ttc == pytest.approx((18.5 - TWO_R / math.sqrt(2)) / 10.0, rel=1e-5)
    assert ttc == pytest.approx(1.67883, abs=1e-4)
    assert drac == pytest.approx(4.21191, abs=1e-3)


def test_oncoming_in_adjacent_lane_passes() -> None:
    # A at (0, 0) heading +x at 10 m/s, B at (40, 3.5) heading -x at 10 m/s: they close at 20 m/s but
    # the lateral offset 3.5 m > 2r = 2.42 m, so the circles never touch: TTC inf and DRAC 0 (an
    # all-closing-pairs DRAC would report 20^2 / (2 (36.5 - 2.42)) ~ 5.9 m/s^2 here).
    ttc, drac = _pair([(0, 0, 0, 10), (40, 3.5, math.pi, 10)])
    assert math.isinf(ttc)
    assert drac == 0.0


def test_gap_below_one_metre_uses_floor() -> None:
    # Follower at x = 0 at 12 m/s, leader at x = 5.5 at 10 m/s: closest circles 1.5 and 4.0 -> 2.5 m,
    # gap = 2.5 - 2.42074 = 0.07926 m; TTC = 0.07926 / 2 = 0.03963 s;
    # DRAC = 2^2 / (2 * max(0.07926, 1.0)) = 2.0 m/s^2.
    ttc, drac = _pair([(0, 0, 0, 12), (5.5, 0, 0, 10)])
    assert ttc == pytest.approx(0.03963, abs=1e-4)
    assert drac == pytest.approx(2.0, rel=1e-5)


def test_diverging_and_parallel() -> None:
    # Leader faster than follower: receding, TTC inf, DRAC 0.
    assert _pair([(0, 0, 0, 10), (20, 0, 0, 15)]) == (math.inf, 0.0)
    # Back to back, driving apart.
    assert _pair([(0, 0, math.pi, 5), (6, 0, 0, 5)]) == (math.inf, 0.0)
    # Same velocity: no relative motion.
    assert _pair([(0, 0, 0, 10), (10, 0, 0, 10)]) == (math.inf, 0.0)


def test_already_touching_is_zero_ttc() -> None:
    # Bumpers overlap (centres 4 m apart); follower still closing at 2 m/s: TTC 0, DRAC uses the
    # 1 m floor: 2^2 / 2 = 2.0. Stationary overlapping cars: TTC 0 but not closing -> DRAC 0.
    assert _pair([(0, 0, 0, 12), (4.0, 0, 0, 10)]) == (0.0, pytest.approx(2.0))
    assert _pair([(0, 0, 0, 0), (4.0, 0, 0, 0)]) == (0.0, 0.0)


def test_horizon() -> None:
    # Gap 100 - 3 - 2.42074 = 94.57926 m at 5 m/s closing: contact after 18.9 s, beyond 10 s.
    poses = [(0, 0, 0, 15), (100, 0, 0, 10)]
    assert pairwise_ttc(*_cars(poses)).isinf().all()
    assert pairwise_drac(*_cars(poses)).eq(0).all()
    ttc = pairwise_ttc(*_cars(poses), horizon_s=30.0)
    assert float(ttc[0, 0, 1]) == pytest.approx((97.0 - TWO_R) / 5.0, rel=1e-5)


def test_ttc_drac_inactive_diagonal_and_symmetry() -> None:
    cars = _cars([(0, 0, 0, 15), (20, 0, 0, 10), (30, 0, math.pi, 10)])
    ttc, drac = pairwise_ttc_drac(*cars)
    assert ttc.diagonal(dim1=-2, dim2=-1).isinf().all()
    assert drac.diagonal(dim1=-2, dim2=-1).eq(0).all()
    assert torch.isfinite(ttc[0, 0, 1]) and torch.isfinite(ttc[0, 1, 2])
    active = torch.tensor([[True, False, True]])
    pos, yaw, vel, length, width, _ = cars
    ttc2, drac2 = pairwise_ttc_drac(pos, yaw, vel, length, width, active)
    assert ttc2[0, 1].isinf().all() and ttc2[0, :, 1].isinf().all()
    assert drac2[0, 1].eq(0).all() and drac2[0, :, 1].eq(0).all()
    assert torch.equal(ttc2[0, 0, 2], ttc[0, 0, 2])


def test_single_agent_worlds() -> None:
    ttc, drac = pairwise_ttc_drac(*_cars([(0, 0, 0, 10)]))
    assert ttc.shape == drac.shape == (1, 1, 1) and ttc.isinf().all() and drac.eq(0).all()


def _ttc_reference(
    pos: torch.Tensor, yaw: torch.Tensor, vel: torch.Tensor, length: torch.Tensor, width: torch.Tensor
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 loop over agent pairs and circle pairs, textbook quadratic."""
    centres, radius = circle_cover(pos.double(), yaw.double(), length.double(), width.double())
    vel = vel.double()
    w, k = yaw.shape
    ttc = np.full((w, k, k), np.inf)
    drac = np.zeros((w, k, k))
    for b in range(w):
        for i, j in itertools.permutations(range(k), 2):
            v = (vel[b, j] - vel[b, i]).numpy()
            rr = float(radius[b, i] + radius[b, j])
            best, near = np.inf, np.full(2, np.inf)
            for m, n in itertools.product(range(3), range(3)):
                d = (centres[b, j, n] - centres[b, i, m]).numpy()
                if d @ d < near @ near:
                    near = d
                qa, qb, qc = v @ v, 2 * d @ v, d @ d - rr * rr
                if qc <= 0:
                    best = 0.0
                elif qa > 0 and qb * qb - 4 * qa * qc >= 0:
                    t = (-qb - math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
                    if t >= 0:
                        best = min(best, t)
            if best <= 10.0:
                ttc[b, i, j] = best
                dist = float(np.linalg.norm(near))
                closing = -(near @ v) / dist
                if closing > 0:
                    drac[b, i, j] = closing**2 / (2 * max(dist - rr, 1.0))
    return ttc, drac


def test_ttc_drac_match_reference_on_random_traffic() -> None:
    g = torch.Generator().manual_seed(7)
    w, k = 6, 9
    pos = torch.rand(w, k, 2, generator=g) * 40.0
    yaw = (torch.rand(w, k, generator=g) - 0.5) * 2 * math.pi
    speed = torch.rand(w, k, generator=g) * 15.0
    vel = torch.stack((speed * torch.cos(yaw), speed * torch.sin(yaw)), dim=-1)
    length = 3.5 + 2.0 * torch.rand(w, k, generator=g)
    width = 1.6 + 0.6 * torch.rand(w, k, generator=g)
    active = torch.ones(w, k, dtype=torch.bool)
    ttc, drac = pairwise_ttc_drac(pos, yaw, vel, length, width, active)
    ref_ttc, ref_drac = _ttc_reference(pos, yaw, vel, length, width)
    assert np.array_equal(np.isinf(ttc.numpy()), np.isinf(ref_ttc))
    fin = np.isfinite(ref_ttc)
    assert fin.sum() > 10
    np.testing.assert_allclose(ttc.numpy()[fin], ref_ttc[fin], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(drac.numpy(), ref_drac, rtol=1e-4, atol=1e-4)
    assert torch.equal(ttc, ttc.transpose(-1, -2)) and torch.equal(drac, drac.transpose(-1, -2))
    # Separate entry points agree with the combined one; extra leading batch dims work.
    assert torch.equal(pairwise_ttc(pos, yaw, vel, length, width, active), ttc)
    assert torch.equal(pairwise_drac(pos, yaw, vel, length, width, active), drac)
    p2, y2, v2, l2, w2, a2 = (x.reshape(2, 3, *x.shape[1:]) for x in (pos, yaw, vel, length, width, active))
    ttc2 = pairwise_ttc(p2, y2, v2, l2, w2, a2)
    assert torch.equal(ttc2.reshape(w, k, k), ttc)


# ---------------------------------------------------------------------------------------------
# Nearest points, ego frame, polyline projection


def test_nearest_k_ordering_and_invalid_points() -> None:
    query = torch.tensor([[[0.0, 0.0], [10.0, 0.0]]])  # [1, 2, 2]
    points = torch.tensor([[[1.0, 0.0], [0.0, 0.5], [3.0, 4.0], [0.1, 0.0], [9.0, 0.0]]])
    valid = torch.tensor([[True, True, True, False, True]])  # the point (0.1, 0) is invalid
    idx, dist, ok = nearest_k(query, points, valid, k=3)
    # From (0, 0): 1.0, 0.5, 5.0, (0.1 invalid), 9.0 -> points 1, 0, 2.
    assert idx[0, 0].tolist() == [1, 0, 2]
    torch.testing.assert_close(dist[0, 0], torch.tensor([0.5, 1.0, 5.0]))
    # From (10, 0): 9.0, 10.0125, sqrt(49 + 16) = 8.0623, (invalid), 1.0 -> points 4, 2, 0.
    assert idx[0, 1].tolist() == [4, 2, 0]
    torch.testing.assert_close(dist[0, 1], torch.tensor([1.0, math.sqrt(65.0), 9.0]))
    assert ok.all() and idx.dtype == torch.long


def test_nearest_k_fewer_valid_than_k() -> None:
    query = torch.zeros(2, 1, 2)
    points = torch.tensor([[[5.0, 0.0], [1.0, 0.0], [2.0, 0.0]], [[1.0, 1.0], [0.0, 3.0], [0.0, 0.0]]])
    valid = torch.tensor([[False, True, True], [False, False, False]])
    idx, dist, ok = nearest_k(query, points, valid, k=5)  # k > P as well
    assert ok[0, 0].tolist() == [True, True, False, False, False]
    assert idx[0, 0, :2].tolist() == [1, 2] and idx[0, 0, 2:].eq(0).all()
    assert dist[0, 0, :2].tolist() == [1.0, 2.0] and dist[0, 0, 2:].isinf().all()
    assert not ok[1].any() and idx[1].eq(0).all()


def test_world_to_ego() -> None:
    # Ego at (1, 2) facing +y: (1, 5) is 3 m ahead; (0, 2) is 1 m to the left; (2, 1) is behind-right.
    pts = torch.tensor([[1.0, 5.0], [0.0, 2.0], [2.0, 1.0]])
    out = world_to_ego(pts, torch.tensor([1.0, 2.0]), torch.tensor(math.pi / 2))
    torch.testing.assert_close(out, torch.tensor([[3.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]), atol=1e-6, rtol=0)
    # Broadcasting: [W, K, P, 2] points against [W, K, 1, 2] egos; rotating back recovers the points.
    g = torch.Generator().manual_seed(0)
    xy = torch.randn(3, 4, 5, 2, generator=g)
    ego = torch.randn(3, 4, 2, generator=g)
    yaw = torch.randn(3, 4, generator=g)
    local = world_to_ego(xy, ego[:, :, None], yaw[:, :, None])
    assert local.shape == (3, 4, 5, 2)
    back = world_to_ego(local, torch.zeros(2), -yaw[:, :, None]) + ego[:, :, None]
    torch.testing.assert_close(back, xy, atol=1e-5, rtol=0)
    torch.testing.assert_close(local.norm(dim=-1), (xy - ego[:, :, None]).norm(dim=-1))


def test_wrap_angle() -> None:
    out = wrap_angle(torch.tensor([0.0, 3 * math.pi / 2, -3 * math.pi / 2, 7.0]))
    torch.testing.assert_close(out, torch.tensor([0.0, -math.pi / 2, math.pi / 2, 7.0 - 2 * math.pi]))


def test_project_on_l_shaped_polyline() -> None:
    # L: (0, 0) -> (10, 0) -> (10, 10), then two invalid padding points far away.
    poly = torch.tensor([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [-50.0, 5.0], [0.0, 0.0]])
    valid = torch.tensor([True, True, True, False, False])
    queries = torch.tensor(
        [
            [4.0, 2.0],  # over segment 0: s = 4, 2 m left, heading 0
            [12.0, 6.0],  # beside segment 1 (heading +y), 2 m to its right: s = 10 + 6 = 16
            [8.0, 3.0],  # 3 m from segment 0, 2 m from segment 1 (left side): s = 13
            [12.0, -2.0],  # outside the corner: nearest is the vertex (10, 0), sqrt 8 to the right;
            # both segments tie and the lower index (0) wins: s = 10
            [-3.0, 1.0],  # before the start: nearest is (0, 0), sqrt 10, left; s = 0
            [-49.0, 5.0],  # next to an invalid point: still projects on the valid L, onto (0, 0)
        ]
    )
    n = len(queries)
    s, lat, yaw, seg = project_on_polyline(queries[None], poly.expand(1, n, 5, 2), valid.expand(1, n, 5))
    torch.testing.assert_close(s[0], torch.tensor([4.0, 16.0, 13.0, 10.0, 0.0, 0.0]))
    torch.testing.assert_close(
        lat[0], torch.tensor([2.0, -2.0, 2.0, -math.sqrt(8.0), math.sqrt(10.0), math.sqrt(49.0**2 + 25.0)])
    )
    torch.testing.assert_close(yaw[0], torch.tensor([0.0, math.pi / 2, math.pi / 2, 0.0, 0.0, 0.0]))
    assert seg[0].tolist() == [0, 1, 1, 0, 0, 0]


def test_project_skips_invalid_gap_and_handles_empty() -> None:
    # Points 0-1 valid, 2 invalid, 3-4 valid: segments (1, 2) and (2, 3) are ignored, and the arc
    # length skips the gap: s at the start of segment 3 is |p1 - p0| = 5.
    poly = torch.tensor([[[[0.0, 0.0], [5.0, 0.0], [99.0, 99.0], [20.0, 0.0], [30.0, 0.0]]] * 2])
    valid = torch.tensor([[[True, True, False, True, True], [False] * 5]])
    pos = torch.tensor([[[25.0, -1.0], [25.0, -1.0]]])
    s, lat, yaw, seg = project_on_polyline(pos, poly, valid)
    assert seg[0, 0] == 3
    assert float(s[0, 0]) == pytest.approx(10.0)  # 5 (segment 0) + 5 along segment 3
    assert float(lat[0, 0]) == pytest.approx(-1.0)
    assert s[0, 1] == 0 and lat[0, 1] == 0 and yaw[0, 1] == 0  # no valid segment


def test_project_repeated_point_and_precomputed_segments() -> None:
    # (0, 0) -> (10, 0) -> (10, 0) -> (10, 10): the zero-length segment 1 (a repeated point, with
    # no heading) is skipped. (11, -1) is nearest the corner, a tie between segments 0 and 2 that
    # the lower index wins: s = 10, sqrt(2) to the right, heading 0. (9, 5) is 1 m left of
    # segment 2: s = 10 + 0 + 5 = 15, heading pi/2.
    poly = torch.tensor([[[0.0, 0.0], [10.0, 0.0], [10.0, 0.0], [10.0, 10.0]]])
    valid = torch.ones(1, 4, dtype=torch.bool)
    pos = torch.tensor([[11.0, -1.0], [9.0, 5.0]])
    s, lat, yaw, seg = project_on_polyline(pos, poly.expand(2, 4, 2), valid.expand(2, 4))
    assert seg.tolist() == [0, 2]
    torch.testing.assert_close(s, torch.tensor([10.0, 15.0]))
    torch.testing.assert_close(lat, torch.tensor([-math.sqrt(2.0), 1.0]))
    torch.testing.assert_close(yaw, torch.tensor([0.0, math.pi / 2]))
    segs = polyline_segments(poly.expand(2, 4, 2), valid.expand(2, 4))
    for a, b in zip(project_on_segments(pos, segs), (s, lat, yaw, seg), strict=True):
        assert torch.equal(a, b)
