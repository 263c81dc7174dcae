"""Read the flat ``tf.train.Example`` flavour of WOMD (what Waymax reads) into our ``Scenario`` proto.

One TFRecord record holds one serialized ``tf.train.Example`` (parsed with our own ``example.proto``,
no TensorFlow needed): a map from feature key to a flat, row-major list of floats, int64s or bytes.
This module turns one such record into our own
:class:`~scenefactory.scenes.womd.scenario_pb2.Scenario`, so that it goes through the same
:func:`~scenefactory.scenes.womd.convert.scenario_to_scene` as the scenario-format shards.

The features read (``A`` agent slots, 128 in WOMD; ``N`` road-graph samples, 20000 or 30000;
float = ``float_list``, int = ``int64_list``):

- ``scenario/id``: bytes, one non-empty UTF-8 value.
- ``state/id``, ``state/type``: float [A]; ``state/is_sdc``, ``state/tracks_to_predict``: int [A];
  ``state/objects_of_interest``: int [A], read only when present (older files lack it).
- ``state/{past,current,future}/{x,y,z,bbox_yaw,length,width,velocity_x,velocity_y}``: float
  [A × 10], [A × 1], [A × 80] (row-major, one row per slot); ``…/height`` likewise, read when
  present for all three periods (all-or-none; absent → height 0); ``…/valid``: int, same shapes.
- ``roadgraph_samples/xyz``, ``roadgraph_samples/dir``: float [N × 3]; ``roadgraph_samples/{id,type,
  valid}``: int [N]. ``dir`` is only checked for its length: polylines come from ``xyz``.
- ``traffic_light_state/{past,current,future}/{state,valid,id}``: int, ``…/{x,y,z}``: float, each
  [steps × S] (S signals, 16 in WOMD); read when present, all-or-none.

What the resulting ``Scenario`` holds:

- ``scenario_id`` from ``scenario/id``; 91 ``timestamps_seconds`` 0.0, 0.1, …, 9.0 and
  ``current_time_index`` 10.
- One track per agent slot that has a valid step, in slot order; its ``state/id`` must then be a
  non-negative integer (padding slots have id −1 and no valid step; a slot with an id but no valid
  step is also skipped, unless it is the SDC or a track to predict, which is an error). Type codes
  1 vehicle, 2 pedestrian, 3 cyclist, 4 other, 0 and −1 unset. Valid steps carry position, heading
  (``bbox_yaw`` wrapped to [-π, π)), velocity and size; invalid steps are ``valid = False`` with
  every other field zero.
- ``sdc_track_index``: the one track with ``state/is_sdc`` 1 (exactly one is required);
  ``tracks_to_predict``: the tracks with ``state/tracks_to_predict`` 1 (difficulty NONE: this
  flavour has none); ``objects_of_interest``: the track ids with ``state/objects_of_interest`` 1.
- **No agent selection here.** Every agent slot with a valid step becomes a track, whatever its type;
  which ones a scene controls and which it replays (and why) is decided for all three input
  flavours by :func:`~scenefactory.scenes.womd.convert.select_agents`.
- One map feature per road-graph ``id`` among the valid samples, in order of first appearance, its
  points the samples in order. All samples of one id must share one type code: lanes 0–3
  (``LaneCenter.type`` 0–3), road lines 5 (unknown) and 6–13 (``RoadLine.type`` 1–8), road edges
  14–16 (unknown, boundary, median), stop sign 17 (position = first sample; no controlled lanes),
  crosswalk 18, speed bump 19, driveway 20 (polygon = the samples). Lanes have no speed limit,
  neighbours or boundaries (the converter infers widths from neighbouring lanes or its default).
- **Lane connectivity is inferred** (this flavour has none): by
  :func:`~scenefactory.scenes.womd.gpudrive_json.infer_lane_links` (touching lane ends, same
  direction), unless ``infer_links=False``.
- ``dynamic_map_states``: with traffic-light features, one entry per step holding the valid signals
  (lane = the signal's ``id``, the controlled lane's road-graph id; state code as
  ``TrafficSignalLaneState.State``; stop point from ``x, y, z``); without them, none. The converter
  turns them into the scene's ``SignalLog``.

Errors: a record that is not an ``Example`` raises
:class:`~scenefactory.scenes.womd.tfrecord.CorruptRecordError` naming ``where`` (file, record index,
byte offset); a missing feature key, a wrong value kind or length, or an out-of-range value raises
:class:`~scenefactory.errors.SceneFormatError` naming ``where``, the feature key and what was expected.

Flavour detection: :func:`is_tf_example` tells one record's flavour, :func:`tfrecord_flavour` a
file's (by its first record), and :func:`iter_womd_scenarios` reads a shard of either flavour.
"""

