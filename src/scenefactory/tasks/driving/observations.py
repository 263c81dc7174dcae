"""Observation terms of the driving task: pure functions of batched tensors, each ``(W, K, D_i)``.

Everything is in the agent's ego frame (x forward, y left) and scaled to roughly unit range; the
policy additionally normalizes its inputs. Layout per agent (concatenated in this order):

- ego (11): speed/10, yaw rate, steer/δ_max, accel/a_max, goal x/50, goal y/50 (ego frame, clipped
  to ±2), goal distance/50, sin and cos of the heading error to the route tangent, lateral offset
  from the route/2, fraction of the episode left.
- route lookahead (2·n): route points ``route_lookahead_m`` ahead of the agent's projection, /30.
- road (k·8): the k nearest road-graph points within range: x/range, y/range, tangent (dx, dy), a
  one-hot of lane centre / road line / road edge, and a valid flag (all zero when absent).
- neighbours (m·10): the m nearest other active agents and replayed logged objects within range:
  relative x, y /range, sin and cos of relative yaw, relative velocity /10 (ego frame), length/5,
  width/5, TTC/10 (clipped to 1), valid flag.
- friction (1, optional): the road friction coefficient of the world.
- signals (8, optional, ``ObservationConfig.traffic_signals``): the next traffic signal on the
  agent's route within 50 m: distance along the route /50 (1 when none), a one-hot of red / yellow
  / green / none-or-unknown, and whether the agent has stopped for it; then the next stop sign:
  distance /50 (1 when none) and whether it has stopped for it.
"""

from __future__ import annotations

import torch

from scenefactory.tasks.driving.geometry import smallest_k, world_to_ego
from scenefactory.tasks.driving.signals import SIGNAL, STOP_SIGN, state_one_hot

EGO_DIM = 11
ROAD_FEATURES = 8
NEIGHBOR_FEATURES = 10
SIGNAL_FEATURES = 8
SIGNAL_RANGE_M = 50.0


def ego_obs(
    speed: torch.Tensor,
    yaw_rate: torch.Tensor,
    steer_norm: torch.Tensor,
    accel_norm: torch.Tensor,
    goal_ego: torch.Tensor,
    heading_error: torch.Tensor,
    lateral_m: torch.Tensor,
    time_left_frac: torch.Tensor,
) -> torch.Tensor:
    """Ego features (W, K, 11) from per-agent (W, K) tensors and ``goal_ego`` (W, K, 2)."""
    goal_dist = goal_ego.norm(dim=-1)
    return torch.stack(
        (
            speed / 10.0,
            yaw_rate,
            steer_norm,
            accel_norm,
            (goal_ego[..., 0] / 50.0).clamp(-2, 2),
            (goal_ego[..., 1] / 50.0).clamp(-2, 2),
            (goal_dist / 50.0).clamp(max=2.0),
            torch.sin(heading_error),
            torch.cos(heading_error),
            (lateral_m / 2.0).clamp(-5, 5),
            time_left_frac,
        ),
        dim=-1,
    )


def route_points_at(route_xy: torch.Tensor, route_s: torch.Tensor, s_query: torch.Tensor) -> torch.Tensor:
    """Points at arc lengths ``s_query`` (W, K, n) along per-agent routes (W, K, R, 2) with cumulative
    arc length ``route_s`` (W, K, R, strictly increasing, padding beyond the end). Clamped at the ends."""
    r = route_s.shape[-1]
    idx = torch.searchsorted(route_s.contiguous(), s_query.contiguous()).clamp(1, r - 1)
    s0 = torch.gather(route_s, -1, idx - 1)
    s1 = torch.gather(route_s, -1, idx)
    frac = ((s_query - s0) / (s1 - s0).clamp(min=1e-6)).clamp(0.0, 1.0).unsqueeze(-1)
    gidx = idx.unsqueeze(-1).expand(*idx.shape, 2)
    p0 = torch.gather(route_xy, -2, gidx - 1)
    p1 = torch.gather(route_xy, -2, gidx)
    return p0 + frac * (p1 - p0)


