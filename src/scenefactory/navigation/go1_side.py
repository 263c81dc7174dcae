"""The Go1 side of legged navigation: the abstraction φ, Go1 rollouts recorded through it, and
navigation policies evaluated on the Go1.

The Go1 is the MuJoCo Go1 of :class:`~scenefactory.go1.env.Go1Env` (the nominal robot: no
randomization, pushes or sensor noise) walking with a locomotion policy (the shipped one by
default) that turns each velocity command into gait. A navigation step of ``nav_dt_s`` holds one
command for ``nav_dt_s · policy_hz`` locomotion steps. A task's boxes are MuJoCo box geoms
(:data:`~.tasks.WALL_HEIGHT_M` tall) that the robot collides with.

φ (:func:`phi`): the trunk's world x, y and yaw, its world-frame planar velocity turned into the
heading frame, and its yaw rate (the free joint's body-frame angular velocity about z). φ is read
at the navigation steps for the abstract state; on the Go1 the task terms (goal, collision) are
checked at every locomotion step, and a fall (the env's termination: trunk contact or tilt) ends
an episode as a failure.

Recording (:func:`record_go1`): ``worlds`` robots in open space (no walls) start at rest with
random headings and follow smooth random commands — an Ornstein–Uhlenbeck process in [−1, 1]
per component (θ 1, σ 0.8, ``grounding.dataset``'s), mapped onto the command ranges (−1 → low,
0 → 0, +1 → high) — in episodes of ``episode_s``; a robot that falls ends its episode there. The
transitions are written in the grounding package's layout (floor μ 1.0 as ``friction``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from scenefactory.go1.config import nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.terrain import yaw_of
from scenefactory.go1.train import Go1Policy
from scenefactory.grounding.dataset import OrnsteinUhlenbeck
from scenefactory.navigation.engine import CommandLimits
from scenefactory.navigation.policy import Outcomes, follower_command
from scenefactory.navigation.sim import OutcomeTracker, start_yaw
from scenefactory.navigation.tasks import WALL_HEIGHT_M, NavTask, TaskBatch

NAV_DT_S = 0.2
"""The navigation step [s]: the abstract engine's dt, and how long the Go1 holds a command."""


def limits_of(policy: Go1Policy) -> CommandLimits:
    """The locomotion policy's command ranges."""
    c = policy.task_cfg.commands
    return CommandLimits(tuple(c.vx_mps), tuple(c.vy_mps), tuple(c.yaw_radps))  # type: ignore[arg-type]


def boxes_3d(task: NavTask) -> np.ndarray | None:
    """The task's boxes as (B, 6) MuJoCo boxes (centre xyz, half-sizes), ``None`` without any."""
    if not task.boxes:
        return None
    b = np.asarray(task.boxes, dtype=np.float64)
    h = np.full((len(b), 1), WALL_HEIGHT_M / 2)
    return np.concatenate([b[:, :2], h, b[:, 2:], h], axis=1)


class NavGo1:
    """``n`` Go1 robots walking a locomotion policy in one task's walls (or open space)."""

    def __init__(
        self, policy: Go1Policy, n: int, task: NavTask | None, seed: int, nav_dt_s: float = NAV_DT_S
    ) -> None:
        """Build the worlds (episodes long enough never to time out inside a navigation run)."""
        t = policy.task_cfg
        steps = nav_dt_s * t.policy_hz
        if abs(steps - round(steps)) > 1e-6 or round(steps) < 1:
            raise ValueError(
                f"nav_dt_s {nav_dt_s} is not a whole number of {1 / t.policy_hz:g} s locomotion steps"
            )
        cfg = replace(nominal(t), num_envs=n, episode_length_s=1e6)
        cfg = replace(cfg, terrain=replace(t.terrain, kind="flat"))
        self.policy, self.n, self.nav_dt_s = policy, n, nav_dt_s
        self.substeps = round(steps)
        self.env = Go1Env(cfg, seed=seed, nthread=1, boxes_m=None if task is None else boxes_3d(task))
        self._qpos, self._qvel = self.env.sim.bind("qpos"), self.env.sim.bind("qvel")
        self.obs = self.env.observations()[0]

    def reset(self, yaw_rad: np.ndarray) -> None:
        """Every robot to the origin at its home pose, heading ``yaw_rad`` (n,)."""
        self.env.reset(np.arange(self.n), yaw_rad=yaw_rad)
        self.policy.reset()
        self.obs = self.env.observations()[0]

    def phi(self) -> torch.Tensor:
        """(n, 6) the abstract state (module docstring)."""
        q, v = self._qpos, self._qvel
        yaw = yaw_of(q[:, 3:7])
        c, s = np.cos(yaw), np.sin(yaw)
        vx = c * v[:, 0] + s * v[:, 1]
        vy = -s * v[:, 0] + c * v[:, 1]
        return torch.as_tensor(
            np.stack([q[:, 0], q[:, 1], yaw, vx, vy, v[:, 5]], axis=1), dtype=torch.float32
        )

    def walk(self, command: torch.Tensor) -> torch.Tensor:
        """Hold ``command`` (n, 3) for one locomotion step; (n,) bool: fell during it (the env
        restarts a fallen robot: its later states are not the episode's)."""
        self.env.hold_commands(command.double().numpy())
        res = self.env.step(self.policy.act(self.obs))
        self.obs = res.actor_obs
        self.policy.reset(res.done)
        return res.terminated


