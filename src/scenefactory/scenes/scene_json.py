"""The versioned JSON form of a :class:`~scenefactory.scenes.scene.Scene`: lossless save and load.

Floats are written with Python's shortest round-trip repr and re-padded on load; every problem in
a file is reported with the file and the field path (``SceneFormatError``). Every number must be
finite and plausible (the bounds of :mod:`scenefactory.scenes.plausibility`, named in the error),
and a scene must hold at least one lane and one controlled agent. ``save_scene`` applies the same
checks before it writes, so it never writes a file that ``load_scene`` refuses.

Optional top-level sections, written when the scene has them: ``log`` (the controlled agents'
logged trajectories), ``replay`` (other objects played back) and ``signals`` (``dt_s``, ``loop``,
``lights``: ``[{stop_xy, lane, state[T]}]`` with WOMD state codes 0-8 and lane -1 when unknown,
``stop_signs``: ``[{stop_xy, lane}]``); files without them load as before.

The format is strict: a key this version does not know, anywhere in the document, is an error
naming its path (a newer or damaged file, or a typo in an optional field, is never read as
something else), and every type code must be in its enum: road lines :class:`RoadLineType`, road
edges :class:`RoadEdgeType`, replayed objects :class:`ObjectKind`, signal states
:class:`~scenefactory.scenes.scene.SignalState`. Only ``params`` is free-form: the generator's (or
converter's) own record, any JSON object.
"""

from __future__ import annotations

import json
import math
import os
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.errors import SceneFormatError, warn
from scenefactory.io import atomic_write_text
from scenefactory.scenes.plausibility import (
    ANGLE,
    COORDINATE,
    FRICTION,
    LANE_WIDTH,
    LENGTH,
    LOG_STEP,
    MAX_JSON_DEPTH,
    ROUTE_LENGTH,
    SPAWN_SPEED,
    SPEED,
    WATER_FILM,
    WIDTH,
    Bound,
)
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadGraphError, RoadLineType
from scenefactory.scenes.scene import AgentLog, ReplayLog, Scene, SignalLog, SignalState, make_scene
from scenefactory.scenes.scene_checks import (
    check_json_depth,
    check_scene,
    describe_warnings,
    scene_warnings,
    value_depth,
)

SCENE_FORMAT = "scenefactory.scene"
SCENE_FORMAT_VERSION = 1


class ObjectKind(IntEnum):
    """WOMD ``Track.ObjectType`` codes: the ``kind`` of a replayed object."""

    UNSET = 0
    VEHICLE = 1
    PEDESTRIAN = 2
    CYCLIST = 3
    OTHER = 4


KEYS: dict[str, frozenset[str]] = {
    "": frozenset(
        (
            "format",
            "version",
            "name",
            "generator",
            "seed",
            "params",
            "surface",
            "water_film_mm",
            "friction",
            "roadgraph",
            "agents",
            "log",
            "replay",
            "signals",
        )
    ),
    "roadgraph": frozenset(
        ("lanes", "road_lines", "road_edges", "crosswalks", "speed_bumps", "stop_signs", "driveways")
    ),
    "lane": frozenset(("xy", "width_m", "entry", "exit")),
    "polyline": frozenset(("type", "xy")),
    "agent": frozenset(
        ("spawn_pose", "spawn_speed_mps", "route_xy", "goal_xy", "goal_s_m", "length_m", "width_m")
    ),
    "log": frozenset(("dt_s", "agents")),
    "log_agent": frozenset(("xy", "yaw", "speed", "valid")),
    "replay": frozenset(("dt_s", "objects")),
    "replay_object": frozenset(("xy", "yaw", "vel_xy", "valid", "length_m", "width_m", "kind")),
    "signals": frozenset(("dt_s", "loop", "lights", "stop_signs")),
    "light": frozenset(("stop_xy", "lane", "state")),
    "stop_sign": frozenset(("stop_xy", "lane")),
}
"""The keys each object of format version 1 may hold (by kind of object); any other is an error."""


def _xy_list(arr: np.ndarray) -> list[list[float]]:
    return [[float(x), float(y)] for x, y in np.asarray(arr, dtype=np.float64)]


