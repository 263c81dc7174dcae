"""Sim-agent policies for WOSAC: each simulates every object of a scenario (every track valid at the
current step) for 80 steps and returns the joint scenes' future ``(R, N, 80, 4)`` x, y, z, heading.

- ``log``: the logged future copied as stored, valid or not (the official
  ``converters.scenario_to_joint_scene``, the challenge's "logged oracle"); R identical rollouts.
- ``constant_velocity``: each object keeps its logged velocity and heading of the current step.
- ``idm``: each object drives along its own logged path (its valid logged positions from the current
  step on) with the IDM speed law of :mod:`scenefactory.tasks.driving.idm` (Waymax
  ``IDMRoutePolicy`` parameters), braking for the objects its box would meet within 10 m along its
  path. Two choices differ from Waymax's defaults and are ours: the desired speed is the object's
  top logged speed (Waymax: 30 m/s for everyone), and an object whose log ends slower than 1 m/s
  (Waymax's static-speed threshold) treats the end of its path as a standing obstacle, so it stops
  where it stopped in the log (at a red light, behind a queue); the others continue straight past
  their path's end, as Waymax extrapolates. Deterministic: R identical rollouts.
- ``random``: each object is a kinematic bicycle (Waymax ``InvertibleBicycleModel`` equations:
  x' = x + v cos(yaw) dt + a cos(yaw) dt^2 / 2, yaw' = yaw + k (v dt + a dt^2 / 2), v' = v + a dt,
  kept >= 0) from its logged state at the current step, with acceleration a ~ U(-6, 6) m/s^2 and
  curvature k ~ U(-0.3, 0.3) 1/m drawn independently every step (Waymax's bicycle limits).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from scenefactory.evaluation.wosac.config import CURRENT_TIME_INDEX, N_SIMULATION_STEPS, STEP_S
from scenefactory.evaluation.wosac.scenario import WosacScenario
from scenefactory.tasks.driving.idm import IdmParams, idm_acceleration, idm_speed, leader_on_path

STATIC_SPEED_MPS = 1.0
"""Waymax's ``_STATIC_SPEED_THRESHOLD``: a log ending slower than this ends at a standing obstacle."""
RANDOM_MAX_ACCEL_MPS2 = 6.0
RANDOM_MAX_CURVATURE = 0.3
_EXTEND_M = 500.0
DEFAULT_IDM = IdmParams()
"""The IDM parameters of the ``idm`` policy (Waymax ``IDMRoutePolicy`` defaults)."""


