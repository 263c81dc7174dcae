"""Procedural generators, agent sampling and the scene library.

Geometry checks use the drivable area the driving task uses: the union of lane footprints, i.e.
points within half a lane width of some lane centre segment.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scenefactory.errors import UserError
from scenefactory.scenes.library import GENERATOR_KINDS, procedural_scenes, scene_seed
from scenefactory.scenes.procedural import GENERATORS, sample_params
from scenefactory.scenes.procedural_params import CurvedParams, StraightParams
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.routes import AgentSamplingConfig, make_procedural_scene, sample_agents
from scenefactory.scenes.scene import Scene

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def scenes() -> dict[tuple[str, int], Scene]:
    """One 16-agent scene per (kind, seed), shared by the tests of this module."""
    return {(k, s): make_procedural_scene(k, s, 16) for k in GENERATOR_KINDS for s in SEEDS}


def lane_segments(rg: RoadGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every lane centre segment: starts ``(S, 2)``, ends ``(S, 2)``, half widths ``(S,)``."""
    a, b, hw = [], [], []
    for i, lane in enumerate(rg.lanes()):
        a.append(lane[:-1])
        b.append(lane[1:])
        hw.append(rg.lane_width_m[i, : len(lane) - 1] / 2.0)
    return np.concatenate(a), np.concatenate(b), np.concatenate(hw)


def beyond_footprint(rg: RoadGraph, pts: np.ndarray) -> np.ndarray:
    """For points ``(N, 2)``: min over lane segments of (distance to the segment - half lane width)."""
    a, b, hw = lane_segments(rg)
    ab = b - a
    t = np.clip(((pts[:, None] - a) * ab).sum(-1) / (ab * ab).sum(-1), 0.0, 1.0)
    dist = np.linalg.norm(pts[:, None] - (a + t[..., None] * ab), axis=-1)
    return (dist - hw).min(axis=1)


def corners(pose: np.ndarray, length: float, width: float) -> np.ndarray:
    c, s = math.cos(pose[2]), math.sin(pose[2])
    local = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]]) * [length / 2, width / 2]
    return local @ np.array([[c, s], [-s, c]]) + pose[:2]


def polygons_overlap(p: np.ndarray, q: np.ndarray) -> bool:
    """Separating-axis test on two convex polygons given by their corners."""
    for poly in (p, q):
        edges = np.roll(poly, -1, axis=0) - poly
        for n in np.stack([-edges[:, 1], edges[:, 0]], axis=-1):
            if (p @ n).max() < (q @ n).min() or (q @ n).max() < (p @ n).min():
                return False
    return True


def all_arrays(obj: RoadGraph | Scene) -> dict[str, np.ndarray]:
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return {name: v for name, v in values.items() if isinstance(v, np.ndarray)}


# ------------------------------------------------------------------------------------ generators


