"""WOMD flat ``tf.train.Example`` records (the Waymax flavour) → our ``Scenario`` proto → ``Scene``.

The project ships no WOMD data, so the records here are built in code in the real layout and at the
real sizes (128 agent slots × 10 past + 1 current + 80 future steps, 20000 road-graph samples, 16
traffic-signal slots; unused slots padded with valid = 0): an eastbound lane in two pieces that meet
end to start, a lane line, a boundary edge, a stop sign and a crosswalk; a moving self-driving car,
a second moving car to predict with unobserved steps, a pedestrian and a cyclist seen only later;
one traffic signal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.example_pb2 import BytesList, Example, Feature, FloatList, Int64List
from scenefactory.scenes.womd.reader import parse_scenario
from scenefactory.scenes.womd.scenario_pb2 import LaneCenter, RoadEdge, RoadLine, Scenario, Track
from scenefactory.scenes.womd.tf_example import (
    example_to_scenario,
    is_tf_example,
    iter_example_scenarios,
    iter_womd_scenarios,
    parse_example,
    tfrecord_flavour,
)
from scenefactory.scenes.womd.tfrecord import CorruptRecordError, write_records

AGENTS = 128
SAMPLES = 20000
SIGNALS = 16
STEPS = 91
PERIODS = (("past", 0, 10), ("current", 10, 11), ("future", 11, 91))


def _floats(values: np.ndarray) -> Feature:
    return Feature(float_list=FloatList(value=np.asarray(values, dtype=np.float32).ravel().tolist()))


def _ints(values: np.ndarray) -> Feature:
    return Feature(int64_list=Int64List(value=np.asarray(values, dtype=np.int64).ravel().tolist()))


def _road_samples() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xyz (N, 3), id (N,), type (N,)) of the valid road-graph samples, features in order."""
    xs = np.arange(0.0, 50.0 + 1e-9, 2.0)
    features = [
        (100, 2, np.stack([xs, np.zeros_like(xs), np.zeros_like(xs)], 1)),  # lane, surface street
        (101, 2, np.stack([xs + 50.0, np.zeros_like(xs), np.zeros_like(xs)], 1)),  # lane, continues 100
        (200, 6, np.stack([xs * 2.0, np.full_like(xs, 1.85), np.zeros_like(xs)], 1)),  # broken white
        (300, 15, np.stack([xs * 2.0, np.full_like(xs, -1.85), np.zeros_like(xs)], 1)),  # edge, boundary
        (400, 17, np.array([[95.0, -3.0, 0.0]])),  # stop sign
        (500, 18, np.array([[60.0, -2.0, 0.0], [64.0, -2.0, 0.0], [64.0, 2.0, 0.0], [60.0, 2.0, 0.0]])),
    ]
    xyz = np.concatenate([pts for _, _, pts in features])
    ids = np.concatenate([np.full(len(pts), fid) for fid, _, pts in features])
    types = np.concatenate([np.full(len(pts), code) for _, code, pts in features])
    return xyz, ids, types


