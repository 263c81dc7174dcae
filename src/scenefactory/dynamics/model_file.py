"""A fitted dynamics model's file (``model.pt`` of ``scenefactory fit-dynamics``): format and loading.

Loaded with ``weights_only=True`` (:func:`~scenefactory.checkpoint.safe_torch_load`); a file of
another format, a config that does not build, or weights that do not fit are a
:class:`~scenefactory.errors.CheckpointError` naming the file.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from scenefactory.checkpoint import require_finite_state, require_keys, safe_torch_load
from scenefactory.dynamics.models import DynamicsModel, DynamicsModelConfig, make_model, model_kind
from scenefactory.errors import CheckpointError
from scenefactory.vehicles.params import VehicleParams

MODEL_FORMAT = "scenefactory.dynamics/1"


def model_config_to_dict(cfg: DynamicsModelConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["kind"] = cfg.kind.value
    return d


def model_config_from_dict(d: dict[str, Any]) -> DynamicsModelConfig:
    vehicle = d.get("vehicle")
    fields = {**d, "kind": model_kind(d["kind"]), "vehicle": VehicleParams(**vehicle) if vehicle else None}
    return DynamicsModelConfig(**fields)


def load_dynamics_model(path: Path) -> tuple[DynamicsModel, dict[str, Any]]:
    """A saved model (in eval mode) and its metrics; :class:`CheckpointError` if missing or foreign."""
    if not path.is_file():
        raise CheckpointError(
            f"{path}: no such dynamics model file (make one with 'scenefactory fit-dynamics')"
        )
    blob = safe_torch_load(path)
    if not isinstance(blob, dict) or blob.get("format") != MODEL_FORMAT:
        found = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise CheckpointError(
            f"{path}: format {found!r}, expected {MODEL_FORMAT!r} (a fit-dynamics model.pt)"
        )
    require_keys(blob, path, ("config", "state_dict", "metrics"))
    try:
        model = make_model(model_config_from_dict(blob["config"]))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{path}: field 'config' is invalid ({type(exc).__name__}: {exc})") from None
    state = require_finite_state(blob["state_dict"], path, "state_dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        msg = " ".join(str(exc).split())[:200]
        raise CheckpointError(f"{path}: weights do not fit its config ({msg})") from None
    model.eval()
    return model, blob["metrics"]
