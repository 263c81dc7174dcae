"""Vehicle model builders: the articulated passenger car in MJCF and the road world of K cars."""

from __future__ import annotations

from scenefactory.vehicles.car import (
    WHEELS,
    CarIndex,
    CarParams,
    DriveLayout,
    ackermann_angles,
    car_mjcf,
    car_prefix,
    drive_ctrl,
    world_mjcf,
)

__all__ = [
    "WHEELS",
    "CarIndex",
    "CarParams",
    "DriveLayout",
    "ackermann_angles",
    "car_mjcf",
    "car_prefix",
    "drive_ctrl",
    "world_mjcf",
]
