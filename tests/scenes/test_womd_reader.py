"""WOMD scenario shards read without TensorFlow: TFRecord framing, CRCs, our proto, error messages.

The project ships no WOMD data, so every scenario here is built in code with realistic content
(91 steps at 10 Hz, current_time_index 10, vehicle tracks with invalid steps, a small map with
lanes, lines, edges, a stop sign, a crosswalk and a speed bump) and written with ``write_records``.
"""

from __future__ import annotations

import gzip
import math
import re
import struct
from pathlib import Path

import pytest

from scenefactory.errors import UserError
from scenefactory.scenes.womd import (
    CorruptRecordError,
    MapFeature,
    Scenario,
    Track,
    iter_records,
    iter_scenarios,
    masked_crc32c,
    scenario_summary,
    write_records,
)
from scenefactory.scenes.womd.scenario_pb2 import (
    DynamicMapState,
    LaneCenter,
    MapPoint,
    RequiredPrediction,
    RoadEdge,
    RoadLine,
    TrafficSignalLaneState,
)
from scenefactory.scenes.womd.tfrecord import FOOTER_BYTES, HEADER_BYTES

STEPS = 91
CURRENT = 10


def _points(xy: list[tuple[float, float]], z: float = 0.0) -> list[MapPoint]:
    return [MapPoint(x=x, y=y, z=z) for x, y in xy]


def _straight(x0: float, y0: float, x1: float, y1: float, n: int) -> list[MapPoint]:
    return _points([(x0 + (x1 - x0) * i / (n - 1), y0 + (y1 - y0) * i / (n - 1)) for i in range(n)])


def _vehicle_track(track_id: int, y_m: float, speed_mps: float, invalid_steps: set[int]) -> Track:
    """A car driving along +x at constant speed; ``invalid_steps`` are unobserved (valid=False)."""
    track = Track(id=track_id, object_type=Track.TYPE_VEHICLE)
    for step in range(STEPS):
        state = track.states.add()
        if step in invalid_steps:
            state.valid = False  # WOMD writes all-default states at unobserved steps
            continue
        state.center_x = -30.0 + speed_mps * 0.1 * step
        state.center_y = y_m
        state.center_z = 0.8
        state.length, state.width, state.height = 4.6, 1.9, 1.6
        state.heading = 0.0
        state.velocity_x, state.velocity_y = speed_mps, 0.0
        state.valid = True
    return track