def scene_to_dict(scene: Scene) -> dict[str, Any]:
    """The versioned JSON-ready form of a scene (valid entries only; padding is implied)."""
    rg = scene.roadgraph
    lanes = []
    for i in range(rg.num_lanes):
        n = int(rg.lane_valid[i].sum())
        lanes.append(
            {
                "xy": _xy_list(rg.lane_xy[i, :n]),
                "width_m": [float(w) for w in rg.lane_width_m[i, :n]],
                "entry": rg.entries(i),
                "exit": rg.exits(i),
            }
        )
    agents = []
    for i in range(scene.max_agents):
        if not scene.agent_valid[i]:
            continue
        agents.append(
            {
                "spawn_pose": [float(v) for v in scene.spawn_pose[i]],
                "spawn_speed_mps": float(scene.spawn_speed_mps[i]),
                "route_xy": _xy_list(scene.route(i)),
                "goal_xy": [float(v) for v in scene.goal_xy[i]],
                "goal_s_m": float(scene.goal_s_m[i]),
                "length_m": float(scene.length_m[i]),
                "width_m": float(scene.width_m[i]),
            }
        )
    return {
        "format": SCENE_FORMAT,
        "version": SCENE_FORMAT_VERSION,
        "name": scene.name,
        "generator": scene.generator,
        "seed": int(scene.seed),
        "params": scene.params,
        "surface": scene.surface,
        "water_film_mm": float(scene.water_film_mm),
        "friction": float(scene.friction),
        "roadgraph": {
            "lanes": lanes,
            "road_lines": [
                {"type": int(t), "xy": _xy_list(p)} for t, p in zip(rg.line_type, rg.lines(), strict=True)
            ],
            "road_edges": [
                {"type": int(t), "xy": _xy_list(p)} for t, p in zip(rg.edge_type, rg.edges(), strict=True)
            ],
            "crosswalks": [_xy_list(p) for p in rg.crosswalks()],
            "speed_bumps": [_xy_list(p) for p in rg.speed_bumps()],
            "stop_signs": _xy_list(rg.stop_sign_xy),
            "driveways": [_xy_list(p) for p in rg.driveways()],
        },
        "agents": agents,
        **({"log": _log_to_dict(scene)} if scene.log is not None else {}),
        **({"replay": _replay_to_dict(scene.replay)} if scene.replay is not None else {}),
        **({"signals": _signals_to_dict(scene.signals)} if scene.signals is not None else {}),
    }


def _signals_to_dict(sig: SignalLog) -> dict[str, Any]:
    """The optional ``signals`` section: one entry per signal-controlled lane (stop point, lane index or
    -1, WOMD state code per step) and per stop-sign stop point."""
    return {
        "dt_s": float(sig.dt_s),
        "loop": bool(sig.loop),
        "lights": [
            {
                "stop_xy": [float(v) for v in sig.stop_xy[i]],
                "lane": int(sig.lane[i]),
                "state": [int(v) for v in sig.state[:, i]],
            }
            for i in range(sig.num_signals)
        ],
        "stop_signs": [
            {"stop_xy": [float(v) for v in xy], "lane": int(lane)}
            for xy, lane in zip(sig.sign_xy, sig.sign_lane, strict=True)
        ],
    }


