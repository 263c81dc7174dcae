"""One description of an engine, built once (by the CLI or a user) and passed whole.

An :class:`EngineSpec` names the tier and every tier-specific setting: the physics rate (mujoco and
mujoco-warp),
the model file (learned), the grounding folder (grounded), and the actuator lag (any tier). It is
frozen and checked at construction, so a wrong value fails where it is written, with the field's
name; :func:`~scenefactory.engines.make_engine` turns it into an engine for a number of worlds.
Whether the model file or the folder exists is checked when the engine is built (a spec read
back from an old checkpoint may name a file that has since moved).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from scenefactory import inputs
from scenefactory.bounds import LAG_STEPS, PHYSICS_HZ
from scenefactory.errors import UserError

DEFAULT_PHYSICS_HZ = 120.0
"""Physics rate of the mujoco tier unless told otherwise; ``validate vehicle`` passes at it."""

TIERS = ("kinematic", "mujoco", "learned", "grounded", "mujoco-warp")
"""The engine tiers, from the abstract kinematic bicycle to the physics tier (MuJoCo C; the same cars
on MuJoCo Warp, for GPUs) and its learned models."""
PHYSICS_TIERS = ("mujoco", "mujoco-warp")
"""The tiers that step articulated cars at ``physics_hz`` (the others step once per policy step)."""

_FILES = (
    # (field, the tier that reads it, its CLI flag, what it is)
    ("dynamics_model", "learned", "--dynamics-model", "a model.pt from 'scenefactory fit-dynamics'"),
    ("grounding", "grounded", "--grounding", "a folder from 'scenefactory ground'"),
)


@dataclass(frozen=True)
class EngineSpec:
    """Which engine, with what settings.

    - ``tier``: one of :data:`TIERS`.
    - ``physics_hz``: physics rate [Hz] of the :data:`PHYSICS_TIERS`, in the CLI's bounds
      (``scenefactory.bounds.PHYSICS_HZ``, 100-1000 Hz); the other tiers step once per policy step
      and ignore it (any positive number).
    - ``dynamics_model``: the learned tier's ``model.pt`` (``scenefactory fit-dynamics``); required
      by that tier, refused by the others. A ``str`` is turned into a ``Path``.
    - ``grounding``: the grounded tier's folder (``scenefactory ground``); likewise.
    - ``action_lag_steps``: actions applied that many policy steps late (any tier), an integer in
      ``scenefactory.bounds.LAG_STEPS`` (0-100).
    """

    tier: str = "kinematic"
    physics_hz: float = DEFAULT_PHYSICS_HZ
    dynamics_model: Path | None = None
    grounding: Path | None = None
    action_lag_steps: int = 0

    def __post_init__(self) -> None:
        """Reject an unknown tier, a bad rate or lag, a missing file, and a file the tier does not read."""
        if self.tier not in TIERS:
            raise UserError(f"unknown engine '{self.tier}': expected one of {sorted(TIERS)}")
        # the CLI's bounds (scenefactory.bounds): ArgumentError naming field and flag. The rate's
        # range holds for the tiers that step at it; the others ignore it (a saved learned-tier spec
        # may carry any positive rate), so there it need only be a positive number
        name = "EngineSpec.physics_hz (--physics-hz)"
        if self.tier in PHYSICS_TIERS:
            hz = PHYSICS_HZ.check(self.physics_hz, name)
        else:
            hz = inputs.number(self.physics_hz, name, "a positive rate in Hz", lambda v: v > 0)
        LAG_STEPS.check(self.action_lag_steps, "EngineSpec.action_lag_steps (--action-lag-steps)")
        for name, tier, flag, source in _FILES:
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, str | Path):
                    raise UserError(f"{flag} must be a path, got {value!r}")
                object.__setattr__(self, name, Path(value))
                if self.tier != tier:
                    raise UserError(f"{flag} applies to --engine {tier}, not to --engine {self.tier}")
            elif self.tier == tier:
                raise UserError(f"--engine {tier} needs {flag} PATH ({source})")
        object.__setattr__(self, "physics_hz", float(hz))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (paths as strings) for checkpoints and reports; :meth:`from_dict` reads it back."""
        d = asdict(self)
        for name, *_ in _FILES:
            if d[name] is not None:
                d[name] = str(d[name])
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineSpec:
        """Inverse of :meth:`to_dict` (absent fields take their defaults); an unknown field or a
        value that does not check is a ``UserError`` naming it."""
        if not isinstance(data, Mapping):
            raise UserError(f"an engine spec must be an object of its fields, got {data!r}")
        names = sorted(f.name for f in fields(cls))
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise UserError(f"engine spec has unknown fields {unknown}; expected {names}")
        return cls(**data)

    @classmethod
    def from_flat(cls, data: Mapping[str, Any]) -> EngineSpec:
        """The spec of an older flat record: keys ``engine`` (the tier), ``physics_hz``,
        ``dynamics_model``, ``grounding``, ``action_lag_steps`` beside other keys, which are ignored
        (training specs and dataset metadata written before the engine was one field).

        A key that is absent or ``None`` takes the default (``physics_hz`` was ``None`` for the
        kinematic tier). Those records could keep a ``dynamics_model`` beside another tier, which
        that tier never read; it is left out here, as it was then.
        """
        if not isinstance(data, Mapping):
            raise UserError(f"expected an object holding 'engine' and its settings, got {data!r}")
        given = {
            f.name: data[f.name] for f in fields(cls) if f.name != "tier" and data.get(f.name) is not None
        }
        if data.get("engine") is not None:
            given["tier"] = data["engine"]
        if given.get("tier") != "learned":
            given.pop("dynamics_model", None)
        return cls(**given)
