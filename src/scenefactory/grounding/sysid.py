"""System identification of the corrected bicycle's knobs from target transitions.

Fitted: acceleration and braking gains, steering rate, grip factor (× μg), understeer gradient —
continuous, by Adam on their logarithms (the understeer gradient through a softplus) — and the
actuation delay, an integer, by trying every delay from 0 to ``max_delay_steps`` and keeping the
best. The objective is the multi-step prediction error: from the start of each window of
``horizon`` consecutive target transitions, the bicycle is rolled out open loop under the logged
actions, and the squared errors of all six state fields at every step, each divided by the spread
of that field's one-step change in the data, are averaged. Windows start at every transition of
the budget whose window stays inside its segment (at most ``max_windows`` of them, a seeded
choice). The continuous knobs start at the kinematic tier's values with grip 1.0 μg.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.functional import softplus

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.dynamics.physics import (
    ACCEL_GAIN,
    BRAKE_GAIN,
    DELAY,
    GRIP,
    STEER_RATE,
    UNDERSTEER,
    BicycleCorrection,
    corrected_bicycle_step,
    delayed_action,
)
from scenefactory.errors import UserError
from scenefactory.grounding.fit import Histories
from scenefactory.vehicles.params import VehicleParams

_UNDERSTEER_SCALE = 1e-3  # the softplus works in units of 0.001 rad·s²/m


@dataclass(frozen=True)
class SysIdResult:
    """The fitted knobs, the objective of each delay tried and how many windows were used."""

    correction: BicycleCorrection
    loss_by_delay: dict[int, float]
    windows: int
    horizon: int


def fit_windows(h: Histories, sel: np.ndarray, horizon: int) -> np.ndarray:
    """Start indices of every ``horizon``-step window of consecutive transitions inside ``sel``."""
    n = len(h.segment)
    start = np.flatnonzero(sel)
    end = start + horizon - 1
    ok = end < n
    start, end = start[ok], end[ok]
    keep = (h.segment[end] == h.segment[start]) & sel[end]
    return start[keep]


def _rollout_loss(
    h: Histories,
    starts: torch.Tensor,
    phys: torch.Tensor,
    horizon: int,
    scale: torch.Tensor,
    vehicle: VehicleParams,
    dt_s: float,
) -> torch.Tensor:
    state = h.states[starts, -1]
    actions = h.actions[starts]
    friction = h.friction[starts]
    total = torch.zeros(())
    for k in range(horizon):
        act = delayed_action(actions, phys[:, DELAY])
        state = corrected_bicycle_step(state, act, friction, phys, vehicle, dt_s)
        err = state - h.next_state[starts + k]
        err = torch.cat((err[:, :2], wrap_angle(err[:, 2:3]), err[:, 3:]), dim=-1)
        total = total + ((err / scale) ** 2).mean()
        if k + 1 < horizon:
            actions = torch.cat((actions[:, 1:], h.actions[starts + k + 1][:, -1:]), dim=1)
    return total / horizon


def field_scale(h: Histories, idx: torch.Tensor) -> torch.Tensor:
    """Spread of each field's one-step change (6,), positions sharing one scale."""
    d = h.next_state[idx] - h.states[idx, -1]
    d[:, 2] = wrap_angle(d[:, 2])
    s = d.pow(2).mean(0).sqrt()
    s[:2] = s[:2].pow(2).mean().sqrt()
    return s.clamp_min(1e-3)


def identify(
    h: Histories,
    sel: np.ndarray,
    vehicle: VehicleParams,
    dt_s: float,
    horizon: int = 10,
    max_delay_steps: int = 3,
    iterations: int = 200,
    lr: float = 0.05,
    max_windows: int = 2048,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SysIdResult:
    """Fit the knobs on the transitions ``sel`` of ``h`` (see the module docstring).

    ``h`` must carry at least ``max_delay_steps + 1`` history steps. Falls back to shorter windows
    (down to one step) when no segment of the budget is ``horizon`` long.
    """
    if h.states.shape[1] < max_delay_steps + 1:
        raise ValueError(f"histories of {h.states.shape[1]} steps cannot hold a delay of {max_delay_steps}")
    starts = fit_windows(h, sel, horizon)
    while len(starts) == 0 and horizon > 1:
        horizon = max(1, horizon // 2)
        starts = fit_windows(h, sel, horizon)
    if len(starts) == 0:
        raise UserError("system identification found no target transitions in the budget")
    rng = np.random.default_rng(seed)
    if len(starts) > max_windows:
        starts = np.sort(rng.choice(starts, max_windows, replace=False))
    idx = torch.from_numpy(starts)
    scale = field_scale(h, torch.from_numpy(np.flatnonzero(sel)))
    nominal_rate = vehicle.max_steer_rate_radps
    losses: dict[int, float] = {}
    best: tuple[float, BicycleCorrection] | None = None
    total_iters = (max_delay_steps + 1) * iterations
    for delay in range(max_delay_steps + 1):
        # log accel gain, log brake gain, log steer rate, log grip, understeer (softplus)
        theta = torch.tensor([0.0, 0.0, math.log(nominal_rate), 0.0, -3.0], requires_grad=True)
        opt = torch.optim.Adam([theta], lr=lr)

        def phys_of(theta: torch.Tensor, delay: int = delay) -> torch.Tensor:
            p = torch.stack(
                (
                    theta[0].exp(),
                    theta[1].exp(),
                    theta[2].exp(),
                    theta[3].exp(),
                    softplus(theta[4]) * _UNDERSTEER_SCALE,
                    torch.tensor(float(delay)),
                )
            )
            return p.expand(len(idx), -1)

        for it in range(iterations):
            loss = _rollout_loss(h, idx, phys_of(theta), horizon, scale, vehicle, dt_s)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if progress is not None:
                progress(delay * iterations + it + 1, total_iters)
        with torch.no_grad():
            phys = phys_of(theta)
            final = float(_rollout_loss(h, idx, phys, horizon, scale, vehicle, dt_s))
        losses[delay] = final
        p = phys[0]
        fitted = BicycleCorrection(
            accel_gain=float(p[ACCEL_GAIN]),
            brake_gain=float(p[BRAKE_GAIN]),
            steer_rate_radps=float(p[STEER_RATE]),
            grip_factor=float(p[GRIP]),
            understeer_s2pm=float(p[UNDERSTEER]),
            delay_steps=delay,
        )
        if best is None or final < best[0]:
            best = (final, fitted)
    assert best is not None
    return SysIdResult(correction=best[1], loss_by_delay=losses, windows=len(starts), horizon=horizon)
