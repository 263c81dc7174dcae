"""A pool of scenes as padded tensors, gathered into worlds at reset.

Shapes (S scenes, K agents per world, P road points, R route points):

- ``roads``       the road-graph sample points of every scene, packed (memory grows with the total
  number of points), with the spatial index that answers the road observation's k-nearest query
  from the points of one disc of cells (:mod:`~scenefactory.tasks.driving.road_index`); per point
  ``xy`` [m] and ``feat`` (5): tangent (dx, dy) and a one-hot of
  :class:`~scenefactory.scenes.roadgraph.PointType`.
- ``route_xy``    (S, K, R, 2) per-agent route polylines; ``route_valid`` (S, K, R).
- ``route_s``     (S, K, R) cumulative arc length [m], strictly increasing (padding continues past
  the end in 1 km steps so batched ``searchsorted`` works); ``route_end_s`` (S, K).
- ``goal_xy``     (S, K, 2); ``goal_s`` (S, K) goal arc length along the route [m].
- ``spawn_pose``  (S, K, 3); ``spawn_speed`` (S, K); ``agent_valid`` (S, K) bool.
- ``length``/``width`` (S, K) [m]; ``friction`` (S,).
- ``grids``       drivable-area distance fields, one per scene, packed.
- ``log_xy``      (S, K, T, 2) logged positions from the spawn on (T = 1 and all invalid when no
  scene has a log); ``log_valid`` (S, K, T); ``expert`` (S, K, T, 2) the actions that follow the
  log through the kinematic tier's inverse (``engines.kinematic.inverse_bicycle``), 0 where unknown.
- ``replay_*``    non-controlled objects replayed from logs, packed (memory grows with the objects the
  scenes have, not scenes x the largest count): scene ``s`` holds the ``replay_count[s]`` rows from
  ``replay_first[s]`` on (both (S,) long) of ``replay_xy`` (N, T, 2), ``replay_yaw`` (N, T),
  ``replay_vel`` (N, T, 2), ``replay_valid`` (N, T), ``replay_length``/``replay_width`` (N,), N the
  objects of every scene together (0 when no scene has any), T the longest log.
- ``stop_*``      the stop lines on each agent's route (:mod:`~scenefactory.tasks.driving.signals`),
  M per agent, by arc length: ``stop_s`` (S, K, M) route arc length [m] (1e9 padding),
  ``stop_kind`` (S, K, M) long (0 padding, ``SIGNAL``, ``STOP_SIGN``), ``stop_column`` (S, K, M) long
  the signal's column in ``signal_state``, ``stop_right_turn`` (S, K, M); M = 0 when no route meets one.
- ``signal_state`` (S, T, N) int8 WOMD signal states per policy step (``UNKNOWN`` padding, N >= 1,
  T >= 1); ``signal_steps`` (S,) long the steps each scene holds; ``signal_loop`` (S,) bool whether
  they repeat (a procedural cycle) or end (a log: ``UNKNOWN`` after).

Scenes with more agent slots than K keep their first K as controlled agents; the valid agents
beyond them are replayed from the scene's log (``replay_*``, after the scene's own replayed
objects: the controlled agents still see and collide with them), and truncated away when the scene
has no log (procedural scenes). Scenes with fewer are padded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.drivable import GridStack
from scenefactory.tasks.driving.road_cache import RoadParams, scene_roads
from scenefactory.tasks.driving.road_index import (
    DEFAULT_CELL_M,
    RoadPointIndex,
    SceneCells,
    roadgraph_points,
)
from scenefactory.tasks.driving.signals import SIGNAL, route_stops
from scenefactory.vehicles.params import VehicleParams


def road_points(scene: Scene, spacing_m: float) -> tuple[np.ndarray, np.ndarray]:
    """All road-graph sample points of a scene: ``xy`` (P, 2) and ``feat`` (P, 5) = tangent, type one-hot."""
    return roadgraph_points(scene.roadgraph, spacing_m)


@dataclass(frozen=True)
class ScenePool:
    """Tensors of a list of scenes: road data packed, per-agent arrays padded to K (module docstring)."""

    scenes: tuple[Scene, ...]
    roads: RoadPointIndex
    route_xy: torch.Tensor
    route_valid: torch.Tensor
    route_s: torch.Tensor
    route_end_s: torch.Tensor
    goal_xy: torch.Tensor
    goal_s: torch.Tensor
    spawn_pose: torch.Tensor
    spawn_speed: torch.Tensor
    agent_valid: torch.Tensor
    length: torch.Tensor
    width: torch.Tensor
    friction: torch.Tensor
    grids: GridStack
    log_xy: torch.Tensor
    log_valid: torch.Tensor
    expert: torch.Tensor
    replay_xy: torch.Tensor
    replay_yaw: torch.Tensor
    replay_vel: torch.Tensor
    replay_valid: torch.Tensor
    replay_length: torch.Tensor
    replay_width: torch.Tensor
    replay_first: torch.Tensor
    replay_count: torch.Tensor
    stop_s: torch.Tensor
    stop_kind: torch.Tensor
    stop_column: torch.Tensor
    stop_right_turn: torch.Tensor
    signal_state: torch.Tensor
    signal_steps: torch.Tensor
    signal_loop: torch.Tensor

    @property
    def num_scenes(self) -> int:
        """S."""
        return len(self.scenes)

    @property
    def max_replay(self) -> int:
        """The most replayed objects of any scene (0: none)."""
        return int(self.replay_count.max()) if len(self.replay_count) else 0

    def replay_rows(self, scene: int) -> slice:
        """Rows of scene ``scene``'s replayed objects in the packed ``replay_*`` tensors."""
        first = int(self.replay_first[scene])
        return slice(first, first + int(self.replay_count[scene]))


