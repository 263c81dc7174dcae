"""The vehicle job: ``validate vehicle``, the car model's braking, acceleration and circle
manoeuvres on the mujoco tier, per road condition."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.vehicle import DEFAULT_CONDITIONS, POLICY_HZ, plot_validation, validate_vehicle
from scenefactory.io import write_json
from scenefactory.jobs.console import console

__all__ = ["DEFAULT_CONDITIONS", "POLICY_HZ", "ValidateArgs", "validate"]


@dataclass(frozen=True, kw_only=True)
class ValidateArgs:
    """Arguments of ``validate vehicle``: the road ``conditions`` (presets of
    ``scenes.friction.PRESETS``) and the ``engine``, a spec of the mujoco tier (its physics rate)."""

    out: Path
    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    engine: EngineSpec = field(default_factory=lambda: EngineSpec("mujoco"))


def validate(args: ValidateArgs) -> dict[str, Any]:
    """Run the manoeuvres; writes ``validation.json`` and ``validation.png`` into ``out`` and one
    line per condition on stderr; returns the result (``passed``: every check of every condition)."""
    result = validate_vehicle(args.conditions, engine=args.engine)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "validation.json", result)
    plot_validation(result, args.out / "validation.png")
    for name, c in result["conditions"].items():
        console.print(
            f"{name:>10}: mu {c['mu']:.3f}  braking {c['braking_distance_m']:.1f} m "
            f"(v²/2μg {c['braking_predicted_m']:.1f} m)  lateral max {c['max_lateral_accel_mps2']:.2f} m/s²  "
            f"top speed {c['top_speed_mps']:.1f} m/s  {'ok' if all(c['checks'].values()) else 'FAIL'}"
        )
    return result