def _signals_from_dict(r: _Reader, data: Any, num_lanes: int) -> SignalLog:
    r.known(data, "signals", "signals")
    dt = r.number(r.get(data, "dt_s", "signals"), "signals.dt_s", LOG_STEP)
    loop = r.get(data, "loop", "signals")
    if not isinstance(loop, bool):
        raise r.fail("signals.loop", "true or false", loop)
    cols: dict[str, list[Any]] = {"xy": [], "lane": [], "state": [], "sign_xy": [], "sign_lane": []}
    codes = f"state codes in [0, {int(max(SignalState))}] (WOMD TrafficSignalLaneState)"
    steps = None
    for key, prefix in (("lights", ""), ("stop_signs", "sign_")):
        items = r.get(data, key, "signals")
        if not isinstance(items, list):
            raise r.fail(f"signals.{key}", "a list", items)
        for i, item in enumerate(items):
            p = f"signals.{key}[{i}]"
            r.known(item, p, "light" if key == "lights" else "stop_sign")
            xy = r.get(item, "stop_xy", p)
            if not isinstance(xy, list) or len(xy) != 2:
                raise r.fail(f"{p}.stop_xy", "[x_m, y_m]", xy)
            cols[f"{prefix}xy"].append(
                [r.number(v, f"{p}.stop_xy[{j}]", COORDINATE) for j, v in enumerate(xy)]
            )
            lane = r.get(item, "lane", p)
            if isinstance(lane, bool) or not isinstance(lane, int) or not -1 <= lane < num_lanes:
                raise r.fail(f"{p}.lane", f"a lane index in [0, {num_lanes - 1}] or -1 (unknown)", lane)
            cols[f"{prefix}lane"].append(lane)
            if key == "stop_signs":
                continue
            state = r.ints(r.get(item, "state", p), f"{p}.state")
            steps = len(state) if steps is None else steps
            if len(state) != steps:
                raise r.fail(f"{p}.state", f"{steps} steps like the other lights", len(state))
            if any(not 0 <= v <= max(SignalState) for v in state):
                raise r.fail(f"{p}.state", codes, state)
            cols["state"].append(state)
    s, q = len(cols["lane"]), len(cols["sign_lane"])
    try:
        return SignalLog(
            stop_xy=np.array(cols["xy"], dtype=np.float64).reshape(s, 2),
            lane=np.array(cols["lane"], dtype=np.int64).reshape(s),
            state=np.array(cols["state"], dtype=np.int64).reshape(s, steps or 0).T.copy(),
            sign_xy=np.array(cols["sign_xy"], dtype=np.float64).reshape(q, 2),
            sign_lane=np.array(cols["sign_lane"], dtype=np.int64).reshape(q),
            dt_s=dt,
            loop=loop,
        )
    except SceneFormatError as exc:
        raise SceneFormatError(f"{r.source}: field 'signals': {exc}") from exc


def _replay_to_dict(rep: ReplayLog) -> dict[str, Any]:
    return {
        "dt_s": float(rep.dt_s),
        "objects": [
            {
                "xy": _xy_list(rep.xy[i]),
                "yaw": [float(v) for v in rep.yaw[i]],
                "vel_xy": _xy_list(rep.vel_xy[i]),
                "valid": [bool(v) for v in rep.valid[i]],
                "length_m": float(rep.length_m[i]),
                "width_m": float(rep.width_m[i]),
                "kind": int(rep.kind[i]),
            }
            for i in range(rep.num_objects)
        ],
    }


def _replay_from_dict(r: _Reader, data: Any) -> ReplayLog:
    r.known(data, "replay", "replay")
    dt = r.number(r.get(data, "dt_s", "replay"), "replay.dt_s", LOG_STEP)
    objs = r.get(data, "objects", "replay")
    if not isinstance(objs, list):
        raise r.fail("replay.objects", "a list of replayed objects", objs)
    cols: dict[str, list[Any]] = {k: [] for k in ("xy", "yaw", "vel", "valid", "length", "width", "kind")}
    steps = None
    for i, o in enumerate(objs):
        p = f"replay.objects[{i}]"
        r.known(o, p, "replay_object")
        xy = r.xy(r.get(o, "xy", p), f"{p}.xy")
        steps = len(xy) if steps is None else steps
        vel = r.xy(r.get(o, "vel_xy", p), f"{p}.vel_xy", bound=SPEED)
        yaw = r.get(o, "yaw", p)
        valid = r.get(o, "valid", p)
        if len(xy) != steps or len(vel) != steps or not isinstance(yaw, list) or len(yaw) != steps:
            raise r.fail(p, f"xy, vel_xy and yaw of {steps} steps like the other objects")
        if not isinstance(valid, list) or len(valid) != steps or not all(isinstance(v, bool) for v in valid):
            raise r.fail(f"{p}.valid", f"a list of {steps} booleans", valid)
        cols["xy"].append(xy)
        cols["vel"].append(vel)
        cols["yaw"].append([r.number(v, f"{p}.yaw[{j}]", ANGLE) for j, v in enumerate(yaw)])
        cols["valid"].append(valid)
        cols["length"].append(r.number(r.get(o, "length_m", p), f"{p}.length_m", LENGTH))
        cols["width"].append(r.number(r.get(o, "width_m", p), f"{p}.width_m", WIDTH))
        cols["kind"].append(r.code(r.get(o, "kind", p), f"{p}.kind", ObjectKind, "WOMD object type"))
    n, t = len(objs), steps or 0
    return ReplayLog(
        xy=np.array(cols["xy"], dtype=np.float64).reshape(n, t, 2),
        yaw=np.array(cols["yaw"], dtype=np.float64).reshape(n, t),
        vel_xy=np.array(cols["vel"], dtype=np.float64).reshape(n, t, 2),
        valid=np.array(cols["valid"], dtype=bool).reshape(n, t),
        length_m=np.array(cols["length"], dtype=np.float64),
        width_m=np.array(cols["width"], dtype=np.float64),
        kind=np.array(cols["kind"], dtype=np.int64),
        dt_s=dt,
    )


