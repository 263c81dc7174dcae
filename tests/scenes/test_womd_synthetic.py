"""Synthetic city-grid WOMD scenarios (``scenes.womd.synthetic``): the map size they are asked for,
the same scenario for the same seed, and sound scenes after ``convert``: every vehicle controlled,
every logged driver on the drivable area, no two vehicles overlapping, routes and goals for all."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.scenes.scene import Scene
from scenefactory.scenes.womd.batch import convert_files
from scenefactory.scenes.womd.convert import ConversionReport, scenario_to_scene
from scenefactory.scenes.womd.reader import iter_scenarios
from scenefactory.scenes.womd.synthetic import (
    STEPS,
    _layout_points,
    choose_layout,
    city_scenario,
    write_corpus,
)
from scenefactory.tasks.driving.drivable import GridStack, build_drivable_grid
from scenefactory.tasks.driving.geometry import box_corners, pairwise_box_overlap
from scenefactory.tasks.driving.pool import road_points

CASES = {  # name: (target road points, moving vehicles, parked, signals and driveways)
    "small": (1000, 8, 2, True),
    "medium": (4000, 16, 4, True),
    "plain": (2000, 6, 0, False),
}


@pytest.fixture(scope="module")
def converted() -> dict[str, tuple[Scene, ConversionReport]]:
    out = {}
    for seed, (name, (target, n, parked, extras)) in enumerate(CASES.items()):
        sc = city_scenario(f"city-{name}", seed, target, n, parked, signals=extras, driveways=extras)
        out[name] = scenario_to_scene(sc)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_road_points_near_the_target(name: str, converted: dict[str, tuple[Scene, ConversionReport]]) -> None:
    target = CASES[name][0]
    n = len(road_points(converted[name][0], 3.0)[0])
    assert abs(n - target) <= 0.25 * target, (n, target)


def test_a_big_map_of_20000_points() -> None:
    scene, _ = scenario_to_scene(city_scenario("big", 7, 20_000, 4))
    assert abs(len(road_points(scene, 3.0)[0]) - 20_000) <= 0.25 * 20_000


@given(target=st.integers(1000, 20_000), seed=st.integers(0, 2**32 - 1))
def test_the_layout_count_is_near_any_target(target: int, seed: int) -> None:
    """The grid and stub chosen for a target count (what the 3 m resampling gives) within 10 %."""
    layout = choose_layout(target, np.random.default_rng(seed))
    count = _layout_points(np.array(layout.nx), np.array(layout.ny), *layout.pitch, layout.stub)
    assert abs(float(count) - target) <= 0.1 * target


def test_same_seed_same_scenario_other_seed_other_map() -> None:
    a = city_scenario("x", 3, 1500, 5, 1).SerializeToString(deterministic=True)
    b = city_scenario("x", 3, 1500, 5, 1).SerializeToString(deterministic=True)
    c = city_scenario("x", 4, 1500, 5, 1).SerializeToString(deterministic=True)
    assert a == b and a != c


def test_real_format_scenario_fields() -> None:
    sc = city_scenario("fields", 5, 1500, 4, 2)
    assert len(sc.timestamps_seconds) == STEPS and sc.current_time_index == 10 and sc.sdc_track_index == 0
    assert len(sc.tracks) == 6 and all(
        len(t.states) == STEPS and all(s.valid for s in t.states) for t in sc.tracks
    )
    kinds = {f.WhichOneof("feature_data") for f in sc.map_features}
    assert {"lane", "road_line", "road_edge", "crosswalk", "driveway"} <= kinds
    assert "stop_sign" in kinds or len(sc.dynamic_map_states) == STEPS
    lanes = [f for f in sc.map_features if f.HasField("lane")]
    ids = {f.id for f in lanes}
    assert all(set(f.lane.entry_lanes) | set(f.lane.exit_lanes) <= ids for f in lanes)
    assert sum(1 for f in lanes if f.lane.exit_lanes) > len(lanes) // 2  # lanes lead on to others


@pytest.mark.parametrize("name", list(CASES))
def test_every_moving_vehicle_is_controlled_with_a_route_and_goal(
    name: str, converted: dict[str, tuple[Scene, ConversionReport]]
) -> None:
    _, n, parked, _ = CASES[name]
    scene, report = converted[name]
    assert report.controlled_agents == n and report.not_controlled["parked"] == parked
    assert report.replayed_objects == parked
    for k in range(scene.num_agents):
        route = scene.route(k)
        assert np.linalg.norm(np.diff(route, axis=0), axis=1).sum() >= 10.0
        assert np.linalg.norm(scene.goal_xy[k] - scene.spawn_pose[k, :2]) >= 10.0
    speed = scene.log.speed
    assert speed.max() <= 15.0 + 1e-3 and np.abs(np.diff(speed, axis=1)).max() <= 0.8  # no jumps


@pytest.mark.parametrize("name", list(CASES))
def test_logged_drivers_stay_on_the_drivable_area(
    name: str, converted: dict[str, tuple[Scene, ConversionReport]], one_torch_thread: None
) -> None:
    scene, _ = converted[name]
    grids = GridStack.from_grids([build_drivable_grid(scene.roadgraph)])
    log = scene.log
    xy, yaw = torch.tensor(log.xy), torch.tensor(log.yaw)
    length = torch.tensor(scene.length_m)[:, None].expand_as(yaw)
    width = torch.tensor(scene.width_m)[:, None].expand_as(yaw)
    corners = box_corners(xy, yaw, length, width)
    f = grids.sample(torch.zeros(corners.shape[:-1], dtype=torch.long), corners)
    assert bool(torch.tensor(log.valid).all()) and float(f.max()) <= 0.0


@pytest.mark.parametrize("name", list(CASES))
def test_no_two_vehicles_overlap_at_any_step(
    name: str, converted: dict[str, tuple[Scene, ConversionReport]]
) -> None:
    scene, _ = converted[name]
    log, replay = scene.log, scene.replay
    parts = [(log.xy, log.yaw, scene.length_m, scene.width_m)]
    if len(replay.length_m):  # the parked vehicles
        parts.append((replay.xy, replay.yaw, replay.length_m, replay.width_m))
    xy = torch.cat([torch.tensor(p[0]) for p in parts]).permute(1, 0, 2)  # [T, N, 2]
    yaw = torch.cat([torch.tensor(p[1]) for p in parts]).T
    length = torch.cat([torch.tensor(p[2]) for p in parts]).expand_as(yaw)
    width = torch.cat([torch.tensor(p[3]) for p in parts]).expand_as(yaw)
    active = torch.ones_like(yaw, dtype=torch.bool)
    assert not bool(pairwise_box_overlap(xy, yaw, length, width, active).any())


def test_signals_and_stop_signs_reach_the_scene(converted: dict[str, tuple[Scene, ConversionReport]]) -> None:
    scene, report = converted["medium"]
    sig = scene.signals
    assert sig is not None and (sig.state.shape[1] > 0 or report.stop_signs > 0)
    assert (sig.lane >= 0).all() and (sig.sign_lane >= 0).all()
    assert report.crosswalks > 0 and len(scene.roadgraph.driveways()) > 0
    assert converted["plain"][0].signals is None and converted["plain"][1].stop_signs == 0


def test_a_written_corpus_converts_without_errors(tmp_path: Path) -> None:
    shards = write_corpus(
        tmp_path / "in",
        3,
        seed=5,
        road_points=(1000, 1400),
        vehicles=(2, 4),
        scenarios_per_shard=2,
        workers=1,
    )
    assert [p.name for p in shards] == [
        "synthetic.tfrecord-00000-of-00002",
        "synthetic.tfrecord-00001-of-00002",
    ]
    ids = [sc.scenario_id for p in shards for _, _, sc in iter_scenarios(p)]
    assert ids == [f"synthetic-5-{i:06d}" for i in range(3)]
    again = write_corpus(
        tmp_path / "again",
        3,
        seed=5,
        road_points=(1000, 1400),
        vehicles=(2, 4),
        scenarios_per_shard=2,
        workers=1,
    )
    assert [p.read_bytes() for p in shards] == [p.read_bytes() for p in again]
    summary = convert_files(shards, tmp_path / "out")
    assert summary["converted"] == 3 and not summary["errors"] and not summary["skipped"]
    assert summary["agents"]["by_reason"]["parked"] == 3 * 4 and summary["agents"]["controlled"] >= 6


def test_bad_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError, match="num_vehicles"):
        city_scenario("x", 0, 1000, 0)
    assert math.isfinite(float(_layout_points(np.array(1), np.array(1), 80.0, 80.0, 30.0)))
