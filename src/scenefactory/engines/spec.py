"""One description of an engine, built once (by the CLI or a user) and passed whole.

An :class:`EngineSpec` names the tier and every tier-specific setting: the physics rate (mujoco),
the model file (learned), the grounding folder (grounded), and the actuator lag (any tier). It is
frozen and checked at construction, so a wrong value fails where it is written, with the field's
name; :func:`~scenefactory.engines.make_engine` turns it into an engine for a number of worlds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError

DEFAULT_PHYSICS_HZ = 120.0
"""Physics rate of the mujoco tier unless told otherwise; ``validate vehicle`` passes at it."""

TIERS = ("kinematic", "mujoco", "learned", "grounded")
"""The engine tiers, from the abstract kinematic bicycle to the physics tier and its learned models."""


@dataclass(frozen=True)
class EngineSpec:
    """Which engine, with what settings.

    - ``tier``: one of :data:`TIERS`.
    - ``physics_hz``: mujoco physics rate [Hz] (other tiers step once per policy step).
    - ``dynamics_model``: the learned tier's ``model.pt`` (``scenefactory fit-dynamics``).
    - ``grounding``: the grounded tier's folder (``scenefactory ground``).
    - ``action_lag_steps``: actions applied that many policy steps late (any tier).
    """

    tier: str = "kinematic"
    physics_hz: float = DEFAULT_PHYSICS_HZ
    dynamics_model: Path | None = None
    grounding: Path | None = None
    action_lag_steps: int = 0

    def __post_init__(self) -> None:
        """Reject an unknown tier, a non-positive rate, a bad lag, and a file the tier does not read."""
        if self.tier not in TIERS:
            raise UserError(f"unknown engine '{self.tier}': expected one of {sorted(TIERS)}")
        if isinstance(self.physics_hz, bool) or not float(self.physics_hz) > 0:
            raise UserError(f"physics rate must be positive, got {self.physics_hz} Hz")
        lag = self.action_lag_steps
        if isinstance(lag, bool) or not isinstance(lag, int) or lag < 0:
            raise UserError(f"--action-lag-steps must be an integer >= 0, got {lag!r}")
        for name, tier, flag, source in (
            ("dynamics_model", "learned", "--dynamics-model", "a model.pt from 'scenefactory fit-dynamics'"),
            ("grounding", "grounded", "--grounding", "a folder from 'scenefactory ground'"),
        ):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value))
                if self.tier != tier:
                    raise UserError(f"{flag} applies to --engine {tier}, not to --engine {self.tier}")
            elif self.tier == tier:
                raise UserError(f"--engine {tier} needs {flag} PATH ({source})")
        object.__setattr__(self, "physics_hz", float(self.physics_hz))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (paths as strings) for checkpoints and reports."""
        d = asdict(self)
        for name in ("dynamics_model", "grounding"):
            if d[name] is not None:
                d[name] = str(d[name])
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineSpec:
        """Inverse of :meth:`to_dict`; an unknown field is a ``UserError`` naming it."""
        unknown = sorted(set(data) - {f for f in cls.__dataclass_fields__})
        if unknown:
            raise UserError(
                f"engine spec has unknown fields {unknown}; expected {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**data)