def _log_to_dict(scene: Scene) -> dict[str, Any]:
    log = scene.log
    assert log is not None
    rows = []
    for i in np.nonzero(scene.agent_valid)[0]:
        rows.append(
            {
                "xy": _xy_list(log.xy[i]),
                "yaw": [float(v) for v in log.yaw[i]],
                "speed": [float(v) for v in log.speed[i]],
                "valid": [bool(v) for v in log.valid[i]],
            }
        )
    return {"dt_s": float(log.dt_s), "agents": rows}


def _log_from_dict(r: _Reader, data: Any, num_agents: int) -> AgentLog:
    r.known(data, "log", "log")
    dt = r.number(r.get(data, "dt_s", "log"), "log.dt_s", LOG_STEP)
    rows = r.get(data, "agents", "log")
    if not isinstance(rows, list) or len(rows) != num_agents:
        raise r.fail("log.agents", f"a list of {num_agents} agent logs (one per agent)", rows)
    steps = None
    cols: dict[str, list[np.ndarray]] = {"xy": [], "yaw": [], "speed": [], "valid": []}
    for i, row in enumerate(rows):
        p = f"log.agents[{i}]"
        r.known(row, p, "log_agent")
        xy = r.xy(r.get(row, "xy", p), f"{p}.xy")
        steps = len(xy) if steps is None else steps
        if len(xy) != steps:
            raise r.fail(f"{p}.xy", f"{steps} points like the other agents' logs", len(xy))
        for key, bound in (("yaw", ANGLE), ("speed", SPEED)):
            vals = r.get(row, key, p)
            if not isinstance(vals, list) or len(vals) != steps:
                raise r.fail(f"{p}.{key}", f"a list of {steps} numbers", vals)
            cols[key].append(np.array([r.number(v, f"{p}.{key}[{j}]", bound) for j, v in enumerate(vals)]))
        valid = r.get(row, "valid", p)
        if not isinstance(valid, list) or len(valid) != steps or not all(isinstance(v, bool) for v in valid):
            raise r.fail(f"{p}.valid", f"a list of {steps} booleans", valid)
        cols["xy"].append(xy)
        cols["valid"].append(np.array(valid, dtype=bool))
    t = steps or 0
    return AgentLog(
        xy=np.array(cols["xy"]).reshape(num_agents, t, 2),
        yaw=np.array(cols["yaw"]).reshape(num_agents, t),
        speed=np.array(cols["speed"]).reshape(num_agents, t),
        valid=np.array(cols["valid"], dtype=bool).reshape(num_agents, t),
        dt_s=dt,
    )


