"""Traffic signals and stop signs on each agent's route: which stop lines it meets, and the rules.

**Route stops** (numpy, once per scene and agent when the pool is built, :func:`route_stops`). A
signal's stop point lies on an agent's route when it is within :data:`MATCH_RADIUS_M` of the route
polyline, strictly between its start and its end, and — when its controlled lane is known — that
lane runs roughly along the route there (lane and route tangents less than 60° apart). WOMD gives
every movement of an approach its own lane and state, their stop points at the same spot (a left
turn may be on a red arrow while the through lane is green), so candidates are ranked by how well
their lane follows the route over :data:`LANE_WINDOW_M` on either side of the stop point (mean
distance of the lane's points to the route), and of candidates within :data:`DEDUPE_M` of one
another along the route only the best is kept. A stop sign matches in the same way when its
controlled lane is known (its stop point is then on that lane); a sign of unknown lane is a
roadside position, matched when it lies within :data:`SIGN_ROADSIDE_M` to the right of the route
(right-hand traffic) or :data:`MATCH_RADIUS_M` to its left. A route keeps its first
:data:`MAX_ROUTE_STOPS` stops, ordered by arc length; a stop whose route turns right by more than
35° within the next 20 m is marked ``right_turn``.

**Rules** (torch, each step, :func:`stop_events`), with the agent's route progress ``s`` (its centre
projected on the route) and speed:

- an agent *has stopped* for a stop once its speed fell below :data:`STOP_SPEED_MPS` while
  ``s`` was within the last :data:`STOP_ZONE_M` before the stop point (or up to
  :data:`STOP_OVERSHOOT_M` past it);
- it *crosses* a stop the first time ``s`` reaches the stop's arc length;
- a **red-light violation**: crossing a signal's stop point while its state is a stop state (red:
  ``STOP``, ``ARROW_STOP``, ``FLASHING_STOP``) both when the step began and when it ended (a light
  turning red during the step is not run). ``FLASHING_STOP``, and ``STOP`` on a right turn (right
  on red, as US law allows), act like a stop sign: crossing them is a violation only without having
  stopped;
- a **stop-sign violation**: crossing a stop sign's stop point without having stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from scenefactory.scenes.scene import CAUTION_STATES, GO_STATES, STOP_STATES, Scene, SignalState

MATCH_RADIUS_M = 2.0
"""Largest distance [m] from a stop point (on its lane) to the route for the route to meet it."""
SIGN_ROADSIDE_M = 4.0
"""Largest distance [m] right of the route of a stop sign whose lane is unknown (a roadside post)."""
ALIGN_COS = 0.5
"""Lane and route tangents at a stop point must be less than 60° apart."""
LANE_WINDOW_M = 15.0
"""Stretch of the controlled lane [m] on either side of the stop point compared with the route."""
DEDUPE_M = 3.0
"""Stops of one kind closer than this along the route [m] are one stop line (the best match wins)."""
MAX_ROUTE_STOPS = 8
"""Stops kept per route (the first ones)."""
RIGHT_TURN_RAD = math.radians(35.0)
TURN_WINDOW_M = 20.0
STOP_SPEED_MPS = 0.5
"""Below this speed an agent has come to a stop."""
STOP_ZONE_M = 8.0
"""How far before a stop point [m] a stop counts for it (a car length or so behind the line)."""
STOP_OVERSHOOT_M = 0.5
"""How far past a stop point [m] a stop still counts for it."""

SIGNAL = 1
"""``stop_kind`` of a traffic signal's stop point (0 is padding)."""
STOP_SIGN = 2
"""``stop_kind`` of a stop sign's stop point."""

_STOP = tuple(int(c) for c in STOP_STATES)
_CAUTION = tuple(int(c) for c in CAUTION_STATES)
_GO = tuple(int(c) for c in GO_STATES)


@dataclass(frozen=True)
class RouteStop:
    """One stop line on a route: arc length [m], kind (``SIGNAL``/``STOP_SIGN``), the signal's column
    in the scene's :class:`~scenefactory.scenes.scene.SignalLog` (or the stop sign's index), and
    whether the route turns right just after it."""

    s_m: float
    kind: int
    column: int
    right_turn: bool