def route_lookahead_obs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    route_xy: torch.Tensor,
    route_s: torch.Tensor,
    s_now: torch.Tensor,
    route_end_s: torch.Tensor,
    lookahead_m: torch.Tensor,
) -> torch.Tensor:
    """Route points ``lookahead_m`` (n,) ahead of ``s_now`` (W, K), in the ego frame /30 → (W, K, 2n)."""
    s_q = torch.minimum(s_now.unsqueeze(-1) + lookahead_m, route_end_s.unsqueeze(-1))
    pts = route_points_at(route_xy, route_s, s_q)
    ego = world_to_ego(pts, pos_xy.unsqueeze(-2), yaw.unsqueeze(-1)) / 30.0
    return ego.flatten(-2)


def road_obs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    near_xy: torch.Tensor,
    near_feat: torch.Tensor,
    near_dist: torch.Tensor,
    near_valid: torch.Tensor,
    range_m: float,
) -> torch.Tensor:
    """The k nearest road points of each agent → (W, K, k·8).

    ``near_xy`` (W, K, k, 2) and ``near_feat`` (W, K, k, 5) are the points nearest first, with their
    distance ``near_dist`` and ``near_valid`` flag (W, K, k) (the road index's answer,
    :meth:`~scenefactory.tasks.driving.road_index.RoadPointIndex.nearest`); points beyond
    ``range_m`` count as absent."""
    valid = near_valid & (near_dist <= range_m)
    rel = world_to_ego(near_xy, pos_xy.unsqueeze(-2), yaw.unsqueeze(-1)) / range_m
    c, s = torch.cos(yaw).unsqueeze(-1), torch.sin(yaw).unsqueeze(-1)
    tx, ty = near_feat[..., 0], near_feat[..., 1]
    tan_ego = torch.stack((c * tx + s * ty, -s * tx + c * ty), dim=-1)
    out = torch.cat((rel, tan_ego, near_feat[..., 2:], valid.unsqueeze(-1).float()), dim=-1)
    return (out * valid.unsqueeze(-1)).flatten(-2)


