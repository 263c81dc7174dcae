"""Reactive traffic: logged vehicles that follow their logged paths with the IDM speed law, so they
brake for the controlled agents (``eval drive --others idm``; Waymax ``IDMRoutePolicy``, nuPlan's
reactive setting). Off (``DrivingTaskConfig.replay_idm`` is ``None``), every replayed object plays its
log back (``pairs.observed_objects``) and nothing here runs.

- **Who reacts.** Replayed objects of WOMD type vehicle (:data:`VEHICLE_KIND`; a scene's controlled
  agents beyond the world's K slots count as vehicles). Pedestrians, cyclists and other objects keep
  their logs exactly (the same values as log replay).
- **Path.** A vehicle's path is its valid logged positions (the scene's step 0 on), in order, with
  the logged heading, parameterized by arc length ``s``; past its end the path runs straight on for
  500 m. Its state is ``(s, v)``: it appears at its first valid logged step at ``s = 0`` with its
  logged speed there, and is present until its last valid logged step (gaps in its log are driven
  through), as long as its log spans.
- **Speed law** (:mod:`~scenefactory.tasks.driving.idm`, Treiber et al. 2000, Waymax
  ``IDMRoutePolicy`` parameters: s0 = 2 m, T = 2 s, a_max = 2 m/s^2, b = 4 m/s^2, delta = 4, leaders
  looked for over the next 10 m of the path in 10 probes). The desired speed ``v0`` is the vehicle's
  top logged speed (Waymax: 30 m/s for everyone, a freeway speed; ours keeps each driver's own
  pace). Leader: the nearest probe along the path at which the vehicle's box would overlap another
  object's current box: a controlled agent (its state after this step's dynamics) or another
  replayed object (its state at the previous step), among the :data:`CANDIDATES` nearest to it. A
  log that ends slower than :data:`STATIC_SPEED_MPS` (Waymax's static-speed threshold) ends at a
  standing obstacle, so the vehicle stops where its driver stopped (a red light, a queue). Then
  ``v' = max(0, v + a dt)`` and ``s' = s + (v + v') dt / 2``.

The per-world state (:class:`ReplayIdm`) is reset with its world (partial reset by world ids) and
is padded to the pool's most replayed objects per scene, R; the paths are the pool's, gathered per
world at reset.
"""

from __future__ import annotations

import math

import torch

from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.idm import IdmParams, idm_acceleration, idm_speed, leader_on_path
from scenefactory.tasks.driving.pool import ScenePool, beyond_slots

VEHICLE_KIND = 1
"""WOMD object type of a vehicle (``Track.TYPE_VEHICLE``)."""
STATIC_SPEED_MPS = 1.0
"""Waymax's ``_STATIC_SPEED_THRESHOLD``: a log ending slower than this ends at a standing obstacle."""
EXTEND_M = 500.0
"""How far a path runs straight on past the end of its log."""
CANDIDATES = 8
"""Nearest objects each reacting vehicle tests as leaders (the probe test is exact among them)."""