def make_example(scenario_id: str, shift_m: float = 0.0, full: bool = True) -> Example:
    """A realistic tf_example record; ``full`` adds ``height``, ``objects_of_interest`` and signals."""
    t = np.arange(STEPS, dtype=np.float64)
    x, y, z = np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS))
    yaw, vx, vy = np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS))
    length, width, height = np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS)), np.zeros((AGENTS, STEPS))
    valid = np.zeros((AGENTS, STEPS), dtype=np.int64)
    ids = np.full(AGENTS, -1.0)
    types = np.full(AGENTS, -1.0)
    sdc = np.zeros(AGENTS, dtype=np.int64)
    predict = np.zeros(AGENTS, dtype=np.int64)
    interest = np.zeros(AGENTS, dtype=np.int64)
    # slot 0: the self-driving car, 10 m/s eastbound, valid throughout
    ids[0], types[0], sdc[0] = 7, 1, 1
    x[0], vx[0], valid[0] = 5.0 + shift_m + t, 10.0, 1
    length[0], width[0], height[0] = 4.8, 2.0, 1.6
    # slot 1: a car to predict, 5 m/s, unobserved at steps 0–4 and 60–64
    ids[1], types[1], predict[1], interest[1] = 12, 1, 1, 1
    x[1], vx[1], valid[1] = 30.0 + 0.5 * t, 5.0, 1
    valid[1, :5] = 0
    valid[1, 60:65] = 0
    length[1], width[1], height[1] = 4.2, 1.8, 1.5
    yaw[1] = 3.5  # outside [-π, π): wrapped on reading
    # slot 2: a pedestrian crossing north
    ids[2], types[2] = 20, 2
    x[2], y[2], vy[2], valid[2] = 62.0, -3.0 + 0.1 * t, 1.0, 1
    yaw[2] = math.pi / 2
    length[2], width[2], height[2] = 0.5, 0.5, 1.8
    # slot 3: a cyclist seen from step 20 on
    ids[3], types[3] = 33, 3
    x[3], y[3], vx[3] = 80.0 - 0.4 * t, 1.0, -4.0
    valid[3, 20:] = 1
    yaw[3] = math.pi - 0.01
    length[3], width[3], height[3] = 1.8, 0.6, 1.7
    # padding slots: zeros with valid 0 and id/type −1, as in real files
    for arr in (x, y, z, yaw, vx, vy, length, width, height):
        arr[valid == 0] = -1.0

    ex = Example()
    f = ex.features.feature
    f["scenario/id"].CopyFrom(Feature(bytes_list=BytesList(value=[scenario_id.encode()])))
    f["state/id"].CopyFrom(_floats(ids))
    f["state/type"].CopyFrom(_floats(types))
    f["state/is_sdc"].CopyFrom(_ints(sdc))
    f["state/tracks_to_predict"].CopyFrom(_ints(predict))
    columns = {
        "x": x,
        "y": y,
        "z": z,
        "bbox_yaw": yaw,
        "length": length,
        "width": width,
        "velocity_x": vx,
        "velocity_y": vy,
    }
    if full:
        columns["height"] = height
        f["state/objects_of_interest"].CopyFrom(_ints(interest))
    for period, a, b in PERIODS:
        for name, arr in columns.items():
            f[f"state/{period}/{name}"].CopyFrom(_floats(arr[:, a:b]))
        f[f"state/{period}/valid"].CopyFrom(_ints(valid[:, a:b]))

    xyz_v, id_v, type_v = _road_samples()
    n = len(xyz_v)
    xyz, rg_ids, rg_types = np.zeros((SAMPLES, 3)), np.full(SAMPLES, -1), np.full(SAMPLES, -1)
    rg_valid = np.zeros(SAMPLES, dtype=np.int64)
    xyz[:n], rg_ids[:n], rg_types[:n], rg_valid[:n] = xyz_v, id_v, type_v, 1
    xyz[:n, 0] += shift_m
    direction = np.zeros((SAMPLES, 3))
    direction[:n, 0] = 1.0
    f["roadgraph_samples/xyz"].CopyFrom(_floats(xyz))
    f["roadgraph_samples/dir"].CopyFrom(_floats(direction))
    f["roadgraph_samples/id"].CopyFrom(_ints(rg_ids))
    f["roadgraph_samples/type"].CopyFrom(_ints(rg_types))
    f["roadgraph_samples/valid"].CopyFrom(_ints(rg_valid))

    if full:  # signal 0 controls lane 100: red for the past, green from the current step on
        state = np.zeros((STEPS, SIGNALS), dtype=np.int64)
        state[:, 0] = np.where(t < 10, 4, 6)
        sig_valid = np.zeros((STEPS, SIGNALS), dtype=np.int64)
        sig_valid[:, 0] = 1
        sig_id = np.full((STEPS, SIGNALS), -1)
        sig_id[:, 0] = 100
        sx, sy, sz = np.zeros((STEPS, SIGNALS)), np.zeros((STEPS, SIGNALS)), np.zeros((STEPS, SIGNALS))
        sx[:, 0] = 49.0 + shift_m
        for period, a, b in PERIODS:
            prefix = f"traffic_light_state/{period}"
            f[f"{prefix}/state"].CopyFrom(_ints(state[a:b]))
            f[f"{prefix}/valid"].CopyFrom(_ints(sig_valid[a:b]))
            f[f"{prefix}/id"].CopyFrom(_ints(sig_id[a:b]))
            f[f"{prefix}/x"].CopyFrom(_floats(sx[a:b]))
            f[f"{prefix}/y"].CopyFrom(_floats(sy[a:b]))
            f[f"{prefix}/z"].CopyFrom(_floats(sz[a:b]))
    return ex


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    """Three serialized records; the second without the optional features."""
    return [
        make_example("scene-a").SerializeToString(),
        make_example("scene-b", shift_m=1000.0, full=False).SerializeToString(),
        make_example("scene-c", shift_m=-500.0).SerializeToString(),
    ]