def build_pool(
    scenes: Sequence[Scene],
    agents_per_world: int,
    road_point_spacing_m: float,
    device: torch.device,
    vehicle: VehicleParams | None = None,
    dt_s: float = 0.1,
    num_road_points: int = 24,
    road_point_range_m: float = 50.0,
    road_cell_m: float = DEFAULT_CELL_M,
) -> ScenePool:
    """Tensorize ``scenes`` for worlds of ``agents_per_world`` agents (see the module docstring);
    logs must be sampled at the policy step ``dt_s``. The road index answers up to
    ``num_road_points`` nearest points within ``road_point_range_m`` exactly."""
    if not scenes:
        raise ValueError("the scene pool is empty: need at least one scene")
    k = agents_per_world
    params = RoadParams(road_point_spacing_m, num_road_points, road_point_range_m, road_cell_m)
    roads, grids = _pack_roads(scenes, params, device)
    r_max = max(sc.route_xy.shape[1] for sc in scenes)
    s_n = len(scenes)
    route_xy = np.zeros((s_n, k, r_max, 2))
    route_valid = np.zeros((s_n, k, r_max), dtype=bool)
    goal_xy = np.zeros((s_n, k, 2))
    goal_s = np.ones((s_n, k))
    spawn_pose = np.zeros((s_n, k, 3))
    spawn_speed = np.zeros((s_n, k))
    agent_valid = np.zeros((s_n, k), dtype=bool)
    length = np.full((s_n, k), 4.5)
    width = np.full((s_n, k), 1.9)
    for i, sc in enumerate(scenes):
        n = min(k, sc.max_agents)
        r = sc.route_xy.shape[1]
        route_xy[i, :n, :r] = sc.route_xy[:n]
        route_valid[i, :n, :r] = sc.route_valid[:n]
        goal_xy[i, :n] = sc.goal_xy[:n]
        goal_s[i, :n] = sc.goal_s_m[:n]
        spawn_pose[i, :n] = sc.spawn_pose[:n]
        spawn_speed[i, :n] = sc.spawn_speed_mps[:n]
        agent_valid[i, :n] = sc.agent_valid[:n]
        length[i, :n] = sc.length_m[:n]
        width[i, :n] = sc.width_m[:n]

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, device=device, dtype=torch.bool if a.dtype == bool else torch.float32)

    route_s, route_end_s = _route_arclength(route_xy, route_valid)
    log_xy, log_valid, expert = _logs(scenes, k, vehicle or VehicleParams(), dt_s)
    replay = _replays(scenes, k, dt_s)
    return ScenePool(
        scenes=tuple(scenes),
        roads=roads,
        route_xy=t(route_xy),
        route_valid=t(route_valid),
        route_s=t(route_s),
        route_end_s=t(route_end_s),
        goal_xy=t(goal_xy),
        goal_s=t(goal_s),
        spawn_pose=t(spawn_pose),
        spawn_speed=t(spawn_speed),
        agent_valid=t(agent_valid),
        length=t(length),
        width=t(width),
        friction=torch.tensor([sc.friction for sc in scenes], dtype=torch.float32, device=device),
        grids=grids,
        log_xy=t(log_xy),
        log_valid=t(log_valid),
        expert=t(expert),
        **{
            name: t(value) if value.dtype != np.int64 else torch.as_tensor(value, device=device)
            for name, value in replay.items()
        },
        **{
            name: torch.as_tensor(value, device=device)
            for name, value in {**_route_stops(scenes, k), **_signal_states(scenes, dt_s)}.items()
        },
    )