def test_library_kinds_match_registry() -> None:
    assert GENERATOR_KINDS == ("straight", "curved", "intersection", "t_junction", "roundabout", "merge")
    assert set(GENERATOR_KINDS) == set(GENERATORS)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_same_seed_same_scene(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    a, b = scenes[(kind, 1)], make_procedural_scene(kind, 1, 16)
    for name, arr in {**all_arrays(a.roadgraph), **all_arrays(a)}.items():
        other = getattr(b.roadgraph, name) if hasattr(b.roadgraph, name) else getattr(b, name)
        assert np.array_equal(arr, other), name
    assert (a.params, a.friction, a.name) == (b.params, b.friction, b.name)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_different_seeds_differ(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    a, b = scenes[(kind, 0)].roadgraph, scenes[(kind, 1)].roadgraph
    assert a.lane_xy.shape != b.lane_xy.shape or not np.allclose(a.lane_xy, b.lane_xy)
    assert scenes[(kind, 0)].params != scenes[(kind, 1)].params


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_lanes_and_connectivity(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    """Connections are listed on both sides, meet exactly end to start and keep the heading."""
    for seed in SEEDS:
        rg = scenes[(kind, seed)].roadgraph
        lanes = rg.lanes()
        assert all(len(lane) >= 2 for lane in lanes)
        widths = rg.lane_width_m[rg.lane_valid]
        assert widths.min() >= 3.3 and widths.max() <= 3.75
        steps = np.concatenate([np.linalg.norm(np.diff(lane, axis=0), axis=-1) for lane in lanes])
        assert steps.min() > 0.3 and steps.max() <= 2.0
        for i in range(rg.num_lanes):
            for j in rg.exits(i):
                assert i in rg.entries(j)
                assert np.linalg.norm(lanes[i][-1] - lanes[j][0]) < 1e-9
                h_out = np.arctan2(*(lanes[i][-1] - lanes[i][-2])[::-1])
                h_in = np.arctan2(*(lanes[j][1] - lanes[j][0])[::-1])
                assert abs((h_in - h_out + np.pi) % (2 * np.pi) - np.pi) < math.radians(10.0)
            for j in rg.entries(i):
                assert i in rg.exits(j)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_edges_and_lines(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    """Edges never cut a lane footprint and keep the road on their left; the scene fits in +-130 m."""
    for seed in SEEDS:
        rg = scenes[(kind, seed)].roadgraph
        assert rg.edge_type.size > 0 and np.all(rg.edge_type == 1)
        assert rg.line_type.size > 0 and set(rg.line_type.tolist()) <= {1, 7}
        xmin, ymin, xmax, ymax = rg.bounds()
        assert max(-xmin, -ymin, xmax, ymax) <= 130.0
        for edge in rg.edges():
            assert beyond_footprint(rg, edge).min() >= -1e-6
            mid = (edge[1:-2] + edge[2:-1]) / 2.0
            d = edge[2:-1] - edge[1:-2]
            left = np.stack([-d[:, 1], d[:, 0]], axis=-1) / np.linalg.norm(d, axis=-1, keepdims=True)
            assert np.all(beyond_footprint(rg, mid + 0.8 * left) < 0.0), "road must lie left of an edge"
            assert np.all(beyond_footprint(rg, mid - 0.2 * left) > 0.0), "right of an edge is off-road"


def test_roundabout_runs_counter_clockwise() -> None:
    rg = make_procedural_scene("roundabout", 3, 1).roadgraph
    ring = [
        lane for lane in rg.lanes() if np.allclose(np.linalg.norm(lane, axis=-1), np.linalg.norm(lane[0]))
    ]
    assert len(ring) >= 6
    for lane in ring:
        a, b = lane[:-1], lane[1:]
        assert np.all(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0] > 0.0)


def test_merge_ramp_ends_in_rightmost_lane() -> None:
    rg = make_procedural_scene("merge", 0, 1).roadgraph
    merged = [j for j in range(rg.num_lanes) if len(rg.entries(j)) == 2]
    assert len(merged) == 1
    ramp = [i for i in rg.entries(merged[0]) if rg.lane(i)[0, 1] < rg.lane(merged[0])[0, 1] - 1.0]
    assert len(ramp) == 1 and rg.lane(ramp[0])[-1, 1] == rg.lane(merged[0])[0, 1]


# ---------------------------------------------------------------------------------------- agents


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_agents_on_routes_in_drivable_area(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    for seed in SEEDS:
        sc = scenes[(kind, seed)]
        rg = sc.roadgraph
        assert sc.num_agents >= 8
        assert np.all(beyond_footprint(rg, sc.spawn_pose[:, :2]) <= 0.0)
        for k in range(sc.num_agents):
            route = sc.route(k)
            assert np.linalg.norm(route[0] - sc.spawn_pose[k, :2]) <= 0.5
            heading = np.arctan2(*(route[1] - route[0])[::-1])
            assert abs((heading - sc.spawn_pose[k, 2] + np.pi) % (2 * np.pi) - np.pi) < math.radians(10.0)
            assert np.all(beyond_footprint(rg, route) <= 0.3)
            s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(route, axis=0), axis=-1))])
            assert np.all(np.diff(s) <= 1.0 + 1e-9)
            assert 20.0 <= sc.goal_s_m[k] <= 60.0
            assert s[-1] >= sc.goal_s_m[k] + 10.0 - 1.0
            on_route = np.array([np.interp(sc.goal_s_m[k], s, route[:, i]) for i in (0, 1)])
            assert np.linalg.norm(on_route - sc.goal_xy[k]) <= 1.0
        assert np.all((sc.spawn_speed_mps >= 0.0) & (sc.spawn_speed_mps <= 6.0))
        assert np.all(sc.length_m == 4.5) and np.all(sc.width_m == 1.9)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_spawns_do_not_overlap(kind: str, scenes: dict[tuple[str, int], Scene]) -> None:
    for seed in SEEDS:
        sc = scenes[(kind, seed)]
        boxes = [corners(sc.spawn_pose[k], sc.length_m[k], sc.width_m[k]) for k in range(sc.num_agents)]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                assert not polygons_overlap(boxes[i], boxes[j]), (seed, i, j)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_default_params_fit_at_least_8_agents(kind: str) -> None:
    defaults = dataclasses.asdict(GENERATORS[kind].params_type())
    assert make_procedural_scene(kind, 5, 16, **defaults).num_agents >= 8


