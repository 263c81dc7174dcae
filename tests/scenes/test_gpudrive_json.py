"""GPUDrive/Nocturne pre-converted JSON scenarios → our ``Scenario`` proto → ``Scene``.

The project ships no WOMD data, so the scenario here is written in code in the exact JSON layout
GPUDrive's converter produces: a two-lane eastbound road (the right lane in two pieces that meet end
to start), a lane line, a boundary edge and a median, a stop sign and a crosswalk, a moving
self-driving car, a second moving car with unobserved steps (−10000.0 sentinels), a parked car and
a pedestrian crossing, one traffic signal.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.womd.convert import DEFAULT_LANE_WIDTH_M, scenario_to_scene
from scenefactory.scenes.womd.gpudrive_json import (
    INVALID_SENTINEL,
    iter_json_scenarios,
    json_to_scenario,
    load_gpudrive_json,
)
from scenefactory.scenes.womd.scenario_pb2 import (
    LaneCenter,
    RequiredPrediction,
    RoadEdge,
    RoadLine,
    Track,
    TrafficSignalLaneState,
)

STEPS = 91
CURRENT = 10
BAD = INVALID_SENTINEL


def _p(x: float, y: float, z: float = 0.0) -> dict[str, float]:
    return {"x": x, "y": y, "z": z}


def _line(x0: float, x1: float, y: float, n: int) -> list[dict[str, float]]:
    return [_p(x0 + (x1 - x0) * i / (n - 1), y) for i in range(n)]


def _object(
    track_id: int,
    kind: str,
    xy: Callable[[int], tuple[float, float]],
    heading: float,
    v: tuple[float, float],
    invalid: set[int],
) -> dict[str, Any]:
    """One object in GPUDrive's layout; ``xy(t)`` gives its position at step t."""
    size = {"vehicle": (4.6, 1.9, 1.6), "pedestrian": (0.6, 0.6, 1.8)}[kind]
    valid = [t not in invalid for t in range(STEPS)]
    return {
        "position": [_p(xy(t)[0], xy(t)[1], 0.8) if valid[t] else _p(BAD, BAD, BAD) for t in range(STEPS)],
        "width": size[1],
        "length": size[0],
        "height": size[2],
        "heading": [heading if valid[t] else BAD for t in range(STEPS)],
        "velocity": [{"x": v[0], "y": v[1]} if valid[t] else {"x": BAD, "y": BAD} for t in range(STEPS)],
        "valid": valid,
        "goalPosition": _p(xy(STEPS - 1)[0], xy(STEPS - 1)[1], 0.8),
        "type": kind,
        "id": track_id,
        "mark_as_expert": False,
    }


def make_json_scenario(scenario_id: str = "a1b2c3d4e5f60718") -> dict[str, Any]:
    """A realistic GPUDrive JSON scenario (see the module docstring)."""
    objects = [
        _object(1001, "vehicle", lambda t: (-30.0 + 0.8 * t, 0.0), 0.0, (8.0, 0.0), set()),  # SDC
        _object(1002, "vehicle", lambda t: (-40.0 + 1.0 * t, 3.5), 0.0, (10.0, 0.0), {0, 1, 2, 60, 61}),
        _object(1003, "vehicle", lambda t: (40.0, 3.5), 0.0, (0.0, 0.0), set()),  # parked
        _object(
            2001, "pedestrian", lambda t: (55.0, -4.0 + 0.1 * t), math.pi / 2, (0.0, 1.0), set(range(20))
        ),
    ]
    roads = [
        {"geometry": _line(-50.0, 0.0, 0.0, 11), "type": "lane", "map_element_id": 2, "id": 100},
        {"geometry": _line(0.0, 60.0, 0.0, 13), "type": "lane", "map_element_id": 2, "id": 101},
        {"geometry": _line(-50.0, 60.0, 3.5, 23), "type": "lane", "map_element_id": 2, "id": 102},
        {"geometry": _line(-50.0, 60.0, 1.75, 12), "type": "road_line", "map_element_id": 6, "id": 200},
        {"geometry": _line(-50.0, 60.0, -1.75, 12), "type": "road_edge", "map_element_id": 15, "id": 300},
        {"geometry": _line(-50.0, 60.0, 5.25, 12), "type": "road_edge", "map_element_id": 16, "id": 301},
        {"geometry": [_p(58.0, -2.5)], "type": "stop_sign", "map_element_id": 17, "id": 400},
        {
            "geometry": [_p(52.0, -1.75), _p(58.0, -1.75), _p(58.0, 5.25), _p(52.0, 5.25)],
            "type": "crosswalk",
            "map_element_id": 18,
            "id": 500,
        },
    ]
    signal = {"state": ["stop", "stop", "go"], "x": [59.0] * 3, "y": [0.0] * 3, "z": [0.0] * 3}
    return {
        "name": "tfrecord-00000-of-01000_7.json",
        "scenario_id": scenario_id,
        "objects": objects,
        "roads": roads,
        "tl_states": {"101": {**signal, "time_index": [0, 1, 2]}},
        "metadata": {
            "sdc_track_index": 0,
            "objects_of_interest": [1002],
            "tracks_to_predict": [{"track_index": 1, "difficulty": 1}],
        },
    }


