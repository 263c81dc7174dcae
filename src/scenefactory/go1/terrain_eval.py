"""Rough-terrain evaluation of a Go1 policy: traversal success, falls and tracking per terrain kind
and level.

The world: a grid of the policy's own terrain config (its level ranges, scan; the default
:class:`~scenefactory.go1.config.TerrainConfig` for a policy trained on flat ground) with one
column per evaluated kind, every level, no curriculum; the nominal robot (no randomization, sensor
noise or pushes, unless a fixed condition is given), the policy's mean action. Each cell (kind,
level, speed) runs ``episodes`` robots, all at the centre of that kind's tile of that level, each
facing along one of the tile's axes (uniformly one of four, plus a heading offset uniform in
±:data:`HEADING_JITTER_RAD`), commanded ``(speed, 0, 0)`` for ``episode_s`` seconds.

* **Traversal success**: the base gets :attr:`TerrainEvalConfig.traverse_m` along its initial
  heading (by default the tile's half-width less its flat edge, 3.5 m: across the whole slope,
  flight of stairs or field of blocks) before it falls. Within 12 s that asks for at least
  0.29 m/s on average at a command of 0.5 m/s.
* **Falls**: the robot fell (trunk on the ground or tilted past the fall angle) before it got there.
* **Tracking**: per episode the mean planar velocity error ``‖v*_xy − v_xy‖`` and yaw-rate error
  ``|ω*_z − ω_z|`` (body frame) from ``settle_s`` until it got there, fell or the episode ended.
* **Stalls**: of the episodes that neither got there nor fell, those whose base gained less than
  :attr:`TerrainEvalConfig.stall_m` along the start heading over the last
  :attr:`TerrainEvalConfig.stall_s` — a robot that stopped getting anywhere under a forward
  command, standing or stepping in place (a blind policy stopped at a riser it cannot see), not
  one still walking slowly.
* **Swing height**: the 90th percentile of the heights of the feet off the ground over the ground
  under them, over every step of the tracking windows — what the gait lifts its feet to, beside
  the step height it has to clear. A foot held up for seconds (a stalled robot standing on three
  legs) weighs in at every step it is held, so beside it:
* **Swing apex**: the median over swings (each foot's runs of consecutive steps off the ground in
  the tracking windows) of each swing's highest point over the ground under the foot: what a
  step lifts the foot to, each swing counted once however long it lasts.
* **Held foot**: the share of episodes in which some foot stayed off the ground for at least
  :data:`HELD_FOOT_S` at once (a trot's swing lasts a few tenths of a second): a robot stopped with
  a foot raised.
* **Leg contact**: the share of the tracking windows' steps with a thigh or calf on the ground
  (a shin on a stair's edge, the knee on a block).
* **Step rate**: touchdowns per foot per second over the tracking windows (a foot in the air after
  one step and on the ground after the next): the gait's cadence. The stride is the speed over it;
  a stride near the stairs' 0.3 m tread lands every foot at the same place on each step.
* **Reward per second**: the task's reward terms (times their weights) averaged over the steps of
  the episodes that got there (their tracking windows) and of the stalled ones (the look-back the
  stall is judged on): whether the reward the policy trained on pays it to climb rather than stop.

Rates carry Wilson 95 % intervals, errors normal 95 % intervals over the episodes that have any
tracking window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from scenefactory.go1.config import TERRAIN_KINDS, Go1TaskConfig, RandomizationConfig, TerrainConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.terrain import level_parameter
from scenefactory.stats import mean_interval, wilson_interval

if TYPE_CHECKING:
    from scenefactory.go1.evaluation import Policy

HEADING_JITTER_RAD = 0.1
"""Half-width of the uniform offset of each robot's start heading from the tile's axis."""
HELD_FOOT_S = 1.0
"""A swing at least this long is a *held foot* (module docstring)."""


@dataclass(frozen=True)
class TerrainEvalConfig:
    """What a terrain evaluation runs: ``kinds`` × ``levels`` × ``speeds_mps``, ``episodes`` each."""

    kinds: tuple[str, ...] = TERRAIN_KINDS
    levels: tuple[int, ...] | None = None
    """Levels to run (``None``: every level of the terrain config)."""
    speeds_mps: tuple[float, ...] = (0.5, 1.0)
    episodes: int = 64
    episode_s: float = 12.0
    settle_s: float = 1.0
    traverse_m: float | None = None
    """Distance along the start heading that counts as traversed (``None``: the tile's half-width
    less its flat edge)."""
    stall_s: float = 2.0
    stall_m: float = 0.1
    """An episode that ends without getting there or falling *stalled* when its base gained less
    than ``stall_m`` along the start heading in its last ``stall_s``."""

    def __post_init__(self) -> None:
        """Validate kinds, sizes and times."""
        bad = [k for k in self.kinds if k not in TERRAIN_KINDS]
        if not self.kinds or bad or len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds must be distinct names of {TERRAIN_KINDS}, got {self.kinds}")
        if self.levels is not None and (not self.levels or min(self.levels) < 0):
            raise ValueError(f"levels must be non-negative, got {self.levels}")
        if not self.speeds_mps or self.episodes < 1 or not 0 <= self.settle_s < self.episode_s:
            raise ValueError("need speeds, episodes >= 1 and 0 <= settle_s < episode_s")
        if self.traverse_m is not None and not self.traverse_m > 0:
            raise ValueError(f"traverse_m must be positive, got {self.traverse_m}")
        if not 0 < self.stall_s <= self.episode_s or not self.stall_m > 0:
            raise ValueError(
                f"need 0 < stall_s <= episode_s and stall_m > 0, got {self.stall_s}, {self.stall_m}"
            )


def kinds_of(name: str) -> tuple[str, ...]:
    """The kinds ``eval go1 --terrain NAME`` runs: all of them for ``rough``, else ``NAME``."""
    if name == "rough":
        return TERRAIN_KINDS
    if name not in TERRAIN_KINDS:
        raise ValueError(f"terrain must be 'rough' or one of {TERRAIN_KINDS}, got '{name}'")
    return (name,)


def terrain_eval_config(
    name: str | None, levels: tuple[int, ...] | None, task: Go1TaskConfig, episodes: int, quick: bool = False
) -> TerrainEvalConfig | None:
    """What ``eval go1 --terrain NAME --level L ...`` runs for a policy of ``task`` (``None``: no
    terrain table); ``quick`` keeps at most 4 episodes of 2 s (a smoke test). A ValueError names
    a bad name or level."""
    if name is None:
        if levels is not None:
            raise ValueError("--level needs --terrain")
        return None
    top = task.terrain.num_levels - 1
    if levels is not None and max(levels) > top:
        raise ValueError(f"the policy's terrain has levels 0 … {top}, got {list(levels)}")
    cfg = TerrainEvalConfig(kinds=kinds_of(name), levels=levels, episodes=episodes)
    if quick:
        cfg = replace(cfg, episodes=min(episodes, 4), episode_s=2.0, settle_s=0.5)
    return cfg


def eval_terrain(task: Go1TaskConfig, kinds: tuple[str, ...], seed: int) -> TerrainConfig:
    """The evaluation grid: the policy's terrain config with one column per kind, no curriculum."""
    base = task.terrain
    return replace(
        base,
        kind="rough",
        proportions=tuple((k, 1.0) for k in kinds),
        num_cols=len(kinds),
        curriculum=False,
        max_init_level=0,
        seed=seed,
    )