def test_sample_agents_returns_as_many_as_fit() -> None:
    rg = GENERATORS["straight"].make(
        StraightParams(length_m=150.0, lanes_per_direction=1), np.random.default_rng(0)
    )
    agents = sample_agents(rg, 200, np.random.default_rng(0))
    assert 8 <= len(agents) < 200
    cfg = AgentSamplingConfig(length_range_m=(4.0, 5.0), speed_range_mps=(2.0, 3.0))
    varied = sample_agents(rg, 4, np.random.default_rng(0), cfg)
    assert all(4.0 <= a.length_m <= 5.0 and 2.0 <= a.spawn_speed_mps <= 3.0 for a in varied)


# ---------------------------------------------------------------------------------------- params


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_sampled_params_within_declared_ranges(kind: str) -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        params = sample_params(kind, rng)  # construction validates every range
        assert isinstance(params, GENERATORS[kind].params_type)


def test_params_and_kind_errors() -> None:
    with pytest.raises(UserError, match="lanes_per_direction"):
        make_procedural_scene("straight", 0, 4, lanes_per_direction=5)
    with pytest.raises(UserError, match="must be an integer"):
        StraightParams(lanes_per_direction=1.5)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="wiggle"):
        make_procedural_scene("straight", 0, 4, wiggle=1.0)
    with pytest.raises(
        UserError, match=r"'spiral'.*straight, curved, intersection, t_junction, roundabout, merge"
    ):
        make_procedural_scene("spiral", 0, 4)
    with pytest.raises(UserError, match="arc"):
        CurvedParams(radius_m=200.0, turn_deg=120.0)
    with pytest.raises(UserError, match="seed"):
        make_procedural_scene("straight", -1, 4)


def test_override_changes_only_that_param() -> None:
    base = make_procedural_scene("intersection", 4, 4)
    one_lane = make_procedural_scene("intersection", 4, 4, lanes_per_direction=1)
    assert one_lane.params == {**base.params, "lanes_per_direction": 1}
    assert one_lane.friction == base.friction
    assert 0.5 <= base.friction <= 1.0 and base.surface == "asphalt"
    assert (base.name, base.generator, base.seed) == ("intersection-4", "intersection", 4)


# --------------------------------------------------------------------------------------- library


def test_train_and_eval_seeds_are_disjoint() -> None:
    train = {scene_seed("train", i) for i in (0, 1, 2, 999_999)}
    evals = {scene_seed("eval", i) for i in (0, 1, 2, 999_999)}
    assert not train & evals
    assert max(train) < min(evals)
    with pytest.raises(UserError, match="test"):
        scene_seed("test", 0)
    with pytest.raises(UserError, match="index"):
        scene_seed("train", 1_000_000)


def test_procedural_scenes_cycle_kinds() -> None:
    scenes = procedural_scenes("eval", 7, 2, base_seed=10)
    assert [s.generator for s in scenes] == [*GENERATOR_KINDS, GENERATOR_KINDS[0]]
    assert [s.seed for s in scenes] == [scene_seed("eval", 10 + i) for i in range(7)]
    assert all(1 <= s.num_agents <= 2 for s in scenes)
    only = procedural_scenes("train", 2, 1, kinds=("merge",))
    assert [s.name for s in only] == ["merge-0", "merge-1"]
    with pytest.raises(UserError, match="spiral"):
        procedural_scenes("train", 1, 1, kinds=("spiral",))
