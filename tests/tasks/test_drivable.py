"""Tests of the drivable-area distance field: hand-worked values, the tiled build, stacked sampling.

Field (``tasks.driving.drivable``): the minimum of the lane part (distance to a lane centre segment
minus half the interpolated width; round caps of radius w/2 past a lane's ends), the road-edge part
(distance to the nearest edge, negative on its left, WOMD's convention, with the turn rule at
vertices) and the driveway part (distance to a driveway outline, negative inside). The procedural
generators must orient their edges by that convention: a property test over many seeds.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.scenes.library import GENERATOR_KINDS
from scenefactory.scenes.procedural import get_generator
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.tasks.driving.drivable import OFFROAD_PAD_M, DrivableGrid, GridStack, build_drivable_grid
from scenefactory.tasks.driving.road_distance import (
    drivable_signed_distance,
    driveway_signed_distance,
    edge_segments,
    edge_signed_distance,
    lane_segments,
    lane_signed_distance,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _graph(lanes: list[np.ndarray], widths: list) -> RoadGraph:
    return RoadGraph.from_lists(lanes, widths, [[]] * len(lanes), [[]] * len(lanes))


def _straight() -> RoadGraph:
    """One 4 m wide lane from (0, 0) to (50, 0), a point every 10 m."""
    xs = np.arange(0.0, 50.1, 10.0)
    return _graph([np.stack([xs, np.zeros_like(xs)], 1)], [4.0])


def _curvy(seed: int = 0, n_lanes: int = 12, extent_m: float = 80.0) -> RoadGraph:
    """Random quadratic Bezier lanes with widths varying 3-4.5 m along them."""
    rng = np.random.default_rng(seed)
    lanes, widths = [], []
    t = np.linspace(0.0, 1.0, 15)[:, None]
    for _ in range(n_lanes):
        p0, m, p1 = rng.uniform(0.0, extent_m, (3, 2))
        lanes.append((1 - t) ** 2 * p0 + 2 * (1 - t) * t * m + t**2 * p1)
        widths.append(np.linspace(rng.uniform(3.0, 4.5), rng.uniform(3.0, 4.5), len(t)))
    return _graph(lanes, widths)


def test_straight_lane_hand_values() -> None:
    rg = _straight()
    pts = np.array(
        [
            [25.0, 0.0],  # on the centre line: -w/2 = -2
            [25.0, 1.0],  # 1 m off centre: 1 - 2 = -1
            [25.0, -2.0],  # on the border: 0
            [25.0, 5.0],  # 5 - 2 = 3 m off road
            [53.0, 0.0],  # 3 m past the end, on the axis: round cap, 3 - 2 = 1
            [52.0, 0.0],  # on the cap: 0
            [-1.0, 0.0],  # 1 m before the start, inside the cap: -1
            [53.0, 4.0],  # beyond the end, diagonally: sqrt(9 + 16) - 2 = 3
        ]
    )
    expect = np.array([-2.0, -1.0, 0.0, 3.0, 1.0, 0.0, -1.0, 3.0])
    np.testing.assert_allclose(lane_signed_distance(rg, pts), expect, atol=1e-9)


def test_width_interpolates_along_segment() -> None:
    # One segment (0, 0) -> (10, 0), widths 2 -> 6: half width at x = 5 is (1 + 3) / 2 = 2, so
    # (5, 3) is 3 - 2 = 1 m off road and (5, 1) is 1 - 2 = -1 inside.
    rg = _graph([np.array([[0.0, 0.0], [10.0, 0.0]])], [np.array([2.0, 6.0])])
    np.testing.assert_allclose(lane_signed_distance(rg, np.array([[5.0, 3.0], [5.0, 1.0]])), [1.0, -1.0])
    a, b, hwa, hwb = lane_segments(rg)
    assert a.shape == b.shape == (1, 2) and hwa.tolist() == [1.0] and hwb.tolist() == [3.0]


def test_grid_layout_for_straight_lane() -> None:
    # Bounds (0, 0, 50, 0) plus 20 m margin at 1 m: origin (-20, -20), 91 columns, 41 rows.
    grid = build_drivable_grid(_straight())
    assert grid.values.shape == (41, 91) and grid.values.dtype == np.float32
    np.testing.assert_allclose(grid.origin_xy, [-20.0, -20.0])
    # Node (row 20, col 45) is (25, 0): -2; node (row 25, col 45) is (25, 5): 3.
    assert grid.values[20, 45] == pytest.approx(-2.0)
    assert grid.values[25, 45] == pytest.approx(3.0)
    # The grid corner (-20, -20) is sqrt(20^2 + 20^2) - 2 from the start point.
    assert grid.values[0, 0] == pytest.approx(math.hypot(20.0, 20.0) - 2.0, abs=1e-4)
    np.testing.assert_allclose(grid.node_xy()[25, 45], [25.0, 5.0])


@pytest.mark.parametrize("resolution_m", [1.0, 0.7])
def test_tiled_build_matches_brute_force_at_every_node(resolution_m: float) -> None:
    # The build skips segments per tile by bounds; every node must still equal the direct field.
    rg = _curvy(seed=1)
    grid = build_drivable_grid(rg, resolution_m=resolution_m, margin_m=15.0)
    ref = lane_signed_distance(rg, grid.node_xy())
    np.testing.assert_allclose(grid.values, ref, atol=2e-4)
    assert (grid.values < 0).any() and (grid.values > 10).any()


def test_bilinear_sampling_against_direct_evaluation() -> None:
    rg = _curvy(seed=2)
    grid = build_drivable_grid(rg)
    stack = GridStack.from_grids([grid])
    rng = np.random.default_rng(0)
    xmin, ymin, xmax, ymax = rg.bounds()
    pts = rng.uniform([xmin - 15, ymin - 15], [xmax + 15, ymax + 15], (4000, 2))
    got = stack.sample(torch.zeros(len(pts), dtype=torch.long), torch.from_numpy(pts).float()).numpy()
    ref = lane_signed_distance(rg, pts)
    err = np.abs(got - ref)
    # The field is (nearly) 1-Lipschitz, so the bilinear value, a weighted mean of corner values,
    # is within the weighted mean corner distance, at most sqrt(2)/2 cell, of the true value. It is
    # that large only at kinks (centre lines, where |y| - w/2 bends; crossings); elsewhere the
    # field is nearly linear and interpolation nearly exact. Measured: max 0.49-0.51, median 0.005.
    assert err.max() < math.sqrt(2.0) / 2.0
    assert np.median(err) < 0.02
    # At the nodes themselves sampling is exact, up to the float16 storage (1/2048 of the value).
    nodes = grid.node_xy()[::7, ::5].reshape(-1, 2)
    at_nodes = stack.sample(torch.zeros(len(nodes), dtype=torch.long), torch.from_numpy(nodes).float())
    np.testing.assert_allclose(at_nodes.numpy(), grid.values[::7, ::5].reshape(-1), rtol=2**-11, atol=1e-4)


def test_bilinear_is_exact_where_the_field_is_linear() -> None:
    # Beside a straight lane, away from its ends, the field |y| - 2 is linear on each side of y = 0.
    stack = GridStack.from_grids([build_drivable_grid(_straight())])
    g = torch.Generator().manual_seed(0)
    x = 10.0 + 30.0 * torch.rand(500, generator=g)
    side = torch.where(torch.rand(500, generator=g) < 0.5, 1.0, -1.0)
    y = side * (1.0 + 15.0 * torch.rand(500, generator=g))
    got = stack.sample(torch.zeros(500, dtype=torch.long), torch.stack((x, y), -1))
    torch.testing.assert_close(got, y.abs() - 2.0, atol=1e-4, rtol=2**-11)  # float16 storage


def test_stack_packing_and_outside_points() -> None:
    # Scene 0: 91 x 41 nodes from (-20, -20). Scene 1: a short lane at 0.5 m resolution, smaller grid
    # from (95, 95) to (125, 105) -> 61 x 21 nodes, packed after scene 0's (no padding).
    big = build_drivable_grid(_straight())
    small = build_drivable_grid(_graph([np.array([[100.0, 100.0], [120.0, 100.0]])], [3.0]), 0.5, 5.0)
    assert small.values.shape == (21, 61)
    stack = GridStack.from_grids([big, small])
    assert stack.values.shape == (41 * 91 + 21 * 61,)
    # Stored as float16: within 1/2048 of each value.
    np.testing.assert_allclose(stack.grid(0), big.values, rtol=2**-11, atol=0)
    np.testing.assert_allclose(stack.grid(1), small.values, rtol=2**-11, atol=0)
    ids = torch.tensor([0, 0, 1, 1, 1, 1, 1, 0])
    xy = torch.tensor(
        [
            [25.0, 1.0],  # scene 0, inside the lane: -1
            [200.0, 0.0],  # scene 0, east of its grid: off-road pad
            [110.0, 100.5],  # scene 1, inside: 0.5 - 1.5 = -1
            [125.0, 105.0],  # scene 1, its last node (top-right corner): sqrt(25 + 25) - 1.5
            [125.2, 100.0],  # scene 1, just past its last column: pad
            [25.0, 1.0],  # scene 1 has no road there and it is outside its grid: pad
            [float("nan"), 0.0],  # NaN reads as outside
            [-20.0, 20.0],  # scene 0, its top-left node: sqrt(20^2 + 20^2) - 2
        ]
    )
    got = stack.sample(ids, xy)
    pad = OFFROAD_PAD_M
    expect = torch.tensor([-1.0, pad, -1.0, math.hypot(5, 5) - 1.5, pad, pad, pad, math.hypot(20, 20) - 2.0])
    torch.testing.assert_close(got, expect, atol=1e-4, rtol=2**-11)  # float16 storage
    # Batched shapes: [W, K] ids with [W, K, 2] points.
    out = stack.sample(ids.reshape(2, 4), xy.reshape(2, 4, 2))
    assert out.shape == (2, 4)
    torch.testing.assert_close(out.reshape(-1), expect, atol=1e-4, rtol=2**-11)


def test_grid_checks_fail_loudly() -> None:
    with pytest.raises(ValueError):
        DrivableGrid(np.zeros(2), 1.0, np.zeros((3, 3)))  # float64 values
    with pytest.raises(ValueError):
        DrivableGrid(np.zeros(2), 0.0, np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError):
        GridStack.from_grids([])
    with pytest.raises(ValueError):
        build_drivable_grid(_straight(), resolution_m=-1.0)


# ------------------------------------------------------------------------- road edges and driveways


def _with_edges(edges: list[np.ndarray], lanes: list[np.ndarray] | None = None) -> RoadGraph:
    """Edges (BOUNDARY) around one short lane far away (the lane part never wins near the edges)."""
    lanes = lanes or [np.array([[500.0, 500.0], [501.0, 500.0]])]
    return RoadGraph.from_lists(
        lanes,
        [3.0] * len(lanes),
        [[]] * len(lanes),
        [[]] * len(lanes),
        edges=edges,
        edge_types=[1] * len(edges),
    )


def test_edge_sign_hand_values() -> None:
    """Left of an edge is road (negative). At a vertex the turn decides: where the edge turns left
    (a convex road corner) a point must be left of both segments' lines, where it turns right, of
    either; past an open end the end segment's line decides."""
    left_turn = _with_edges([np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0]])])  # road: x < 10, y > 0
    pts = np.array(
        [
            [5.0, 2.0],  # left of segment 0: -2
            [5.0, -3.0],  # right of it: +3
            [8.0, 1.0],  # nearer segment 0 (1 m) than segment 1 (2 m): -1
            [12.0, -2.0],  # nearest the corner vertex, outside the convex corner: +sqrt(8)
            [13.0, 5.0],  # right of segment 1 (heading north): +3
            [-3.0, 1.0],  # before the open start, left of the first segment's line: -sqrt(10)
            [-3.0, -1.0],  # and right of it: +sqrt(10)
        ]
    )
    r8, r10 = math.sqrt(8.0), math.sqrt(10.0)
    np.testing.assert_allclose(
        edge_signed_distance(left_turn, pts), [-2, 3, -1, r8, 3, -r10, r10], atol=1e-12
    )
    right_turn = _with_edges([np.array([[0.0, 0.0], [10.0, 0.0], [10.0, -10.0]])])  # road: y > 0 or x > 10
    pts = np.array([[12.0, 2.0], [8.0, -1.0], [12.0, -5.0]])
    # (12, 2) is nearest the vertex, left of segment 0's line only: road. (8, -1): right of both: off.
    np.testing.assert_allclose(edge_signed_distance(right_turn, pts), [-r8, 1.0, -2.0], atol=1e-12)


