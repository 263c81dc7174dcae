"""The WOSAC metric features of a batch of joint scenes, batched over rollouts, in torch.

Follows waymo-open-dataset 1.6.7 ``wdl_limited/sim_agents_metrics/``:

- :func:`kinematic_features`: ``trajectory_features.compute_kinematic_features`` (central
  differences over the 91 steps, history prepended; speed the 3-D norm of the position difference;
  heading differences wrapped after doubling; NaN where a difference has no neighbour);
- :func:`distance_to_nearest_object`: ``interaction_features.compute_distance_to_nearest_object``
  (boxes with corners rounded by 0.7 of half the smaller side, signed distance, self and invalid
  pairs at 1e10);
- :func:`time_to_collision`: ``interaction_features.compute_time_to_collision_with_object_in_front``
  (2-D speeds, following rule: ahead of the front, |yaw difference| <= 75 deg, lateral overlap, and
  <= 10 deg when the overlap is under 0.5 m; at most 5 s);
- :func:`distance_to_road_edge`: ``map_metric_features.compute_distance_to_road_edge`` (the most
  off-road bottom corner; -1e10 where invalid);
- :func:`red_light_violation`: ``traffic_light_features.compute_red_light_violation``;
- :func:`joint_scene_features`: ``metric_features.compute_metric_features`` for the SIM_AGENTS
  challenge: history from the log, box sizes of the current step, every simulated step valid (or
  the log's validity for the logged scene), features sliced to the 80 simulated steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from scenefactory.evaluation.wosac import geometry
from scenefactory.evaluation.wosac.config import (
    COLLISION_DISTANCE_THRESHOLD_M,
    CORNER_ROUNDING_FACTOR,
    CURRENT_TIME_INDEX,
    EXTREMELY_LARGE_DISTANCE,
    LANE_STATE_ARROW_STOP,
    LANE_STATE_STOP,
    MAX_HEADING_DIFF_FOR_SMALL_OVERLAP_RAD,
    MAX_HEADING_DIFF_RAD,
    MAXIMUM_TIME_TO_COLLISION_S,
    OFFROAD_DISTANCE_THRESHOLD_M,
    SMALL_OVERLAP_THRESHOLD_M,
    STEP_S,
    Z_STRETCH_FACTOR,
)
from scenefactory.evaluation.wosac.scenario import WosacScenario

_FUTURE = slice(CURRENT_TIME_INDEX + 1, None)
_NEAREST_K = 3
"""Objects whose exact box distance is computed first (by a lower bound); the rest only if needed."""


@dataclass(frozen=True)
class Features:
    """Per joint scene b, evaluated object e and simulated step t: tensors (B, E, 80) unless said.

    ``valid`` (B, E, 80); ``ade`` (B, E) average 3-D displacement from the log over the log's valid
    steps (history included, as the official code does); the rest as named in ``MetricFeatures``.
    """

    valid: torch.Tensor
    ade: torch.Tensor
    linear_speed: torch.Tensor
    linear_acceleration: torch.Tensor
    angular_speed: torch.Tensor
    angular_acceleration: torch.Tensor
    distance_to_nearest_object: torch.Tensor
    collision_per_step: torch.Tensor
    time_to_collision: torch.Tensor
    distance_to_road_edge: torch.Tensor
    offroad_per_step: torch.Tensor
    traffic_light_violation_per_step: torch.Tensor


def _central_diff(t: torch.Tensor) -> torch.Tensor:
    pad = torch.full_like(t[..., :1], math.nan)
    return torch.cat([pad, (t[..., 2:] - t[..., :-2]) / 2, pad], dim=-1)


def _wrap(angle: torch.Tensor) -> torch.Tensor:
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def kinematic_features(
    x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, heading: torch.Tensor, step_s: float = STEP_S
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Linear speed (m/s), linear acceleration (m/s^2), angular speed (rad/s) and angular
    acceleration (rad/s^2) of (..., T) trajectories by central differences; NaN at the ends (one step
    for speeds, two for accelerations)."""
    dpos = _central_diff(torch.stack([x, y, z], dim=0))
    speed = torch.linalg.norm(dpos, dim=0) / step_s
    accel = _central_diff(speed) / step_s
    dh_step = _wrap(_central_diff(heading) * 2) / 2
    d2h_step = _wrap(_central_diff(dh_step) * 2) / 2
    return speed, accel, dh_step / step_s, d2h_step / step_s**2