def _pack_roads(
    scenes: Sequence[Scene], params: RoadParams, device: torch.device
) -> tuple[RoadPointIndex, GridStack]:
    """Every scene's road data (from the road cache) packed into the index and the grid stack. Each
    scene's arrays are narrowed to their stored dtypes as they are read (float32 points, float16
    features and grids, int32 cell data), so a pool of thousands of maps is never held in float64."""
    points: list[tuple[np.ndarray, np.ndarray]] = []
    cells: list[SceneCells] = []
    grids: list[tuple[np.ndarray, float, np.ndarray]] = []
    for sc in scenes:
        r = scene_roads(sc.roadgraph, params, f"scene '{sc.name}'")
        points.append((r.xy.astype(np.float32), r.feat.astype(np.float16)))
        cells.append(
            replace(r.cells, order=r.cells.order.astype(np.int32), counts=r.cells.counts.astype(np.int32))
        )
        grids.append((r.grid.origin_xy, r.grid.resolution_m, r.grid.values.astype(np.float16)))
    roads = RoadPointIndex.build(points, cells, params.num_road_points, params.range_m, device)
    del points, cells
    return roads, GridStack.pack(grids, device)


def _route_arclength(route_xy: np.ndarray, route_valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative arc length (..., R) of padded routes and the end arc length (...,)."""
    seg = np.linalg.norm(np.diff(route_xy, axis=-2), axis=-1)
    seg = np.where(route_valid[..., 1:] & route_valid[..., :-1], seg, 0.0)
    s = np.concatenate([np.zeros((*seg.shape[:-1], 1)), np.cumsum(seg, axis=-1)], axis=-1)
    count = route_valid.sum(axis=-1)
    end = np.take_along_axis(s, np.clip(count - 1, 0, None)[..., None], axis=-1)[..., 0]
    pad_rank = np.cumsum(~route_valid, axis=-1)
    s = np.where(route_valid, s, end[..., None] + 1000.0 * pad_rank)
    return s, end


def _logs(
    scenes: Sequence[Scene], k: int, vehicle: VehicleParams, dt_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded logged positions, validity and expert actions (S, K, T, ...); see the module docstring."""
    steps = max([sc.log.num_steps for sc in scenes if sc.log is not None] + [1])
    xy = np.zeros((len(scenes), k, steps, 2))
    valid = np.zeros((len(scenes), k, steps), dtype=bool)
    expert = np.zeros((len(scenes), k, steps, 2))
    for i, sc in enumerate(scenes):
        log = sc.log
        if log is None:
            continue
        if abs(log.dt_s - dt_s) > 1e-9:
            raise ValueError(
                f"scene '{sc.name}': log step {log.dt_s} s differs from the policy step {dt_s} s"
            )
        n, t = min(k, log.valid.shape[0]), log.num_steps
        xy[i, :n, :t] = log.xy[:n]
        valid[i, :n, :t] = log.valid[:n]
        actions, _ = inverse_bicycle(log.yaw[:n], log.speed[:n], log.valid[:n], dt_s, vehicle)
        expert[i, :n, :t] = actions
    return xy, valid, expert


def beyond_slots(scene: Scene, k: int) -> np.ndarray:
    """Slots (n,) of ``scene``'s valid controlled agents beyond the first ``k`` that its log plays
    back as replayed objects in a world of ``k`` agents; none for a scene without a log (procedural
    scenes are truncated to their first ``k`` agents)."""
    if scene.log is None or scene.max_agents <= k:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(scene.agent_valid[k:]) + k


def _replays(scenes: Sequence[Scene], k: int, dt_s: float) -> dict[str, np.ndarray]:
    """Packed replayed objects of every scene: its own replay log's, then its controlled agents
    beyond the first ``k`` slots (:func:`beyond_slots`) played back from its log — positions, yaw,
    velocity = logged speed along the logged yaw, validity and footprint (see the module docstring)."""
    extra = [beyond_slots(sc, k) for sc in scenes]
    own = [sc.replay.num_objects if sc.replay is not None else 0 for sc in scenes]
    count = np.array([a + len(e) for a, e in zip(own, extra, strict=True)], dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    n = int(count.sum())
    steps = max(
        [sc.replay.valid.shape[1] for sc in scenes if sc.replay is not None]
        + [sc.log.num_steps for sc, e in zip(scenes, extra, strict=True) if len(e) and sc.log is not None]
        + [1]
    )
    out = {
        "replay_xy": np.zeros((n, steps, 2)),
        "replay_yaw": np.zeros((n, steps)),
        "replay_vel": np.zeros((n, steps, 2)),
        "replay_valid": np.zeros((n, steps), dtype=bool),
        "replay_length": np.full(n, 4.5),
        "replay_width": np.full(n, 1.9),
        "replay_first": first,
        "replay_count": count,
    }
    for sc, m, rows, f in zip(scenes, own, extra, first.tolist(), strict=True):
        rep = sc.replay
        if rep is not None and m:
            if abs(rep.dt_s - dt_s) > 1e-9:
                raise ValueError(
                    f"scene '{sc.name}': replay step {rep.dt_s} s differs from the policy step {dt_s} s"
                )
            t, objs = rep.valid.shape[1], slice(f, f + m)
            out["replay_xy"][objs, :t] = rep.xy
            out["replay_yaw"][objs, :t] = rep.yaw
            out["replay_vel"][objs, :t] = rep.vel_xy
            out["replay_valid"][objs, :t] = rep.valid
            out["replay_length"][objs] = rep.length_m
            out["replay_width"][objs] = rep.width_m
        log = sc.log
        if log is None or not len(rows):
            continue
        objs, t = slice(f + m, f + m + len(rows)), log.num_steps
        yaw = log.yaw[rows]
        out["replay_xy"][objs, :t] = log.xy[rows]
        out["replay_yaw"][objs, :t] = yaw
        heading = np.stack((np.cos(yaw), np.sin(yaw)), axis=-1)
        out["replay_vel"][objs, :t] = heading * log.speed[rows][..., None]
        out["replay_valid"][objs, :t] = log.valid[rows]
        out["replay_length"][objs] = sc.length_m[rows]
        out["replay_width"][objs] = sc.width_m[rows]
    return out


def _route_stops(scenes: Sequence[Scene], k: int) -> dict[str, np.ndarray]:
    """Padded stop lines on every agent's route (see the module docstring)."""
    found = [
        [route_stops(sc, i) if i < sc.max_agents and sc.agent_valid[i] else [] for i in range(k)]
        for sc in scenes
    ]
    m = max([len(r) for rows in found for r in rows] + [0])
    out: dict[str, np.ndarray] = {
        "stop_s": np.full((len(scenes), k, m), 1e9, dtype=np.float32),
        "stop_kind": np.zeros((len(scenes), k, m), dtype=np.int64),
        "stop_column": np.zeros((len(scenes), k, m), dtype=np.int64),
        "stop_right_turn": np.zeros((len(scenes), k, m), dtype=bool),
    }
    for i, rows in enumerate(found):
        for a, stops in enumerate(rows):
            for j, st in enumerate(stops):
                out["stop_s"][i, a, j] = st.s_m
                out["stop_kind"][i, a, j] = st.kind
                out["stop_column"][i, a, j] = st.column if st.kind == SIGNAL else 0
                out["stop_right_turn"][i, a, j] = st.right_turn
    return out


def _signal_states(scenes: Sequence[Scene], dt_s: float) -> dict[str, np.ndarray]:
    """Signal states of every scene at the policy step ``dt_s`` (see the module docstring)."""
    per_scene: list[np.ndarray] = []
    for sc in scenes:
        sig = sc.signals
        if sig is None or not sig.num_signals or not sig.num_steps:
            per_scene.append(np.zeros((0, 0), dtype=np.int64))
            continue
        span = sig.num_steps * sig.dt_s / dt_s
        steps = max(1, round(span) if sig.loop else math.ceil(span - 1e-9))
        per_scene.append(sig.states_at(np.arange(steps), dt_s))
    t = max([len(a) for a in per_scene] + [1])
    n = max([a.shape[1] for a in per_scene] + [1])
    state = np.zeros((len(scenes), t, n), dtype=np.int8)  # codes 0-8: a WOMD pool stays small
    for i, a in enumerate(per_scene):
        state[i, : a.shape[0], : a.shape[1]] = a
    return {
        "signal_state": state,
        "signal_steps": np.array([len(a) for a in per_scene], dtype=np.int64),
        "signal_loop": np.array([sc.signals is not None and sc.signals.loop for sc in scenes], dtype=bool),
    }
