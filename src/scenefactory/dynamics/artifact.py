"""Grounding artifacts: a folder with ``config.json`` and ``weights.pt`` that the grounded engine runs.

``config.json`` (strict JSON) holds ``format`` (:data:`GROUNDING_FORMAT`), ``method``, ``spec`` (the
method's settings: DR ranges, fitted knobs, α, network sizes), ``budget_transitions`` (target
transitions the fit used; 0 for ``none`` and ``dr``), ``dt_s``, ``vehicle``, ``history_len``,
``seed``, ``data`` (where the target data came from), ``fit`` (what the fit did) and ``heldout``
(held-out errors of the grounded model beside the plain bicycle), and ``weights_sha256``, the
digest of ``weights.pt`` (a torch state dict; empty for the parametric methods). Both files are
written atomically, weights first, so a folder with a ``config.json`` is complete and a
``weights.pt`` that does not belong to its ``config.json`` is detected.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from scenefactory.checkpoint import require_finite_state, safe_torch_load
from scenefactory.dynamics.correctors import MODEL_CLASSES, GroundedModel, Method
from scenefactory.errors import CheckpointError
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.vehicles.params import VehicleParams

GROUNDING_FORMAT = "scenefactory.grounding/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.pt"
_REQUIRED = ("method", "spec", "budget_transitions", "dt_s", "vehicle", "history_len", "weights_sha256")


def save_grounding(out_dir: Path, model: GroundedModel, info: dict[str, Any]) -> Path:
    """Write ``model`` and ``info`` (budget, seed, data, fit, held-out metrics) to ``out_dir``."""
    stream = io.BytesIO()
    torch.save(model.state_dict(), stream)
    weights = stream.getvalue()
    config = {
        "format": GROUNDING_FORMAT,
        "method": model.method.value,
        "spec": model.spec(),
        "dt_s": model.dt_s,
        "vehicle": asdict(model.vehicle),
        "history_len": model.history_len,
        **info,
        "weights_file": WEIGHTS_FILE,
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_dir / WEIGHTS_FILE, weights)
    write_json(out_dir / CONFIG_FILE, config)
    return out_dir


def _read_config(folder: Path) -> dict[str, Any]:
    hint = "make one with 'scenefactory ground'"
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such grounding folder ({hint})")
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path}: missing; a grounding folder holds {CONFIG_FILE} and {WEIGHTS_FILE} ({hint})"
        )
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path}: not valid JSON ({exc}); expected the grounding config ({hint})"
        ) from exc
    if not isinstance(config, dict) or config.get("format") != GROUNDING_FORMAT:
        found = config.get("format") if isinstance(config, dict) else type(config).__name__
        raise CheckpointError(f"{path}: format {found!r}, expected {GROUNDING_FORMAT!r} ({hint})")
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise CheckpointError(f"{path}: field(s) {missing} missing from the grounding config")
    return config


def load_grounding(folder: Path) -> tuple[GroundedModel, dict[str, Any]]:
    """The grounded model of an artifact folder (eval mode) and its config.

    Raises :class:`CheckpointError` naming the file and field for a missing folder or file, a
    foreign or malformed config, a weights file that is not the config's, or weights that do not fit.
    """
    config = _read_config(folder)
    cfg_path, w_path = folder / CONFIG_FILE, folder / WEIGHTS_FILE
    try:
        method = Method(config["method"])
    except ValueError:
        raise CheckpointError(
            f"{cfg_path}: field 'method' is {config['method']!r}, expected one of {[m.value for m in Method]}"
        ) from None
    try:
        vehicle = VehicleParams(**config["vehicle"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{cfg_path}: field 'vehicle' is not a vehicle ({exc})") from exc
    try:
        model = MODEL_CLASSES[method].from_spec(vehicle, float(config["dt_s"]), config["spec"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"{cfg_path}: field 'spec' does not describe a {method.value} model ({exc!r})"
        ) from exc
    if model.history_len != config["history_len"]:
        raise CheckpointError(
            f"{cfg_path}: field 'history_len' is {config['history_len']}, the spec gives {model.history_len}"
        )
    if not w_path.is_file():
        raise CheckpointError(f"{w_path}: missing; expected the weights written with {CONFIG_FILE}")
    blob = w_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != config["weights_sha256"]:
        raise CheckpointError(
            f"{w_path}: does not match field 'weights_sha256' of {cfg_path} (a different or damaged "
            f"weights file); re-run 'scenefactory ground'"
        )
    state = require_finite_state(safe_torch_load(w_path, blob), w_path, "weights", allow_empty=True)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        msg = " ".join(str(exc).split())[:200]
        raise CheckpointError(
            f"{w_path}: weights do not fit the {method.value} model of {cfg_path} ({msg})"
        ) from None
    model.eval()
    return model, config
