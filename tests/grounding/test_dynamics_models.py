"""Learned dynamics models: frames, fitting on kinematic data, the bicycle baseline, save/load.

The synthetic dataset is written with the real shard/meta conventions of
:mod:`scenefactory.grounding.dataset` from the kinematic bicycle driven by smooth random actions,
so the plain bicycle is exact on it: the baseline row must read 0, the residual model (bicycle +
zero-initialized correction) must stay near-exact, and the purely learned models must learn the
one-step map to a few centimetres.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from scenefactory.dynamics.bicycle import bicycle_step
from scenefactory.dynamics.model_file import load_dynamics_model
from scenefactory.dynamics.models import (
    DynamicsModelConfig,
    ModelKind,
    apply_deltas,
    body_deltas,
    history_features,
    make_model,
    model_kind,
)
from scenefactory.errors import CheckpointError, UserError
from scenefactory.grounding.dataset import DATASET_FORMAT, STATE_FIELDS, load_transitions
from scenefactory.grounding.fit import build_histories, fit_dynamics
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

DT_S = 0.1
PARAMS = VehicleParams()


def write_kinematic_dataset(out: Path, episodes: int = 48, steps: int = 60, seed: int = 0) -> None:
    """``episodes`` bicycle runs of ``steps`` steps under Ornstein–Uhlenbeck actions, in 2 shards."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.rand(episodes, 2, generator=g) * 200.0 - 100.0
    yaw = (torch.rand(episodes, generator=g) * 2.0 - 1.0) * math.pi
    speed = 2.0 + 12.0 * torch.rand(episodes, generator=g)
    steer, yaw_rate = torch.zeros(episodes), torch.zeros(episodes)
    friction = 0.3 + 0.7 * torch.rand(episodes, generator=g)
    a = torch.zeros(episodes, 2)
    rows: dict[str, list[np.ndarray]] = {k: [] for k in ("state", "action", "next_state", "step")}
    for t in range(steps):
        a = (a - 1.0 * a * DT_S + 0.8 * DT_S**0.5 * torch.randn(episodes, 2, generator=g)).clamp(-1.0, 1.0)
        state = torch.stack((pos[:, 0], pos[:, 1], yaw, speed, yaw_rate, steer), dim=-1)
        target, accel = actions_to_controls(a, PARAMS)
        pos, yaw, speed, steer, _, yaw_rate, _ = bicycle_step(
            pos, yaw, speed, steer, target, accel, PARAMS, DT_S
        )
        nxt = torch.stack((pos[:, 0], pos[:, 1], yaw, speed, yaw_rate, steer), dim=-1)
        rows["state"].append(state.numpy())
        rows["action"].append(a.numpy().copy())
        rows["next_state"].append(nxt.numpy())
        rows["step"].append(np.full(episodes, t, dtype=np.int32))
    data = {k: np.concatenate(v) for k, v in rows.items()}
    n = len(data["step"])
    data["episode"] = np.tile(np.arange(episodes, dtype=np.int64), steps)
    data["friction"] = np.tile(friction.numpy().astype(np.float32), steps)
    data["policy"] = np.full(n, 2, dtype=np.int8)
    perm = np.random.default_rng(seed).permutation(n)  # shards need not be sorted
    out.mkdir(parents=True)
    for i, part in enumerate(np.array_split(perm, 2)):
        stream = io.BytesIO()
        np.savez_compressed(stream, **{k: v[part] for k, v in data.items()})  # type: ignore[arg-type]
        atomic_write_bytes(out / f"shard_{i:05d}.npz", stream.getvalue())
    meta = {
        "format": DATASET_FORMAT,
        "engine": "kinematic",
        "physics_hz": None,
        "policy_dt_s": DT_S,
        "vehicle": asdict(PARAMS),
        "state_fields": list(STATE_FIELDS),
        "transitions": n,
        "shards": 2,
    }
    write_json(out / "meta.json", meta)


@pytest.fixture(scope="module")
def kinematic_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dyn") / "data"
    write_kinematic_dataset(out)
    return out


SMALL = {
    ModelKind.MLP: DynamicsModelConfig(kind=ModelKind.MLP, hidden_size=64),
    ModelKind.GRU: DynamicsModelConfig(kind=ModelKind.GRU, hidden_size=48, num_layers=1, history_len=4),
    ModelKind.TRANSFORMER: DynamicsModelConfig(
        kind=ModelKind.TRANSFORMER, hidden_size=32, num_layers=1, history_len=4
    ),
    ModelKind.RESIDUAL: DynamicsModelConfig(kind=ModelKind.RESIDUAL, hidden_size=32),
}