Objects = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""``(pos_xy (W, n, 2), yaw (W, n), vel_xy (W, n, 2), length (W, n), width (W, n), active (W, n))``."""


def replay_kinds(scenes: tuple[Scene, ...], k: int) -> torch.Tensor:
    """(N,) long WOMD object type of each packed replayed object of the pool built from ``scenes`` for
    ``k`` agents per world: each scene's replay log's kinds, then its agents beyond ``k``
    (vehicles), in the order of ``pool._replays``."""
    kinds: list[int] = []
    for sc in scenes:
        if sc.replay is not None:
            kinds += [int(x) for x in sc.replay.kind]
        kinds += [VEHICLE_KIND] * len(beyond_slots(sc, k))
    return torch.tensor(kinds, dtype=torch.long)


def logged_paths(
    xy: torch.Tensor, yaw: torch.Tensor, vel_xy: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each object's logged path from its logged states ``xy`` (N, T, 2), ``yaw`` (N, T), ``vel_xy``
    (N, T, 2), ``valid`` (N, T).

    Returns ``(points (N, T + 1, 3), dist_m (N, T + 1), end_m (N,), stops_at_end (N,) bool)``: the
    valid positions in order with the unwrapped logged heading (x, y, yaw), padded with the last
    valid one, then a point :data:`EXTEND_M` straight on; the arc length at each point; the length
    of the logged part; whether the log ends slower than :data:`STATIC_SPEED_MPS`. An object with
    no valid step gets a path of zeros (it is never present)."""
    n, t = valid.shape
    order = torch.argsort((~valid).to(torch.int64), dim=1, stable=True)
    pts = torch.gather(torch.cat((xy, yaw[..., None]), -1), 1, order[..., None].expand(-1, -1, 3))
    last = (valid.sum(1) - 1).clamp_min(0)
    rows = torch.arange(n, device=valid.device)
    idx = torch.arange(t, device=valid.device)[None]
    pts = torch.where((idx <= last[:, None])[..., None], pts, pts[rows, last][:, None])
    dyaw = torch.remainder(pts[:, 1:, 2] - pts[:, :-1, 2] + math.pi, 2 * math.pi) - math.pi
    pts = torch.cat(
        (pts[:, :, :2], torch.cat((pts[:, :1, 2], pts[:, :1, 2] + dyaw.cumsum(1)), 1)[..., None]), -1
    )
    seg = torch.linalg.norm(pts[:, 1:, :2] - pts[:, :-1, :2], dim=-1)
    dist = torch.cat((torch.zeros_like(seg[:, :1]), seg.cumsum(1)), 1)
    end = pts[:, -1]
    ext = torch.stack(
        (end[:, 0] + EXTEND_M * torch.cos(end[:, 2]), end[:, 1] + EXTEND_M * torch.sin(end[:, 2]), end[:, 2]),
        -1,
    )
    end_m = dist[:, -1]
    last_step = torch.gather(order, 1, last[:, None])[:, 0]
    stops = torch.linalg.norm(vel_xy[rows, last_step], dim=-1) < STATIC_SPEED_MPS
    return torch.cat((pts, ext[:, None]), 1), torch.cat((dist, (end_m + EXTEND_M)[:, None]), 1), end_m, stops


def along_path(points: torch.Tensor, dist_m: torch.Tensor, s_m: torch.Tensor) -> torch.Tensor:
    """(B, Q, 3) x, y, yaw of paths ``points`` (B, L, 3) with arc lengths ``dist_m`` (B, L) at the arc
    lengths ``s_m`` (B, Q), by linear interpolation (clamped to the path's ends)."""
    hi = torch.searchsorted(dist_m.contiguous(), s_m.contiguous(), right=True).clamp(1, dist_m.shape[1] - 1)
    lo = hi - 1
    d0, d1 = torch.gather(dist_m, 1, lo), torch.gather(dist_m, 1, hi)
    span = d1 - d0
    w = torch.where(span > 0, (s_m - d0) / torch.where(span > 0, span, 1.0), 0.0).clamp(0.0, 1.0)
    p0 = torch.gather(points, 1, lo[..., None].expand(-1, -1, 3))
    p1 = torch.gather(points, 1, hi[..., None].expand(-1, -1, 3))
    return p0 + (p1 - p0) * w[..., None]


def pack_present(values: Objects, rows_t: tuple[torch.Tensor, ...] | None = None) -> Objects:
    """``values`` (W, R, ...) with ``active`` (W, R) packed as ``pairs.observed_objects`` packs them:
    each world's present objects first, in their order, the list as long as the most any world has
    (slots past a world's own hold row 0's finite values and are inactive)."""
    pos, yaw, vel, length, width, present = values
    w = present.shape[0]
    seen = present.sum(-1)
    r = int(seen.max()) if w and present.shape[1] else 0
    place = torch.where(present, present.cumsum(-1) - 1, r)
    slot = torch.arange(present.shape[1], device=present.device)
    packed = torch.zeros((w, r + 1), dtype=torch.long, device=present.device).scatter_(
        1, place, slot.expand(w, -1)
    )
    idx = packed[:, :r]
    active = torch.arange(r, device=present.device) < seen[:, None]

    def take(x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            return torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))
        return torch.gather(x, 1, idx)

    return take(pos), take(yaw), take(vel), take(length), take(width), active


