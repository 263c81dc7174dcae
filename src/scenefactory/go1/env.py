"""The batched Go1 velocity-tracking environment (one robot per MuJoCo world).

Phases of :meth:`Go1Env.step`, in this order:

1. actions → clipped → joint targets ``q* = q_home + scale·a``;
2. due pushes kick the trunk's world-frame xy velocity (training only);
3. ``decimation`` physics steps, each applying the saturated PD torque toward ``q*`` (toward the
   previous step's targets for the first ``latency`` physics steps of a randomized world);
4. read the state (:class:`~scenefactory.go1.state.LocoState`), compute the weighted
   reward terms, falls (termination) and time-outs;
5. command and push timers advance; commands are redrawn where due, and heading commands set
   their yaw rate from the robot's yaw (``CommandConfig``);
6. robots that fell or timed out are reset by ids (re-randomized), then observations are made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from scenefactory.engines.mjwarp import make_sim
from scenefactory.go1 import observations as obs_terms
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.curriculum import TerrainCurriculum
from scenefactory.go1.frames import gravity_in_body
from scenefactory.go1.kinematics import feet_in_world, feet_velocity_in_world
from scenefactory.go1.randomization import Randomizer
from scenefactory.go1.rewards import track_ang_vel_z, track_lin_vel_xy
from scenefactory.go1.state import LocoState
from scenefactory.go1.terrain import generate, go1_model, height_scan, scan_points_b, yaw_of
from scenefactory.go1.whole_body import full_commands, sample_body_commands
from scenefactory.inputs import as_actions

CONTACT_FORCE_N = 1.0
"""Foot normal force above which a foot counts as on the ground."""


@dataclass(frozen=True)
class LocoStep:
    """What :meth:`Go1Env.step` returns; ``state`` is the step's state before any reset."""

    actor_obs: torch.Tensor
    """(N, history·45) the actor's observations after resets."""
    critic_obs: torch.Tensor
    """(N, 45 + 28) the critic's observations after resets."""
    reward: torch.Tensor
    terminated: torch.Tensor
    """(N,) bool: fell this step."""
    time_out: torch.Tensor
    """(N,) bool: reached the episode length this step."""
    state: LocoState
    terms: dict[str, torch.Tensor]
    """Unweighted reward terms, (N,) each."""

    @property
    def done(self) -> torch.Tensor:
        """(N,) bool: the episode ended (fell or timed out)."""
        return self.terminated | self.time_out


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)


