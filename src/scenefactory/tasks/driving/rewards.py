"""Reward terms of the driving task: pure functions ``f(ctx) -> (W, K)``, weighted in the task config.

Each returns an unweighted, per-agent quantity with a physical meaning; the sign of the weight says
whether it is a reward or a penalty. The environment zeroes every term for inactive agents.
"""

from __future__ import annotations

import torch

from scenefactory.tasks.driving.context import StepContext

NEAR_MISS_TTC_S = 2.0
"""TTC below which a pair counts as a near miss (SceneFactory's threshold)."""

LATERAL_ACCEL_COMFORT_MPS2 = 4.89
"""nuPlan's lateral-acceleration comfort bound."""


def route_progress(ctx: StepContext) -> torch.Tensor:
    """Metres advanced along the route this step (clipped; negative when moving backwards along it)."""
    return ctx.progress_m


def goal_reached(ctx: StepContext) -> torch.Tensor:
    """1 on the step the agent reaches its goal."""
    return ctx.goal.float()


def collision(ctx: StepContext) -> torch.Tensor:
    """1 on the step the agent collides with another vehicle."""
    return ctx.collided.float()


def offroad(ctx: StepContext) -> torch.Tensor:
    """1 on the step the agent leaves the drivable area."""
    return ctx.offroad.float()


def ttc_danger(ctx: StepContext) -> torch.Tensor:
    """How far the smallest TTC is inside the near-miss band: ``clip(1 − TTC / 2 s, 0, 1)``."""
    return (1.0 - ctx.min_ttc_s / NEAR_MISS_TTC_S).clamp(0.0, 1.0)


def action_rate(ctx: StepContext) -> torch.Tensor:
    """Squared change of the normalized action since the last step (jerk and steering-rate proxy)."""
    return (ctx.actions.clamp(-1, 1) - ctx.prev_actions.clamp(-1, 1)).square().sum(-1)


def lateral_accel_excess(ctx: StepContext) -> torch.Tensor:
    """Lateral acceleration above the comfort bound, ``max(0, |v·r| − 4.89)`` [m/s²]."""
    lat = (ctx.state.speed * ctx.state.yaw_rate).abs()
    return (lat - LATERAL_ACCEL_COMFORT_MPS2).clamp(min=0.0)


def red_light_violation(ctx: StepContext) -> torch.Tensor:
    """1 on the step the agent crosses a signal's stop point on red (see ``tasks.driving.signals``)."""
    return torch.zeros_like(ctx.progress_m) if ctx.red_light is None else ctx.red_light.float()


def stop_sign_violation(ctx: StepContext) -> torch.Tensor:
    """1 on the step the agent crosses a stop sign's stop line without having stopped."""
    return torch.zeros_like(ctx.progress_m) if ctx.stop_sign is None else ctx.stop_sign.float()


REWARD_FUNCTIONS = {
    f.__name__: f
    for f in (
        route_progress,
        goal_reached,
        collision,
        offroad,
        ttc_danger,
        action_rate,
        lateral_accel_excess,
        red_light_violation,
        stop_sign_violation,
    )
}
"""Term function name → function: how a saved config names its terms."""