def test_closed_edges_wind_counter_clockwise_around_road() -> None:
    """A closed edge (ends within 1 m: the gap is closed) is a loop: counter-clockwise it bounds a
    road area, clockwise it bounds an island (a median) with road all around."""
    square = np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0], [0.0, 0.6]])  # 0.6 m gap
    ccw, cw = _with_edges([square]), _with_edges([square[::-1]])
    pts = np.array([[5.0, 5.0], [1.0, 5.0], [-2.0, 5.0], [-1.0, -1.0], [0.0, 0.3]])
    inside = np.array([-5.0, -1.0, 2.0, math.sqrt(2.0), 0.0])
    np.testing.assert_allclose(edge_signed_distance(ccw, pts), inside, atol=1e-12)
    np.testing.assert_allclose(edge_signed_distance(cw, pts), -inside, atol=1e-12)
    a, _, prev, nxt = edge_segments(ccw)
    assert len(a) == 5 and prev[0] == 4 and nxt[4] == 0  # the gap became a fifth segment


def test_driveway_polygons_either_winding() -> None:
    poly = np.array([[0.0, 0.0], [6.0, 0.0], [6.0, 4.0], [0.0, 4.0]])
    pts = np.array([[3.0, 2.0], [1.0, 2.0], [3.0, 7.0], [-3.0, -4.0]])
    expect = np.array([-2.0, -1.0, 3.0, 5.0])
    for p in (poly, poly[::-1], np.vstack([poly, poly[:1]])):  # CCW, CW, explicitly closed
        rg = _straight().with_driveways([p])
        np.testing.assert_allclose(driveway_signed_distance(rg, pts), expect, atol=1e-12)
    assert np.isinf(driveway_signed_distance(_straight(), pts)).all()  # no driveway: no area


