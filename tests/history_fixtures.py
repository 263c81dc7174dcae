"""Deterministic learned and grounded models, and a fixed drive of an engine, for the history-engine tests.

The weights are set from a closed-form pattern (not a random initialization), so the files and the
trajectories they give do not depend on torch's random number generator. :func:`drive` plays one
scripted episode through the :class:`~scenefactory.engines.base.Engine` protocol only (resets with
an invalid agent and a spawn speed above the car's limit, per-world friction, an agent switched off
for two steps, a partial reset of world 1) and returns every state it saw; the expected values in
``tests/data/history_engine_expected.json`` were recorded with the tiers' previous implementations
(``engines/learned.py`` and ``engines/grounded.py``) by :func:`record_expected`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import torch

from scenefactory.dynamics.artifact import save_grounding
from scenefactory.dynamics.correctors import (
    GroundedModel,
    HistoryCorrection,
    PhysicalBicycle,
    RandomizedBicycle,
)
from scenefactory.dynamics.model_file import MODEL_FORMAT, model_config_to_dict
from scenefactory.dynamics.models import DynamicsModel, DynamicsModelConfig, ModelKind, make_model
from scenefactory.engines.base import Engine
from scenefactory.vehicles.params import VehicleParams

DT_S = 0.1
CAR = VehicleParams()
EXPECTED = Path(__file__).parent / "data" / "history_engine_expected.json"
WORLDS, AGENTS, STEPS = 2, 2, 8
FIELDS = ("pos_xy", "yaw", "vel_xy", "vel_b", "speed", "yaw_rate", "steer", "accel")


@torch.no_grad()
def _pattern(module: torch.nn.Module, scale: float) -> None:
    """Every parameter set to ``scale · sin(0.7 i + j)`` (i: element, j: parameter index)."""
    for j, p in enumerate(module.parameters()):
        i = torch.arange(p.numel(), dtype=torch.float32)
        p.copy_((scale * torch.sin(0.7 * i + j)).view_as(p))


@torch.no_grad()
def _normalization(model: DynamicsModel) -> None:
    """Fixed input scales (positions in metres, angles in radians) and small output scales."""
    model.in_std.copy_(torch.tensor([5.0, 5.0, 1.0, 1.0, 8.0, 0.5, 0.3, 1.0, 1.0, 0.5]))
    model.out_std.copy_(torch.tensor([0.05, 0.02, 0.01, 0.05, 0.02, 0.01]))
    model.fitted.fill_(True)


def learned_model_file(folder: Path, kind: ModelKind, history_len: int | None = None) -> Path:
    """A ``fit-dynamics`` model.pt of ``kind`` with patterned weights."""
    cfg = DynamicsModelConfig(
        kind=kind, history_len=history_len, hidden_size=8, num_layers=1, dt_s=DT_S, vehicle=CAR
    )
    model = make_model(cfg)
    _pattern(model, 0.3)
    _normalization(model)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind.value}.pt"
    stream = io.BytesIO()
    blob = {"format": MODEL_FORMAT, "config": model_config_to_dict(cfg), "state_dict": model.state_dict()}
    torch.save({**blob, "metrics": {}}, stream)
    path.write_bytes(stream.getvalue())
    return path


def grounding_folder(folder: Path, method: str) -> Path:
    """A ``scenefactory ground`` artifact: ``none`` (the kinematic knobs), ``dr`` (default ranges:
    delays up to 2 steps) or ``history`` (patterned GRU and heads over 3 steps), fit seed 7."""
    model: GroundedModel
    if method == "none":
        model = PhysicalBicycle(CAR, DT_S)
    elif method == "dr":
        model = RandomizedBicycle(CAR, DT_S)
    elif method == "history":
        model = HistoryCorrection(CAR, DT_S, history_len=3, hidden_size=8, num_layers=1)
        _pattern(model, 0.3)
        _normalization(model.net)
        model.net.rew_std.fill_(2.0)
    else:
        raise ValueError(f"no fixture for method {method!r}")
    return save_grounding(folder / method, model, {"budget_transitions": 0, "seed": 7})


def drive(engine: Engine) -> dict[str, Any]:
    """The scripted episode (module docstring); every state field per step, knobs and rewards if any."""
    w, k = WORLDS, AGENTS
    pose = torch.tensor([[[0.0, 0.0, 0.3], [10.0, -4.0, -1.2]], [[-3.0, 2.0, 2.9], [1.0, 1.0, 0.0]]])
    speed = torch.tensor([[4.0, 9.0], [40.0, 0.5]])  # 40 m/s: above the car's max_speed_mps
    valid = torch.tensor([[True, True], [True, False]])
    engine.reset(torch.arange(w), pose, speed, valid)
    engine.set_friction(torch.arange(w), torch.tensor([1.0, 0.4]))
    out: dict[str, Any] = {"states": [], "knobs": [], "rewards": []}
    for t in range(STEPS):
        if t == 5:  # world 1 starts over (new knobs on the grounded tier)
            engine.reset(
                torch.tensor([1]), pose[1:] + 1.0, torch.tensor([[6.0, 3.0]]), torch.tensor([[True, True]])
            )
        phase = torch.tensor(0.6 * t)
        steer = torch.tensor([[0.8, -0.5], [0.3, 1.0]]) * torch.cos(phase)
        accel = torch.tensor([[0.9, -0.7], [0.4, -0.2]]) * torch.sin(phase + 0.5)
        active = torch.ones(w, k, dtype=torch.bool)
        if t in (2, 3):
            active[0, 1] = False
        st = engine.step(torch.stack((steer, accel), dim=-1), active)
        out["states"].append({f: getattr(st, f).tolist() for f in FIELDS})
        phys = getattr(engine, "phys", None)
        out["knobs"].append(None if phys is None else phys.tolist())
        reward = getattr(engine, "predicted_reward", None)
        out["rewards"].append(None if reward is None else reward.tolist())
    return out


CASES = ("learned-mlp", "learned-gru", "grounded-dr", "grounded-history")


def build_case(case: str, folder: Path, make: Any) -> Engine:
    """The engine of ``case``; ``make(tier, path)`` builds it from the model file / artifact folder."""
    tier, variant = case.split("-")
    if tier == "learned":
        kind = ModelKind.MLP if variant == "mlp" else ModelKind.GRU
        return make("learned", learned_model_file(folder, kind, None if variant == "mlp" else 3))
    return make("grounded", grounding_folder(folder, variant))


def record_expected(folder: Path, make: Any) -> None:
    """Write :data:`EXPECTED` from the engines ``make`` builds (run once, on the old tiers)."""
    EXPECTED.parent.mkdir(exist_ok=True)
    expected = {case: drive(build_case(case, folder / case, make)) for case in CASES}
    EXPECTED.write_text(json.dumps(expected, indent=None, separators=(",", ":")) + "\n")