from __future__ import annotations

import math
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

import numpy as np
from google.protobuf.message import DecodeError

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.womd.example_pb2 import Example
from scenefactory.scenes.womd.gpudrive_json import infer_lane_links
from scenefactory.scenes.womd.reader import iter_scenarios, parse_scenario
from scenefactory.scenes.womd.scenario_pb2 import (
    Crosswalk,
    Driveway,
    LaneCenter,
    MapFeature,
    MapPoint,
    RequiredPrediction,
    RoadEdge,
    RoadLine,
    Scenario,
    SpeedBump,
    StopSign,
    Track,
)
from scenefactory.scenes.womd.tfrecord import CorruptRecordError, iter_records

PAST_STEPS = 10
"""Past steps per agent (before the current one)."""
FUTURE_STEPS = 80
"""Future steps per agent (after the current one)."""
STEPS = PAST_STEPS + 1 + FUTURE_STEPS
"""Steps per scenario (10 Hz, 9.1 s)."""
CURRENT_TIME_INDEX = PAST_STEPS
"""Index of the current step."""
STEP_S = 0.1
"""Seconds between steps."""

_PERIODS = (("past", PAST_STEPS), ("current", 1), ("future", FUTURE_STEPS))
_STATE_FLOATS = ("x", "y", "z", "bbox_yaw", "length", "width", "velocity_x", "velocity_y")
_SIGNAL_INTS = ("state", "valid", "id")
_SIGNAL_FLOATS = ("x", "y", "z")
_KIND_NAMES = {"float_list": "floats", "int64_list": "int64s", "bytes_list": "bytes"}
_INT32 = (-(2**31), 2**31 - 1)

_OBJECT_TYPES = {
    -1: Track.TYPE_UNSET,
    0: Track.TYPE_UNSET,
    1: Track.TYPE_VEHICLE,
    2: Track.TYPE_PEDESTRIAN,
    3: Track.TYPE_CYCLIST,
    4: Track.TYPE_OTHER,
}

# road-graph type code → (map feature kind, our enum value for that feature's ``type``)
_ROAD_CODES: dict[int, tuple[str, int]] = {
    **{code: ("lane", code) for code in range(4)},
    5: ("road_line", 0),
    **{code: ("road_line", code - 5) for code in range(6, 14)},
    14: ("road_edge", 0),
    15: ("road_edge", 1),
    16: ("road_edge", 2),
    17: ("stop_sign", 0),
    18: ("crosswalk", 0),
    19: ("speed_bump", 0),
    20: ("driveway", 0),
}

_SIGNAL_STATE_MAX = 8  # TrafficSignalLaneState.State: 0 unknown … 8 flashing caution


