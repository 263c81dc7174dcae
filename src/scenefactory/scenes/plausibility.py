"""Plausibility bounds for the numbers a scene holds: what a road scene can physically contain.

A finite number can still be nonsense: a coordinate of 1e300 passes ``math.isfinite`` and then
breaks route resampling, collision checks or a physics engine far from where it was read. So every
scene file is checked against these bounds when it is loaded and before it is saved
(:mod:`scenefactory.scenes.scene_json`), and every WOMD scenario before it is converted
(:mod:`scenefactory.scenes.womd.convert`): a file the tools write is one they read.

The bounds are generous — each is several times what real data reaches — so they only catch
values that are wrong, never unusual driving:

============================  =====================  ===============================================
quantity                      bound                  why
============================  =====================  ===============================================
coordinate (x, y)             ``|v| <= 1e6`` m       WOMD maps span ~1e4 m; converted and procedural
                                                     scenes are centred near 0 (procedural: 125 m)
speed, velocity component     ``|v| <= 100`` m/s     360 km/h; logged traffic stays under ~60 m/s
heading / yaw                 ``|v| <= 1000`` rad    ~160 turns: wrapped or unwrapped, any real log
vehicle / object length       ``(0, 30]`` m          the longest road trains are ~25 m
vehicle / object width        ``(0, 5]`` m           wide loads are ~4.5 m; cars ~1.9 m
lane width                    ``(0, 20]`` m          real lanes are 2.4–6 m
goal arc length along route   ``[0, 1e7]`` m         a route inside the coordinate box
friction coefficient μ        ``(0, 2]``             racing slicks on dry asphalt reach ~1.7
water film depth              ``[0, 50]`` mm         more than 10 mm is already flooding
log time step                 ``(0, 10]`` s          WOMD logs at 0.1 s
============================  =====================  ===============================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """A closed range ``[lo, hi]`` (open at ``lo`` when ``lo_open``) of a quantity in ``unit``."""

    quantity: str
    lo: float
    hi: float
    unit: str = ""
    lo_open: bool = False

    def contains(self, value: float) -> bool:
        """Whether ``value`` is finite and in range (NaN and ±inf never are)."""
        if not math.isfinite(value):
            return False
        above_lo = value > self.lo if self.lo_open else value >= self.lo
        return above_lo and value <= self.hi

    def describe(self) -> str:
        """E.g. ``"a vehicle length in (0, 30] m"``, for error messages."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.quantity} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]{unit}"


MAX_ABS_COORDINATE_M = 1.0e6
MAX_SPEED_MPS = 100.0
MAX_ABS_ANGLE_RAD = 1000.0
MAX_LENGTH_M = 30.0
MAX_WIDTH_M = 5.0
MAX_LANE_WIDTH_M = 20.0
MAX_ROUTE_LENGTH_M = 1.0e7
MAX_FRICTION = 2.0
MAX_WATER_FILM_MM = 50.0
MAX_LOG_STEP_S = 10.0

COORDINATE = Bound("a coordinate", -MAX_ABS_COORDINATE_M, MAX_ABS_COORDINATE_M, "m")
SPEED = Bound("a speed", -MAX_SPEED_MPS, MAX_SPEED_MPS, "m/s")
ANGLE = Bound("an angle", -MAX_ABS_ANGLE_RAD, MAX_ABS_ANGLE_RAD, "rad")
LENGTH = Bound("a length", 0.0, MAX_LENGTH_M, "m", lo_open=True)
WIDTH = Bound("a width", 0.0, MAX_WIDTH_M, "m", lo_open=True)
LANE_WIDTH = Bound("a lane width", 0.0, MAX_LANE_WIDTH_M, "m", lo_open=True)
ROUTE_LENGTH = Bound("an arc length", 0.0, MAX_ROUTE_LENGTH_M, "m")
FRICTION = Bound("a friction coefficient", 0.0, MAX_FRICTION, lo_open=True)
WATER_FILM = Bound("a water film depth", 0.0, MAX_WATER_FILM_MM, "mm")
LOG_STEP = Bound("a time step", 0.0, MAX_LOG_STEP_S, "s", lo_open=True)

# ------------------------------------------------------------------------------ the whole scene

MAX_SCENE_EXTENT_M = 4000.0
"""Largest side of the box holding everything a scene places (map, spawns, routes, goals, logs,
replayed objects, signals). The drivable-area grid (1 m nodes plus a 20 m margin) is built over the
map's box: 4 km × 4 km is 16 M nodes, 65 MB of float32, about 10 s to build on 2 cores (measured
with a two-lane map 3 km apart: 9.3 M nodes in 5.7 s). A WOMD scenario's map is a crop around the
logged car, well inside it. Checked before anything is allocated."""
MAX_LOG_STEPS = 10_000
"""Steps of a log, replay or signal record (1000 s at 10 Hz; WOMD holds 91): each is allocated
for every object, so the count is bounded like the map's extent."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of lists and objects in a scene file (the format itself needs 5; ``params`` is
free-form). Checked on the text before it is parsed: Python's json module raises RecursionError on
a deep enough document."""

SPAWN_SPEED = Bound("a spawn speed", 0.0, MAX_SPEED_MPS, "m/s")
"""A controlled agent's speed at spawn: a magnitude (the converter writes the norm of the logged
velocity; procedural scenes a target speed), never negative."""
CURRENT_TIME_INDEX = Bound("a step index", 0, MAX_LOG_STEPS - 1)
"""``params.current_time_index`` of a converted scene: the WOMD step the scene starts at."""

REFUSED = (
    ("extent", f"everything a scene places spans more than {MAX_SCENE_EXTENT_M:g} m in x or y"),
    ("log length", f"a log, replay or signal record of more than {MAX_LOG_STEPS} steps"),
    ("nesting", f"lists and objects nested more than {MAX_JSON_DEPTH} deep anywhere in the file"),
    ("surface", "a surface the friction model does not know (scenes.friction.SURFACES)"),
    ("spawn speed", "a negative spawn_speed_mps"),
    ("current_time_index", f"params.current_time_index not an integer in [0, {MAX_LOG_STEPS - 1}]"),
    ("duplicated agent", "two controlled agents with the same spawn pose, length and width"),
)
"""What a scene file may not hold, whole-scene (beside each number's bound above): never real data,
each would make a run wrong or unaffordable. ``docs/concepts/scene-checks.md`` lists these."""

WARNED = (
    ("overlapping_spawns", "controlled agents whose boxes overlap another controlled agent's at spawn"),
    (
        "objects_on_agent_path",
        "replayed objects whose box overlaps a controlled agent's logged box at the same step",
    ),
    ("zero_length_lanes", "lanes whose points all coincide"),
    ("self_successor_lanes", "lanes listed among their own exits that are not closed loops"),
)
"""What a scene may hold with a warning: real WOMD data has each (labelled boxes that overlap, a
parked car on a logged path, degenerate lane polylines), and the tools run on them (the driving
env was stepped on each case: finite observations). They are counted by :func:`scene_warnings`,
printed when a file is loaded and summed into ``metrics.json["agents"]["scene_warnings"]`` of an
evaluation and its human baseline, where an overlap at spawn is a collision of the data, not of the
simulator."""