class ReplayIdm:
    """Per-world state of the reactive replay (module docstring), over the pool's replayed objects.

    State, each (W, R) with R the most replayed objects of any pool scene: ``rows`` (long, the pool
    row of each slot), ``in_scene`` (bool), ``s_m`` (arc length along the path), ``speed_mps``; the
    worlds' paths ``points`` (W, R, L, 3) and ``dist_m`` (W, R, L). Pool-wide, per packed object (N,):
    ``vehicle``, ``first_step``, ``last_step``, ``desired_mps``, ``start_mps``, ``end_m``, ``stops``.
    """

    def __init__(self, pool: ScenePool, params: IdmParams, num_worlds: int, dt_s: float) -> None:
        """Paths and IDM constants of every replayed object of ``pool``; every world starts empty
        (call :meth:`reset` with its scene)."""
        if not isinstance(params, IdmParams):
            raise TypeError(f"ReplayIdm params must be an IdmParams, got {type(params).__name__}")
        self.pool, self.params, self.dt_s = pool, params, dt_s
        dev = pool.replay_xy.device
        k = pool.route_xy.shape[1]
        kinds = replay_kinds(pool.scenes, k).to(dev)
        n, t = pool.replay_valid.shape
        if kinds.shape[0] != n:
            raise ValueError(f"the pool holds {n} replayed objects, its scenes name {kinds.shape[0]} kinds")
        valid = pool.replay_valid
        self.vehicle = (kinds == VEHICLE_KIND) & valid.any(1)
        steps = torch.arange(t, device=dev)
        self.first_step = torch.where(valid, steps, t).amin(1) if t else torch.zeros(n, dtype=torch.long)
        self.last_step = torch.where(valid, steps, -1).amax(1) if t else torch.zeros(n, dtype=torch.long)
        speed = torch.linalg.norm(pool.replay_vel, dim=-1)
        self.desired_mps = torch.where(valid, speed, 0.0).amax(1) if t else torch.zeros(n)
        first = self.first_step.clamp(max=max(t - 1, 0))
        self.start_mps = speed[torch.arange(n, device=dev), first] if n else torch.zeros(0, device=dev)
        self.points, self.dist_m, self.end_m, self.stops = logged_paths(
            pool.replay_xy, pool.replay_yaw, pool.replay_vel, valid
        )
        r = pool.max_replay
        self.num_slots = r
        self.rows = torch.zeros(num_worlds, r, dtype=torch.long, device=dev)
        self.in_scene = torch.zeros(num_worlds, r, dtype=torch.bool, device=dev)
        self.s_m = torch.zeros(num_worlds, r, device=dev)
        self.speed_mps = torch.zeros(num_worlds, r, device=dev)
        probes = torch.arange(1, params.lookahead_points + 1, dtype=torch.float32, device=dev)
        self.probe_m = probes * (params.lookahead_m / params.lookahead_points)  # (P,)
        self._version = 0  # bumped whenever the state changes: keys the cache of _state
        self._cache: tuple[int, torch.Tensor, Objects] | None = None

    def reset(self, world_ids: torch.Tensor, scene_ids: torch.Tensor) -> None:
        """Worlds ``world_ids`` (n,) start ``scene_ids`` (n,): every object at the start of its path
        with its logged speed there."""
        if not self.num_slots or not world_ids.numel():
            return
        p = self.pool
        slot = torch.arange(self.num_slots, device=world_ids.device)
        in_scene = slot < p.replay_count[scene_ids][:, None]
        rows = torch.where(in_scene, p.replay_first[scene_ids][:, None] + slot, 0)
        self.rows[world_ids] = rows
        self.in_scene[world_ids] = in_scene
        self.s_m[world_ids] = 0.0
        self.speed_mps[world_ids] = self.start_mps[rows]
        self._version += 1

    def _state(self, step: torch.Tensor) -> Objects:
        """Every slot's object at step ``step`` (W,) of each world's episode, unpacked (W, R, ...):
        vehicles on their paths, the others at their logged state; ``active`` = present. Computed once
        per state and step (a step reads it up to three times)."""
        cached = self._cache
        if cached is not None and cached[0] == self._version and torch.equal(cached[1], step):
            return cached[2]
        p, rows = self.pool, self.rows
        t_max = p.replay_valid.shape[1]
        t = step.clamp(max=t_max - 1)[:, None].expand_as(rows)
        logged = p.replay_valid[rows, t] & (step < t_max)[:, None]
        veh = self.vehicle[rows]
        spans = (self.first_step[rows] <= step[:, None]) & (step[:, None] <= self.last_step[rows])
        present = self.in_scene & torch.where(veh, spans, logged)
        w, r = rows.shape
        here = along_path(
            self.points[rows].reshape(w * r, -1, 3),
            self.dist_m[rows].reshape(w * r, -1),
            self.s_m.reshape(w * r, 1),
        ).reshape(w, r, 3)
        heading = torch.stack((torch.cos(here[..., 2]), torch.sin(here[..., 2])), -1)
        pos = torch.where(veh[..., None], here[..., :2], p.replay_xy[rows, t])
        yaw = torch.where(veh, here[..., 2], p.replay_yaw[rows, t])
        vel = torch.where(veh[..., None], heading * self.speed_mps[..., None], p.replay_vel[rows, t])
        out = (pos, yaw, vel, p.replay_length[rows], p.replay_width[rows], present)
        self._cache = (self._version, step.clone(), out)
        return out

    def objects(self, step: torch.Tensor) -> Objects:
        """The replayed objects present at step ``step`` (W,), packed as ``pairs.observed_objects``
        packs the logged ones (the env's ``_objects``)."""
        return pack_present(self._state(step))

    def step(self, step: torch.Tensor, agents: Objects) -> None:
        """Advance every present vehicle from step ``step - 1`` to ``step`` (W,) of its world's episode,
        braking for ``agents`` (the controlled agents after this step's dynamics, (W, K, ...), their
        ``active`` mask last) and the replayed objects at ``step - 1``."""
        if not self.num_slots:
            return
        prev = self._state(step - 1)
        moving = prev[5] & self.vehicle[self.rows]
        if not bool(moving.any()):
            return
        wi, ri = moving.nonzero(as_tuple=True)  # the n moving vehicles: only their leaders are sought
        ap, ay, av, al, aw, aa = agents
        pos = torch.cat((ap, prev[0]), 1)  # (W, M, 2), M = K + R
        yaw = torch.cat((ay, prev[1]), 1)
        speed = torch.cat((torch.linalg.norm(av, dim=-1), torch.linalg.norm(prev[2], dim=-1)), 1)
        length, width = torch.cat((al, prev[3]), 1), torch.cat((aw, prev[4]), 1)
        valid = torch.cat((aa, prev[5]), 1)
        k, m, n = ap.shape[1], pos.shape[1], wi.shape[0]
        d = torch.linalg.norm(prev[0][wi, ri][:, None, :] - pos[wi], dim=-1)  # (n, M)
        d = torch.where(valid[wi], d, torch.inf)
        d[torch.arange(n, device=d.device), ri + k] = torch.inf  # not itself
        near, idx = torch.topk(d, min(CANDIDATES, m), dim=-1, largest=False)  # (n, C)

        def pick(x: torch.Tensor) -> torch.Tensor:
            mine = x[wi]  # (n, M[, 2])
            return torch.gather(mine, 1, idx if x.dim() == 2 else idx[..., None].expand(-1, -1, 2))

        rows, s = self.rows[wi, ri], self.s_m[wi, ri]  # (n,)
        ahead = along_path(self.points[rows], self.dist_m[rows], s[:, None] + self.probe_m[None])
        ahead = ahead[:, None]  # (n, 1, P, 3): one object per batch entry
        gap, lead_v = leader_on_path(
            ahead[..., :2],
            ahead[..., 2],
            self.probe_m.expand(n, 1, -1),
            prev[3][wi, ri][:, None],
            prev[4][wi, ri][:, None],
            pick(pos),
            pick(yaw),
            pick(length),
            pick(width),
            pick(speed),
            torch.isfinite(near),
        )
        gap, lead_v = gap[:, 0], lead_v[:, 0]  # (n,)
        end_gap = torch.where(self.stops[rows], self.end_m[rows] - s, torch.inf)
        use_end = end_gap < gap
        gap = torch.where(use_end, end_gap, gap)
        lead_v = torch.where(use_end, 0.0, lead_v)
        v = self.speed_mps[wi, ri]
        v_new = idm_speed(v, idm_acceleration(v, self.desired_mps[rows], gap, lead_v, self.params), self.dt_s)
        self.s_m = self.s_m.index_put((wi, ri), s + 0.5 * (v + v_new) * self.dt_s)
        self.speed_mps = self.speed_mps.index_put((wi, ri), v_new)
        self._version += 1

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The per-world state that is not a copy of the pool: ``s_m`` and ``speed_mps`` (W, R)."""
        return {"s_m": self.s_m.clone(), "speed_mps": self.speed_mps.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` (after the worlds were reset onto their scenes)."""
        for name in ("s_m", "speed_mps"):
            value = state.get(name)
            if not isinstance(value, torch.Tensor) or value.shape != getattr(self, name).shape:
                raise ValueError(f"reactive replay state {name!r} missing or not {tuple(self.s_m.shape)}")
            setattr(self, name, value.to(self.s_m.device))
        self._version += 1