def neighbor_select(
    pos_xy: torch.Tensor, active: torch.Tensor, k: int, m: int, range_m: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which objects each controlled agent observes: the ``m`` nearest other active objects within
    ``range_m``, nearest first, equal distances in object order → ``(idx (W, k, m) int64, valid
    (W, k, m) bool)`` (``idx`` 0 where not valid).

    Objects are ``pos_xy`` (W, M, 2) and ``active`` (W, M), the ``k`` controlled agents first. The
    distances are compared squared, from the coordinate differences (``torch.cdist`` would take its
    matrix-product form here, whose rounding a native kernel cannot reproduce)."""
    n_obj = pos_xy.shape[1]
    dx = pos_xy[:, None, :, 0] - pos_xy[:, :k, None, 0]  # (W, K, M)
    dy = pos_xy[:, None, :, 1] - pos_xy[:, :k, None, 1]
    d2 = dx * dx + dy * dy
    self_mask = torch.arange(k, device=pos_xy.device)[:, None] == torch.arange(n_obj, device=pos_xy.device)
    usable = active.unsqueeze(1) & ~self_mask & (d2 <= range_m * range_m)
    idx, _, valid = smallest_k(torch.where(usable, d2, torch.inf), m)
    return idx, valid


def neighbor_obs(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    ttc_s: torch.Tensor,
    m: int,
    range_m: float,
) -> torch.Tensor:
    """The m nearest other active objects of each controlled agent → (W, K, m·10)
    (:func:`neighbor_select`, then :func:`neighbor_features`).

    Objects are ``(W, M, ...)`` (``pos_xy``, ``yaw``, ``vel_xy``, ``length``, ``width``, ``active``):
    the K controlled agents first, then any replayed objects; ``ttc_s`` is (W, K, M), so its
    second dimension says how many of the objects are the controlled agents asking.
    """
    idx, valid = neighbor_select(pos_xy, active, ttc_s.shape[1], m, range_m)
    return neighbor_features(pos_xy, yaw, vel_xy, length, width, ttc_s, idx, valid, range_m)


def neighbor_features(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    ttc_s: torch.Tensor,
    idx: torch.Tensor,
    valid: torch.Tensor,
    range_m: float,
) -> torch.Tensor:
    """The features (module docstring) of the objects ``idx`` (W, K, m) each agent observes (zeros
    where not ``valid``) → (W, K, m·10)."""
    w, n_obj = pos_xy.shape[:2]
    k, m = idx.shape[1], idx.shape[2]
    ego_pos, ego_yaw, ego_vel = pos_xy[:, :k], yaw[:, :k], vel_xy[:, :k]

    def pick(x: torch.Tensor) -> torch.Tensor:
        # x: (W, M) or (W, M, C) → (W, K, m, ...) values of the selected neighbours
        if x.dim() == 2:
            return torch.gather(x.unsqueeze(1).expand(w, k, n_obj), 2, idx)
        c = x.shape[-1]
        return torch.gather(x.unsqueeze(1).expand(w, k, n_obj, c), 2, idx.unsqueeze(-1).expand(w, k, m, c))

    rel_pos = world_to_ego(pick(pos_xy), ego_pos.unsqueeze(-2), ego_yaw.unsqueeze(-1)) / range_m
    rel_yaw = pick(yaw) - ego_yaw.unsqueeze(-1)
    rel_vel_w = pick(vel_xy) - ego_vel.unsqueeze(-2)
    c, s = torch.cos(ego_yaw).unsqueeze(-1), torch.sin(ego_yaw).unsqueeze(-1)
    rel_vel = torch.stack(
        (c * rel_vel_w[..., 0] + s * rel_vel_w[..., 1], -s * rel_vel_w[..., 0] + c * rel_vel_w[..., 1]),
        dim=-1,
    )
    ttc = torch.gather(ttc_s, 2, idx)
    feats = torch.cat(
        (
            rel_pos,
            torch.sin(rel_yaw).unsqueeze(-1),
            torch.cos(rel_yaw).unsqueeze(-1),
            rel_vel / 10.0,
            (pick(length) / 5.0).unsqueeze(-1),
            (pick(width) / 5.0).unsqueeze(-1),
            (ttc / 10.0).clamp(0.0, 1.0).unsqueeze(-1),
            valid.unsqueeze(-1).float(),
        ),
        dim=-1,
    )
    return torch.where(valid.unsqueeze(-1), feats, torch.zeros_like(feats)).flatten(-2)


def signal_obs(
    s_now: torch.Tensor,
    stop_s: torch.Tensor,
    stop_kind: torch.Tensor,
    passed: torch.Tensor,
    stopped: torch.Tensor,
    codes: torch.Tensor,
    range_m: float = SIGNAL_RANGE_M,
) -> torch.Tensor:
    """The next signal and stop sign ahead on each route → (W, K, 8) (layout in the module docstring).

    ``s_now`` (W, K) route progress [m]; per route stop (W, K, M): arc length ``stop_s``, ``stop_kind``
    (0 padding, ``SIGNAL``, ``STOP_SIGN``), ``passed`` and ``stopped`` flags and the signal state
    ``codes`` now (WOMD codes; ignored for stop signs).
    """
    if stop_s.shape[-1] == 0:  # no route meets a stop: one padding column
        pad = stop_s.new_zeros((*stop_s.shape[:-1], 1))
        stop_s, stop_kind = pad + 1e9, pad.long()
        passed, stopped, codes = pad.bool(), pad.bool(), pad.long()
    dist = stop_s - s_now.unsqueeze(-1)
    ahead = (stop_kind > 0) & ~passed & (dist <= range_m)
    parts = []
    for kind in (SIGNAL, STOP_SIGN):
        d, idx = torch.where(ahead & (stop_kind == kind), dist, torch.inf).min(-1)
        found = torch.isfinite(d)
        parts.append(torch.where(found, (d / range_m).clamp(0.0, 1.0), 1.0).unsqueeze(-1))
        if kind == SIGNAL:
            code = torch.gather(codes, -1, idx.unsqueeze(-1)).squeeze(-1)
            parts.append(state_one_hot(torch.where(found, code, 0)))
        halted = torch.gather(stopped, -1, idx.unsqueeze(-1)).squeeze(-1) & found
        parts.append(halted.float().unsqueeze(-1))
    return torch.cat(parts, dim=-1)


def observation_dim(
    num_lookahead: int,
    num_road_points: int,
    num_neighbors: int,
    friction_aware: bool,
    traffic_signals: bool = False,
) -> int:
    """Length of the flat per-agent observation vector."""
    return (
        EGO_DIM
        + 2 * num_lookahead
        + ROAD_FEATURES * num_road_points
        + NEIGHBOR_FEATURES * num_neighbors
        + int(friction_aware)
        + SIGNAL_FEATURES * int(traffic_signals)
    )
