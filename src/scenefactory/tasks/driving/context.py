"""What one environment step knows, handed to every reward term (terms are pure functions of it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scenefactory.engines.base import VehicleState


@dataclass(frozen=True)
class StepContext:
    """Per-step quantities, each ``(W, K)`` unless noted; events hold only for agents active this step.

    - ``state``           vehicle state after the step.
    - ``actions``         (W, K, 2) normalized actions applied; ``prev_actions`` the step before.
    - ``active``          bool, agent was active (not finished) when the step began.
    - ``progress_m``      route progress this step, clipped to ±``progress_clip_m`` [m].
    - ``goal``            bool, reached the goal (within ``goal_radius_m``) without crashing.
    - ``collided``        bool, overlaps another active agent.
    - ``offroad``         bool, left the drivable area.
    - ``min_ttc_s``       smallest time-to-collision to any other active agent [s] (inf if none).
    - ``dt_s``            policy step [s].
    - ``red_light``       bool, ran a red light this step; ``stop_sign`` bool, crossed a stop sign's
      stop line without having stopped (:mod:`scenefactory.tasks.driving.signals`); ``None`` where
      the caller tracks no signals (read as never).
    """

    state: VehicleState
    actions: torch.Tensor
    prev_actions: torch.Tensor
    active: torch.Tensor
    progress_m: torch.Tensor
    goal: torch.Tensor
    collided: torch.Tensor
    offroad: torch.Tensor
    min_ttc_s: torch.Tensor
    dt_s: float
    red_light: torch.Tensor | None = None
    stop_sign: torch.Tensor | None = None
