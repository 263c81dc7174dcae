"""Read the GPUDrive / Nocturne pre-converted JSON form of WOMD scenarios into our ``Scenario`` proto.

Users of GPUDrive (and of Nocturne before it) often hold WOMD as one JSON file per scenario, written
by GPUDrive's ``process_waymo_files.py``. This module turns such a file back into our own
:class:`~scenefactory.scenes.womd.scenario_pb2.Scenario` message, so that it goes through the same
:func:`~scenefactory.scenes.womd.convert.scenario_to_scene` as the TFRecord shards.

The layout read (every field below is required; others, e.g. ``name``, ``goalPosition`` and
``mark_as_expert``, are ignored):

- top level: ``scenario_id`` (non-empty string), ``objects[]``, ``roads[]``, ``tl_states{}``,
  ``metadata{sdc_track_index, objects_of_interest[], tracks_to_predict[{track_index, difficulty}]}``.
- ``objects[i]``: ``position[91]{x,y,z}``, ``heading[91]`` (radians), ``velocity[91]{x,y}``,
  ``valid[91]`` (booleans), ``width``, ``length``, ``height`` (metres, one per object), ``type``
  (``'vehicle'``, ``'pedestrian'``, ``'cyclist'``; GPUDrive also writes ``'unset'`` and
  ``'other'``), ``id`` (WOMD track id). Steps with ``valid`` false carry the sentinel −10000.0.
- ``roads[j]``: ``geometry[]{x,y,z}``, ``type`` (``'lane'``, ``'road_line'``, ``'road_edge'``,
  ``'stop_sign'``, ``'crosswalk'``, ``'speed_bump'``, ``'driveway'``), ``map_element_id`` (the
  tf_example road-graph type code, which must agree with ``type``), ``id`` (unique).
- ``tl_states``: ``{lane id: {state[], x[], y[], z[], time_index[]}}`` (equal-length lists; state
  names ``'unknown'``, ``'arrow_stop'``, …, ``'flashing_caution'``; ``x, y, z`` the stop point;
  ``time_index`` the step 0–90). GPUDrive's ``process_waymo_files.py`` writes one entry per lane
  named in the scenario's ``dynamic_map_states`` (JSON turns the lane ids into string keys), ``{}``
  for a scenario without signals.

What the resulting ``Scenario`` holds:

- 91 ``timestamps_seconds`` 0.0, 0.1, …, 9.0 (the JSON form drops timestamps; WOMD is 10 Hz) and
  ``current_time_index`` 10.
- One track per object, one state per step. Valid steps carry the position, heading (wrapped to
  [-π, π)), velocity and the object's size; invalid steps are ``valid = False`` with every other
  field left at zero (the −10000.0 sentinel is not copied).
- One map feature per road: lanes (codes 0–3 → ``LaneCenter.type`` 0–3, no speed limit, no
  neighbours or boundaries — the JSON form has none, so the converter infers widths from
  neighbouring lanes or its default), road lines (5 → 0, 6–13 → 1–8), road edges (14 → unknown,
  15 → boundary, 16 → median), stop signs (the single geometry point is the position; no controlled
  lanes), crosswalks, speed bumps and driveways (geometry = polygon).
- **Lane connectivity is inferred** (unless ``infer_lane_links=False``): lane A exits into lane B
  (and B gets A as an entry) when A's last point lies within :data:`LANE_LINK_TOLERANCE_M` (3-D
  distance, so lanes on different levels do not link) of B's first point and A's last segment and
  B's first segment point less than 90° apart (so opposite-direction lanes that touch do not link).
- One ``dynamic_map_states`` entry per step, holding the traffic-signal states of ``tl_states``
  (lane = the key, state, stop point); the converter turns them into the scene's ``SignalLog``.
- ``sdc_track_index``, ``objects_of_interest`` and ``tracks_to_predict`` from ``metadata``. GPUDrive
  writes WOMD's own track indices; it drops vehicles and cyclists that are never valid, which would
  shift them, but WOMD tracks always have a valid step.
- **No agent selection here.** Every object becomes a track, whatever its type or validity; which
  ones a scene controls and which it replays (and why) is decided for all three input flavours by
  :func:`~scenefactory.scenes.womd.convert.select_agents` (GPUDrive's ``mark_as_expert`` is not
  used: the same rule applies to every source).

Every problem raises :class:`~scenefactory.errors.SceneFormatError` naming the source file, the
JSON field path (e.g. ``objects[3].position[17].x``) and what was expected.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from scenefactory.errors import SceneFormatError
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
    TrafficSignalLaneState,
)

STEPS = 91
"""Steps per scenario (10 Hz, 9.1 s)."""
CURRENT_TIME_INDEX = 10
"""Index of the current step (WOMD's)."""
STEP_S = 0.1
"""Seconds between steps."""
INVALID_SENTINEL = -10000.0
"""Value GPUDrive writes at steps where an object is not valid."""
LANE_LINK_TOLERANCE_M = 0.5
"""Largest gap [m] between one lane's last point and the next lane's first point to link them."""

_LINK_CHUNK = 512

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

_OBJECT_TYPES = {
    "unset": Track.TYPE_UNSET,
    "vehicle": Track.TYPE_VEHICLE,
    "pedestrian": Track.TYPE_PEDESTRIAN,
    "cyclist": Track.TYPE_CYCLIST,
    "other": Track.TYPE_OTHER,
}

# road type → {tf_example road-graph code: our enum value for that feature's ``type``}
_ROAD_CODES: dict[str, dict[int, int]] = {
    "lane": {0: 0, 1: 1, 2: 2, 3: 3},
    "road_line": {5: 0, **{code: code - 5 for code in range(6, 14)}},
    "road_edge": {14: 0, 15: 1, 16: 2},
    "stop_sign": {17: 0},
    "crosswalk": {18: 0},
    "speed_bump": {19: 0},
    "driveway": {20: 0},
}

_SIGNAL_STATES = {
    "unknown": TrafficSignalLaneState.LANE_STATE_UNKNOWN,
    "arrow_stop": TrafficSignalLaneState.LANE_STATE_ARROW_STOP,
    "arrow_caution": TrafficSignalLaneState.LANE_STATE_ARROW_CAUTION,
    "arrow_go": TrafficSignalLaneState.LANE_STATE_ARROW_GO,
    "stop": TrafficSignalLaneState.LANE_STATE_STOP,
    "caution": TrafficSignalLaneState.LANE_STATE_CAUTION,
    "go": TrafficSignalLaneState.LANE_STATE_GO,
    "flashing_stop": TrafficSignalLaneState.LANE_STATE_FLASHING_STOP,
    "flashing_caution": TrafficSignalLaneState.LANE_STATE_FLASHING_CAUTION,
}


class _Reader:
    """Typed access to JSON values that raises :class:`SceneFormatError` naming file and field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, what: str) -> NoReturn:
        """Raise the error for field ``path`` (``what``: what was expected / wrong)."""
        where = f"{self.source}: {path}" if path else self.source
        raise SceneFormatError(f"{where}: {what}")

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        """``value`` as a JSON object."""
        if not isinstance(value, dict):
            self.fail(path, f"expected a JSON object, got {_describe(value)}")
        return value

    def get(self, parent: dict[str, Any], key: str, path: str) -> Any:
        """``parent[key]``; a missing key is an error."""
        if key not in parent:
            self.fail(_join(path, key), "missing (required field)")
        return parent[key]

    def array(self, value: Any, path: str, length: int | None = None) -> list[Any]:
        """``value`` as a JSON array (of exactly ``length`` items when given)."""
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_describe(value)}")
        if length is not None and len(value) != length:
            self.fail(path, f"expected {length} entries (one per step), got {len(value)}")
        return value

    def number(self, value: Any, path: str) -> float:
        """``value`` as a finite number (booleans are not numbers)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            self.fail(path, f"expected a finite number, got {value}")
        return float(value)

    def integer(self, value: Any, path: str, lo: int, hi: int) -> int:
        """``value`` as an integer in [lo, hi]."""
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_describe(value)}")
        if not lo <= value <= hi:
            self.fail(path, f"expected an integer in [{lo}, {hi}], got {value}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        """``value`` as a JSON boolean."""
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_describe(value)}")
        return value

    def string(self, value: Any, path: str) -> str:
        """``value`` as a string."""
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_describe(value)}")
        return value

    def point(self, value: Any, path: str, keys: str = "xyz") -> tuple[float, ...]:
        """A ``{x, y[, z]}`` object as a tuple of floats in ``keys`` order."""
        p = self.obj(value, path)
        return tuple(self.number(self.get(p, k, path), f"{path}.{k}") for k in keys)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    """A short description of a JSON value for error messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _wrap(angle: float) -> float:
    """Angle [rad] wrapped to [-π, π)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def _track(r: _Reader, value: Any, path: str) -> Track:
    o = r.obj(value, path)
    type_name = r.string(r.get(o, "type", path), f"{path}.type")
    if type_name not in _OBJECT_TYPES:
        r.fail(f"{path}.type", f"expected one of {', '.join(map(repr, _OBJECT_TYPES))}, got {type_name!r}")
    track = Track(
        id=r.integer(r.get(o, "id", path), f"{path}.id", *_INT32),
        object_type=_OBJECT_TYPES[type_name],
    )
    size = {k: r.number(r.get(o, k, path), f"{path}.{k}") for k in ("length", "width", "height")}
    positions = r.array(r.get(o, "position", path), f"{path}.position", STEPS)
    headings = r.array(r.get(o, "heading", path), f"{path}.heading", STEPS)
    velocities = r.array(r.get(o, "velocity", path), f"{path}.velocity", STEPS)
    valid = r.array(r.get(o, "valid", path), f"{path}.valid", STEPS)
    for t in range(STEPS):
        is_valid = r.boolean(valid[t], f"{path}.valid[{t}]")
        x, y, z = r.point(positions[t], f"{path}.position[{t}]")
        vx, vy = r.point(velocities[t], f"{path}.velocity[{t}]", "xy")
        heading = r.number(headings[t], f"{path}.heading[{t}]")
        if not is_valid:
            track.states.add(valid=False)
            continue
        for name, v in (("position", (x, y, z)), ("velocity", (vx, vy)), ("heading", (heading,))):
            if INVALID_SENTINEL in v:
                r.fail(
                    f"{path}.{name}[{t}]",
                    f"holds the invalid-step sentinel {INVALID_SENTINEL} but valid[{t}] is true",
                )
        if abs(heading) > 2.0 * math.pi + 1e-6:
            r.fail(
                f"{path}.heading[{t}]",
                f"expected radians (within ±2π), got {heading}: degrees, as older Nocturne files hold?",
            )
        track.states.add(
            center_x=x,
            center_y=y,
            center_z=z,
            heading=_wrap(heading),
            velocity_x=vx,
            velocity_y=vy,
            valid=True,
            **size,
        )
    return track


def _map_feature(r: _Reader, value: Any, path: str) -> MapFeature:
    o = r.obj(value, path)
    kind = r.string(r.get(o, "type", path), f"{path}.type")
    if kind not in _ROAD_CODES:
        r.fail(f"{path}.type", f"expected one of {', '.join(map(repr, _ROAD_CODES))}, got {kind!r}")
    code = r.integer(r.get(o, "map_element_id", path), f"{path}.map_element_id", *_INT32)
    if code not in _ROAD_CODES[kind]:
        codes = ", ".join(map(str, _ROAD_CODES[kind]))
        r.fail(f"{path}.map_element_id", f"expected a road-graph code for a {kind} ({codes}), got {code}")
    sub_type = _ROAD_CODES[kind][code]
    feature_id = r.integer(r.get(o, "id", path), f"{path}.id", *_INT64)
    geometry = r.array(r.get(o, "geometry", path), f"{path}.geometry")
    points = [
        MapPoint(x=x, y=y, z=z)
        for x, y, z in (r.point(p, f"{path}.geometry[{k}]") for k, p in enumerate(geometry))
    ]
    feature = MapFeature(id=feature_id)
    if kind == "lane":
        feature.lane.CopyFrom(LaneCenter(type=sub_type, polyline=points))  # type: ignore[arg-type]
    elif kind == "road_line":
        feature.road_line.CopyFrom(RoadLine(type=sub_type, polyline=points))  # type: ignore[arg-type]
    elif kind == "road_edge":
        feature.road_edge.CopyFrom(RoadEdge(type=sub_type, polyline=points))  # type: ignore[arg-type]
    elif kind == "stop_sign":
        if len(points) != 1:
            r.fail(f"{path}.geometry", f"expected exactly 1 point (the sign's position), got {len(points)}")
        feature.stop_sign.CopyFrom(StopSign(position=points[0]))
    elif kind == "crosswalk":
        feature.crosswalk.CopyFrom(Crosswalk(polygon=points))
    elif kind == "speed_bump":
        feature.speed_bump.CopyFrom(SpeedBump(polygon=points))
    else:
        feature.driveway.CopyFrom(Driveway(polygon=points))
    return feature


def _signals(r: _Reader, value: Any, scenario: Scenario) -> None:
    """Fill one ``dynamic_map_states`` entry per step from ``tl_states``."""
    states = [scenario.dynamic_map_states.add() for _ in range(STEPS)]
    for key, entry in r.obj(value, "tl_states").items():
        path = f"tl_states[{key!r}]"
        if not key.lstrip("-").isdigit():
            r.fail(path, "expected the key to be a lane id (an integer)")
        lane = r.integer(int(key), path, *_INT64)
        r.obj(entry, path)
        cols = {
            k: r.array(r.get(entry, k, path), f"{path}.{k}") for k in ("state", "x", "y", "z", "time_index")
        }
        n = len(cols["state"])
        for k, col in cols.items():
            if len(col) != n:
                r.fail(f"{path}.{k}", f"expected {n} entries (as many as {path}.state), got {len(col)}")
        for i in range(n):
            name = r.string(cols["state"][i], f"{path}.state[{i}]")
            if name not in _SIGNAL_STATES:
                r.fail(
                    f"{path}.state[{i}]",
                    f"expected one of {', '.join(map(repr, _SIGNAL_STATES))}, got {name!r}",
                )
            t = r.integer(cols["time_index"][i], f"{path}.time_index[{i}]", 0, STEPS - 1)
            x, y, z = (r.number(cols[c][i], f"{path}.{c}[{i}]") for c in "xyz")
            states[t].lane_states.add(
                lane=lane, state=_SIGNAL_STATES[name], stop_point=MapPoint(x=x, y=y, z=z)
            )


def _direction(poly: np.ndarray, last: bool) -> np.ndarray | None:
    """Unit direction of the first (or last) non-degenerate segment of ``poly`` (n, 3); None if none."""
    seg = np.diff(poly, axis=0)
    norms = np.linalg.norm(seg, axis=1)
    idx = np.flatnonzero(norms > 1e-6)
    if len(idx) == 0:
        return None
    k = idx[-1] if last else idx[0]
    return np.asarray(seg[k] / norms[k])


def infer_lane_links(scenario: Scenario, tolerance_m: float = LANE_LINK_TOLERANCE_M) -> int:
    """Add ``exit_lanes`` / ``entry_lanes`` between lanes whose end and start points meet; returns the count.

    Lane A exits into lane B when A's last point is within ``tolerance_m`` (3-D) of B's first point and
    A's last segment and B's first segment point less than 90° apart. Lanes with fewer than 2 points
    or no non-degenerate segment are not linked. Existing links are kept; none is added twice.
    """
    lanes = [f for f in scenario.map_features if f.HasField("lane") and len(f.lane.polyline) >= 2]
    polys = [np.array([[p.x, p.y, p.z] for p in f.lane.polyline]) for f in lanes]
    dirs = [(_direction(p, last=True), _direction(p, last=False)) for p in polys]
    ok = [i for i, (end_dir, _) in enumerate(dirs) if end_dir is not None]
    end_dirs = np.array([dirs[i][0] for i in ok])  # a lane with one non-degenerate segment has both
    start_dirs = np.array([dirs[i][1] for i in ok])
    if len(ok) < 2:
        return 0
    ends = np.array([polys[i][-1] for i in ok])
    starts = np.array([polys[i][0] for i in ok])
    pairs: list[tuple[int, int]] = []
    for a0 in range(0, len(ok), _LINK_CHUNK):  # row chunks keep memory at _LINK_CHUNK × lanes
        d2 = sum((ends[a0 : a0 + _LINK_CHUNK, None, k] - starts[None, :, k]) ** 2 for k in range(3))
        pairs.extend((a0 + int(a), int(b)) for a, b in zip(*np.nonzero(d2 <= tolerance_m**2), strict=True))
    added = 0
    for a, b in pairs:
        i, j = ok[a], ok[b]
        if i == j or float(np.dot(end_dirs[a], start_dirs[b])) <= 0.0:
            continue
        src, dst = lanes[i], lanes[j]
        if dst.id not in src.lane.exit_lanes:
            src.lane.exit_lanes.append(dst.id)
            added += 1
        if src.id not in dst.lane.entry_lanes:
            dst.lane.entry_lanes.append(src.id)
    return added


def json_to_scenario(data: Any, source: str, *, infer_links: bool = True) -> Scenario:
    """Build a :class:`Scenario` from one parsed GPUDrive/Nocturne JSON scenario (see the module docstring).

    Args:
        data: The parsed JSON document (a dict, as ``json.load`` returns it).
        source: Where it came from (a file name), named in every error message.
        infer_links: Infer lane entry/exit connectivity from touching lane ends (see
            :func:`infer_lane_links`); the JSON form carries none.

    Raises:
        SceneFormatError: on any missing, mistyped or inconsistent field; the message names
            ``source``, the JSON field path and what was expected.
    """
    r = _Reader(source)
    top = r.obj(data, "")
    scenario_id = r.string(r.get(top, "scenario_id", ""), "scenario_id")
    if not scenario_id:
        r.fail("scenario_id", "expected a non-empty string")
    scenario = Scenario(scenario_id=scenario_id, current_time_index=CURRENT_TIME_INDEX)
    scenario.timestamps_seconds.extend(t * STEP_S for t in range(STEPS))

    objects = r.array(r.get(top, "objects", ""), "objects")
    track_ids: set[int] = set()
    for i, value in enumerate(objects):
        track = _track(r, value, f"objects[{i}]")
        if track.id in track_ids:
            r.fail(f"objects[{i}].id", f"expected a unique track id, got {track.id} again")
        track_ids.add(track.id)
        scenario.tracks.append(track)

    roads = r.array(r.get(top, "roads", ""), "roads")
    feature_ids: set[int] = set()
    for j, value in enumerate(roads):
        feature = _map_feature(r, value, f"roads[{j}]")
        if feature.id in feature_ids:
            r.fail(f"roads[{j}].id", f"expected a unique map feature id, got {feature.id} again")
        feature_ids.add(feature.id)
        scenario.map_features.append(feature)

    _signals(r, r.get(top, "tl_states", ""), scenario)

    meta = r.obj(r.get(top, "metadata", ""), "metadata")
    n = len(objects)
    if n == 0:
        r.fail("objects", "expected at least one object (metadata.sdc_track_index must index one)")
    scenario.sdc_track_index = r.integer(
        r.get(meta, "sdc_track_index", "metadata"), "metadata.sdc_track_index", 0, n - 1
    )
    ooi = r.array(r.get(meta, "objects_of_interest", "metadata"), "metadata.objects_of_interest")
    scenario.objects_of_interest.extend(
        r.integer(v, f"metadata.objects_of_interest[{k}]", *_INT32) for k, v in enumerate(ooi)
    )
    ttp = r.array(r.get(meta, "tracks_to_predict", "metadata"), "metadata.tracks_to_predict")
    for k, value in enumerate(ttp):
        path = f"metadata.tracks_to_predict[{k}]"
        entry = r.obj(value, path)
        scenario.tracks_to_predict.append(
            RequiredPrediction(
                track_index=r.integer(r.get(entry, "track_index", path), f"{path}.track_index", 0, n - 1),
                difficulty=r.integer(r.get(entry, "difficulty", path), f"{path}.difficulty", 0, 2),  # type: ignore[arg-type]
            )
        )
    if infer_links:
        infer_lane_links(scenario)
    return scenario


def load_gpudrive_json(path: str | os.PathLike[str], *, infer_links: bool = True) -> Scenario:
    """Read one GPUDrive/Nocturne JSON scenario file into a :class:`Scenario`.

    Raises:
        SceneFormatError: if the file cannot be read, is not UTF-8 JSON (the message gives line and
            column) or does not hold a scenario in the expected layout (see :func:`json_to_scenario`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SceneFormatError(f"{path}: not a UTF-8 text file (expected GPUDrive JSON): {exc}") from exc
    except OSError as exc:
        raise SceneFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SceneFormatError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            " (expected a GPUDrive/Nocturne JSON scenario)"
        ) from exc
    return json_to_scenario(data, str(path), infer_links=infer_links)


def iter_json_scenarios(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, Scenario]]:
    """Yield ``(0, 0, scenario)`` for a JSON scenario file: the loop shape of ``iter_scenarios``.

    A JSON file holds one scenario, so the record index and byte offset are always 0.

    Raises:
        SceneFormatError: as :func:`load_gpudrive_json`.
    """
    yield 0, 0, load_gpudrive_json(path)