class Go1Env:
    """N Go1 robots on flat ground, each in its own MuJoCo world, stepped together."""

    def __init__(
        self,
        cfg: Go1TaskConfig,
        seed: int = 0,
        nthread: int | None = None,
        randomize_episode_start: bool = False,
        boxes_m: np.ndarray | None = None,
    ) -> None:
        """Build the model and batch; every robot starts at its home pose with a fresh command.
        ``boxes_m`` (B, 6): static obstacles in every world (centre xyz, half-sizes [m]; navigation)."""
        self.cfg = cfg
        self.num_envs = cfg.num_envs
        self.num_actions = go1.NUM_JOINTS
        self.terrain = generate(cfg.terrain) if cfg.terrain.enabled else None
        """The rough-terrain grid all worlds share (``None``: the flat floor; ``go1.terrain``)."""
        self.model = go1_model(1.0 / cfg.physics_hz, self.terrain, boxes_m=boxes_m)
        self.index = go1.Go1Index.from_model(self.model)
        self.sim = make_sim(self.model, cfg.num_envs, cfg.physics, nthread)  # MuJoCo C, or Warp: cfg.physics
        self._qpos, self._qvel = self.sim.bind("qpos"), self.sim.bind("qvel")
        self._ctrl, self._sensor_view = self.sim.bind("ctrl"), self.sim.bind("sensordata")
        self._sensordata = self._sensor_view
        """The sensors read by the task: MuJoCo's live output, or a restored copy until the next step."""
        self.rng = np.random.default_rng(seed)
        self.randomizer = Randomizer(self.sim, self.index, cfg.randomization, cfg.physics_hz)
        n, j = cfg.num_envs, go1.NUM_JOINTS
        self.q_home = go1.default_joint_pos()
        rng_mid = go1.joint_ranges().mean(axis=1)
        rng_half = np.diff(go1.joint_ranges(), axis=1)[:, 0] / 2
        self._soft_limits = _t(np.stack([rng_mid - 0.9 * rng_half, rng_mid + 0.9 * rng_half], axis=1))
        self._home_t = _t(self.q_home)
        self.command = np.zeros((n, len(obs_terms.command_names(cfg.whole_body.enabled))))
        self.actions = np.zeros((n, j))
        self.prev_actions = np.zeros((n, j))
        self._prev_target = np.tile(self.q_home, (n, 1))
        self._prev_qvel = np.zeros((n, j))
        self._torque = np.zeros((n, j))
        self._air_time = np.zeros((n, 4))
        self._last_contact = np.ones((n, 4), dtype=bool)
        self.step_count = np.zeros(n, dtype=np.int64)
        self._cmd_timer = np.zeros(n)
        self._push_timer = np.zeros(n)
        self._held_command: np.ndarray | None = None
        self.heading_rad = np.full(n, np.nan)
        """(N,) each robot's commanded world-frame heading [rad] (``CommandConfig`` heading commands;
        NaN where the yaw-rate command is drawn, not steered)."""
        self.lin_fraction = cfg.commands.initial_fraction
        self.yaw_fraction = cfg.commands.initial_fraction
        self._ep_track = np.zeros((n, 2))
        self._ended_track: list[np.ndarray] = []
        frame_dim = obs_terms.frame_dim(cfg.whole_body.enabled)
        self._history = np.zeros((n, cfg.history, frame_dim), dtype=np.float32)
        self.curriculum: TerrainCurriculum | None = None
        """Each robot's tile and its level's curriculum (``go1.curriculum``); ``None`` on flat ground."""
        if self.terrain is not None:
            t = cfg.terrain
            self.curriculum = TerrainCurriculum(
                n, t.num_levels, t.num_cols, t.max_init_level, t.tile_size_m, self.rng
            )
        self._scan_points = scan_points_b(cfg.terrain)
        self._actor_scan = np.zeros((n, len(self._scan_points) if cfg.terrain.height_scan_actor else 0))
        self.reset(np.arange(n))
        if randomize_episode_start:
            self.step_count[:] = self.rng.integers(0, cfg.max_steps, n)

    # ------------------------------------------------------------------------------- commands

    def command_ranges(self) -> np.ndarray:
        """(3, 2) the current curriculum's command ranges (vx, vy, yaw rate)."""
        c = self.cfg.commands
        lf, yf = self.lin_fraction, self.yaw_fraction
        return np.array(
            [
                [lf * c.vx_mps[0], lf * c.vx_mps[1]],
                [lf * c.vy_mps[0], lf * c.vy_mps[1]],
                [yf * c.yaw_radps[0], yf * c.yaw_radps[1]],
            ]
        )

    def _sample_commands(self, ids: np.ndarray) -> None:
        if ids.size == 0:
            return
        if self._held_command is not None:
            self.command[ids] = self._held_command[ids]
            return
        r = self.command_ranges()
        cmd = self.rng.uniform(r[:, 0], r[:, 1], (ids.size, 3))
        if self.cfg.commands.pure_turn_prob > 0:  # no extra draw otherwise: older runs reproduce
            cmd[self.rng.random(ids.size) < self.cfg.commands.pure_turn_prob, :2] = 0.0
        standing = self.rng.random(ids.size) < self.cfg.commands.standing_prob
        cmd[standing] = 0.0
        self.heading_rad[ids] = np.nan
        if self.cfg.commands.heading_prob > 0:  # no extra draws otherwise: older runs reproduce
            steer = (self.rng.random(ids.size) < self.cfg.commands.heading_prob) & ~standing
            steer &= cmd[:, :2].any(axis=1)  # a pure turn keeps its yaw rate
            target = self.rng.uniform(-math.pi, math.pi, ids.size)
            self.heading_rad[ids[steer]] = target[steer]
        if self.cfg.whole_body.enabled:  # drawn with the velocity command, after it
            cmd = np.concatenate([cmd, sample_body_commands(self.cfg.whole_body, self.rng, ids.size)], axis=1)
        self.command[ids] = cmd
        self._cmd_timer[ids] = self.cfg.commands.resample_s
        self._steer_headings(ids)

    def _steer_headings(self, ids: np.ndarray) -> None:
        """Set the yaw-rate command of robots ``ids`` that steer to a heading from their current yaw
        (``CommandConfig``: ``clip(k · wrap(ψ* − ψ))`` in the current yaw range)."""
        ids = ids[~np.isnan(self.heading_rad[ids])]
        if ids.size == 0:
            return
        yaw = yaw_of(self._sensordata[ids][:, self.index.orientation])
        err = np.angle(np.exp(1j * (self.heading_rad[ids] - yaw)))
        lo, hi = self.command_ranges()[2]
        self.command[ids, 2] = np.clip(self.cfg.commands.heading_stiffness * err, lo, hi)

    def hold_commands(self, command: np.ndarray) -> None:
        """Fix every robot's command to ``command`` (N, 3) for good (evaluation), in the actor's
        stacked frames too; with whole-body commands (N, 6), or (N, 3) at the nominal body command."""
        cmd = np.asarray(command, dtype=np.float64).reshape(self.num_envs, -1)
        self._held_command = full_commands(cmd, self.cfg.whole_body, self.num_envs)
        self.command[:] = self._held_command
        self.heading_rad[:] = np.nan
        # the frames stacked since the last reset read the command drawn there: the held one instead
        _, start, stop = next(
            s for s in obs_terms.frame_layout(self.cfg.whole_body.enabled) if s[0] == "command"
        )
        self._history[:, :, start:stop] = self._held_command[:, None, :]

    def update_curriculum(self) -> dict[str, float]:
        """Widen the command ranges if the episodes that ended since the last call tracked well."""
        c = self.cfg.commands
        out = {"lin_fraction": self.lin_fraction, "yaw_fraction": self.yaw_fraction}
        if not self._ended_track:
            return out
        track = np.concatenate(self._ended_track).mean(axis=0)
        self._ended_track.clear()
        if track[0] > c.advance_threshold:
            self.lin_fraction = min(1.0, self.lin_fraction + c.step)
        if track[1] > c.advance_threshold:
            self.yaw_fraction = min(1.0, self.yaw_fraction + c.step)
        out.update(lin_fraction=self.lin_fraction, yaw_fraction=self.yaw_fraction)
        out.update(track_lin=float(track[0]), track_yaw=float(track[1]))
        return out

    # --------------------------------------------------------------------------------- resets

    def reset(self, ids: np.ndarray, yaw_rad: np.ndarray | None = None) -> None:
        """Re-randomize and restart robots ``ids`` at the home pose (random heading, or ``yaw_rad``
        (n,); small kicks), on terrain at their tile's origin."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        n = ids.size
        self.randomizer.sample(ids, self.rng)
        yaw = self.rng.uniform(-math.pi, math.pi, n) if yaw_rad is None else np.asarray(yaw_rad, dtype=float)
        qpos = np.zeros((n, self.model.nq))
        qpos[:, 2] = go1.HOME_HEIGHT_M
        qpos[:, 3] = np.cos(yaw / 2)
        qpos[:, 6] = np.sin(yaw / 2)
        qpos[:, self.index.joint_qpos] = self.q_home + self.rng.uniform(-0.1, 0.1, (n, go1.NUM_JOINTS))
        if self.curriculum is not None and self.terrain is not None:  # at its tile's origin
            origin = self.terrain.origins_m[self.curriculum.levels[ids], self.curriculum.cols[ids]]
            qpos[:, 0:3] += origin
            self.curriculum.begin(ids, origin[:, :2], yaw)
        self._qpos[ids] = qpos
        qvel = np.zeros((n, self.model.nv))
        qvel[:, 0:2] = self.rng.uniform(-0.3, 0.3, (n, 2))
        self._qvel[ids] = qvel
        self._ctrl[ids] = 0.0
        self.sim.forward(ids)
        if self._sensordata is not self._sensor_view:  # a restored copy: these robots start afresh
            self._sensordata[ids] = self._sensor_view[ids]
        self.actions[ids] = 0.0
        self.prev_actions[ids] = 0.0
        self._prev_target[ids] = self.q_home
        self._prev_qvel[ids] = 0.0
        self._torque[ids] = 0.0
        self._air_time[ids] = 0.0
        self._last_contact[ids] = True
        self.step_count[ids] = 0
        self._ep_track[ids] = 0.0
        self._sample_commands(ids)
        if self.cfg.pushes is not None:
            self._push_timer[ids] = self.rng.uniform(*self.cfg.pushes.interval_s, n)
        frame = obs_terms.actor_frame(self._read_state_arrays(), self.cfg.noise, self.rng)[ids]
        self._history[ids] = frame[:, None, :]
        self._observe_scan(ids)

    STATE = (
        "command",
        "actions",
        "prev_actions",
        "_prev_target",
        "_prev_qvel",
        "_torque",
        "_air_time",
        "_last_contact",
        "step_count",
        "_cmd_timer",
        "_push_timer",
        "_ep_track",
        "_history",
    )
    """The task's own per-robot arrays that the next steps read."""
    RANDOMIZER_STATE = (
        "friction",
        "link_mass_scale",
        "trunk_added_mass_kg",
        "trunk_com_offset_m",
        "motor_strength",
        "kp_scale",
        "kd_scale",
        "latency_steps",
        "joint_friction_scale",
    )

    def state_dict(self) -> dict[str, Any]:
        """Everything the next steps depend on, as plain data: MuJoCo's state and per-world model
        fields, the drawn parameters, the task's arrays, the curriculum and the generator. Between
        iterations (when the curriculum has consumed the ended episodes) this is the whole state."""
        return {
            "sim": self.sim.state_dict(),
            "task": {f: torch.from_numpy(np.array(getattr(self, f), copy=True)) for f in self.STATE},
            "randomizer": {
                f: torch.from_numpy(np.array(getattr(self.randomizer, f), copy=True))
                for f in self.RANDOMIZER_STATE
            },
            "curriculum": [self.lin_fraction, self.yaw_fraction],
            "rng": self.rng.bit_generator.state,
            "held_command": None
            if self._held_command is None
            else torch.from_numpy(self._held_command.copy()),
            "terrain": self._terrain_state(),
            "heading_rad": torch.from_numpy(self.heading_rad.copy()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (every array checked before any is written); ``ValueError``
        names what does not fit."""
        pairs = []
        for group, owner, names in (
            ("task", self, self.STATE),
            ("randomizer", self.randomizer, self.RANDOMIZER_STATE),
        ):
            saved = state.get(group)
            if not isinstance(saved, Mapping):
                raise ValueError(f"Go1 environment state lacks '{group}'")
            for f in names:
                arr, value = getattr(owner, f), saved.get(f)
                if not isinstance(value, torch.Tensor) or tuple(value.shape) != arr.shape:
                    got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                    raise ValueError(
                        f"Go1 environment state '{group}.{f}' is {got}, this one holds {arr.shape}"
                    )
                pairs.append((arr, value.numpy()))
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]  # raises ValueError or TypeError on a foreign state
        lin, yaw = (float(v) for v in state["curriculum"])
        sensors = state["sim"].get("sensordata") if isinstance(state.get("sim"), Mapping) else None
        n, width = self._sensor_view.shape
        if isinstance(sensors, torch.Tensor) and tuple(sensors.shape) == (n, width - go1.LEG_TOUCH_SENSORS):
            # saved before the thigh and calf sensors (the last ones): no leg on the ground until the
            # next physics step reads them; nothing observed comes from them
            sensors = torch.cat([sensors, sensors.new_zeros(n, go1.LEG_TOUCH_SENSORS)], dim=1)
            state = {**state, "sim": {**state["sim"], "sensordata": sensors}}
        if not isinstance(sensors, torch.Tensor) or tuple(sensors.shape) != self._sensor_view.shape:
            raise ValueError(
                f"Go1 environment state lacks 'sim.sensordata' of shape {self._sensor_view.shape}"
            )
        heading = state.get("heading_rad")  # absent from states saved before heading commands
        if heading is not None and (
            not isinstance(heading, torch.Tensor) or tuple(heading.shape) != self.heading_rad.shape
        ):
            raise ValueError(f"Go1 environment state 'heading_rad' does not hold {self.heading_rad.shape}")
        self._load_terrain_state(state.get("terrain"))
        self.sim.load_state_dict(state["sim"], set_const=self.randomizer.cfg is not None)
        # the sensors as the saved run's last substep left them, until the next physics step
        self._sensordata = sensors.numpy().copy()
        for arr, value in pairs:
            arr[...] = value
        self.rng = rng
        self.lin_fraction, self.yaw_fraction = lin, yaw
        held = state.get("held_command")
        self._held_command = None if held is None else held.numpy().copy()
        self.heading_rad[:] = np.nan if heading is None else heading.numpy()
        self._ended_track.clear()

    def push(self, ids: np.ndarray, vel_xy_w: np.ndarray) -> None:
        """Add ``vel_xy_w`` (n, 2) [m/s] to the trunk's world-frame velocity of robots ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        self._qvel[ids, 0:2] += vel_xy_w

    def _due_pushes(self) -> None:
        p = self.cfg.pushes
        if p is None:
            return
        self._push_timer -= self.cfg.dt
        due = np.nonzero(self._push_timer <= 0)[0]
        if due.size:
            ang = self.rng.uniform(-math.pi, math.pi, due.size)
            mag = self.rng.uniform(0.0, p.max_velocity_mps, due.size)
            self.push(due, np.stack([np.cos(ang), np.sin(ang)], axis=1) * mag[:, None])
            self._push_timer[due] = self.rng.uniform(*p.interval_s, due.size)

    # ---------------------------------------------------------------------------------- state

    def _read_state_arrays(self) -> dict[str, np.ndarray]:
        ix, sd = self.index, self._sensordata
        quat = sd[:, ix.orientation]
        return {
            "command": self.command,
            "lin_vel_b": sd[:, ix.local_linvel],
            "ang_vel_b": sd[:, ix.gyro],
            "gravity_b": gravity_in_body(quat),
            "height_m": self._qpos[:, 2] if self.terrain is None else self._qpos[:, 2] - self.ground_m(),
            "joint_pos": self._qpos[:, ix.joint_qpos],
            "joint_vel": self._qvel[:, ix.joint_qvel],
            "home": self.q_home,
            "actions": self.actions,
            "foot_contact": sd[:, ix.foot_touch] > CONTACT_FORCE_N,
            "leg_contact": sd[:, ix.leg_touch] > CONTACT_FORCE_N,
            "trunk_touch": sd[:, ix.trunk_touch] > 0.0,
        }

    def observations(self, clean_scan: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor (N, history·45), critic (N, 73)) for the current state; ``clean_scan`` (N, P) is
        this state's ``height_scan()`` when the caller has it already (computed here otherwise)."""
        arrays = self._read_state_arrays()
        actor = _t(self._history.reshape(self.num_envs, -1))
        critic = _t(obs_terms.critic_obs(arrays, self.randomizer.privileged()))
        if self.cfg.terrain.scans:  # the height scan last: the critic's, and the actor's when it reads one
            clean = self.height_scan() if clean_scan is None else clean_scan
            critic = torch.cat([critic, _t(clean)], dim=1)
            actor = torch.cat([actor, _t(self._actor_scan)], dim=1)
        return actor, critic

    def teacher_params(self, params_dim: int) -> torch.Tensor | None:
        """(N, params_dim) the randomized parameters a privileged teacher of ``params_dim`` inputs
        reads (with the joint damping scale when it has room for it); ``None`` for ``params_dim`` 0."""
        if not params_dim:
            return None
        with_joint = params_dim == self.randomizer.privileged(joint_scale=False).shape[1] + 1
        return torch.as_tensor(self.randomizer.privileged(joint_scale=with_joint), dtype=torch.float32)

    # -------------------------------------------------------------------------------- terrain

    def ground_m(self) -> np.ndarray:
        """(N,) ground height under each base [m] (0 on the flat floor)."""
        if self.terrain is None:
            return np.zeros(self.num_envs)
        return self.terrain.height_at(self._qpos[:, 0:2])

    def feet(self) -> tuple[np.ndarray, np.ndarray]:
        """(N, 4) each foot's height above the ground under it [m] and (N, 4) its horizontal speed
        [m/s], from the leg kinematics (``go1.kinematics``) of the current state."""
        ix = self.index
        q, qd = self._qpos[:, ix.joint_qpos], self._qvel[:, ix.joint_qvel]
        feet_w = feet_in_world(self._qpos[:, 0:7], q)
        ground = np.zeros((self.num_envs, 4))
        if self.terrain is not None:
            ground = self.terrain.height_at(feet_w[..., 0:2].reshape(-1, 2)).reshape(self.num_envs, 4)
        vel_w = feet_velocity_in_world(self._qpos[:, 0:7], self._qvel[:, 0:6], q, qd)
        return feet_w[..., 2] - go1.FOOT_RADIUS_M - ground, np.linalg.norm(vel_w[..., 0:2], axis=-1)

    def height_scan(self, ids: np.ndarray | None = None) -> np.ndarray:
        """(N, P) the clean height scan: base height above the ground at each point of
        ``terrain.scan_points_b`` (yaw-aligned) minus the nominal trunk height, clipped; (n, P)
        for robots ``ids`` only."""
        t = self.cfg.terrain
        heights_at = None if self.terrain is None else self.terrain.height_at
        base = self._qpos[:, 0:7] if ids is None else self._qpos[ids, 0:7]
        pos, yaw = base[:, 0:3], yaw_of(base[:, 3:7])
        return height_scan(heights_at, pos, yaw, self._scan_points, go1.HOME_HEIGHT_M, t.scan_clip_m)

    def _observe_scan(self, ids: np.ndarray, clean_scan: np.ndarray | None = None) -> None:
        """The actor's scan of robots ``ids`` now, with sensor noise when the task has noise;
        ``clean_scan`` (n, P) is their ``height_scan`` when the caller has it already."""
        t = self.cfg.terrain
        if not t.height_scan_actor or ids.size == 0:
            return
        scan = self.height_scan(ids) if clean_scan is None else clean_scan
        if self.cfg.noise is not None and t.scan_noise_m > 0:
            scan = scan + self.rng.uniform(-t.scan_noise_m, t.scan_noise_m, scan.shape)
        self._actor_scan[ids] = scan

    def _terrain_state(self) -> dict[str, torch.Tensor] | None:
        if not self.cfg.terrain.scans:
            return None
        state = {} if self.curriculum is None else self.curriculum.state_dict()
        return {**state, "actor_scan": torch.from_numpy(self._actor_scan.copy())}

    def _load_terrain_state(self, state: Any) -> None:
        if not self.cfg.terrain.scans:
            return
        scan = state.get("actor_scan") if isinstance(state, Mapping) else None
        if not isinstance(scan, torch.Tensor) or tuple(scan.shape) != self._actor_scan.shape:
            shape = self._actor_scan.shape
            raise ValueError(f"Go1 environment state lacks 'terrain.actor_scan' of shape {shape}")
        if self.curriculum is not None:
            self.curriculum.load_state_dict(state)
        self._actor_scan[...] = scan.numpy()

    # ----------------------------------------------------------------------------------- step

    def _term(
        self, fn: Callable[[LocoState], torch.Tensor], state: LocoState, terms: dict[str, torch.Tensor]
    ) -> np.ndarray:
        """A term's (N,) values: the reward's own evaluation when the task weighs it, else computed
        (the curriculum reads the tracking kernels whether or not they are rewarded)."""
        for t in self.cfg.rewards:
            if t.fn is fn:
                return terms[t.name].numpy()
        return fn(state).numpy()

    def step(self, actions: torch.Tensor) -> LocoStep:
        """Advance one policy step (module docstring for the phases)."""
        cfg, ix = self.cfg, self.index
        # numpy/list converted, a tensor detached; wrong type, dtype, shape: ArgumentError naming it
        a = as_actions(actions, (self.num_envs, go1.NUM_JOINTS), torch.device("cpu")).double().numpy()
        if not np.isfinite(a).all():
            bad = np.nonzero(~np.isfinite(a).all(axis=1))[0].tolist()
            raise FloatingPointError(f"non-finite actions for robots {bad[:8]}")
        self.prev_actions = self.actions.copy()
        self.actions = np.clip(a, -cfg.action_clip, cfg.action_clip)
        target = self.q_home + cfg.action_scale * self.actions
        self._sensordata = self._sensor_view
        self._due_pushes()
        rnd = self.randomizer
        kp = (cfg.kp * rnd.kp_scale)[:, None]
        kd = (cfg.kd * rnd.kd_scale)[:, None]
        for sub in range(cfg.decimation):
            late = (sub < rnd.latency_steps)[:, None]
            tgt = np.where(late, self._prev_target, target)
            q, qd = self._qpos[:, ix.joint_qpos], self._qvel[:, ix.joint_qvel]
            self._torque = go1.pd_torque(tgt, q, qd, kp, kd, rnd.motor_strength)
            self._ctrl[:, ix.actuator] = self._torque
            self.sim.step(1)
        self.sim.check_health(f"the policy step at physics {cfg.physics_hz} Hz blew up")
        self._prev_target = target
        self.step_count += 1

        arrays = self._read_state_arrays()
        contact = arrays["foot_contact"]
        filt = contact | self._last_contact
        first = (self._air_time > 0) & filt
        self._air_time += cfg.dt
        air_at_touch = self._air_time * first
        self._air_time *= ~filt
        self._last_contact = contact
        qd = arrays["joint_vel"]
        joint_acc = (qd - self._prev_qvel) / cfg.dt
        self._prev_qvel = qd.copy()
        cos_fall = math.cos(math.radians(cfg.fall_tilt_deg))
        fallen = arrays["trunk_touch"] | (arrays["gravity_b"][:, 2] > -cos_fall)
        foot_height, foot_speed = self.feet()
        state = LocoState(
            command=_t(self.command),
            lin_vel_b=_t(arrays["lin_vel_b"]),
            ang_vel_b=_t(arrays["ang_vel_b"]),
            gravity_b=_t(arrays["gravity_b"]),
            height_m=_t(arrays["height_m"]),
            joint_pos=_t(arrays["joint_pos"]),
            joint_vel=_t(qd),
            joint_acc=_t(joint_acc),
            default_joint_pos=self._home_t,
            joint_limits=self._soft_limits,
            torque=_t(self._torque),
            actions=_t(self.actions),
            prev_actions=_t(self.prev_actions),
            foot_contact=torch.from_numpy(contact.copy()),
            leg_contact=torch.from_numpy(arrays["leg_contact"]),
            first_contact=torch.from_numpy(first),
            air_time_s=_t(air_at_touch),
            foot_height_m=_t(foot_height),
            foot_speed_xy=_t(foot_speed),
            fallen=torch.from_numpy(fallen),
            air_time_threshold_s=cfg.feet_air_time_threshold_s,
            foot_clearance_target_m=cfg.foot_clearance_target_m,
            dt=cfg.dt,
        )
        terms = {t.name: t.fn(state) for t in cfg.rewards}
        reward = torch.zeros(self.num_envs)
        for t in cfg.rewards:
            reward += t.weight * cfg.dt * terms[t.name]
        self._ep_track += np.stack(
            [self._term(track_lin_vel_xy, state, terms), self._term(track_ang_vel_z, state, terms)], axis=1
        )
        time_out = self.step_count >= cfg.max_steps
        done = fallen | time_out
        ended = np.nonzero(done)[0]
        if ended.size:
            self._ended_track.append(self._ep_track[ended] / self.step_count[ended, None])
        if self.curriculum is not None:  # promote or demote robots whose episode ended
            self.curriculum.advance(self.command[:, :3], cfg.dt)
            if cfg.terrain.curriculum:
                end_xy = self._qpos[ended, 0:2]
                self.curriculum.end(ended, end_xy, fallen[ended], cfg.episode_length_s, self.rng)

        self._cmd_timer -= cfg.dt
        due = (self._cmd_timer <= 0) & ~done
        self._sample_commands(np.nonzero(due)[0])
        self._steer_headings(np.nonzero(~due & ~done)[0])  # the new draws were steered in the draw
        frame = obs_terms.actor_frame(arrays, cfg.noise, self.rng)
        self._history = np.roll(self._history, 1, axis=1)
        self._history[:, 0] = frame
        self.reset(ended)  # observes the restarted robots' scans
        clean = self.height_scan() if cfg.terrain.scans else None  # once a step, for actor and critic
        if clean is not None:
            kept = np.nonzero(~done)[0]
            self._observe_scan(kept, clean[kept])
        actor, critic = self.observations(clean)
        return LocoStep(
            actor_obs=actor,
            critic_obs=critic,
            reward=reward,
            terminated=torch.from_numpy(fallen.copy()),
            time_out=torch.from_numpy(time_out & ~fallen),
            state=state,
            terms=terms,
        )