def start_on_tiles(env: Go1Env, level: int, cols: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """Restart the first ``len(cols)`` robots of ``env`` (a world of :func:`eval_terrain`) at the
    centres of the tiles of ``level`` in columns ``cols`` (n,), facing ``heading`` (n,) [rad];
    returns their (n, 2) start positions [m]."""
    if env.curriculum is None:
        raise ValueError("start_on_tiles needs a terrain world")
    ids = np.arange(len(cols))
    env.curriculum.levels[ids] = level
    env.curriculum.cols[ids] = cols
    env.reset(ids, yaw_rad=heading)
    return np.array(env.sim.bind("qpos")[ids, 0:2])


@dataclass(frozen=True)
class Walk:
    """What :func:`_rollout` records of ``N`` robots over ``T`` steps."""

    reached: np.ndarray
    """(N,) the first step each robot got ``traverse_m`` along its heading (``T`` if never)."""
    fell: np.ndarray
    """(N,) the first step it fell (``T`` if never)."""
    farthest: np.ndarray
    """(N,) the farthest it got along its heading before it fell or its episode ended [m]."""
    along: np.ndarray
    """(T, N) its base's distance along its heading after each step [m]."""
    errors: np.ndarray
    """(T, N, 2) per-step planar velocity and yaw-rate errors."""
    swing_height: np.ndarray
    """(T, N, 4) each foot's height over the ground under it, NaN while it touches the ground [m]."""
    leg_contact: np.ndarray
    """(T, N) whether a thigh or calf touched the ground after each step."""
    reward: np.ndarray
    """(T, N, K) each of the task's K reward terms times its weight after each step [1/s]."""

    def cols(self, sl: slice) -> Walk:
        """The robots ``sl`` of every array."""
        return Walk(*(a[sl] if a.ndim == 1 else a[:, sl] for a in vars(self).values()))


def _rollout(
    env: Go1Env, policy: Policy, heading: np.ndarray, cmd: np.ndarray, steps: int, traverse_m: float
) -> Walk:
    """Roll ``steps`` steps (fewer when every robot got ``traverse_m`` along ``heading`` (N,) or
    fell), recording :class:`Walk`."""
    n = env.num_envs
    qpos = env.sim.bind("qpos")
    start = qpos[:, 0:2].copy()
    direction = np.stack([np.cos(heading), np.sin(heading)], axis=1)
    reached = np.full(n, steps)
    fell = np.full(n, steps)
    farthest = np.zeros(n)
    along_t = np.zeros((steps, n))
    errors = np.zeros((steps, n, 2))
    swing = np.full((steps, n, 4), np.nan)
    legs = np.zeros((steps, n), dtype=bool)
    terms = env.cfg.rewards
    reward = np.zeros((steps, n, len(terms)))
    params = env.teacher_params(policy.params_dim)  # a privileged teacher reads its world's parameters
    obs, _ = env.observations()
    policy.reset()
    for t in range(steps):
        res = env.step(policy.act(obs, params))
        policy.reset(res.done)
        obs = res.actor_obs
        s = res.state
        errors[t, :, 0] = np.linalg.norm(s.lin_vel_b[:, :2].numpy() - cmd[:, :2], axis=1)
        errors[t, :, 1] = np.abs(s.ang_vel_b[:, 2].numpy() - cmd[:, 2])
        swing[t] = np.where(s.foot_contact.numpy(), np.nan, s.foot_height_m.numpy())
        legs[t] = s.leg_contact.numpy().any(axis=1)
        reward[t] = np.stack([term.weight * res.terms[term.name].numpy() for term in terms], axis=1)
        going = (fell == steps) & (reached == steps)
        fell[going & res.terminated.numpy()] = t
        along = np.einsum("ni,ni->n", qpos[:, 0:2] - start, direction)
        along_t[t] = along
        alive = going & ~res.done.numpy()
        farthest = np.where(alive, np.maximum(farthest, along), farthest)
        reached[alive & (along >= traverse_m)] = t
        if not ((fell == steps) & (reached == steps)).any():  # every robot got there or fell
            along_t, errors, swing, legs = along_t[: t + 1], errors[: t + 1], swing[: t + 1], legs[: t + 1]
            reward = reward[: t + 1]
            break
    return Walk(reached, fell, farthest, along_t, errors, swing, legs, reward)


def swings(heights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every swing in ``heights`` (T, E, F): a foot's heights over time, NaN on the ground (or
    outside the steps looked at); a swing is a run of consecutive non-NaN steps of one (episode,
    foot) series. Returns each swing's (S,) apex [m], (S,) length [steps] and (S,) episode index,
    in the order of their series (episode-major, then foot) and start."""
    steps, episodes, feet = heights.shape
    h = heights.reshape(steps, episodes * feet)
    air = ~np.isnan(h)
    starts = air & ~np.vstack([np.zeros((1, h.shape[1]), dtype=bool), air[:-1]])
    number = np.cumsum(starts, axis=0) - 1  # (T, E·F) the swing's index within its series
    per_series = starts.sum(axis=0)  # (E·F,) swings of each series
    offset = np.concatenate([[0], np.cumsum(per_series)[:-1]])  # swings of earlier series
    ids = (number + offset[None, :]).T[air.T]  # series-major order of the air steps
    values = h.T[air.T]
    count = int(per_series.sum())
    apex = np.full(count, -np.inf)
    np.maximum.at(apex, ids, values)
    length = np.bincount(ids, minlength=count)
    series_of_swing = np.repeat(np.arange(h.shape[1]), per_series)
    return apex, length, series_of_swing // feet


def cell_row(
    kind: str,
    level: int,
    speed: float,
    terrain: TerrainConfig,
    walk: Walk,
    first: int,
    cfg: TerrainEvalConfig,
    traverse_m: float,
    dt: float,
    terms: tuple[str, ...],
) -> dict[str, Any]:
    """The table row of one cell (``kind`` at ``level``, commanded ``speed`` [m/s]) from its
    robots' :class:`Walk`: success, falls and stalls with Wilson intervals, tracking errors over
    the steps from ``first`` until each robot got ``traverse_m`` along or fell, swing heights,
    held feet, leg contact, step rate and the mean of the reward ``terms`` of the climbers and
    the stalled robots (``dt``: the policy step [s])."""
    reached, fell = walk.reached, walk.fell
    steps = walk.errors.shape[0]
    e = reached.size
    success = int((reached < fell).sum())
    falls = int((fell < reached).sum())
    stop = np.minimum(reached, fell)
    t = np.arange(steps)[:, None]
    window = (t >= first) & (t < stop[None, :])  # (T, e)
    count = window.sum(axis=0)
    ok = count > 0
    mean_err = (walk.errors * window[..., None]).sum(axis=0)[ok] / count[ok, None]
    lin = mean_interval(torch.from_numpy(mean_err[:, 0]))
    yaw = mean_interval(torch.from_numpy(mean_err[:, 1]))
    lookback = min(round(cfg.stall_s / dt), steps - 1)
    gained = walk.along[-1] - walk.along[steps - 1 - lookback]
    stalled = (reached == fell) & (gained < cfg.stall_m)  # both == T: went the whole episode
    stalls = int(stalled.sum())
    last = t >= steps - lookback  # (T, 1): the look-back the stall is judged on

    def per_term(mask: np.ndarray) -> dict[str, float]:
        """Mean weighted reward terms over the (T, e) steps of ``mask`` (none: empty)."""
        return dict(zip(terms, map(float, walk.reward[mask].mean(axis=0)), strict=True)) if mask.any() else {}

    heights = walk.swing_height[window]  # (k, 4) feet of the tracking windows' steps
    heights = heights[~np.isnan(heights)]
    apex, length, episode_of = swings(np.where(window[..., None], walk.swing_height, np.nan))
    held = np.zeros(e, dtype=bool)
    held[episode_of[length * dt >= HELD_FOOT_S - 1e-9]] = True
    window_steps = int(window.sum())
    air = ~np.isnan(walk.swing_height)  # (T, e, 4)
    touchdowns = air[:-1] & ~air[1:]  # (T − 1, e, 4): in the air at t, on the ground at t + 1
    pairs = window[:-1] & window[1:]  # both steps in the tracking window
    pair_steps = int(pairs.sum())
    name, value = level_parameter(terrain, kind, level)
    return {
        "kind": kind,
        "level": level,
        "parameter": name,
        "parameter_value": value,
        "speed_mps": speed,
        "episodes": e,
        "traverse_m": traverse_m,
        "successes": success,
        "success_rate": success / e,
        "success_rate_ci95": list(wilson_interval(success, e)),
        "falls": falls,
        "fall_rate": falls / e,
        "fall_rate_ci95": list(wilson_interval(falls, e)),
        "lin_vel_error_mps": lin[0],
        "lin_vel_error_ci95": [lin[1], lin[2]],
        "yaw_rate_error_radps": yaw[0],
        "yaw_rate_error_ci95": [yaw[1], yaw[2]],
        "mean_distance_m": float(np.minimum(walk.farthest, traverse_m).mean()),
        "stalls": stalls,
        "stall_rate": stalls / e,
        "stall_rate_ci95": list(wilson_interval(stalls, e)),
        "swing_height_p90_m": float(np.percentile(heights, 90)) if heights.size else math.nan,
        "swing_apex_p50_m": float(np.median(apex)) if apex.size else math.nan,
        "swings": int(apex.size),
        "held_foot_rate": float(held.mean()),
        "leg_contact_share": float(walk.leg_contact[window].sum() / window_steps)
        if window_steps
        else math.nan,
        "step_rate_hz": float(touchdowns[pairs].sum() / (4 * pair_steps * dt)) if pair_steps else math.nan,
        "reward_per_s": {
            "got_there": per_term(window & (reached < fell)[None, :]),
            "stalled": per_term(last & stalled[None, :]),
        },
    }


def terrain_table(
    task: Go1TaskConfig,
    policy: Policy,
    cfg: TerrainEvalConfig,
    condition: RandomizationConfig | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per (kind, level, speed) of ``cfg`` (module docstring); ``task`` is the policy's
    task config, ``condition`` a fixed latency and joint scale in every world (``None``: nominal).
    The levels run one after another, each in one batch of worlds."""
    terrain = eval_terrain(task, cfg.kinds, seed)
    levels = tuple(range(terrain.num_levels)) if cfg.levels is None else cfg.levels
    if max(levels) >= terrain.num_levels:
        raise ValueError(f"levels {levels}: the terrain has levels 0 … {terrain.num_levels - 1}")
    traverse = cfg.traverse_m if cfg.traverse_m is not None else terrain.tile_size_m / 2 - terrain.edge_m
    e, speeds = cfg.episodes, cfg.speeds_mps
    n = len(cfg.kinds) * len(speeds) * e
    kind_col = np.repeat(np.arange(len(cfg.kinds)), len(speeds) * e)  # robots: kind, then speed, then episode
    speed = np.tile(np.repeat(np.array(speeds, dtype=np.float64), e), len(cfg.kinds))
    cmd = np.stack([speed, np.zeros(n), np.zeros(n)], axis=1)
    steps = round(cfg.episode_s / task.dt)
    first = round(cfg.settle_s / task.dt)
    world = replace(nominal(task), num_envs=n, episode_length_s=cfg.episode_s + 1.0, terrain=terrain)
    world = replace(world, randomization=condition)
    names = tuple(term.name for term in world.rewards)
    rows = []
    for i, level in enumerate(levels):
        env = Go1Env(world, seed=seed + i)
        rng = np.random.default_rng(seed + 1000 + i)
        heading = rng.integers(0, 4, n) * (math.pi / 2) + rng.uniform(
            -HEADING_JITTER_RAD, HEADING_JITTER_RAD, n
        )
        start_on_tiles(env, level, kind_col, heading)
        env.hold_commands(cmd)
        result = _rollout(env, policy, heading, cmd, steps, traverse)
        for k, kind in enumerate(cfg.kinds):
            for j, v in enumerate(speeds):
                start = (k * len(speeds) + j) * e
                sl = slice(start, start + e)
                walk = result.cols(sl)
                row = cell_row(kind, level, v, terrain, walk, first, cfg, traverse, task.dt, names)
                rows.append(row)
    return rows


def terrain_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Success rate per kind over its rows (levels and speeds pooled)."""
    out: dict[str, float] = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        out[f"terrain_{kind}_success_rate"] = sum(r["successes"] for r in mine) / sum(
            r["episodes"] for r in mine
        )
    return out


def _ci(lo_hi: list[float]) -> str:
    return f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]"


def _total(terms: dict[str, float]) -> str:
    return f"{sum(terms.values()):.2f}" if terms else "–"


def terrain_report(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the terrain table (none when ``rows`` is empty)."""
    if not rows:
        return []
    lines = [
        "",
        f"Terrain: each robot starts at its tile's centre along a tile axis, commanded forward; success = "
        f"{rows[0]['traverse_m']:g} m along its start heading before falling.",
        "",
        "| kind | level | parameter | speed m/s | episodes | success [95% CI] | falls [95% CI] "
        "| lin. error m/s [95% CI] | yaw error rad/s [95% CI] | mean distance m | stalls [95% CI] "
        "| swing height p90 m | swing apex p50 m | held foot | leg contact | steps/s per foot "
        "| reward/s got there · stalled |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['level']} | {r['parameter']} {r['parameter_value']:.3g} "
            f"| {r['speed_mps']:.1f} | {r['episodes']} "
            f"| {r['success_rate']:.3f} {_ci(r['success_rate_ci95'])} "
            f"| {r['fall_rate']:.3f} {_ci(r['fall_rate_ci95'])} "
            f"| {r['lin_vel_error_mps']:.3f} {_ci(r['lin_vel_error_ci95'])} "
            f"| {r['yaw_rate_error_radps']:.3f} {_ci(r['yaw_rate_error_ci95'])} "
            f"| {r['mean_distance_m']:.2f} | {r['stall_rate']:.3f} {_ci(r['stall_rate_ci95'])} "
            f"| {r['swing_height_p90_m']:.3f} | {r['swing_apex_p50_m']:.3f} | {r['held_foot_rate']:.2f} "
            f"| {r['leg_contact_share']:.2f} | {r['step_rate_hz']:.2f} "
            f"| {_total(r['reward_per_s']['got_there'])} · {_total(r['reward_per_s']['stalled'])} |"
        )
    return lines
