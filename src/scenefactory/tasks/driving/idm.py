"""The intelligent driver model (IDM) along logged paths, as pure batched functions.

**Speed law** (Treiber, Hennecke & Helbing 2000, "Congested traffic states in empirical observations
and microscopic simulations", Phys. Rev. E 62:1805, eq. 2-3)::

    a = a_max * (1 - (v / v0)^delta - (s* / s)^2)
    s* = s0 + max(0, v T + v (v - v_lead) / (2 sqrt(a_max b)))

with ``s`` the distance to the leader; free road (no leader) drops the interaction term. Speeds are
kept non-negative after ``v + a dt``. The parameters (:class:`IdmParams`) are Waymax's
``IDMRoutePolicy`` defaults (waymo-research/waymax ``waymax/agents/waypoint_following_agent.py``):
s0 = 2 m, T = 2 s, a_max = 2 m/s^2, b = 4 m/s^2, delta = 4, leaders looked for along the next 10 m
of the path in 10 probes; ``v0`` is per object (Waymax's default, 30 m/s, is a freeway speed: the
callers here pass the object's own top logged speed, which they document).

**Leader** (:func:`leader_on_path`, after Waymax's ``_get_accel``): the object's box is placed at
probe points along its path ahead; the first probe at which it would overlap another valid
object's current box gives the lead distance (the probe's path distance) and the lead speed (the
slowest object overlapping there). Overlap is tested in the probe's frame on the boxes' extents
along and across the path (exact for aligned boxes, a slight over-estimate for crossing ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FREE_ROAD = float("inf")
"""Lead distance of an object with nobody ahead within the lookahead."""


@dataclass(frozen=True)
class IdmParams:
    """IDM parameters (module docstring; Waymax ``IDMRoutePolicy`` defaults)."""

    min_spacing_m: float = 2.0
    time_headway_s: float = 2.0
    max_accel_mps2: float = 2.0
    comfort_decel_mps2: float = 4.0
    delta: float = 4.0
    lookahead_m: float = 10.0
    lookahead_points: int = 10

    def __post_init__(self) -> None:
        """Every parameter is positive."""
        if (
            min(
                self.min_spacing_m,
                self.time_headway_s,
                self.max_accel_mps2,
                self.comfort_decel_mps2,
                self.delta,
                self.lookahead_m,
            )
            <= 0
            or self.lookahead_points < 1
        ):
            raise ValueError(f"IdmParams: every parameter must be positive, got {self}")


def idm_acceleration(
    speed: torch.Tensor,
    desired_speed: torch.Tensor,
    gap_m: torch.Tensor,
    lead_speed: torch.Tensor,
    p: IdmParams,
) -> torch.Tensor:
    """(...) IDM acceleration (m/s^2) of objects at ``speed`` (m/s) wanting ``desired_speed``, with
    their leader ``gap_m`` ahead (``inf``: free road) moving at ``lead_speed``. A desired speed of 0
    gives full braking to a stop (the free-road term is taken as -inf clipped by the speed floor)."""
    v0 = desired_speed.clamp_min(1e-3)
    free = 1.0 - (speed / v0).pow(p.delta)
    s_star = p.min_spacing_m + torch.clamp(
        speed * p.time_headway_s
        + speed * (speed - lead_speed) / (2.0 * (p.max_accel_mps2 * p.comfort_decel_mps2) ** 0.5),
        min=0.0,
    )
    has_lead = torch.isfinite(gap_m)
    gap = torch.where(has_lead, gap_m.clamp_min(0.1), 1.0)
    interaction = torch.where(has_lead, (s_star / gap).square(), 0.0)
    return p.max_accel_mps2 * (free - interaction)


def idm_speed(speed: torch.Tensor, accel: torch.Tensor, dt_s: float) -> torch.Tensor:
    """``max(0, v + a dt)``: the next speed (Waymax keeps speeds non-negative the same way)."""
    return (speed + accel * dt_s).clamp_min(0.0)


def leader_on_path(
    probe_xy: torch.Tensor,
    probe_yaw: torch.Tensor,
    probe_dist_m: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    others_xy: torch.Tensor,
    others_yaw: torch.Tensor,
    others_length: torch.Tensor,
    others_width: torch.Tensor,
    others_speed: torch.Tensor,
    others_valid: torch.Tensor,
    self_index: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lead distance (m, ``inf`` for none) and lead speed (m/s) of each of A objects.

    Shapes: ``probe_xy`` (..., A, P, 2), ``probe_yaw`` / ``probe_dist_m`` (..., A, P): the object's
    box centre, heading and path distance at P probes ahead; ``length`` / ``width`` (..., A); the
    others (..., M[, 2]) with ``others_valid`` (..., M); ``self_index`` (A,): which other is the
    object itself (excluded), or ``None``.
    """
    rel = others_xy[..., None, None, :, :] - probe_xy[..., :, :, None, :]  # (..., A, P, M, 2)
    c, s = torch.cos(probe_yaw)[..., None], torch.sin(probe_yaw)[..., None]
    along = c * rel[..., 0] + s * rel[..., 1]
    across = -s * rel[..., 0] + c * rel[..., 1]
    dyaw = others_yaw[..., None, None, :] - probe_yaw[..., None]
    cd, sd = torch.cos(dyaw).abs(), torch.sin(dyaw).abs()
    ol, ow = others_length[..., None, None, :], others_width[..., None, None, :]
    ext_along = 0.5 * (ol * cd + ow * sd)
    ext_across = 0.5 * (ol * sd + ow * cd)
    hit = (along.abs() < 0.5 * length[..., None, None] + ext_along) & (
        across.abs() < 0.5 * width[..., None, None] + ext_across
    )
    hit &= others_valid[..., None, None, :]
    if self_index is not None:
        m = others_xy.shape[-2]
        hit &= ~torch.nn.functional.one_hot(self_index, m).to(torch.bool)[:, None, :]
    any_hit = hit.any(dim=-1)  # (..., A, P)
    first = torch.argmax(any_hit.to(torch.int64), dim=-1, keepdim=True)
    found = any_hit.any(dim=-1)
    dist = torch.gather(probe_dist_m, -1, first)[..., 0]
    speeds = torch.where(hit, others_speed[..., None, None, :], torch.inf)
    lead_speed = torch.gather(speeds.min(dim=-1).values, -1, first)[..., 0]
    return torch.where(found, dist, FREE_ROAD), torch.where(found, lead_speed, 0.0)
