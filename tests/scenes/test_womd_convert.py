"""WOMD Scenario → Scene: lanes, widths, connectivity, controlled agents, logs, edge cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scenefactory.engines import EngineSpec
from scenefactory.evaluation.rollout import EXPERT, evaluate
from scenefactory.scenes.scene_json import load_scene, save_scene
from scenefactory.scenes.womd.convert import (
    DEFAULT_LANE_WIDTH_M,
    ScenarioConversionError,
    scenario_to_scene,
)
from scenefactory.scenes.womd.scenario_pb2 import LaneCenter, MapFeature, MapPoint, RoadLine, Scenario
from scenefactory.tasks.driving.config import DrivingTaskConfig
from test_womd_reader import CURRENT, STEPS, make_scenario


def test_lanes_widths_lines_edges_and_frame() -> None:
    scene, report = scenario_to_scene(make_scenario("s1", 3))
    rg = scene.roadgraph
    assert rg.num_lanes == 2 and report.lanes == 2
    # right lane: boundaries at 1.75 m each side; left lane: no boundary, neighbour 3.5 m away
    np.testing.assert_allclose(rg.lane_width_m[0][rg.lane_valid[0]], 3.5, atol=1e-6)
    np.testing.assert_allclose(rg.lane_width_m[1][rg.lane_valid[1]], 3.5, atol=1e-6)
    assert rg.exits(0) == [] and rg.entries(0) == []  # ids 9, 10, 11 are not in the map
    assert len(rg.line_type) == 1 and sorted(rg.edge_type.tolist()) == [1, 2]
    assert (report.crosswalks, report.stop_signs, report.speed_bumps) == (1, 1, 1)
    # re-centred on the self-driving car at the current step
    np.testing.assert_allclose(scene.spawn_pose[0], [0.0, 0.0, 0.0], atol=1e-9)
    assert scene.params["origin_xy"] == pytest.approx([-30.0 + 8.0 * 0.1 * CURRENT, -1.75])


def test_controlled_agents_routes_goals_and_logs() -> None:
    scene, report = scenario_to_scene(make_scenario("s2", 3))
    assert scene.num_agents == 3 and report.controlled_agents == 3
    assert report.other_objects == 1  # the pedestrian is not controlled
    # SDC first, then the track to predict (index 1), then the rest
    np.testing.assert_allclose(scene.spawn_pose[1, :2], [0.1 * CURRENT * 1.0, 3.5], atol=1e-6)
    assert scene.spawn_speed_mps.tolist() == pytest.approx([8.0, 9.0, 10.0])
    for i in range(3):
        route = scene.route(i)
        assert np.allclose(route[0], scene.spawn_pose[i, :2])
        assert np.allclose(route[-1], scene.goal_xy[i])
        assert scene.goal_s_m[i] == pytest.approx(np.linalg.norm(route[-1] - route[0]), rel=1e-6)
    log = scene.log
    assert log is not None and log.num_steps == STEPS - CURRENT
    assert not log.valid[1, 60 - CURRENT] and not log.valid[1, 61 - CURRENT] and log.valid[1, 62 - CURRENT]
    np.testing.assert_allclose(log.xy[:, 0], scene.spawn_pose[:, :2])


def test_round_trip_json_and_expert_replay_on_both_engines(tmp_path: Path) -> None:
    scene, _ = scenario_to_scene(make_scenario("s3", 3))
    save_scene(scene, tmp_path / "s3.json")
    back = load_scene(tmp_path / "s3.json")
    assert back.log is not None and np.array_equal(back.log.xy, scene.log.xy)  # type: ignore[union-attr]
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=3, episode_length_s=3.0)
    for engine in ("kinematic", "mujoco"):
        m, _ = evaluate(EXPERT, cfg, [back], engine=EngineSpec(tier=engine))
        assert m["episodes_with_log"] == 3
        assert m["log_divergence_m"] < 0.5, engine  # constant-speed straight logs are easy to follow


def test_zero_controllable_vehicles_and_missing_boundaries() -> None:
    """A scenario with nothing to drive is refused (the tools cannot run a scene without agents)."""
    with pytest.raises(ScenarioConversionError, match="'s4' has no controllable agent"):
        scenario_to_scene(make_scenario("s4", 0))
    sc = make_scenario("s5", 1)
    lone = LaneCenter(type=LaneCenter.TYPE_FREEWAY, polyline=[MapPoint(x=0, y=50), MapPoint(x=10, y=50)])
    sc.map_features.append(MapFeature(id=42, lane=lone))
    bike = LaneCenter(type=LaneCenter.TYPE_BIKE_LANE, polyline=[MapPoint(x=0, y=60), MapPoint(x=10, y=60)])
    sc.map_features.append(MapFeature(id=43, lane=bike))
    scene, report = scenario_to_scene(sc)
    assert report.bike_lanes_dropped == 1 and scene.roadgraph.num_lanes == 3
    w = scene.roadgraph.lane_width_m[2][scene.roadgraph.lane_valid[2]]
    np.testing.assert_allclose(w, DEFAULT_LANE_WIDTH_M)


def test_no_drivable_lanes_is_a_clear_error() -> None:
    sc = Scenario(scenario_id="nolanes", current_time_index=10)
    sc.map_features.add(id=1, road_line=RoadLine(polyline=[MapPoint(x=0, y=0), MapPoint(x=1, y=0)]))
    with pytest.raises(ScenarioConversionError, match="'nolanes' has no drivable lanes"):
        scenario_to_scene(sc)


def test_other_objects_are_replayed_and_round_trip(tmp_path: Path) -> None:
    scene, report = scenario_to_scene(make_scenario("s6", 3))
    rep = scene.replay
    assert rep is not None and rep.num_objects == report.other_objects == 1
    assert rep.kind.tolist() == [2]  # the pedestrian
    assert rep.valid.all() and rep.xy.shape == (1, STEPS - CURRENT, 2)
    save_scene(scene, tmp_path / "s6.json")
    back = load_scene(tmp_path / "s6.json").replay
    assert back is not None
    for name in ("xy", "yaw", "vel_xy", "valid", "length_m", "width_m", "kind"):
        assert np.array_equal(getattr(back, name), getattr(rep, name))


def test_markings_are_carried_and_round_trip(tmp_path: Path) -> None:
    scene, _ = scenario_to_scene(make_scenario("s7", 2))
    rg = scene.roadgraph
    assert len(rg.crosswalks()) == 1 and len(rg.speed_bumps()) == 1 and rg.stop_sign_xy.shape == (1, 2)
    origin = np.array(scene.params["origin_xy"])
    np.testing.assert_allclose(rg.stop_sign_xy[0], np.array([30.0, -4.0]) - origin)
    assert rg.crosswalks()[0].shape == (4, 2)
    save_scene(scene, tmp_path / "s7.json")
    back = load_scene(tmp_path / "s7.json").roadgraph
    for name in ("crosswalk_xy", "crosswalk_valid", "speed_bump_xy", "speed_bump_valid", "stop_sign_xy"):
        assert np.array_equal(getattr(back, name), getattr(rg, name))
