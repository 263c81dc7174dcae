"""Scene spec: a road graph plus spawn poses, lane routes and goals for up to K controlled agents.

A scene is everything a world needs to start an episode: where each controlled agent spawns,
the route it should follow (a polyline through the lane graph) and its goal on that route, its
size, and the road surface with its friction. Arrays are padded to K agents with ``agent_valid``.

Shapes (K agents, R route points):

- ``spawn_pose``      (K, 3) float64: x_m, y_m, yaw_rad.
- ``spawn_speed_mps`` (K,) float64.
- ``route_xy``        (K, R, 2) float64, route polyline from the spawn, extending past the goal.
- ``route_valid``     (K, R) bool.
- ``goal_xy``         (K, 2) float64, a point on the route.
- ``goal_s_m``        (K,) float64, arc length of the goal along the route (20–60 m by default).
- ``length_m``/``width_m`` (K,) float64, vehicle footprint.
- ``agent_valid``     (K,) bool.

Optional logs: ``log`` (:class:`AgentLog`, the controlled agents' logged trajectories), ``replay``
(:class:`ReplayLog`, other objects played back) and ``signals`` (:class:`SignalLog`, traffic-signal
states per step and the stop lines of stop signs).

The JSON form lives in :mod:`scenefactory.scenes.scene_json` (``save_scene``/``load_scene``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.roadgraph import RoadGraph, pad_polylines


@dataclass(frozen=True)
class AgentLog:
    """Logged trajectories of the K controlled agents, step 0 = their spawn, one row per ``dt_s``.

    - ``xy`` (K, T, 2) [m], ``yaw`` (K, T) [rad], ``speed`` (K, T) [m/s], ``valid`` (K, T) bool.
    Real driving logs (WOMD) fill it; it gives expert actions through the kinematic tier's inverse
    and the log-divergence metric.
    """

    xy: np.ndarray
    yaw: np.ndarray
    speed: np.ndarray
    valid: np.ndarray
    dt_s: float = 0.1

    def __post_init__(self) -> None:
        """Check shapes and the time step."""
        k, t = self.valid.shape
        for name, shape in (("xy", (k, t, 2)), ("yaw", (k, t)), ("speed", (k, t))):
            if getattr(self, name).shape != shape:
                raise SceneFormatError(f"log {name} has shape {getattr(self, name).shape}, expected {shape}")
        if not (math.isfinite(self.dt_s) and self.dt_s > 0):
            raise SceneFormatError(f"log dt_s must be positive, got {self.dt_s}")

    @property
    def num_steps(self) -> int:
        """T."""
        return int(self.valid.shape[1])


@dataclass(frozen=True)
class ReplayLog:
    """Non-controlled objects replayed from a log (log playback, as Waymax does), step 0 = spawn.

    - ``xy`` (N, T, 2) [m], ``yaw`` (N, T) [rad], ``vel_xy`` (N, T, 2) [m/s], ``valid`` (N, T) bool;
    - ``length_m``/``width_m`` (N,) footprint [m]; ``kind`` (N,) WOMD object type codes.
    They move along their logs whatever the controlled agents do: obstacles the agents must avoid
    (collisions, TTC, DRAC and neighbour observations include them).
    """

    xy: np.ndarray
    yaw: np.ndarray
    vel_xy: np.ndarray
    valid: np.ndarray
    length_m: np.ndarray
    width_m: np.ndarray
    kind: np.ndarray
    dt_s: float = 0.1

    def __post_init__(self) -> None:
        """Check shapes."""
        n, t = self.valid.shape
        for name, shape in (
            ("xy", (n, t, 2)),
            ("yaw", (n, t)),
            ("vel_xy", (n, t, 2)),
            ("length_m", (n,)),
            ("width_m", (n,)),
            ("kind", (n,)),
        ):
            if getattr(self, name).shape != shape:
                raise SceneFormatError(
                    f"replay {name} has shape {getattr(self, name).shape}, expected {shape}"
                )

    @property
    def num_objects(self) -> int:
        """N."""
        return int(self.valid.shape[0])


class SignalState(IntEnum):
    """WOMD ``TrafficSignalLaneState.State`` codes: the state of one signal-controlled lane."""

    UNKNOWN = 0
    ARROW_STOP = 1
    ARROW_CAUTION = 2
    ARROW_GO = 3
    STOP = 4
    CAUTION = 5
    GO = 6
    FLASHING_STOP = 7
    FLASHING_CAUTION = 8


STOP_STATES = (SignalState.ARROW_STOP, SignalState.STOP, SignalState.FLASHING_STOP)
"""Red: the lane must not be entered (``FLASHING_STOP`` acts like a stop sign)."""
CAUTION_STATES = (SignalState.ARROW_CAUTION, SignalState.CAUTION, SignalState.FLASHING_CAUTION)
"""Yellow."""
GO_STATES = (SignalState.ARROW_GO, SignalState.GO)
"""Green."""


@dataclass(frozen=True)
class SignalLog:
    """Traffic signals replayed by step (as WOMD's ``dynamic_map_states``) and stop-sign stop lines.

    S signal-controlled lanes, T steps of ``dt_s`` (step 0 = the scene's start, WOMD's
    ``current_time_index``), Q stop-sign stop points:

    - ``stop_xy`` (S, 2) [m] each controlled lane's stop point (WOMD ``stop_point``: where the lane
      may not be entered on red); ``lane`` (S,) int64 its lane index in the scene's road graph, -1
      when unknown; ``state`` (T, S) int64 :class:`SignalState` codes.
    - ``loop``: the T steps repeat forever (a procedural signal cycle); otherwise the state is
      ``UNKNOWN`` after step T - 1 (the end of a log).
    - ``sign_xy`` (Q, 2) [m] where each stop sign's stop line crosses a lane it controls (the
      lane's point nearest to the sign) or the sign's own position when its lanes are unknown;
      ``sign_lane`` (Q,) int64 that lane's index or -1. Stop-sign positions themselves stay in
      ``RoadGraph.stop_sign_xy``.
    """

    stop_xy: np.ndarray
    lane: np.ndarray
    state: np.ndarray
    sign_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    sign_lane: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dt_s: float = 0.1
    loop: bool = False

    def __post_init__(self) -> None:
        """Check shapes, codes and the time step."""
        s = self.lane.shape[0]
        for name, shape in (("stop_xy", (s, 2)), ("lane", (s,)), ("sign_lane", (self.sign_xy.shape[0],))):
            if getattr(self, name).shape != shape:
                raise SceneFormatError(
                    f"signals {name} has shape {getattr(self, name).shape}, expected {shape}"
                )
        if self.sign_xy.ndim != 2 or self.sign_xy.shape[-1] != 2:
            raise SceneFormatError(f"signals sign_xy has shape {self.sign_xy.shape}, expected (Q, 2)")
        if self.state.ndim != 2 or self.state.shape[1] != s:
            raise SceneFormatError(f"signals state has shape {self.state.shape}, expected (T, {s})")
        if self.state.size and not (self.state.min() >= 0 and self.state.max() <= max(SignalState)):
            raise SceneFormatError(f"signals state holds codes outside 0-{int(max(SignalState))}")
        for name in ("lane", "sign_lane"):
            if getattr(self, name).size and getattr(self, name).min() < -1:
                raise SceneFormatError(f"signals {name} holds an index below -1")
        if not (math.isfinite(self.dt_s) and self.dt_s > 0):
            raise SceneFormatError(f"signals dt_s must be positive, got {self.dt_s}")
        if self.loop and s and not self.num_steps:
            raise SceneFormatError("a looping signal cycle needs at least one step")

    @property
    def num_signals(self) -> int:
        """S."""
        return int(self.lane.shape[0])

    @property
    def num_steps(self) -> int:
        """T."""
        return int(self.state.shape[0])

    def states_at(self, steps: np.ndarray, dt_s: float) -> np.ndarray:
        """States (n, S) at steps ``steps`` (n,) of length ``dt_s``: the state in force at time
        ``step · dt_s`` (the last one that began by then), ``UNKNOWN`` past the end of a non-looping log."""
        idx = np.floor(np.asarray(steps, dtype=np.float64) * dt_s / self.dt_s + 1e-9).astype(np.int64)
        out = np.zeros((len(idx), self.num_signals), dtype=np.int64)
        if not self.num_steps:
            return out
        if self.loop:
            return self.state[idx % self.num_steps].astype(np.int64)
        inside = (idx >= 0) & (idx < self.num_steps)
        out[inside] = self.state[idx[inside]]
        return out


@dataclass(frozen=True)
class Scene:
    """One simulation-ready scene; see the module docstring for shapes and units."""

    name: str
    roadgraph: RoadGraph
    spawn_pose: np.ndarray
    spawn_speed_mps: np.ndarray
    route_xy: np.ndarray
    route_valid: np.ndarray
    goal_xy: np.ndarray
    goal_s_m: np.ndarray
    length_m: np.ndarray
    width_m: np.ndarray
    agent_valid: np.ndarray
    surface: str = "asphalt"
    friction: float = 1.0
    water_film_mm: float = 0.0
    generator: str = ""
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    log: AgentLog | None = None
    replay: ReplayLog | None = None
    signals: SignalLog | None = None

    def __post_init__(self) -> None:
        """Check shapes at construction."""
        k = self.agent_valid.shape[0]
        sig = self.signals
        if sig is not None:
            lanes = np.concatenate([sig.lane, sig.sign_lane])
            if lanes.size and lanes.max() >= self.roadgraph.num_lanes:
                raise SceneFormatError(
                    f"scene '{self.name}': signals refer to lane {int(lanes.max())}, the road graph has "
                    f"{self.roadgraph.num_lanes} lanes"
                )
        if self.log is not None and self.log.valid.shape[0] != k:
            raise SceneFormatError(
                f"scene '{self.name}': log has {self.log.valid.shape[0]} agents, expected {k}"
            )
        expect = {
            "spawn_pose": (k, 3),
            "spawn_speed_mps": (k,),
            "goal_xy": (k, 2),
            "goal_s_m": (k,),
            "length_m": (k,),
            "width_m": (k,),
        }
        for name, shape in expect.items():
            got = getattr(self, name).shape
            if got != shape:
                raise SceneFormatError(f"scene '{self.name}': {name} has shape {got}, expected {shape}")
        if self.route_xy.shape[:2] != self.route_valid.shape or self.route_valid.shape[0] != k:
            raise SceneFormatError(
                f"scene '{self.name}': route_xy {self.route_xy.shape} does not match route_valid "
                f"{self.route_valid.shape} for {k} agents"
            )
        if not (math.isfinite(self.friction) and self.friction > 0.0):
            raise SceneFormatError(
                f"scene '{self.name}': friction must be a positive number, got {self.friction}"
            )

    @property
    def max_agents(self) -> int:
        """K, the padded number of controlled-agent slots."""
        return int(self.agent_valid.shape[0])

    @property
    def num_agents(self) -> int:
        """Number of valid controlled agents."""
        return int(self.agent_valid.sum())

    def route(self, i: int) -> np.ndarray:
        """Valid route points of agent ``i``, ``(n, 2)``."""
        return self.route_xy[i][self.route_valid[i]]


def make_scene(
    name: str,
    roadgraph: RoadGraph,
    spawn_pose: list[np.ndarray],
    spawn_speed_mps: list[float],
    routes: list[np.ndarray],
    goal_xy: list[np.ndarray],
    goal_s_m: list[float],
    length_m: list[float],
    width_m: list[float],
    **kwargs: Any,
) -> Scene:
    """Build a scene from ragged per-agent lists (one entry per valid agent)."""
    k = len(spawn_pose)
    route_xy, route_valid = pad_polylines(routes) if k else (np.zeros((0, 1, 2)), np.zeros((0, 1), bool))
    return Scene(
        name=name,
        roadgraph=roadgraph,
        spawn_pose=np.asarray(spawn_pose, dtype=np.float64).reshape(k, 3),
        spawn_speed_mps=np.asarray(spawn_speed_mps, dtype=np.float64).reshape(k),
        route_xy=route_xy,
        route_valid=route_valid,
        goal_xy=np.asarray(goal_xy, dtype=np.float64).reshape(k, 2),
        goal_s_m=np.asarray(goal_s_m, dtype=np.float64).reshape(k),
        length_m=np.asarray(length_m, dtype=np.float64).reshape(k),
        width_m=np.asarray(width_m, dtype=np.float64).reshape(k),
        agent_valid=np.ones(k, dtype=bool),
        **kwargs,
    )
