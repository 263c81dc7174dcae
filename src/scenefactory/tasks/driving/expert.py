"""The logged drivers as a closed-loop policy: each step, from the agent's current state, the
action that drives the kinematic bicycle onto its log.

The open-loop alternative (the inverse of the log computed once, ``ScenePool.expert``) is exact on
the kinematic tier for a log the bicycle could have driven, but any mismatch — the articulated
physics tier's tyres and steering, a real log's noise — accumulates: nothing pulls the car back
onto its log. Closed loop, at step t, with the agent's state (centre of mass p, heading ψ, speed v)
and its log reference r (below), wheelbase L and centre of mass l_r ahead of the rear axle:

- **Steering: the bicycle's inverse for the arc onto the log (pure pursuit).** The rear axle
  ``b = p − l_r·(cos ψ, sin ψ)`` of a kinematic bicycle moves along its heading on an arc of
  curvature ``κ = tan δ / L``; the arc from ``b``, tangent to ψ, through the logged rear-axle
  position ``q`` a look-ahead ahead has ``κ = 2 sin α / ℓ`` (``ℓ = |q − b|``, α the angle from
  ψ to ``q − b``), so ``δ = atan(L · 2 sin α / ℓ)``. ``q`` is the first reference point of steps
  t + 1 … t + :data:`HORIZON_STEPS` at least ``clip(LOOKAHEAD_S · v, LOOKAHEAD_MIN_M,
  LOOKAHEAD_MAX_M)`` from ``b`` (else the farthest; wheels straight when even that is nearer
  than :data:`MIN_AIM_M`). On a constant-curvature log the bicycle drove this reproduces it;
  off the log, it steers back onto it.
- **Speed: the inverse of ``v' = v + a·dt`` onto the logged speed, plus a pull on the lag.**
  ``v* = clip(v_r(t + 1) + K_LON · e_lon, 0, v_max)``, ``e_lon = (p_r(t) − p) · (cos ψ_r(t),
  sin ψ_r(t))`` (> 0: behind the log), and ``a = (v* − v) / dt``, normalized by
  ``max_accel_mps2`` or ``max_brake_mps2`` as in ``engines.kinematic.inverse_bicycle``.

Both are clipped to the action range [-1, 1]. The reference r (:class:`LogReference`) is the log
with gaps (unobserved steps between two observed ones) filled by linear interpolation (heading
unwrapped), smoothed by a centred moving average over :data:`SMOOTH_STEPS` steps (logged
positions and speeds carry a few centimetres and tenths of m/s of noise), and after the last
observed step the last observed pose held at speed 0: the agent stops at its goal, the end of its
own log. Agents without a log get zero actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from scenefactory.engines.base import VehicleState
from scenefactory.scenes.scene import Scene
from scenefactory.vehicles.params import VehicleParams

K_LON = 1.0
"""Along-track gain [1/s]: the speed target gains K_LON m/s per metre of lag behind the log."""
LOOKAHEAD_S = 0.8
"""Look-ahead time [s]: the steering aims at the logged position about this far ahead."""
LOOKAHEAD_MIN_M = 3.0
"""Shortest look-ahead distance [m] (slow cars)."""
LOOKAHEAD_MAX_M = 20.0
"""Longest look-ahead distance [m]."""
HORIZON_STEPS = 30
"""Reference steps searched for the look-ahead point."""
SMOOTH_STEPS = 5
"""Width of the centred moving average applied to the reference (odd)."""
MIN_AIM_M = 1.0
"""Wheels straight when no reference point within the horizon is this far (a car waiting or
stopped at its goal: its heading to a point under its wheels means nothing)."""


def _smooth(values: np.ndarray, first: int, last: int) -> np.ndarray:
    """Centred moving average of ``values`` (T, ...) over [first, last] (the ends use the window
    part that lies inside), the rest unchanged."""
    out = values.copy()
    half = SMOOTH_STEPS // 2
    csum = np.concatenate([np.zeros_like(values[:1]), np.cumsum(values[first : last + 1], axis=0)])
    idx = np.arange(last - first + 1)
    lo, hi = np.maximum(idx - half, 0), np.minimum(idx + half, last - first) + 1
    width = (hi - lo).reshape(-1, *([1] * (values.ndim - 1)))
    out[first : last + 1] = (csum[hi] - csum[lo]) / width
    return out


@dataclass(frozen=True)
class LogReference:
    """The logs of a pool's scenes as padded tracking references (module docstring), (S, K, T + 1):
    ``xy`` (S, K, T + 1, 2) [m], ``yaw`` [rad], ``speed`` [m/s]; ``has_log`` (S, K) bool. Index T
    (one past the longest log) holds every agent's final pose at speed 0."""

    xy: torch.Tensor
    yaw: torch.Tensor
    speed: torch.Tensor
    has_log: torch.Tensor

    @staticmethod
    def from_scenes(scenes: Sequence[Scene], k: int, device: torch.device) -> LogReference:
        """The references of ``scenes`` for worlds of ``k`` agents (a scene's first ``k`` agents)."""
        steps = max([sc.log.num_steps for sc in scenes if sc.log is not None] + [1])
        s_n = len(scenes)
        xy = np.zeros((s_n, k, steps + 1, 2))
        yaw = np.zeros((s_n, k, steps + 1))
        speed = np.zeros((s_n, k, steps + 1))
        has_log = np.zeros((s_n, k), dtype=bool)
        t = np.arange(steps + 1)
        for i, sc in enumerate(scenes):
            log = sc.log
            if log is None:
                continue
            for a in range(min(k, log.valid.shape[0])):
                seen = np.flatnonzero(log.valid[a])
                if len(seen) == 0 or not sc.agent_valid[a]:
                    continue
                has_log[i, a] = True
                first, last = int(seen[0]), int(seen[-1])
                path = np.stack([np.interp(t, seen, log.xy[a, seen, d]) for d in range(2)], axis=-1)
                xy[i, a] = _smooth(path, first, last)
                yaw[i, a] = _smooth(np.interp(t, seen, np.unwrap(log.yaw[a, seen])), first, last)
                speed[i, a] = _smooth(np.interp(t, seen, log.speed[a, seen]), first, last)
                speed[i, a, last + 1 :] = 0.0  # after its log: stop at the goal

        def f(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=device)

        return LogReference(f(xy), f(yaw), f(speed), torch.as_tensor(has_log, device=device))

    @property
    def last_index(self) -> int:
        """T, the index of the final poses."""
        return int(self.xy.shape[2]) - 1


