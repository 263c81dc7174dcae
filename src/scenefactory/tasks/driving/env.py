"""The multi-agent goal-reaching driving environment, batched over worlds × agents.

Each world holds one scene; each controlled agent drives its route to its goal. An agent's episode
ends on goal, collision, off-road or the world's time-out; a finished agent is frozen and masked
(no reward, no collisions, invisible to others) until its world resets, which happens when every
agent of the world has finished or the time is up — or, for training with
``cfg.min_active_fraction`` > 0, once too few of its agents are left (phase 6). Worlds reset
independently (partial reset by world ids) and draw a new scene from the pool.

Order of phases in :meth:`DrivingEnv.step` (written down once, here):

1. apply actions through the engine (inactive agents do not move); with ``cfg.replay_idm`` the
   logged vehicles then advance along their paths, braking for the agents where they now are
   (:mod:`~scenefactory.tasks.driving.replay_idm`);
2. geometry: route projection and progress, goal distance, collisions among active agents (the
   engine's own contacts when it has a contact model, exact oriented-box overlap otherwise),
   off-road from the drivable-area distance field at the four corners, pairwise TTC and DRAC;
   the route stops: red lights run and stop lines crossed (:mod:`~scenefactory.tasks.driving.signals`);
3. terminations: collision > off-road > goal (one outcome per agent), then the world time-out
   (the time limit, or a world cut short by the reset policy of phase 6);
4. rewards: Σ weight · term(ctx) over the configured terms, zero for agents inactive at the start;
5. episode statistics (peak DRAC, minimum TTC, progress, signal violations) and records of
   finished agent-episodes;
6. deactivate finished agents; reset worlds with no active agent left or out of time; then the
   scheduled friction change (``cfg.friction_change``) of worlds whose episode reached its step.
   Reset policy (``f = cfg.min_active_fraction`` > 0, training only): with ``N_w`` the agents world
   ``w`` started its episode with and ``A_w`` those still active after this step's terminal
   outcomes, the world resets now when ``0 < A_w < f · N_w``; its ``A_w`` survivors end as
   time-outs (``time_out``, outcome ``TIMEOUT`` in the finished records: learners bootstrap their
   values). ``f = 0`` never triggers (every world waits for its last agent, as before);
7. observations of every agent (fresh for worlds that were just reset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.engines import make_engine
from scenefactory.engines.base import Engine, VehicleState, load_tensors_state, tensors_state
from scenefactory.engines.spec import EngineSpec
from scenefactory.inputs import as_actions
from scenefactory.inputs import device as check_device
from scenefactory.scenes.friction import friction_array
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving import observations as obs_terms
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.context import StepContext
from scenefactory.tasks.driving.expert import LogReference, tracking_actions
from scenefactory.tasks.driving.geometry import (
    PolylineSegments,
    box_corners,
    polyline_segments,
    project_at_segment,
    project_on_segments,
    world_to_ego,
)
from scenefactory.tasks.driving.native import agent_interactions
from scenefactory.tasks.driving.native import nearest_segment as native_nearest_segment
from scenefactory.tasks.driving.native_obs import (
    NativeGridSample,
    NativeRoadObs,
    native_neighbor_obs,
    native_route_lookahead_obs,
)
from scenefactory.tasks.driving.native_replay import NativeObjects
from scenefactory.tasks.driving.pairs import agent_box_overlap, agent_ttc_drac, observed_objects
from scenefactory.tasks.driving.pool import ScenePool, build_pool
from scenefactory.tasks.driving.replay_idm import ReplayIdm
from scenefactory.tasks.driving.signals import StopEvents, stop_events
from scenefactory.tasks.driving.status import AgentStatus

Objects = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""``(pos_xy, yaw, vel_xy, length, width, active)`` of every object of each world, (W, M, ...)."""


@dataclass(frozen=True)
class FinishedEpisodes:
    """Agent-episodes that ended this step, each a flat ``(n,)`` tensor.

    ``outcome`` holds :class:`AgentStatus` codes; ``world``/``agent`` say where; ``serial`` is the
    world-episode serial number (the order in which scenes were handed out); ``log_divergence_m``
    is the mean distance to the logged position over the logged steps (NaN without a log).
    ``red_light_violations``/``stop_sign_violations`` count the red lights run and stop signs
    crossed without stopping, ``signals_crossed``/``stop_signs_crossed`` the signal and stop-sign
    stop lines crossed (:mod:`~scenefactory.tasks.driving.signals`); left out, they are zeros.
    """

    outcome: torch.Tensor
    peak_drac_mps2: torch.Tensor
    min_ttc_s: torch.Tensor
    progress_frac: torch.Tensor
    log_divergence_m: torch.Tensor
    steps: torch.Tensor
    world: torch.Tensor
    agent: torch.Tensor
    serial: torch.Tensor
    scene_id: torch.Tensor
    red_light_violations: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    stop_sign_violations: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    signals_crossed: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    stop_signs_crossed: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))

    def __post_init__(self) -> None:
        """Counts left out (empty) are zeros, one per agent-episode."""
        n = self.outcome.shape[0]
        for name in SIGNAL_COUNTS:
            if getattr(self, name).shape[0] != n:
                object.__setattr__(self, name, torch.zeros_like(self.outcome, dtype=torch.long))


