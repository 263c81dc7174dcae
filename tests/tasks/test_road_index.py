"""The road-point spatial index answers exactly what the brute-force search over the whole map does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.drivable import build_drivable_grid
from scenefactory.tasks.driving.geometry import nearest_k
from scenefactory.tasks.driving.pool import build_pool, road_points
from scenefactory.tasks.driving.road_index import RoadPointIndex, build_scene_cells


def _on_road_queries(pool, scene: int, n: int, seed: int) -> torch.Tensor:
    """``n`` positions of scene ``scene`` inside its drivable area plus up to 1 m."""
    rng = np.random.default_rng(seed)
    g = pool.grids
    h, w = (int(v) for v in g.shape_hw[scene])
    origin = g.origin_xy[scene].numpy().astype(np.float64)
    res = float(g.resolution_m[scene])
    found: list[np.ndarray] = []
    while sum(len(f) for f in found) < n:
        xy = origin + rng.uniform([0, 0], [(w - 1) * res, (h - 1) * res], (4 * n, 2))
        ids = torch.full((len(xy),), scene, dtype=torch.long)
        field = g.sample(ids, torch.from_numpy(xy).float()).numpy()
        found.append(xy[field <= 1.0])
    return torch.from_numpy(np.concatenate(found)[:n]).float()


def _brute(pool, scene: int, q: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    roads = pool.roads
    lo, hi = int(roads.point_start[scene]), int(roads.point_start[scene + 1])
    pts = roads.xy[lo:hi]
    idx, dist, ok = nearest_k(q[None], pts[None], torch.ones(1, hi - lo, dtype=torch.bool), k)
    return torch.where(ok[0], idx[0] + lo, -1), torch.where(ok[0], dist[0], torch.inf)


def _check(pool, scene: int, q: torch.Tensor, k: int, range_m: float) -> None:
    ids, dist, ok = pool.roads.nearest(torch.tensor([scene]), q[None], k)
    ref_ids, ref_dist = _brute(pool, scene, q, k)
    # Within range the distances agree exactly (same float32 arithmetic); ids agree up to (near-)ties.
    in_range = ref_dist <= range_m
    got = torch.where(ok[0], dist[0], torch.inf)
    torch.testing.assert_close(torch.where(in_range, got, 0.0), torch.where(in_range, ref_dist, 0.0))
    same = (ids[0] == ref_ids) | ~in_range
    tie = torch.isclose(got, ref_dist, rtol=0, atol=1e-4) & in_range  # near-ties may swap
    assert bool((same | tie).all())


@pytest.mark.parametrize("kind_seed", [0, 1, 2])
def test_index_matches_brute_force_on_procedural_scenes(kind_seed: int) -> None:
    scenes = procedural_scenes("train", 3, 4, base_seed=kind_seed)
    pool = build_pool(scenes, 4, 3.0, torch.device("cpu"))
    biggest = int((pool.roads.point_start[1:] - pool.roads.point_start[:-1]).max())
    for s in range(len(scenes)):
        q = _on_road_queries(pool, s, 400, seed=s)
        _check(pool, s, q, 24, 50.0)
        # A query reads one disc of cells: far fewer points than the map holds.
        ids, _ = pool.roads.candidates(torch.tensor([s]), q[None])
        assert ids.shape[-1] < biggest


def test_packed_points_scale_with_the_total_not_the_largest_map() -> None:
    scenes = procedural_scenes("train", 4, 4)
    pool = build_pool(scenes, 4, 3.0, torch.device("cpu"))
    sizes = [len(road_points(sc, 3.0)[0]) for sc in scenes]
    assert pool.roads.xy.shape == (sum(sizes), 2)
    assert int(pool.grids.values.numel()) == sum(
        build_drivable_grid(sc.roadgraph).values.size for sc in scenes
    )


@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(1, 30),
    range_m=st.floats(5.0, 80.0),
    cell_m=st.floats(1.5, 40.0),
    depth=st.integers(0, 4),
)
def test_index_is_exact_for_random_points(
    seed: int, k: int, range_m: float, cell_m: float, depth: int
) -> None:
    # Random clustered points over one scene's grid; queries anywhere in the grid where a vehicle could
    # still be on the road (every cell is indexed when the field is everywhere low).
    scenes = procedural_scenes("train", 1, 2)
    grid = build_drivable_grid(scenes[0].roadgraph)
    grid = type(grid)(grid.origin_xy, grid.resolution_m, np.full_like(grid.values, -1.0))
    rng = np.random.default_rng(seed)
    h, w = grid.values.shape
    size = np.array([w - 1, h - 1]) * grid.resolution_m
    centres = grid.origin_xy + rng.uniform(0, 1, (5, 2)) * size
    xy = np.concatenate([c + rng.normal(0, rng.uniform(0.5, 30), (rng.integers(0, 80), 2)) for c in centres])
    feat = np.zeros((len(xy), 5))
    cells = build_scene_cells(xy, grid, k, range_m, cell_m)
    index = RoadPointIndex.build([(xy, feat)], [cells], k, range_m)
    q = torch.from_numpy(grid.origin_xy + rng.uniform(0, 1, (200, 2)) * size).float()
    _, dist, ok = index.nearest(torch.tensor([0]), q[None], k)
    _, ref_dist, ref_ok = nearest_k(q[None], index.xy[None], torch.ones(1, len(xy), dtype=torch.bool), k)
    in_range = ref_ok[0] & (ref_dist[0] <= range_m)
    got = torch.where(ok[0], dist[0], torch.inf)
    torch.testing.assert_close(torch.where(in_range, got, 0.0), torch.where(in_range, ref_dist[0], 0.0))


def test_index_refuses_larger_queries_than_built_for() -> None:
    scenes = procedural_scenes("train", 1, 2)
    pool = build_pool(scenes, 2, 3.0, torch.device("cpu"), num_road_points=8)
    with pytest.raises(ValueError, match="up to 8 nearest"):
        pool.roads.nearest(torch.tensor([0]), torch.zeros(1, 1, 2), 9)