def tracking_actions(
    ref: LogReference,
    scene_id: torch.Tensor,
    step: torch.Tensor,
    state: VehicleState,
    params: VehicleParams,
    dt_s: float,
) -> torch.Tensor:
    """(W, K, 2) the closed-loop logged-driver actions at episode step ``step`` (W,) of worlds on
    ``scene_id`` (W,) from the engine ``state`` (module docstring); 0 for agents without a log."""
    last = ref.last_index
    ahead = (step.view(-1, 1) + torch.arange(0, HORIZON_STEPS + 1, device=step.device)).clamp(max=last)
    rows = scene_id.view(-1, 1)
    # (W, K, H + 1, ...): the reference from step t on
    xy = ref.xy[rows, :, ahead].transpose(1, 2)
    yaw = ref.yaw[rows, :, ahead].transpose(1, 2)
    speed_ref = ref.speed[rows, :, ahead].transpose(1, 2)
    l_r = params.rear_axle_to_com_m
    # steering: pure pursuit of the logged rear axle
    heading = torch.stack((torch.cos(state.yaw), torch.sin(state.yaw)), dim=-1)
    rear = state.pos_xy - l_r * heading
    q_rear = xy[:, :, 1:] - l_r * torch.stack((torch.cos(yaw[:, :, 1:]), torch.sin(yaw[:, :, 1:])), dim=-1)
    to_q = q_rear - rear.unsqueeze(2)
    dist = to_q.norm(dim=-1)
    reach = (LOOKAHEAD_S * state.speed).clamp(LOOKAHEAD_MIN_M, LOOKAHEAD_MAX_M).unsqueeze(-1)
    far = dist >= reach
    pick = torch.where(far.any(-1), far.float().argmax(-1), dist.argmax(-1))
    vec = torch.gather(to_q, 2, pick.view(*pick.shape, 1, 1).expand(-1, -1, 1, 2)).squeeze(2)
    ell = vec.norm(dim=-1).clamp(min=1e-3)
    sin_alpha = (heading[..., 0] * vec[..., 1] - heading[..., 1] * vec[..., 0]) / ell
    steer = torch.atan(params.wheelbase_m * 2.0 * sin_alpha / ell) / params.max_steer_rad
    steer = torch.where(ell >= MIN_AIM_M, steer, torch.zeros_like(steer))  # stopped at its log's end
    # speed: the logged speed of the next step plus a pull on the along-track lag
    d0 = xy[:, :, 0] - state.pos_xy
    e_lon = d0[..., 0] * torch.cos(yaw[:, :, 0]) + d0[..., 1] * torch.sin(yaw[:, :, 0])
    v_target = (speed_ref[:, :, 1] + K_LON * e_lon).clamp(0.0, params.max_speed_mps)
    accel = (v_target - state.speed) / dt_s
    accel = torch.where(accel >= 0, accel / params.max_accel_mps2, accel / params.max_brake_mps2)
    out = torch.stack((steer, accel), dim=-1).clamp(-1.0, 1.0)
    has = ref.has_log[scene_id]
    return torch.where(has.unsqueeze(-1), out, torch.zeros_like(out))
