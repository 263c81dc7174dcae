"""The navigation policy: a reactive route follower with trained parameters, and its training.

The policy reads the abstract state (x, y, ψ, vx, vy, r) and the task (route, goal) and sends a
velocity command; no planner runs. With its parameters θ (:data:`PARAM_NAMES`, one row per
episode, (E, 6)):

    s      = arc length of the route point closest to the robot
    p*     = the route point at s + lookahead                (pure pursuit)
    (x*, y*) = p* − p in the heading frame,  e = atan2(y*, x*)
    vx*    = speed · max(0, 1 − turn_slowdown·|e|) · min(1, d_goal / goal_slowdown)
    vy*    = lateral_gain · y*
    r*     = yaw_gain · e
    command = clip((vx*, vy*, r*)) to the Go1's command limits

Training (:func:`train_cem`): the cross-entropy method over θ in a (grounded) abstract simulator:
each iteration draws ``population`` candidates from a Gaussian (clipped to the parameter bounds),
plays each on every task for ``episodes`` episodes (:func:`~.sim.rollout_abstract`), keeps the
``elites`` best by the mean episode score (:func:`score`) and moves the Gaussian to them. The
policy is the final mean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from scenefactory.errors import UserError
from scenefactory.navigation.engine import CommandLimits, rotate
from scenefactory.navigation.tasks import NavTask, TaskBatch, goal_distance, route_point, route_progress

PARAM_NAMES = ("speed_mps", "lookahead_m", "yaw_gain", "turn_slowdown", "lateral_gain", "goal_slowdown_m")
PARAM_LOW = (0.3, 0.3, 0.5, 0.0, 0.0, 0.3)
PARAM_HIGH = (2.0, 1.6, 4.0, 2.0, 1.5, 2.0)


def follower_command(
    state: torch.Tensor, batch: TaskBatch, theta: torch.Tensor, limits: CommandLimits
) -> torch.Tensor:
    """The command (E, 3) for states (E, 6) of ``batch``'s episodes under parameters ``theta`` (E, 6)."""
    pos, yaw = state[:, :2], state[:, 2]
    speed, look, k_yaw, slow, k_lat, goal_slow = theta.unbind(-1)
    s = route_progress(pos, batch.route)
    target = rotate(route_point(batch.route, s + look) - pos, -yaw)
    e = torch.atan2(target[:, 1], target[:, 0])
    near = (goal_distance(pos, batch) / goal_slow).clamp(max=1.0)
    vx = speed * (1.0 - slow * e.abs()).clamp_min(0.0) * near
    return limits.clip(torch.stack((vx, k_lat * target[:, 1], k_yaw * e), dim=-1))


@dataclass(frozen=True)
class Outcomes:
    """Per episode (E,): reached the goal, time to the goal [s] (NaN if not), collided, fell (Go1
    only), and the route progress at the end as a fraction of the route."""

    success: torch.Tensor
    time_s: torch.Tensor
    collided: torch.Tensor
    fell: torch.Tensor
    progress: torch.Tensor


def score(o: Outcomes, batch: TaskBatch) -> torch.Tensor:
    """(E,) the training objective: 1 + 0.5·(1 − t/T) on success, else 0.5·progress, minus 0.5 on a
    collision or fall."""
    t = torch.nan_to_num(o.time_s, nan=0.0) / batch.time_limit_s
    ok = o.success.float()
    bad = (o.collided | o.fell).float()
    return ok * (1.0 + 0.5 * (1.0 - t)) + (1.0 - ok) * 0.5 * o.progress - 0.5 * bad


@dataclass(frozen=True)
class CEMConfig:
    """Cross-entropy method settings (module docstring)."""

    iterations: int = 8
    population: int = 32
    elites: int = 6
    episodes: int = 4
    init_std_frac: float = 0.3
    min_std_frac: float = 0.03

    def __post_init__(self) -> None:
        """Sizes positive, elites fewer than the population."""
        if (
            min(self.iterations, self.population, self.elites, self.episodes) < 1
            or self.elites > self.population
        ):
            raise UserError(f"CEMConfig: sizes must be >= 1 and elites <= population, got {self}")


Rollout = Callable[[TaskBatch, torch.Tensor, torch.Generator], Outcomes]
"""Plays parameters (E, 6) on a batch of episodes, drawing from the generator."""


def train_cem(
    rollout: Rollout, tasks: Sequence[NavTask], cfg: CEMConfig, seed: int
) -> tuple[torch.Tensor, list[float]]:
    """θ (6,) trained by the cross-entropy method in ``rollout``'s simulator, and the mean elite
    score of every iteration."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = torch.tensor(PARAM_LOW), torch.tensor(PARAM_HIGH)
    mean, std = (lo + hi) / 2, cfg.init_std_frac * (hi - lo)
    batch = TaskBatch.of(tasks, cfg.episodes)
    per = batch.size
    big = TaskBatch.of(list(tasks) * cfg.population, cfg.episodes)
    curve = []
    for _ in range(cfg.iterations):
        cand = (mean + std * torch.randn(cfg.population, len(PARAM_NAMES), generator=gen)).clamp(lo, hi)
        theta = cand.repeat_interleave(per, dim=0)
        out = rollout(big, theta, gen)
        j = score(out, big).view(cfg.population, per).mean(-1)
        top = j.topk(cfg.elites).indices
        mean, std = cand[top].mean(0), cand[top].std(0).clamp_min(cfg.min_std_frac * (hi - lo))
        curve.append(float(j[top].mean()))
    return mean, curve