def test_field_is_the_union_of_its_parts() -> None:
    """A 4 m lane along y = 0, kerbs 2 m beyond its borders (y = -4, +4) and a driveway past the
    south kerb: the shoulder is road only thanks to the edges, the driveway thanks to itself."""
    xs = np.arange(0.0, 50.1, 10.0)
    edges = [np.stack([xs, np.full_like(xs, -4.0)], 1), np.stack([xs[::-1], np.full_like(xs, 4.0)], 1)]
    rg = _with_edges(edges, [np.stack([xs, np.zeros_like(xs)], 1)]).with_driveways(
        [np.array([[20.0, -3.0], [26.0, -3.0], [26.0, -15.0], [20.0, -15.0]])]
    )
    pts = np.array([[10.0, 0.0], [10.0, -3.0], [10.0, -5.0], [23.0, -10.0], [40.0, 6.0]])
    # centre: lane -2, edges -4 -> -4; shoulder: lane +1, edge -1; past the kerb: +1; in the
    # driveway: 3 m from its sides; beyond the north kerb: +2.
    np.testing.assert_allclose(drivable_signed_distance(rg, pts), [-4.0, -1.0, 1.0, -3.0, 2.0], atol=1e-12)
    grid = build_drivable_grid(rg)
    np.testing.assert_allclose(grid.values, drivable_signed_distance(rg, grid.node_xy()), atol=2e-4)
    bare = replace(rg, edge_xy=np.zeros((0, 1, 2)), edge_valid=np.zeros((0, 1), bool), edge_type=np.zeros(0))
    np.testing.assert_allclose(
        drivable_signed_distance(bare.with_driveways([]), pts), lane_signed_distance(rg, pts)
    )


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_grid_matches_direct_field_on_procedural_roads(kind: str) -> None:
    rng = np.random.default_rng(5)
    gen = get_generator(kind)
    rg = gen.make(gen.sample(rng), rng)
    grid = build_drivable_grid(rg, resolution_m=1.3, margin_m=10.0)
    np.testing.assert_allclose(grid.values, drivable_signed_distance(rg, grid.node_xy()), atol=3e-4)


