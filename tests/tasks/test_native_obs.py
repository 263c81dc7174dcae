"""The native observation kernels (road points, neighbours, route projection) give the torch path's
numbers bit for bit, equal distances included (both order them by point or object id).

``tests/tasks/test_agent_pairs.py`` checks the interaction kernels (TTC, DRAC, overlap) and the
packed logged objects; here the environment is run with ``native_kernels`` on and off over rollouts
with resets on real-format scenes with busy logged traffic and on procedural scenes, and every
observation, reward, reward term, done and finished record compared, then each kernel on cases made
to hold exact ties.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from test_agent_pairs import assert_same, rollout

from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.synthetic import Background, city_scenario
from scenefactory.tasks.driving import native
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.geometry import nearest_segment, polyline_segments, smallest_k
from scenefactory.tasks.driving.native_obs import (
    NativeGridSample,
    NativeRoadObs,
    native_neighbor_obs,
    native_route_lookahead_obs,
)
from scenefactory.tasks.driving.observations import neighbor_obs, road_obs, route_lookahead_obs
from scenefactory.tasks.driving.road_index import RoadPointIndex, SceneCells

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUSY = Background(pedestrians=10, cyclists=4, extra_parked=10, occluded_share=0.8)


@pytest.fixture(scope="module")
def busy_scenes() -> list[Scene]:
    return [
        scenario_to_scene(city_scenario(f"busy-{s}", s, target, moving, 2, background=BUSY))[0]
        for s, (target, moving) in enumerate(((1500, 8), (2500, 12)))
    ]


def _both(cfg: DrivingTaskConfig, scenes: list[Scene], steps: int) -> tuple[list, list]:
    on = rollout(DrivingEnv(cfg, scenes, seed=1), steps)
    off = rollout(DrivingEnv(replace(cfg, native_kernels=False), scenes, seed=1), steps)
    return on, off


def test_env_native_equals_torch_on_real_format_scenes(busy_scenes: list[Scene]) -> None:
    cfg = DrivingTaskConfig(num_worlds=6, agents_per_world=8, episode_length_s=6.0)
    on, off = _both(cfg, busy_scenes, 70)
    assert_same(on, off)
    assert len(torch.cat([r.finished.outcome for r in on[1:]])) > 10  # episodes ended, worlds reset


def test_env_native_equals_torch_on_procedural_scenes() -> None:
    cfg = DrivingTaskConfig(num_worlds=4, agents_per_world=8, episode_length_s=3.0)
    on, off = _both(cfg, procedural_scenes("train", 4, 8, base_seed=3), 40)
    assert_same(on, off)


def test_smallest_k_orders_equal_distances_by_position() -> None:
    d2 = torch.tensor([[4.0, 1.0, 4.0, 1.0, torch.inf, 0.5, 1.0]])
    for x in (d2, d2.double()):
        pos, dist, valid = smallest_k(x, 6)
        assert pos.tolist() == [[5, 1, 3, 6, 0, 2]]
        assert valid.tolist() == [[True] * 6]
        assert dist[0, 1].item() == 1.0
    pos, _, valid = smallest_k(d2, 9)  # k past P: padded invalid with position 0
    assert pos[0, 6:].tolist() == [0, 0, 0] and valid[0].tolist() == [True] * 6 + [False] * 3


def _index(xy: np.ndarray, feat: np.ndarray, k: int, range_m: float) -> RoadPointIndex:
    """One scene's index by hand: one 4 m cell per point's cell, every cell searching the whole map."""
    cell = 4.0
    lo = xy.min(axis=0) - 1.0
    cols, rows = (int(np.ceil(v)) + 1 for v in (xy.max(axis=0) + 1.0 - lo) / cell)
    c = np.floor((xy - lo) / cell).astype(np.int64)
    ids = c[:, 1] * cols + c[:, 0]
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=rows * cols)
    radius = np.full(rows * cols, int(np.hypot(rows, cols) * 16) + 16, dtype=np.int16)
    cells = SceneCells(lo, (rows, cols), cell, order, counts, radius)
    return RoadPointIndex.build([(xy, feat)], [cells], k, range_m)


def _torch_road(
    index: RoadPointIndex, pos: torch.Tensor, yaw: torch.Tensor, k: int, rng: float
) -> torch.Tensor:
    ids, dist, valid = index.nearest(torch.zeros(1, dtype=torch.long), pos, k)
    return road_obs(pos, yaw, index.xy[ids], index.feat[ids].float(), dist, valid, rng)


def test_road_points_at_equal_distances_in_id_order() -> None:
    """Points repeated at one place with different tangents and types (lanes meeting at a point, as
    real maps hold them) and points on a circle about the query: the same observation both ways."""
    rng = np.random.default_rng(0)
    angles = np.linspace(0.0, 2.0 * np.pi, 12, endpoint=False)
    ring = np.stack([5.0 * np.cos(angles), 5.0 * np.sin(angles)], axis=1)
    repeated = np.repeat(np.array([[2.0, 1.0], [-3.0, 4.0]]), 4, axis=0)
    far = rng.uniform(-40.0, 40.0, (200, 2))
    xy = np.concatenate([ring, repeated, far]).astype(np.float32)
    tangent = rng.normal(size=(len(xy), 2))
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    onehot = np.eye(3)[rng.integers(0, 3, len(xy))]
    index = _index(xy.astype(np.float64), np.concatenate([tangent, onehot], axis=1), 24, 30.0)
    pos = torch.tensor([[[0.0, 0.0], [2.0, 1.0], [-3.0, 4.0], [10.5, -7.25], [60.0, 60.0]]])
    yaw = torch.tensor([[0.3, -1.2, 2.0, 0.0, 1.0]])
    for k in (5, 13, 24):
        ref = _torch_road(index, pos, yaw, k, 30.0)
        got = NativeRoadObs(index)(torch.zeros(1, dtype=torch.long), pos, yaw, k, 30.0)
        assert torch.equal(ref, got), k
    # the four points repeated at the second query come first, in the index's order of them
    first = got.view(1, 5, 24, 8)[0, 1, :4]
    assert torch.equal(first[:, :2], torch.zeros(4, 2)) and bool((first[:, 7] == 1).all())
    assert not torch.equal(first[0], first[1])  # different tangents or types: the order shows


def test_neighbors_at_equal_distances_in_object_order() -> None:
    gen = torch.Generator().manual_seed(1)
    w, m, k = 3, 20, 4
    angles = torch.arange(m) * (2 * torch.pi / m)
    pos = torch.stack([12.0 * torch.cos(angles), 12.0 * torch.sin(angles)], -1).expand(w, m, 2).clone()
    pos[:, :k] = torch.rand(w, k, 2, generator=gen)  # agents near the centre of a ring of objects
    pos[:, 0] = 0.0  # agent 0 exactly at the centre: all ring objects equally far (up to rounding)
    yaw = torch.rand(w, m, generator=gen) * 6.0 - 3.0
    vel = torch.rand(w, m, 2, generator=gen) * 10.0 - 5.0
    length, width = 3.0 + torch.rand(w, m, generator=gen), 1.5 + torch.rand(w, m, generator=gen)
    active = torch.rand(w, m, generator=gen) < 0.9
    active[:, :k] = True
    ttc = torch.rand(w, k, m, generator=gen) * 20.0
    for n, rng in ((4, 50.0), (8, 12.0), (30, 50.0)):
        ref = neighbor_obs(pos, yaw, vel, length, width, active, ttc, n, rng)
        got = native_neighbor_obs(pos, yaw, vel, length, width, active, ttc, n, rng)
        assert torch.equal(ref, got), (n, rng)


def test_nearest_segment_native_equals_torch() -> None:
    gen = torch.Generator().manual_seed(2)
    w, k, r = 4, 6, 30
    steps = torch.randn(w, k, r, 2, generator=gen)
    steps[:, :, 5] = 0.0  # a repeated point: an invalid segment
    poly = steps.cumsum(2) * 3.0
    valid = torch.ones(w, k, r, dtype=torch.bool)
    valid[:, 0, 20:] = False  # a shorter route
    valid[:, 1] = False  # no valid segment at all
    segs = polyline_segments(poly, valid)
    pos = poly[:, :, 10] + torch.randn(w, k, 2, generator=gen) * 4.0
    pos[0, 2] = poly[0, 2, 3]  # on a vertex: two segments equally near
    ref = nearest_segment(pos, segs)
    got = native.nearest_segment(pos, segs)
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])
    assert bool(torch.isinf(got[0][:, 1]).all()) and bool((got[1][:, 1] == 0).all())


def test_drivable_field_native_equals_torch(busy_scenes: list[Scene]) -> None:
    """Points inside, on the nodes and edges of, and far outside each grid, and NaN."""
    grids = DrivingEnv(DrivingTaskConfig(num_worlds=2, agents_per_world=4), busy_scenes).pool.grids
    gen = torch.Generator().manual_seed(4)
    scene_ids = torch.tensor([0, 1, 1, 0])
    lo = grids.origin_xy[scene_ids]
    size = (grids.shape_hw[scene_ids].flip(-1) - 1).float() * grids.resolution_m[scene_ids, None]
    xy = lo[:, None] + torch.rand(4, 300, 2, generator=gen) * 1.2 * size[:, None] - 0.1 * size[:, None]
    xy[:, :20] = (
        lo[:, None]
        + torch.randint(0, 50, (4, 20, 2), generator=gen) * grids.resolution_m[scene_ids, None, None]
    )  # exactly on nodes
    xy[:, 20] = lo + size  # the far corner node
    xy[:, 21] = torch.nan
    ref = grids.sample(scene_ids[:, None].expand(4, 300), xy)
    got = NativeGridSample(grids)(scene_ids, xy)
    assert torch.equal(ref, got)
    pad = ref == grids.pad_value_m
    assert bool(pad.any()) and bool((~pad).sum() > 500)  # both outside and inside points were read


def test_route_lookahead_native_equals_torch() -> None:
    """Random routes with repeated points (zero-length steps), padding past their ends, and agents
    before, along and past their route's end."""
    gen = torch.Generator().manual_seed(5)
    w, k, r = 3, 5, 40
    step = torch.rand(w, k, r, 2, generator=gen) * 4.0
    step[:, :, 7] = 0.0
    route_xy = step.cumsum(2) - 20.0
    seg = (route_xy[:, :, 1:] - route_xy[:, :, :-1]).norm(dim=-1)
    route_s = torch.cat((torch.zeros(w, k, 1), seg.cumsum(-1)), dim=-1)
    route_end_s = route_s[..., 30]
    route_s[..., 31:] = route_end_s[..., None] + torch.arange(1, r - 30) * 1e3  # padding
    s_now = torch.rand(w, k, generator=gen) * route_end_s * 1.3 - 5.0
    pos = torch.rand(w, k, 2, generator=gen) * 30.0
    yaw = torch.rand(w, k, generator=gen) * 6.0 - 3.0
    ahead = torch.tensor([5.0, 10.0, 20.0, 40.0])
    args = (pos, yaw, route_xy, route_s, s_now, route_end_s, ahead)
    assert torch.equal(route_lookahead_obs(*args), native_route_lookahead_obs(*args))