def log_replay(scn: WosacScenario, rollouts: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """The logged future as stored (invalid steps keep their placeholder values)."""
    fut = scn.traj[:, CURRENT_TIME_INDEX + 1 :, :4]
    return fut[None].expand(rollouts, -1, -1, -1).clone()


def constant_velocity(
    scn: WosacScenario, rollouts: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Positions advanced at the current step's logged velocity; heading and z held."""
    cur = scn.traj[:, CURRENT_TIME_INDEX, :4]
    t = torch.arange(1, N_SIMULATION_STEPS + 1, dtype=torch.float32) * STEP_S
    vel = scn.velocity[:, CURRENT_TIME_INDEX]
    xy = cur[:, None, :2] + vel[:, None, :] * t[None, :, None]
    rest = cur[:, None, 2:4].expand(-1, N_SIMULATION_STEPS, -1)
    return torch.cat([xy, rest], dim=-1)[None].expand(rollouts, -1, -1, -1).clone()


def random_bicycle(
    scn: WosacScenario, rollouts: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Kinematic bicycles driven by uniform random acceleration and curvature (module docstring)."""
    n = scn.num_objects
    cur = scn.traj[:, CURRENT_TIME_INDEX]
    x = cur[:, 0].expand(rollouts, n).clone()
    y = cur[:, 1].expand(rollouts, n).clone()
    yaw = cur[:, 3].expand(rollouts, n).clone()
    vel = scn.velocity[:, CURRENT_TIME_INDEX]
    v = (
        (vel[:, 0] * torch.cos(cur[:, 3]) + vel[:, 1] * torch.sin(cur[:, 3]))
        .clamp_min(0.0)
        .expand(rollouts, n)
    )
    shape = (N_SIMULATION_STEPS, rollouts, n)
    accel = (torch.rand(shape, generator=generator) * 2 - 1) * RANDOM_MAX_ACCEL_MPS2
    kappa = (torch.rand(shape, generator=generator) * 2 - 1) * RANDOM_MAX_CURVATURE
    out = torch.empty(rollouts, n, N_SIMULATION_STEPS, 4)
    dt = STEP_S
    for k in range(N_SIMULATION_STEPS):
        a = accel[k]
        c, s = torch.cos(yaw), torch.sin(yaw)
        x = x + v * c * dt + 0.5 * a * c * dt * dt
        y = y + v * s * dt + 0.5 * a * s * dt * dt
        yaw = yaw + kappa[k] * (v * dt + 0.5 * a * dt * dt)
        v = (v + a * dt).clamp_min(0.0)
        out[:, :, k, 0], out[:, :, k, 1], out[:, :, k, 3] = x, y, yaw
    out[..., 2] = cur[None, :, 2, None]
    return out


def _paths(scn: WosacScenario) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each object's logged path from the current step: (N, L + 1, 4) x, y, z, unwrapped heading at
    path distances (N, L + 1), the last point a straight extension; (N,) path length; (N,) whether
    the log ends stopped."""
    traj = scn.traj[:, CURRENT_TIME_INDEX:, :4]
    valid = scn.valid[:, CURRENT_TIME_INDEX:]
    n, length = valid.shape
    order = torch.argsort((~valid).to(torch.int64), dim=1, stable=True)
    pts = torch.gather(traj, 1, order[..., None].expand(-1, -1, 4))
    count = valid.sum(dim=1)
    last = count - 1
    idx = torch.arange(length)[None].expand(n, -1)
    pts = torch.where((idx <= last[:, None])[..., None], pts, pts[torch.arange(n), last][:, None])
    dyaw = torch.remainder(pts[:, 1:, 3] - pts[:, :-1, 3] + math.pi, 2 * math.pi) - math.pi
    pts[:, 1:, 3] = pts[:, :1, 3] + torch.cumsum(dyaw, dim=1)
    seg = torch.linalg.norm(pts[:, 1:, :2] - pts[:, :-1, :2], dim=-1)
    dist = torch.cat([torch.zeros(n, 1), torch.cumsum(seg, dim=1)], dim=1)
    end = pts[:, -1]
    ext = end.clone()
    ext[:, 0] += _EXTEND_M * torch.cos(end[:, 3])
    ext[:, 1] += _EXTEND_M * torch.sin(end[:, 3])
    pts = torch.cat([pts, ext[:, None]], dim=1)
    total = dist[:, -1]
    dist = torch.cat([dist, (total + _EXTEND_M)[:, None]], dim=1)
    last_t = torch.gather(order, 1, last[:, None])[:, 0]  # the last valid step, from the current one
    end_vel = scn.velocity[torch.arange(n), CURRENT_TIME_INDEX + last_t]
    stopped = torch.linalg.norm(end_vel, dim=-1) < STATIC_SPEED_MPS
    return pts, dist, total, stopped


def _along(pts: torch.Tensor, dist: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """(N, ..., 4) path points at path distances ``s`` (N, ...) by linear interpolation."""
    n = s.shape[0]
    flat = s.reshape(n, -1).contiguous()
    hi = torch.searchsorted(dist.contiguous(), flat, right=True).clamp(1, dist.shape[1] - 1)
    lo = hi - 1
    d0, d1 = torch.gather(dist, 1, lo), torch.gather(dist, 1, hi)
    w = torch.where(d1 > d0, (flat - d0) / torch.where(d1 > d0, d1 - d0, 1.0), 0.0).clamp(0.0, 1.0)
    p0 = torch.gather(pts, 1, lo[..., None].expand(-1, -1, 4))
    p1 = torch.gather(pts, 1, hi[..., None].expand(-1, -1, 4))
    return (p0 + (p1 - p0) * w[..., None]).reshape(*s.shape, 4)


def idm_along_log(
    scn: WosacScenario,
    rollouts: int,
    generator: torch.Generator | None = None,
    params: IdmParams = DEFAULT_IDM,
) -> torch.Tensor:
    """Every object along its logged path at an IDM speed (module docstring)."""
    pts, dist, total, stopped = _paths(scn)
    n = scn.num_objects
    speed_log = torch.linalg.norm(scn.velocity[:, CURRENT_TIME_INDEX:], dim=-1)
    v0 = torch.where(scn.valid[:, CURRENT_TIME_INDEX:], speed_log, 0.0).max(dim=1).values
    v = speed_log[:, 0].clone()
    s = torch.zeros(n)
    size = scn.traj[:, CURRENT_TIME_INDEX, 4:6]
    probes = torch.arange(1, params.lookahead_points + 1, dtype=torch.float32) * (
        params.lookahead_m / params.lookahead_points
    )
    out = torch.empty(n, N_SIMULATION_STEPS, 4)
    here = _along(pts, dist, s)
    everyone = torch.ones(n, dtype=torch.bool)
    for k in range(N_SIMULATION_STEPS):
        ahead = _along(pts, dist, s[:, None] + probes[None])  # (N, P, 4)
        gap, lead_v = leader_on_path(
            ahead[..., :2],
            ahead[..., 3],
            probes[None].expand(n, -1),
            size[:, 0],
            size[:, 1],
            here[:, :2],
            here[:, 3],
            size[:, 0],
            size[:, 1],
            v,
            everyone,
            torch.arange(n),
        )
        end_gap = torch.where(stopped, total - s, torch.inf)
        use_end = end_gap < gap
        gap = torch.where(use_end, end_gap, gap)
        lead_v = torch.where(use_end, 0.0, lead_v)
        v_new = idm_speed(v, idm_acceleration(v, v0, gap, lead_v, params), STEP_S)
        s = s + 0.5 * (v + v_new) * STEP_S
        v = v_new
        here = _along(pts, dist, s)
        out[:, k] = here
    return out[None].expand(rollouts, -1, -1, -1).clone()


Policy = Callable[[WosacScenario, int, "torch.Generator | None"], torch.Tensor]
POLICIES: dict[str, Policy] = {
    "log": log_replay,
    "constant_velocity": constant_velocity,
    "idm": idm_along_log,
    "random": random_bicycle,
}
"""Policy name (``benchmark wosac --policy``) → the function that simulates a scenario."""