def kinematic_validity(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``compute_kinematic_validity``: (..., T) validity of speeds (both neighbours valid) and of
    accelerations (applied twice), False at the ends."""

    def central_and(v: torch.Tensor) -> torch.Tensor:
        pad = torch.zeros_like(v[..., :1])
        return torch.cat([pad, v[..., 2:] & v[..., :-2], pad], dim=-1)

    speed_valid = central_and(valid)
    return speed_valid, central_and(speed_valid)


def distance_to_nearest_object(
    traj: torch.Tensor, valid: torch.Tensor, num_eval: int, k_first: int = _NEAREST_K
) -> torch.Tensor:
    """(B, E, T) signed distance (m) from each of the first ``num_eval`` objects to the nearest other
    valid object, of boxes ``traj`` (B, N, T, 7) with rounded corners; 1e10 with none or when invalid.

    The exact distance is computed for the ``k_first`` objects of least lower bound
    ``|centre distance| - r_e - r_j`` (r: core half diagonal plus the rounding), and for all objects
    wherever the least exact distance found exceeds the next lower bound.
    """
    b, n, t, _ = traj.shape
    length, width = traj[..., 4], traj[..., 5]
    shrink = torch.minimum(length, width) * CORNER_ROUNDING_FACTOR / 2.0
    core = geometry.box_corners_xy(
        traj[..., 0], traj[..., 1], length - 2.0 * shrink, width - 2.0 * shrink, traj[..., 3]
    )  # (B, N, T, 4, 2)
    radius = 0.5 * torch.sqrt((length - 2.0 * shrink).square() + (width - 2.0 * shrink).square()) + shrink
    centre = traj[..., :2]
    e = num_eval
    pair_ok = valid[:, :e, None] & valid[:, None]  # (B, E, N, T)
    pair_ok &= ~torch.eye(e, n, dtype=torch.bool)[None, :, :, None]
    lower = (
        torch.linalg.norm(centre[:, :e, None] - centre[:, None], dim=-1)
        - radius[:, :e, None]
        - radius[:, None]
    )
    lower = torch.where(pair_ok, lower, math.inf)
    lower = lower.permute(0, 1, 3, 2)  # (B, E, T, N)
    k = min(k_first, n)
    lb_sorted, order = torch.sort(lower, dim=-1)
    cand = order[..., :k]
    cand_ok = torch.isfinite(lb_sorted[..., :k])

    def exact(bi: torch.Tensor, ei: torch.Tensor, ti: torch.Tensor, ji: torch.Tensor) -> torch.Tensor:
        d = geometry.box_signed_distance(core[bi, ei, ti], core[bi, ji, ti])
        return d - shrink[bi, ei, ti] - shrink[bi, ji, ti]

    grid = torch.meshgrid(torch.arange(b), torch.arange(e), torch.arange(t), indexing="ij")
    bi, ei, ti = (g[..., None].expand(-1, -1, -1, k) for g in grid)
    d = exact(bi.reshape(-1), ei.reshape(-1), ti.reshape(-1), cand.reshape(-1)).reshape(b, e, t, k)
    d = torch.where(cand_ok, d, EXTREMELY_LARGE_DISTANCE)
    best = d.min(dim=-1).values
    if k < n:
        redo = best > lb_sorted[..., k]
        if bool(redo.any()):
            rb, re_, rt = torch.nonzero(redo, as_tuple=True)
            m = rb.shape[0]
            jj = torch.arange(n).expand(m, n)
            full = exact(
                rb[:, None].expand(m, n).reshape(-1),
                re_[:, None].expand(m, n).reshape(-1),
                rt[:, None].expand(m, n).reshape(-1),
                jj.reshape(-1),
            ).reshape(m, n)
            ok = pair_ok[rb, re_, :, rt]
            best[rb, re_, rt] = torch.where(ok, full, EXTREMELY_LARGE_DISTANCE).min(dim=-1).values
    return best


def _rotate(xy: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack([c * xy[..., 0] - s * xy[..., 1], s * xy[..., 0] + c * xy[..., 1]], dim=-1)


def time_to_collision(
    traj: torch.Tensor, valid: torch.Tensor, num_eval: int, step_s: float = STEP_S
) -> torch.Tensor:
    """(B, E, T) seconds until each evaluated object reaches the object it follows at constant
    speeds, at most 5 s (5 s when it follows none or is not closing in)."""
    x, y, yaw = traj[..., 0], traj[..., 1], traj[..., 3]
    speed = kinematic_features(x, y, torch.zeros_like(x), yaw, step_s)[0]  # (B, N, T)
    e = num_eval
    size = traj[..., 4:6]
    ego_xy, ego_yaw, ego_size = traj[:, :e, None, :, :2], yaw[:, :e, None], size[:, :e, None]
    yaw_diff = (yaw[:, None] - ego_yaw).abs()  # (B, E, N, T)
    cos_d, sin_d = torch.cos(yaw_diff).abs(), torch.sin(yaw_diff).abs()
    half = size[:, None] / 2.0
    long_off = half[..., 0] * cos_d + half[..., 1] * sin_d
    lat_off = half[..., 0] * sin_d + half[..., 1] * cos_d
    rel = _rotate(traj[:, None, :, :, :2] - ego_xy, -ego_yaw)
    long_d = rel[..., 0] - ego_size[..., 0] / 2.0 - long_off
    lat_overlap = rel[..., 1].abs() - ego_size[..., 1] / 2.0 - lat_off
    following = (long_d > 0.0) & (yaw_diff <= MAX_HEADING_DIFF_RAD) & (lat_overlap < 0.0)
    following &= (lat_overlap < -SMALL_OVERLAP_THRESHOLD_M) | (
        yaw_diff <= MAX_HEADING_DIFF_FOR_SMALL_OVERLAP_RAD
    )
    ok = valid[:, None] & following
    masked = long_d + (1.0 - ok.to(long_d.dtype)) * EXTREMELY_LARGE_DISTANCE
    dist, ahead = masked.min(dim=2)  # (B, E, T)
    ahead_speed = torch.gather(speed, 1, ahead)
    rel_speed = speed[:, :e] - ahead_speed
    ttc = torch.minimum(
        dist / torch.where(rel_speed > 0, rel_speed, 1.0), torch.tensor(MAXIMUM_TIME_TO_COLLISION_S)
    )
    return torch.where(rel_speed > 0.0, ttc, MAXIMUM_TIME_TO_COLLISION_S)


def distance_to_road_edge(scn: WosacScenario, traj: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, E, T) signed distance (m) of the most off-road bottom corner of each evaluated box to the
    road edges (positive off-road), boxes ``traj`` (B, E, T, 7); -1e10 where invalid."""
    corners = geometry.box_corners_xy(traj[..., 0], traj[..., 1], traj[..., 4], traj[..., 5], traj[..., 3])
    z = (traj[..., 2] - traj[..., 6] * 0.5)[..., None, None].expand(*corners.shape[:-1], 1)
    pts = torch.cat([corners, z], dim=-1)
    seg = geometry.road_edge_segments(scn.road_edges.xyzv, scn.road_edges.cyclic)
    d = geometry.polyline_signed_distance(pts.reshape(-1, 3), seg, Z_STRETCH_FACTOR).reshape(
        corners.shape[:-1]
    )
    return torch.where(valid, d.max(dim=-1).values, -EXTREMELY_LARGE_DISTANCE)


def red_light_violation(scn: WosacScenario, xy: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, E, T) whether each evaluated object crosses, between step t-1 and t, the stop point of a
    red (ARROW_STOP or STOP) signal of the surface-street lane it is nearest to at step t, given its
    positions ``xy`` (B, E, T, 2) over the steps from the current one (T includes it: the result's
    first step is always False)."""
    if scn.lanes is None or scn.signal_lane is None or scn.signal_state is None or scn.signal_stop is None:
        return torch.zeros(valid.shape, dtype=torch.bool)
    t = xy.shape[2]
    steps = slice(scn.signal_lane.shape[0] - t, None)
    ts_lane, ts_state, ts_stop = scn.signal_lane[steps], scn.signal_state[steps], scn.signal_stop[steps]
    lanes = scn.lanes
    is_stop = (ts_state == LANE_STATE_ARROW_STOP) | (ts_state == LANE_STATE_STOP)
    lane_match = lanes.ids[None, None] == ts_lane[..., None]  # (T, K, Q)
    ts_row = torch.argmax(lane_match.to(torch.int64), dim=-1)
    ts_lane_ok = lane_match.any(dim=-1)
    seg_rows = lanes.xyzv[ts_row]  # (T, K, L, 4)
    kk = ts_lane.shape[1]
    col = geometry.lane_segment_column(ts_stop.reshape(-1, 2), seg_rows.reshape(t * kk, -1, 4)).reshape(t, kk)
    fence0 = torch.gather(seg_rows, 2, col[..., None, None].expand(-1, -1, 1, 4))[..., 0, :2]
    fence1 = torch.gather(seg_rows, 2, (col + 1)[..., None, None].expand(-1, -1, 1, 4))[..., 0, :2]
    ste = fence1 - fence0
    len2 = (ste * ste).sum(-1)

    def rel_t(v: torch.Tensor) -> torch.Tensor:
        num = v[..., 0] * ste[..., 0] + v[..., 1] * ste[..., 1]
        return torch.where(len2 != 0, num / torch.where(len2 != 0, len2, 1.0), 0.0)

    stop_t = rel_t(ts_stop - fence0)
    obj_t = rel_t(xy[:, :, :, None] - fence0[None, None])
    behind, ahead = obj_t < stop_t, obj_t > stop_t
    crossed = torch.cat([torch.zeros_like(behind[:, :, :1]), behind[:, :, :-1] & ahead[:, :, 1:]], dim=2)
    # Every condition but the lane match first: the nearest lane is needed only where they all hold.
    could = valid[..., None] & is_stop & ts_lane_ok & crossed  # (B, E, T, K)
    out = torch.zeros(valid.shape, dtype=torch.bool)
    where = could.any(dim=-1)
    if bool(where.any()):
        rows, _, ends = geometry.lane_starts(lanes.xyzv)
        current = lanes.ids[geometry.nearest_lane_start_index(xy[where], rows, ends)]  # (W,)
        ti = torch.nonzero(where, as_tuple=True)[2]
        out[where] = (could[where] & (current[:, None] == ts_lane[ti])).any(dim=-1)
    return out


def joint_scene_traj(scn: WosacScenario, future: torch.Tensor) -> torch.Tensor:
    """(B, N, 91, 7) boxes of joint scenes: the logged history, then ``future`` (B, N, 80, 4) x, y, z,
    heading, with the sizes of the current step (``converters.joint_scene_to_trajectories``)."""
    b = future.shape[0]
    hist = scn.traj[None, :, : CURRENT_TIME_INDEX + 1].expand(b, -1, -1, -1)
    sizes = scn.traj[None, :, CURRENT_TIME_INDEX, 4:7][:, :, None].expand(b, -1, future.shape[2], -1)
    return torch.cat([hist, torch.cat([future, sizes], dim=-1)], dim=2)


def joint_scene_features(scn: WosacScenario, future: torch.Tensor, valid_future: torch.Tensor) -> Features:
    """The features of B joint scenes: ``future`` (B, N, 80, 4) x, y, z, heading of every simulated
    object, ``valid_future`` (B, N, 80) (all True for a simulation; the log's validity for the log)."""
    e = scn.num_eval
    traj = joint_scene_traj(scn, future.to(torch.float32))
    b = traj.shape[0]
    valid = torch.cat([scn.valid[None, :, : CURRENT_TIME_INDEX + 1].expand(b, -1, -1), valid_future], dim=2)
    ev = traj[:, :e]
    speed, accel, ang_speed, ang_accel = kinematic_features(ev[..., 0], ev[..., 1], ev[..., 2], ev[..., 3])
    disp = torch.linalg.norm(ev[..., :3] - scn.traj[None, :e, :, :3], dim=-1)
    log_valid = scn.valid[None, :e]
    ade = torch.where(log_valid, disp, 0.0).sum(-1) / log_valid.sum(-1).to(disp.dtype)
    fut = traj[:, :, _FUTURE]
    fut_valid = valid[:, :, _FUTURE]
    dist_obj = distance_to_nearest_object(fut, fut_valid, e)
    ttc = time_to_collision(traj, valid, e)[..., _FUTURE]
    dist_edge = distance_to_road_edge(scn, fut[:, :e], fut_valid[:, :e])
    red = red_light_violation(scn, ev[:, :, CURRENT_TIME_INDEX:, :2], valid[:, :e, CURRENT_TIME_INDEX:])[
        ..., 1:
    ]
    return Features(
        valid=valid[:, :e, _FUTURE],
        ade=ade,
        linear_speed=speed[..., _FUTURE],
        linear_acceleration=accel[..., _FUTURE],
        angular_speed=ang_speed[..., _FUTURE],
        angular_acceleration=ang_accel[..., _FUTURE],
        distance_to_nearest_object=dist_obj,
        collision_per_step=dist_obj < COLLISION_DISTANCE_THRESHOLD_M,
        time_to_collision=ttc,
        distance_to_road_edge=dist_edge,
        offroad_per_step=dist_edge > OFFROAD_DISTANCE_THRESHOLD_M,
        traffic_light_violation_per_step=red,
    )