SIGNAL_COUNTS = ("red_light_violations", "stop_sign_violations", "signals_crossed", "stop_signs_crossed")
"""Per agent-episode counts of :class:`FinishedEpisodes` about signals and stop signs."""


@dataclass(frozen=True)
class StepResult:
    """What :meth:`DrivingEnv.step` returns; per-agent tensors are ``(W, K)``.

    - ``obs`` (W, K, D); ``reward``; ``done`` (episode of an active agent ended: terminal or time-out);
    - ``time_out`` (ended by the time limit, not a terminal state: bootstrap its value);
    - ``was_active`` (the sample is a real decision; False for finished agents waiting for their
      world to reset and for padding slots — learners must mask these out);
    - ``finished`` records of the agent-episodes that ended; ``reset_worlds`` ids reset this step;
    - ``state`` the vehicle state right after the dynamics, before any reset (a copy), e.g. for
      recording transitions.
    """

    obs: torch.Tensor
    reward: torch.Tensor
    done: torch.Tensor
    time_out: torch.Tensor
    was_active: torch.Tensor
    finished: FinishedEpisodes
    reset_worlds: torch.Tensor
    reward_terms: dict[str, torch.Tensor]
    state: VehicleState


class DrivingEnv:
    """Batched multi-agent driving on any engine; see the module docstring for the step order."""

    def __init__(
        self,
        cfg: DrivingTaskConfig,
        scenes: Sequence[Scene],
        engine: EngineSpec | Engine = EngineSpec(),
        seed: int = 0,
        device: str | torch.device = "cpu",
        sequential_scenes: bool = False,
        pool: ScenePool | None = None,
    ) -> None:
        """Build the scene pool and the engine; worlds start on scenes drawn with ``seed``.

        ``engine`` is built for the task (its worlds, agents, policy step and car) from an
        :class:`~scenefactory.engines.spec.EngineSpec`, or given built: then its worlds, agents
        and step must be the task's.

        With ``sequential_scenes`` worlds take the pool's scenes in order (evaluation); otherwise
        each reset draws a scene uniformly at random (training). A prebuilt ``pool`` of ``scenes``
        (same agents per world) can be shared between environments.
        """
        self.cfg = cfg
        self.device = check_device(device)  # ArgumentError naming it: 'cuda' without a GPU, 'meta'
        w, k = cfg.num_worlds, cfg.agents_per_world
        self.num_worlds, self.agents_per_world = w, k
        if isinstance(engine, str):
            raise TypeError(
                f"DrivingEnv takes an EngineSpec or a built Engine, got the name {engine!r} "
                f"(use EngineSpec(tier={engine!r}))"
            )
        if isinstance(engine, EngineSpec):
            engine = make_engine(engine, w, k, dt=cfg.dt_s, params=cfg.vehicle, device=self.device)
        if (engine.num_worlds, engine.agents_per_world) != (w, k):
            raise ValueError(
                f"engine has {engine.num_worlds} x {engine.agents_per_world} agents, task wants {w} x {k}"
            )
        if abs(engine.dt - cfg.dt_s) > 1e-9:
            raise ValueError(f"engine dt {engine.dt} differs from the task's policy step {cfg.dt_s}")
        self.engine = engine
        oc = cfg.observations
        if pool is None:
            pool = build_pool(
                scenes,
                k,
                oc.road_point_spacing_m,
                self.device,
                cfg.vehicle,
                cfg.dt_s,
                num_road_points=oc.num_road_points,
                road_point_range_m=oc.road_point_range_m,
            )
        if pool.roads.k < oc.num_road_points or pool.roads.range_m < oc.road_point_range_m:
            raise ValueError(
                f"the scene pool's road index answers {pool.roads.k} points within {pool.roads.range_m} m; "
                f"the task observes {oc.num_road_points} within {oc.road_point_range_m} m"
            )
        self.pool: ScenePool = pool
        self._native_road: NativeRoadObs | None = None  # built on the first native road observation
        self._native_grid: NativeGridSample | None = None  # and the first native off-road check
        self._native_objects: NativeObjects | None = None  # and the first native object packing
        self.sequential_scenes = sequential_scenes
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self._lookahead = torch.tensor(cfg.observations.route_lookahead_m, device=self.device)
        self.obs_dim = obs_terms.observation_dim(
            len(cfg.observations.route_lookahead_m),
            cfg.observations.num_road_points,
            cfg.observations.num_neighbors,
            cfg.observations.friction_aware,
            cfg.observations.traffic_signals,
        )

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=self.device)

        self.scene_id = zeros(w, dtype=torch.long)
        self.serial = zeros(w, dtype=torch.long)
        self._next_serial = 0
        self.step_count = zeros(w, dtype=torch.long)
        self.active = zeros(w, k, dtype=torch.bool)
        self.status = zeros(w, k, dtype=torch.long)
        self.agent_steps = zeros(w, k, dtype=torch.long)
        self.s_prev = zeros(w, k)
        self.prev_actions = zeros(w, k, 2)
        self.peak_drac = zeros(w, k)
        self.min_ttc = zeros(w, k)
        p = self.pool
        r = p.route_xy.shape[2]
        self.route_xy = zeros(w, k, r, 2)
        self.route_valid = zeros(w, k, r, dtype=torch.bool)
        self.route_s = zeros(w, k, r)
        self.route_end_s = zeros(w, k)
        self.goal_xy = zeros(w, k, 2)
        self.goal_s = zeros(w, k)
        self.length = zeros(w, k)
        self.width = zeros(w, k)
        self.friction = zeros(w)
        t_log = p.log_xy.shape[2]
        self.log_xy = zeros(w, k, t_log, 2)
        self.log_valid = zeros(w, k, t_log, dtype=torch.bool)
        self.expert = zeros(w, k, t_log, 2)
        self._expert_ref: LogReference | None = None  # built at the first closed-loop expert_actions
        self.log_div_sum = zeros(w, k)
        self.log_div_count = zeros(w, k)
        self.num_replay = p.max_replay  # logged objects stay in the pool, packed (``_objects``)
        # reactive replay (cfg.replay_idm): logged vehicles on their paths at an IDM speed (None: logs)
        self.replay_idm = None if cfg.replay_idm is None else ReplayIdm(p, cfg.replay_idm, w, cfg.dt_s)
        self.route_segs: PolylineSegments = polyline_segments(self.route_xy, self.route_valid)
        m = p.stop_s.shape[2]
        self.num_stops = m  # route stops per agent (signals, stop signs); 0: none in the pool
        self.stop_s = zeros(w, k, m)
        self.stop_kind = zeros(w, k, m, dtype=torch.long)
        self.stop_column = zeros(w, k, m, dtype=torch.long)
        self.stop_right_turn = zeros(w, k, m, dtype=torch.bool)
        self.stop_stopped = zeros(w, k, m, dtype=torch.bool)
        self.stop_passed = zeros(w, k, m, dtype=torch.bool)
        for name in SIGNAL_COUNTS:
            setattr(self, name, zeros(w, k, dtype=torch.long))
        self._obs = zeros(w, k, self.obs_dim)
        self.reset()

    # ------------------------------------------------------------------------------------ resets

    def reset(self) -> torch.Tensor:
        """Reset every world; returns observations (W, K, D)."""
        self._next_serial = 0
        self.reset_worlds(torch.arange(self.num_worlds, device=self.device))
        st = self.engine.state()
        self._obs = self._observe(st, self._pairwise(self._objects(st))[0])
        return self._obs

    def _draw_scenes(self, n: int) -> torch.Tensor:
        if self.sequential_scenes:
            ids = torch.arange(self._next_serial, self._next_serial + n) % self.pool.num_scenes
        else:
            ids = torch.randint(self.pool.num_scenes, (n,), generator=self.generator)
        return ids.to(self.device)

    def reset_worlds(self, world_ids: torch.Tensor, scene_ids: torch.Tensor | None = None) -> None:
        """Partial reset: worlds ``world_ids`` (n,) start a new episode on ``scene_ids`` (or drawn ones)."""
        n = int(world_ids.numel())
        if n == 0:
            return
        if scene_ids is None:
            scene_ids = self._draw_scenes(n)
        self.serial[world_ids] = torch.arange(self._next_serial, self._next_serial + n, device=self.device)
        self._next_serial += n
        p = self.pool
        self.scene_id[world_ids] = scene_ids
        self.route_xy[world_ids] = p.route_xy[scene_ids]
        self.route_valid[world_ids] = p.route_valid[scene_ids]
        self.route_s[world_ids] = p.route_s[scene_ids]
        self.route_end_s[world_ids] = p.route_end_s[scene_ids]
        self.goal_xy[world_ids] = p.goal_xy[scene_ids]
        self.goal_s[world_ids] = p.goal_s[scene_ids]
        self.length[world_ids] = p.length[scene_ids]
        self.width[world_ids] = p.width[scene_ids]
        mu = self._road_friction(scene_ids)
        self.friction[world_ids] = mu
        self.log_xy[world_ids] = p.log_xy[scene_ids]
        self.log_valid[world_ids] = p.log_valid[scene_ids]
        self.expert[world_ids] = p.expert[scene_ids]
        self.log_div_sum[world_ids] = 0.0
        self.log_div_count[world_ids] = 0.0
        valid = p.agent_valid[scene_ids]
        self.engine.reset(world_ids, p.spawn_pose[scene_ids], p.spawn_speed[scene_ids], valid)
        self.engine.set_friction(world_ids, mu)
        self.active[world_ids] = valid
        self.status[world_ids] = int(AgentStatus.ACTIVE)
        self.step_count[world_ids] = 0
        self.agent_steps[world_ids] = 0
        self.prev_actions[world_ids] = 0.0
        self.peak_drac[world_ids] = 0.0
        self.min_ttc[world_ids] = float("inf")
        segs = polyline_segments(self.route_xy[world_ids], self.route_valid[world_ids])
        for name, value in vars(segs).items():
            getattr(self.route_segs, name)[world_ids] = value
        self.s_prev[world_ids] = project_on_segments(p.spawn_pose[scene_ids][..., :2], segs)[0]
        self._reset_stops(world_ids, scene_ids)
        if self.replay_idm is not None:
            self.replay_idm.reset(world_ids, scene_ids)

    EPISODE_STATE = (
        "scene_id",
        "serial",
        "step_count",
        "active",
        "status",
        "agent_steps",
        "s_prev",
        "prev_actions",
        "peak_drac",
        "min_ttc",
        "friction",
        "log_div_sum",
        "log_div_count",
        "_obs",
    )
    """Per-world episode state that is not a copy of the scene pool (that follows from ``scene_id``)."""
    SIGNAL_STATE = ("stop_stopped", "stop_passed", *SIGNAL_COUNTS)
    """Episode state of the route stops, part of the state only when the pool has any (so the states
    of environments without signals read as they did before signals existed)."""

    def _episode_state_names(self) -> tuple[str, ...]:
        return self.EPISODE_STATE + (self.SIGNAL_STATE if self.num_stops else ())

    def state_dict(self) -> dict[str, Any]:
        """Everything the next steps depend on, as plain data (a training checkpoint's ``env_state``):
        the episode state of every world, the scene-draw generator and the engine's state. With
        :meth:`load_state_dict` on an environment built the same way, stepping continues bit for bit."""
        out = {
            "episode": tensors_state(self, self._episode_state_names()),
            "next_serial": self._next_serial,
            "generator": self.generator.get_state(),
            "engine": self.engine.state_dict(),
        }
        if self.replay_idm is not None:
            out["replay_idm"] = self.replay_idm.state_dict()
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: worlds re-take their scenes, then the saved episode state, draw
        state and engine state replace the fresh ones. ``ValueError`` names what does not fit."""
        episode = state.get("episode")
        if not isinstance(episode, Mapping) or not isinstance(state.get("generator"), torch.Tensor):
            raise ValueError("environment state lacks 'episode' or 'generator'")
        scene_id = episode.get("scene_id")
        if not isinstance(scene_id, torch.Tensor) or tuple(scene_id.shape) != (self.num_worlds,):
            raise ValueError(
                f"environment state 'scene_id' does not hold one scene per world ({self.num_worlds})"
            )
        if int(scene_id.min()) < 0 or int(scene_id.max()) >= self.pool.num_scenes:
            raise ValueError(
                f"environment state names scene {int(scene_id.max())}, "
                f"this pool has {self.pool.num_scenes} scenes"
            )
        self.reset_worlds(torch.arange(self.num_worlds, device=self.device), scene_id.to(self.device))
        load_tensors_state(self, episode, self._episode_state_names())
        self._next_serial = int(state.get("next_serial", 0))
        self.generator.set_state(state["generator"])
        self.engine.load_state_dict(state["engine"])
        if self.replay_idm is not None:
            self.replay_idm.load_state_dict(state.get("replay_idm", {}))

    def _road_friction(self, scene_ids: torch.Tensor) -> torch.Tensor:
        """Friction of new episodes: the scenes' own, or randomized water films on their surfaces."""
        wf = self.cfg.water_film_randomization_mm
        if wf is None:
            return self.pool.friction[scene_ids]
        h = torch.empty(len(scene_ids)).uniform_(wf[0], wf[1], generator=self.generator)
        surfaces = [self.pool.scenes[i].surface for i in scene_ids.tolist()]
        mu = friction_array(surfaces, h.numpy().astype(np.float64))
        return torch.as_tensor(mu, dtype=torch.float32, device=self.device)

    # -------------------------------------------------------------------------------------- step

    def observations(self) -> torch.Tensor:
        """Current observations (W, K, D)."""
        return self._obs

    @property
    def _native(self) -> bool:
        """Whether the native CPU kernels run (``cfg.native_kernels`` on a CPU; the same numbers as
        the torch path, ``tasks.driving.native``, ``native_obs``, ``native_replay``)."""
        return self.cfg.native_kernels and self.device.type == "cpu"

    def _objects(self, st: VehicleState) -> Objects:
        """Every object of each world, (W, M, ...): the K controlled agents, then the replayed ones
        observed at the current step, packed in their order (``pairs.observed_objects``: M - K is the
        most any world observes now, not the pool's largest count): ``(pos_xy, yaw, vel_xy, length,
        width, active)``."""
        own = (st.pos_xy, st.yaw, st.vel_xy, self.length, self.width, self.active)
        if not self.num_replay:
            return own
        if self.replay_idm is None and self._native:
            if self._native_objects is None:  # the same tensors, packed in one pass (native_replay)
                self._native_objects = NativeObjects(self.pool)
            return self._native_objects(own, self.scene_id, self.step_count)
        if self.replay_idm is None:
            rep = observed_objects(self.pool, self.scene_id, self.step_count)
        else:  # the reactive replay's vehicles where the IDM took them
            rep = self.replay_idm.objects(self.step_count)
        if rep[0].shape[1] == 0:
            return own
        c = [torch.cat((a, b), dim=1) for a, b in zip(own, rep, strict=True)]
        return c[0], c[1], c[2], c[3], c[4], c[5]

    def _pairwise(self, objs: Objects) -> tuple[torch.Tensor, torch.Tensor]:
        """TTC and DRAC (W, K, M) of each controlled agent against every object (K x M pairs only)."""
        ttc, drac, _ = self._interactions(objs, overlap=False)
        return ttc, drac

    def _interactions(
        self, objs: Objects, overlap: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """TTC, DRAC and (with ``overlap``) box overlap (W, K, M) of each controlled agent against every
        object: the fused native kernel on a CPU (``cfg.native_kernels``), torch otherwise; the same
        numbers bit for bit (``tasks.driving.native``)."""
        k, horizon = self.agents_per_world, self.cfg.observations.ttc_horizon_s
        if self._native:
            return agent_interactions(*objs, k, horizon)
        ttc, drac = agent_ttc_drac(*objs, k, horizon)
        over = agent_box_overlap(objs[0], objs[1], objs[3], objs[4], objs[5], k) if overlap else None
        return ttc, drac, over

    def step(self, actions: torch.Tensor) -> StepResult:
        """Advance every world one policy step with ``actions`` (W, K, 2); see the phase order above.
        A numpy array or nested list is converted, a tensor detached and moved to the device
        (``scenefactory.inputs.as_actions``: a wrong type, dtype or shape names ``actions``)."""
        actions = as_actions(actions, (self.num_worlds, self.agents_per_world, 2), self.device)
        cfg = self.cfg
        was_active = self.active.clone()
        # 1. dynamics
        st = self.engine.step(actions, was_active)
        self.step_count += 1
        self.agent_steps += was_active.long()
        if self.replay_idm is not None:  # the logged vehicles react to the agents where they are now
            self.replay_idm.step(
                self.step_count, (st.pos_xy, st.yaw, st.vel_xy, self.length, self.width, was_active)
            )
        # 2. geometry
        proj = self._project(st.pos_xy)
        s_now = proj[0]
        stops = self._stop_events(s_now, st.speed, was_active)
        progress = (s_now - self.s_prev).clamp(-cfg.progress_clip_m, cfg.progress_clip_m) * was_active
        self.s_prev = torch.where(was_active, s_now, self.s_prev)
        goal_dist = (st.pos_xy - self.goal_xy).norm(dim=-1)
        k = self.agents_per_world
        objs = self._objects(st)  # its agents' ``active`` is ``was_active`` (changed in phase 6 only)
        ttc, drac, overlap = self._interactions(objs)
        assert overlap is not None
        contacts = self.engine.collisions()
        if contacts is None:  # no contact model in the engine: exact box overlap, with every object
            collided = overlap.any(-1)
        else:  # logged objects are not in the engine: box overlap with them
            collided = contacts | overlap[:, :, k:].any(-1)
        corners = box_corners(st.pos_xy, st.yaw, self.length, self.width)
        offroad = (self._offroad_field(corners).amax(-1) > cfg.offroad_tolerance_m) & was_active
        min_ttc = ttc.amin(-1)
        # 3. terminations (one outcome per agent)
        collided = collided & was_active
        offroad = offroad & ~collided
        goal = (goal_dist <= cfg.goal_radius_m) & was_active & ~collided & ~offroad
        terminal = collided | offroad | goal
        timed_out_world = self.step_count >= cfg.max_steps
        if cfg.min_active_fraction > 0.0:  # reset policy (phase 6): cut worlds with too few left
            left = (was_active & ~terminal).sum(-1)
            started = self.pool.agent_valid[self.scene_id].sum(-1)
            timed_out_world = timed_out_world | ((left > 0) & (left < cfg.min_active_fraction * started))
        time_out = was_active & ~terminal & timed_out_world.unsqueeze(-1)
        done = terminal | time_out
        # 4. rewards
        ctx = StepContext(
            state=st,
            actions=actions,
            prev_actions=self.prev_actions,
            active=was_active,
            progress_m=progress,
            goal=goal,
            collided=collided,
            offroad=offroad,
            min_ttc_s=min_ttc,
            dt_s=cfg.dt_s,
            red_light=stops.red_light,
            stop_sign=stops.stop_sign,
        )
        terms = {t.name: t.fn(ctx) * was_active for t in cfg.rewards}
        reward = torch.zeros_like(progress)
        for t in cfg.rewards:
            reward = reward + t.weight * terms[t.name]
        self.prev_actions = torch.where(was_active.unsqueeze(-1), actions.clamp(-1, 1), self.prev_actions)
        # 5. statistics and finished records
        self._track_log(st.pos_xy, was_active)
        self.peak_drac = torch.where(was_active, torch.maximum(self.peak_drac, drac.amax(-1)), self.peak_drac)
        self.min_ttc = torch.where(was_active, torch.minimum(self.min_ttc, min_ttc), self.min_ttc)
        for name, event in zip(SIGNAL_COUNTS, vars(stops).values(), strict=True):
            setattr(self, name, getattr(self, name) + event.long())
        outcome = torch.full_like(self.status, int(AgentStatus.ACTIVE))
        outcome = torch.where(time_out, int(AgentStatus.TIMEOUT), outcome)
        outcome = torch.where(goal, int(AgentStatus.GOAL), outcome)
        outcome = torch.where(offroad, int(AgentStatus.OFFROAD), outcome)
        outcome = torch.where(collided, int(AgentStatus.COLLISION), outcome)
        self.status = torch.where(done, outcome, self.status)
        finished = self._finished(done, s_now)
        post_state = VehicleState(**{k: v.clone() for k, v in vars(st).items()})
        # 6. deactivate and reset
        self.active = was_active & ~done
        world_done = ~self.active.any(-1) | timed_out_world
        reset_ids = world_done.nonzero().squeeze(-1)
        self.reset_worlds(reset_ids)
        self._scheduled_friction_change()
        # 7. observations
        if reset_ids.numel():
            st_now = self.engine.state()
            objs_now = self._objects(st_now)
            self._obs = self._observe(st_now, self._pairwise(objs_now)[0], objs=objs_now)
        else:  # the same objects as in phase 2, the agents finished this step now inactive
            act = torch.cat((self.active, objs[5][:, k:]), dim=1)
            self._obs = self._observe(st, ttc, proj, (*objs[:5], act))
        return StepResult(
            obs=self._obs,
            reward=reward,
            done=done,
            time_out=time_out,
            was_active=was_active,
            finished=finished,
            reset_worlds=reset_ids,
            reward_terms=terms,
            state=post_state,
        )

    def _scheduled_friction_change(self) -> None:
        """Worlds whose episode has just run ``friction_change.at_step`` steps get its friction, in the
        engine and in the observation (a reset world is at step 0, so it never matches)."""
        fc = self.cfg.friction_change
        if fc is None:
            return
        ids = (self.step_count == fc.at_step).nonzero().squeeze(-1)
        if ids.numel():
            mu = torch.full((int(ids.numel()),), fc.mu, device=self.device)
            self.friction[ids] = mu
            self.engine.set_friction(ids, mu)

    def _track_log(self, pos_xy: torch.Tensor, was_active: torch.Tensor) -> None:
        """Accumulate the distance to the logged position at this step (where a log exists)."""
        t_log = self.log_xy.shape[2]
        t = self.step_count.clamp(max=t_log - 1).view(-1, 1, 1).expand(-1, self.agents_per_world, 1)
        logged = torch.gather(self.log_xy, 2, t.unsqueeze(-1).expand(-1, -1, 1, 2)).squeeze(2)
        ok = torch.gather(self.log_valid, 2, t).squeeze(2) & (self.step_count < t_log).unsqueeze(-1)
        ok = ok & was_active
        self.log_div_sum += torch.where(ok, (pos_xy - logged).norm(dim=-1), 0.0)
        self.log_div_count += ok.float()

    def expert_actions(self, closed_loop: bool = True) -> torch.Tensor:
        """(W, K, 2) the logged drivers' actions; 0 where the scene has no log.

        Closed loop (default): the action that takes each agent's current state to its next logged
        state through the inverse bicycle (:mod:`scenefactory.tasks.driving.expert`), so it tracks
        its log on every engine and stops at its goal once its log has ended. Open loop: the
        kinematic tier's inverse of the logged states at the current step, whatever the state (exact
        on the kinematic tier for a log the bicycle could drive; 0 once the log has ended)."""
        if closed_loop:
            if self._expert_ref is None:
                self._expert_ref = LogReference.from_scenes(
                    self.pool.scenes, self.agents_per_world, self.device
                )
            state = self.engine.state()
            return tracking_actions(
                self._expert_ref, self.scene_id, self.step_count, state, self.engine.params, self.cfg.dt_s
            )
        t_log = self.expert.shape[2]
        t = self.step_count.clamp(max=t_log - 1).view(-1, 1, 1, 1).expand(-1, self.agents_per_world, 1, 2)
        act = torch.gather(self.expert, 2, t).squeeze(2)
        return torch.where((self.step_count < t_log).view(-1, 1, 1), act, torch.zeros_like(act))

    # ------------------------------------------------------------------------------ route stops

    def _reset_stops(self, world_ids: torch.Tensor, scene_ids: torch.Tensor) -> None:
        """New episodes' route stops: stops at or behind the spawn are passed; an agent that spawns
        slow within a stop's zone has stopped for it."""
        if not self.num_stops:
            return
        p = self.pool
        for name in ("s", "kind", "column", "right_turn"):
            getattr(self, f"stop_{name}")[world_ids] = getattr(p, f"stop_{name}")[scene_ids]
        for name in SIGNAL_COUNTS:
            getattr(self, name)[world_ids] = 0
        valid = p.agent_valid[scene_ids].unsqueeze(-1)
        zeros = torch.zeros_like(self.stop_passed[world_ids])
        _, stopped, passed = stop_events(
            self.s_prev[world_ids],
            p.spawn_speed[scene_ids].abs(),
            p.agent_valid[scene_ids],
            self.stop_s[world_ids],
            self.stop_kind[world_ids],
            self.stop_right_turn[world_ids],
            zeros.long(),
            zeros.long(),
            zeros,
            zeros,
        )
        self.stop_stopped[world_ids] = stopped
        self.stop_passed[world_ids] = passed | ~valid

    def _stop_codes(self, step: torch.Tensor) -> torch.Tensor:
        """(W, K, M) WOMD state of each route stop's signal at step ``step`` (W,) of each world's
        episode: the scene's logged or cyclic state, ``UNKNOWN`` past the end of a log."""
        p = self.pool
        steps, loop = p.signal_steps[self.scene_id], p.signal_loop[self.scene_id]
        t = torch.where(loop, step % steps.clamp(min=1), step.clamp(0, p.signal_state.shape[1] - 1))
        known = (loop | (step < steps)) & (step >= 0)
        codes = torch.where(known.unsqueeze(-1), p.signal_state[self.scene_id, t], 0)
        w, k, m = self.stop_column.shape
        return torch.gather(codes, 1, self.stop_column.reshape(w, k * m)).reshape(w, k, m)

    def _stop_events(self, s_now: torch.Tensor, speed: torch.Tensor, was_active: torch.Tensor) -> StopEvents:
        """Red lights run and stop lines crossed during this step (rules in ``tasks.driving.signals``)."""
        if not self.num_stops:
            none = torch.zeros_like(was_active)
            return StopEvents(none, none, none, none)
        events, self.stop_stopped, self.stop_passed = stop_events(
            s_now,
            speed.abs(),
            was_active,
            self.stop_s,
            self.stop_kind,
            self.stop_right_turn,
            self._stop_codes(self.step_count - 1),
            self._stop_codes(self.step_count),
            self.stop_stopped,
            self.stop_passed,
        )
        return events

    def _finished(self, done: torch.Tensor, s_now: torch.Tensor) -> FinishedEpisodes:
        w_idx, a_idx = done.nonzero(as_tuple=True)
        progress = (s_now / self.goal_s.clamp(min=1e-6)).clamp(0.0, 1.0)
        progress = torch.where(self.status == int(AgentStatus.GOAL), torch.ones_like(progress), progress)
        return FinishedEpisodes(
            outcome=self.status[w_idx, a_idx],
            peak_drac_mps2=self.peak_drac[w_idx, a_idx],
            min_ttc_s=self.min_ttc[w_idx, a_idx],
            progress_frac=progress[w_idx, a_idx],
            log_divergence_m=(self.log_div_sum / self.log_div_count)[w_idx, a_idx],
            steps=self.agent_steps[w_idx, a_idx],
            world=w_idx,
            agent=a_idx,
            serial=self.serial[w_idx],
            scene_id=self.scene_id[w_idx],
            **{name: getattr(self, name)[w_idx, a_idx] for name in SIGNAL_COUNTS},
        )

    # ------------------------------------------------------------------------------ observations

    def _project(self, pos_xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each agent's projection on its route (``geometry.project_on_segments``; its nearest segment
        found natively on a CPU with ``cfg.native_kernels``, the same numbers)."""
        if self._native:
            near2, seg_idx = native_nearest_segment(pos_xy, self.route_segs)
            return project_at_segment(pos_xy, self.route_segs, near2, seg_idx)
        return project_on_segments(pos_xy, self.route_segs)

    def _offroad_field(self, corners: torch.Tensor) -> torch.Tensor:
        """The drivable field (m) at each agent's box corners ``(W, K, 4, 2)`` → ``(W, K, 4)`` (natively
        on a CPU with ``cfg.native_kernels``, the same numbers)."""
        if self._native:
            if self._native_grid is None:
                self._native_grid = NativeGridSample(self.pool.grids)
            w, k = corners.shape[:2]
            return self._native_grid(self.scene_id, corners.reshape(w, k * 4, 2)).view(w, k, 4)
        ids = self.scene_id.view(-1, 1, 1).expand(*corners.shape[:-1])
        return self.pool.grids.sample(ids, corners)

    def _road_obs(self, st: VehicleState) -> torch.Tensor:
        """The road term: each agent's nearest road points from the pool's spatial index (the native
        kernels of ``tasks.driving.native_obs`` on a CPU with ``cfg.native_kernels``)."""
        oc, roads = self.cfg.observations, self.pool.roads
        if self._native:  # the same numbers (native_obs)
            if self._native_road is None:
                self._native_road = NativeRoadObs(roads)
            road = self._native_road
            return road(self.scene_id, st.pos_xy, st.yaw, oc.num_road_points, oc.road_point_range_m)
        ids, dist, valid = roads.nearest(self.scene_id, st.pos_xy, oc.num_road_points)
        near_xy, near_feat = roads.xy[ids], roads.feat[ids].float()
        return obs_terms.road_obs(st.pos_xy, st.yaw, near_xy, near_feat, dist, valid, oc.road_point_range_m)

    def _observe(
        self,
        st: VehicleState,
        ttc: torch.Tensor,
        proj: tuple[torch.Tensor, ...] | None = None,
        objs: Objects | None = None,
    ) -> torch.Tensor:
        cfg, oc = self.cfg, self.cfg.observations
        if objs is None:
            objs = self._objects(st)
        if proj is None:
            proj = self._project(st.pos_xy)
        s_now, lateral, tangent_yaw = proj[0], proj[1], proj[2]
        goal_ego = world_to_ego(self.goal_xy, st.pos_xy, st.yaw)
        neighbors = native_neighbor_obs if self._native else obs_terms.neighbor_obs
        lookahead = native_route_lookahead_obs if self._native else obs_terms.route_lookahead_obs
        time_left = 1.0 - self.step_count.float() / cfg.max_steps
        parts = [
            obs_terms.ego_obs(
                st.speed,
                st.yaw_rate,
                st.steer / cfg.vehicle.max_steer_rad,
                st.accel / cfg.vehicle.max_accel_mps2,
                goal_ego,
                wrap_angle(st.yaw - tangent_yaw),
                lateral,
                time_left.unsqueeze(-1).expand_as(st.speed),
            ),
            lookahead(
                st.pos_xy, st.yaw, self.route_xy, self.route_s, s_now, self.route_end_s, self._lookahead
            ),
            self._road_obs(st),
            neighbors(*objs, ttc, oc.num_neighbors, oc.neighbor_range_m),
        ]
        if oc.friction_aware:
            parts.append(self.friction.view(-1, 1, 1).expand(-1, self.agents_per_world, 1))
        if oc.traffic_signals:
            codes = self._stop_codes(self.step_count)
            parts.append(
                obs_terms.signal_obs(
                    s_now, self.stop_s, self.stop_kind, self.stop_passed, self.stop_stopped, codes
                )
            )
        obs = torch.cat(parts, dim=-1)
        if not bool(torch.isfinite(obs.sum())):  # one reduction; NaN and inf both propagate
            bad = (~torch.isfinite(obs)).nonzero()[0].tolist()
            raise FloatingPointError(f"non-finite observation at [world, agent, feature] = {bad}")
        return obs
