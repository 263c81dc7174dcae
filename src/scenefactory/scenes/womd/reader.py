"""Read Waymo Open Motion Dataset (WOMD) scenario shards: one serialized ``Scenario`` per TFRecord record.

The messages come from our own proto (``scenario.proto``, same field numbers as WOMD's), so no
TensorFlow or Waymo package is needed. Fields our proto does not list (real files carry an empty
top-level field 3; newer ones lidar/camera fields 12 and 13) are skipped by the protobuf runtime.

A WOMD scenario holds 91 steps at 10 Hz (``timestamps_seconds``, seconds), ``current_time_index``
10; each track has one ``ObjectState`` per step (positions and sizes in metres, heading in radians
counter-clockwise from +x, velocities in m/s, ``valid`` false at steps where it was not observed).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from google.protobuf.message import DecodeError

from scenefactory.scenes.womd.scenario_pb2 import Scenario, Track
from scenefactory.scenes.womd.tfrecord import CorruptRecordError, iter_records

_TYPE_PREFIX = "TYPE_"


class ScenarioSummary(TypedDict):
    """What a scenario holds, in counts (see ``scenario_summary``)."""

    scenario_id: str
    steps: int
    current_time_index: int
    sdc_track_index: int
    tracks: int
    tracks_by_type: dict[str, int]
    map_features: int
    map_features_by_kind: dict[str, int]
    dynamic_map_states: int
    tracks_to_predict: int


def parse_scenario(data: bytes, where: str) -> Scenario:
    """Parse one serialized ``Scenario``; ``where`` (file, record index, offset) prefixes any error.

    Raises:
        CorruptRecordError: if ``data`` is not a Scenario protobuf, or parses as one but has no
            ``scenario_id`` (every WOMD scenario has one; a ``tf.train.Example`` record from the
            tf_example flavour of WOMD can otherwise parse as an empty-looking Scenario).
    """
    scenario = Scenario()
    try:
        scenario.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptRecordError(f"{where}: not a Scenario protobuf: {exc}") from exc
    if not scenario.scenario_id:
        raise CorruptRecordError(
            f"{where}: not a Scenario protobuf: it has no scenario_id (field 5); is this a"
            " tf_example-format WOMD file rather than a scenario-format one?"
        )
    return scenario


def iter_scenarios(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, Scenario]]:
    """Yield ``(record_index, byte_offset, scenario)`` for every record of a WOMD scenario shard.

    Streams: one record is read, CRC-checked and parsed at a time (see ``tfrecord.iter_records``).

    Raises:
        CorruptRecordError: on a framing or CRC fault, or a record that is not a Scenario; the
            message names the file, the record index and its byte offset.
    """
    path = Path(path)
    for record in iter_records(path):
        where = f"{path}: record {record.index} at byte offset {record.offset}"
        yield record.index, record.offset, parse_scenario(record.data, where)


def _object_type_name(value: int) -> str:
    return Track.ObjectType.Name(value).removeprefix(_TYPE_PREFIX).lower()


def scenario_summary(scenario: Scenario) -> ScenarioSummary:
    """Summarise a scenario in counts, e.g. for a ``convert`` report.

    Returns:
        ``scenario_id``; ``steps`` (number of timestamps, 91 in WOMD); ``current_time_index``;
        ``sdc_track_index`` (index into the tracks of the self-driving car); ``tracks`` and
        ``tracks_by_type`` (keys ``unset``, ``vehicle``, ``pedestrian``, ``cyclist``, ``other``,
        only types present); ``map_features`` and ``map_features_by_kind`` (keys ``lane``,
        ``road_line``, ``road_edge``, ``stop_sign``, ``crosswalk``, ``speed_bump``, ``driveway``,
        only kinds present; ``unset`` for a feature whose kind our proto does not know or that has
        none); ``dynamic_map_states`` (steps with traffic-signal states); ``tracks_to_predict``.
    """
    by_type = Counter(_object_type_name(track.object_type) for track in scenario.tracks)
    by_kind = Counter(feature.WhichOneof("feature_data") or "unset" for feature in scenario.map_features)
    return ScenarioSummary(
        scenario_id=scenario.scenario_id,
        steps=len(scenario.timestamps_seconds),
        current_time_index=scenario.current_time_index,
        sdc_track_index=scenario.sdc_track_index,
        tracks=len(scenario.tracks),
        tracks_by_type=dict(sorted(by_type.items())),
        map_features=len(scenario.map_features),
        map_features_by_kind=dict(sorted(by_kind.items())),
        dynamic_map_states=len(scenario.dynamic_map_states),
        tracks_to_predict=len(scenario.tracks_to_predict),
    )