def _project(route: np.ndarray, pts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Project points (N, 2) on a route (R, 2): arc length s, distance, signed lateral offset
    (left +), unit tangent (N, 2) and the raw segment parameter of the nearest segment."""
    a, ab = route[:-1], np.diff(route, axis=0)
    seg_len = np.linalg.norm(ab, axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg_len)])
    t_raw = np.einsum("nmk,mk->nm", pts[:, None] - a[None], ab) / np.maximum(seg_len**2, 1e-12)
    t = np.clip(t_raw, 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    d = np.linalg.norm(pts[:, None] - closest, axis=2)
    j = np.argmin(d, axis=1)
    n = np.arange(len(pts))
    tan = ab[j] / np.maximum(seg_len[j], 1e-12)[:, None]
    rel = pts - closest[n, j]
    lateral = tan[:, 0] * rel[:, 1] - tan[:, 1] * rel[:, 0]
    return cum[j] + t[n, j] * seg_len[j], d[n, j], lateral, tan, t_raw[n, j]


def _lane_score(route: np.ndarray, route_len: float, s: float, lane: np.ndarray, stop: np.ndarray) -> float:
    """Mean distance [m] to the route of the lane's points within the window around the stop point."""
    lane_s_all, _, _, _, _ = _project(lane, stop[None])
    lane_s0 = float(lane_s_all[0])
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(lane, axis=0), axis=1))])
    lo, hi = lane_s0 - min(LANE_WINDOW_M, s), lane_s0 + min(LANE_WINDOW_M, route_len - s)
    pts = lane[(cum >= lo) & (cum <= hi)]
    pts = np.vstack([pts, stop[None]]) if len(pts) else stop[None]
    return float(_project(route, pts)[1].mean())


def _lane_tangent(lane: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.asarray(_project(lane, p[None])[3][0])


def _heading_change(route: np.ndarray, s: float, route_len: float) -> float:
    """Route heading change [rad] from arc length ``s`` to ``s + TURN_WINDOW_M`` (left +)."""
    seg = np.diff(route, axis=0)
    cum = np.concatenate([[0.0], np.cumsum(np.linalg.norm(seg, axis=1))])
    heading = np.unwrap(np.arctan2(seg[:, 1], seg[:, 0]))
    i0 = int(np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(seg) - 1))
    i1 = int(
        np.clip(np.searchsorted(cum, min(s + TURN_WINDOW_M, route_len), side="right") - 1, 0, len(seg) - 1)
    )
    return float(heading[i1] - heading[i0])


def scene_stop_candidates(scene: Scene) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{SIGNAL: (xy (S, 2), lane (S,)), STOP_SIGN: (xy (Q, 2), lane (Q,))}`` of a scene; stop signs
    without a ``SignalLog`` entry are the road graph's sign positions with unknown lanes."""
    sig = scene.signals
    empty = (np.zeros((0, 2)), np.zeros(0, dtype=np.int64))
    lights = (sig.stop_xy, sig.lane) if sig is not None else empty
    if sig is not None and len(sig.sign_lane):
        signs = (sig.sign_xy, sig.sign_lane)
    else:
        xy = scene.roadgraph.stop_sign_xy
        signs = (xy, np.full(len(xy), -1, dtype=np.int64))
    return {SIGNAL: lights, STOP_SIGN: signs}