class _Reader:
    """Field access with errors that name the file and the field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, got: Any = None) -> SceneFormatError:
        shown = (
            "" if got is None else f", got {json.dumps(got)[:80] if _jsonable(got) else type(got).__name__}"
        )
        return SceneFormatError(f"{self.source}: field '{path}': expected {expected}{shown}")

    def get(self, obj: Any, key: str, path: str) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(path, "an object", obj)
        if key not in obj:
            raise self.fail(f"{path}.{key}" if path else key, "to be present (missing)")
        return obj[key]

    def known(self, obj: Any, path: str, kind: str) -> None:
        """``obj`` is an object holding only the keys :data:`KEYS` lists for ``kind``."""
        if not isinstance(obj, dict):
            raise self.fail(path, "an object", obj)
        unknown = sorted(set(obj) - KEYS[kind], key=str)
        if unknown:
            key = str(unknown[0])
            key = key if key.isprintable() else json.dumps(key)[1:-1]  # one line: \n etc. escaped
            where = f"{path}.{key}" if path else key
            raise SceneFormatError(
                f"{self.source}: field '{where}': unknown to scene format version"
                f" {SCENE_FORMAT_VERSION} (a newer or damaged file, or a misspelt field);"
                f" expected only {', '.join(sorted(KEYS[kind]))}"
                f" at '{path or '<top level>'}'"
            )

    def code(self, value: Any, path: str, enum: type[IntEnum], what: str) -> int:
        """``value`` as a code of ``enum`` (an integer, not a bool)."""
        if isinstance(value, bool) or not isinstance(value, int) or value not in {int(m) for m in enum}:
            codes = ", ".join(f"{int(m)} {m.name}" for m in enum)
            raise self.fail(path, f"a {what} code ({codes})", value)
        return int(value)

    def number(self, value: Any, path: str, bound: Bound | None = None) -> float:
        """``value`` as a float: a finite number, inside ``bound`` when one is given."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(path, "a finite number" if bound is None else bound.describe(), value)
        if bound is not None and not bound.contains(value):
            raise self.fail(path, bound.describe(), value)
        return float(value)

    def xy(self, value: Any, path: str, min_points: int = 1, bound: Bound = COORDINATE) -> np.ndarray:
        """A list of [x, y] pairs as an (n, 2) array, each value inside ``bound``."""
        if not isinstance(value, list) or len(value) < min_points:
            raise self.fail(path, f"a list of at least {min_points} [x, y] points", value)
        out = np.zeros((len(value), 2), dtype=np.float64)
        for j, p in enumerate(value):
            if not isinstance(p, list) or len(p) != 2:
                raise self.fail(f"{path}[{j}]", "an [x, y] pair", p)
            out[j] = (
                self.number(p[0], f"{path}[{j}][0]", bound),
                self.number(p[1], f"{path}[{j}][1]", bound),
            )
        return out

    def ints(self, value: Any, path: str) -> list[int]:
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.fail(path, "a list of integers", value)
        return [int(v) for v in value]


