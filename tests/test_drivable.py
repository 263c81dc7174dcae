"""Tests of the drivable-area distance field: hand-worked values, the tiled build, stacked sampling.

Field: min over lane centre segments of (distance to the segment - half the interpolated width);
negative inside a lane, round caps of radius w/2 past a lane's ends.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.tasks.driving.drivable import (
    OFFROAD_PAD_M,
    DrivableGrid,
    GridStack,
    build_drivable_grid,
    lane_segments,
    lane_signed_distance,
)


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
    # At the nodes themselves sampling is exact.
    nodes = grid.node_xy()[::7, ::5].reshape(-1, 2)
    at_nodes = stack.sample(torch.zeros(len(nodes), dtype=torch.long), torch.from_numpy(nodes).float())
    np.testing.assert_allclose(at_nodes.numpy(), grid.values[::7, ::5].reshape(-1), atol=1e-4)


def test_bilinear_is_exact_where_the_field_is_linear() -> None:
    # Beside a straight lane, away from its ends, the field |y| - 2 is linear on each side of y = 0.
    stack = GridStack.from_grids([build_drivable_grid(_straight())])
    g = torch.Generator().manual_seed(0)
    x = 10.0 + 30.0 * torch.rand(500, generator=g)
    side = torch.where(torch.rand(500, generator=g) < 0.5, 1.0, -1.0)
    y = side * (1.0 + 15.0 * torch.rand(500, generator=g))
    got = stack.sample(torch.zeros(500, dtype=torch.long), torch.stack((x, y), -1))
    torch.testing.assert_close(got, y.abs() - 2.0, atol=1e-4, rtol=0)


def test_stack_padding_and_outside_points() -> None:
    # Scene 0: 91 x 41 nodes from (-20, -20). Scene 1: a short lane at 0.5 m resolution, smaller grid
    # from (95, 95) to (125, 105) -> 61 x 21 nodes, padded to scene 0's size in the stack.
    big = build_drivable_grid(_straight())
    small = build_drivable_grid(_graph([np.array([[100.0, 100.0], [120.0, 100.0]])], [3.0]), 0.5, 5.0)
    assert small.values.shape == (21, 61)
    stack = GridStack.from_grids([big, small])
    assert stack.values.shape == (2, 41, 91)
    assert float(stack.values[1, 30, 80]) == OFFROAD_PAD_M
    ids = torch.tensor([0, 0, 1, 1, 1, 1, 1, 0])
    xy = torch.tensor(
        [
            [25.0, 1.0],  # scene 0, inside the lane: -1
            [200.0, 0.0],  # scene 0, east of its grid: off-road pad
            [110.0, 100.5],  # scene 1, inside: 0.5 - 1.5 = -1
            [125.0, 105.0],  # scene 1, its last node (top-right corner): sqrt(25 + 25) - 1.5
            [125.2, 100.0],  # scene 1, just past its last column (inside the padded tensor): pad
            [25.0, 1.0],  # scene 1 has no road there and it is outside its grid: pad
            [float("nan"), 0.0],  # NaN reads as outside
            [-20.0, 20.0],  # scene 0, its top-left node: sqrt(20^2 + 20^2) - 2
        ]
    )
    got = stack.sample(ids, xy)
    pad = OFFROAD_PAD_M
    expect = torch.tensor([-1.0, pad, -1.0, math.hypot(5, 5) - 1.5, pad, pad, pad, math.hypot(20, 20) - 2.0])
    torch.testing.assert_close(got, expect, atol=1e-4, rtol=0)
    # Batched shapes: [W, K] ids with [W, K, 2] points.
    out = stack.sample(ids.reshape(2, 4), xy.reshape(2, 4, 2))
    assert out.shape == (2, 4)
    torch.testing.assert_close(out.reshape(-1), expect, atol=1e-4, rtol=0)


def test_grid_checks_fail_loudly() -> None:
    with pytest.raises(ValueError):
        DrivableGrid(np.zeros(2), 1.0, np.zeros((3, 3)))  # float64 values
    with pytest.raises(ValueError):
        DrivableGrid(np.zeros(2), 0.0, np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError):
        GridStack.from_grids([])
    with pytest.raises(ValueError):
        build_drivable_grid(_straight(), resolution_m=-1.0)