def _write(tmp_path: Path, data: Any, name: str = "scene.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_json_file_becomes_a_womd_scenario(tmp_path: Path) -> None:
    path = _write(tmp_path, make_json_scenario())
    sc = load_gpudrive_json(path)
    assert sc.scenario_id == "a1b2c3d4e5f60718" and sc.current_time_index == CURRENT
    assert len(sc.timestamps_seconds) == STEPS and sc.timestamps_seconds[CURRENT] == pytest.approx(1.0)
    assert [t.object_type for t in sc.tracks] == [Track.TYPE_VEHICLE] * 3 + [Track.TYPE_PEDESTRIAN]
    assert [t.id for t in sc.tracks] == [1001, 1002, 1003, 2001]
    assert all(len(t.states) == STEPS for t in sc.tracks)
    car = sc.tracks[1]
    for t in (0, 2, 60, 61):
        assert not car.states[t].valid and car.states[t].center_x == 0.0  # the sentinel is not copied
    s = car.states[62]
    assert s.valid and s.center_x == pytest.approx(22.0) and s.center_y == pytest.approx(3.5)
    assert (s.length, s.width, s.velocity_x) == pytest.approx((4.6, 1.9, 10.0))
    ped = sc.tracks[3]
    assert not ped.states[19].valid and ped.states[20].valid
    assert ped.states[20].heading == pytest.approx(math.pi / 2)
    assert sc.sdc_track_index == 0 and list(sc.objects_of_interest) == [1002]
    assert sc.tracks_to_predict[0].track_index == 1
    assert sc.tracks_to_predict[0].difficulty == RequiredPrediction.LEVEL_1

    kinds = [f.WhichOneof("feature_data") for f in sc.map_features]
    assert kinds == ["lane"] * 3 + ["road_line", "road_edge", "road_edge", "stop_sign", "crosswalk"]
    lanes = {f.id: f.lane for f in sc.map_features if f.HasField("lane")}
    assert all(lane.type == LaneCenter.TYPE_SURFACE_STREET for lane in lanes.values())
    assert not any(lane.left_boundaries or lane.right_neighbors for lane in lanes.values())
    # inferred connectivity: lane 100 ends where lane 101 starts; 102 runs alongside, unlinked
    assert list(lanes[100].exit_lanes) == [101] and list(lanes[101].entry_lanes) == [100]
    assert not lanes[102].exit_lanes and not lanes[102].entry_lanes and not lanes[100].entry_lanes
    assert sc.map_features[3].road_line.type == RoadLine.TYPE_BROKEN_SINGLE_WHITE
    assert sc.map_features[4].road_edge.type == RoadEdge.TYPE_ROAD_EDGE_BOUNDARY
    assert sc.map_features[5].road_edge.type == RoadEdge.TYPE_ROAD_EDGE_MEDIAN
    assert (sc.map_features[6].stop_sign.position.x, sc.map_features[6].stop_sign.position.y) == (58.0, -2.5)
    assert len(sc.map_features[7].crosswalk.polygon) == 4

    assert len(sc.dynamic_map_states) == STEPS
    assert [len(d.lane_states) for d in sc.dynamic_map_states[:4]] == [1, 1, 1, 0]
    go = sc.dynamic_map_states[2].lane_states[0]
    assert go.lane == 101 and go.state == TrafficSignalLaneState.LANE_STATE_GO and go.stop_point.x == 59.0

    assert [(i, o, x.scenario_id) for i, o, x in iter_json_scenarios(path)] == [(0, 0, sc.scenario_id)]
    unlinked = json_to_scenario(make_json_scenario(), "mem.json", infer_links=False)
    assert not any(f.lane.exit_lanes for f in unlinked.map_features if f.HasField("lane"))


def test_json_scenario_converts_to_a_scene(tmp_path: Path) -> None:
    sc = load_gpudrive_json(_write(tmp_path, make_json_scenario()))
    scene, report = scenario_to_scene(sc)
    rg = scene.roadgraph
    assert report.lanes == rg.num_lanes == 3
    assert rg.exits(0) == [1] and rg.entries(1) == [0] and rg.exits(2) == []
    for i in range(3):  # no boundaries or neighbours in this form: the default width
        np.testing.assert_allclose(rg.lane_width_m[i][rg.lane_valid[i]], DEFAULT_LANE_WIDTH_M)
    assert report.road_lines == 1 and sorted(rg.edge_type.tolist()) == [1, 2]
    assert (report.crosswalks, report.stop_signs, report.speed_bumps) == (1, 1, 0)
    # the two moving cars are controlled, the SDC first; the parked car and the pedestrian are not
    assert scene.num_agents == report.controlled_agents == 2 and report.other_objects == 2
    assert report.vehicles_valid_now == 3
    assert scene.params["origin_xy"] == pytest.approx([-30.0 + 0.8 * CURRENT, 0.0])
    np.testing.assert_allclose(scene.spawn_pose[0], [0.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(scene.spawn_pose[1], [-40.0 + CURRENT - (-22.0), 3.5, 0.0], atol=1e-6)
    assert scene.spawn_speed_mps.tolist() == pytest.approx([8.0, 10.0])
    log = scene.log
    assert log is not None and log.num_steps == STEPS - CURRENT
    assert not log.valid[1, 60 - CURRENT] and not log.valid[1, 61 - CURRENT] and log.valid[1, 62 - CURRENT]
    np.testing.assert_allclose(log.xy[1, 62 - CURRENT], [-40.0 + 62 - (-22.0), 3.5], atol=1e-6)
    np.testing.assert_allclose(scene.goal_xy[0], [0.8 * (STEPS - 1 - CURRENT), 0.0], atol=1e-6)


def _set(path: list[Any], value: Any) -> Any:
    """A mutation of the scenario dict: set the value at ``path`` (``...`` deletes the key)."""

    def apply(data: dict[str, Any]) -> None:
        node: Any = data
        for key in path[:-1]:
            node = node[key]
        if value is ...:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return apply


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set(["objects"], ...), "scene.json: objects: missing (required field)"),
        (_set(["objects", 3, "position", 17, "x"], "12.5"), "objects[3].position[17].x: expected a number"),
        (_set(["objects", 1, "heading", 40], None), "objects[1].heading[40]: expected a number, got null"),
        (_set(["objects", 0, "position", 5, "z"], ...), "objects[0].position[5].z: missing"),
        (_set(["roads", 2, "type"], "bridge"), "roads[2].type: expected one of 'lane'"),
        (_set(["roads", 3, "map_element_id"], 15), "roads[3].map_element_id: expected a road-graph code"),
        (_set(["roads", 6, "geometry"], []), "roads[6].geometry: expected exactly 1 point"),
        (_set(["roads", 1, "id"], 100), "roads[1].id: expected a unique map feature id"),
        (_set(["objects", 2, "type"], "truck"), "objects[2].type: expected one of"),
        (_set(["objects", 2, "id"], 1001), "objects[2].id: expected a unique track id, got 1001 again"),
        (_set(["tl_states", "lane7"], {}), "tl_states['lane7']: expected the key to be a lane id"),
        (_set(["objects", 0, "valid", 3], 1), "objects[0].valid[3]: expected true or false"),
        (_set(["objects", 0, "heading", 12], 90.0), "objects[0].heading[12]: expected radians"),
        (_set(["objects", 0, "position", 12], _p(BAD, BAD, BAD)), "objects[0].position[12]: holds the"),
        (_set(["metadata", "sdc_track_index"], 4), "metadata.sdc_track_index: expected an integer in [0, 3]"),
        (_set(["metadata", "tracks_to_predict", 0, "difficulty"], 3), "tracks_to_predict[0].difficulty"),
        (_set(["tl_states", "101", "state", 1], "green"), "tl_states['101'].state[1]: expected one of"),
        (_set(["scenario_id"], ""), "scenario_id: expected a non-empty string"),
    ],
)
def test_malformed_fields_name_file_and_field(tmp_path: Path, mutate: Any, expected: str) -> None:
    data = make_json_scenario()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(SceneFormatError) as err:
        load_gpudrive_json(path)
    assert str(path) in str(err.value) and expected in str(err.value)


def test_wrong_length_lists_and_non_json(tmp_path: Path) -> None:
    data = make_json_scenario()
    short = copy.deepcopy(data)
    short["objects"][0]["position"] = short["objects"][0]["position"][:90]
    with pytest.raises(SceneFormatError, match=r"objects\[0\]\.position: expected 91 entries .*got 90"):
        load_gpudrive_json(_write(tmp_path, short, "short.json"))
    bad = tmp_path / "broken.json"
    bad.write_text('{\n  "scenario_id": "x",\n  "objects": [1, 2,, 3]\n}\n')
    with pytest.raises(SceneFormatError, match=r"broken\.json: not valid JSON at line 3, column 20"):
        load_gpudrive_json(bad)
    with pytest.raises(SceneFormatError, match=r"list\.json: expected a JSON object, got a list"):
        load_gpudrive_json(_write(tmp_path, [data], "list.json"))
    binary = tmp_path / "shard.tfrecord.json"
    binary.write_bytes(b"\x80\x81\xfe\xff" * 8)
    with pytest.raises(SceneFormatError, match="not a UTF-8 text file"):
        load_gpudrive_json(binary)
    with pytest.raises(SceneFormatError, match="cannot read"):
        load_gpudrive_json(tmp_path / "missing.json")