def route_stops(scene: Scene, agent: int) -> list[RouteStop]:
    """The stop lines on agent ``agent``'s route, by arc length (see the module docstring)."""
    route = scene.route(agent)
    keep = np.concatenate([[True], np.linalg.norm(np.diff(route, axis=0), axis=1) > 1e-9])
    route = route[keep]
    if len(route) < 2:
        return []
    route_len = float(np.linalg.norm(np.diff(route, axis=0), axis=1).sum())
    rg = scene.roadgraph
    found: list[RouteStop] = []
    for kind, (xy, lanes) in scene_stop_candidates(scene).items():
        if not len(xy):
            continue
        s, dist, lateral, tan, _ = _project(route, xy)
        inside = (s > 0.25) & (s < route_len - 0.25)
        known = lanes >= 0
        near = np.where(
            known | (kind == SIGNAL),
            dist <= MATCH_RADIUS_M,
            (lateral >= -SIGN_ROADSIDE_M) & (lateral <= MATCH_RADIUS_M),
        )
        ranked: list[tuple[float, int]] = []
        for i in np.flatnonzero(inside & near).tolist():
            if known[i]:
                lane = rg.lane(int(lanes[i]))
                if float(_lane_tangent(lane, xy[i]) @ tan[i]) < ALIGN_COS:
                    continue
                score = _lane_score(route, route_len, float(s[i]), lane, xy[i])
            else:
                score = 100.0 + float(dist[i])  # a known lane that follows the route ranks first
            ranked.append((score, int(i)))
        accepted: list[int] = []
        for _, i in sorted(ranked):
            if all(abs(s[i] - s[j]) >= DEDUPE_M for j in accepted):
                accepted.append(i)
        for i in accepted:
            turn = _heading_change(route, float(s[i]), route_len)
            found.append(RouteStop(float(s[i]), kind, i, bool(turn <= -RIGHT_TURN_RAD)))
    found.sort(key=lambda r: (r.s_m, r.kind))
    return found[:MAX_ROUTE_STOPS]


# ------------------------------------------------------------------------------------------ torch


def is_stop_state(codes: torch.Tensor) -> torch.Tensor:
    """Red: ``STOP``, ``ARROW_STOP`` or ``FLASHING_STOP``."""
    return (codes == _STOP[0]) | (codes == _STOP[1]) | (codes == _STOP[2])


def state_one_hot(codes: torch.Tensor) -> torch.Tensor:
    """(..., 4) one-hot of red / yellow / green / none-or-unknown from WOMD state codes (...)."""
    red = is_stop_state(codes)
    yellow = (codes == _CAUTION[0]) | (codes == _CAUTION[1]) | (codes == _CAUTION[2])
    green = (codes == _GO[0]) | (codes == _GO[1])
    none = ~(red | yellow | green)
    return torch.stack((red, yellow, green, none), dim=-1).float()


@dataclass(frozen=True)
class StopEvents:
    """What happened at the route stops this step, each (W, K) bool."""

    red_light: torch.Tensor
    stop_sign: torch.Tensor
    crossed_signal: torch.Tensor
    crossed_sign: torch.Tensor


def stop_events(
    s_now: torch.Tensor,
    speed: torch.Tensor,
    active: torch.Tensor,
    stop_s: torch.Tensor,
    stop_kind: torch.Tensor,
    right_turn: torch.Tensor,
    codes_before: torch.Tensor,
    codes_now: torch.Tensor,
    stopped: torch.Tensor,
    passed: torch.Tensor,
) -> tuple[StopEvents, torch.Tensor, torch.Tensor]:
    """Apply the rules (module docstring) for one step.

    ``s_now``, ``speed``, ``active`` are (W, K); the stop tensors (W, K, M): arc length, kind, right
    turn, the signal states when the step began and now (meaningless for stop signs), and the
    ``stopped`` / ``passed`` flags so far. Returns the events and the updated ``stopped`` and
    ``passed`` flags.
    """
    s = s_now.unsqueeze(-1)
    act = active.unsqueeze(-1)
    zone = (s >= stop_s - STOP_ZONE_M) & (s <= stop_s + STOP_OVERSHOOT_M)
    stopped = stopped | (zone & (speed.unsqueeze(-1) < STOP_SPEED_MPS) & act)
    crossed = act & (stop_kind > 0) & ~passed & (s >= stop_s)
    passed = passed | crossed
    red = is_stop_state(codes_before) & is_stop_state(codes_now)
    stop_like = (codes_now == int(SignalState.FLASHING_STOP)) | (
        right_turn & (codes_now == int(SignalState.STOP))
    )
    signal = crossed & (stop_kind == SIGNAL)
    sign = crossed & (stop_kind == STOP_SIGN)
    red_run = signal & red & (~stop_like | ~stopped)
    events = StopEvents(
        red_light=red_run.any(-1),
        stop_sign=(sign & ~stopped).any(-1),
        crossed_signal=signal.any(-1),
        crossed_sign=sign.any(-1),
    )
    return events, stopped, passed
