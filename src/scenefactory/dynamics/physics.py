"""The corrected kinematic bicycle: the coarse tier with a few physical knobs a target can set.

The kinematic tier (:func:`~scenefactory.engines.kinematic.bicycle_step`) is friction-blind, reaches
every commanded acceleration and steers without delay. Domain randomization and system
identification ground it by changing a handful of physical parameters, per agent, kept as one
tensor ``phys`` (..., :data:`NUM_PHYS`) in :data:`PHYS_FIELDS` order:

==================  =====================================================================  ==========
field               meaning                                                                kinematic
==================  =====================================================================  ==========
``accel_gain``      achieved / commanded acceleration for ``accel`` ≥ 0                    1
``brake_gain``      achieved / commanded deceleration for ``accel`` < 0                    1
``steer_rate``      road-wheel angle rate limit δ̇_max [rad/s]                              the car's
``grip_factor``     tyre force limit as a multiple of μ·g (``inf``: no limit)              inf
``understeer``      understeer gradient K [rad·s²/m]                                       0
``delay_steps``     actuation delay d in policy steps (integer-valued)                     0
==================  =====================================================================  ==========

One step of :func:`corrected_bicycle_step` under the action applied ``d`` steps ago, with road
friction μ and g = 9.81 m/s² (the kinematic tier's equations with the knobs added)::

    δ*, u       = actions_to_controls(a_{t−d})                     target angle, commanded accel
    δ'  = clip(δ + clip(δ* − δ, ±δ̇_max·dt), ±δ_max)
    a   = u · (accel_gain if u ≥ 0 else brake_gain)
    a_g = grip_factor · μ · g                                      grip limit [m/s²]
    a   = clip(a, −a_g, a_g)                                       longitudinal grip
    v'  = clip(v + a·dt, 0, v_max);   v̄ = (v + v') / 2
    β   = atan(l_r / L · tan δ')
    r   = v̄ · cos β · tan δ' / (L + K · v̄²)                        understeer (Gillespie §6)
    r   = clip(r, ±a_g / max(v̄, 0.1 m/s))                          lateral grip: |v̄ · r| ≤ a_g
    x'  = x + v̄ cos(ψ + β) dt;  y' = y + v̄ sin(ψ + β) dt;  ψ' = ψ + r·dt

The longitudinal and lateral limits are applied separately (a box, not a friction circle): the
simplest form that lets braking distance and cornering speed scale with μ. With the kinematic
values in the right-hand column the step is exactly the kinematic tier's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

PHYS_FIELDS = ("accel_gain", "brake_gain", "steer_rate", "grip_factor", "understeer", "delay_steps")
NUM_PHYS = len(PHYS_FIELDS)
ACCEL_GAIN, BRAKE_GAIN, STEER_RATE, GRIP, UNDERSTEER, DELAY = range(NUM_PHYS)
GRAVITY_MPS2 = 9.81
_MIN_SPEED_FOR_GRIP_MPS = 0.1


@dataclass(frozen=True)
class BicycleCorrection:
    """One setting of the physical knobs (see the module docstring); the defaults are the kinematic tier.

    ``steer_rate_radps`` ``None`` means the vehicle's own ``max_steer_rate_radps``;
    ``grip_factor`` ``None`` means no grip limit.
    """

    accel_gain: float = 1.0
    brake_gain: float = 1.0
    steer_rate_radps: float | None = None
    grip_factor: float | None = None
    understeer_s2pm: float = 0.0
    delay_steps: int = 0

    def __post_init__(self) -> None:
        """Reject non-physical values at construction."""
        for name in ("accel_gain", "brake_gain", "steer_rate_radps", "grip_factor"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0.0):
                raise UserError(f"BicycleCorrection.{name} must be a positive number, got {value!r}")
        if not (math.isfinite(self.understeer_s2pm) and self.understeer_s2pm >= 0.0):
            raise UserError(f"BicycleCorrection.understeer_s2pm must be >= 0, got {self.understeer_s2pm!r}")
        if (
            isinstance(self.delay_steps, bool)
            or not isinstance(self.delay_steps, int)
            or self.delay_steps < 0
        ):
            raise UserError(
                f"BicycleCorrection.delay_steps must be an integer >= 0, got {self.delay_steps!r}"
            )

    def to_tensor(self, vehicle: VehicleParams) -> torch.Tensor:
        """``phys`` (NUM_PHYS,) for ``vehicle``."""
        rate = vehicle.max_steer_rate_radps if self.steer_rate_radps is None else self.steer_rate_radps
        grip = math.inf if self.grip_factor is None else self.grip_factor
        values = (self.accel_gain, self.brake_gain, rate, grip, self.understeer_s2pm, float(self.delay_steps))
        return torch.tensor(values, dtype=torch.float32)

    @classmethod
    def from_tensor(cls, phys: torch.Tensor) -> BicycleCorrection:
        """The inverse of :meth:`to_tensor` (the steering rate is kept explicit)."""
        v = [float(x) for x in phys.tolist()]
        return cls(
            accel_gain=v[ACCEL_GAIN],
            brake_gain=v[BRAKE_GAIN],
            steer_rate_radps=v[STEER_RATE],
            grip_factor=None if math.isinf(v[GRIP]) else v[GRIP],
            understeer_s2pm=v[UNDERSTEER],
            delay_steps=round(v[DELAY]),
        )


@dataclass(frozen=True)
class DomainRanges:
    """Domain randomization: each knob drawn uniformly from (low, high) per world at every reset.

    Defaults (documented choices, wide enough to contain the mujoco tier on wet and icy roads and
    an actuator lag of up to 2 steps, narrow enough to stay a car): acceleration gain 0.5–1.1,
    braking gain 0.5–1.1, steering rate 0.75–1.5 rad/s, grip 0.7–1.1 μg, understeer gradient
    0–0.004 rad·s²/m, delay 0–2 steps (integers, both ends included).
    """

    accel_gain: tuple[float, float] = (0.5, 1.1)
    brake_gain: tuple[float, float] = (0.5, 1.1)
    steer_rate_radps: tuple[float, float] = (0.75, 1.5)
    grip_factor: tuple[float, float] = (0.7, 1.1)
    understeer_s2pm: tuple[float, float] = (0.0, 0.004)
    delay_steps: tuple[int, int] = (0, 2)

    def __post_init__(self) -> None:
        """Every range must be (low, high) with 0 <= low <= high; gains, rates and grip above 0."""
        for f in fields(self):
            lo, hi = getattr(self, f.name)
            positive = f.name not in ("understeer_s2pm", "delay_steps")
            if not (0.0 <= lo <= hi and math.isfinite(hi)) or (positive and lo <= 0.0):
                raise UserError(
                    f"DomainRanges.{f.name} must be (low, high) with 0 < low <= high, got {(lo, hi)}"
                )
        lo, hi = self.delay_steps
        if int(lo) != lo or int(hi) != hi:
            raise UserError(f"DomainRanges.delay_steps must be integers, got {(lo, hi)}")

    @property
    def max_delay_steps(self) -> int:
        """The longest delay that can be drawn."""
        return int(self.delay_steps[1])

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``phys`` (n, NUM_PHYS) drawn uniformly from the ranges (delays uniform over the integers)."""
        u = torch.rand(n, NUM_PHYS, generator=generator)
        out = torch.empty(n, NUM_PHYS)
        for i, (lo, hi) in enumerate(
            (self.accel_gain, self.brake_gain, self.steer_rate_radps, self.grip_factor, self.understeer_s2pm)
        ):
            out[:, i] = lo + (hi - lo) * u[:, i]
        lo_d, hi_d = self.delay_steps
        out[:, DELAY] = torch.floor(lo_d + (hi_d - lo_d + 1) * u[:, DELAY]).clamp(max=hi_d)
        return out

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-ready ranges."""
        return {k: list(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, list[float]]) -> DomainRanges:
        """The inverse of :meth:`to_dict`."""
        out = {k: (float(v[0]), float(v[1])) for k, v in data.items()}
        lo, hi = out["delay_steps"]
        return cls(**{**out, "delay_steps": (int(lo), int(hi))})  # type: ignore[arg-type]


def delayed_action(actions: torch.Tensor, delay_steps: torch.Tensor) -> torch.Tensor:
    """The action applied now (B, 2) under per-agent delays ``delay_steps`` (B,) from ``actions``
    (B, H, 2) (oldest first, the last the current one); a delay must be at most ``H − 1``."""
    h = actions.shape[1]
    d = delay_steps.round().long()
    if bool((d < 0).any()) or bool((d > h - 1).any()):
        raise ValueError(f"delays {d.unique().tolist()} need a history of more than {h} actions")
    idx = (h - 1 - d).view(-1, 1, 1).expand(-1, 1, 2)
    return actions.gather(1, idx).squeeze(1)


def corrected_bicycle_step(
    state: torch.Tensor,
    action: torch.Tensor,
    friction: torch.Tensor,
    phys: torch.Tensor,
    vehicle: VehicleParams,
    dt_s: float,
) -> torch.Tensor:
    """Next abstract state (B, 6) from ``state`` (B, 6), the applied ``action`` (B, 2) (already
    delayed, see :func:`delayed_action`), road ``friction`` (B,) and knobs ``phys`` (B, NUM_PHYS).

    Equations in the module docstring; differentiable in ``phys`` (except the delay).
    """
    steer_target, accel_cmd = actions_to_controls(action, vehicle)
    speed, steer = state[:, 3], state[:, 5]
    max_dsteer = phys[:, STEER_RATE] * dt_s
    dsteer = torch.minimum(torch.maximum(steer_target - steer, -max_dsteer), max_dsteer)
    new_steer = (steer + dsteer).clamp(-vehicle.max_steer_rad, vehicle.max_steer_rad)
    accel = accel_cmd * torch.where(accel_cmd >= 0.0, phys[:, ACCEL_GAIN], phys[:, BRAKE_GAIN])
    grip = phys[:, GRIP]
    limited = torch.isfinite(grip)
    a_grip = torch.where(limited, grip.clamp(max=1e6) * friction * GRAVITY_MPS2, math.inf)
    accel = torch.minimum(torch.maximum(accel, -a_grip), a_grip)
    new_speed = (speed + accel * dt_s).clamp(0.0, vehicle.max_speed_mps)
    v_mid = 0.5 * (speed + new_speed)
    tan_d = torch.tan(new_steer)
    beta = torch.atan(vehicle.rear_axle_to_com_m / vehicle.wheelbase_m * tan_d)
    yaw_rate = v_mid * torch.cos(beta) * tan_d / (vehicle.wheelbase_m + phys[:, UNDERSTEER] * v_mid**2)
    r_grip = a_grip / v_mid.clamp(min=_MIN_SPEED_FOR_GRIP_MPS)
    yaw_rate = torch.minimum(torch.maximum(yaw_rate, -r_grip), r_grip)
    heading = state[:, 2] + beta
    x = state[:, 0] + v_mid * torch.cos(heading) * dt_s
    y = state[:, 1] + v_mid * torch.sin(heading) * dt_s
    yaw = wrap_angle(state[:, 2] + yaw_rate * dt_s)
    return torch.stack((x, y, yaw, new_speed, yaw_rate, new_steer), dim=-1)