def make_scenario(scenario_id: str, num_vehicles: int = 3) -> Scenario:
    """A two-lane road with a stop sign, crosswalk and speed bump, and ``num_vehicles`` cars."""
    scenario = Scenario(
        scenario_id=scenario_id,
        timestamps_seconds=[0.1 * step for step in range(STEPS)],
        current_time_index=CURRENT,
        sdc_track_index=0,
    )
    for i in range(num_vehicles):
        invalid = set(range(0, 3 * i)) | ({60, 61} if i == 1 else set())
        scenario.tracks.append(
            _vehicle_track(100 + i, y_m=-1.75 + 3.5 * (i % 2), speed_mps=8.0 + i, invalid_steps=invalid)
        )
    pedestrian = Track(id=200, object_type=Track.TYPE_PEDESTRIAN)
    for step in range(STEPS):
        pedestrian.states.add(
            center_x=20.0, center_y=-6.0 + 0.12 * step, center_z=0.9, length=0.5, width=0.5,
            height=1.8, heading=math.pi / 2, velocity_x=0.0, velocity_y=1.2, valid=True,
        )  # fmt: skip
    scenario.tracks.append(pedestrian)
    scenario.objects_of_interest.extend([100, 200])
    scenario.tracks_to_predict.add(track_index=1, difficulty=RequiredPrediction.LEVEL_1)

    lane_right = LaneCenter(
        speed_limit_mph=25.0,
        type=LaneCenter.TYPE_SURFACE_STREET,
        interpolating=False,
        polyline=_straight(-40.0, -1.75, 40.0, -1.75, 41),
        entry_lanes=[9, 10],
        exit_lanes=[11],
    )
    lane_right.left_neighbors.add(
        feature_id=2, self_start_index=0, self_end_index=40, neighbor_start_index=0, neighbor_end_index=40
    ).boundaries.add(
        lane_start_index=0,
        lane_end_index=40,
        boundary_feature_id=3,
        boundary_type=RoadLine.TYPE_BROKEN_SINGLE_WHITE,
    )
    lane_right.left_boundaries.add(
        lane_start_index=0,
        lane_end_index=40,
        boundary_feature_id=3,
        boundary_type=RoadLine.TYPE_BROKEN_SINGLE_WHITE,
    )
    lane_right.right_boundaries.add(lane_start_index=0, lane_end_index=40, boundary_feature_id=4)
    lane_left = LaneCenter(
        speed_limit_mph=25.0,
        type=LaneCenter.TYPE_SURFACE_STREET,
        polyline=_straight(-40.0, 1.75, 40.0, 1.75, 41),
    )
    lane_left.right_neighbors.add(feature_id=1, self_start_index=0, self_end_index=40)

    features = [
        MapFeature(id=1, lane=lane_right),
        MapFeature(id=2, lane=lane_left),
        MapFeature(
            id=3,
            road_line=RoadLine(type=RoadLine.TYPE_BROKEN_SINGLE_WHITE, polyline=_straight(-40, 0, 40, 0, 9)),
        ),
        MapFeature(
            id=4,
            road_edge=RoadEdge(
                type=RoadEdge.TYPE_ROAD_EDGE_BOUNDARY, polyline=_straight(-40, -3.5, 40, -3.5, 9)
            ),
        ),
        MapFeature(
            id=5,
            road_edge=RoadEdge(type=RoadEdge.TYPE_ROAD_EDGE_MEDIAN, polyline=_straight(-40, 3.5, 40, 3.5, 9)),
        ),
        MapFeature(id=6, stop_sign={"lane": [1], "position": MapPoint(x=30.0, y=-4.0, z=0.0)}),
        MapFeature(id=7, crosswalk={"polygon": _points([(18, -3.5), (22, -3.5), (22, 3.5), (18, 3.5)])}),
        MapFeature(id=8, speed_bump={"polygon": _points([(0, -3.5), (1, -3.5), (1, 3.5), (0, 3.5)])}),
    ]
    scenario.map_features.extend(features)
    for step in range(STEPS):
        signal = TrafficSignalLaneState.LANE_STATE_GO if step < 50 else TrafficSignalLaneState.LANE_STATE_STOP
        scenario.dynamic_map_states.append(
            DynamicMapState(
                lane_states=[{"lane": 1, "state": signal, "stop_point": MapPoint(x=30.0, y=-1.75)}]
            )
        )
    return scenario


@pytest.fixture
def shard(tmp_path: Path) -> tuple[Path, list[Scenario]]:
    """A file of three scenario records."""
    scenarios = [make_scenario(f"scn{i:03d}abcdef", num_vehicles=2 + i) for i in range(3)]
    path = tmp_path / "training.tfrecord-00000-of-01000"
    assert write_records(path, (s.SerializeToString() for s in scenarios)) == 3
    return path, scenarios


def _record_offsets(path: Path) -> list[int]:
    return [record.offset for record in iter_records(path)]


def _flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))


def test_masked_crc32c_known_value() -> None:
    """CRC32C(b"123456789") is the standard check value 0xE3069283. Masking by hand:
    0xE3069283 >> 15 = 0x0001C60D; (0xE3069283 << 17) mod 2^32 = 0x25060000 (the low 15 bits
    0x1283 moved to the top); OR = 0x2507C60D; + 0xA282EAD8 = 0xC78AB0E5 (no carry past 32 bits).
    The empty string has CRC 0, so its masked CRC is the mask delta itself."""
    assert masked_crc32c(b"123456789") == 0xC78AB0E5
    assert masked_crc32c(b"") == 0xA282EAD8


def test_round_trip_several_records(shard: tuple[Path, list[Scenario]]) -> None:
    path, scenarios = shard
    read = list(iter_scenarios(path))
    assert [index for index, _, _ in read] == [0, 1, 2]
    assert [scenario for _, _, scenario in read] == scenarios
    # Offsets follow the framing: 12 header bytes + data + 4 CRC bytes per record.
    expected_offset = 0
    for (_, offset, _), scenario in zip(read, scenarios, strict=True):
        assert offset == expected_offset
        expected_offset += HEADER_BYTES + scenario.ByteSize() + FOOTER_BYTES
    assert expected_offset == path.stat().st_size
    first = read[0][2]
    assert len(first.timestamps_seconds) == STEPS and first.current_time_index == CURRENT
    assert not first.tracks[1].states[0].valid and first.tracks[1].states[CURRENT].valid
    assert list(first.map_features[0].lane.entry_lanes) == [9, 10]