@given(seed=st.integers(0, 2**31 - 1))
def test_procedural_edges_keep_the_road_on_their_left(seed: int) -> None:
    """For every generator kind: every lane centre point is on the road by the edges alone, at
    least half its lane width in; a point 1.5 m to the right of an edge segment (where that segment
    is the nearest edge) is 1.5 m off-road, lanes included."""
    for kind in GENERATOR_KINDS:
        rng = np.random.default_rng(seed)
        gen = get_generator(kind)
        rg = gen.make(gen.sample(rng), rng)
        lanes = rg.lane_xy[rg.lane_valid]
        f_edge = edge_signed_distance(rg, lanes)
        assert np.all(f_edge <= -0.5 * rg.lane_width_m[rg.lane_valid] + 1e-6), kind
        a, b, _, _ = edge_segments(rg)
        e = b - a
        right = np.stack([e[:, 1], -e[:, 0]], 1) / np.linalg.norm(e, axis=1, keepdims=True)
        q = 0.5 * (a + b) + 1.5 * right
        nearest = np.abs(edge_signed_distance(rg, q))
        own = nearest > 1.5 - 1e-6  # no other edge nearer (e.g. the ramp beside a merge's gore)
        assert own.mean() > 0.9, kind
        np.testing.assert_allclose(drivable_signed_distance(rg, q[own]), 1.5, atol=1e-6, err_msg=kind)