_POSE = (COORDINATE, COORDINATE, ANGLE)  # spawn_pose = [x_m, y_m, yaw_rad]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def scene_from_dict(data: Any, source: str = "<scene>") -> Scene:
    """Parse the JSON form; every problem is reported with ``source`` and the field path."""
    r = _Reader(source)
    fmt = r.get(data, "format", "")
    if fmt != SCENE_FORMAT:
        raise r.fail("format", f"'{SCENE_FORMAT}'", fmt)
    version = r.get(data, "version", "")
    if version != SCENE_FORMAT_VERSION:
        raise r.fail("version", f"{SCENE_FORMAT_VERSION} (this build reads only that version)", version)
    r.known(data, "", "")
    rgd = r.get(data, "roadgraph", "")
    r.known(rgd, "roadgraph", "roadgraph")
    lanes_d = r.get(rgd, "lanes", "roadgraph")
    if not isinstance(lanes_d, list) or not lanes_d:
        raise r.fail("roadgraph.lanes", "a non-empty list of lanes", lanes_d)
    lanes: list[np.ndarray] = []
    widths: list[np.ndarray] = []
    entries: list[list[int]] = []
    exits: list[list[int]] = []
    for i, lane in enumerate(lanes_d):
        p = f"roadgraph.lanes[{i}]"
        r.known(lane, p, "lane")
        xy = r.xy(r.get(lane, "xy", p), f"{p}.xy", min_points=2)
        w = r.get(lane, "width_m", p)
        if not isinstance(w, list) or len(w) != len(xy):
            raise r.fail(f"{p}.width_m", f"a list of {len(xy)} widths (one per point)", w)
        widths.append(np.array([r.number(v, f"{p}.width_m[{j}]", LANE_WIDTH) for j, v in enumerate(w)]))
        lanes.append(xy)
        for key, dest in (("entry", entries), ("exit", exits)):
            idx = r.ints(r.get(lane, key, p), f"{p}.{key}")
            if any(j < 0 or j >= len(lanes_d) for j in idx):
                raise r.fail(f"{p}.{key}", f"lane indices in [0, {len(lanes_d) - 1}]", idx)
            dest.append(idx)
    polys: dict[str, tuple[list[np.ndarray], list[int]]] = {}
    for key, enum, what in (
        ("road_lines", RoadLineType, "WOMD road line type"),
        ("road_edges", RoadEdgeType, "WOMD road edge type"),
    ):
        items = r.get(rgd, key, "roadgraph")
        if not isinstance(items, list):
            raise r.fail(f"roadgraph.{key}", "a list", items)
        xs, ts = [], []
        for j, item in enumerate(items):
            p = f"roadgraph.{key}[{j}]"
            r.known(item, p, "polyline")
            ts.append(r.code(r.get(item, "type", p), f"{p}.type", enum, what))
            xs.append(r.xy(r.get(item, "xy", p), f"{p}.xy"))
        polys[key] = (xs, ts)
    try:
        roadgraph = RoadGraph.from_lists(
            lanes, widths, entries, exits, *polys["road_lines"], *polys["road_edges"]
        )
        marks = {}
        for key in ("crosswalks", "speed_bumps", "driveways"):  # optional: older files lack them
            items = rgd.get(key, [])
            if not isinstance(items, list):
                raise r.fail(f"roadgraph.{key}", "a list of polygons", items)
            marks[key] = [r.xy(p, f"roadgraph.{key}[{j}]") for j, p in enumerate(items)]
        signs = rgd.get("stop_signs", [])
        stop_xy = r.xy(signs, "roadgraph.stop_signs", min_points=0) if signs else np.zeros((0, 2))
        roadgraph = roadgraph.with_markings(marks["crosswalks"], marks["speed_bumps"], stop_xy)
        roadgraph = roadgraph.with_driveways(marks["driveways"])
    except RoadGraphError as exc:
        raise SceneFormatError(f"{source}: {exc}") from exc

    agents_d = r.get(data, "agents", "")
    if not isinstance(agents_d, list) or not agents_d:
        raise r.fail(
            "agents", "a non-empty list of controlled agents (the tools need one to drive)", agents_d
        )
    cols: dict[str, list[Any]] = {
        k: [] for k in ("pose", "speed", "route", "goal", "goal_s", "length", "width")
    }
    for i, a in enumerate(agents_d):
        p = f"agents[{i}]"
        r.known(a, p, "agent")
        pose = r.get(a, "spawn_pose", p)
        if not isinstance(pose, list) or len(pose) != 3:
            raise r.fail(f"{p}.spawn_pose", "[x_m, y_m, yaw_rad]", pose)
        cols["pose"].append(
            np.array(
                [
                    r.number(v, f"{p}.spawn_pose[{j}]", b)
                    for j, (v, b) in enumerate(zip(pose, _POSE, strict=True))
                ]
            )
        )
        cols["speed"].append(r.number(r.get(a, "spawn_speed_mps", p), f"{p}.spawn_speed_mps", SPAWN_SPEED))
        cols["route"].append(r.xy(r.get(a, "route_xy", p), f"{p}.route_xy", min_points=2))
        goal = r.get(a, "goal_xy", p)
        if not isinstance(goal, list) or len(goal) != 2:
            raise r.fail(f"{p}.goal_xy", "[x_m, y_m]", goal)
        cols["goal"].append(
            np.array([r.number(v, f"{p}.goal_xy[{j}]", COORDINATE) for j, v in enumerate(goal)])
        )
        cols["goal_s"].append(r.number(r.get(a, "goal_s_m", p), f"{p}.goal_s_m", ROUTE_LENGTH))
        cols["length"].append(r.number(r.get(a, "length_m", p), f"{p}.length_m", LENGTH))
        cols["width"].append(r.number(r.get(a, "width_m", p), f"{p}.width_m", WIDTH))
    friction = r.number(r.get(data, "friction", ""), "friction", FRICTION)
    water_film = r.number(data.get("water_film_mm", 0.0), "water_film_mm", WATER_FILM)
    surface = r.get(data, "surface", "")
    name = r.get(data, "name", "")
    params = data.get("params", {})
    generator = data.get("generator", "")
    seed = data.get("seed", 0)
    for key, value, ok in (
        ("name", name, isinstance(name, str)),
        ("surface", surface, isinstance(surface, str)),
        ("generator", generator, isinstance(generator, str)),
        ("params", params, isinstance(params, dict)),
        ("seed", seed, isinstance(seed, int) and not isinstance(seed, bool)),
    ):
        if not ok:
            raise r.fail(
                key,
                "a string"
                if key not in ("params", "seed")
                else "an object"
                if key == "params"
                else "an integer",
                value,
            )
    if value_depth(params) > MAX_JSON_DEPTH - 1:
        raise r.fail("params", f"an object nested at most {MAX_JSON_DEPTH - 1} deep", value_depth(params))
    scene = make_scene(
        name=name,
        roadgraph=roadgraph,
        spawn_pose=cols["pose"],
        spawn_speed_mps=cols["speed"],
        routes=cols["route"],
        goal_xy=cols["goal"],
        goal_s_m=cols["goal_s"],
        length_m=cols["length"],
        width_m=cols["width"],
        surface=surface,
        friction=friction,
        water_film_mm=water_film,
        generator=generator,
        seed=int(seed),
        params=params,
        log=_log_from_dict(r, data["log"], len(agents_d)) if "log" in data else None,
        replay=_replay_from_dict(r, data["replay"]) if "replay" in data else None,
        signals=_signals_from_dict(r, data["signals"], roadgraph.num_lanes) if "signals" in data else None,
    )
    check_scene(scene, source)  # the whole scene: extent, surface, duplicates (plausibility.REFUSED)
    return scene