class _Features:
    """Typed access to an Example's features; errors name ``where`` and the feature key."""

    def __init__(self, example: Example, where: str) -> None:
        self.feature = example.features.feature
        self.where = where

    def fail(self, key: str, what: str) -> NoReturn:
        """Raise the error for feature ``key`` (``what``: what was expected / wrong)."""
        raise SceneFormatError(f"{self.where}: feature {key!r}: {what}")

    def has(self, key: str) -> bool:
        """Whether the Example holds feature ``key``."""
        return key in self.feature

    def _values(self, key: str, kind: str, length: int | None) -> list[Any]:
        if key not in self.feature:
            self.fail(
                key, f"missing (expected {_KIND_NAMES[kind]}{'' if length is None else f' [{length}]'})"
            )
        f = self.feature[key]
        got = f.WhichOneof("kind")
        if got != kind:
            self.fail(key, f"expected {_KIND_NAMES[kind]}, got {_KIND_NAMES.get(got or '', 'no values')}")
        values = getattr(f, kind).value
        if length is not None and len(values) != length:
            self.fail(key, f"expected {length} values, got {len(values)}")
        return list(values)

    def bytes_values(self, key: str, length: int | None = None) -> list[bytes]:
        """Feature ``key`` as a list of byte strings (exactly ``length`` of them when given)."""
        return self._values(key, "bytes_list", length)

    def floats(self, key: str, length: int | None = None) -> np.ndarray:
        """Feature ``key`` as a float64 array (of exactly ``length`` values when given); all finite."""
        arr = np.array(self._values(key, "float_list", length), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(arr))
        if len(bad):
            self.fail(key, f"expected finite numbers, got {arr[bad[0]]} at index {bad[0]}")
        return arr

    def ints(self, key: str, length: int | None = None) -> np.ndarray:
        """Feature ``key`` as an int64 array (of exactly ``length`` values when given)."""
        return np.array(self._values(key, "int64_list", length), dtype=np.int64)

    def flag(self, key: str, length: int | None = None) -> np.ndarray:
        """Feature ``key`` (int64s) as booleans: > 0 is true (padding may hold −1)."""
        return self.ints(key, length) > 0

    def steps(self, prefix: str, name: str, agents: int, kind: str) -> np.ndarray:
        """``{prefix}/{past,current,future}/{name}`` joined to an (agents, 91) array."""
        parts = []
        for period, n in _PERIODS:
            key = f"{prefix}/{period}/{name}"
            values = self.floats(key, agents * n) if kind == "float" else self.ints(key, agents * n)
            parts.append(values.reshape(agents, n))
        return np.concatenate(parts, axis=1)


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles [rad] wrapped to [-π, π)."""
    return np.asarray((angle + math.pi) % (2.0 * math.pi) - math.pi)


def _scenario_id(r: _Features) -> str:
    key = "scenario/id"
    (raw,) = r.bytes_values(key, 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        r.fail(key, f"expected UTF-8 text, got {raw[:40]!r}")
    if not text:
        r.fail(key, "expected a non-empty scenario id")
    return text


def _tracks(r: _Features, scenario: Scenario) -> None:
    """Add the tracks, ``sdc_track_index``, ``tracks_to_predict`` and ``objects_of_interest``."""
    ids = r.floats("state/id")
    agents = len(ids)
    if agents == 0:
        r.fail("state/id", "expected one value per agent slot (128 in WOMD), got none")
    types = r.floats("state/type", agents)
    is_sdc = r.flag("state/is_sdc", agents)
    predict = r.flag("state/tracks_to_predict", agents)
    interest = (
        r.flag("state/objects_of_interest", agents)
        if r.has("state/objects_of_interest")
        else np.zeros(agents, dtype=bool)
    )
    cols = {name: r.steps("state", name, agents, "float") for name in _STATE_FLOATS}
    height_keys = [f"state/{period}/height" for period, _ in _PERIODS]
    present = [k for k in height_keys if r.has(k)]
    if present and len(present) < len(height_keys):
        missing = next(k for k in height_keys if not r.has(k))
        r.fail(missing, f"missing while {present[0]!r} is present (expected all of past/current/future)")
    height = r.steps("state", "height", agents, "float") if present else np.zeros((agents, STEPS))
    valid = r.steps("state", "valid", agents, "int") > 0
    yaw = _wrap(cols["bbox_yaw"])

    sdc_index = -1
    for slot in range(agents):
        if not valid[slot].any():
            for key, flags in (("state/is_sdc", is_sdc), ("state/tracks_to_predict", predict)):
                if flags[slot]:
                    r.fail(key, f"agent slot {slot} is marked but has no valid step")
            continue
        track_id = ids[slot]
        if track_id < 0 or track_id != int(track_id) or track_id > _INT32[1]:
            r.fail(
                "state/id", f"agent slot {slot} has valid steps, so expected a track id ≥ 0, got {track_id}"
            )
        code = types[slot]
        if code != int(code) or int(code) not in _OBJECT_TYPES:
            r.fail("state/type", f"agent slot {slot}: expected a type code −1…4, got {code}")
        index = len(scenario.tracks)
        track = scenario.tracks.add(id=int(track_id), object_type=_OBJECT_TYPES[int(code)])
        for t in range(STEPS):
            if not valid[slot, t]:
                track.states.add(valid=False)
                continue
            track.states.add(
                center_x=cols["x"][slot, t],
                center_y=cols["y"][slot, t],
                center_z=cols["z"][slot, t],
                length=cols["length"][slot, t],
                width=cols["width"][slot, t],
                height=height[slot, t],
                heading=yaw[slot, t],
                velocity_x=cols["velocity_x"][slot, t],
                velocity_y=cols["velocity_y"][slot, t],
                valid=True,
            )
        if is_sdc[slot]:
            if sdc_index >= 0:
                r.fail("state/is_sdc", "expected exactly one self-driving car, got two or more")
            sdc_index = index
        if predict[slot]:
            scenario.tracks_to_predict.append(RequiredPrediction(track_index=index))
        if interest[slot]:
            scenario.objects_of_interest.append(int(track_id))
    if sdc_index < 0:
        r.fail("state/is_sdc", "expected exactly one self-driving car (a slot with value 1), got none")
    scenario.sdc_track_index = sdc_index


def _map_features(r: _Features, scenario: Scenario) -> None:
    """Add one map feature per road-graph id among the valid samples (module docstring)."""
    valid = r.flag("roadgraph_samples/valid")
    n = len(valid)
    xyz = r.floats("roadgraph_samples/xyz", 3 * n).reshape(n, 3)
    r.floats("roadgraph_samples/dir", 3 * n)
    ids = r.ints("roadgraph_samples/id", n)
    codes = r.ints("roadgraph_samples/type", n)
    rows = np.flatnonzero(valid)
    groups: dict[int, list[int]] = {}
    for row in rows:
        groups.setdefault(int(ids[row]), []).append(int(row))
    for feature_id, members in groups.items():
        code = int(codes[members[0]])
        other = next((m for m in members if codes[m] != code), None)
        if other is not None:
            r.fail(
                "roadgraph_samples/type",
                f"road-graph id {feature_id} has type {code} at sample {members[0]} but {codes[other]}"
                f" at sample {other} (expected one type per id)",
            )
        if code not in _ROAD_CODES:
            r.fail(
                "roadgraph_samples/type",
                f"sample {members[0]} (id {feature_id}): expected a road-graph type code 0–3 or 5–20,"
                f" got {code}",
            )
        kind, sub_type = _ROAD_CODES[code]
        points = [MapPoint(x=x, y=y, z=z) for x, y, z in xyz[members].tolist()]
        feature = MapFeature(id=feature_id)
        if kind == "lane":
            feature.lane.CopyFrom(LaneCenter(type=sub_type, polyline=points))  # type: ignore[arg-type]
        elif kind == "road_line":
            feature.road_line.CopyFrom(RoadLine(type=sub_type, polyline=points))  # type: ignore[arg-type]
        elif kind == "road_edge":
            feature.road_edge.CopyFrom(RoadEdge(type=sub_type, polyline=points))  # type: ignore[arg-type]
        elif kind == "stop_sign":
            feature.stop_sign.CopyFrom(StopSign(position=points[0]))
        elif kind == "crosswalk":
            feature.crosswalk.CopyFrom(Crosswalk(polygon=points))
        elif kind == "speed_bump":
            feature.speed_bump.CopyFrom(SpeedBump(polygon=points))
        else:
            feature.driveway.CopyFrom(Driveway(polygon=points))
        scenario.map_features.append(feature)


def _signals(r: _Features, scenario: Scenario) -> None:
    """Fill one ``dynamic_map_states`` entry per step from ``traffic_light_state/…`` when present."""
    keys = [
        f"traffic_light_state/{period}/{name}"
        for period, _ in _PERIODS
        for name in (*_SIGNAL_INTS, *_SIGNAL_FLOATS)
    ]
    present = [k for k in keys if r.has(k)]
    if not present:
        return
    if len(present) < len(keys):
        missing = next(k for k in keys if not r.has(k))
        r.fail(missing, f"missing while {present[0]!r} is present (expected all traffic_light_state keys)")
    key = "traffic_light_state/current/state"
    signals = len(r.ints(key))
    if signals == 0:
        r.fail(key, "expected one value per signal slot (16 in WOMD), got none")

    def by_step(name: str, kind: str) -> np.ndarray:
        """``traffic_light_state/{past,current,future}/{name}`` joined to a (91, signals) array."""
        parts = []
        for period, n in _PERIODS:
            k = f"traffic_light_state/{period}/{name}"
            values = r.floats(k, n * signals) if kind == "float" else r.ints(k, n * signals)
            parts.append(values.reshape(n, signals))
        return np.concatenate(parts, axis=0)

    state, valid, lane = by_step("state", "int"), by_step("valid", "int") > 0, by_step("id", "int")
    x, y, z = by_step("x", "float"), by_step("y", "float"), by_step("z", "float")
    for t in range(STEPS):
        entry = scenario.dynamic_map_states.add()
        for k in np.flatnonzero(valid[t]):
            code = int(state[t, k])
            if not 0 <= code <= _SIGNAL_STATE_MAX:
                period, step = _period_step(t)
                r.fail(
                    f"traffic_light_state/{period}/state",
                    f"step {step}, signal {k}: expected a state code 0–8, got {code}",
                )
            entry.lane_states.add(
                lane=int(lane[t, k]),
                state=code,  # type: ignore[arg-type]
                stop_point=MapPoint(x=x[t, k], y=y[t, k], z=z[t, k]),
            )


def _period_step(t: int) -> tuple[str, int]:
    """Step ``t`` of the 91 as (``past`` / ``current`` / ``future``, index within that period)."""
    if t < PAST_STEPS:
        return "past", t
    if t == PAST_STEPS:
        return "current", 0
    return "future", t - PAST_STEPS - 1


def parse_example(data: bytes, where: str) -> Example:
    """Parse one serialized ``tf.train.Example``; ``where`` (file, record index, offset) prefixes any error.

    Raises:
        CorruptRecordError: if ``data`` is not an Example protobuf, or parses as one with no features
            (a scenario-format record parses as an empty Example: its fields are all unknown here).
    """
    example = Example()
    try:
        example.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptRecordError(f"{where}: not a tf.train.Example protobuf: {exc}") from exc
    if not example.features.feature:
        raise CorruptRecordError(
            f"{where}: not a tf.train.Example protobuf: it has no features (field 1); is this a"
            " scenario-format WOMD file rather than a tf_example-format one?"
        )
    return example


def is_tf_example(data: bytes) -> bool:
    """Whether ``data`` is a serialized ``tf.train.Example`` of the WOMD tf_example flavour.

    True when it parses as an Example that holds a ``state/id`` or a ``roadgraph_samples/xyz``
    feature. A serialized ``Scenario`` is never one: its field 1 (``timestamps_seconds``) has the
    wrong wire type for ``Example.features``, so it parses as an Example with no features.
    """
    example = Example()
    try:
        example.ParseFromString(data)
    except DecodeError:
        return False
    features = example.features.feature
    return "state/id" in features or "roadgraph_samples/xyz" in features


def example_to_scenario(data: bytes, where: str, *, infer_links: bool = True) -> Scenario:
    """Build a :class:`Scenario` from one serialized WOMD ``tf.train.Example`` (see the module docstring).

    Args:
        data: The record's payload.
        where: Where it came from (file, record index, byte offset), named in every error message.
        infer_links: Infer lane entry/exit connectivity from touching lane ends (see
            :func:`~scenefactory.scenes.womd.gpudrive_json.infer_lane_links`); this flavour has none.

    Raises:
        CorruptRecordError: if ``data`` is not an Example (see :func:`parse_example`).
        SceneFormatError: on a missing feature key, a wrong value kind or count, or a bad value; the
            message names ``where``, the key and what was expected.
    """
    r = _Features(parse_example(data, where), where)
    scenario = Scenario(scenario_id=_scenario_id(r), current_time_index=CURRENT_TIME_INDEX)
    scenario.timestamps_seconds.extend(t * STEP_S for t in range(STEPS))
    _tracks(r, scenario)
    _map_features(r, scenario)
    _signals(r, scenario)
    if infer_links:
        infer_lane_links(scenario)
    return scenario


def iter_example_scenarios(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, Scenario]]:
    """Yield ``(record_index, byte_offset, scenario)`` for every record of a WOMD tf_example shard.

    Streams: one record is read, CRC-checked and converted at a time (see ``tfrecord.iter_records``).

    Raises:
        CorruptRecordError: on a framing or CRC fault, or a record that is not an Example.
        SceneFormatError: on a record whose features do not match the layout (module docstring).
        Both name the file, the record index and its byte offset.
    """
    path = Path(path)
    for record in iter_records(path):
        where = f"{path}: record {record.index} at byte offset {record.offset}"
        yield record.index, record.offset, example_to_scenario(record.data, where)


def parse_womd_record(data: bytes, where: str) -> Scenario:
    """One TFRecord record of either WOMD flavour as a :class:`Scenario`, judged by the record itself.

    A WOMD ``tf.train.Example`` (see :func:`is_tf_example`) goes through :func:`example_to_scenario`;
    anything else must be a serialized ``Scenario`` (:func:`~scenefactory.scenes.womd.reader.parse_scenario`).
    Judging each record alone means a bad first record cannot mislead the reading of the rest.

    Raises:
        CorruptRecordError: for an empty record or one that is neither flavour.
        SceneFormatError: for an Example whose features do not match the layout (module docstring).
        Both name ``where`` (file, record index, byte offset).
    """
    if not data:
        raise CorruptRecordError(
            f"{where}: empty record (0 data bytes; expected a WOMD Scenario or tf.Example)"
        )
    if is_tf_example(data):
        return example_to_scenario(data, where)
    return parse_scenario(data, where)


def tfrecord_flavour(path: str | os.PathLike[str]) -> Literal["scenario", "tf_example"]:
    """Which WOMD flavour the TFRecord file at ``path`` holds, judged by its first record.

    ``"tf_example"`` when the first record is a WOMD ``tf.train.Example`` (see :func:`is_tf_example`),
    else ``"scenario"`` (also for an empty file, which then yields nothing either way). Only the first
    record is read. A shard holds one flavour: a later record of the other flavour fails to parse
    with an error naming its file, index and offset.

    Raises:
        CorruptRecordError: if the first record is truncated or fails its CRC checks.
        UserError: if the file cannot be opened.
    """
    records = iter_records(path)
    try:
        first = next(records, None)
    finally:
        if isinstance(records, Generator):  # release the open file now, not at garbage collection
            records.close()
    return "tf_example" if first is not None and is_tf_example(first.data) else "scenario"


def iter_womd_scenarios(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, Scenario]]:
    """Yield ``(record_index, byte_offset, scenario)`` for a WOMD TFRecord shard of either flavour.

    Dispatches on :func:`tfrecord_flavour` (when the generator is first advanced) to
    :func:`~scenefactory.scenes.womd.reader.iter_scenarios` or :func:`iter_example_scenarios`.

    Raises:
        CorruptRecordError, SceneFormatError: as the reader of the detected flavour.
    """
    if tfrecord_flavour(path) == "tf_example":
        yield from iter_example_scenarios(path)
    else:
        yield from iter_scenarios(path)