def _random_history(b: int, h: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(b, h, 6, generator=g)
    states[..., :2] *= 20.0
    states[..., 3] = states[..., 3].abs() * 5.0
    return states, torch.rand(b, h, 2, generator=g) * 2 - 1, torch.rand(b, generator=g)


@pytest.mark.parametrize("kind", list(ModelKind))
def test_shapes_and_frame_invariance(kind: ModelKind) -> None:
    """Rotating and translating a whole history leaves the body-frame deltas unchanged, and the
    world-frame prediction moves with it."""
    cfg = replace(SMALL[kind], dt_s=DT_S, vehicle=PARAMS)
    model = make_model(cfg)
    h = cfg.history_steps
    states, actions, friction = _random_history(5, h)
    feats = history_features(states, actions, friction)
    assert feats.shape == (5, h, 10)
    model.fit_normalization(feats, torch.randn(5, 6))
    model.eval()
    angle, shift = 1.1, torch.tensor([37.0, -12.0])
    c, s = math.cos(angle), math.sin(angle)
    moved = states.clone()
    moved[..., 0] = c * states[..., 0] - s * states[..., 1] + shift[0]
    moved[..., 1] = s * states[..., 0] + c * states[..., 1] + shift[1]
    moved[..., 2] = states[..., 2] + angle
    with torch.no_grad():
        d0 = model(feats)
        d1 = model(history_features(moved, actions, friction))
        n0 = model.predict_next(states, actions, friction)
        n1 = model.predict_next(moved, actions, friction)
    assert d0.shape == (5, 6) and n0.shape == (5, 6)
    torch.testing.assert_close(d0, d1, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(n1[:, 0], c * n0[:, 0] - s * n0[:, 1] + shift[0], atol=1e-3, rtol=0)
    torch.testing.assert_close(n1[:, 3:], n0[:, 3:], atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="history must be"):
        model(torch.zeros(5, h + 1, 10))


def test_deltas_round_trip_and_history_padding(kinematic_data: Path) -> None:
    states, _, _ = _random_history(7, 2)
    nxt = states[:, 1]
    torch.testing.assert_close(apply_deltas(states[:, 0], body_deltas(states[:, 0], nxt))[:, :2], nxt[:, :2])
    data, _ = load_transitions(kinematic_data)
    h = build_histories(data, 3)
    first = np.flatnonzero(h.pos_in_segment == 0)
    # the first step of an episode: the history repeats the first state, with zero past actions
    torch.testing.assert_close(h.states[first, 0], h.states[first, 2])
    assert bool((h.actions[first, :2] == 0).all())
    # later steps chain: the previous history entry is the previous transition's state
    later = np.flatnonzero(h.pos_in_segment >= 2)
    torch.testing.assert_close(h.states[later, 1], h.states[later - 1, 2])
    torch.testing.assert_close(h.states[later, 2], h.next_state[later - 1])


@pytest.mark.parametrize("kind", list(ModelKind))
def test_fit_each_kind_on_kinematic_data(kind: ModelKind, kinematic_data: Path, tmp_path: Path) -> None:
    """Each kind learns the one-step map to < 5 cm on held-out episodes; metrics are written and
    the bicycle baseline is exact on its own data; the saved model predicts identically."""
    epochs = 2 if kind is ModelKind.RESIDUAL else 25
    res = fit_dynamics(kinematic_data, SMALL[kind], tmp_path, epochs=epochs, seed=1, batch_size=128, lr=3e-3)
    m, base = res.metrics["model"], res.metrics["kinematic_bicycle"]
    print(
        f"\n{kind.value}: model {m}\n  bicycle {base}\n  train {res.metrics['train']['train_seconds']:.2f}s"
    )
    assert m["pos_err_m"] < (1e-3 if kind is ModelKind.RESIDUAL else 0.05)
    assert base["pos_err_m"] < 1e-5 and base["rollout20_pos_err_m"] < 1e-4
    for horizon in (10, 20):
        assert m[f"rollout{horizon}_windows"] > 0 and math.isfinite(m[f"rollout{horizon}_pos_err_m"])
    saved = json.loads(res.metrics_path.read_text())
    assert saved["config"]["kind"] == kind.value and saved["train"]["heldout_episodes"] == 10
    loaded, metrics = load_dynamics_model(res.model_path)
    assert metrics["model"] == m
    states, actions, friction = _random_history(6, SMALL[kind].history_steps, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded.predict_next(states, actions, friction), res.model.predict_next(states, actions, friction)
        )


def test_clear_errors(tmp_path: Path, kinematic_data: Path) -> None:
    with pytest.raises(UserError, match="unknown dynamics model kind 'lstm'"):
        model_kind("lstm")
    with pytest.raises(UserError, match="Markov"):
        DynamicsModelConfig(kind=ModelKind.MLP, history_len=4)
    with pytest.raises(UserError, match="no such dataset folder"):
        fit_dynamics(tmp_path / "nope", DynamicsModelConfig(), tmp_path / "out", epochs=1)
    with pytest.raises(UserError, match=r"dt_s 0\.05 differs"):
        fit_dynamics(kinematic_data, DynamicsModelConfig(dt_s=0.05), tmp_path / "out", epochs=1)
    with pytest.raises(CheckpointError, match="no such dynamics model"):
        load_dynamics_model(tmp_path / "missing.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "something/1", "weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match=r"expected 'scenefactory\.dynamics/1'"):
        load_dynamics_model(foreign)
    with pytest.raises(RuntimeError, match="before fit_normalization"):
        make_model(DynamicsModelConfig(dt_s=DT_S, vehicle=PARAMS))(torch.zeros(1, 1, 10))