def test_wire_format_details() -> None:
    """Packed-ness on the wire, as WOMD writes it: timestamps as one fixed64 field per value (tag
    0x09), entry_lanes as one packed length-delimited field (tag 0x4a)."""
    assert Scenario(timestamps_seconds=[0.0, 0.1]).SerializeToString() == (
        b"\x09" + struct.pack("<d", 0.0) + b"\x09" + struct.pack("<d", 0.1)
    )
    assert LaneCenter(entry_lanes=[1, 2]).SerializeToString() == b"\x4a\x02\x01\x02"


def test_unknown_fields_are_skipped(tmp_path: Path) -> None:
    """Real files carry an empty top-level field 3 that is in no public proto; newer ones add more."""
    scenario = make_scenario("withunknown")
    unknown_empty_field_3 = b"\x1a\x00"  # field 3, wire type 2 (length-delimited), length 0
    unknown_field_12 = b"\x62\x03abc"  # field 12, wire type 2, 3 bytes (like the newer lidar field)
    unknown_varint_99 = b"\x98\x06\x2a"  # field 99, wire type 0, value 42
    raw = scenario.SerializeToString() + unknown_empty_field_3 + unknown_field_12 + unknown_varint_99
    path = tmp_path / "unknown.tfrecord"
    write_records(path, [raw])
    [(index, offset, parsed)] = list(iter_scenarios(path))
    assert (index, offset) == (0, 0)
    assert parsed.scenario_id == "withunknown"
    assert parsed.tracks == scenario.tracks and parsed.map_features == scenario.map_features


def test_summary(shard: tuple[Path, list[Scenario]]) -> None:
    path, _ = shard
    _, _, scenario = next(iter_scenarios(path))
    assert scenario_summary(scenario) == {
        "scenario_id": "scn000abcdef",
        "steps": 91,
        "current_time_index": 10,
        "sdc_track_index": 0,
        "tracks": 3,
        "tracks_by_type": {"pedestrian": 1, "vehicle": 2},
        "map_features": 8,
        "map_features_by_kind": {
            "crosswalk": 1,
            "lane": 2,
            "road_edge": 2,
            "road_line": 1,
            "speed_bump": 1,
            "stop_sign": 1,
        },
        "dynamic_map_states": 91,
        "tracks_to_predict": 1,
    }


def test_flipped_data_byte_is_a_data_crc_error(shard: tuple[Path, list[Scenario]]) -> None:
    path, scenarios = shard
    offsets = _record_offsets(path)
    _flip_byte(path, offsets[1] + HEADER_BYTES + 100)
    reader = iter_scenarios(path)
    assert next(reader)[2] == scenarios[0]  # records before the bad one are still delivered
    with pytest.raises(
        CorruptRecordError, match=rf"record 1 at byte offset {offsets[1]}: bad data CRC"
    ) as info:
        next(reader)
    assert str(path) in str(info.value)
    assert isinstance(info.value, UserError)


def test_flipped_length_byte_is_a_length_crc_error(shard: tuple[Path, list[Scenario]]) -> None:
    path, _ = shard
    offsets = _record_offsets(path)
    _flip_byte(path, offsets[2] + 1)
    with pytest.raises(CorruptRecordError, match=rf"record 2 at byte offset {offsets[2]}: bad length CRC"):
        list(iter_scenarios(path))


@pytest.mark.parametrize(
    ("cut_into_record", "expected"),
    [(5, "truncated header"), (HEADER_BYTES + 50, "truncated data"), (-2, "truncated data")],
    ids=["mid-header", "mid-data", "mid-data-crc"],
)
def test_truncated_file(shard: tuple[Path, list[Scenario]], cut_into_record: int, expected: str) -> None:
    path, _ = shard
    offsets = _record_offsets(path)
    end = path.stat().st_size
    cut = offsets[2] + cut_into_record if cut_into_record >= 0 else end + cut_into_record
    path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(
        CorruptRecordError, match=rf"{re.escape(path.name)}: record 2 at byte offset {offsets[2]}: {expected}"
    ):
        list(iter_scenarios(path))


