"""The abstract engine of legged navigation: a batched unicycle driven by velocity commands.

State (B, 6), :data:`NAV_FIELDS`: position x, y [m] and yaw ψ [rad] in the world frame, planar
velocity (vx, vy) [m/s] in the heading (body yaw) frame and yaw rate r [rad/s]. Action (B, 3): the
velocity command c = (vx*, vy*, r*) the Go1's locomotion policy takes, clipped to
:class:`CommandLimits` (the shipped policy's command ranges).

One step of ``dt`` with knobs k = (g_x, g_y, g_r, α_lin, α_yaw, d) (:class:`UnicycleKnobs`, one row
per world, (B, :data:`NUM_KNOBS`)):

    c_d  = the command sent d steps ago (a delay of d whole steps)
    v*   = (g_x·c_d,x, g_y·c_d,y, g_r·c_d,r)                      (gains)
    v'   = v + α ⊙ (v* − v),  α = (α_lin, α_lin, α_yaw) ∈ (0, 1]  (first-order response per step)
    ψ'   = ψ + dt·(r + r')/2
    p'   = p + R(ψ_m)·dt·(v_xy + v'_xy)/2,  ψ_m = (ψ + ψ')/2      (trapezoidal integration)

The nominal knobs (all gains and responses 1, no delay) are the ideal point mass: it moves at the
commanded velocity from the next step on — the "direct transfer" abstract model.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

import torch

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.errors import UserError

NAV_FIELDS = ("x_m", "y_m", "yaw_rad", "vx_b_mps", "vy_b_mps", "yaw_rate_radps")
"""The abstract state's fields (frame suffix ``_b``: the heading frame)."""
COMMAND_FIELDS = ("vx_mps", "vy_mps", "yaw_rate_radps")
NUM_STATE, NUM_ACTION = len(NAV_FIELDS), len(COMMAND_FIELDS)
KNOB_FIELDS = ("gain_vx", "gain_vy", "gain_yaw", "response_lin", "response_yaw", "delay_steps")
NUM_KNOBS = len(KNOB_FIELDS)
GAINS, RESPONSE_LIN, RESPONSE_YAW, DELAY = slice(0, 3), 3, 4, 5


@dataclass(frozen=True)
class CommandLimits:
    """The velocity command's ranges (the shipped Go1 policy's ``CommandConfig``)."""

    vx_mps: tuple[float, float] = (-1.0, 2.0)
    vy_mps: tuple[float, float] = (-0.8, 0.8)
    yaw_radps: tuple[float, float] = (-1.8, 1.8)

    def __post_init__(self) -> None:
        """Each range must be (low, high) with low < 0 < high."""
        for name in ("vx_mps", "vy_mps", "yaw_radps"):
            lo, hi = getattr(self, name)
            if not lo < 0.0 < hi:
                raise UserError(f"CommandLimits.{name} must be (low < 0, high > 0), got {(lo, hi)}")

    def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(low (3,), high (3,))."""
        lo, hi = zip(self.vx_mps, self.vy_mps, self.yaw_radps, strict=True)
        return torch.tensor(lo), torch.tensor(hi)

    def clip(self, command: torch.Tensor) -> torch.Tensor:
        """``command`` (..., 3) clipped into the ranges."""
        lo, hi = self.bounds()
        return torch.maximum(torch.minimum(command, hi), lo)


@dataclass(frozen=True)
class UnicycleKnobs:
    """The abstract engine's physical knobs (module docstring); the defaults are the ideal point mass."""

    gain_vx: float = 1.0
    gain_vy: float = 1.0
    gain_yaw: float = 1.0
    response_lin: float = 1.0
    response_yaw: float = 1.0
    delay_steps: int = 0

    def __post_init__(self) -> None:
        """Gains positive, responses in (0, 1], a whole delay >= 0."""
        if min(self.gain_vx, self.gain_vy, self.gain_yaw) <= 0.0:
            raise UserError(f"unicycle gains must be positive, got {self}")
        if not (0.0 < self.response_lin <= 1.0 and 0.0 < self.response_yaw <= 1.0):
            raise UserError(f"unicycle responses must lie in (0, 1], got {self}")
        if self.delay_steps < 0:
            raise UserError(f"the delay must be >= 0 steps, got {self.delay_steps}")

    def to_tensor(self) -> torch.Tensor:
        """(NUM_KNOBS,) in :data:`KNOB_FIELDS` order."""
        return torch.tensor([float(v) for v in astuple(self)])


def delayed_command(actions: torch.Tensor, delay_steps: torch.Tensor) -> torch.Tensor:
    """The command acting now (B, 3) from ``actions`` (B, H, 3) (oldest first) under per-world
    delays ``delay_steps`` (B,); a delay must be at most ``H − 1``."""
    h = actions.shape[1]
    d = delay_steps.round().long()
    if bool((d < 0).any()) or bool((d > h - 1).any()):
        raise ValueError(f"delays {d.unique().tolist()} need a history of more than {h} commands")
    idx = (h - 1 - d).view(-1, 1, 1).expand(-1, 1, actions.shape[2])
    return actions.gather(1, idx).squeeze(1)


def rotate(xy: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Vectors ``xy`` (..., 2) rotated counter-clockwise by ``angle`` (...)."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack((c * xy[..., 0] - s * xy[..., 1], s * xy[..., 0] + c * xy[..., 1]), dim=-1)


def unicycle_step(
    state: torch.Tensor, command: torch.Tensor, knobs: torch.Tensor, dt_s: float
) -> torch.Tensor:
    """The next state (B, 6) from ``state`` (B, 6), the command acting now ``command`` (B, 3) (already
    delayed and clipped) and ``knobs`` (B, NUM_KNOBS) (module docstring for the equations)."""
    if state.shape[-1] != NUM_STATE or command.shape != (*state.shape[:-1], NUM_ACTION):
        raise ValueError(
            f"state must be (B, 6) and command (B, 3), got {tuple(state.shape)}, {tuple(command.shape)}"
        )
    v = state[:, 3:6]
    target = knobs[:, GAINS] * command
    alpha = torch.stack((knobs[:, RESPONSE_LIN], knobs[:, RESPONSE_LIN], knobs[:, RESPONSE_YAW]), dim=-1)
    v_next = v + alpha * (target - v)
    yaw = state[:, 2]
    yaw_next = yaw + dt_s * 0.5 * (v[:, 2] + v_next[:, 2])
    mid = 0.5 * (yaw + yaw_next)
    xy = state[:, :2] + rotate(dt_s * 0.5 * (v[:, :2] + v_next[:, :2]), mid)
    return torch.cat((xy, wrap_angle(yaw_next)[:, None], v_next), dim=-1)


def unicycle_deltas(
    state: torch.Tensor, command: torch.Tensor, knobs: torch.Tensor, dt_s: float
) -> torch.Tensor:
    """The nominal step's heading-frame deltas (B, 6) (``dynamics.models.body_deltas`` of
    :func:`unicycle_step`): the prior the learned corrections add to."""
    origin = torch.cat((torch.zeros_like(state[:, :3]), state[:, 3:6]), dim=-1)
    nxt = unicycle_step(origin, command, knobs, dt_s)
    return torch.cat((nxt[:, :3], nxt[:, 3:6] - state[:, 3:6]), dim=-1)