@dataclass(frozen=True)
class Recording:
    """Go1 transitions through φ (the grounding layout), and how much robot time they are."""

    data: dict[str, np.ndarray]
    minutes: float
    falls: int


@torch.no_grad()
def record_go1(
    policy: Go1Policy, minutes: float, seed: int, worlds: int = 16, episode_s: float = 20.0
) -> Recording:
    """At least ``minutes`` of Go1 robot time of smooth random commands (module docstring)."""
    limits = limits_of(policy)
    go1 = NavGo1(policy, worlds, None, seed)
    steps = round(episode_s / NAV_DT_S)
    rounds = math.ceil(minutes * 60.0 / (episode_s * worlds))
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    lo, hi = limits.bounds()
    rows: dict[str, list[np.ndarray]] = {k: [] for k in ("state", "action", "next_state", "episode", "step")}
    falls = 0
    for r in range(rounds):
        go1.reset(rng.uniform(-math.pi, math.pi, worlds))
        ou = OrnsteinUhlenbeck((worlds, 3), gen)
        alive = np.ones(worlds, dtype=bool)
        for k in range(steps):
            before = go1.phi()
            u = ou(NAV_DT_S)
            cmd = torch.where(u >= 0, u * hi, -u * lo)
            fell = torch.zeros(worlds, dtype=torch.bool)
            for _ in range(go1.substeps):
                fell |= go1.walk(cmd)
            after = go1.phi()
            ok = alive & ~fell.numpy()
            falls += int((alive & fell.numpy()).sum())
            alive = ok
            rows["state"].append(before[ok].numpy())
            rows["action"].append(cmd[ok].numpy())
            rows["next_state"].append(after[ok].numpy())
            rows["episode"].append(np.flatnonzero(ok) + r * worlds)
            rows["step"].append(np.full(int(ok.sum()), k))
    data = {k: np.concatenate(v) for k, v in rows.items()}
    data = {
        **{k: data[k].astype(np.float32) for k in ("state", "action", "next_state")},
        "episode": data["episode"].astype(np.int64),
        "step": data["step"].astype(np.int32),
        "friction": np.ones(len(data["step"]), dtype=np.float32),
    }
    return Recording(data=data, minutes=len(data["step"]) * NAV_DT_S / 60.0, falls=falls)


@torch.no_grad()
def evaluate_go1(
    policy: Go1Policy, task: NavTask, thetas: torch.Tensor, episodes: int, seed: int
) -> Outcomes:
    """Play every row of ``thetas`` (P, 6) for ``episodes`` episodes of ``task`` on the Go1, all
    P · episodes robots at once; outcomes (P · episodes,), policy by policy."""
    limits = limits_of(policy)
    p = thetas.shape[0]
    batch = TaskBatch.of([task] * p, episodes)
    theta = thetas.repeat_interleave(episodes, dim=0)
    gen = torch.Generator().manual_seed(seed)
    go1 = NavGo1(policy, batch.size, task, seed)
    go1.reset(start_yaw(batch, gen).double().numpy())
    track = OutcomeTracker(batch)
    nav_steps = math.ceil(task.time_limit_s / NAV_DT_S - 1e-9)
    dt = 1.0 / policy.task_cfg.policy_hz
    for k in range(nav_steps):
        cmd = follower_command(go1.phi(), batch, theta, limits)
        cmd = torch.where(track.done[:, None], torch.zeros_like(cmd), cmd)
        for j in range(go1.substeps):
            fell = go1.walk(cmd)
            track.update(go1.phi()[:, :2], k * NAV_DT_S + (j + 1) * dt, fell)
        if bool(track.done.all()):
            break
    return track.outcomes()