def save_scene(scene: Scene, path: str | os.PathLike[str]) -> None:
    """Write a scene as versioned JSON, atomically; refuse (write nothing) what ``load_scene`` would.

    Raises:
        SceneFormatError: naming ``path`` and the field, if the scene holds a non-finite or
            implausible number (see :mod:`scenefactory.scenes.plausibility`), no lane or no agent,
            or ``params`` that JSON cannot carry.
    """
    data = scene_to_dict(scene)
    scene_from_dict(data, f"{path} (not written)")  # the checks load_scene applies
    try:
        text = json.dumps(data, indent=1, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SceneFormatError(
            f"{path} (not written): field 'params': expected plain JSON values (finite numbers,"
            f" strings, lists, objects): {exc}"
        ) from exc
    atomic_write_text(path, text)


def load_scene(path: str | os.PathLike[str]) -> Scene:
    """Read a scene JSON file; a malformed file raises ``SceneFormatError`` naming file and field."""
    source = str(path)
    p = Path(path)
    if not p.is_file():
        raise SceneFormatError(f"{source}: scene file not found (expected a JSON file)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SceneFormatError(f"{source}: not UTF-8 text (expected a JSON scene file)") from exc
    check_json_depth(text, source)  # before parsing: json.loads recurses
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SceneFormatError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    except RecursionError:
        raise SceneFormatError(
            f"{source}: nested too deep to parse; expected at most {MAX_JSON_DEPTH}"
        ) from None
    scene = scene_from_dict(data, source)
    counts = scene_warnings(scene)
    if any(counts.values()):
        warn(f"{source}: kept, with {describe_warnings(counts)} (real data has these; see scene_warnings)")
    return scene