@pytest.fixture(scope="module")
def shard(records: list[bytes], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tfex") / "training_tfexample.tfrecord-00000-of-01000"
    assert write_records(path, records) == 3
    return path


@pytest.fixture(scope="module")
def scenarios(shard: Path) -> list[tuple[int, int, Scenario]]:
    return list(iter_example_scenarios(shard))


def test_reads_every_record_with_index_and_offset(
    scenarios: list[tuple[int, int, Scenario]], records: list[bytes]
) -> None:
    assert [i for i, _, _ in scenarios] == [0, 1, 2]
    offsets = [off for _, off, _ in scenarios]
    assert offsets[0] == 0
    assert offsets[1] == 12 + len(records[0]) + 4
    assert offsets[2] == offsets[1] + 12 + len(records[1]) + 4
    assert [s.scenario_id for _, _, s in scenarios] == ["scene-a", "scene-b", "scene-c"]


def test_timing_and_tracks(scenarios: list[tuple[int, int, Scenario]]) -> None:
    s = scenarios[0][2]
    assert s.current_time_index == 10
    assert len(s.timestamps_seconds) == STEPS
    assert s.timestamps_seconds[0] == 0.0
    assert s.timestamps_seconds[10] == pytest.approx(1.0)
    assert s.timestamps_seconds[-1] == pytest.approx(9.0)
    assert [tr.id for tr in s.tracks] == [7, 12, 20, 33]  # padding slots dropped
    assert [tr.object_type for tr in s.tracks] == [
        Track.TYPE_VEHICLE,
        Track.TYPE_VEHICLE,
        Track.TYPE_PEDESTRIAN,
        Track.TYPE_CYCLIST,
    ]
    assert all(len(tr.states) == STEPS for tr in s.tracks)
    assert s.sdc_track_index == 0
    assert [r.track_index for r in s.tracks_to_predict] == [1]
    assert list(s.objects_of_interest) == [12]

    sdc = s.tracks[0].states[10]
    assert sdc.valid
    assert (sdc.center_x, sdc.center_y, sdc.velocity_x) == pytest.approx((15.0, 0.0, 10.0))
    assert (sdc.length, sdc.width, sdc.height) == pytest.approx((4.8, 2.0, 1.6))

    car = s.tracks[1]
    assert [st.valid for st in car.states[:6]] == [False] * 5 + [True]
    assert not car.states[62].valid
    assert car.states[62].center_x == 0.0 and car.states[62].length == 0.0  # no −1 padding copied
    assert car.states[5].center_x == pytest.approx(32.5)
    assert car.states[5].heading == pytest.approx(3.5 - 2 * math.pi, abs=1e-5)
    assert -math.pi <= car.states[5].heading < math.pi

    cyclist = s.tracks[3]
    assert sum(st.valid for st in cyclist.states) == STEPS - 20
    assert not cyclist.states[10].valid

    b = scenarios[1][2]  # no height, no objects_of_interest, no signals
    assert b.tracks[0].states[10].height == 0.0
    assert list(b.objects_of_interest) == []
    assert len(b.dynamic_map_states) == 0
    assert b.tracks[0].states[10].center_x == pytest.approx(1015.0)


def test_road_graph_and_inferred_links(scenarios: list[tuple[int, int, Scenario]]) -> None:
    s = scenarios[0][2]
    kinds = [(f.id, f.WhichOneof("feature_data")) for f in s.map_features]
    assert kinds == [
        (100, "lane"),
        (101, "lane"),
        (200, "road_line"),
        (300, "road_edge"),
        (400, "stop_sign"),
        (500, "crosswalk"),
    ]
    lane_a, lane_b, line, edge, sign, walk = s.map_features
    assert lane_a.lane.type == LaneCenter.TYPE_SURFACE_STREET
    assert len(lane_a.lane.polyline) == 26
    assert (lane_a.lane.polyline[-1].x, lane_a.lane.polyline[-1].y) == (50.0, 0.0)
    assert list(lane_a.lane.exit_lanes) == [101] and list(lane_a.lane.entry_lanes) == []
    assert list(lane_b.lane.entry_lanes) == [100] and list(lane_b.lane.exit_lanes) == []
    assert line.road_line.type == RoadLine.TYPE_BROKEN_SINGLE_WHITE
    assert edge.road_edge.type == RoadEdge.TYPE_ROAD_EDGE_BOUNDARY
    assert (sign.stop_sign.position.x, sign.stop_sign.position.y) == (95.0, -3.0)
    assert [(p.x, p.y) for p in walk.crosswalk.polygon] == [(60, -2), (64, -2), (64, 2), (60, 2)]

    assert len(s.dynamic_map_states) == STEPS
    assert [len(d.lane_states) for d in s.dynamic_map_states] == [1] * STEPS
    assert s.dynamic_map_states[9].lane_states[0].state == 4
    now = s.dynamic_map_states[10].lane_states[0]
    assert (now.lane, now.state, now.stop_point.x) == (100, 6, 49.0)


def test_no_link_inference_when_disabled(records: list[bytes]) -> None:
    s = example_to_scenario(records[0], "mem", infer_links=False)
    assert all(not f.lane.exit_lanes for f in s.map_features if f.HasField("lane"))


def test_scenario_to_scene(scenarios: list[tuple[int, int, Scenario]]) -> None:
    scene, report = scenario_to_scene(scenarios[0][2])
    rg = scene.roadgraph
    assert rg.num_lanes == 2
    assert rg.exits(0) == [1] and rg.entries(1) == [0]
    assert report.road_lines == 1 and report.road_edges == 1
    assert report.stop_signs == 1 and report.crosswalks == 1
    assert report.controlled_agents == 2  # the SDC first, then the car to predict
    assert scene.log is not None
    assert scene.log.xy.shape == (2, STEPS - 10, 2)
    assert scene.log.xy[0, 0] == pytest.approx((0.0, 0.0))  # re-centred on the SDC now
    assert scene.log.xy[1, 0] == pytest.approx((35.0 - 15.0, 0.0))
    assert not scene.log.valid[1, 60 - 10] and scene.log.valid[1, 0]
    assert scene.replay is not None
    assert len(scene.replay.valid) == 2  # the pedestrian and the cyclist


def test_flavours_are_told_apart(records: list[bytes]) -> None:
    assert is_tf_example(records[0])
    scenario = Scenario(scenario_id="x", timestamps_seconds=[0.0, 0.1])
    scenario.tracks.add(id=1).states.add(center_x=1.0, valid=True)
    data = scenario.SerializeToString()
    assert not is_tf_example(data)
    with pytest.raises(CorruptRecordError, match=r"no features.*scenario-format"):
        parse_example(data, "s.tfrecord: record 0 at byte offset 0")
    with pytest.raises(CorruptRecordError, match="not a Scenario"):  # and the scenario reader refuses ours
        parse_scenario(records[0], "e.tfrecord: record 0 at byte offset 0")


def test_either_flavour_is_read_by_one_call(shard: Path, tmp_path: Path) -> None:
    assert tfrecord_flavour(shard) == "tf_example"
    assert [s.scenario_id for _, _, s in iter_womd_scenarios(shard)] == ["scene-a", "scene-b", "scene-c"]
    scenario = Scenario(scenario_id="womd-1", timestamps_seconds=[0.0])
    scenario.tracks.add(id=1).states.add(center_x=1.0, valid=True)
    other = tmp_path / "scenario.tfrecord"
    write_records(other, [scenario.SerializeToString()])
    assert tfrecord_flavour(other) == "scenario"
    assert [s.scenario_id for _, _, s in iter_womd_scenarios(other)] == ["womd-1"]
    empty = tmp_path / "empty.tfrecord"
    write_records(empty, [])
    assert tfrecord_flavour(empty) == "scenario"
    assert list(iter_womd_scenarios(empty)) == []


def _broken(tmp_path: Path, edit: Callable[[Example], None]) -> Path:
    """A shard of a good record followed by one edited by ``edit``."""
    bad = make_example("bad")
    edit(bad)
    path = tmp_path / "broken.tfrecord"
    write_records(path, [make_example("good").SerializeToString(), bad.SerializeToString()])
    return path


def _read_all(path: Path) -> list[tuple[int, int, Scenario]]:
    return list(iter_example_scenarios(path))


def test_missing_key_names_file_record_and_key(tmp_path: Path) -> None:
    path = _broken(tmp_path, lambda ex: ex.features.feature.pop("state/past/velocity_x"))
    with pytest.raises(SceneFormatError) as info:
        _read_all(path)
    msg = str(info.value)
    assert str(path) in msg and "record 1 at byte offset" in msg
    assert "'state/past/velocity_x'" in msg and "missing" in msg and "1280" in msg


def test_wrong_length_names_key_and_expected_count(tmp_path: Path) -> None:
    def shorten(ex: Example) -> None:
        del ex.features.feature["roadgraph_samples/id"].int64_list.value[-1]

    path = _broken(tmp_path, shorten)
    with pytest.raises(
        SceneFormatError, match=r"roadgraph_samples/id'.*expected 20000 values, got 19999"
    ) as info:
        _read_all(path)
    assert str(path) in str(info.value)


def test_wrong_kind_names_key(tmp_path: Path) -> None:
    def as_ints(ex: Example) -> None:
        ex.features.feature["state/id"].CopyFrom(_ints(np.zeros(AGENTS)))

    path = _broken(tmp_path, as_ints)
    with pytest.raises(SceneFormatError, match=r"'state/id': expected floats, got int64s") as info:
        _read_all(path)
    assert str(path) in str(info.value)


def test_bad_values_name_key(tmp_path: Path) -> None:
    def two_sdcs(ex: Example) -> None:
        ex.features.feature["state/is_sdc"].int64_list.value[1] = 1

    with pytest.raises(SceneFormatError, match=r"'state/is_sdc': expected exactly one"):
        _read_all(_broken(tmp_path, two_sdcs))

    stop_sign = int(np.flatnonzero(_road_samples()[1] == 400)[0])

    def unknown_road_type(ex: Example) -> None:
        ex.features.feature["roadgraph_samples/type"].int64_list.value[stop_sign] = 4

    with pytest.raises(
        SceneFormatError,
        match=rf"'roadgraph_samples/type': sample {stop_sign} \(id 400\): expected a road-graph type code",
    ):
        _read_all(_broken(tmp_path, unknown_road_type))

    def mixed_types(ex: Example) -> None:
        ex.features.feature["roadgraph_samples/type"].int64_list.value[3] = 1

    with pytest.raises(
        SceneFormatError, match=r"'roadgraph_samples/type': road-graph id 100 .* one type per id"
    ):
        _read_all(_broken(tmp_path, mixed_types))

    def anonymous_track(ex: Example) -> None:
        ex.features.feature["state/id"].float_list.value[2] = -1.0

    with pytest.raises(SceneFormatError, match=r"'state/id': agent slot 2 has valid steps"):
        _read_all(_broken(tmp_path, anonymous_track))


def test_garbage_record_names_file_and_record(tmp_path: Path) -> None:
    path = tmp_path / "garbage.tfrecord"
    write_records(path, [make_example("good").SerializeToString(), b"\x0a\xff\xff\x07garbage"])
    it = iter_example_scenarios(path)
    assert next(it)[2].scenario_id == "good"
    with pytest.raises(CorruptRecordError) as info:
        next(it)
    msg = str(info.value)
    assert str(path) in msg and "record 1 at byte offset" in msg and "not a tf.train.Example" in msg