def test_huge_length_with_valid_crc_is_truncated_not_allocated(tmp_path: Path) -> None:
    """A length field with a valid CRC but far past the end of the file (here 2^62 bytes) is reported
    as truncated data, checked against the file size before any read allocates that many bytes."""
    length = struct.pack("<Q", 1 << 62)
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(length + struct.pack("<I", masked_crc32c(length)) + b"short")
    with pytest.raises(
        CorruptRecordError, match=r"record 0 at byte offset 0: truncated data \(5 of 4611686018427387904"
    ):
        list(iter_records(path))


def test_gzip_file_gets_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "scenario.tfrecord.gz"
    path.write_bytes(gzip.compress(b"x" * 100))
    with pytest.raises(CorruptRecordError, match=r"bad length CRC.*gzip file: decompress it first"):
        list(iter_records(path))


def test_valid_record_that_is_not_a_scenario(tmp_path: Path) -> None:
    path = tmp_path / "garbage.tfrecord"
    write_records(path, [make_scenario("ok").SerializeToString(), b"this is not a protobuf"])
    offset = _record_offsets(path)[1]
    with pytest.raises(
        CorruptRecordError, match=rf"record 1 at byte offset {offset}: not a Scenario protobuf"
    ):
        list(iter_scenarios(path))


def test_tf_example_record_is_not_taken_for_a_scenario(tmp_path: Path) -> None:
    """A tf.train.Example (Features = 1 → map entry "state" → Feature.int64_list = 3 → [7]) whose
    Features are 16 bytes long parses as a Scenario (field 1 read as 2 packed doubles); it is refused
    because it has no scenario_id."""
    int64_list = b"\x0a\x01\x07"  # Int64List.value = [7], packed
    feature = b"\x1a" + bytes([len(int64_list)]) + int64_list
    entry = b"\x0a\x05state" + b"\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    assert len(features) == 16
    example = b"\x0a" + bytes([len(features)]) + features
    assert len(Scenario.FromString(example).timestamps_seconds) == 2  # the trap this guards against
    path = tmp_path / "example.tfrecord"
    write_records(path, [example])
    with pytest.raises(
        CorruptRecordError, match=r"record 0 at byte offset 0: not a Scenario.*no scenario_id"
    ):
        list(iter_scenarios(path))


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot open TFRecord file"):
        list(iter_records(tmp_path / "absent.tfrecord"))


def test_write_is_atomic(tmp_path: Path) -> None:
    """An exception while writing leaves neither a partial file nor a temporary one behind."""
    path = tmp_path / "out.tfrecord"

    def records():
        yield b"first"
        raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError, match="producer failed"):
        write_records(path, records())
    assert list(tmp_path.iterdir()) == []


def test_reading_streams_one_record_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spy on the file object: every read asks for at most one record's bytes, never "the rest of the
    file", and taking the first record from the generator has read only that record."""
    record_bytes = make_scenario("streamed").SerializeToString()
    path = tmp_path / "many.tfrecord"
    write_records(path, [record_bytes] * 200)
    file_size = path.stat().st_size
    reads: list[int] = []
    real_open = Path.open

    class SpyFile:
        def __init__(self, handle):
            self._handle = handle

        def read(self, size: int = -1) -> bytes:
            assert size is not None and size >= 0, "the reader must never read to the end of the file"
            data = self._handle.read(size)
            reads.append(len(data))
            return data

        def fileno(self) -> int:
            return self._handle.fileno()

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.close()

    monkeypatch.setattr(Path, "open", lambda self, *a, **k: SpyFile(real_open(self, *a, **k)))
    reader = iter_records(path)
    first = next(reader)
    assert first.data == record_bytes
    assert sum(reads) == HEADER_BYTES + len(record_bytes) + FOOTER_BYTES
    assert sum(1 for _ in reader) == 199
    assert max(reads) <= len(record_bytes) + FOOTER_BYTES
    assert sum(reads) == file_size
