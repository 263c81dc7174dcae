"""Rule-based drivers of the controlled agents for the baselines (``eval drive --policy NAME``).

- ``constant-velocity`` (:data:`CONSTANT_VELOCITY`): zero actions: each agent keeps the speed it
  spawned with and holds its wheels straight (on the kinematic tier, exactly constant velocity).
- ``idm`` (:data:`IDM`): each agent follows its route (its logged path on converted scenes) with the
  IDM speed law of :mod:`~scenefactory.tasks.driving.idm` (Waymax ``IDMRoutePolicy`` parameters;
  desired speed: the agent's top logged speed, or the task's vehicle top speed without a log),
  braking for the nearest object its box would meet within 10 m along its route (agents and replayed
  objects alike). Acceleration ``a`` becomes the action ``a / max_accel`` (``a / max_brake`` when
  braking), clipped to [-1, 1]; the steering is pure pursuit (Coulter 1992) of the route point
  ``max(5 m, 1 s x speed)`` ahead: ``delta = atan(2 L sin(alpha) / d)``, with ``L`` the wheelbase,
  ``alpha`` the point's bearing and ``d`` its distance, as the action ``delta / max_steer``.
"""

from __future__ import annotations

import torch

from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.idm import IdmParams, idm_acceleration, leader_on_path
from scenefactory.tasks.driving.observations import route_points_at

CONSTANT_VELOCITY = "constant-velocity"
IDM = "idm"
DRIVER_IDM = IdmParams()
"""The IDM of the ``idm`` driver: Waymax ``IDMRoutePolicy`` defaults (module docstring)."""
PURSUIT_MIN_M = 5.0
PURSUIT_TIME_S = 1.0


def constant_velocity_actions(env: DrivingEnv) -> torch.Tensor:
    """(W, K, 2) zero actions."""
    return torch.zeros(env.num_worlds, env.agents_per_world, 2, device=env.device)


def desired_speeds(env: DrivingEnv) -> torch.Tensor:
    """(W, K) each agent's top logged speed (from consecutive valid logged positions), or the vehicle's
    top speed where its world's scene has no log."""
    d = (env.log_xy[:, :, 1:] - env.log_xy[:, :, :-1]).norm(dim=-1) / env.cfg.dt_s
    ok = env.log_valid[:, :, 1:] & env.log_valid[:, :, :-1]
    top = torch.where(ok, d, 0.0).amax(-1) if d.shape[-1] else torch.zeros_like(env.s_prev)
    has_log = ok.any(-1) if d.shape[-1] else torch.zeros_like(env.active)
    return torch.where(has_log, top, env.cfg.vehicle.max_speed_mps)


def idm_actions(env: DrivingEnv, params: IdmParams = DRIVER_IDM) -> torch.Tensor:
    """(W, K, 2) ``[steer, accel]`` of the ``idm`` driver (module docstring) in ``env``'s current state."""
    st = env.engine.state()
    w, k = env.num_worlds, env.agents_per_world
    vp = env.cfg.vehicle
    s_now, end = env.s_prev, env.route_end_s
    probes = torch.arange(1, params.lookahead_points + 1, device=env.device, dtype=torch.float32)
    probe_m = probes * (params.lookahead_m / params.lookahead_points)  # (P,)
    s_q = torch.minimum(s_now[..., None] + probe_m, end[..., None])
    s_back = torch.minimum(s_q - 0.5, end[..., None] - 0.5).clamp_min(0.0)
    ahead = route_points_at(env.route_xy, env.route_s, s_q)  # (W, K, P, 2)
    behind = route_points_at(env.route_xy, env.route_s, s_back)
    tangent = ahead - behind
    yaw = torch.where(
        tangent.norm(dim=-1) > 1e-6, torch.atan2(tangent[..., 1], tangent[..., 0]), st.yaw[..., None]
    )
    objs = env._objects(st)
    speed = objs[2].norm(dim=-1)
    gap, lead_v = leader_on_path(
        ahead,
        yaw,
        probe_m.expand(w, k, -1),
        env.length,
        env.width,
        objs[0],
        objs[1],
        objs[3],
        objs[4],
        speed,
        objs[5],
        torch.arange(k, device=env.device),
    )
    v = st.speed.clamp_min(0.0)
    accel = idm_acceleration(v, desired_speeds(env), gap, lead_v, params)
    throttle = torch.where(accel >= 0, accel / vp.max_accel_mps2, accel / vp.max_brake_mps2).clamp(-1.0, 1.0)
    look = torch.clamp(PURSUIT_TIME_S * v, min=PURSUIT_MIN_M)
    target = route_points_at(env.route_xy, env.route_s, torch.minimum(s_now + look, end)[..., None])[
        ..., 0, :
    ]
    rel = target - st.pos_xy
    dist = rel.norm(dim=-1).clamp_min(1.0)
    alpha = torch.atan2(rel[..., 1], rel[..., 0]) - st.yaw
    delta = torch.atan2(2.0 * vp.wheelbase_m * torch.sin(alpha), dist)
    steer = (delta / vp.max_steer_rad).clamp(-1.0, 1.0)
    return torch.stack((steer, throttle), -1) * env.active[..., None]
