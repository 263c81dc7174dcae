"""What WOSAC reads from a WOMD ``Scenario``: the simulated objects' logged boxes, the road edges, the
surface-street lanes and the traffic signals, as float32 tensors (the official code converts every
value to float32 through ``tf.convert_to_tensor``, so we do too).

Follows ``utils/trajectory_utils.py`` (``ObjectTrajectories.from_scenario``: every state as stored,
valid or not, so unobserved states carry the file's placeholder values, -1 in WOMD),
``utils/sim_agents/submission_specs.py`` (the simulated objects are every track valid at
``current_time_index``; the evaluated ones the SDC and the ``tracks_to_predict``, sorted by id),
``map_metric_features.tensorize_polylines`` / ``_check_polyline_cycles`` (polylines padded with zeros
and a validity flag; fewer than 2 points skipped; cyclic when the ends are within 1 m) and
``traffic_light_features._tensorize_traffic_signals``. Objects are ordered evaluated first, as
``metric_features.compute_metric_features`` reorders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from scenefactory.errors import UserError
from scenefactory.evaluation.wosac.config import CURRENT_TIME_INDEX, N_STEPS, SURFACE_STREET

_CYCLIC_TOL_M2 = 1.0


class WosacScenarioError(UserError):
    """A scenario WOSAC cannot score (missing road edges, too few steps, evaluated objects not valid)."""


@dataclass(frozen=True)
class Polylines:
    """Polylines padded to one length: ``xyzv`` (P, L, 4) float32 (x, y, z, valid), ``cyclic`` (P,)
    bool, ``ids`` (P,) int64."""

    xyzv: torch.Tensor
    cyclic: torch.Tensor
    ids: torch.Tensor


@dataclass(frozen=True)
class WosacScenario:
    """One scenario's simulated objects (N: valid at the current step, the E evaluated first) and map.

    ``traj`` (N, 91, 7) float32: x, y, z, heading, length, width, height per step as logged;
    ``valid`` (N, 91) bool; ``velocity`` (N, 91, 2) float32: the logged velocities;
    ``object_id`` / ``object_type`` (N,) int64; ``num_eval`` E; ``road_edges`` and ``lanes`` (the
    surface-street lanes) as :class:`Polylines`; ``signal_lane`` (91, K) int64, ``signal_state``
    (91, K) int64, ``signal_stop`` (91, K, 2) float32, or ``None`` when the scenario has no
    surface-street lane or no dynamic map state (the official code then counts no violation).
    """

    scenario_id: str
    object_id: torch.Tensor
    object_type: torch.Tensor
    traj: torch.Tensor
    valid: torch.Tensor
    velocity: torch.Tensor
    num_eval: int
    road_edges: Polylines
    lanes: Polylines | None
    signal_lane: torch.Tensor | None
    signal_state: torch.Tensor | None
    signal_stop: torch.Tensor | None

    @property
    def num_objects(self) -> int:
        """N, the simulated objects."""
        return int(self.object_id.shape[0])


def _polylines(polys: list[list[Any]], ids: list[int]) -> Polylines | None:
    kept = [(p, i) for p, i in zip(polys, ids, strict=True) if len(p) >= 2]
    if not kept:
        return None
    length = max(len(p) for p, _ in kept)
    xyzv = np.zeros((len(kept), length, 4), dtype=np.float32)
    cyclic = np.zeros(len(kept), dtype=bool)
    for k, (p, _) in enumerate(kept):
        pts = np.array([(q.x, q.y, q.z) for q in p], dtype=np.float32)
        xyzv[k, : len(pts), :3] = pts
        xyzv[k, : len(pts), 3] = 1.0
        cyclic[k] = float(np.sum(np.square(pts[0] - pts[-1]))) < _CYCLIC_TOL_M2
    return Polylines(
        torch.from_numpy(xyzv),
        torch.from_numpy(cyclic),
        torch.tensor([i for _, i in kept], dtype=torch.int64),
    )


def _signals(scenario: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    steps = len(scenario.dynamic_map_states)
    lanes = sorted({s.lane for d in scenario.dynamic_map_states for s in d.lane_states}) or [-1]
    index = {lane: k for k, lane in enumerate(lanes)}
    state = np.zeros((steps, len(lanes)), dtype=np.int64)
    stop = np.zeros((steps, len(lanes), 2), dtype=np.float32)
    for t, d in enumerate(scenario.dynamic_map_states):
        for s in d.lane_states:
            state[t, index[s.lane]] = s.state
            stop[t, index[s.lane]] = (s.stop_point.x, s.stop_point.y)
    lane = np.repeat(np.array(lanes, dtype=np.int64)[None], steps, axis=0)
    return torch.from_numpy(lane), torch.from_numpy(state), torch.from_numpy(stop)


def wosac_scenario(scenario: Any) -> WosacScenario:
    """Read what WOSAC needs from a parsed ``Scenario`` (ours or Waymo's: the same field names).

    Raises:
        WosacScenarioError: a scenario with other than 91 steps per track, no object valid at the
            current step, an SDC or track to predict that is not valid there, or no road edge (the
            official ``compute_distance_to_road_edge`` raises "Missing road edges." too).
    """
    sid = scenario.scenario_id
    if scenario.current_time_index != CURRENT_TIME_INDEX:
        raise WosacScenarioError(
            f"scenario {sid}: current_time_index is {scenario.current_time_index}, WOSAC expects"
            f" {CURRENT_TIME_INDEX}"
        )
    tracks = list(scenario.tracks)
    for k, tr in enumerate(tracks):
        if len(tr.states) != N_STEPS:
            raise WosacScenarioError(
                f"scenario {sid}: track {k} (id {tr.id}) has {len(tr.states)} states, WOSAC expects {N_STEPS}"
            )
    sim = [k for k, tr in enumerate(tracks) if tr.states[CURRENT_TIME_INDEX].valid]
    if not sim:
        raise WosacScenarioError(f"scenario {sid}: no object is valid at step {CURRENT_TIME_INDEX}")
    eval_idx = {scenario.sdc_track_index} | {p.track_index for p in scenario.tracks_to_predict}
    for k in eval_idx:
        if not 0 <= k < len(tracks) or k not in sim:
            raise WosacScenarioError(
                f"scenario {sid}: evaluated track index {k} (the SDC or a track to predict) is not a track"
                f" valid at step {CURRENT_TIME_INDEX}"
            )
    ordered = sorted(eval_idx, key=lambda k: tracks[k].id) + [k for k in sim if k not in eval_idx]
    traj = np.empty((len(ordered), N_STEPS, 7), dtype=np.float32)
    valid = np.empty((len(ordered), N_STEPS), dtype=bool)
    velocity = np.empty((len(ordered), N_STEPS, 2), dtype=np.float32)
    for row, k in enumerate(ordered):
        states = tracks[k].states
        traj[row] = [
            (s.center_x, s.center_y, s.center_z, s.heading, s.length, s.width, s.height) for s in states
        ]
        valid[row] = [s.valid for s in states]
        velocity[row] = [(s.velocity_x, s.velocity_y) for s in states]
    edges, lanes, lane_ids = [], [], []
    for f in scenario.map_features:
        kind = f.WhichOneof("feature_data")
        if kind == "road_edge":
            edges.append(list(f.road_edge.polyline))
        elif kind == "lane" and f.lane.type == SURFACE_STREET:
            lanes.append(list(f.lane.polyline))
            lane_ids.append(f.id)
    road = _polylines(edges, [0] * len(edges))
    if road is None:
        raise WosacScenarioError(
            f"scenario {sid}: no road edge with 2 or more points (WOSAC needs road edges)"
        )
    lane_lines = _polylines(lanes, lane_ids)
    signal_lane = signal_state = signal_stop = None
    if lane_lines is not None and len(scenario.dynamic_map_states) > 0:
        if len(scenario.dynamic_map_states) != N_STEPS:
            raise WosacScenarioError(
                f"scenario {sid}: {len(scenario.dynamic_map_states)} dynamic_map_states, WOSAC expects"
                f" {N_STEPS} (one a step)"
            )
        signal_lane, signal_state, signal_stop = _signals(scenario)
    return WosacScenario(
        scenario_id=sid,
        object_id=torch.tensor([tracks[k].id for k in ordered], dtype=torch.int64),
        object_type=torch.tensor([tracks[k].object_type for k in ordered], dtype=torch.int64),
        traj=torch.from_numpy(traj),
        valid=torch.from_numpy(valid),
        velocity=torch.from_numpy(velocity),
        num_eval=len(eval_idx),
        road_edges=road,
        lanes=lane_lines,
        signal_lane=signal_lane,
        signal_state=signal_state,
        signal_stop=signal_stop,
    )
