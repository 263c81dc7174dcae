"""The passenger car's limits and the meaning of a normalized action, shared by every tier and model.

``steer`` → target front-wheel angle ``δ* = steer · max_steer_rad`` (the wheel moves toward it no
faster than ``max_steer_rate_radps``); ``accel`` ≥ 0 → acceleration ``accel · max_accel_mps2``,
``accel`` < 0 → braking ``-accel · max_brake_mps2`` (no reverse gear).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VehicleParams:
    """A passenger car's limits, shared by every tier so that actions mean the same thing.

    Defaults: a mid-size car (wheelbase 2.7 m, centre of mass mid-wheelbase), comfortable-to-firm
    acceleration, an emergency brake near the dry-road friction limit (≈ 0.8 g), 34° maximum road
    wheel angle, and a steering rate a driver reaches in a quick lane change.
    """

    wheelbase_m: float = 2.7
    rear_axle_to_com_m: float = 1.35
    length_m: float = 4.5
    width_m: float = 1.9
    max_steer_rad: float = 0.6
    max_steer_rate_radps: float = 1.5
    max_accel_mps2: float = 4.0
    max_brake_mps2: float = 8.0
    max_speed_mps: float = 25.0

    def __post_init__(self) -> None:
        """Reject non-physical values at construction."""
        for name in (
            "wheelbase_m",
            "length_m",
            "width_m",
            "max_steer_rad",
            "max_steer_rate_radps",
            "max_accel_mps2",
            "max_brake_mps2",
            "max_speed_mps",
        ):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"VehicleParams.{name} must be positive, got {getattr(self, name)}")
        if not 0.0 < self.rear_axle_to_com_m < self.wheelbase_m:
            raise ValueError(
                f"VehicleParams.rear_axle_to_com_m must lie in (0, wheelbase_m={self.wheelbase_m}), "
                f"got {self.rear_axle_to_com_m}"
            )


def actions_to_controls(actions: torch.Tensor, params: VehicleParams) -> tuple[torch.Tensor, torch.Tensor]:
    """Map normalized ``actions`` (..., 2) = [steer, accel] in [-1, 1] to physical commands.

    Returns ``(steer_target_rad (...), accel_mps2 (...))``; values outside [-1, 1] are clipped, so a
    policy's unbounded Gaussian sample is safe. Negative accel commands braking (see module docs).
    """
    a = actions.clamp(-1.0, 1.0)
    steer_target = a[..., 0] * params.max_steer_rad
    throttle = a[..., 1]
    accel = torch.where(throttle >= 0.0, throttle * params.max_accel_mps2, throttle * params.max_brake_mps2)
    return steer_target, accel
